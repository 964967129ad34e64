"""The health detectors (monitor.py runs them): each a pure function of the metrics
logged so far and the latest step's samples, judging the latest step; `DETECTORS` maps every health
code to its detector.

    def detect_truncation(metrics, samples, config, context) -> Finding | None: ...

`metrics`: metrics.jsonl's records so far (TRL's key names); `samples`: the completions sampled at the latest step;
`config`: the recipe's health section (grpokit.recipe.HealthConfig: every threshold, with its reason); `context`:
the run's rewards with their roles, evaluations and full marks (grpokit.health.findings.Context). A code's
severity, default action and thresholds are its row of grpokit.recipe.HEALTH_CODES; a `Finding` of the code takes
its severity from there. Adding a detector: docs/extending.md."""
from __future__ import annotations

import math
from statistics import mean, median
from typing import Callable

from grpokit.health.findings import (NON_FINITE_KEYS, PLATEAU_CONFIDENCE, Context, Finding, is_finite,
                                     latest_window, metric_series, rolling_peak, rounded, trend, values_of)
from grpokit.health.completions import detect_empty, detect_repetition
from grpokit.recipe import HEALTH_CODES, HealthConfig
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS, SAMPLER_CLIPPED, SAMPLER_GAP_MEAN


# ---------------------------------------------------------------- detectors (latest step)
def detect_nan(metrics, samples, config, context) -> Finding | None:
    last = metrics[-1]
    bad = {k: last[k] for k in NON_FINITE_KEYS if k in last and not is_finite(last[k])}
    if not bad:
        return None
    return Finding("nan", last["step"],
                   f"non-finite {', '.join(bad)} at step {last['step']}: the update blew up. Fix: halve the "
                   "learning_rate (the articles: 1e-6..5e-6 for GRPO, 2e-6 for 4B), check the rewards never return "
                   "NaN/inf, prefer bfloat16/float32 to float16, and resume from the last checkpoint before it",
                   {k: str(v) for k, v in bad.items()}, since=last["step"])


def detect_zero_variance(metrics, samples, config, context) -> Finding | None:
    z = metric_series(metrics, "frac_reward_zero_std")
    if len(z) < config.window or z[-1][0] != metrics[-1]["step"]:
        return None
    run = 0
    for _, v in reversed(z):
        if v < config.zero_std_frac:
            break
        run += 1
    if run < config.window:
        return None
    return Finding("zero_variance_groups", z[-1][0],
                   f"{rounded(mean(values_of(z[-config.window:])) * 100, 1)}% of prompt groups scored every completion the same "
                   f"for {run} steps: their advantages are 0 and they teach nothing. Fix (Qwen3-0.6B-Base article): raise the "
                   "format reward's weight so all-wrong groups still differ, raise num_generations (8 -> 12), mix "
                   "easier prompts in (`grpokit preflight --write-filtered` drops always/never-solved prompts and "
                   "alternates easy and hard)",
                   {"frac_reward_zero_std": [rounded(v) for v in values_of(z[-config.window:])], "steps": run,
                    "threshold": config.zero_std_frac}, since=z[-run][0])


def detect_nothing_learned(metrics, samples, config, context) -> Finding | None:
    # Stronger and sooner than zero_variance_groups (some signal missing): here none at all, over the last
    # nothing_learned_steps steps, so those steps updated nothing (thresholds: HealthConfig, with why).
    n = config.nothing_learned_steps
    window = latest_window(metrics, "frac_reward_zero_std", n)
    if window is None:
        return None
    share = mean(values_of(window))
    if share < config.nothing_learned_frac:
        return None
    first, last = window[0][0], window[-1][0]
    steps = {st for st, _ in window}
    at = {k: [rounded(v) for st, v in metric_series(metrics, k) if st in steps] for k in ("loss", "grad_norm", "reward")}
    why = ""
    for name in context.with_role("correctness"):
        c = [v for st, v in metric_series(metrics, f"rewards/{name}/mean") if st in steps]
        full = max(1.0, context.full_marks.get(name, 1.0))  # a right answer scores at least 1
        if c and max(c) <= 0:
            why = (f" Every completion scored 0 on {name}: the prompts are too hard for this model now; train on "
                   "easier ones (`grpokit preflight --write-filtered` keeps the prompts some completions solve), "
                   "or add a graded reward (partial credit, a format reward) so wrong answers still differ.")
        elif c and min(c) >= full:
            why = (f" Every completion earned full marks on {name}: the prompts are too easy; train on harder ones.")
        if why:
            break
    return Finding("nothing_learned", last,
                   f"nothing was learned in steps {first}-{last}: {rounded(share * 100, 1)}% of prompt groups scored "
                   "every completion the same, so every advantage is 0 and the update is empty (loss "
                   f"{at['loss'] or '-'}, grad_norm {at['grad_norm'] or '-'}).{why} Fix: `grpokit preflight RECIPE` "
                   "measures before training how many prompts give a reward spread (its zero-variance share) and "
                   "`--write-filtered` keeps those; use data nearer the model's level (easier if it solves none, "
                   "harder if it solves all); more completions per prompt (train.num_generations) make a spread "
                   "likelier; a graded reward (partial credit, a format reward beside correctness) separates "
                   "completions a pass/fail reward ties",
                   {"frac_reward_zero_std": [rounded(v) for v in values_of(window)], "steps": [first, last],
                    "share": rounded(share), "threshold": config.nothing_learned_frac, "window": n, **at},
                   since=first)


