"""What a health detector returns and reads: `Finding`, the run `Context`,
and the helpers over metrics series that every detector uses."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import mean

from grpokit.recipe import HEALTH_CODES
from grpokit.rewards import BUILTIN

NON_FINITE_KEYS = ("loss", "kl", "reward", "grad_norm", "entropy")
# Standard errors of the fitted change a plateau's upper bound adds: ~98% one-sided confidence that the
# reward is not rising faster than plateau_delta per window, so a noisy climb is not called a plateau.
PLATEAU_CONFIDENCE = 2.0


@dataclass
class Finding:
    code: str  # a health code: a row of grpokit.recipe.HEALTH_CODES
    severity: str = field(init=False)  # warning | error: the code's, from its row
    step: int  # the logging step at which the condition was detected
    message: str  # what is wrong and the articles' fix
    evidence: dict = field(default_factory=dict)  # the metric values that triggered it
    since: int | None = None  # the step the problem began (rollback restores a checkpoint before it)
    # The step whose weights the finding measured as good (the held-out probe's best): a rollback restores that
    # step's checkpoint. None: the last checkpoint before `since`.
    restore: int | None = None

    def __post_init__(self):
        self.severity = HEALTH_CODES[self.code].severity

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("since")
        d.pop("restore")
        d["evidence"] = {**self.evidence, "since_step": self.since if self.since is not None else self.step,
                         **({"restore_step": self.restore} if self.restore is not None else {})}
        return d


@dataclass
class Context:
    reward_names: list[str]
    evals: list[dict] = field(default_factory=list)  # [{step, accuracy}] from evaluation, if any
    # Per reward, the highest score one sampled completion earned so far: its full marks as far as seen
    # (a format reward may give 0.2, not 1). Filled by check_step from each step's samples.
    full_marks: dict[str, float] = field(default_factory=dict)

    def see(self, samples: list[dict]) -> None:
        for x in samples:
            rewards = x.get("rewards")
            for name, v in (rewards.items() if isinstance(rewards, dict) else ()):
                if is_finite(v) and v > self.full_marks.get(name, -math.inf):
                    self.full_marks[name] = float(v)
    roles: dict[str, str] = field(default_factory=dict)  # reward -> role (grpokit.task); built-ins by default
    weights: dict[str, float] = field(default_factory=dict)  # reward -> recipe weight (0: logged, not trained on)

    def __post_init__(self):
        self.roles = {**{n: BUILTIN[n].role for n in self.reward_names if n in BUILTIN}, **self.roles}

    def with_role(self, role: str) -> list[str]:
        return [n for n in self.reward_names if self.roles.get(n) == role]

    def trained(self, name: str) -> bool:
        """Whether the policy is trained on the reward (a weight-0 reward is logged only); unknown weights: yes."""
        return self.weights.get(name, 1.0) != 0


# ---------------------------------------------------------------- helpers
def is_finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def metric_series(m: list[dict], key: str) -> list[tuple[int, float]]:
    """(step, value) of every record that logged `key` with a finite value."""
    return [(r["step"], float(r[key])) for r in m if key in r and is_finite(r[key])]


def values_of(s: list[tuple[int, float]]) -> list[float]:
    return [v for _, v in s]


def rounded(x: float, d: int = 4) -> float:
    return round(float(x), d)


def rolling_peak(s: list[tuple[int, float]], w: int, upto: int) -> tuple[float, int]:
    """Highest mean of `w` consecutive values among s[:upto], and the index just after that window."""
    best, end = -math.inf, 0
    for i in range(0, max(0, upto - w) + 1):
        mval = mean(values_of(s[i:i + w]))
        if mval > best:
            best, end = mval, i + w
    return best, end


def reward_names_in(metrics: list[dict]) -> list[str]:
    names = []
    for r in metrics:
        for k in r:
            if k.startswith("rewards/") and k.endswith("/mean") and k[8:-5] not in names:
                names.append(k[8:-5])
    return names


def latest_window(metrics, key: str, n: int) -> list[tuple[int, float]] | None:
    """The last n (step, value) points of `key`, when it was logged at the latest step; None otherwise."""
    points = metric_series(metrics, key)
    return points[-n:] if len(points) >= n and points[-1][0] == metrics[-1]["step"] else None


def trend(s: list[tuple[int, float]]) -> tuple[float, float]:
    """(change, standard error of the change) over `s` from its least-squares line: slope x steps spanned."""
    xs, ys = [float(x) for x, _ in s], values_of(s)
    n, mx, my = len(xs), mean(xs), mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 3 or sxx == 0:
        return 0.0, math.inf
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys)) / (n - 2)
    span = xs[-1] - xs[0]
    return slope * span, math.sqrt(residual / sxx) * span
