"""The recipe's `health:` section: one row per health code (`HEALTH_CODES`), declaring once how its findings are
reported, what the live monitor does on them by default, and every threshold its detector reads with its reason
(the one place they are documented). `HealthActions` (health.actions) and `HealthConfig` (the section) are built
from the rows, so the recipe validates every threshold and action without importing the detectors.

The detector of a code is grpokit.health's `DETECTORS[code]` (a function of the metrics so far, the latest step's
samples, this section and the run's context); grpokit.health refuses to import when a code here has no detector or
a detector no code here. Adding a detector: its row here and its function there (docs/extending.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, create_model, model_validator

from grpokit.recipe.section import Section

HealthAction = Literal["warn", "stop", "rollback"]


def threshold(default: int | float, description: str, **bounds) -> tuple[type, Any]:
    """A threshold of a detector: its type (the default's), default, bounds (gt, ge, lt, le) and its help."""
    return type(default), Field(default, description=description, **bounds)


@dataclass(frozen=True)
class HealthCode:
    severity: Literal["warning", "error"]  # how its findings are reported (error: the run is broken, not drifting)
    thresholds: dict[str, tuple[type, Any]] = field(default_factory=dict)  # health.<name>: threshold(...)
    action_note: str = ""  # what the reference page adds to "Action on <code>"
    action: HealthAction = "warn"  # the monitor's default action
    # Read on the prompts each step draws: where the run has a held-out probe, a stop or rollback on it waits for
    # the probe, measured there and then, to confirm the fall (grpokit.health.monitor); unconfirmed, it is a warning.
    probe_confirms: bool = False


# The order is the recipe reference's (health.actions and the thresholds, row by row); the detectors run in
# grpokit.health.detectors.DETECTORS's order.
HEALTH_CODES: dict[str, HealthCode] = {
    "zero_variance_groups": HealthCode("warning", {
        "zero_std_frac": threshold(
            0.8, "frac_reward_zero_std at or above this for `window` steps: too few groups carry signal (every "
            "completion of a prompt scored the same).", ge=0, le=1),
    }),
    "reward_plateau": HealthCode("warning", {
        "plateau_steps": threshold(30, "Steps the reward must stay flat to count as a plateau.", ge=2),
        "plateau_delta": threshold(
            0.02, "Largest rise over `plateau_steps` that is flat: the least-squares trend of the reward plus two "
            "standard errors of it must stay below this (a noisy climb is not a plateau).", ge=0),
    }),
    "kl_spike": HealthCode("error", {
        "kl_max": threshold(0.5, "Absolute kl bound; the articles see runs break beyond a few tenths.", gt=0),
        "kl_spike_factor": threshold(5.0, "kl above this many times its running median is a spike.", gt=1),
        "kl_floor": threshold(0.01, "kl below this is never a spike (ratios of tiny numbers are noise).", ge=0),
    }, action_note=" (the Qwen3-0.6B-Base article rolls back by hand)"),
    "length_collapse": HealthCode("warning", {
        "length_drop": threshold(
            0.5, "Mean completion length below this share of its running peak level is a collapse (the "
            "Qwen3-4B/14B article: 2000 -> 300 tokens is the model learning to be lazy).", gt=0, lt=1),
    }),
    "truncation": HealthCode("warning", {
        "truncation_frac": threshold(0.3, "completions/clipped_ratio at or above this is truncation.", ge=0, le=1),
    }),
    "empty_completions": HealthCode("error", {
        "empty_chars": threshold(5, "A sampled completion with fewer non-blank characters is empty.", ge=0),
        "empty_frac": threshold(0.5, "Share of a step's samples that must be empty to report.", ge=0, le=1),
    }),
    "repetition": HealthCode("warning", {
        "repetition_ngram": threshold(4, "n of the word n-grams checked for repetition.", ge=1),
        "repetition_ratio": threshold(
            0.5, "A completion whose share of repeated n-grams reaches this is repetitive.", gt=0, le=1),
        "repetition_frac": threshold(0.5, "Share of a step's samples that must be repetitive.", ge=0, le=1),
    }),
    "format_collapse": HealthCode("warning", {
        "format_learned": threshold(
            0.5, "The format reward's running mean must have reached this share of its full marks (the best score "
            "a sampled completion earned: 0.2 for a reward worth 0.2) ...", ge=0),
        "format_drop": threshold(0.5, "... and then fallen below this share of that peak.", gt=0, lt=1),
    }),
    "reward_hacking_suspected": HealthCode("warning", {  # also reads plateau_steps: the span of the rise
        "hacking_rise": threshold(0.2, "Total reward rise over `plateau_steps` that must come ...", gt=0),
        "hacking_flat": threshold(0.02, "... with the correctness reward moving less than this.", ge=0),
    }),
    "entropy_collapse": HealthCode("warning", {
        "entropy_min": threshold(0.05, "Mean token entropy (nats) below this: groups become identical.", ge=0),
        "entropy_drop": threshold(0.1, "... or below this share of its early level.", gt=0, lt=1),
    }),
    "nan": HealthCode("error", action_note=" (stop or rollback: training on NaN is wasted)"),
    "tool_failures_rising": HealthCode("warning", {
        "tool_failure_max": threshold(0.5, "tools/failure_frequency at or above this ...", ge=0, le=1),
        "tool_failure_rise": threshold(0.2, "... and risen this much since warm-up: tool_failures_rising "
                                       "(grpokit.health.detectors).", gt=0, le=1),
    }, action_note=" (tool tasks)"),
    # Chosen on the logs of the demo-recipe runs (docs/measurements.md "Health and rollback"): window 5, 0.2 and
    # 0.4 never fired on the healthy ones and fired on the run at a too-high learning rate whose held-out accuracy
    # fell; a drop of 0.5 fired on a healthy one. Confirmed by the probe: at 2 prompts a step a 5-step mean is 10
    # prompts, and on countdown (prompts of unequal difficulty, nothing learned or lost) the same rule read 0.273
    # -> 0.109 and rolled back a run whose probe stood above its start (docs/measurements.md
    # "Countdown: where many answers are right").
    "correctness_collapse": HealthCode("warning", {
        "correctness_learned": threshold(
            0.2, "A correctness reward's running mean must have reached this share of its full marks (1.0 for "
            "math_correctness) ...", ge=0),
        "correctness_drop": threshold(
            0.4, "... and then fallen below this share of that peak: correctness_collapse.", gt=0, lt=1),
    }, action_note=" (with a held-out probe, a stop or rollback waits for the probe to confirm the fall)",
        probe_confirms=True),
    # Every group tied means every advantage is 0: the policy-gradient term, and with beta 0 the loss and grad_norm,
    # are exactly 0 (the tiny-model run of tests/fixtures/run_before_layout logs loss 0.0, grad_norm 0.0 at 1.0), so
    # the steps changed nothing but weight decay: a fact, not a judgement, hence the share 1.0. 3 steps: the
    # issue's run stopped after 3 such steps and nothing said so; one all-tied step is common in healthy runs with
    # few groups per step (the demo's 2: docs/measurements.md "What the measurements decided" times such steps), three in a row over 6+ groups is
    # the run's setup (data too hard or too easy for the model, a pass/fail reward), not chance.
    "nothing_learned": HealthCode("error", {
        "nothing_learned_steps": threshold(
            3, "Logging steps in a row over which the share of tied groups is judged for nothing_learned (the last "
            "ones so far).", ge=1),
        "nothing_learned_frac": threshold(
            1.0, "Mean frac_reward_zero_std over those steps at or above this: nothing was learned in them (1.0: "
            "every group scored all its completions the same, so every advantage is 0).", gt=0, le=1),
    }, action_note=" (stop saves the compute of a run that cannot learn as set up)"),
    # About four times the per-token gap a bf16 sampler of the float32 embedded model showed against the trainer,
    # much as bf16 autocast alone (docs/measurements.md "Generation choices on the CPU"): that much over `window`
    # steps is no longer the precision: the policy has moved to where bf16 rounds it differently.
    "sampler_mismatch": HealthCode("warning", {
        "sampler_gap_max": threshold(
            0.1, "Mean |log pi_trainer - log pi_sampler| per completion token (metrics.jsonl "
            "sampling/sampling_logp_difference/mean) at or above this for `window` steps: sampler_mismatch.", gt=0),
    }, action_note=" (generation.sampler_dtype: the sampler's log-probs drift from the trainer's)"),
    # The held-out probe (grpokit.training.probe: health.probe_rows greedy rows at step 0 and at every checkpoint).
    # A drop is judged against the binomial noise of the two probes on the same rows: the standard error of a
    # difference between two shares of n rows at their pooled level, sqrt(2 p (1 - p) / n). Two probes of one
    # checkpoint agree exactly (greedy), and nearby checkpoints differ on a few rows, so that error (of two
    # independent samples) is an upper bound on the probe's own noise. 2.0 of them: the recorded healthy runs'
    # largest fall from their best was 1.25 (22.5% -> 17.5% of 200 rows); a recorded SFT model trained on at lr
    # 2e-5 fell 62.5% -> 37.5% of the probe's 48 rows by step 5 (2.45 errors) and 33.3% by step 10 (2.9): 2.5
    # reported it only at the run's end, 2.0 at step 5 (docs/measurements.md "GRPO from an SFT model").
    "probe_drop": HealthCode("warning", {
        "probe_noise": threshold(
            2.0, "The probe's score must fall below its best so far (an earlier probe on the same rows) by this "
            "many standard errors of the difference of two shares of that many rows: probe_drop.", gt=0),
        "probe_drop_min": threshold(
            0.05, "... and by at least this much (a share of the rows: 0.05 = 5 points), however many rows.",
            ge=0, le=1),
    }, action="rollback", action_note=" (the held-out probe fell: rollback restores its best checkpoint)"),
    # A bf16 demo arm learned the sums but never the answer line: its format reward stayed 0.00-0.12 for all 30
    # steps, where the float32 runs of the same recipe had the format by their first checkpoint (held-out format
    # 14% before training, 99-100% from step 10; docs/measurements.md
    # "A sampler in another precision, corrected").
    # 0.25 of full marks is above an untrained model's rate and far below a learning run's; 20 steps leave a 30-step
    # demo a third of its run to act (docs/health.md "How four detectors judge").
    "format_never_learned": HealthCode("warning", {
        "format_never_steps": threshold(
            20, "Logging steps from the start after which a format reward that never learned is reported ...",
            ge=1),
        "format_never_share": threshold(
            0.25, "... when its running mean (over `window` steps) never reached this share of its full marks "
            "(1.0 for the built-in format rewards; an own one's best score seen): format_never_learned. Rewards "
            "at weight 0 are logged, not trained on, and never judged.", gt=0, le=1),
    }, action_note=" (a warm start or a larger format weight is a new run: warn)"),
    # A new user's own task trained 5 steps with correctness 0 on each (the model never wrote the answer line) while
    # format and length moved, and only truncation was reported; `grpokit preflight` found it in 56 s.
    # 3 steps: early enough to stop a CPU run, and three flat steps of several groups each are the setup, not chance.
    "correctness_never_moved": HealthCode("warning", {
        "correctness_never_steps": threshold(
            3, "Logging steps from the start over which every correctness reward trained on scored the same, its "
            "lowest (no sample earned more), while another trained reward moved: correctness_never_moved.", ge=1),
    }, action_note=" (a prompt, a length or a warm start is a new run: warn)"),
}

HealthActions = create_model(
    "HealthActions", __base__=Section, __module__=__name__,
    __doc__="What the live monitor does when a finding with this code appears (grpokit.health).",
    **{code: (HealthAction, Field(c.action, description=f"Action on {code}{c.action_note}."))
       for code, c in HEALTH_CODES.items()})


class HealthSettings(Section):
    """The settings of the health section every detector shares; `HealthConfig` adds each code's thresholds."""

    enabled: bool = Field(True, description="Run the detectors live during training (grpokit doctor always can).")
    actions: HealthActions = Field(default_factory=HealthActions, description="warn | stop | rollback per code.")
    max_rollbacks: int = Field(2, ge=0, description="Rollbacks allowed per run; after that a rollback finding stops.")
    rollback_min_beta: float = Field(
        0.04, gt=0, description="beta used by a rollback when the run had beta 0 (the Qwen3-0.6B-Base article's value); "
        "a reference model is then loaded, which costs one more copy of the weights.")
    warmup_steps: int = Field(5, ge=0, description="Steps before trend detectors (plateau, collapse, spike) judge.")
    window: int = Field(5, ge=1, description="Steps a condition must persist, and the size of the running level.")
    probe_rows: int = Field(
        48, ge=0, description="Held-out rows (the first N of the recipe's eval set) the probe answers greedily at "
        "step 0 and at every checkpoint, scored by the task's correctness reward; its score feeds probe_drop "
        "(grpokit.training.probe). 0: off. Each probe costs about what evaluating that many rows costs.")

    @model_validator(mode="before")
    @classmethod
    def _drop_role_lists(cls, raw):
        # Run directories written before rewards declared roles list them here; the roles replace them.
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k not in ("correctness_rewards", "format_rewards")}
        return raw


HealthConfig = create_model(
    "HealthConfig", __base__=HealthSettings, __module__=__name__,
    __doc__="""Training health: every detector threshold lives here, with its reason (the one place they are documented).

    Steps below are logging steps (lines of metrics.jsonl). Detectors ignore the first `warmup_steps`
    where a trend is needed (plateau, collapse, spike relative to a running level).
    """,
    **{name: spec for c in HEALTH_CODES.values() for name, spec in c.thresholds.items()})