def detect_sampler_mismatch(metrics, samples, config, context) -> Finding | None:
    # A sampler in another precision (grpokit.training.sampling): its gap to the trainer, over the last `window`
    # logged steps (threshold and why: HealthConfig.sampler_gap_max).
    n = config.window
    window = latest_window(metrics, SAMPLER_GAP_MEAN, n)
    if window is None:
        return None
    level = mean(values_of(window))
    if level < config.sampler_gap_max:
        return None
    first, last = window[0][0], window[-1][0]
    steps = {st for st, _ in window}
    clipped = [rounded(v) for st, v in metric_series(metrics, SAMPLER_CLIPPED) if st in steps]
    return Finding("sampler_mismatch", last,
                   f"the sampler's log-probs differ from the trainer's by {rounded(level)} per token on average over "
                   f"steps {first}-{last} (at or above {config.sampler_gap_max}; a bf16 sampler of a float32 trainer "
                   "is about 0.03): the correction then clips or masks more tokens "
                   f"({', '.join(map(str, clipped)) or '-'} of them), so fewer carry a gradient. Fix: "
                   "generation.sampler_dtype: same (or float32) samples in the trainer's own precision; a lower "
                   "train.learning_rate keeps the policy from moving where the two round differently",
                   {"gap_mean": [rounded(v) for v in values_of(window)], "clipped_frac": clipped,
                    "steps": [first, last], "threshold": config.sampler_gap_max, "window": n}, since=first)


def detect_plateau(metrics, samples, config, context) -> Finding | None:
    # A plateau is a reward that is confidently not rising. The least-squares trend uses every step of the
    # window (halves of it compare fewer points), and its standard error is the noise allowance: GRPO's
    # per-step reward is noisy (a few prompts per step), so a slow climb often shows a flat or falling
    # stretch between two half-windows (a 108-step run climbing 0.05 -> 0.43 fired 4 times that way).
    # Reported only when even the upper bound of the change, PLATEAU_CONFIDENCE errors above the fitted
    # one, stays within plateau_delta; a noisy window has a wide bound and is not called flat.
    r = [p for p in metric_series(metrics, "reward") if p[0] > config.warmup_steps]
    n = config.plateau_steps
    if len(r) < n or r[-1][0] != metrics[-1]["step"]:
        return None
    change, error = trend(r[-n:])
    if change + PLATEAU_CONFIDENCE * error > config.plateau_delta:
        return None
    level = mean(values_of(r[-n:]))
    return Finding("reward_plateau", r[-1][0],
                   f"the reward has not risen for {n} steps (level {rounded(level)}, fitted change {rounded(change)} +/- "
                   f"{rounded(error)}). Fix (Qwen3-0.6B-Base article): if it never moved, groups carry no signal (see "
                   "zero_variance_groups: more format weight, easier data); if it climbed then stalled, the learning "
                   "rate is off (the Qwen3-0.6B-Base article cut 1e-5 -> 3e-6 when the reward stalled near step 300); evaluate the "
                   "checkpoints and keep the best rather than the last",
                   {"window_steps": n, "mean": rounded(level), "fitted_change": rounded(change), "change_error": rounded(error),
                    "confidence_errors": PLATEAU_CONFIDENCE, "threshold": config.plateau_delta}, since=r[-n][0])


