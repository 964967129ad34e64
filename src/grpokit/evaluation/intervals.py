"""The noise beside an accuracy: a 95% Wilson score interval, the one every printed accuracy carries.

    wilson_interval(10, 12)          # (0.552, 0.953): 10 of 12 right
    share_interval(0.833, 12)        # the same from a share and a row count
    pct_interval(0.833, 12)          # "83.3% (55–95)": what `grpokit eval`, `report` and `compare` print

Why Wilson and not ± 2 standard errors: on the few rows a user's own task holds out, p ± 2 sqrt(p(1-p)/n) is
0 wide at 0% and 100% (12 of 12 right is not certainty) and runs below 0 or above 100 near them; Wilson's
interval (Wilson, 1927; Agresti & Coull, 1998) stays inside [0, 1] and keeps near its nominal 95% coverage at
small n, where the exact Clopper-Pearson interval is wider than it needs to be. z = 1.96.

A graded metric (json_fields: the mean share of fields right) is not a count of successes; its interval here
treats the mean as a share of `n` rows, an approximation (its spread is at most that of a pass/fail score of the
same mean, so the interval is not too narrow). Two models on the same rows are compared by the paired test
(grpokit.evaluation.paired), never by whether their intervals overlap.
"""

from __future__ import annotations

import math

Z95 = 1.96  # the normal quantile of a two-sided 95% interval


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for `successes` out of `n` (both >= 0, successes <= n): (low, high) in [0, 1]."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need n >= 1 and 0 <= successes <= n, got successes={successes} n={n}")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def share_interval(share: float, n: int, z: float = Z95) -> tuple[float, float]:
    """`wilson_interval` from a share (0..1) of `n` rows."""
    return wilson_interval(min(max(share, 0.0), 1.0) * n, n, z)


def pct_interval(share: float | None, n: int | None) -> str:
    """A share as a percentage with its 95% Wilson interval in whole points: "83.3% (55–95)"; "-" for no share,
    the bare percentage where the row count is unknown."""
    if share is None:
        return "-"
    if not n:
        return f"{100 * share:.1f}%"
    low, high = share_interval(share, int(n))
    return f"{100 * share:.1f}% ({100 * low:.0f}–{100 * high:.0f})"
