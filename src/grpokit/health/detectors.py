"""The health detectors (monitor.py runs them): each a pure function of the metrics
logged so far and the latest step's samples, judging the latest step; `DETECTORS` maps every health
code to its detector. Thresholds: grpokit.recipe.HealthConfig."""
from __future__ import annotations

import math
from statistics import mean, median
from typing import Callable

from grpokit.health.findings import (NON_FINITE_KEYS, PLATEAU_CONFIDENCE, Context, Finding, is_finite, metric_series,
                                     rolling_peak, rounded, values_of)
from grpokit.health.completions import detect_empty, detect_repetition
from grpokit.health.tool_failures import detect_tool_failures
from grpokit.recipe import HEALTH_CODES, HealthConfig
from grpokit.run import SAMPLER_CLIPPED, SAMPLER_GAP_MEAN


# ---------------------------------------------------------------- detectors (latest step)
def detect_nan(m, s, cfg: HealthConfig, ctx) -> Finding | None:
    last = m[-1]
    bad = {k: last[k] for k in NON_FINITE_KEYS if k in last and not is_finite(last[k])}
    if not bad:
        return None
    return Finding("nan", "error", last["step"],
                   f"non-finite {', '.join(bad)} at step {last['step']}: the update blew up. Fix: halve the "
                   "learning_rate (the articles: 1e-6..5e-6 for GRPO, 2e-6 for 4B), check the rewards never return "
                   "NaN/inf, prefer bfloat16/float32 to float16, and resume from the last checkpoint before it",
                   {k: str(v) for k, v in bad.items()}, since=last["step"])


def detect_zero_variance(m, s, cfg, ctx) -> Finding | None:
    z = metric_series(m, "frac_reward_zero_std")
    if len(z) < cfg.window or z[-1][0] != m[-1]["step"]:
        return None
    run = 0
    for _, v in reversed(z):
        if v < cfg.zero_std_frac:
            break
        run += 1
    if run < cfg.window:
        return None
    return Finding("zero_variance_groups", "warning", z[-1][0],
                   f"{rounded(mean(values_of(z[-cfg.window:])) * 100, 1)}% of prompt groups scored every completion the same "
                   f"for {run} steps: their advantages are 0 and they teach nothing. Fix (Qwen3-0.6B-Base article): raise the "
                   "format reward's weight so all-wrong groups still differ, raise num_generations (8 -> 12), mix "
                   "easier prompts in (`grpokit preflight --write-filtered` drops always/never-solved prompts and "
                   "alternates easy and hard)",
                   {"frac_reward_zero_std": [rounded(v) for v in values_of(z[-cfg.window:])], "steps": run,
                    "threshold": cfg.zero_std_frac}, since=z[-run][0])


def _latest_window(m, key: str, n: int) -> list[tuple[int, float]] | None:
    """The last n (step, value) points of `key`, when it was logged at the latest step; None otherwise."""
    points = metric_series(m, key)
    return points[-n:] if len(points) >= n and points[-1][0] == m[-1]["step"] else None


def detect_nothing_learned(m, s, cfg, ctx) -> Finding | None:
    # Stronger and sooner than zero_variance_groups (some signal missing): here none at all, over the last
    # nothing_learned_steps steps, so those steps updated nothing (thresholds: HealthConfig, with why).
    n = cfg.nothing_learned_steps
    window = _latest_window(m, "frac_reward_zero_std", n)
    if window is None:
        return None
    share = mean(values_of(window))
    if share < cfg.nothing_learned_frac:
        return None
    first, last = window[0][0], window[-1][0]
    steps = {st for st, _ in window}
    at = {k: [rounded(v) for st, v in metric_series(m, k) if st in steps] for k in ("loss", "grad_norm", "reward")}
    why = ""
    for name in ctx.with_role("correctness"):
        c = [v for st, v in metric_series(m, f"rewards/{name}/mean") if st in steps]
        full = max(1.0, ctx.full_marks.get(name, 1.0))  # a right answer scores at least 1
        if c and max(c) <= 0:
            why = (f" Every completion scored 0 on {name}: the prompts are too hard for this model now; train on "
                   "easier ones (`grpokit preflight --write-filtered` keeps the prompts some completions solve), "
                   "or add a graded reward (partial credit, a format reward) so wrong answers still differ.")
        elif c and min(c) >= full:
            why = (f" Every completion earned full marks on {name}: the prompts are too easy; train on harder ones.")
        if why:
            break
    return Finding("nothing_learned", "error", last,
                   f"nothing was learned in steps {first}-{last}: {rounded(share * 100, 1)}% of prompt groups scored "
                   "every completion the same, so every advantage is 0 and the update is empty (loss "
                   f"{at['loss'] or '-'}, grad_norm {at['grad_norm'] or '-'}).{why} Fix: `grpokit preflight RECIPE` "
                   "measures before training how many prompts give a reward spread (its zero-variance share) and "
                   "`--write-filtered` keeps those; use data nearer the model's level (easier if it solves none, "
                   "harder if it solves all); more completions per prompt (train.num_generations) make a spread "
                   "likelier; a graded reward (partial credit, a format reward beside correctness) separates "
                   "completions a pass/fail reward ties",
                   {"frac_reward_zero_std": [rounded(v) for v in values_of(window)], "steps": [first, last],
                    "share": rounded(share), "threshold": cfg.nothing_learned_frac, "window": n, **at},
                   since=first)


