"""Training on a tiny real model: weights move, the run directory is complete, Ctrl-C saves, resume continues."""
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
import yaml
from conftest import CHARS, make_recipe
from safetensors.torch import load_file

from grpokit.cli import main
from grpokit.run.checkpoints import COMPLETE_MARKER
from grpokit.run.rundir import RunDir

def test_two_steps_move_the_weights_and_write_the_run_dir(tmp_path, tiny_model_dir):
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS, {"name": "format", "weight": 0.5}])
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0

    for name in ("config.yaml", "metrics.jsonl", "samples.jsonl", "run.json"):
        assert (run / name).is_file(), name
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for key in ("reward", "reward_std", "rewards/length_spread/mean", "rewards/format/mean", "completions/mean_length",
                "completions/clipped_ratio", "frac_reward_zero_std", "learning_rate", "grpokit/trained_frac"):
        assert key in metrics[0], key
    for m in metrics:  # entropy comes from the policy pass, which a step without learning signal skips
        assert ("entropy" in m) == (m["grpokit/trained_frac"] > 0), m
    samples = [json.loads(l) for l in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and {"step", "prompt", "completion", "rewards"} <= set(samples[0])
    assert set(samples[0]["rewards"]) == {"length_spread", "format"}
    assert [c.name for c in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert Path(saved["data"]["train"]).is_absolute() and saved["output_dir"] == str(run.resolve())

    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run / "checkpoints" / "checkpoint-2" / "model.safetensors")
    moved = [k for k in before if k in after and not torch.equal(before[k], after[k])]
    assert moved, "no weight changed after two GRPO steps"


def test_extra_callbacks_see_every_step(tmp_path, tiny_model_dir):
    # What the benchmarks use to clock steps and stop on a time budget, instead of patching the trainer class.
    from transformers import TrainerCallback

    from grpokit.recipe.load import load_recipe
    from grpokit.training.grpo import train

    class Steps(TrainerCallback):
        seen: list[int] = []

        def on_step_end(self, args, state, control, **kw):
            self.seen.append(state.global_step)

    recipe = load_recipe(make_recipe(tmp_path, tiny_model_dir, [CHARS]), ["preflight.prompts=0"])
    clock = Steps()
    assert train(recipe, run_dir=tmp_path / "run", callbacks=[clock]).status == "completed"
    assert clock.seen == [1, 2]


def test_lora_run_saves_an_adapter(tmp_path, tiny_model_dir):
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], max_steps=1)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit",
                 "--set", "model.lora.r=4", "--set", "model.lora.target_modules=[q_proj,v_proj]"]) == 0
    ck = run / "checkpoints" / "checkpoint-1"
    assert (ck / "adapter_config.json").is_file() and (ck / COMPLETE_MARKER).is_file()


def test_existing_run_dir_is_not_clobbered(tmp_path, tiny_model_dir, capsys):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])
    run = tmp_path / "run"
    run.mkdir()
    (run / "keep.txt").write_text("x")
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 2
    err = capsys.readouterr().err
    # a folder of the user's: neither --resume nor --overwrite would work there, so neither is offered
    assert "pick a new --output-dir" in err and "--resume" not in err and "--overwrite" not in err, err
    assert (run / "keep.txt").is_file()


