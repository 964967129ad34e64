"""Rewritten questions (grpokit.families: the `rewritten` variants; `grpokit data rewrite`): the same generated
problems asked in words no training row uses, so evaluation can tell learned wording from learned skill."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.families import variants_of
from grpokit.families import json_records as json_family
from grpokit.families import math as math_family

DATASETS = Path(math_family.__file__).resolve().parents[1] / "datasets"


def _words(template: str) -> tuple[str, ...]:
    """A phrasing's wording: its words, numbers and placeholders left out."""
    return tuple(w for w in re.findall(r"[a-z]+", template.lower()) if w not in ("a", "b"))


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---------------------------------------------------------------- arithmetic
def test_no_rewritten_arithmetic_phrasing_shares_the_wording_of_a_training_one():
    train = {_words(t) for t, _ in math_family.PHRASINGS}
    rewritten = [_words(t) for t, _ in math_family.REWRITTEN]
    assert len(set(rewritten)) == len(rewritten) and not set(rewritten) & train
    for words in rewritten:  # not a training phrasing with a word or two changed either
        assert all(len(set(words) ^ set(t)) >= 3 for t in train), words
    ops = {op for _, op in math_family.REWRITTEN}
    assert ops == {"+", "-"}  # every training operation can be rewritten


def test_training_rows_never_use_a_rewritten_phrasing():
    n = len(math_family.PHRASINGS)
    assert all(r["kind"] < n for r in math_family.generate(3000, seed=11))
    for name in ("train.jsonl", "eval.jsonl"):  # the bundled sets, generated before REWRITTEN existed
        assert all(math_family.in_training_words(r) for r in _read(DATASETS / "arithmetic" / name))


def test_rewritten_rows_keep_the_problem_and_change_the_words():
    rows = math_family.generate(120, seed=4)
    out = math_family.rewrite_rows([{**r, "id": i} for i, r in enumerate(rows)], seed=2)
    for orig, new in zip(rows, out):
        assert (new["a"], new["b"], new["op"], new["answer"]) == (orig["a"], orig["b"], orig["op"], orig["answer"])
        assert new["kind"] >= len(math_family.PHRASINGS) and "id" in new
        assert new["question"] == math_family.ALL_PHRASINGS[new["kind"]][0].format(a=new["a"], b=new["b"])
        assert math_family.is_generated(new) and not math_family.in_training_words(new)
    assert len({r["kind"] for r in out}) == len(math_family.REWRITTEN)  # every rewritten phrasing is used
    assert math_family.rewrite_rows(rows, seed=2) == math_family.rewrite_rows(rows, seed=2)  # seeded


def test_a_rewritten_question_found_in_training_gets_new_numbers():
    rows = math_family.generate(40, seed=4)
    first = math_family.rewrite_rows(rows, seed=1)
    again = math_family.rewrite_rows(rows, seed=1, exclude={r["question"] for r in first})
    assert not {r["question"] for r in again} & {r["question"] for r in first}
    assert all(int(r["answer"]) == (r["a"] + r["b"] if r["op"] == "+" else r["a"] - r["b"]) for r in again)


# ---------------------------------------------------------------- JSON extraction
def test_every_json_kind_holds_back_a_sentence_shape_of_its_own():
    for kind in json_family.KINDS:
        values = kind.draw(__import__("random").Random(0))
        train = {re.sub(r"[\d$.:/]+", "", s(values)) for s in kind.sentences}
        assert kind.rewritten and not {re.sub(r"[\d$.:/]+", "", s(values)) for s in kind.rewritten} & train
    assert all(r["shape"] < len(next(k for k in json_family.KINDS if k.name == r["kind"]).sentences)
               for r in json_family.generate(600, seed=3))
    assert all(json_family.in_training_words(r) for r in _read(DATASETS / "json" / "train.jsonl"))


def test_rewritten_json_rows_keep_the_record_and_its_schema():
    rows = json_family.generate(60, seed=8)
    out = json_family.rewrite_rows(rows, seed=0)
    for orig, new in zip(rows, out):
        assert (new["answer"], new["schema"], new["kind"]) == (orig["answer"], orig["schema"], orig["kind"])
        assert new["question"] != orig["question"] and not json_family.in_training_words(new)


# ---------------------------------------------------------------- evaluation and the command
def test_evaluation_finds_both_copies_of_the_demos_held_out_rows():
    arithmetic = _read(DATASETS / "arithmetic" / "eval.jsonl")
    assert [v.name for v in variants_of(arithmetic)] == ["perturbed", "rewritten"]
    assert [v.name for v in variants_of(_read(DATASETS / "json" / "eval.jsonl"))] == ["rewritten"]
    assert variants_of([{"question": "Tom has 3 apples. How many?", "answer": "3"}]) == []


def test_eval_sets_of_the_demo_recipe_hold_a_rewritten_copy_never_in_training():
    from grpokit.evaluation import eval_sets
    from grpokit.recipe import load_recipe

    recipe = load_recipe(Path(__file__).resolve().parents[1] / "recipes" / "smollm2-arithmetic.yaml")
    sets = eval_sets(recipe)
    train = {r["question"] for r in _read(DATASETS / "arithmetic" / "train.jsonl")}
    assert set(sets.variants) == {"perturbed", "rewritten"} and sets.train is None
    assert len(sets.variants["rewritten"]) == len(sets.heldout)
    assert not {r["question"] for r in sets.variants["rewritten"]} & train
    assert [r["answer"] for r in sets.variants["rewritten"]] == [r["answer"] for r in sets.heldout]
    assert "words no training row uses" in sets.what["rewritten"]


def test_data_rewrite_command(tmp_path, capsys):
    src = write_jsonl(tmp_path / "eval.jsonl", math_family.generate(10, seed=5))
    assert main(["data", "rewrite", str(src), str(tmp_path / "r.jsonl"), "--seed", "3"]) == 0
    out = _read(tmp_path / "r.jsonl")
    assert len(out) == 10 and not any(math_family.in_training_words(r) for r in out)
    js = write_jsonl(tmp_path / "json.jsonl", json_family.generate(6, seed=5))
    assert main(["data", "rewrite", str(js), str(tmp_path / "j.jsonl")]) == 0
    assert len(_read(tmp_path / "j.jsonl")) == 6
    gsm = write_jsonl(tmp_path / "gsm.jsonl", [{"question": "Tom has 3 apples.", "answer": "3"}])
    assert main(["data", "rewrite", str(gsm), str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "gsm.jsonl row 1" in err and "hold out a phrasing" in err and "Traceback" not in err
    assert not (tmp_path / "x.jsonl").exists()
    assert main(["data", "rewrite", str(tmp_path / "r.jsonl"), str(tmp_path / "y.jsonl")]) == 2  # already rewritten


@pytest.mark.parametrize("kind", ["perturbed", "rewritten"])
def test_the_eval_table_and_its_legend_show_each_copy(kind):
    from grpokit.evaluation.metrics import results_legend, results_table

    entry = {"step": 0, "heldout": {"accuracy": 0.5, "rows": 4, "pass_at_k": {}, "mean_length": 3.0,
                                    "truncated_rate": 0.0}, kind: {"accuracy": 0.25, "rows": 4}}
    results = {"checkpoints": [entry], "rows": 4, "data": "held-out", "variants": {kind: {"rows": 4, "what": "W"}}}
    assert kind in [str(c.header) for c in results_table(results).columns]
    assert f"{kind}: W" in results_legend(results)
