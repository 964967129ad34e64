"""The recipe's `health:` section: the health codes, the action per code, and
every detector threshold with its reason (the one place they are documented)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from grpokit.recipe.section import Section

HEALTH_CODES = (
    "zero_variance_groups", "reward_plateau", "kl_spike", "length_collapse", "truncation", "empty_completions",
    "repetition", "format_collapse", "reward_hacking_suspected", "entropy_collapse", "nan", "tool_failures_rising",
    "correctness_collapse", "nothing_learned", "sampler_mismatch",
)
HealthAction = Literal["warn", "stop", "rollback"]


class HealthActions(Section):
    """What the live monitor does when a finding with this code appears (grpokit.health)."""

    zero_variance_groups: HealthAction = Field("warn", description="Action on zero_variance_groups.")
    reward_plateau: HealthAction = Field("warn", description="Action on reward_plateau.")
    kl_spike: HealthAction = Field("warn", description="Action on kl_spike (the Qwen3-0.6B-Base article rolls back by hand).")
    length_collapse: HealthAction = Field("warn", description="Action on length_collapse.")
    truncation: HealthAction = Field("warn", description="Action on truncation.")
    empty_completions: HealthAction = Field("warn", description="Action on empty_completions.")
    repetition: HealthAction = Field("warn", description="Action on repetition.")
    format_collapse: HealthAction = Field("warn", description="Action on format_collapse.")
    reward_hacking_suspected: HealthAction = Field("warn", description="Action on reward_hacking_suspected.")
    entropy_collapse: HealthAction = Field("warn", description="Action on entropy_collapse.")
    nan: HealthAction = Field("warn", description="Action on nan (stop or rollback: training on NaN is wasted).")
    tool_failures_rising: HealthAction = Field("warn", description="Action on tool_failures_rising (tool tasks).")
    correctness_collapse: HealthAction = Field("warn", description="Action on correctness_collapse.")
    nothing_learned: HealthAction = Field(
        "warn", description="Action on nothing_learned (stop saves the compute of a run that cannot learn as set up).")
    sampler_mismatch: HealthAction = Field(
        "warn", description="Action on sampler_mismatch (generation.sampler_dtype: the sampler's log-probs drift "
        "from the trainer's).")


class HealthConfig(Section):
    """Training health: every detector threshold lives here, with its reason (the one place they are documented).

    Steps below are logging steps (lines of metrics.jsonl). Detectors ignore the first `warmup_steps`
    where a trend is needed (plateau, collapse, spike relative to a running level).
    """

    enabled: bool = Field(True, description="Run the detectors live during training (grpokit doctor always can).")
    actions: HealthActions = Field(default_factory=HealthActions, description="warn | stop | rollback per code.")
    max_rollbacks: int = Field(2, ge=0, description="Rollbacks allowed per run; after that a rollback finding stops.")
    rollback_min_beta: float = Field(
        0.04, gt=0, description="beta used by a rollback when the run had beta 0 (the Qwen3-0.6B-Base article's value); "
        "a reference model is then loaded, which costs one more copy of the weights.")
    warmup_steps: int = Field(5, ge=0, description="Steps before trend detectors (plateau, collapse, spike) judge.")
    window: int = Field(5, ge=1, description="Steps a condition must persist, and the size of the running level.")
    zero_std_frac: float = Field(
        0.8, ge=0, le=1, description="frac_reward_zero_std at or above this for `window` steps: too few groups "
        "carry signal (every completion of a prompt scored the same).")
    # Every group tied means every advantage is 0: the policy-gradient term, and with beta 0 the loss and grad_norm,
    # are exactly 0 (the tiny-model run of tests/fixtures/run_before_layout logs loss 0.0, grad_norm 0.0 at 1.0), so
    # the steps changed nothing but weight decay: a fact, not a judgement, hence the share 1.0. 3 steps: the
    # issue's run stopped after 3 such steps and nothing said so; one all-tied step is common in healthy runs with
    # few groups per step (the demo's 2: docs/measurements.md times such steps), three in a row over 6+ groups is
    # the run's setup (data too hard or too easy for the model, a pass/fail reward), not chance.
    nothing_learned_steps: int = Field(
        3, ge=1, description="Logging steps in a row over which the share of tied groups is judged for "
        "nothing_learned (the last ones so far).")
    nothing_learned_frac: float = Field(
        1.0, gt=0, le=1, description="Mean frac_reward_zero_std over those steps at or above this: nothing was "
        "learned in them (1.0: every group scored all its completions the same, so every advantage is 0).")
    # A bf16 sampler of the float32 embedded model differed from the trainer by 0.027 per token on average (p99
    # 0.21; bf16 autocast alone 0.024: docs/measurements.md, "Generation choices on the CPU"). Four times that
    # over `window` steps is no longer the precision: the policy has moved to where bf16 rounds it differently.
    sampler_gap_max: float = Field(
        0.1, gt=0, description="Mean |log pi_trainer - log pi_sampler| per completion token (metrics.jsonl "
        "sampling/sampling_logp_difference/mean) at or above this for `window` steps: sampler_mismatch.")
    plateau_steps: int = Field(30, ge=2, description="Steps the reward must stay flat to count as a plateau.")
    plateau_delta: float = Field(
        0.02, ge=0, description="Largest rise over `plateau_steps` that is flat: the least-squares trend of the "
        "reward plus two standard errors of it must stay below this (a noisy climb is not a plateau).")
    kl_max: float = Field(0.5, gt=0, description="Absolute kl bound; the articles see runs break beyond a few tenths.")
    kl_spike_factor: float = Field(5.0, gt=1, description="kl above this many times its running median is a spike.")
    kl_floor: float = Field(0.01, ge=0, description="kl below this is never a spike (ratios of tiny numbers are noise).")
    length_drop: float = Field(
        0.5, gt=0, lt=1, description="Mean completion length below this share of its running peak level is a "
        "collapse (the Qwen3-4B/14B article: 2000 -> 300 tokens is the model learning to be lazy).")
    truncation_frac: float = Field(0.3, ge=0, le=1, description="completions/clipped_ratio at or above this is truncation.")
    empty_chars: int = Field(5, ge=0, description="A sampled completion with fewer non-blank characters is empty.")
    empty_frac: float = Field(0.5, ge=0, le=1, description="Share of a step's samples that must be empty to report.")
    repetition_ngram: int = Field(4, ge=1, description="n of the word n-grams checked for repetition.")
    repetition_ratio: float = Field(
        0.5, gt=0, le=1, description="A completion whose share of repeated n-grams reaches this is repetitive.")
    repetition_frac: float = Field(0.5, ge=0, le=1, description="Share of a step's samples that must be repetitive.")
    format_learned: float = Field(
        0.5, ge=0, description="The format reward's running mean must have reached this share of its full marks "
        "(the best score a sampled completion earned: 0.2 for a reward worth 0.2) ...")
    format_drop: float = Field(0.5, gt=0, lt=1, description="... and then fallen below this share of that peak.")
    hacking_rise: float = Field(0.2, gt=0, description="Total reward rise over `plateau_steps` that must come ...")
    hacking_flat: float = Field(0.02, ge=0, description="... with the correctness reward moving less than this.")
    # Chosen on the logs of 10 demo-recipe runs (40-120 steps, 2 x 8 completions per step): window 5, 0.2 and
    # 0.4 never fired on the 9 healthy ones and fired at step 17 of the lr 1e-4 run whose held-out accuracy fell
    # 8% -> 2% (training correctness 0.3 -> 0 over its last 5 steps); 0.5 fired once on a healthy one.
    correctness_learned: float = Field(
        0.2, ge=0, description="A correctness reward's running mean must have reached this share of its full "
        "marks (1.0 for math_correctness) ...")
    correctness_drop: float = Field(
        0.4, gt=0, lt=1, description="... and then fallen below this share of that peak: correctness_collapse.")
    entropy_min: float = Field(0.05, ge=0, description="Mean token entropy (nats) below this: groups become identical.")
    entropy_drop: float = Field(0.1, gt=0, lt=1, description="... or below this share of its early level.")
    tool_failure_max: float = Field(0.5, ge=0, le=1, description="tools/failure_frequency at or above this ...")
    tool_failure_rise: float = Field(0.2, gt=0, le=1, description="... and risen this much since warm-up: "
                                     "tool_failures_rising (grpokit.health.tool_failures).")

    @model_validator(mode="before")
    @classmethod
    def _drop_role_lists(cls, raw):
        # Run directories written before rewards declared roles list them here; the roles replace them.
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k not in ("correctness_rewards", "format_rewards")}
        return raw
