"""Slow tier: the real embedded SmolLM2-135M — a couple of GRPO steps, interrupt + resume, the demo end to end.

Each test shrinks the demo recipe (fewer completions, shorter ones) so the
tier stays within a few minutes on a 2-core CPU; the full-size demo is run
by hand (`grpokit demo`) and its figures are in the README.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpokit.cli import main
from grpokit.evaluation import pct
from grpokit.run.rundir import RunDir

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recipes" / "smollm2-arithmetic.yaml"
SMALL = ["--set", "train.num_generations=4", "--set", "train.per_device_train_batch_size=4",
         "--set", "train.max_completion_length=24", "--set", "train.save_steps=1"]

def test_two_steps_on_the_embedded_model(tmp_path, embedded_model_dir):
    run = tmp_path / "run"
    code = main(["train", str(DEMO), "--output-dir", str(run), *SMALL, "--set", "train.max_steps=2",
                 "--set", "rewards=[{name: math_correctness}, {name: format, weight: 0.5}, {name: \"reward_fns:long_length_spread\", role: shaping}]"])
    assert code == 0
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2]  # 0: the held-out probe of the base model
    assert [m["step"] for m in metrics if "probe/accuracy" in m] == [0, 1, 2] and metrics[0]["probe/rows"] == 48
    metrics = metrics[1:]
    assert all(isinstance(m["reward"], float) and m["completions/mean_length"] > 0 for m in metrics)
    before = load_file(embedded_model_dir / "model.safetensors")
    after = load_file(run / "checkpoints" / "checkpoint-2" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)


def test_interrupted_embedded_run_resumes(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "grpokit.cli", "train", str(DEMO), "--output-dir", str(run), "--skip-audit",
           *SMALL, "--set", "train.max_steps=3", "--set", "train.save_steps=100"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    metrics = run / "metrics.jsonl"
    deadline = time.time() + 600
    while not (metrics.is_file() and metrics.read_text().strip()):
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() is not None else "timeout"
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "Traceback" not in out, out
    (ck,) = RunDir(run).complete_checkpoints()
    stopped = int(ck.name.split("-")[1])
    assert stopped < 3
    res = subprocess.run([sys.executable, "-m", "grpokit.cli", "train", "--resume", str(run)],
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    steps = [json.loads(l)["step"] for l in metrics.read_text().splitlines()]
    assert steps == [0, 1, 2, 3]  # 0: the held-out probe of the base model, once (the resume keeps it)
    assert json.loads((run / "run.json").read_text())["status"] == "completed"


def test_demo_end_to_end_small(tmp_path, capsys):
    out = tmp_path / "demo"
    code = main(["demo", "--output-dir", str(out), *SMALL, "--set", "train.max_steps=1",
                 "--set", "data.eval_max_rows=8"])
    assert code == 0
    result = json.loads((out / "demo.json").read_text())
    printed = capsys.readouterr().out
    assert "held-out evaluation" in printed and "format rate" in printed
    for side in ("before", "after"):
        r = result[side]
        assert r["rows"] == 8 and r["mean_length"] > 0
        # 8 rows: every rate is a count of them, and the table prints what demo.json records
        for rate in ("accuracy", "format_rate"):
            assert round(r[rate] * 8, 6) == int(round(r[rate] * 8)), (side, rate, r[rate])
            assert pct(r[rate]) in printed, (side, rate)
    steps = {e["step"]: e for e in json.loads((out / "eval" / "results.json").read_text())["checkpoints"]}
    assert set(steps) == {0, 1} and steps[0]["heldout"]["accuracy"] == result["before"]["accuracy"]
