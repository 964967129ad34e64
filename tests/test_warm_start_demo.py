"""`grpokit demo` (grpokit.demo.warm_start) on a tiny model: SFT, then GRPO from it, three models in one table with
GRPO's own share; the GRPO-from-base demo stays one task away."""
from __future__ import annotations

import json

import pytest
from conftest import make_recipe

from grpokit.cli import main
from grpokit.demo import DEFAULT_TASK, TASKS, run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("warm")
    recipe = make_recipe(tmp, tiny_model_dir, [{"name": "math_correctness"}, {"name": "format", "weight": 0.2}],
                         sections={"health": {"probe_rows": 0}})
    out = tmp / "demo"
    # --set names the learning rate: the GRPO stage keeps it instead of --init-from's continuing 3e-6, as `grpokit
    # train --init-from` keeps what --set names (the demo once dropped it)
    return out, run_demo(str(out), ["train.learning_rate=1e-5"], recipes=(recipe, recipe))


def test_the_default_demo_is_the_warm_start_and_grpo_alone_is_offered():
    assert TASKS[DEFAULT_TASK].module == "warm_start" and len(TASKS[DEFAULT_TASK].recipes) == 2
    assert TASKS["arithmetic-grpo"].module == "arithmetic"


def test_sft_then_grpo_from_it_three_models_one_table(demo, capsys):
    out, result = demo
    sft = out.parent / "demo-sft"
    assert json.loads((sft / "run.json").read_text())["status"] == "completed"
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed" and run["init_from"]["run"] == str(sft.resolve())  # GRPO continues SFT
    assert not run["init_from"].get("continuing")  # nothing replaced: --set named the learning rate
    assert "learning_rate: 1.0e-05" in (out / "config.yaml").read_text()
    assert result["columns"] == ["base", "after SFT", "after GRPO"]
    for column, sets in result["evaluation"].items():
        assert set(sets) == {"heldout", "perturbed", "rewritten"}, column
        assert all(s["rows"] == 6 for s in sets.values())
    assert result["grpo_share"].startswith("GRPO's own share (after GRPO minus after SFT): held-out ")
    assert result["before"] == result["evaluation"]["after SFT"]["heldout"]  # step 0 of the run: the SFT model
    entries = json.loads((out / "eval" / "results.json").read_text())["checkpoints"]
    assert [e["step"] for e in entries] == [0, run["step"]]
    assert (out / "demo.json").is_file()
    page = (out / "report" / "report.html").read_text()
    assert "before (the model it started from, --init-from)" in page and "before (base model)" not in page


def test_a_second_demo_replaces_both_runs_and_a_foreign_folder_is_refused(demo, tmp_path, capsys):
    out, _ = demo
    (tmp_path / "demo-sft").mkdir()
    (tmp_path / "demo-sft" / "mine.txt").write_text("keep me")
    assert main(["demo", "--output-dir", str(tmp_path / "demo")]) == 2  # its -sft folder is someone's
    assert (tmp_path / "demo-sft" / "mine.txt").read_text() == "keep me" and not (tmp_path / "demo").exists()
    assert "Traceback" not in capsys.readouterr().err
