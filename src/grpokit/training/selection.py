"""Signal-aware prompt selection: spend generation on prompts that still carry a learning signal.

    grpokit train recipes/smollm2-arithmetic.yaml --set selection.enabled=true --set selection.refill=true

A GRPO group teaches nothing when all its completions score the same: a
prompt the model always solves, or never does. grpokit keeps a pass-rate
estimate per training prompt (`PassRates`): seeded from the run's
preflight.json when `preflight.prompts` > 0 made one, then updated from
the rewards of every generation batch training computes (the group mean of
the reward with the `correctness` role when the recipe has one, else whether the
total reward has a spread, a tie at the best total seen counting as solved).
Each prompt is in one band:

  unseen          no estimate yet
  never_solved    estimate <= band_margin
  mixed           strictly between: the group's completions differ, so it carries signal
  always_solved   estimate >= 1 - band_margin

With `selection.enabled`, each step's prompts are drawn (`SignalSampler`,
TRL's RepeatSampler layout) slot by slot: a band with probability
`mixed_share` / `unseen_share` / the rest (revisits of never/always
solved prompts, which the model may have moved on), renormalised over the
bands that still have prompts, then a prompt uniformly within it. Off, TRL's
own sampler runs unchanged (and `train.shuffle_dataset` decides its order).

The bands are logged every step either way (`grpokit/bands/<band>`: share of
the training prompts), with `grpokit/signal_groups` (share of the groups
trained on that have a reward spread); see grpokit.training.refill for the trainer
side and for DAPO's dynamic sampling (`selection.refill`).

Not covered: choices are made when the data loader fetches a batch, which
accelerate does one batch ahead, so a step's prompts are chosen before the
previous step's rewards are known (the estimates lag one step).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import SelectionConfig
from grpokit.run.files import note, parse_json
from grpokit.run.writer import write_file

BANDS = ("unseen", "never_solved", "mixed", "always_solved")
STATE_FILE = "grpokit_selection.json"  # written into each checkpoint folder: resume continues the estimates
_EPS = 1e-9


def check_processes(config: SelectionConfig, processes: int, rows_per_process: int, group: int) -> None:
    """With several processes, refill keeps and replaces whole groups on each process: every process's share of a
    generation batch (`rows_per_process` = per_device_train_batch_size x steps_per_generation) must hold whole
    groups of `group` completions (checked before a launch and again in each process)."""
    if config.refill and processes > 1 and rows_per_process % group:
        raise GrpokitError([Problem(
            "selection.refill", f"with {processes} processes each one generates {rows_per_process} completions "
            f"per step, which is not a whole number of groups of train.num_generations {group}: a group would "
            "span two processes, and refill keeps or replaces whole groups",
            f"make train.per_device_train_batch_size (x gradient_accumulation_steps) a multiple of {group}, or set "
            "selection.refill: false for this layout")])


def prompt_key(prompt) -> str:
    """A dataset prompt as a dict key (conversational prompts are lists of messages)."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, ensure_ascii=False)


