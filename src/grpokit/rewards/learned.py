"""`reward_model`: a learned reward, the score of a reward model trained from rankings (grpokit.rm).

    rewards:
      - {name: reward_model, weight: 1.0, params: {path: runs/rm-style}}
      - {name: length, weight: 0.5}          # rule rewards alongside keep it honest

For tasks without a checkable answer (tone, style: the articles'
preference tasks). The model is loaded on first use, on the training device,
scores completions in batches and caches each (question, completion) for the
run. `scale: sigmoid` (default) maps the model's unbounded score into (0, 1)
so it mixes with 0/1 rule rewards and the health thresholds keep their
meaning; `raw` passes the logit through.

A learned reward can be gamed: the policy finds what the reward model
over-rewards (length, flattery, a phrase) rather than what people preferred.
The reward audit says so before training, and the health monitor's
`reward_hacking_suspected` compares it with the recipe's rule rewards.
Not covered: a reward model served over HTTP, several reward models at once.
"""
from __future__ import annotations

import math
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.rewards.registry import describe

SCALES = ("sigmoid", "raw")
LEARNED_REWARDS = ("reward_model",)  # scored by a model, not a rule: the audit and health treat them as gameable


def _sigmoid(x: float) -> float:
    # Two branches so a large score of either sign never overflows exp().
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@describe(
    description="The score of a reward model trained from human rankings (`grpokit rm train`) for the question and "
    "the completion; sigmoid-scaled into (0, 1) by default. Learned, so it can be gamed: pair it with rule rewards.",
    columns=("question",),
    params={
        "path": "the reward model folder from `grpokit rm train` (relative paths: from the current directory)",
        "batch_size": "completions scored per forward pass (default 8)",
        "scale": "sigmoid (default): score in (0, 1); raw: the model's logit",
    },
)
def get_reward_model_reward(path: str | None = None, batch_size: int = 8, scale: str = "sigmoid"):
    from grpokit.rm import RewardModelScorer, read_rm_info

    if not path:
        raise GrpokitError([Problem("rewards: reward_model", "params.path is not set",
                                    "train a reward model (`grpokit rm train RANKINGS --out DIR`) and set "
                                    "params: {path: DIR}")])
    if scale not in SCALES:
        raise GrpokitError([Problem("rewards: reward_model params.scale", f"unknown scale {scale!r}",
                                    f"use one of {', '.join(SCALES)}")])
    if not isinstance(batch_size, int) or batch_size < 1:
        raise GrpokitError([Problem("rewards: reward_model params.batch_size", f"must be a positive whole number, "
                                    f"got {batch_size!r}", "e.g. batch_size: 8")])
    read_rm_info(Path(path).expanduser())  # a wrong folder is reported now, not after the policy has loaded
    scorer = RewardModelScorer(Path(path).expanduser(), batch_size)

    def score(completions: list[str], question: list | None = None, **_columns) -> list[float]:
        if question is None:
            raise ValueError("reward_model needs the question column")
        raw = scorer.score(list(question), completions)
        return raw if scale == "raw" else [_sigmoid(x) for x in raw]

    def explain(completion: str, question=None, **_row) -> dict:
        (s,) = score([completion], question=[question])
        return {"reward": s, "reason": "learned score"}

    score.explain = explain
    score.scorer = scorer  # tests and callers can see the cache and the forward count
    return score
