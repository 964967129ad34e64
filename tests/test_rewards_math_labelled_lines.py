"""math_correctness over the labelled table of final-answer lines (tests/fixtures/final_answer_lines.jsonl).

Each row: `text` (a completion), `gold`, `score` (what the reward must give), `label` (the truth: hedge, honest
or wrong), `lang`, `kind` (the shape: hedge, parenthesised, next-line, boxed, in-value, derivation,
unit-conversion, superscript, plain, demo, premise, list-shape, undecidable) and a `note` where the row needs one.
Where `score` and `label` disagree the row is one shape cannot decide (grpokit.rewards.math_clauses says why), and
its `note` starts "undecidable by shape": pinned, so that a change to the rule shows here. The accuracy figures
in docs/rewards.md come from `benchmarks/final_answer_accuracy.py` on this table.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from grpokit.rewards.math import check_math
from grpokit.rewards.registry import build_reward

TABLE = Path(__file__).parent / "fixtures" / "final_answer_lines.jsonl"
ROWS = [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_table_covers_what_the_issue_asks():
    assert len(ROWS) >= 150
    both = {lang for lang in {r["lang"] for r in ROWS}
            if {"hedge", "honest"} <= {r["label"] for r in ROWS if r["lang"] == lang}}
    assert len(both) >= 5, both  # hedges and honest explanations in at least 5 languages
    kinds = Counter(r["kind"] for r in ROWS)
    assert all(kinds[k] >= 3 for k in ("boxed", "parenthesised", "next-line", "superscript", "unit-conversion")), kinds
    texts = "\n".join(r["text"] for r in ROWS)
    for line in ["Final answer: 12\nThough 13 is also possible.", "\\boxed{12}, though 13 is possible",
                 "12, that is 13", "12, which is 13", "12, namely 13", "12, so 13", "12, hence 13",
                 "12, though 13 + 0 is also possible", "12 (13 for 2 people)", "Final answer: 4²",
                 "12, which is 3 more than 9", "12 hours, i.e. 720 minutes", "aunque", "obwohl"]:
        assert line in texts, line  # every line the issue quotes
    assert all(r["note"].startswith("undecidable by shape") for r in ROWS
               if (r["score"] == 1.0) != (r["label"] == "honest")), "a row the rule gets wrong must say why"


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r['lang']}-{r['kind']}" for i, r in enumerate(ROWS)])
def test_each_line_scores_as_labelled(row):
    verdict = check_math(row["text"], row["gold"])
    assert verdict.reward == row["score"], (verdict, row.get("note"))


def test_the_registered_reward_agrees_in_one_batch():
    # The TRL-facing reward scores the whole table in one call exactly as check_math does row by row.
    score = build_reward("math_correctness")
    got = score(prompts=None, completions=[r["text"] for r in ROWS], answer=[r["gold"] for r in ROWS])
    assert got == [r["score"] for r in ROWS]
