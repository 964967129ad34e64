"""Crash safety on tiny real runs: half-written logs, two writers, a kill during a save, failures recorded
with error + fix (disk full among them), refused runs that leave nothing behind, damaged checkpoints.

Failures are simulated at their boundary (the checkpoint save, the free-space query, a training step);
everything else is the real TRL loop on a tiny model.
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import make_recipe

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.run.files import read_jsonl
from grpokit.run.rundir import RunDir

SRC = Path(__file__).resolve().parents[1] / "src"


FORMAT = [{"name": "format"}]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> Path:
    """A finished 2-step run (checkpoints 1 and 2); tests work on copies."""
    tmp = tmp_path_factory.mktemp("reliability")
    run = tmp / "run"
    assert main(["train", str(make_recipe(tmp, tiny_model_dir, FORMAT)), "--output-dir", str(run), "--skip-audit"]) == 0
    return run


def _copy(trained: Path, tmp_path: Path, max_steps: int | None = None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    if max_steps is not None:
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        cfg["train"]["max_steps"] = max_steps
        (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run


def _steps(path: Path) -> list[int]:
    return [r["step"] for r in read_jsonl(path, note=pytest.fail)]


# ---------------------------------------------------------------- half-written logs
def test_doctor_report_eval_and_resume_on_logs_ending_in_half_a_line(trained, tmp_path, capsys):
    run = _copy(trained, tmp_path, max_steps=3)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 3, "reward": 0.')  # the crash came while step 3 was logged
    with (run / "samples.jsonl").open("a") as f:
        f.write('{"step": 3, "prompt": "What is')
    for argv in (["doctor", str(run)], ["report", str(run)],
                 ["eval", str(run), "--checkpoints", "last", "--max-rows", "2", "--max-new-tokens", "4"]):
        assert main(argv) == 0, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.count("note:") <= 2, (argv, err)
        if argv[0] != "eval":  # eval reads no logs; doctor and report say what they skipped, once per file
            assert err.count("metrics.jsonl") == 1 and err.count("samples.jsonl") == 1, (argv, err)

    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr()
    assert "resuming from checkpoint-2" in out.out and "partial or corrupt" in out.err
    assert _steps(run / "metrics.jsonl") == [1, 2, 3]
    assert set(_steps(run / "samples.jsonl")) == {1, 2, 3}
    assert RunDir(run).read_status()["status"] == "completed"


# ---------------------------------------------------------------- one writer
def test_a_second_writer_is_refused_and_the_live_run_is_untouched(trained, tmp_path, tiny_model_dir, capsys):
    run = _copy(trained, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom grpokit.run import RunDir\n"
                               "held = RunDir(sys.argv[1]).lock().acquire(); print('locked', flush=True); "
                               "time.sleep(120)", str(run)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(SRC)})
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = sorted(p.relative_to(run).as_posix() for p in run.rglob("*"))
        for argv in (["train", "--resume", str(run)],                                        # two resumes
                     ["train", str(make_recipe(tmp_path, tiny_model_dir, FORMAT)), "--output-dir", str(run),  # --overwrite
                      "--overwrite", "--skip-audit"]):
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert "run directory is locked" in err and f"PID {holder.pid} on host" in err, err
        assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == before
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- kill during a save
LAUNCHER = """
import pathlib, sys, time
import trl
save = trl.GRPOTrainer._save_checkpoint
def slow_save(self, model, trial):
    if self.state.global_step == 2:  # half a checkpoint on disk, then the process is killed
        ck = pathlib.Path(self.args.output_dir) / "checkpoint-2"
        ck.mkdir(parents=True, exist_ok=True)
        (ck / "model.safetensors").write_bytes(b"\\0" * 4096)
        pathlib.Path(sys.argv[1]).write_text("saving")
        time.sleep(300)
    return save(self, model, trial)
