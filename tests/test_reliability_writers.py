"""Issue 44, "done when": every CLI command that writes, with its output a symbolic link, a hard link, an existing
file or folder of the user's, and its own input. Each case must exit 2 with where / what / fix, leave the user's
bytes (and the command's inputs) as they were, and print no traceback; where a command has --overwrite, the link,
hard-link and own-input cases pass it too (it never reaches through a link or over an input).

The outputs a folder is expected at (train, sft, demo, eval, report, export, rm train) are tried with a link to a
user's folder, a hard-linked user file at the name, a user's folder with files, and a folder the command reads.
Every refusal comes before any model loads (the loader is watched). One real tiny run is not needed: the runs
here are made by hand with grpokit's record (conftest.grpokit_run) and a checkpoint copied from a tiny model.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import grpokit_run, make_recipe

from grpokit.cli import main
from grpokit.datasets import BUILTIN_DATA

RANKINGS = BUILTIN_DATA / "preference" / "rankings.jsonl"


@dataclass
class World:
    tmp: Path
    thesis: Path  # a user's file
    mine: Path  # a user's folder with a file in it
    recipe: Path
    data: Path  # the recipe's training file
    run: Path  # a run grpokit made (record, config, eval results, one checkpoint)
    rankings: Path
    csv: Path

    def protected(self) -> dict[Path, bytes]:
        files = [self.thesis, self.mine / "notes.txt", self.recipe, self.data, self.rankings, self.csv,
                 self.run / "config.yaml", self.run / "eval" / "results.json", self.run / "metrics.jsonl"]
        return {p: p.read_bytes() for p in files if p.is_file()}


@pytest.fixture
def world(tmp_path, tiny_model_dir, monkeypatch) -> World:
    monkeypatch.chdir(tmp_path)
    thesis = tmp_path / "thesis.txt"
    thesis.write_text("my thesis")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    (mine / "rm.json").write_text("{}")  # names grpokit writes prove nothing
    (mine / "config.yaml").write_text("data: {train: x}\nrewards: []\n")
    (mine / "metrics.jsonl").write_text('{"step": 1}\n')
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "format"}])
    data = Path(yaml.safe_load(recipe.read_text())["data"]["train"])
    run = grpokit_run(tmp_path / "run")
    cfg = yaml.safe_load(recipe.read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**cfg, "output_dir": str(run)}))
    (run / "run.json").write_text(json.dumps({"status": "completed", "step": 1}))
    (run / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n')
    ck = run / "checkpoints" / "checkpoint-1"
    shutil.copytree(tiny_model_dir, ck)
    (ck / "COMPLETE").write_text("{}")
    (run / "eval").mkdir()
    failed = [{"question": "1 + 1?", "answer": "2", "verdict": "wrong"}]
    (run / "eval" / "results.json").write_text(json.dumps({"checkpoints": [{"step": 1, "heldout": {"failed": failed}}],
                                                           "best": {"step": 1}}))
    rankings = tmp_path / "rankings.jsonl"
    shutil.copy(RANKINGS, rankings)
    csv = tmp_path / "rankings.csv"
    assert main(["rm", "export-csv", str(rankings), str(csv)]) == 0
    return World(tmp_path, thesis, mine, recipe, data, run, rankings, csv)


@pytest.fixture
def loads(monkeypatch):
    import grpokit.models as models

    seen, real = [], models.load_model
    monkeypatch.setattr(models, "load_model", lambda *a, **k: seen.append(a) or real(*a, **k))
    return seen


# ---------------------------------------------------------------- the commands and their outputs
# name -> (argv for an output at OUT, does it take --overwrite, its own input (None: it reads none a user names))
FILE_COMMANDS = {
    "data generate": (lambda w, out: ["data", "generate", "arithmetic", out, "--rows", "5", "--exclude", str(w.data)],
                      True, lambda w: ["data", "generate", "arithmetic", str(w.data), "--rows", "5", "--exclude",
                                       str(w.data)]),
    "data perturb": (lambda w, out: ["data", "perturb", str(w.data), out], True,
                     lambda w: ["data", "perturb", str(w.data), str(w.data)]),
    "data rewrite": (lambda w, out: ["data", "rewrite", str(w.data), out], True,
                     lambda w: ["data", "rewrite", str(w.data), str(w.data)]),
    "data import": (lambda w, out: ["data", "import", "humaneval", out], True, None),
    "data mine-failures": (lambda w, out: ["data", "mine-failures", str(w.run), "--out", out], True,
                           lambda w: ["data", "mine-failures", str(w.run), "--out", str(w.data)]),
    "data mine-solutions": (lambda w, out: ["data", "mine-solutions", str(w.run), "--out", out], True,
                            lambda w: ["data", "mine-solutions", str(w.run), "--out", str(w.data)]),
    "preflight --output": (lambda w, out: ["preflight", str(w.recipe), "--output", out], True,
                           lambda w: ["preflight", str(w.recipe), "--output", str(w.data)]),
    "preflight --write-filtered": (lambda w, out: ["preflight", str(w.recipe), "--output", str(w.tmp / "p.json"),
                                                   "--write-filtered", out], True,
                                   lambda w: ["preflight", str(w.recipe), "--output", str(w.tmp / "p.json"),
                                              "--write-filtered", str(w.data)]),
    "rm candidates": (lambda w, out: ["rm", "candidates", str(w.recipe), "--prompts", str(w.data), "--out", out], True,
                      lambda w: ["rm", "candidates", str(w.recipe), "--prompts", str(w.data), "--out", str(w.data)]),
    "rm export-csv": (lambda w, out: ["rm", "export-csv", str(w.rankings), out], True,
                      lambda w: ["rm", "export-csv", str(w.rankings), str(w.rankings)]),
    "rm import-csv": (lambda w, out: ["rm", "import-csv", str(w.csv), out], True,
                      lambda w: ["rm", "import-csv", str(w.csv), str(w.csv)]),
}

# name -> (argv for a folder output at OUT, its own input)
FOLDER_COMMANDS = {
    "train": (lambda w, out: ["train", str(w.recipe), "--output-dir", out, "--skip-audit"],
              lambda w: ["train", str(w.recipe), "--output-dir", str(w.data.parent), "--skip-audit"]),
    "sft": (lambda w, out: ["sft", str(w.recipe), "--output-dir", out],
            lambda w: ["sft", str(w.recipe), "--output-dir", str(w.data.parent)]),
    "demo": (lambda w, out: ["demo", "--output-dir", out], None),
    "eval MODEL": (lambda w, out: ["eval", "default", "--data", str(w.data), "--output-dir", out],
                   lambda w: ["eval", "default", "--data", str(w.data), "--output-dir", str(w.data.parent)]),
    "report --output-dir": (lambda w, out: ["report", str(w.run), "--output-dir", out],
                            lambda w: ["report", str(w.run), "--output-dir", str(w.run)]),
    "export --out": (lambda w, out: ["export", str(w.run), "--out", out],
                     lambda w: ["export", str(w.run), "--out", str(w.run)]),
    "rm train": (lambda w, out: ["rm", "train", str(w.rankings), "--out", out],
                 lambda w: ["rm", "train", str(w.rankings), "--out", str(w.rankings.parent)]),
}


def _refused(capsys, argv: list[str], w: World, loads: list, extra: dict[Path, bytes] | None = None) -> str:
    before = {**w.protected(), **(extra or {})}
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and "error:" in err and "  - " in err and "fix: " in err, err
    assert {p: p.read_bytes() for p in before} == before, "a user's file or an input changed"
    assert loads == [], "refused after a model loaded"
    return err


FILE_CASES = ["symlink", "hard link", "user file", "own input"]


@pytest.mark.parametrize("case", FILE_CASES)
@pytest.mark.parametrize("command", list(FILE_COMMANDS))
def test_a_file_output_is_never_written_through_or_over(world, capsys, loads, command, case):
    make_argv, overwrite, own = FILE_COMMANDS[command]
    w, out = world, world.tmp / "out.jsonl"
    flag = ["--overwrite"] if overwrite and case != "user file" else []
    if case == "symlink":
        out.symlink_to(w.thesis)
        words = "is a symbolic link"
    elif case == "hard link":
        os.link(w.thesis, out)
        words = "other hard link"
    elif case == "user file":
        out = w.thesis
        words = "already exists"
    else:
        if own is None:
            pytest.skip(f"{command} reads no file a user names")
        err = _refused(capsys, own(w) + flag, w, loads)
        assert "is a file this command reads" in err, err
        return
    err = _refused(capsys, make_argv(w, str(out)) + flag, w, loads)
    assert f"  - {out.absolute()}: " in err and words in err, err


FOLDER_CASES = ["symlink to a user's folder", "hard link", "user folder", "own input"]


@pytest.mark.parametrize("case", FOLDER_CASES)
@pytest.mark.parametrize("command", list(FOLDER_COMMANDS))
def test_a_folder_output_is_only_one_grpokit_made(world, capsys, loads, command, case):
    make_argv, own = FOLDER_COMMANDS[command]
    w, out = world, world.tmp / "out"
    if case == "symlink to a user's folder":
        out.symlink_to(w.mine)
    elif case == "hard link":
        os.link(w.thesis, out)
    elif case == "user folder":
        out = w.mine
    else:
        if own is None:
            pytest.skip(f"{command} reads no file a user names")
        _refused(capsys, own(w), w, loads)
        return
    before = {p: p.read_bytes() for p in w.mine.iterdir()}
    _refused(capsys, make_argv(w, str(out)), w, loads)
    assert {p: p.read_bytes() for p in w.mine.iterdir()} == before  # nothing added to the user's folder either


# ---------------------------------------------------------------- a run's own folders
RUN_FOLDER_CASES = {
    # name -> (what to put in the run, argv, the user file that must keep its bytes)
    "eval: eval/results.json a symlink": (lambda w: (w.run / "eval" / "results.json").unlink() or
                                          (w.run / "eval" / "results.json").symlink_to(w.thesis),
                                          lambda w: ["eval", str(w.run)]),
    "eval: eval/results.json a hard link": (lambda w: (w.run / "eval" / "results.json").unlink() or
                                            os.link(w.thesis, w.run / "eval" / "results.json"),
                                            lambda w: ["eval", str(w.run)]),
    "eval: eval/ a symlink to a user's folder": (lambda w: shutil.rmtree(w.run / "eval") or
                                                 (w.run / "eval").symlink_to(w.mine),
                                                 lambda w: ["eval", str(w.run)]),
    "eval: a folder holding a config.yaml": (lambda w: None, lambda w: ["eval", str(w.mine)]),
    "report: report/ a symlink to a user's folder": (lambda w: (w.run / "report").symlink_to(w.mine),
                                                     lambda w: ["report", str(w.run)]),
    "report: report.html a hard link": (lambda w: (w.run / "report").mkdir() or
                                        os.link(w.thesis, w.run / "report" / "report.html"),
                                        lambda w: ["report", str(w.run)]),
    "report: a folder holding a metrics.jsonl": (lambda w: None, lambda w: ["report", str(w.mine)]),
    "export: export/ a symlink to a user's folder": (lambda w: (w.run / "export").symlink_to(w.mine),
                                                     lambda w: ["export", str(w.run)]),
    "rm eval: a folder holding an rm.json": (lambda w: None, lambda w: ["rm", "eval", str(w.mine), str(w.rankings)]),
    "mine-failures: --results not JSON": (lambda w: None,
                                          lambda w: ["data", "mine-failures", str(w.run), "--out",
                                                     str(w.tmp / "f.jsonl"), "--results", str(w.thesis)]),
}


@pytest.mark.parametrize("case", list(RUN_FOLDER_CASES))
def test_a_runs_own_folders_are_written_only_when_they_are_grpokits(world, capsys, loads, case):
    setup, argv = RUN_FOLDER_CASES[case]
    setup(world)
    before = {p: p.read_bytes() for p in world.mine.iterdir()}
    _refused(capsys, argv(world), world, loads)
    assert {p: p.read_bytes() for p in world.mine.iterdir()} == before


# ---------------------------------------------------------------- the record is not believed whole
@pytest.mark.parametrize("entry", ["../../victim", "/tmp/victim-abs", "sub/../../victim", "checkpoints/.."])
def test_a_record_naming_anything_but_a_plain_name_of_a_run_makes_the_folder_refused(world, capsys, loads, entry):
    from grpokit.run.record import RECORD_FILE

    victim = world.tmp / "victim"
    victim.mkdir(exist_ok=True)
    (victim / "keep.txt").write_text("keep")
    record = json.loads((world.run / RECORD_FILE).read_text())
    record["entries"][entry] = "dir"
    (world.run / RECORD_FILE).write_text(json.dumps(record))
    err = _refused(capsys, ["train", str(world.recipe), "--output-dir", str(world.run), "--overwrite", "--skip-audit"],
                   world, loads)
    assert "not a plain name" in err or "not an entry of a grpokit run" in err, err
    assert (victim / "keep.txt").read_text() == "keep" and (world.run / "checkpoints").is_dir()
    # the other commands that write into a run refuse it the same way
    _refused(capsys, ["report", str(world.run)], world, loads)


def test_a_users_file_named_after_a_run_file_is_no_reason_to_refuse(world, capsys):
    """The other side: outputs beside the user's files, new names, are written (and --overwrite replaces a
    plain file of the user's that the command does not read)."""
    out = world.tmp / "rows.jsonl"
    assert main(["data", "generate", "arithmetic", str(out), "--rows", "3"]) == 0
    assert main(["data", "generate", "arithmetic", str(out), "--rows", "4", "--overwrite"]) == 0
    assert len(out.read_text().splitlines()) == 4
    assert main(["rm", "import-csv", str(world.csv), str(world.tmp / "back.jsonl")]) == 0
    capsys.readouterr()


