"""Two-step arithmetic (grpokit.families.two_step): compositions split between training and held-out rows, every
answer right, the worked reference the math rewards score 1.0, the `seen` variant on the same numbers, the bundled
files and `grpokit data generate two-step`."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grpokit.cli import main
from grpokit.datasets import BUILTIN_DATA
from grpokit.families import FAMILIES, generators, variants_of
from grpokit.families.math import MAX_OPERAND, reference
from grpokit.families.two_step import (ORDERS, SCENARIOS, UNSEEN, compositions_of, generate, is_two_step, make_row,
                                       most_rows, operands_of, seen_rows, with_operands, worked_lines)
from grpokit.rewards import build_reward

BUNDLED = BUILTIN_DATA / "two-step"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (BUNDLED / name).read_text(encoding="utf-8").splitlines()]


def _value(a: int, b: int, c: int, order: str) -> int:
    x = a + b if order[0] == "+" else a - b
    return x + c if order[1] == "+" else x - c


def test_every_scenario_and_order_is_trained_but_not_every_combination():
    seen, unseen = set(compositions_of("seen")), set(compositions_of("unseen"))
    assert not seen & unseen and len(seen | unseen) == len(SCENARIOS) * len(ORDERS)
    assert {s for s, _ in seen} == set(SCENARIOS) and {o for _, o in seen} == set(ORDERS)
    assert sorted(UNSEEN.values()) == sorted(ORDERS * (len(SCENARIOS) // len(ORDERS)))  # each order held out twice
    # Only the pairing is new: each held-out composition's clauses are trained in the same positions elsewhere.
    for s, order in unseen:
        assert any((s, o) in seen for o in ORDERS if o[0] == order[0])
        assert any((s, o) in seen for o in ORDERS if o[1] == order[1])


@pytest.mark.parametrize("side", ["seen", "unseen"])
def test_generated_rows_are_their_side_distinct_and_right(side):
    rows = generate(600, seed=3, high=MAX_OPERAND, compositions=side, operands=True)
    assert len({r["question"] for r in rows}) == 600
    assert {(r["scenario"], r["order"]) for r in rows} == set(compositions_of(side))  # every composition drawn
    for r in rows:
        a, b, c = r["operands"]
        assert 2 <= min(a, b, c) and max(a, b, c) <= MAX_OPERAND
        first = a + b if r["order"][0] == "+" else a - b
        assert first >= 0 and int(r["answer"]) == _value(a, b, c, r["order"]) >= 0  # counts stay whole and >= 0
        assert operands_of({k: v for k, v in r.items() if k != "operands"}) == [a, b, c]  # read back from the words


def test_the_same_seed_gives_the_same_rows_with_or_without_operands():
    plain, worked = generate(50, seed=9, high=20), generate(50, seed=9, high=20, operands=True)
    assert all("operands" not in r for r in plain)
    assert [{k: v for k, v in r.items() if k != "operands"} for r in worked] == plain
    assert with_operands(plain) == worked


# (id, generate's keywords, the message of the ValueError)
BAD_KNOBS = [
    ("an unknown side", {"compositions": "both"}, "--compositions must be one of seen, unseen"),
    ("operands too small to take two away from a third", {"high": 3}, "the largest operand must be 4 to 1000"),
    # operands 2-4: 438 problems exist on the seen side and 146 on the held-out one; half of them are drawn at most
    ("more rows than are drawn", {"high": 4, "rows": 220}, "at most 219 distinct seen problems are drawn; asked for 220"),
    ("the held-out side is the smaller one", {"high": 4, "rows": 74, "compositions": "unseen"},
     "at most 73 distinct unseen problems are drawn"),
]


def test_the_bound_counts_what_exists():
    # every problem with operands 2-4, by brute force: the bound is half of them per side
    for side in ("seen", "unseen"):
        every = {make_row(s, o, a, b, c)["question"] for s, o in compositions_of(side) for a in (2, 3, 4)
                 for b in (2, 3, 4) for c in (2, 3, 4) if _value(a, b, c, o) >= 0 and (a - b >= 0 or o[0] == "+")}
        assert most_rows(side, 4) == len(every) // 2, side
        assert len(generate(most_rows(side, 4), seed=1, high=4, compositions=side)) == most_rows(side, 4)


@pytest.mark.parametrize("kwargs, message", [c[1:] for c in BAD_KNOBS], ids=[c[0] for c in BAD_KNOBS])
def test_a_bad_knob_is_said(kwargs, message):
    kwargs = {"rows": 5, "high": 20, **kwargs}
    with pytest.raises(ValueError, match=message):
        generate(kwargs.pop("rows"), seed=0, **kwargs)


def test_the_worked_reference_scores_full_marks_and_answer_only_rows_get_the_answer_line():
    correctness = build_reward("math_correctness")
    fmt = build_reward("format", {"min_reasoning_lines": 1})
    rows = generate(40, seed=1, high=MAX_OPERAND, operands=True)
    texts = [reference(r, "Final answer:") for r in rows]
    assert all(len(t.splitlines()) == 3 for t in texts)  # two calculation lines, then the answer line
    assert correctness(prompts=[None] * 40, completions=texts, answer=[r["answer"] for r in rows]) == [1.0] * 40
    assert fmt(prompts=[None] * 40, completions=texts) == [1.0] * 40
    assert worked_lines({"order": "+-", "operands": [20, 5, 7]}) == ["20 + 5 = 25", "25 - 7 = 18"]
    plain = {k: v for k, v in rows[0].items() if k != "operands"}
    assert reference(plain, "Final answer:") is None  # final answers only: `grpokit sft` teaches the answer line


def test_the_seen_variant_asks_the_same_numbers_in_a_trained_composition():
    heldout = generate(80, seed=2, high=MAX_OPERAND, compositions="unseen")
    train = generate(300, seed=0, high=MAX_OPERAND)
    assert [v.name for v in variants_of(heldout)] == ["seen"]  # math's other copies need one-step rows
    copies = seen_rows(heldout, seed=5, exclude={r["question"] for r in train})
    assert len(copies) == len(heldout)  # row for row: seen and unseen pair on the same rows
    for old, new in zip(heldout, copies):
        assert (new["scenario"], new["order"]) in compositions_of("seen") and new["order"] == old["order"]
        assert operands_of(new) == operands_of(old) and new["answer"] == old["answer"] and is_two_step(new)
    # A copy that would be a training question is asked in another trained scenario instead.
    first = seen_rows(heldout[:1], seed=5)[0]
    again = seen_rows(heldout[:1], seed=5, exclude={first["question"]})[0]
    assert again["question"] != first["question"] and again["answer"] == first["answer"]


def test_an_edited_row_is_no_two_step_problem():
    row = generate(1, seed=0, high=30)[0]
    assert is_two_step(row)
    assert not is_two_step({**row, "answer": str(int(row["answer"]) + 1)})  # a wrong answer
    assert not is_two_step({**row, "question": row["question"] + " Quickly."})  # other words
    assert not is_two_step({**row, "order": "++" if row["order"] != "++" else "--"})  # another composition's form
    with pytest.raises(ValueError, match="row 2 is not an unedited two-step problem"):
        with_operands([row, {"question": "What is 2 + 2?", "answer": "4"}])


def test_the_bundled_files_split_the_compositions():
    train, worked, heldout = _rows("train.jsonl"), _rows("train-worked.jsonl"), _rows("eval.jsonl")
    assert len(train) >= 1000 and len(heldout) >= 500
    assert all("operands" not in r for r in train + heldout)  # final answers only, as a user's rows
    assert worked == with_operands(train)  # the worked-SFT arm's rows: the same problems worked out
    assert {(r["scenario"], r["order"]) for r in train} == set(compositions_of("seen"))
    assert {(r["scenario"], r["order"]) for r in heldout} == set(compositions_of("unseen"))
    assert all(is_two_step(r) for r in train + heldout)
    assert "two-step" in FAMILIES["math"].generators


def _forms_reading(question: str) -> set[tuple[str, str]]:
    """Every (scenario, order) whose wording reads `question` as one of its problems."""
    return {(s, o) for s in SCENARIOS for o in ORDERS
            if operands_of({"question": question, "scenario": s, "order": o}) is not None}


# (id, the rows, the side of the split they must lie on)
SIDES = [
    ("the bundled training rows", lambda: _rows("train.jsonl"), "seen"),
    ("the bundled worked rows: the same problems, their operands written", lambda: _rows("train-worked.jsonl"), "seen"),
    ("the bundled held-out rows", lambda: _rows("eval.jsonl"), "unseen"),
    ("generated held-out rows of another seed", lambda: generate(400, seed=11, high=MAX_OPERAND,
                                                                  compositions="unseen"), "unseen"),
    ("the seen copy of the held-out rows, as evaluation makes it (training questions excluded)",
     lambda: seen_rows(_rows("eval.jsonl"), seed=0, exclude={r["question"] for r in _rows("train.jsonl")}), "seen"),
]


@pytest.mark.parametrize("rows, side", [c[1:] for c in SIDES], ids=[c[0] for c in SIDES])
def test_a_rows_wording_is_its_composition_alone_and_its_answer_is_the_sum(rows, side):
    # The split is by the words, not only by the `scenario` and `order` columns: each question reads as exactly one
    # composition (the one its columns name, on the right side), so no held-out pairing of wording and order of
    # operations is in a training question under other column values.
    for r in rows():
        assert _forms_reading(r["question"]) == {(r["scenario"], r["order"])}, r["question"]
        assert (r["scenario"], r["order"]) in compositions_of(side)
        a, b, c = operands_of(r)
        assert r["answer"] == str(_value(a, b, c, r["order"])), r["question"]


def test_no_held_out_question_or_its_seen_copy_is_a_training_question():
    train = {r["question"] for r in _rows("train.jsonl")}
    heldout = _rows("eval.jsonl")
    assert not train & {r["question"] for r in heldout}
    copies = seen_rows(heldout, seed=0, exclude=train)
    assert not train & {r["question"] for r in copies}  # seen compositions, yet never a question trained on


def test_the_data_page_names_each_scenarios_held_out_order_with_a_question_of_it():
    page = (Path(__file__).resolve().parents[1] / "docs" / "data.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| (\w+) \| `([+-]{2})` \| (.+) \|$", page, flags=re.M)
    assert {s: o for s, o, _ in table} == UNSEEN and len(table) == len(UNSEEN)
    for scenario, order, question in table:
        assert _forms_reading(question) == {(scenario, order)}, question


def test_data_generate_two_step_writes_either_side_and_the_operands_on_request(tmp_path, capsys):
    out, held = tmp_path / "t.jsonl", tmp_path / "h.jsonl"
    assert main(["data", "generate", "two-step", str(out), "--rows", "20", "--operands"]) == 0
    assert main(["data", "generate", "two-step", str(held), "--rows", "10", "--compositions", "unseen",
                 "--exclude", str(out)]) == 0
    rows, heldout = (json.loads(line) for line in out.read_text().splitlines()), _rows_of(held)
    assert all(len(r["operands"]) == 3 for r in rows)
    assert all((r["scenario"], r["order"]) in compositions_of("unseen") and "operands" not in r for r in heldout)
    assert main(["data", "check", str(held), "--task", "math"]) == 0
    # past what a side holds: refused at once, in one line (the held-out side within --rows' bound, by generate)
    most = generators()["two-step"].most
    assert most == most_rows("seen", MAX_OPERAND) > most_rows("unseen", MAX_OPERAND)
    assert main(["data", "generate", "two-step", str(tmp_path / "x.jsonl"), "--rows", str(most + 1)]) == 2
    assert main(["data", "generate", "two-step", str(tmp_path / "x.jsonl"), "--compositions", "unseen", "--rows",
                 str(most_rows("unseen", MAX_OPERAND) + 1)]) == 2
    assert main(["data", "generate", "two-step", str(tmp_path / "x.jsonl"), "--numbers", "3"]) == 2  # countdown's
    assert main(["data", "generate", "arithmetic", str(tmp_path / "x.jsonl"), "--operands"]) == 2
    err = capsys.readouterr().err
    assert "--numbers: does not apply to two-step" in err and "--operands: does not apply to arithmetic" in err
    assert f"two-step makes at most {most:,} distinct rows" in err
    assert f"at most {most_rows('unseen', MAX_OPERAND):,} distinct unseen problems are drawn" in err
    assert "Traceback" not in err


def _rows_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