trl.GRPOTrainer._save_checkpoint = slow_save
from grpokit.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_kill_during_save_then_resume_uses_the_last_complete_checkpoint(tmp_path, tiny_model_dir, capsys):
    run, sentinel = tmp_path / "run", tmp_path / "saving"
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER)
    proc = subprocess.Popen([sys.executable, str(launcher), str(sentinel), "train", str(make_recipe(tmp_path, tiny_model_dir, FORMAT)),
                             "--output-dir", str(run), "--skip-audit"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(SRC)})
    end = time.time() + 240
    while not sentinel.exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.time() < end, "no save started"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1"]
    assert (run / "checkpoints" / "checkpoint-2").is_dir()  # the half-written one

    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "stale lock" in out and "resuming from checkpoint-1" in out, out
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]
    assert _steps(run / "metrics.jsonl") == [1, 2]
    assert RunDir(run).read_status()["status"] == "completed"


# ---------------------------------------------------------------- every failure recorded
def _save_hits_full_disk(monkeypatch):
    import trl

    def save(self, model, trial):
        if self.state.global_step == 2:
            ck = Path(self.args.output_dir) / "checkpoint-2"
            ck.mkdir(parents=True, exist_ok=True)
            (ck / "model.safetensors.tmp").write_bytes(b"\0" * 4096)  # the orphan a full disk leaves
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, model, trial)

    original = trl.GRPOTrainer._save_checkpoint
    monkeypatch.setattr(trl.GRPOTrainer, "_save_checkpoint", save)


def _space_runs_out(monkeypatch):
    """Room for every checkpoint when the run starts (grpokit.run.disk_problem), none left once it trains."""
    calls = []
    monkeypatch.setattr(RunDir, "free_bytes", lambda self: calls.append(1) or (10**13 if len(calls) == 1 else 10_000))


def _step_two_diverges(monkeypatch):
    import trl

    def step(self, *args, **kwargs):
        if self.state.global_step >= 1:
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        return original(self, *args, **kwargs)

    original = trl.GRPOTrainer.training_step
    monkeypatch.setattr(trl.GRPOTrainer, "training_step", step)


FAILURE_CASES = [  # (simulate, error class in run.json, words on the terminal, last complete checkpoint)
    (_save_hits_full_disk, "OSError", ["no space left on device at", "GB", "--output-dir", "checkpoint-1"], 1),
    (_space_runs_out, "OSError", ["no space left on device at", "--resume", "only 0.0 GB free"], None),
    (_step_two_diverges, "RuntimeError", ["probability tensor", "learning_rate", "--resume"], 1),
]