def detect_kl_spike(metrics, samples, config, context) -> Finding | None:
    k = metric_series(metrics, "kl")
    if not k or k[-1][0] != metrics[-1]["step"]:
        return None
    step, v = k[-1]
    prev = values_of(k[-1 - config.window:-1])
    level = median(prev) if prev else None
    absolute = v > config.kl_max
    relative = (level is not None and len(prev) >= config.window and step > config.warmup_steps and v > config.kl_floor
                and v > config.kl_spike_factor * max(level, config.kl_floor / config.kl_spike_factor))
    if not (absolute or relative):
        return None
    why = f"above the bound {config.kl_max}" if absolute else f"{rounded(v / max(level, 1e-12), 1)}x its recent median {rounded(level)}"
    return Finding("kl_spike", step,
                   f"kl jumped to {rounded(v)} at step {step} ({why}): the policy is leaving the reference model and "
                   "its language degrades. Fix: lower the learning rate or raise beta (Qwen3-4B/14B article); the Qwen3-0.6B-Base article "
                   "halves the learning rate, raises beta 0.04 -> 0.08 and resumes from the last normal checkpoint "
                   "(health.actions.kl_spike: rollback does exactly that)",
                   {"kl": rounded(v, 6), "recent_median": None if level is None else rounded(level, 6), "kl_max": config.kl_max,
                    "spike_factor": config.kl_spike_factor}, since=step)


def detect_length_collapse(metrics, samples, config, context) -> Finding | None:
    ln = [p for p in metric_series(metrics, "completions/mean_length")]
    w = config.window
    if len(ln) < 2 * w or ln[-1][0] != metrics[-1]["step"] or ln[-1][0] <= config.warmup_steps:
        return None
    peak, end = rolling_peak(ln, w, len(ln) - w)
    now = mean(values_of(ln[-w:]))
    if not peak > 0 or now >= config.length_drop * peak:
        return None
    # Shrinking from completions cut at the length limit is the cure for rambling, not laziness.
    clip = {st: v for st, v in metric_series(metrics, "completions/clipped_ratio")}
    peak_clip = [clip[st] for st, _ in ln[end - w:end] if st in clip]
    if peak_clip and mean(peak_clip) >= 0.5:
        return None
    return Finding("length_collapse", ln[-1][0],
                   f"mean completion length fell from {rounded(peak, 1)} to {rounded(now, 1)} tokens: the model is learning "
                   "to be lazy, hitting the reward with the shortest output (Qwen3-4B/14B article: 2000 -> 300). Fix: make "
                   "correctness dominate the reward, penalise very short answers (the `length` reward's "
                   "short_penalty), lower the learning rate, and roll back to before the drop",
                   {"peak_mean_length": rounded(peak, 1), "recent_mean_length": rounded(now, 1), "drop_threshold": config.length_drop},
                   since=ln[min(end, len(ln) - 1)][0])


def detect_truncation(metrics, samples, config, context) -> Finding | None:
    c = metric_series(metrics, "completions/clipped_ratio")
    if not c or c[-1][0] != metrics[-1]["step"]:
        return None
    recent = values_of(c[-config.window:])
    if mean(recent) < config.truncation_frac:
        return None
    return Finding("truncation", c[-1][0],
                   f"{rounded(mean(recent) * 100, 1)}% of completions hit max_completion_length: cut answers lose their "
                   "final line and score as wrong. Fix: raise train.max_completion_length to cover the p99 length "
                   "(`grpokit preflight` measures it; the Qwen3-0.6B-Base article uses 512 for math, 1024 for logic), or reward "
                   "brevity with the `length` reward",
                   {"clipped_ratio": [rounded(v) for v in recent], "threshold": config.truncation_frac},
                   since=c[-len(recent)][0])


def _fallen(metrics, context, code: str, role: str, w: int, learned: float, drop: float, floor: float,
            message: Callable[[str, float, float, float], str]) -> Finding | None:
    """`code` for the first reward of `role` whose running mean (over `w` steps) reached `learned` x its full
    marks and then fell below `drop` x that peak; `message(name, peak, now, full)` says what and the fix.
    Full marks: the best score a sampled completion earned, else the best step mean, at least `floor`."""
    for name in context.with_role(role):
        f = metric_series(metrics, f"rewards/{name}/mean")
        if len(f) < 2 * w or f[-1][0] != metrics[-1]["step"]:
            continue
        peak, end = rolling_peak(f, w, len(f) - w)
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
    from grpokit.rewards import BUILTIN

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
    earlier = [(st, v) for st, v in points[:-1] if rows.get(st) == n]
    if not earlier:
        return None
    best_step, best = max(earlier, key=lambda p: (p[1], -p[0]))
    pooled = (best + now) / 2
    noise = math.sqrt(max(pooled * (1 - pooled), 0.0) * 2 / n)
    drop = best - now
    if drop < config.probe_drop_min or drop < config.probe_noise * noise:
        return None
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
    from grpokit.rewards import LEARNED_REWARDS

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