def detect_sampler_mismatch(m, s, cfg, ctx) -> Finding | None:
    # A sampler in another precision (grpokit.training.sampler): its gap to the trainer, over the last `window`
    # logged steps (threshold and why: HealthConfig.sampler_gap_max).
    n = cfg.window
    window = _latest_window(m, SAMPLER_GAP_MEAN, n)
    if window is None:
        return None
    level = mean(values_of(window))
    if level < cfg.sampler_gap_max:
        return None
    first, last = window[0][0], window[-1][0]
    steps = {st for st, _ in window}
    clipped = [rounded(v) for st, v in metric_series(m, SAMPLER_CLIPPED) if st in steps]
    return Finding("sampler_mismatch", "warning", last,
                   f"the sampler's log-probs differ from the trainer's by {rounded(level)} per token on average over "
                   f"steps {first}-{last} (at or above {cfg.sampler_gap_max}; a bf16 sampler of a float32 trainer "
                   "is about 0.03): the correction then clips or masks more tokens "
                   f"({', '.join(map(str, clipped)) or '-'} of them), so fewer carry a gradient. Fix: "
                   "generation.sampler_dtype: same (or float32) samples in the trainer's own precision; a lower "
                   "train.learning_rate keeps the policy from moving where the two round differently",
                   {"gap_mean": [rounded(v) for v in values_of(window)], "clipped_frac": clipped,
                    "steps": [first, last], "threshold": cfg.sampler_gap_max, "window": n}, since=first)


def _trend(s: list[tuple[int, float]]) -> tuple[float, float]:
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


def detect_plateau(m, s, cfg, ctx) -> Finding | None:
    # A plateau is a reward that is confidently not rising. The least-squares trend uses every step of the
    # window (halves of it compare fewer points), and its standard error is the noise allowance: GRPO's
    # per-step reward is noisy (a few prompts per step), so a slow climb often shows a flat or falling
    # stretch between two half-windows (a 108-step run climbing 0.05 -> 0.43 fired 4 times that way).
    # Reported only when even the upper bound of the change, PLATEAU_CONFIDENCE errors above the fitted
    # one, stays within plateau_delta; a noisy window has a wide bound and is not called flat.
    r = [p for p in metric_series(m, "reward") if p[0] > cfg.warmup_steps]
    n = cfg.plateau_steps
    if len(r) < n or r[-1][0] != m[-1]["step"]:
        return None
    change, error = _trend(r[-n:])
    if change + PLATEAU_CONFIDENCE * error > cfg.plateau_delta:
        return None
    level = mean(values_of(r[-n:]))
    return Finding("reward_plateau", "warning", r[-1][0],
                   f"the reward has not risen for {n} steps (level {rounded(level)}, fitted change {rounded(change)} +/- "
                   f"{rounded(error)}). Fix (Qwen3-0.6B-Base article): if it never moved, groups carry no signal (see "
                   "zero_variance_groups: more format weight, easier data); if it climbed then stalled, the learning "
                   "rate is off (the Qwen3-0.6B-Base article cut 1e-5 -> 3e-6 when the reward stalled near step 300); evaluate the "
                   "checkpoints and keep the best rather than the last",
                   {"window_steps": n, "mean": rounded(level), "fitted_change": rounded(change), "change_error": rounded(error),
                    "confidence_errors": PLATEAU_CONFIDENCE, "threshold": cfg.plateau_delta}, since=r[-n][0])


