"""`grpokit demo --task sft-vs-grpo* --resume` (grpokit.demo.progress.Progress): a comparison killed part way goes on
from its last finished part, on a tiny model: the trainings before the crash are not trained again, every figure is
measured once, and a resume that does not fit the folder is refused before anything is written."""
from __future__ import annotations

import json

import pytest
from conftest import make_recipe
from transformers import TrainerCallback

from grpokit.cli import main
from grpokit.demo import sft_vs_grpo
from grpokit.demo.progress import PROGRESS_FILE, Progress
from grpokit.errors import GrpokitError


class MachineDown(TrainerCallback):
    """The crash: the first GRPO step of the comparison raises, as a killed process leaves it."""

    def on_step_end(self, args, state, control, **kwargs):
        raise RuntimeError("the machine went down")


@pytest.fixture(scope="module")
def resumed(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("resume")
    recipe = make_recipe(tmp, tiny_model_dir, [{"name": "math_correctness"}, {"name": "format", "weight": 0.2}],
                         sections={"health": {"probe_rows": 0}})
    out = tmp / "cmp"
    with pytest.raises(GrpokitError, match="the machine went down") as e:
        sft_vs_grpo.run(str(out), recipes=(recipe, recipe), callbacks=[MachineDown()])
    assert "the comparison stopped in its grpo stage" in str(e.value) and "--resume` goes on" in str(e.value)
    crashed = json.loads((out / PROGRESS_FILE).read_text())
    sft_run = (out / "sft" / "run.json").read_bytes()
    result = sft_vs_grpo.run(str(out), recipes=(recipe, recipe), resume=True)
    return recipe, out, crashed, sft_run, result


def test_a_comparison_killed_in_its_second_training_goes_on_from_it(resumed):
    recipe, out, crashed, sft_run, result = resumed
    assert list(crashed["parts"]) == ["training sft"]  # what had finished when the machine went down
    assert result["resumed"] == ["training sft"]
    assert (out / "sft" / "run.json").read_bytes() == sft_run  # the SFT run was not trained again
    assert list(result["models"]) == ["base", *sft_vs_grpo.PIPELINES]
    assert all(m["sets"]["heldout"]["rows"] == 6 for m in result["models"].values())
    assert result["models"]["sft"]["stage_minutes"] > 0  # its minutes come from the record
    parts = list(json.loads((out / PROGRESS_FILE).read_text())["parts"])
    assert parts == [*(f"training {n}" for n in sft_vs_grpo.PIPELINES),
                     *(f"evaluation of {n}" for n in ["base", *sft_vs_grpo.PIPELINES]), "matched retention"]


def test_a_finished_comparison_resumed_measures_nothing_again(resumed, capsys):
    recipe, out, _, _, first = resumed
    again = sft_vs_grpo.run(str(out), recipes=(recipe, recipe), resume=True)
    assert again["resumed"] == list(json.loads((out / PROGRESS_FILE).read_text())["parts"])
    assert again["models"] == first["models"] and again["verdict"] == first["verdict"]
    assert "evaluation of sft: kept from the stopped comparison" in capsys.readouterr().out


def test_a_resume_that_does_not_fit_the_folder_is_refused_before_anything_is_written(resumed, tmp_path, capsys):
    recipe, out, _, _, _ = resumed
    with pytest.raises(GrpokitError, match="no readable progress record"):
        sft_vs_grpo.run(str(tmp_path / "new"), recipes=(recipe, recipe), resume=True)
    assert not (tmp_path / "new").exists()
    before = (out / PROGRESS_FILE).read_bytes()
    with pytest.raises(GrpokitError, match="other recipes or --set") as e:
        sft_vs_grpo.run(str(out), ["train.seed=1"], recipes=(recipe, recipe), resume=True)
    assert "it ran with --set nothing" in str(e.value) and "without --resume" in str(e.value)
    assert (out / PROGRESS_FILE).read_bytes() == before
    # A demo that is one training has no stages to go on with: said, not a traceback.
    assert main(["demo", "--task", "arithmetic-grpo", "--output-dir", str(tmp_path / "a"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "one training, not a comparison" in err and "Traceback" not in err and not (tmp_path / "a").exists()


def test_a_part_done_again_redoes_every_part_after_it(tmp_path):
    """The parts are a sequence: once one is done again (what it made is gone), the recorded ones after it are
    measured on what it replaced, so they are done again too and dropped from the record."""
    identity = {"recipes": "x", "overrides": []}
    first = Progress(tmp_path, identity, resume=False, again="grpokit demo")
    first.start()
    for key in "abc":
        first.once(key, lambda k=key: {"v": k})
    calls = []
    again = Progress(tmp_path, identity, resume=True, again="grpokit demo")
    assert again.once("a", lambda: calls.append("a")) == {"v": "a"}
    assert again.once("b", lambda: calls.append("b") or {"v": "b2"}, lambda _: False) == {"v": "b2"}  # folder gone
    assert again.once("c", lambda: calls.append("c") or {"v": "c2"}) == {"v": "c2"}
    assert calls == ["b", "c"] and again.kept == ["a"]
    assert json.loads((tmp_path / PROGRESS_FILE).read_text())["parts"] == {"a": {"v": "a"}, "b": {"v": "b2"},
                                                                           "c": {"v": "c2"}}


def test_a_part_edited_into_another_shape_is_done_again_not_a_traceback(tmp_path):
    identity = {"recipes": "x", "overrides": []}
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"identity": identity, "parts": {"training sft": "garbage",
                                                                                       "evaluation of sft": 3}}))
    again = Progress(tmp_path, identity, resume=True, again="grpokit demo")
    assert again.once("training sft", lambda: {"end": {}}, lambda v: v["end"]["status"] == "completed") == {"end": {}}
    assert again.once("evaluation of sft", lambda: {"sets": {}}) == {"sets": {}} and again.kept == []


@pytest.mark.parametrize("value, where, words", [
    ({"seconds": "abc", "end": {"status": "completed"}}, "parts['training sft'].seconds", "valid number"),
    ({"seconds": 1.0}, "parts['training sft'].end", "Field required"),
    ({"path": "m", "sets": {"heldout": {"rows": "6"}}}, "parts['evaluation of sft'].sets.heldout.rows",
     "valid integer"),
    ({"path": "m"}, "parts['evaluation of sft'].sets", "Field required"),
    ({"mined": {"rows": 2}, "seconds": 1}, "parts['RFT mining'].mined.solutions", "Field required"),
])
def test_a_hand_edited_progress_part_is_said_with_its_field_and_done_again(tmp_path, capsys, value, where, words):
    """A progress.json part edited into another shape (`"seconds": "abc"`, a part's `sets` missing) was a
    TypeError's or KeyError's traceback once the comparison used it: now read against its kind's schema, said
    with file, part and field, and done again like any part that does not hold."""
    key = where.split("'")[1]
    identity = {"recipes": "x", "overrides": []}
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"identity": identity, "parts": {key: value}}))
    again = Progress(tmp_path, identity, resume=True, again="grpokit demo")
    assert again.once(key, lambda: {"fresh": 1}, lambda v: True) == {"fresh": 1} and again.kept == []
    err = capsys.readouterr().err
    assert f"{tmp_path / PROGRESS_FILE} {where}" in err and words in err and "done again" in err, err


def test_a_whole_progress_part_is_kept(tmp_path):
    identity = {"recipes": "x", "overrides": []}
    part = {"seconds": 2.5, "end": {"status": "completed"}}
    (tmp_path / PROGRESS_FILE).write_text(json.dumps({"identity": identity, "parts": {"training sft": part}}))
    again = Progress(tmp_path, identity, resume=True, again="grpokit demo")
    assert again.once("training sft", lambda: {}, lambda v: True) == part and again.kept == ["training sft"]


def test_a_progress_record_nested_past_the_parser_is_refused_in_one_line(tmp_path):
    (tmp_path / PROGRESS_FILE).write_text("[" * 100000)
    with pytest.raises(GrpokitError, match="no readable progress record") as e:
        Progress(tmp_path, {"recipes": "x", "overrides": []}, resume=True, again="grpokit demo")
    assert str(tmp_path / PROGRESS_FILE) in str(e.value)