def test_resume_needs_a_run_dir(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert "not a grpokit run directory" in capsys.readouterr().err


def _wait_for(predicate, timeout: float, proc=None) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited early ({proc.returncode}): {proc.stdout.read()}")
        time.sleep(0.2)
    raise AssertionError("timed out")


STEPS = 40


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_a_checkpoint_and_resume_continues(tmp_path, tiny_model_dir, sig):
    # Enough steps that the signal lands mid-run: a tiny model's step takes milliseconds, and with 6 steps a loaded
    # machine let the run reach its last step before the signal was handled (a flaky 6 < 6).
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], max_steps=STEPS, save_steps=1000)
    run = tmp_path / "run"
    # The test reward lives in this module; the child imports it through a tiny launcher.
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import reward_fns\n"
        "from grpokit.cli import main; sys.exit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(launcher), "train", str(recipe), "--output-dir", str(run),
                             "--skip-audit"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    metrics = run / "metrics.jsonl"
    _wait_for(lambda: metrics.is_file() and len(metrics.read_text().splitlines()) >= 2, 120, proc)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    status = json.loads((run / "run.json").read_text())
    assert (status["status"], status["reason"]) == ("interrupted", sig.name)
    stopped_at = status["step"]
    assert 2 <= stopped_at < STEPS
    assert [c.name for c in RunDir(run).complete_checkpoints()] == [f"checkpoint-{stopped_at}"]

    # A half-written later checkpoint (no marker) must be ignored by resume.
    (run / "checkpoints" / "checkpoint-99").mkdir()
    proc = subprocess.run([sys.executable, str(launcher), "train", "--resume", str(run)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"resuming from checkpoint-{stopped_at}" in proc.stdout
    steps = [json.loads(l)["step"] for l in metrics.read_text().splitlines()]
    assert steps == list(range(1, STEPS + 1)), steps
    assert json.loads((run / "run.json").read_text())["status"] == "completed"


def test_report_to_tensorboard_writes_event_files(tmp_path, tiny_model_dir):
    pytest.importorskip("tensorboard")
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], max_steps=1)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit",
                 "--set", "trl.report_to=[tensorboard]"]) == 0
    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert events, sorted(p.relative_to(run) for p in run.rglob("*"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert "train/reward" in acc.Tags()["scalars"], acc.Tags()["scalars"]
    assert (run / "metrics.jsonl").is_file()  # the run directory stays the record


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _drive_logger(tmp_path: Path, out) -> None:
    """Three 2-second steps of a 10-step run through RunLogger, a logging step after each."""
    from types import SimpleNamespace

    from grpokit.training.callbacks import RunLogger
    from grpokit.training.tracking import Progress

    progress = Progress(out)
    progress.clock = clock = _Clock()
    logger = RunLogger(tmp_path, ["math_correctness", "format"], progress)
    args, state = SimpleNamespace(logging_steps=1), SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=True)
    progress.on_train_begin(args, state, None)
    for step in (1, 2, 3):
        clock.now += 2.0
        state.global_step = step
        progress.on_step_end(args, state, None)
        logger.on_log(args, state, None, logs={"reward": 0.5, "rewards/math_correctness/mean": 0.25,
                                               "rewards/format/mean": 0.5, "kl": 0.001,
                                               "completions/mean_length": 12.0})
    progress.on_train_end(args, state, None)


def test_progress_is_one_plain_line_per_logging_step_when_not_a_tty(tmp_path):
    import io
    import re

    from rich.console import Console

    buf = io.StringIO()
    _drive_logger(tmp_path, Console(file=buf, force_terminal=False, width=300))
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3, lines
    # step done/total, reward with each component, kl, length, s/step, then the ETA (7 steps x 2 s left).
    assert lines[2] == ("step 3/10 | reward 0.500 (math_correctness 0.250, format 0.500) | kl 0.0010 | len 12.0 | "
                        "2.0s/step | eta 0:00:14"), lines[2]
    assert all(re.search(r"\| eta \d+:\d\d:\d\d$", ln) for ln in lines)
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3


def test_progress_is_a_bar_with_eta_on_a_terminal(tmp_path):
    import io
    import re

    from rich.console import Console

    buf = io.StringIO()
    _drive_logger(tmp_path, Console(file=buf, force_terminal=True, width=160))
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", buf.getvalue())  # colours and cursor codes
    assert "3/10" in text and "2.0s/step | eta 0:00:14" in text, text
    assert "step 3/10 | reward 0.500" in text  # the metrics line still printed above the bar


def test_train_bf16_true_trains_in_autocast_on_the_cpu(tmp_path, tiny_model_dir, capsys):
    """`--set train.bf16=true` reaches TRL's bf16 on a CPU (autocast), says so, and the run completes."""
    from conftest import addition_recipe

    recipe = addition_recipe(tmp_path, tiny_model_dir, data={"eval_fraction": 0.0}, train={
        "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 4, "max_steps": 1,
        "save_steps": 1, "logging_steps": 1})
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit", "--set", "train.bf16=true"]) == 0
    assert ", bf16 autocast" in capsys.readouterr().out
    assert json.loads((run / "run.json").read_text())["status"] == "completed"
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run32"), "--skip-audit"]) == 0
    assert "bf16 autocast" not in capsys.readouterr().out  # auto: float32 on a CPU