def detect_kl_spike(m, s, cfg, ctx) -> Finding | None:
    k = metric_series(m, "kl")
    if not k or k[-1][0] != m[-1]["step"]:
        return None
    step, v = k[-1]
    prev = values_of(k[-1 - cfg.window:-1])
    level = median(prev) if prev else None
    absolute = v > cfg.kl_max
    relative = (level is not None and len(prev) >= cfg.window and step > cfg.warmup_steps and v > cfg.kl_floor
                and v > cfg.kl_spike_factor * max(level, cfg.kl_floor / cfg.kl_spike_factor))
    if not (absolute or relative):
        return None
    why = f"above the bound {cfg.kl_max}" if absolute else f"{rounded(v / max(level, 1e-12), 1)}x its recent median {rounded(level)}"
    return Finding("kl_spike", "error", step,
                   f"kl jumped to {rounded(v)} at step {step} ({why}): the policy is leaving the reference model and "
                   "its language degrades. Fix: lower the learning rate or raise beta (Qwen3-4B/14B article); the Qwen3-0.6B-Base article "
                   "halves the learning rate, raises beta 0.04 -> 0.08 and resumes from the last normal checkpoint "
                   "(health.actions.kl_spike: rollback does exactly that)",
                   {"kl": rounded(v, 6), "recent_median": None if level is None else rounded(level, 6), "kl_max": cfg.kl_max,
                    "spike_factor": cfg.kl_spike_factor}, since=step)


def detect_length_collapse(m, s, cfg, ctx) -> Finding | None:
    ln = [p for p in metric_series(m, "completions/mean_length")]
    w = cfg.window
    if len(ln) < 2 * w or ln[-1][0] != m[-1]["step"] or ln[-1][0] <= cfg.warmup_steps:
        return None
    peak, end = rolling_peak(ln, w, len(ln) - w)
    now = mean(values_of(ln[-w:]))
    if not peak > 0 or now >= cfg.length_drop * peak:
        return None
    # Shrinking from completions cut at the length limit is the cure for rambling, not laziness.
    clip = {st: v for st, v in metric_series(m, "completions/clipped_ratio")}
    peak_clip = [clip[st] for st, _ in ln[end - w:end] if st in clip]
    if peak_clip and mean(peak_clip) >= 0.5:
        return None
    return Finding("length_collapse", "warning", ln[-1][0],
                   f"mean completion length fell from {rounded(peak, 1)} to {rounded(now, 1)} tokens: the model is learning "
                   "to be lazy, hitting the reward with the shortest output (Qwen3-4B/14B article: 2000 -> 300). Fix: make "
                   "correctness dominate the reward, penalise very short answers (the `length` reward's "
                   "short_penalty), lower the learning rate, and roll back to before the drop",
                   {"peak_mean_length": rounded(peak, 1), "recent_mean_length": rounded(now, 1), "drop_threshold": cfg.length_drop},
                   since=ln[min(end, len(ln) - 1)][0])


def detect_truncation(m, s, cfg, ctx) -> Finding | None:
    c = metric_series(m, "completions/clipped_ratio")
    if not c or c[-1][0] != m[-1]["step"]:
        return None
    recent = values_of(c[-cfg.window:])
    if mean(recent) < cfg.truncation_frac:
        return None
    return Finding("truncation", "warning", c[-1][0],
                   f"{rounded(mean(recent) * 100, 1)}% of completions hit max_completion_length: cut answers lose their "
                   "final line and score as wrong. Fix: raise train.max_completion_length to cover the p99 length "
                   "(`grpokit preflight` measures it; the Qwen3-0.6B-Base article uses 512 for math, 1024 for logic), or reward "
                   "brevity with the `length` reward",
                   {"clipped_ratio": [rounded(v) for v in recent], "threshold": cfg.truncation_frac},
                   since=c[-len(recent)][0])


def _fallen(m, ctx, code: str, role: str, w: int, learned: float, drop: float, floor: float,
            message: Callable[[str, float, float, float], str]) -> Finding | None:
    """`code` for the first reward of `role` whose running mean (over `w` steps) reached `learned` x its full
    marks and then fell below `drop` x that peak; `message(name, peak, now, full)` says what and the fix.
    Full marks: the best score a sampled completion earned, else the best step mean, at least `floor`."""
    for name in ctx.with_role(role):
        f = metric_series(m, f"rewards/{name}/mean")
        if len(f) < 2 * w or f[-1][0] != m[-1]["step"]:
            continue
        peak, end = rolling_peak(f, w, len(f) - w)
        now = mean(values_of(f[-w:]))
        full = ctx.full_marks.get(name, max(floor, max(values_of(f))))
        if full > 0 and peak >= learned * full and now < drop * peak:
            return Finding(code, "warning", f[-1][0], message(name, peak, now, full),
                           {"reward": name, "peak_mean": rounded(peak), "recent_mean": rounded(now), "full_marks": rounded(full),
                            "learned_share": learned, "drop_threshold": drop},
                           since=f[min(end, len(f) - 1)][0])
    return None


