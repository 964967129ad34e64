"""The paired verdict: an exact sign test on the rows where two models disagree (pass/fail scores), 2 SE of the
per-row differences otherwise, and verdict words that follow the numbers."""
from __future__ import annotations

import json

import pytest

from grpokit.demo import sft_vs_grpo
from grpokit.demo.common import said
from grpokit.evaluation.paired import Paired, as_paired, paired, sign_test


def test_sign_test_is_the_exact_binomial_tail():
    assert sign_test(4, 0) == 0.125 and sign_test(0, 4) == 0.125
    assert sign_test(3, 0) == 0.25
    assert sign_test(0, 0) == 1.0 and sign_test(5, 5) == 1.0
    # 2 * P(X <= 1) for n = 10: (1 + 10) / 1024 * 2
    assert sign_test(9, 1) == pytest.approx(22 / 1024)


def test_four_rows_of_500_against_none_is_within_noise():
    """The review's case: the 2 SE rule called it beyond noise (the per-row differences barely spread)."""
    x = [1.0] * 4 + [0.0] * 496
    y = [0.0] * 500
    d = paired(x, y)
    assert d.exact and (d.only_x, d.only_y) == (4, 0) and d.p_value == 0.125
    assert abs(d.difference) > 2 * d.se  # what the old rule saw
    assert not d.beyond and "within noise" in d.said() and "p = 0.125" in d.said()


def test_three_rows_that_all_flip_are_within_noise():
    x = [1.0, 1.0, 1.0, 0.0, 1.0]
    y = [0.0, 0.0, 0.0, 0.0, 1.0]
    d = paired(x, y)
    assert (d.only_x, d.only_y) == (3, 0) and not d.beyond


def test_a_clear_difference_is_beyond_noise_both_ways():
    x = [1.0] * 30 + [0.0] * 70
    y = [0.0] * 30 + [0.0] * 70
    assert paired(x, y).clearly_ahead and paired(y, x).clearly_behind


def test_partial_scores_use_two_standard_errors_and_a_stored_difference_reads_back():
    d = paired([1.0, 0.5, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0])
    assert not d.exact and d.p_value is None and "2 SE" in d.said()
    exact = paired([1.0, 1.0, 0.0], [0.0, 1.0, 0.0])
    stored = json.loads(json.dumps(exact.stored()))
    assert d.stored() == [d.difference, d.se]
    assert as_paired(stored) == exact and said(stored) == exact.said()
    assert as_paired([0.1, 0.02]) == Paired(0.1, 0.02) and said(None) == "not measured"


def _models(**accs):
    """Models whose rows pass in order: held-out share a, rewritten share b, on 500 rows."""
    def result(acc):
        return {"accuracy": acc, "rows": 500, "scores": [float(i < round(acc * 500)) for i in range(500)]}

    return {n: {"sets": {"heldout": result(a), "rewritten": result(b)}, "minutes": None} for n, (a, b) in accs.items()}


def test_a_grpo_within_noise_behind_is_not_clearly_behind_never_not_behind():
    """demo/sft_vs_grpo.py printed "GRPO is not behind it there" when GRPO was behind within noise."""
    lines = sft_vs_grpo.verdict(_models(base=(0.1, 0.1), sft=(0.70, 0.45), grpo=(0.50, 0.44),
                                        **{"sft-then-grpo": (0.70, 0.45), "grpo-then-sft": (0.50, 0.44)}))
    rewritten = lines[-1]
    assert "not clearly behind" in rewritten and "not behind it there" not in rewritten.replace("not clearly", "")
    assert "claim holds" not in rewritten and "p = " in rewritten