def detect_entropy_collapse(metrics, samples, config, context) -> Finding | None:
    e = metric_series(metrics, "entropy")
    w = config.window
    if len(e) < w or e[-1][0] != metrics[-1]["step"]:
        return None
    now = mean(values_of(e[-w:]))
    early = mean(values_of(e[:w])) if len(e) >= 2 * w else None
    low = now < config.entropy_min
    fell = early is not None and e[-1][0] > config.warmup_steps and early > 0 and now < config.entropy_drop * early
    if not (low or fell):
        return None
    return Finding("entropy_collapse", e[-1][0],
                   f"token entropy fell to {rounded(now)} (early level {None if early is None else rounded(early)}): the "
                   "completions of a group become identical, so groups stop carrying signal. Fix: raise temperature "
                   "(Qwen3-0.6B-Base article: 0.7-1.2, Qwen3-4B/14B article: 0.9), lower the learning rate; prefer a base model, which "
                   "keeps more entropy than an instruct one",
                   {"recent_entropy": rounded(now), "early_entropy": None if early is None else rounded(early),
                    "entropy_min": config.entropy_min, "drop_threshold": config.entropy_drop},
                   since=e[-w][0])


def detect_tool_failures(metrics, samples, config, context) -> Finding | None:
    # Tool tasks: TRL logs `tools/failure_frequency` (calls that raised in the environment, or named no tool, over
    # all calls) each step. A policy drifting into malformed calls, undefined tools or a spent step budget shows it
    # here before the task reward moves: the recent mean (last `window` steps) at least tool_failure_max, risen by
    # tool_failure_rise over the first `window` steps after warm-up. Runs without tool calls log 0 and never fire.
    w = config.window
    f = [p for p in metric_series(metrics, "tools/failure_frequency") if p[0] > config.warmup_steps]
    if len(f) < 2 * w or f[-1][0] != metrics[-1]["step"]:
        return None
    early, now = mean(values_of(f[:w])), mean(values_of(f[-w:]))
    if now < config.tool_failure_max or now - early < config.tool_failure_rise:
        return None
    return Finding("tool_failures_rising", f[-1][0],
                   f"{100 * now:.0f}% of tool calls fail (was {100 * early:.0f}%): the model calls undefined tools, "
                   "passes bad arguments or spends its step budget. Fix: read samples.jsonl for the failing calls; "
                   "weight tool_args (well-formed arguments) higher, keep the tool definitions in every row, and "
                   "resume from a checkpoint before the rise",
                   {"recent_failure_frequency": rounded(now), "early_failure_frequency": rounded(early),
                    "max": config.tool_failure_max, "rise": config.tool_failure_rise}, since=f[-w][0])


Detector = Callable[[list, list, HealthConfig, Context], "Finding | None"]
# Every health code's detector, in the order they run on a step (a step's findings, and the first stop or rollback
# among them, come in this order). A code's severity, default action and thresholds: its row of
# grpokit.recipe.HEALTH_CODES.
DETECTORS: dict[str, Detector] = {
    "nan": detect_nan,
    "probe_drop": detect_probe_drop,  # before the other rollbacks: it restores the best step it measured
    "zero_variance_groups": detect_zero_variance,
    "reward_plateau": detect_plateau,
    "kl_spike": detect_kl_spike,
    "length_collapse": detect_length_collapse,
    "truncation": detect_truncation,
    "empty_completions": detect_empty,  # grpokit.health.completions
    "repetition": detect_repetition,  # grpokit.health.completions
    "format_collapse": detect_format_collapse,
    "reward_hacking_suspected": detect_reward_hacking,
    "entropy_collapse": detect_entropy_collapse,
    "tool_failures_rising": detect_tool_failures,
    "correctness_collapse": detect_correctness_collapse,
    "nothing_learned": detect_nothing_learned,
    "sampler_mismatch": detect_sampler_mismatch,
    "format_never_learned": detect_format_never_learned,
}
assert set(DETECTORS) == set(HEALTH_CODES), "every health code needs a detector, and every detector a code"