def detect_format_collapse(m, s, cfg, ctx) -> Finding | None:
    # "Learned" is relative to the reward's own full marks, not an absolute level: a format reward worth
    # 0.2 (the Qwen3-0.6B-Base article's weighting written into the reward) that falls 0.2 -> 0.02 has collapsed.
    return _fallen(m, ctx, "format_collapse", "format", cfg.window, cfg.format_learned, cfg.format_drop, 0.0,
                   lambda name, peak, now, full:
                   f"the {name} reward had been learned (mean {rounded(peak)} of full marks {rounded(full)}) and fell "
                   f"to {rounded(now)}. Fix (Qwen3-0.6B-Base article): keep the format weight at 0.15 or more of the total, do "
                   "not lower it too fast, and resume from a checkpoint where the format was stable")


def detect_correctness_collapse(m, s, cfg, ctx) -> Finding | None:
    # The policy unlearns what it had learned: the training correctness (on the prompts it is given) rose, then
    # fell and stays down. Seen on the demo recipe at lr 1e-4 constant, with entropy 0.25 and format 100%: every
    # group ended all-wrong while no other detector fired. Full marks are at least 1 (a right answer's score).
    return _fallen(m, ctx, "correctness_collapse", "correctness", cfg.window, cfg.correctness_learned,
                   cfg.correctness_drop, 1.0,
                   lambda name, peak, now, full:
                   f"the {name} reward had risen to a running mean of {rounded(peak)} and fell to {rounded(now)}: "
                   "the policy is unlearning the task. Fix: lower learning_rate or let it decay "
                   "(lr_scheduler_type cosine), add a KL penalty (beta > 0), and restart from the last "
                   "checkpoint before the fall (health action rollback does all three); `grpokit eval` "
                   "finds the best checkpoint")


def detect_reward_hacking(m, s, cfg, ctx) -> Finding | None:
    step = m[-1]["step"]
    correct = ctx.with_role("correctness")
    # (a) the training reward climbs while the correctness component stays flat.
    total = [p for p in metric_series(m, "reward") if p[0] > cfg.warmup_steps][-cfg.plateau_steps:]
    w = cfg.window
    if correct and len(ctx.reward_names) > 1 and len(total) >= 2 * w and total[-1][0] == step:
        lo, hi = total[0][0], total[-1][0]
        rise = mean(values_of(total[-w:])) - mean(values_of(total[:w]))
        moves = {}
        for n in correct:
            c = [p for p in metric_series(m, f"rewards/{n}/mean") if lo <= p[0] <= hi]
            if len(c) >= 2 * w:
                moves[n] = mean(values_of(c[-w:])) - mean(values_of(c[:w]))
        if moves and rise >= cfg.hacking_rise and all(v < cfg.hacking_flat for v in moves.values()):
            return Finding("reward_hacking_suspected", "warning", step,
                           f"the total reward rose by {rounded(rise)} over steps {lo}-{hi} while "
                           f"{', '.join(moves)} did not rise: the model is earning reward without getting answers "
                           "right (Qwen3-0.6B-Base article: it learns to farm the format score). Fix: lower the format weight, "
                           "raise correctness, score non-answers ('I don't know') 0, run `grpokit rewards audit`, and "
                           "read samples.jsonl. Expected briefly while a base model first learns the format",
                           {"total_rise": rounded(rise), "correctness_change": {k: rounded(v) for k, v in moves.items()},
                            "steps": [lo, hi], "rise_threshold": cfg.hacking_rise, "flat_threshold": cfg.hacking_flat},
                           since=lo)
    learned = _learned_vs_rules(m, cfg, ctx, step)
    if learned is not None:
        return learned
    # (b) evaluation accuracy falls while the training reward climbs (Qwen3-4B/14B article: 95% train vs 78% eval).
    ev = sorted((e for e in ctx.evals if e.get("step", 0) <= step and is_finite(e.get("accuracy"))), key=lambda e: e["step"])
    if len(ev) >= 2:
        best = max(ev, key=lambda e: e["accuracy"])
        last = ev[-1]
        rew = dict(metric_series(m, "reward"))
        r_best = _near(rew, best["step"])
        r_last = _near(rew, last["step"])
        if (last["step"] > best["step"] and best["accuracy"] - last["accuracy"] >= 0.05
                and r_best is not None and r_last is not None and r_last > r_best):
            return Finding("reward_hacking_suspected", "warning", step,
                           f"evaluation accuracy fell from {rounded(best['accuracy'])} (step {best['step']}) to "
                           f"{rounded(last['accuracy'])} (step {last['step']}) while the training reward rose from "
                           f"{rounded(r_best)} to {rounded(r_last)}: the model is fitting the reward, not the task (Qwen3-4B/14B article: "
                           "95% train vs 78% eval). Fix: keep the best evaluated checkpoint, train fewer steps or "
                           "one epoch, use more varied data, tighten the reward (`grpokit rewards audit`)",
                           {"eval_best": best, "eval_last": last, "reward_at_best": rounded(r_best),
                            "reward_at_last": rounded(r_last)}, since=best["step"] + 1)
    return None


