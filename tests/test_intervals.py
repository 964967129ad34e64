"""The noise beside every accuracy: the Wilson interval (one place, grpokit.evaluation.intervals), printed by
eval's, compare's and the report's tables; tables printed off a terminal keep every header and value whole."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from grpokit.console import print_table
from grpokit.evaluation import pct, pct_interval, results_table, wilson_interval
from grpokit.evaluation.compare import _rows, compare_table


@pytest.mark.parametrize(
    "k,n,low,high",
    [
        (10, 12, 0.5520, 0.9530),  # the "83.3%" on 12 rows
        (0, 10, 0.0, 0.2775),  # 0 right is not "certainly 0": Wilson's textbook upper bound
        (10, 10, 0.7225, 1.0),
        (32, 64, 0.3810, 0.6190),
    ],
)
def test_wilson_interval_known_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=5e-4) and hi == pytest.approx(high, abs=5e-4)


def test_wilson_refuses_impossible_counts():
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


def test_pct_says_the_interval_where_the_rows_are_known():
    assert pct_interval(0.5, 12) == "50.0% (25–75)" == pct(0.5, 12)
    assert pct(0.5) == "50.0%" and pct(None, 12) == "-"


def _entry(step, acc, rows=12):
    h = {
        "accuracy": acc,
        "rows": rows,
        "pass_at_k": {"1": acc, "4": min(1.0, acc + 0.2)},
        "format_rate": 1.0,
        "refusal_rate": 0.0,
        "mean_length": 31.2,
        "truncated_rate": 1.0,
    }
    return {
        "step": step,
        "heldout": h,
        "perturbed": {"accuracy": 0.4167, "rows": rows},
        "train": {"accuracy": 0.5, "rows": rows},
        "gap": {"value": 0.083, "flagged": False},
    }


RESULTS = {
    "metric": "accuracy",
    "rows": 12,
    "data": "data/train.jsonl",
    "samples_per_problem": 4,
    "checkpoints": [_entry(0, 0.5), _entry(4, 10 / 12)],
    "best": {"step": 4, "accuracy": 10 / 12},
}


def test_the_eval_table_off_a_terminal_keeps_its_headers_and_values():
    out = Console(file=io.StringIO(), highlight=False, soft_wrap=True)  # a pipe: not a terminal, 80 columns
    assert not out.is_terminal and out.width == 80
    print_table(results_table(RESULTS), out)
    text = out.file.getvalue()
    assert "…" not in text
    for cell in (
        "accuracy",
        "perturbed",
        "sampled pass@1",
        "sampled pass@4",
        "refusal",
        "cut off",
        "50.0% (25–75)",
        "83.3% (55–95)",
        "41.7% (19–68)",
        "100.0%",
    ):
        assert cell in text, cell
    assert out.width == 80  # the console is as it was


def test_compare_prints_the_interval_beside_each_accuracy():
    runs = [
        {
            "run": f"runs/{name}",
            "kind": name,
            "results": {"rows": 12, "best": {"step": 4}},
            "entry": _entry(4, acc),
            "rewritten": None,
        }
        for name, acc in (("grpo", 10 / 12), ("sft", 0.5))
    ]
    rows = _rows(runs, None)
    assert ["held-out accuracy", "83.3% (55–95)", "50.0% (25–75)"] in rows
    assert ["perturbed-numbers accuracy", "41.7% (19–68)", "41.7% (19–68)"] in rows
    out = Console(file=io.StringIO(), highlight=False)
    print_table(compare_table({"runs": runs, "rows": rows}), out)
    assert "…" not in out.file.getvalue()
