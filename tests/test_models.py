"""Model and tokenizer loading: every bad model source is `where: what` + `fix:` (exit 2), never a traceback."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grpokit import hub_access, models
from grpokit.cli import main
from grpokit.errors import GrpokitError


def _folder(tmp_path: Path, source: Path, files: tuple[str, ...]) -> str:
    folder = tmp_path / "m"
    folder.mkdir()
    for f in files:
        shutil.copy(source / f, folder / f)
    return str(folder)


# (id, how to build the name from tmp_path and the embedded model folder, loader, expected message)
CASES = [
    ("missing folder", lambda t, m: "/no/such/folder", "tokenizer", "no such model folder: /no/such/folder"),
    ("missing folder (model)", lambda t, m: str(t / "nope"), "model", "no such model folder"),
    ("a file, not a folder", lambda t, m: str(m / "config.json"), "model", "is a file, not a model folder"),
    ("empty folder", lambda t, m: _folder(t, m, ()), "model", "has no config.json"),
    ("config without tokenizer", lambda t, m: _folder(t, m, ("config.json",)), "tokenizer", "has no tokenizer files"),
    ("config without weights", lambda t, m: _folder(t, m, ("config.json",)), "model", "cannot load the model"),
    ("hub id offline and not cached", lambda t, m: "nosuch-org/nosuch-model", "model",
     "offline (HF_HUB_OFFLINE is set) and the hub model 'nosuch-org/nosuch-model' is not in the local cache"),
]


@pytest.mark.parametrize("make,loader,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_model_source_is_a_problem(tmp_path, embedded_model_dir, monkeypatch, make, loader, expected):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name = make(tmp_path, embedded_model_dir)
    load = models.load_tokenizer if loader == "tokenizer" else models.load_model
    with pytest.raises(GrpokitError) as exc:
        load(name)
    (problem,) = exc.value.problems
    assert problem.where == "model.name" and expected in problem.message and problem.fix, problem


def test_unreachable_hub_fails_fast(monkeypatch):
    # A closed local port stands for an unreachable hub: one probe, then offline mode, not transformers' minute of
    # retries. Counted, not timed: every connection attempt to the hub's address goes through create_connection
    # (the probe's and httpx's alike), and a retry would be a second one.
    import socket

    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(hub_access, "_HUB_STATE", {})
    attempts, connect = [], socket.create_connection
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: attempts.append(address) or
                        connect(address, *a, **k))
    # the probe finds no hub, offline mode follows: the cache is asked, and says the model is not there
    with pytest.raises(GrpokitError, match=r"offline \(hub 127.0.0.1:9 unreachable.*not in the local cache"):
        models.load_tokenizer("nosuch-org/nosuch-model", where="grpokit eval MODEL")
    assert attempts.count(("127.0.0.1", 9)) == 1, attempts


def _recipe(tmp_path: Path, model: str) -> Path:
    data = tmp_path / "t.jsonl"
    data.write_text('{"question": "1+1?", "answer": "2"}\n' * 8)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({"model": {"name": model}, "data": {"train": str(data)},
                                    "rewards": [{"name": "format"}], "train": {"num_generations": 2}}))
    return path


# (id, command line built from the recipe path and the run dir)
COMMANDS = [
    ("train", lambda r, out: ["train", str(r), "--output-dir", str(out), "--skip-audit"]),
    ("train --set", lambda r, out: ["train", str(r), "--output-dir", str(out), "--skip-audit",
                                    "--set", "model.name=/no/such/folder"]),
    ("preflight", lambda r, out: ["preflight", str(r), "--output", str(out / "p.json")]),
    ("eval MODEL", lambda r, out: ["eval", "/no/such/folder", "--data", str(r.parent / "t.jsonl"),
                                   "--template", "plain_en", "--output-dir", str(out)]),
]


@pytest.mark.parametrize("argv", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_commands_report_a_missing_model_without_traceback_or_run_dir(tmp_path, capsys, argv):
    recipe = _recipe(tmp_path, "/no/such/folder")
    out = tmp_path / "run"
    assert main(argv(recipe, out)) == 2
    err = capsys.readouterr().err
    assert "no such model folder: /no/such/folder" in err and "fix:" in err and "Traceback" not in err
    assert not out.exists(), "a run that never started left a folder behind"


def test_train_with_an_uncached_hub_id_offline_stops_before_the_run_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    recipe, out = _recipe(tmp_path, "nosuch-org/nosuch-model"), tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(out), "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert "not checked on the hub" in err  # the recipe check's note ...
    assert "HF_HUB_OFFLINE is set" in err and "Traceback" not in err and not out.exists()  # ... then the refusal