# ---------------------------------------------------------------- hostile arguments
HOSTILE = {  # name -> (set-up in the world, argv, words)
    "--rows -3": (None, lambda w: ["data", "generate", "arithmetic", "x.jsonl", "--rows", "-3"], "must be 1 to"),
    "--rows 10**12": (None, lambda w: ["data", "generate", "arithmetic", "x.jsonl", "--rows", str(10**12)],
                      "must be 1 to"),
    "into .": (None, lambda w: ["data", "generate", "arithmetic", ".", "--rows", "3"], "is a folder"),
    "into ''": (None, lambda w: ["data", "generate", "arithmetic", "", "--rows", "3"], "an empty path"),
    "into /dev/full": (None, lambda w: ["data", "generate", "arithmetic", "/dev/full", "--rows", "3", "--overwrite"],
                       "not a regular file"),
    "into a FIFO": (lambda w: os.mkfifo(w.tmp / "fifo"), lambda w: ["data", "generate", "arithmetic", "fifo", "--rows",
                                                                     "3", "--overwrite"], "not a regular file"),
    "import-csv of latin-1": (lambda w: (w.tmp / "l.csv").write_bytes("id,question\xe9\n".encode("latin-1")),
                              lambda w: ["rm", "import-csv", "l.csv", "r.jsonl"], "not UTF-8 text"),
    "import-csv of a binary file": (lambda w: (w.tmp / "b.csv").write_bytes(bytes(range(256)) * 4),
                                    lambda w: ["rm", "import-csv", "b.csv", "r.jsonl"], "not UTF-8 text"),
    "import-csv of a header only": (lambda w: (w.tmp / "h.csv").write_text(w.csv.read_text().splitlines()[0] + "\n"),
                                    lambda w: ["rm", "import-csv", "h.csv", "r.jsonl"], "no ranked prompts"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_arguments_are_errors_that_write_nothing(world, capsys, loads, case):
    setup, argv, words = HOSTILE[case]
    if setup:
        setup(world)
    err = _refused(capsys, argv(world), world, loads)
    assert words in err, err
    assert not (world.tmp / "r.jsonl").exists() and not (world.tmp / "x.jsonl").exists()
