"""The health detectors that judge what the model has learned and lost (monitor.py runs them through
grpokit.health.detectors.DETECTORS): a format or a correctness that fell from its learned level, a format never
learned, the held-out probe's drop, and a reward rising while the correctness it should pay does not (reward
hacking); and `best_probed`, which of the weights a rollback can restore the probe scored best. Each is a pure
function of the metrics so far, as every detector is (grpokit.health.detectors).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import mean
from typing import Callable

from grpokit.health.findings import Finding, is_finite, metric_series, rolling_peak, rounded, values_of
from grpokit.rewards import BUILTIN, LEARNED_REWARDS
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS


def _fallen(metrics, context, code: str, role: str, w: int, learned: float, drop: float, floor: float,
            message: Callable[[str, float, float, float], str]) -> Finding | None:
    """`code` for the first reward of `role` whose learned level (its mean from the best `w`-step window up to the
    last `w` steps) reached `learned` x its full marks and whose last `w` steps' mean then fell below `drop` x that
    level; `message(name, peak, now, full)` says what and the fix.
    Full marks: the best score a sampled completion earned, else the best step mean, at least `floor`."""
    for name in context.with_role(role):
        f = metric_series(metrics, f"rewards/{name}/mean")
        if len(f) < 2 * w or f[-1][0] != metrics[-1]["step"]:
            continue
        # The learned level runs from the best w-step window to the recent one: the best window alone rides the
        # noise (on countdown, whose step means spread by 0.085 around 0.15 with nothing learned or lost, it fired
        # three times in one run: docs/measurements.md "Countdown: where many answers are right"), while a fall
        # right after the best window (the demo at a too-high learning rate) still reads the best window alone.
        best, end = rolling_peak(f, w, len(f) - w)
        peak = mean(values_of(f[end - w:len(f) - w]))
        now = mean(values_of(f[-w:]))
        full = context.full_marks.get(name, max(floor, max(values_of(f))))
        if full > 0 and peak >= learned * full and now < drop * peak:
            return Finding(code, f[-1][0], message(name, peak, now, full),
                           {"reward": name, "peak_mean": rounded(peak), "recent_mean": rounded(now), "full_marks": rounded(full),
                            "learned_share": learned, "drop_threshold": drop},
                           since=f[min(end, len(f) - 1)][0])
    return None


def detect_format_collapse(metrics, samples, config, context) -> Finding | None:
    # "Learned" is relative to the reward's own full marks, not an absolute level: a format reward worth
    # 0.2 (the Qwen3-0.6B-Base article's weighting written into the reward) that falls 0.2 -> 0.02 has collapsed.
    return _fallen(metrics, context, "format_collapse", "format", config.window, config.format_learned, config.format_drop, 0.0,
                   lambda name, peak, now, full:
                   f"the {name} reward had been learned (mean {rounded(peak)} of full marks {rounded(full)}) and fell "
                   f"to {rounded(now)}. Fix (Qwen3-0.6B-Base article): keep the format weight at 0.15 or more of the total, do "
                   "not lower it too fast, and resume from a checkpoint where the format was stable")


def detect_format_never_learned(metrics, samples, config, context) -> Finding | None:
    # format_collapse needs a format learned first; a run that never learns it said nothing (a bf16 demo arm's
    # format reward stayed at 0.00-0.12 for all 30 steps). Full marks: 1.0 for the built-in format rewards (they
    # score 0..1, and a run that never learns the format may never log a sample that earned it), an own reward's best
    # score seen. Weight-0 rewards (the preference recipe's direct_answer rule) are logged checks, not trained on.
    n, w = config.format_never_steps, config.window
    for name in context.with_role("format"):
        f = metric_series(metrics, f"rewards/{name}/mean")
        if not context.trained(name) or len(f) < n or f[-1][0] != metrics[-1]["step"]:
            continue
        best, _ = rolling_peak(f, min(w, len(f)), len(f))
        full = 1.0 if name in BUILTIN else max(context.full_marks.get(name, 0.0), max(values_of(f)))
        if full > 0 and best >= config.format_never_share * full:
            continue
        first, last = f[0][0], f[-1][0]
        return Finding("format_never_learned", last,
                       f"the {name} reward has stayed low since the start: over steps {first}-{last} its running "
                       f"mean never reached {config.format_never_share:g} of full marks ({rounded(full)}; best "
                       f"{rounded(best)}, now {rounded(f[-1][1])}). The model is not learning the format, so answers "
                       "the format refuses earn nothing either. Fix: start from a model that writes the format, a "
                       "short SFT warm start on worked solutions (`grpokit sft` with the same template and rows, then "
                       "`grpokit train RECIPE --init-from` the SFT run), or raise the format reward's weight (the "
                       "Qwen3-0.6B-Base article: 0.4-0.5 at first, about 0.1 once the format is stable); read "
                       "samples.jsonl for what the completions write instead (`grpokit rewards score` says why one "
                       "fails). A base model may need more steps (the Qwen3-0.6B-Base article: tens, even a hundred)",
                       {"reward": name, "best_running_mean": rounded(best), "recent": rounded(f[-1][1]),
                        "full_marks": rounded(full), "steps": [first, last], "share": config.format_never_share,
                        "window": w}, since=first)
    return None


def detect_probe_drop(metrics, samples, config, context) -> Finding | None:
    # The held-out probe (grpokit.training.probe): fixed held-out rows answered greedily at step 0 and at every
    # checkpoint and scored by the task's verifier, so unlike the training rewards it does not depend on which
    # prompts were drawn. Its latest score is judged against the best earlier one on as many rows (ties: the earlier
    # step); the noise allowance and why: HEALTH_CODES["probe_drop"]. A finding names the best step, whose checkpoint
    # a rollback restores (the probe measured exactly those weights).
    points = metric_series(metrics, PROBE_ACCURACY)
    rows = dict(metric_series(metrics, PROBE_ROWS))
    if len(points) < 2 or not rows.get(points[-1][0]):
        return None
    step, now = points[-1]
    n = int(rows[step])
    fall = probe_fall([m for m in metrics if m.get("step", 0) < step], now, n, config)
    if fall is None or not fall.beyond_noise:
        return None
    best_step, best, noise, drop = fall.best_step, fall.best, fall.noise, fall.drop
    return Finding("probe_drop", step,
                   f"the held-out probe fell from {rounded(100 * best, 1)}% (step {best_step}) to "
                   f"{rounded(100 * now, 1)}% (step {step}) on the same {n} held-out rows, answered greedily: "
                   f"{rounded(drop / noise, 1) if noise else 'inf'} standard errors, beyond its noise. The model is "
                   "getting worse on questions it does not train on, whatever the training reward says. Fix: lower "
                   "train.learning_rate (the Qwen3-0.6B-Base article: 1e-6 to 5e-6; a model that already learned the "
                   "task, e.g. --init-from an SFT run, loses it fastest), raise beta to hold the policy near where it "
                   f"started, and restart from {f'checkpoint-{best_step}' if best_step else 'the initial model'} "
                   "(health action rollback restores it, halves the learning rate and doubles beta); `grpokit eval` "
                   "scores every checkpoint on every held-out row",
                   {"best": rounded(best), "best_step": best_step, "now": rounded(now), "rows": n,
                    "drop": rounded(drop), "noise": rounded(noise), "noise_errors": config.probe_noise,
                    "drop_min": config.probe_drop_min}, since=best_step + 1, restore=best_step)


@dataclass(frozen=True)
class ProbeFall:
    """A probe reading against the best earlier one on as many rows (ties: the earlier step)."""
    best_step: int
    best: float
    now: float
    rows: int
    noise: float  # the standard error of the difference of two shares of `rows` at their pooled level
    beyond_noise: bool  # probe_drop's rule: a fall of probe_drop_min or more and probe_noise standard errors

    @property
    def drop(self) -> float:
        return self.best - self.now


def probe_fall(earlier_metrics: list[dict], now: float, rows: int, config) -> ProbeFall | None:
    """`now` (a probe reading on `rows` rows) against the best probe reading on as many rows in `earlier_metrics`;
    None when there is none. One rule for probe_drop and for a probe confirming a finding (grpokit.health.monitor)."""
    counts = dict(metric_series(earlier_metrics, PROBE_ROWS))
    earlier = [(st, v) for st, v in metric_series(earlier_metrics, PROBE_ACCURACY) if counts.get(st) == rows]
    if not earlier or rows <= 0:
        return None
    best_step, best = max(earlier, key=lambda p: (p[1], -p[0]))
    pooled = (best + now) / 2
    noise = math.sqrt(max(pooled * (1 - pooled), 0.0) * 2 / rows)
    drop = best - now
    return ProbeFall(best_step, best, now, rows, noise,
                     drop >= config.probe_drop_min and drop >= config.probe_noise * noise)


def smallest_confirmed_fall(best: float, rows: int, config) -> float | None:
    """The smallest fall from `best` (a probe reading on `rows` rows) that probe_drop's rule confirms, as a share;
    None when not even a fall to 0 is confirmed. Falls come in whole rows, so it is a number of rows over `rows`:
    on 48 rows, from 18.8% it is 14.6 points, from 43.8% to 77.1% it is 20.8 (the probe cannot see a smaller one)."""
    if rows <= 0:
        return None
    top = round(best * rows)
    for fallen in range(1, top + 1):
        now = (top - fallen) / rows
        pooled = (top / rows + now) / 2
        noise = math.sqrt(max(pooled * (1 - pooled), 0.0) * 2 / rows)
        drop = fallen / rows
        if drop >= config.probe_drop_min and drop >= config.probe_noise * noise:
            return drop
    return None


def best_probed(metrics: list[dict], steps: list[int]) -> tuple[int, dict[int, float]] | None:
    """Of `steps` (weights a rollback can restore: 0 is the initial model), the one the held-out probe scored
    highest, with the readings it chose among: those on as many rows as the newest probed step's (ties: the newer
    step, which loses fewer steps). None when no step in `steps` was probed.

    Why a rollback asks: the checkpoint before a finding's `since` can already have lost what the run started with.
    In the exploring arm of GRPO after SFT (seed 1) the probe read 56.2% at step 0 and 45.8% at checkpoint-10, within the noise
    of its 48 rows, so no probe_drop; entropy_collapse then restored checkpoint-10 and the run ended 6 points below
    its start (docs/measurements.md "GRPO after SFT, three ways"). The best reading is the best estimate there is of
    which weights are best, whatever the noise: a rollback is already happening, so the question is only where to."""
    counts = dict(metric_series(metrics, PROBE_ROWS))
    readings = {st: v for st, v in metric_series(metrics, PROBE_ACCURACY) if st in steps and counts.get(st)}
    if not readings:
        return None
    rows = counts[max(readings)]
    readings = {st: v for st, v in readings.items() if counts[st] == rows}
    return max(readings, key=lambda st: (readings[st], st)), readings


def detect_correctness_collapse(metrics, samples, config, context) -> Finding | None:
    # The policy unlearns what it had learned: the training correctness (on the prompts it is given) rose, then
    # fell and stays down. Seen on the demo recipe at a too-high constant learning rate, the format kept and the
    # entropy still far from collapse: every group ended all-wrong while no other detector fired
    # (docs/measurements.md "Health and rollback"). Full marks are at least 1 (a right answer's score).
    return _fallen(metrics, context, "correctness_collapse", "correctness", config.window, config.correctness_learned,
                   config.correctness_drop, 1.0,
                   lambda name, peak, now, full:
                   f"the {name} reward had risen to a running mean of {rounded(peak)} and fell to {rounded(now)}: "
                   "the policy is unlearning the task. Fix: lower learning_rate or let it decay "
                   "(lr_scheduler_type cosine), add a KL penalty (beta > 0), and restart from the last "
                   "checkpoint before the fall (health action rollback does all three); `grpokit eval` "
                   "finds the best checkpoint")


def detect_reward_hacking(metrics, samples, config, context) -> Finding | None:
    step = metrics[-1]["step"]
    correct = context.with_role("correctness")
    # (a) the training reward climbs while the correctness component stays flat.
    total = [p for p in metric_series(metrics, "reward") if p[0] > config.warmup_steps][-config.plateau_steps:]
    w = config.window
    if correct and len(context.reward_names) > 1 and len(total) >= 2 * w and total[-1][0] == step:
        lo, hi = total[0][0], total[-1][0]
        rise = mean(values_of(total[-w:])) - mean(values_of(total[:w]))
        moves = {}
        for n in correct:
            c = [p for p in metric_series(metrics, f"rewards/{n}/mean") if lo <= p[0] <= hi]
            if len(c) >= 2 * w:
                moves[n] = mean(values_of(c[-w:])) - mean(values_of(c[:w]))
        if moves and rise >= config.hacking_rise and all(v < config.hacking_flat for v in moves.values()):
            return Finding("reward_hacking_suspected", step,
                           f"the total reward rose by {rounded(rise)} over steps {lo}-{hi} while "
                           f"{', '.join(moves)} did not rise: the model is earning reward without getting answers "
                           "right (Qwen3-0.6B-Base article: it learns to farm the format score). Fix: lower the format weight, "
                           "raise correctness, score non-answers ('I don't know') 0, run `grpokit rewards audit`, and "
                           "read samples.jsonl. Expected briefly while a base model first learns the format",
                           {"total_rise": rounded(rise), "correctness_change": {k: rounded(v) for k, v in moves.items()},
                            "steps": [lo, hi], "rise_threshold": config.hacking_rise, "flat_threshold": config.hacking_flat},
                           since=lo)
    learned = _learned_vs_rules(metrics, config, context, step)
    if learned is not None:
        return learned
    # (b) evaluation accuracy falls while the training reward climbs (Qwen3-4B/14B article: 95% train vs 78% eval).
    ev = sorted((e for e in context.evals if e.get("step", 0) <= step and is_finite(e.get("accuracy"))), key=lambda e: e["step"])
    if len(ev) >= 2:
        best = max(ev, key=lambda e: e["accuracy"])
        last = ev[-1]
        rew = dict(metric_series(metrics, "reward"))
        r_best = _near(rew, best["step"])
        r_last = _near(rew, last["step"])
        if (last["step"] > best["step"] and best["accuracy"] - last["accuracy"] >= 0.05
                and r_best is not None and r_last is not None and r_last > r_best):
            return Finding("reward_hacking_suspected", step,
                           f"evaluation accuracy fell from {rounded(best['accuracy'])} (step {best['step']}) to "
                           f"{rounded(last['accuracy'])} (step {last['step']}) while the training reward rose from "
                           f"{rounded(r_best)} to {rounded(r_last)}: the model is fitting the reward, not the task (Qwen3-4B/14B article: "
                           "95% train vs 78% eval). Fix: keep the best evaluated checkpoint, train fewer steps or "
                           "one epoch, use more varied data, tighten the reward (`grpokit rewards audit`)",
                           {"eval_best": best, "eval_last": last, "reward_at_best": rounded(r_best),
                            "reward_at_last": rounded(r_last)}, since=best["step"] + 1)
    return None


def _learned_vs_rules(metrics, config, context, step) -> Finding | None:
    """(c) a learned reward (reward_model) climbs while every rule reward of the recipe stays flat or falls."""
    learned = [n for n in context.reward_names if n in LEARNED_REWARDS]
    rules = [n for n in context.reward_names if n not in LEARNED_REWARDS]
    w = config.window
    for n in learned:
        s = [p for p in metric_series(metrics, f"rewards/{n}/mean") if p[0] > config.warmup_steps][-config.plateau_steps:]
        if not rules or len(s) < 2 * w or s[-1][0] != step:
            continue
        lo, rise = s[0][0], mean(values_of(s[-w:])) - mean(values_of(s[:w]))
        moves = {r: mean(values_of(c[-w:])) - mean(values_of(c[:w])) for r in rules
                 if len(c := [p for p in metric_series(metrics, f"rewards/{r}/mean") if lo <= p[0] <= step]) >= 2 * w}
        if moves and rise >= config.hacking_rise and all(v < config.hacking_flat for v in moves.values()):
            return Finding("reward_hacking_suspected", step,
                           f"the learned reward {n} rose by {rounded(rise)} over steps {lo}-{step} while the rule rewards "
                           f"({', '.join(moves)}) did not: the policy may be gaming the reward model. Fix: read "
                           "samples.jsonl, check the reward model on fresh rankings (`grpokit rm eval`), add rankings "
                           "of the new answers and retrain it, or raise the rule rewards' weights",
                           {"learned": n, "learned_rise": rounded(rise), "rule_change": {k: rounded(v) for k, v in moves.items()},
                            "steps": [lo, step]}, since=lo)
    return None


def _near(series: dict[int, float], step: int) -> float | None:
    before = [s for s in series if s <= step]
    return series[max(before)] if before else None