def _learned_vs_rules(m, cfg, ctx, step) -> Finding | None:
    """(c) a learned reward (reward_model) climbs while every rule reward of the recipe stays flat or falls."""
    from grpokit.rewards import LEARNED_REWARDS

    learned = [n for n in ctx.reward_names if n in LEARNED_REWARDS]
    rules = [n for n in ctx.reward_names if n not in LEARNED_REWARDS]
    w = cfg.window
    for n in learned:
        s = [p for p in metric_series(m, f"rewards/{n}/mean") if p[0] > cfg.warmup_steps][-cfg.plateau_steps:]
        if not rules or len(s) < 2 * w or s[-1][0] != step:
            continue
        lo, rise = s[0][0], mean(values_of(s[-w:])) - mean(values_of(s[:w]))
        moves = {r: mean(values_of(c[-w:])) - mean(values_of(c[:w])) for r in rules
                 if len(c := [p for p in metric_series(m, f"rewards/{r}/mean") if lo <= p[0] <= step]) >= 2 * w}
        if moves and rise >= cfg.hacking_rise and all(v < cfg.hacking_flat for v in moves.values()):
            return Finding("reward_hacking_suspected", "warning", step,
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


def detect_entropy_collapse(m, s, cfg, ctx) -> Finding | None:
    e = metric_series(m, "entropy")
    w = cfg.window
    if len(e) < w or e[-1][0] != m[-1]["step"]:
        return None
    now = mean(values_of(e[-w:]))
    early = mean(values_of(e[:w])) if len(e) >= 2 * w else None
    low = now < cfg.entropy_min
    fell = early is not None and e[-1][0] > cfg.warmup_steps and early > 0 and now < cfg.entropy_drop * early
    if not (low or fell):
        return None
    return Finding("entropy_collapse", "warning", e[-1][0],
                   f"token entropy fell to {rounded(now)} (early level {None if early is None else rounded(early)}): the "
                   "completions of a group become identical, so groups stop carrying signal. Fix: raise temperature "
                   "(Qwen3-0.6B-Base article: 0.7-1.2, Qwen3-4B/14B article: 0.9), lower the learning rate; prefer a base model, which "
                   "keeps more entropy than an instruct one",
                   {"recent_entropy": rounded(now), "early_entropy": None if early is None else rounded(early),
                    "entropy_min": cfg.entropy_min, "drop_threshold": cfg.entropy_drop},
                   since=e[-w][0])


Detector = Callable[[list, list, HealthConfig, Context], "Finding | None"]
DETECTORS: dict[str, Detector] = {
    "nan": detect_nan,
    "zero_variance_groups": detect_zero_variance,
    "reward_plateau": detect_plateau,
    "kl_spike": detect_kl_spike,
    "length_collapse": detect_length_collapse,
    "truncation": detect_truncation,
    "empty_completions": detect_empty,
    "repetition": detect_repetition,
    "format_collapse": detect_format_collapse,
    "reward_hacking_suspected": detect_reward_hacking,
    "entropy_collapse": detect_entropy_collapse,
    "tool_failures_rising": detect_tool_failures,  # grpokit.health.tool_failures
    "correctness_collapse": detect_correctness_collapse,
    "nothing_learned": detect_nothing_learned,
    "sampler_mismatch": detect_sampler_mismatch,
}
assert set(DETECTORS) == set(HEALTH_CODES), "every health code needs a detector and a recipe action"
