"""experiments/: the research scripts run end to end on a tiny real model (the commands, the run folders, the
evaluation and the paired test are the real ones; only the model is small and the budgets a step or two)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CURVE = REPO / "experiments" / "budget_curve.py"


def _curve(out: Path, model: Path) -> subprocess.CompletedProcess:
    overrides = [f"model.name={model}", "train.max_completion_length=8", "health.probe_rows=0", "preflight.prompts=0",
                 "train.num_generations=2", "train.per_device_train_batch_size=4", "train.save_steps=1"]
    return subprocess.run([sys.executable, str(CURVE), "--out", str(out), "--completions", "4", "--seeds", "0",
                           "--sft-steps", "1", "--eval-rows", "3", *[a for o in overrides for a in ("--set", o)]],
                          cwd=REPO, capture_output=True, text=True, timeout=900)


def test_the_budget_curve_runs_every_stage_pairs_the_arms_and_resumes(tmp_path, tiny_model_dir):
    out = tmp_path / "curve"
    res = _curve(out, tiny_model_dir)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    curve = json.loads((out / "curve.json").read_text())
    assert set(curve["models"]) == {"sft", "grpo-4-s0", "rft-4-s0"}
    for name, m in curve["models"].items():
        assert m["rows"] == 3 and len(m["scores"]) == 3 and (out / name / "run.json").is_file()
    assert curve["models"]["grpo-4-s0"]["completions"] == 4  # 1 step of 2 prompts x 2 completions
    assert json.loads((out / "rft-4-s0" / "run.json").read_text())["status"] == "completed"
    diff = curve["differences"]["4-s0"]
    assert set(diff) == {"grpo-sft", "rft-sft", "grpo-rft"} and "sign test" in diff["grpo-rft"]["said"]
    assert "grpo minus rft:" in res.stdout
    # A second call finds every record and runs nothing again.
    again = _curve(out, tiny_model_dir)
    assert again.returncode == 0 and "SFT of" not in again.stdout and "grpo minus rft:" in again.stdout
    # ... and a curve of other settings in the same folder is refused, naming the folder.
    other = subprocess.run([sys.executable, str(CURVE), "--out", str(out), "--eval-rows", "5"], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert other.returncode != 0 and "give another --out" in other.stderr


def test_a_stage_that_fails_stops_the_curve_in_a_line_not_a_traceback(tmp_path, tiny_model_dir):
    # A recipe value every stage refuses (train.num_generations must divide the batch): named by the recipe check,
    # then one line on how to go on.
    res = subprocess.run([sys.executable, str(CURVE), "--out", str(tmp_path / "c"), "--set", f"model.name={tiny_model_dir}",
                          "--set", "train.num_generations=3"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "num_generations" in res.stderr
    # ... and a command that fails once the curve runs: the SFT stage on a recipe cut mid-line.
    cut = tmp_path / "cut.yaml"
    cut.write_text("model:\n  name: [default\n")
    res = subprocess.run([sys.executable, str(CURVE), "--out", str(tmp_path / "d"), "--sft-recipe", str(cut),
                          "--set", f"model.name={tiny_model_dir}"], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "run the same command again" in res.stderr
