"""Issue 44 items 3-6: `recipe check` refuses what `train` refuses (one set of checks), user code on a short
leash, damaged run files with a fix that works, a failed save recorded with its real cause, tool runs' best.json.

User code that ends the process is run in a fresh `grpokit` process (a regression must not end pytest). Every
refusal of `recipe check` is checked against `train` of the same recipe: both exit 2, and train loads no model.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import grpokit_run, make_recipe, write_jsonl

import grpokit
from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.run import RunDir


@pytest.fixture
def loads(monkeypatch):
    import grpokit.models as models

    seen, real = [], models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **k: seen.append(a) or real(*a, **k))
    return seen


# ---------------------------------------------------------------- recipe check refuses what train refuses
SAME_REFUSAL = [  # (--set values, words of the refusal)
    (["train.max_steps=0"], "must be at least 1, or -1 to train for num_train_epochs"),
    (["train.torch_threads=100000"], "train.torch_threads"),
    (["train.seed=-1"], "train.seed"),
    (["model.lora.target_modules=[q_projj, v_proj]"], "'q_projj' names no module of"),
    (["train.max_prompt_length=3"], "fewer than one generation round takes"),
    # transformers refuses a penalty of 0 at step 0 (and an int, which grpokit reads as a float: tests/test_decode.py)
    (["trl.repetition_penalty=0"], "repetition_penalty must be > 0 (got 0; transformers refuses it)"),
    (["trl.generation_kwargs={top_k: 2.5}"], "top_k must be a whole number"),
]


@pytest.mark.parametrize("sets,words", SAME_REFUSAL, ids=[s[0][0] for s in SAME_REFUSAL])
def test_recipe_check_and_train_refuse_the_same_recipe(tmp_path, capsys, loads, tiny_model_dir, monkeypatch, sets,
                                                       words):
    monkeypatch.chdir(tmp_path)
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])
    argv = [x for s in sets for x in ("--set", s)]
    assert main(["recipe", "check", str(recipe), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "fix:" in err and "Traceback" not in err, err
    assert main(["train", str(recipe), *argv, "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err, err
    assert loads == [] and not (tmp_path / "run").exists()


def test_recipe_check_says_how_many_prompts_survive(tmp_path, capsys, tiny_model_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])
    rows = [json.loads(x) for x in Path(yaml.safe_load(recipe.read_text())["data"]["train"]).read_text().splitlines()]
    rows[0]["question"] = "a very long question " * 40  # one prompt past the limit, the rest fit
    write_jsonl(Path(yaml.safe_load(recipe.read_text())["data"]["train"]), rows)
    assert main(["recipe", "check", str(recipe), "--set", "train.max_prompt_length=120", "--set",
                 "data.eval_fraction=0"]) == 0
    err = capsys.readouterr().err
    assert "train.max_prompt_length: 1 of 24 training prompts are longer than 120 tokens and are dropped; 23 remain" \
        in err, err


@pytest.mark.parametrize("where", ["the data's folder", "a git work tree", "the root"])
def test_recipe_check_refuses_an_output_dir_train_refuses(tmp_path, capsys, tiny_model_dir, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    out = {"the data's folder": tmp_path, "a git work tree": repo, "the root": Path("/")}[where]
    assert main(["recipe", "check", str(recipe), "--set", f"output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert "output_dir" in err and "cannot be a run directory" in err and "fix: pick a new --output-dir" in err, err


# ---------------------------------------------------------------- user code on a short leash
REWARDS = '''
import os, sys

def moves(completions, **kw):
    os.makedirs("elsewhere", exist_ok=True)
    os.chdir("elsewhere")
    return [1.0] * len(completions)

def talks(completions, **kw):
    print('{"reward": 99}')
    return [0.5] * len(completions)

def ends(completions, **kw):
    os._exit(0)

def huge(completions, **kw):
    return [1e308] * len(completions)

def stubborn(completions, **kw):
    import time
    while True:
        try:
            time.sleep(10)
        except BaseException:
            pass

def writes_fd1(completions, **kw):
    os.write(1, b'{"reward": 99}\\n')
    return [0.5] * len(completions)

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message")

    def __repr__(self):
        raise RuntimeError("no repr")

def unprintable(completions, **kw):
    raise Unprintable()

def exits_unprintably(completions, **kw):
    sys.exit(Unprintable())
'''


def _score(tmp_path: Path, fn: str, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "mine.py").write_text(REWARDS)
    write_jsonl(tmp_path / "rows.jsonl", [{"completion": "Final answer: 2", "answer": "2"}] * 2)
    env = {**os.environ, "PYTHONPATH": str(Path(grpokit.__file__).parents[1])}
    return subprocess.run([sys.executable, "-m", "grpokit", "rewards", "score", "--reward", f"mine.py:{fn}",
                           "--input", "rows.jsonl", *extra], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=120)


def test_a_rewards_chdir_is_undone_and_its_prints_stay_off_stdout(tmp_path):
    done = _score(tmp_path, "moves")
    assert done.returncode == 0, done.stderr
    done = _score(tmp_path, "talks")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and [r["reward"] for r in rows] == [0.5, 0.5], done.stdout  # no injected row
    assert '{"reward": 99}' in done.stderr


def test_a_write_to_file_descriptor_1_stays_off_stdout(tmp_path):
    done = _score(tmp_path, "writes_fd1")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and [r["reward"] for r in rows] == [0.5, 0.5], done.stdout  # os.write(1) is not a row
    assert done.stderr.count('{"reward": 99}') == 2


@pytest.mark.parametrize("fn,words", [("unprintable", "Unprintable: <a Unprintable whose str() fails>"),
                                      ("exits_unprintably", "called sys.exit(<a Unprintable whose repr() fails>)")])
def test_an_exception_whose_message_raises_is_still_said(tmp_path, fn, words):
    done = _score(tmp_path, fn)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(words in json.loads(line)["error"] for line in done.stdout.splitlines()), done.stdout
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({"model": {"name": "default"}, "data": {"train": "rows.jsonl"},
                                                    "rewards": [{"path": "mine.py", "function": fn}]}))
    write_jsonl(tmp_path / "rows.jsonl", [{"question": "1 + 1 = ?", "answer": "2"}] * 2)
    env = {**os.environ, "PYTHONPATH": str(Path(grpokit.__file__).parents[1])}
    check = subprocess.run([sys.executable, "-m", "grpokit", "recipe", "check", "r.yaml"], cwd=tmp_path,
                           capture_output=True, text=True, env=env, timeout=120)
    assert check.returncode == 2 and words.split(" <")[0] in check.stderr and "Traceback" not in check.stderr, \
        check.stderr


def test_a_chdir_in_a_reward_does_not_move_the_folder_training_clears(tmp_path, monkeypatch):
    from grpokit.rewards.guard import guarded_call

    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    guarded_call(test_a_chdir_in_a_reward_does_not_move_the_folder_training_clears,
                 lambda: os.chdir(tmp_path / "elsewhere") or [1.0], 1, None)
    assert Path.cwd() == tmp_path


def test_a_reward_that_ends_the_process_is_an_error_naming_it(tmp_path):
    done = _score(tmp_path, "ends")
    assert done.returncode == 1 and "mine.py:ends" in done.stderr, (done.returncode, done.stderr)
    assert all("called os._exit(0)" in json.loads(line)["error"] for line in done.stdout.splitlines()), done.stdout
    assert "Traceback" not in done.stderr


def test_a_reward_that_swallows_its_deadline_ends_the_command_naming_it(tmp_path):
    from grpokit.rewards.guard import HARD_GRACE_S

    done = _score(tmp_path, "stubborn", "--timeout", "1")
    assert done.returncode == 2 and "stubborn" in done.stderr and "caught every interrupt" in done.stderr, done.stderr
    assert "fix: " in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    assert HARD_GRACE_S <= 10  # the command ends within seconds of the deadline, not never


def test_a_score_too_large_for_its_weight_is_an_error():
    from grpokit.rewards.guard import OwnRewardCallError, scores_of

    assert scores_of(len, [1e308], [1e308], ["x"], weight=0.0) == [1e308]  # weight 0: it never reaches the sum
    with pytest.raises(OwnRewardCallError) as e:
        scores_of(len, [1e308], [1e308], ["x"], weight=2.0)
    assert "at weight 2" in str(e.value) and "overflow" in str(e.value)


# ---------------------------------------------------------------- damaged run files, and a fix that works
def _fake_run(tmp_path: Path, tiny_model_dir: Path, steps=(1, 2)) -> Path:
    run = grpokit_run(tmp_path / "run")
    for s in steps:
        ck = run / "checkpoints" / f"checkpoint-{s}"
        shutil.copytree(tiny_model_dir, ck)
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": s, "max_steps": 2, "train_batch_size": 4,
                                                           "log_history": []}))
        (ck / "COMPLETE").write_text("{}")
    return run


def test_a_best_json_without_a_step_is_passed_over_with_a_fix_that_works(tmp_path, tiny_model_dir, capsys):
    run = _fake_run(tmp_path, tiny_model_dir)
    (run / "eval").mkdir()
    (run / "eval" / "best.json").write_text(json.dumps({"accuracy": 1.0, "step": "two"}))
    with pytest.raises(GrpokitError) as e:
        RunDir(run).resolve_checkpoint("best")
    assert "no best checkpoint recorded yet" in str(e.value) and "grpokit eval" in str(e.value)
    assert "ignored" in capsys.readouterr().err
    assert RunDir(run).resolve_checkpoint("auto").name == "checkpoint-2"  # auto: the last one, not a traceback


@pytest.mark.parametrize("text", ['{"accuracy": 1.0, "step": "two"}', "[2]", '{"step": 2', "\x00\xff"])
def test_init_from_a_run_with_a_damaged_best_json_says_it_takes_the_last(tmp_path, tiny_model_dir, capsys, text):
    from grpokit.training.lineage import resolve_init_from

    run = _fake_run(tmp_path, tiny_model_dir)
    (run / "config.yaml").write_text("{}")  # a run directory (only the checkpoints are read here)
    (run / "eval").mkdir()
    (run / "eval" / "best.json").write_text(text, encoding="latin-1")
    path, lineage = resolve_init_from(str(run))
    assert Path(path).name == "checkpoint-2" and lineage["chosen"] == "last"
    err = capsys.readouterr().err
    assert err.count("no best checkpoint is recorded (auto takes the last one)") == 1, err  # said, once
    assert f"grpokit eval {run}" in err


@pytest.mark.parametrize("damage,words", [
    (lambda ck: (ck / "trainer_state.json").write_text(json.dumps({"global_step": 2})), "no int train_batch_size"),
    (lambda ck: (ck / "trainer_state.json").write_text(json.dumps({"global_step": 2, "train_batch_size": 4,
                                                                   "log_history": "x"})), "log_history is not a list"),
    (lambda ck: (ck / "trainer_state.json").write_text(json.dumps({"global_step": 2, "train_batch_size": 4,
                                                                   "mine": 1})), "keys transformers"),
    (lambda ck: (ck / "rng_state.pth").write_bytes(b"garbage"), "rng_state.pth is truncated or not a file torch"),
])
def test_a_checkpoint_resume_cannot_use_is_passed_over_not_retried(tmp_path, tiny_model_dir, damage, words):
    run = _fake_run(tmp_path, tiny_model_dir)
    damage(run / "checkpoints" / "checkpoint-2")
    notes = []
    assert RunDir(run).resume_checkpoint(note=notes.append).name == "checkpoint-1"  # the one before: it works
    assert words in notes[0], notes


def test_a_set_aside_that_is_a_file_still_records_the_failure(tmp_path, tiny_model_dir):
    from grpokit.run.safety import fail_run

    run = _fake_run(tmp_path, tiny_model_dir, steps=(1,))
    (run / "checkpoints" / "checkpoint-2").mkdir()  # incomplete: no marker, no files
    (run / "set-aside").write_text("mine")
    err = fail_run(RunDir(run), {"status": "running"}, RuntimeError("boom"), 2)
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
    assert any("set-aside" in p.where for p in err.problems) and (run / "set-aside").read_text() == "mine"


def test_a_disk_that_fills_mid_save_is_said_and_recorded(tmp_path, tiny_model_dir, monkeypatch):
    import grpokit.run.safety as safety
    import grpokit.run.writer as writer

    run = _fake_run(tmp_path, tiny_model_dir, steps=(1,))
    (run / "run.json").write_text(json.dumps({"status": "running", "step": 1, "notes": ["x" * 200]}))
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(safety.shutil, "disk_usage", lambda p: usage._replace(free=1024))
    real = writer.new_file

    def full(*a, **k):  # no new file fits on the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "new_file", full)
    torch_error = RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 1536 vs 1472")
    err = fail_run_of(run, torch_error)
    monkeypatch.setattr(writer, "new_file", real)
    (problem,) = err.problems
    assert "no space left on device" in problem.message and "run.json records it as failed" in err.title, err
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "failed" and status["error"]["cause"] == "no space left on device"


def fail_run_of(run: Path, exc: BaseException) -> GrpokitError:
    from grpokit.run.safety import fail_run

    return fail_run(RunDir(run), {"status": "running", "run_dir": str(run)}, exc, 1)


# ---------------------------------------------------------------- tool runs: best.json by task_success
def test_a_tool_run_records_its_best_checkpoint_by_task_success(tmp_path):
    from grpokit.evaluation.results import record_tool_best

    run = RunDir(grpokit_run(tmp_path / "run"))
    doc = {"rows": 8, "checkpoints": [{"step": 0, "task_success": 0.25, "model": "base"},
                                      {"step": 4, "task_success": 0.75, "model": "ck4"},
                                      {"step": 8, "task_success": 0.75, "model": "ck8"}]}
    assert record_tool_best(run, doc)["step"] == 4  # ties go to the earlier step
    assert run.read_best()["metric"] == "task_success"
    narrower = {"rows": 2, "checkpoints": [{"step": 8, "task_success": 1.0, "model": "ck8"}]}
    assert record_tool_best(run, narrower) is None and run.read_best()["step"] == 4  # a narrower one keeps it
