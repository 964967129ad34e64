"""Results are never silently replaced by a smaller run; a folder that is not a run is refused (issue 27, item 4).

The issue's case through the CLI: `grpokit eval RUN` (every checkpoint, every held-out row), then
`grpokit eval RUN --checkpoints last --max-rows 1`: results.json and best.json keep the wide comparison, the
narrow one goes to results-partial.json, and the command says so. Then the rules one by one on
`write_results`, and `report`, `eval`, `doctor`, `export` on folders that are not runs.
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from conftest import addition_recipe

from grpokit.cli import main


def _read(path):
    return json.loads(path.read_text())


def test_a_partial_eval_does_not_replace_the_full_one(tmp_path, tiny_model_dir, capsys):
    recipe = addition_recipe(tmp_path, tiny_model_dir, rows=8, data={"eval_fraction": 0.25}, train={
        "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 4, "max_steps": 2,
        "save_steps": 1, "logging_steps": 1})
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    assert main(["eval", str(run), "--max-new-tokens", "4"]) == 0
    full, best = _read(run / "eval" / "results.json"), _read(run / "eval" / "best.json")
    assert [e["step"] for e in full["checkpoints"]] == [0, 1, 2] and (best["rows"], best["checkpoints"]) == (2, 3)
    capsys.readouterr()

    assert main(["eval", str(run), "--checkpoints", "last", "--max-rows", "1", "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert _read(run / "eval" / "results.json") == full and _read(run / "eval" / "best.json") == best
    partial = _read(run / "eval" / "results-partial.json")
    assert [e["step"] for e in partial["checkpoints"]] == [2] and partial["rows"] == 1
    assert "results.json (3 checkpoints x 2 rows) and best.json kept" in out and "results-partial.json" in out
    assert "best: step" not in out  # no best announced from the narrow comparison

    # the same settings, one checkpoint again: merged by step, the comparison stays whole
    assert main(["eval", str(run), "--checkpoints", "last", "--max-new-tokens", "4"]) == 0
    merged = _read(run / "eval" / "results.json")
    assert [e["step"] for e in merged["checkpoints"]] == [0, 1, 2]
    assert _read(run / "eval" / "best.json")["checkpoints"] == 3


def _sets(rows: int, name="held-out"):
    from grpokit.evaluation import EvalSets

    return EvalSets(name, [{"question": str(i), "answer": "1"} for i in range(rows)])


def _entries(steps, accuracy=0.5):
    return [{"step": s, "path": f"ck-{s}", "heldout": {"accuracy": accuracy + s / 100}} for s in steps]


RULES = [
    # (id, first (rows, steps), second (rows, steps), file the second goes to, best.json chosen from)
    ("narrower rows and checkpoints", (8, [0, 1, 2]), (4, [2]), "results-partial.json", (8, 3)),
    ("fewer rows, all checkpoints", (8, [0, 1, 2]), (4, [0, 1, 2]), "results-partial.json", (8, 3)),
    ("wider: replaces, and says so", (4, [2]), (8, [0, 1, 2]), "results.json", (8, 3)),
    ("the same settings: merged by step", (8, [0, 1, 2]), (8, [2]), "results.json", (8, 3)),
]


@pytest.mark.parametrize("first, second, target, best_width", [c[1:] for c in RULES], ids=[c[0] for c in RULES])
def test_where_results_go_and_when_best_changes(tmp_path, monkeypatch, first, second, target, best_width):
    import grpokit.evaluation.results as results_module
    from grpokit.evaluation import write_results

    monkeypatch.setattr(results_module, "_metric_of", lambda recipe: "accuracy")  # no task behind the stand-in
    recipe = SimpleNamespace(model=SimpleNamespace(name="m"), data=SimpleNamespace(template="plain_en"),
                             train=SimpleNamespace(max_completion_length=8))
    write_results(tmp_path, recipe, _sets(first[0]), _entries(first[1]), 0, None)
    res = write_results(tmp_path, recipe, _sets(second[0]), _entries(second[1], 0.9), 0, None)
    assert res["path"].endswith(target)
    best = _read(tmp_path / "eval" / "best.json")
    assert (best["rows"], best["checkpoints"]) == best_width
    kept = _read(tmp_path / "eval" / "results.json")
    if target == "results-partial.json":  # the wide comparison stays, and the command says why
        assert kept["rows"] == first[0] and len(kept["checkpoints"]) == len(first[1]) and "kept" in res
    elif first[0] != second[0]:
        assert "replaced results.json (1 checkpoint x 4 rows, other settings)" in res["replaced"]
    else:
        assert "replaced" not in res and "kept" not in res and len(kept["checkpoints"]) == 3


REFUSED = [
    # (id, command, folder made in tmp_path ("" = none), expected what, expected fix)
    ("report of a typo", "report", "", "no such folder", "did you mean"),
    ("report of an empty folder", "report", "empty", "not a grpokit run directory", "pass the output_dir"),
    ("eval of a typo", "eval", "", "no such model folder: runs/dmeo, nor a run directory", "did you mean"),
    ("eval of a folder of runs", "eval", "runs", "not a grpokit run directory", "pass one of the runs inside it"),
    ("doctor of an empty folder", "doctor", "empty", "not a grpokit run directory", "pass the output_dir"),
    ("export of a typo", "export", "", "no such folder", "did you mean"),
]


@pytest.mark.parametrize("command, made, what, fix", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_commands_that_take_a_run_refuse_a_folder_that_is_not_one(tmp_path, monkeypatch, capsys, command, made,
                                                                   what, fix):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "config.yaml").write_text("rewards: []\n")
    target = {"": "runs/dmeo", "empty": "empty", "runs": "runs"}[made]
    if made == "empty":
        (tmp_path / "empty").mkdir()
    assert main([command, target]) == 2
    err = capsys.readouterr().err
    assert f"grpokit {command} {target}: {what}" in err and fix in err and "Traceback" not in err
    assert not (tmp_path / target / "report").exists()  # nothing written for a folder that is not a run