@pytest.mark.parametrize("simulate,cls,words,last", FAILURE_CASES)
def test_a_failure_in_training_is_recorded_with_error_and_fix(tmp_path, tiny_model_dir, monkeypatch, capsys,
                                                             simulate, cls, words, last):
    simulate(monkeypatch)
    run = tmp_path / "run"
    assert main(["train", str(make_recipe(tmp_path, tiny_model_dir, FORMAT)), "--output-dir", str(run), "--skip-audit"]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text and "error:" in out.err and "fix:" in out.err, text
    for w in words:
        assert w in text, (w, text)
    status = RunDir(run).read_status()
    assert status["status"] == "failed" and status["error"]["class"] == cls and status["error"]["message"]
    assert (status["last_checkpoint"] or "").endswith(f"checkpoint-{last}" if last else "")
    assert [p.name for p in (run / "checkpoints").glob("checkpoint-*")] == ([f"checkpoint-{last}"] if last else [])
    assert RunDir(run).lock(note=pytest.fail).acquire()  # released: --resume can take it without a stale note


# ---------------------------------------------------------------- refused before the start: nothing left behind
@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_disk_that_cannot_hold_the_checkpoints_is_refused_before_the_folder_exists(tmp_path, tiny_model_dir,
                                                                                    monkeypatch, capsys, command):
    monkeypatch.setattr(RunDir, "free_bytes", lambda self: 10_000)
    run = tmp_path / "run"
    assert main([command, str(make_recipe(tmp_path, tiny_model_dir, FORMAT, save_total_limit=1)), "--output-dir", str(run)]
                + (["--skip-audit"] if command == "train" else [])) == 2
    err = capsys.readouterr().err
    assert "keeps up to 2 checkpoint(s)" in err and "it would stop with a full disk" in err, err  # limit 1 + rotation
    assert "train.save_total_limit (now 1)" in err and "train.save_steps (now 1)" in err and "Traceback" not in err
    assert not run.exists()


@pytest.mark.parametrize("max_steps,save_steps,limit,peak", [
    (30, 10, 4, 3),      # the demo: three saves, fewer than the limit
    (100, 10, 2, 3),     # rotation: the limit, and the one written before the oldest goes
    (7, 3, None, 3),     # every save and the final one (3, 6, 7)
    (-1, 10, None, None),  # epochs without a limit: not known in advance
    (-1, 10, 2, 3),
])
def test_checkpoints_at_peak(max_steps, save_steps, limit, peak):
    from types import SimpleNamespace

    from grpokit.run.safety import checkpoints_at_peak

    assert checkpoints_at_peak(SimpleNamespace(max_steps=max_steps, save_steps=save_steps,
                                               save_total_limit=limit)) == peak

@pytest.mark.parametrize("case, where, what", [
    ("prompts too long", "train.max_prompt_length", "prompts are longer than 1 tokens"),
    ("no such model folder", "model.name", "nope"),
])
def test_a_run_refused_before_it_starts_leaves_no_folder(tmp_path, tiny_model_dir, case, where, what):
    from grpokit.recipe.load import load_recipe
    from grpokit.training.grpo import train

    recipe = load_recipe(make_recipe(tmp_path, tiny_model_dir, FORMAT), ["train.max_prompt_length=1"] if case == "prompts too long"
                         else [])
    if case == "no such model folder":  # recipe validation refuses it first; train must hold without that check too
        recipe = recipe.model_copy(update={"model": recipe.model.model_copy(update={"name": str(tmp_path / "nope")})})
    run = tmp_path / "run"
    with pytest.raises(GrpokitError) as e:
        train(recipe, run_dir=run)
    problem = e.value.problems[0]
    assert problem.where.startswith(where) and what in str(problem) and problem.fix, str(problem)
    assert not run.exists()


def test_overwrite_refused_before_it_starts_keeps_the_old_run(trained, tmp_path, tiny_model_dir):
    run = _copy(trained, tmp_path)
    argv = ["train", str(make_recipe(tmp_path, tiny_model_dir, FORMAT)), "--output-dir", str(run), "--overwrite", "--skip-audit",
            "--set", "train.max_prompt_length=1"]
    assert main(argv) == 2
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]


