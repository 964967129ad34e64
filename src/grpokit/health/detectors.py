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

from statistics import mean, median
from typing import Callable

from grpokit.health.findings import (NON_FINITE_KEYS, PLATEAU_CONFIDENCE, Context, Finding, is_finite,
                                     latest_window, metric_series, rolling_peak, rounded, trend, values_of)
from grpokit.health.completions import detect_empty, detect_repetition
from grpokit.health.early import detect_correctness_never_moved
from grpokit.health.learning import (detect_correctness_collapse, detect_format_collapse,
                                     detect_format_never_learned, detect_probe_drop, detect_reward_hacking)
from grpokit.recipe import HEALTH_CODES, HealthConfig
from grpokit.run import SAMPLER_CLIPPED, SAMPLER_GAP_MEAN


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


STARTED_LOW = 2.0  # a run whose first window's entropy is below this many entropy_min started near the floor


def detect_entropy_collapse(metrics, samples, config, context) -> Finding | None:
    # Two ways to collapse: below the absolute floor (entropy_min), or below entropy_drop of the run's own early
    # level (its first window). The floor judges only a run that started well above it: a model trained before
    # (`--init-from` an SFT model: 0.08-0.10 nats against the 0.05 floor, docs/measurements.md "The demo: an SFT
    # warm start, then GRPO") starts near it, and is judged against its own early level alone, so a warm-started
    # run is never rolled back for the entropy it started with.
    e = metric_series(metrics, "entropy")
    w = config.window
    if len(e) < w or e[-1][0] != metrics[-1]["step"]:
        return None
    now = mean(values_of(e[-w:]))
    start = mean(values_of(e[:w]))
    early = start if len(e) >= 2 * w else None
    low = now < config.entropy_min and start >= STARTED_LOW * config.entropy_min
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
    "correctness_never_moved": detect_correctness_never_moved,  # grpokit.health.early
}
assert set(DETECTORS) == set(HEALTH_CODES), "every health code needs a detector, and every detector a code"
