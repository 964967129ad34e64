"""Two models on the same rows: their difference, its noise, and for pass/fail rows an exact test.

    d = paired(x_scores, y_scores)        # Paired: x's share minus y's, its standard error, the discordant rows
    d.beyond                              # beyond noise (below)
    d.said()                              # "+0.8 points (within noise: 4 rows right only for the first, 0 only for
                                          #  the second, exact sign test p = 0.125)"

Where every row's score is pass or fail (0 or 1, as an evaluation's `scores`), the difference is beyond noise when
the exact two-sided sign test on the rows where the two disagree (McNemar's exact test) gives p < ALPHA: only those
rows carry information, and under "no difference" each of them is equally likely to go either way. Four rows of
500 right for one model and none for the other give p = 0.125 (within noise); three rows that all flip the same
way give p = 0.25. A normal-approximation rule (|d| > 2 SE of the per-row differences) calls both "beyond noise":
with all the disagreements one way the spread of the differences is tiny, and with none at all it is 0.
Where scores are not pass/fail (a row's share of samples that passed, a partial reward), the rule is 2 standard
errors of the mean per-row difference, and the text says so. Two evaluations of different rows (no per-row scores
to pair) are two independent shares: 2 standard errors of their difference, larger, since it ignores that the rows
are shared.

The exact binomial tail is computed here with math.comb (a few lines) rather than taken from scipy.stats.binomtest
or statsmodels' mcnemar: neither library is a dependency of grpokit, and both would be for this one sum.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

ALPHA = 0.05  # two-sided, the level of the 2-standard-error rule it replaces for pass/fail rows
SIGMAS = 2.0  # for scores that are not pass/fail: beyond noise past this many standard errors


def sign_test(wins: int, losses: int) -> float:
    """The exact two-sided p-value of `wins` against `losses` (the rows where two models disagree) when either is
    equally likely: 2 * P(Binomial(n, 1/2) <= min), at most 1; 1.0 for no disagreement.

    >>> sign_test(4, 0)
    0.125
    >>> round(sign_test(30, 12), 4)
    0.0081
    """
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def share_stderr(p: float | None, n: int) -> float:
    """The standard error of a share `p` of `n` rows (nan where there is none)."""
    return math.sqrt(p * (1 - p) / n) if p is not None and n else float("nan")


class Paired(NamedTuple):
    """x minus y (a share, 0-1) with its standard error; `only_x` / `only_y`: rows x passed and y failed and the
    reverse, where both were scored pass/fail on the same rows (else None: the 2 SE rule applies). A tuple, so
    `d, se = paired(...)` and a JSON list of it read back with `Paired(*values)`."""

    difference: float
    se: float
    only_x: int | None = None
    only_y: int | None = None

    @property
    def exact(self) -> bool:
        return self.only_x is not None and self.only_y is not None

    @property
    def p_value(self) -> float | None:
        """The exact sign test's p on the disagreeing rows; None where the scores are not pass/fail."""
        return sign_test(self.only_x, self.only_y) if self.exact else None

    @property
    def beyond(self) -> bool:
        """Beyond noise: p < ALPHA (pass/fail rows) or |difference| > SIGMAS standard errors (the rest)."""
        if self.exact:
            return self.p_value < ALPHA
        return abs(self.difference) > SIGMAS * self.se

    @property
    def clearly_ahead(self) -> bool:
        return self.beyond and self.difference > 0

    @property
    def clearly_behind(self) -> bool:
        return self.beyond and self.difference < 0

    def noise(self) -> str:
        if self.exact:
            return (f"{self.only_x} row(s) right only for the first, {self.only_y} only for the second, exact sign "
                    f"test p = {self.p_value:.3g}")
        return f"2 SE = {100 * SIGMAS * self.se:.1f}"

    def stored(self) -> list:
        """As a JSON list: [difference, se], with the disagreeing rows where they were counted (as_paired reads
        either)."""
        return list(self) if self.exact else [self.difference, self.se]

    def said(self) -> str:
        """The difference in points and whether it is beyond noise, with the test that says so."""
        return f"{100 * self.difference:+.1f} points ({'beyond' if self.beyond else 'within'} noise: {self.noise()})"


def _pass_fail(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def paired(x: Sequence[float | None], y: Sequence[float | None]) -> Paired | None:
    """x's mean minus y's over the rows both scored (per-row scores of the same rows, in the same order); None
    where fewer than two rows were scored by both."""
    if len(x) != len(y):
        raise ValueError(f"paired scores need the same rows: {len(x)} against {len(y)}")
    pairs = [(p, q) for p, q in zip(x, y) if p is not None and q is not None]
    if len(pairs) < 2:
        return None
    d = [p - q for p, q in pairs]
    mean = sum(d) / len(d)
    se = math.sqrt(sum((v - mean) ** 2 for v in d) / (len(d) - 1) / len(d))
    if _pass_fail([p for p, _ in pairs]) and _pass_fail([q for _, q in pairs]):
        return Paired(mean, se, sum(1 for p, q in pairs if p > q), sum(1 for p, q in pairs if q > p))
    return Paired(mean, se)


def unpaired(x: float, x_rows: int, y: float, y_rows: int) -> Paired:
    """Two shares of different rows (no per-row scores to pair): the 2 SE rule on their independent errors."""
    return Paired(x - y, math.hypot(share_stderr(x, x_rows), share_stderr(y, y_rows)))


def as_paired(value) -> Paired | None:
    """A difference as stored (a Paired, or its JSON list: [d, se] or [d, se, only_x, only_y]); None stays None."""
    if value is None or isinstance(value, Paired):
        return value
    return Paired(*value)