# ---------------------------------------------------------------- damaged checkpoints
def _nan_weights(ck: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(ck / "model.safetensors")
    name = next(k for k in tensors if k.endswith("up_proj.weight"))
    tensors[name][0, 0] = float("nan")
    save_file(tensors, ck / "model.safetensors", metadata={"format": "pt"})


DAMAGE = {
    "missing config.json": lambda ck: (ck / "config.json").unlink(),
    "truncated weights": lambda ck: (ck / "model.safetensors").write_bytes((ck / "model.safetensors").read_bytes()[:5000]),
    "corrupt header": lambda ck: (ck / "model.safetensors").write_bytes(b"\xff" * 8 + (ck / "model.safetensors").read_bytes()[8:]),
    "NaN weights": _nan_weights,
}


@pytest.mark.parametrize("how,words", [("missing config.json", "config.json is missing"),
                                       ("truncated weights", "model.safetensors is unreadable"),
                                       ("corrupt header", "model.safetensors is unreadable"),
                                       ("NaN weights", "NaN or inf")])
def test_eval_and_export_refuse_a_damaged_checkpoint(trained, tmp_path, capsys, how, words):
    run = _copy(trained, tmp_path)
    DAMAGE[how](run / "checkpoints" / "checkpoint-2")
    for argv in (["eval", str(run), "--checkpoints", "2", "--max-rows", "2", "--max-new-tokens", "4"],
                 ["export", str(run), "--checkpoint", "2", "--to", "hf"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "Traceback" not in err and "damaged" in err and words in err and "fix:" in err, (argv, err)


def test_export_checks_finite_weights_and_the_tokenizer(trained, tmp_path):
    from grpokit.export.export import export

    result = export(_copy(trained, tmp_path), "2", "hf", check_prompts=1, smoke=False, log=lambda _: None)
    checks = {c.name: c for c in result.checks}
    assert checks["all weights finite"].ok and checks["tokenizer loads"].ok, checks


def test_resume_falls_back_past_a_damaged_checkpoint(trained, tmp_path, capsys):
    run = _copy(trained, tmp_path)
    DAMAGE["truncated weights"](run / "checkpoints" / "checkpoint-2")
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "checkpoint-2 is damaged" in out and "resuming from checkpoint-1" in out, out
    assert RunDir(run).resume_checkpoint(note=pytest.fail).name == "checkpoint-2"  # saved again, whole
    assert _steps(run / "metrics.jsonl") == [1, 2]


# ---------------------------------------------------------------- resume states of another kind
def _foreign_states():
    import json as _json
    import zipfile

    import torch

    def callbacks(ck):
        state = _json.loads((ck / "trainer_state.json").read_text())
        state["stateful_callbacks"] = 5
        (ck / "trainer_state.json").write_text(_json.dumps(state))

    return [
        ("stateful_callbacks: 5", callbacks, "trainer_state.json's stateful_callbacks"),
        ("an empty zip as rng_state.pth", lambda ck: zipfile.ZipFile(ck / "rng_state.pth", "w").close(),
         "rng_state.pth is not a state torch saved"),
        ("a pickled module as rng_state.pth", lambda ck: torch.save(torch.nn.Linear(2, 2), ck / "rng_state.pth"),
         "rng_state.pth is not a state torch saved"),
        ("a list as scheduler.pt", lambda ck: torch.save([1, 2, 3], ck / "scheduler.pt"),
         "scheduler.pt holds a list"),
        ("another dict as optimizer.pt", lambda ck: torch.save({"a": 1}, ck / "optimizer.pt"),
         "optimizer.pt has no param_groups"),
    ]


@pytest.mark.parametrize("case", range(5), ids=[c[0] for c in _foreign_states()])
def test_a_resume_state_of_another_kind_is_named_before_resuming(trained, tmp_path, case):
    """Such a state failed the resume at its first step (a TypeError, or torch's weights_only text, which tells a
    user to turn a safety check off), marked a completed run failed, and its printed fix failed the same way."""
    from grpokit.run import checkpoint_damage, torch_state_damage

    run = _copy(trained, tmp_path)
    ck = run / "checkpoints" / "checkpoint-2"
    assert checkpoint_damage(ck, for_resume=True) is None and torch_state_damage(ck) is None
    _, damage, words = _foreign_states()[case]
    damage(ck)
    why = checkpoint_damage(ck, for_resume=True)
    assert why is not None and words in why and "weights_only" not in why, why
    assert checkpoint_damage(ck) is None  # eval and export read the weights only: they still use it


def test_a_resume_passes_over_a_foreign_optimizer_state_and_completes(trained, tmp_path, capsys):
    import torch

    run = _copy(trained, tmp_path, max_steps=3)
    torch.save({"a": 1}, run / "checkpoints" / "checkpoint-2" / "optimizer.pt")
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr()
    assert "resuming from checkpoint-1" in out.out and "Traceback" not in out.err
    assert "checkpoint-2 is damaged (optimizer.pt has no param_groups" in out.out + out.err
    assert RunDir(run).read_status()["status"] == "completed"
    assert list((run / "set-aside").iterdir())  # the passed-over checkpoint is kept, set aside, never deleted


# ---------------------------------------------------------------- state files nested past the JSON parser
DEEP = "[" * 100000  # json.loads raises RecursionError on it: a traceback in every command that read one


@pytest.mark.parametrize("rel, argv", [
    ("eval/best.json", ["export", "{run}", "--out", "{tmp}/x"]),
    ("eval/best.json", ["eval", "{run}", "--checkpoints", "last", "--max-rows", "2", "--max-new-tokens", "2"]),
    ("run.json", ["doctor", "{run}"]),
    ("metrics.jsonl", ["report", "{run}"]),
    ("checkpoints/checkpoint-2/trainer_state.json", ["train", "--resume", "{run}"]),
])
def test_a_state_file_nested_past_the_parser_is_read_as_not_json(trained, tmp_path, capsys, rel, argv):
    run = _copy(trained, tmp_path, max_steps=3)
    path = run / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((path.read_text() if rel.endswith(".jsonl") else "") + DEEP + "\n")
    assert main([a.format(run=run, tmp=tmp_path) for a in argv]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err, err


def test_the_state_readers_take_a_deep_file_as_not_json(tmp_path, capsys):
    from grpokit.run.files import parse_json, read_json

    (tmp_path / "best.json").write_text(DEEP)
    assert read_json(tmp_path / "best.json") is None
    assert f"{tmp_path / 'best.json'}: not valid JSON (nested deeper" in capsys.readouterr().err
    (tmp_path / "m.jsonl").write_text('{"step": 1}\n' + DEEP + "\n")
    assert read_jsonl(tmp_path / "m.jsonl") == [{"step": 1}]
    with pytest.raises(ValueError):
        parse_json(DEEP)


# ---------------------------------------------------------------- a model folder loaded whole, or refused by name
def _config(**changes):
    def change(ck: Path) -> None:
        import json as _json

        cfg = _json.loads((ck / "config.json").read_text())
        (ck / "config.json").write_text(_json.dumps({**cfg, **changes}))
    return change


def _drop_tensor(ck: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(ck / "model.safetensors")
    tensors.pop(next(k for k in tensors if "mlp.up_proj" in k))
    save_file(tensors, ck / "model.safetensors", metadata={"format": "pt"})


WHOLE = {  # what transformers loaded with random weights in place (exit 0), or a traceback
    "a truncated model.safetensors": (DAMAGE["truncated weights"], "model.safetensors", "cut short"),
    "a config with other sizes": (_config(intermediate_size=256), "config.json", "other sizes"),
    "a config naming more layers": (_config(num_hidden_layers=4), "config.json", "weights lack"),
    "another model type": (_config(model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=16),
                           "config.json", "weights lack"),
    "a missing tensor": (_drop_tensor, "config.json", "weights lack"),
    "NaN weights": (_nan_weights, "checkpoint-2", "NaN or inf"),
}


@pytest.mark.parametrize("how", list(WHOLE))
def test_a_model_folder_is_loaded_whole_or_refused_naming_the_file(trained, tmp_path, how):
    from grpokit.models import load_model

    run = _copy(trained, tmp_path)
    ck = run / "checkpoints" / "checkpoint-2"
    load_model(str(ck))  # whole: loads
    damage, file, words = WHOLE[how]
    damage(ck)
    with pytest.raises(GrpokitError) as e:
        load_model(str(ck))
    (problem,) = e.value.problems
    assert problem.where.endswith(file) and words in problem.message and problem.fix, problem


@pytest.mark.parametrize("how", ["a config naming more layers", "NaN weights"])
def test_init_from_refuses_a_checkpoint_it_cannot_load_whole(trained, tmp_path, tiny_model_dir, capsys, how):
    """It trained with exit 0 on random weights (or on NaN, to fail later with "lower train.learning_rate")."""
    run = _copy(trained, tmp_path)
    WHOLE[how][0](run / "checkpoints" / "checkpoint-2")
    recipe = make_recipe(tmp_path, tiny_model_dir, FORMAT)
    argv = ["train", str(recipe), "--init-from", str(run), "--output-dir", str(tmp_path / "new"), "--skip-audit"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and WHOLE[how][2] in err and "learning_rate" not in err, err