class PassRates:
    """Per-prompt pass-rate estimates (an exponential moving average per group seen) and their bands."""

    def __init__(self, n: int, ema: float = 0.5, band_margin: float = 0.05):
        self.rate: list[float | None] = [None] * n
        self.seen = [0] * n
        self.ema, self.margin = ema, band_margin

    def observe(self, index: int, rate: float) -> None:
        rate = min(1.0, max(0.0, float(rate)))
        old = self.rate[index]
        self.rate[index] = rate if old is None else (1 - self.ema) * old + self.ema * rate
        self.seen[index] += 1

    def band(self, index: int) -> str:
        r = self.rate[index]
        if r is None:
            return "unseen"
        if r <= self.margin + _EPS:
            return "never_solved"
        if r >= 1 - self.margin - _EPS:
            return "always_solved"
        return "mixed"

    def members(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {b: [] for b in BANDS}
        for i in range(len(self.rate)):
            out[self.band(i)].append(i)
        return out

    def shares(self) -> dict[str, float]:
        n = max(1, len(self.rate))
        return {b: len(ix) / n for b, ix in self.members().items()}

    def state(self) -> dict:
        return {"rate": self.rate, "seen": self.seen}

    def load(self, state: dict) -> None:
        if len(state.get("rate", [])) == len(self.rate):  # another dataset: start over rather than misattribute
            self.rate, self.seen = list(state["rate"]), list(state["seen"])


def choose(rates: PassRates, k: int, rng: random.Random, shares: tuple[float, float], exclude=()) -> list[int]:
    """k distinct prompt indexes: each slot picks a band (mixed, unseen, revisit) by `shares` = (mixed, unseen),
    renormalised over the bands with prompts left, then a prompt uniformly within it."""
    members = rates.members()
    taken = set(exclude)
    pools = {"mixed": [i for i in members["mixed"] if i not in taken],
             "unseen": [i for i in members["unseen"] if i not in taken],
             "revisit": [i for i in members["never_solved"] + members["always_solved"] if i not in taken]}
    weight = {"mixed": shares[0], "unseen": shares[1], "revisit": max(0.0, 1 - shares[0] - shares[1])}
    out: list[int] = []
    while len(out) < k:
        live = [b for b in pools if pools[b]]
        if not live:
            break
        w = [weight[b] for b in live]
        band = rng.choices(live, weights=w)[0] if sum(w) > 0 else rng.choice(live)  # only zero-share bands left
        out.append(pools[band].pop(rng.randrange(len(pools[band]))))
    return out


class Selector:
    """The run's estimates, the dataset's prompt keys and the recipe's choice settings."""

    def __init__(self, config: SelectionConfig, prompts: list, questions: list | None, seed: int,
                 correctness: str | None, weights: dict[str, float]):
        self.config, self.seed = config, seed
        self.rates = PassRates(len(prompts), config.ema, config.band_margin)
        self.by_key: dict[str, list[int]] = {}
        for i, p in enumerate(prompts):
            self.by_key.setdefault(prompt_key(p), []).append(i)
        self.questions = questions
        self.correctness, self.weights = correctness, weights
        # The highest and lowest total reward seen: without a correctness reward, a tie at the best counts as solved.
        self.best_total: float | None = None
        self.worst_total: float | None = None

    def __len__(self) -> int:
        return len(self.rates.rate)

    def seed_from_preflight(self, path: Path) -> int:
        """Estimates from preflight.json's per-prompt results, matched by question; returns how many were seeded."""
        try:
            report = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0
        if not self.questions:
            return 0
        by_question: dict[str, list[int]] = {}
        for i, q in enumerate(self.questions):
            by_question.setdefault(prompt_key(q), []).append(i)
        seeded = 0
        for p in report.get("per_prompt", []):
            rate = p.get("correct_rate")
            if rate is None:
                rate = 0.5 if not p.get("zero_variance") else None
            for i in by_question.get(prompt_key(p.get("question")), []) if rate is not None else []:
                self.rates.observe(i, rate)
                seeded += 1
        return seeded

    def group_rate(self, rewards: dict[str, list], rows: range) -> float:
        """A group's pass rate: the correctness reward's mean, else 0.5 for a spread, 1 for a tie at the best total
        reward seen so far and 0 for any other tie."""
        if self.correctness in rewards:
            vals = [v for v in (rewards[self.correctness][r] for r in rows) if v is not None and v == v]
            if vals:
                return sum(vals) / len(vals)
        totals = [sum(w * (rewards[n][r] if rewards[n][r] == rewards[n][r] and rewards[n][r] is not None else 0.0)
                      for n, w in self.weights.items() if n in rewards) for r in rows]
        top, low = max(totals), min(totals)
        self.best_total = top if self.best_total is None else max(self.best_total, top)
        self.worst_total = low if self.worst_total is None else min(self.worst_total, low)
        if top - low > _EPS:
            return 0.5
        # A tie at the best total seen (when totals have differed at all) is solved; any other tie is not.
        return 1.0 if top >= self.best_total - _EPS and self.best_total > self.worst_total + _EPS else 0.0

    def observe(self, prompts: list, rewards: dict[str, list], group: int) -> None:
        """Update from one generation batch: rows in groups of `group` consecutive completions of one prompt."""
        for start in range(0, len(prompts) - group + 1, group):
            rate = self.group_rate(rewards, range(start, start + group))
            for i in self.by_key.get(prompt_key(prompts[start]), []):
                self.rates.observe(i, rate)

    def pick(self, k: int, rng: random.Random, exclude=()) -> list[int]:
        return choose(self.rates, k, rng, (self.config.mixed_share, self.config.unseen_share), exclude)

    def rng(self, *parts) -> random.Random:
        """A generator fixed by the seed and `parts` (str seeds hash the same in every process and run)."""
        return random.Random(":".join(str(p) for p in (self.seed, *parts)))

    def save(self, folder: Path) -> None:
        write_file(Path(folder) / STATE_FILE, json.dumps({**self.rates.state(), "best_total": self.best_total,
                                                          "worst_total": self.worst_total}), within=folder)

    def load(self, folder: Path) -> bool:
        path = Path(folder) / STATE_FILE
        if not path.is_file():
            return False
        try:
            state = parse_json(path.read_bytes().decode("utf-8"))
            if not isinstance(state, dict):
                raise ValueError("not a JSON object")
        except (UnicodeDecodeError, ValueError) as e:  # a hand-made or cut file: the estimates start over, said
            note(f"{path}: not the estimates grpokit saved ({str(e)[:80]}); the prompt estimates start over")
            return False
        self.rates.load(state)
        self.best_total, self.worst_total = state.get("best_total"), state.get("worst_total")
        return True


class SignalSampler:
    """TRL's RepeatSampler layout (each chunk of `batch_size` prompts repeated, each prompt `mini_repeat_count`
    times in a row), with each chunk chosen by `Selector.pick` when the data loader asks for it."""

    def __init__(self, selector: Selector, mini_repeat_count: int, batch_size: int, repeat_count: int):
        self.selector, self.mini, self.batch, self.repeat = selector, mini_repeat_count, batch_size, repeat_count
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return (len(self.selector) // self.batch) * self.batch * self.mini * self.repeat

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        for chunk in range(len(self.selector) // self.batch):
            picked = self.selector.pick(self.batch, self.selector.rng("chunk", epoch, chunk))
            for _ in range(self.repeat):
                for index in picked:
                    yield from [index] * self.mini
