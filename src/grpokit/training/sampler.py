"""The sampler's correction: a sampler in another precision (grpokit.training.sampling's SamplerCopy) draws with
log-probs that are not the trainer's, and this loss step of a GrpokitTrainer corrects TRL's loss with the sampler's recorded
log-probs (TRL carries them in the batch as `sampling_per_token_logps`).

    generation: {sampler_dtype: bfloat16, sampler_correction: bypass}     # or importance_sampling, none

  - bypass (default): the sampler's log-probs are PPO's old policy, so the clipped ratio pi_trainer /
    pi_sampler corrects each token with no extra forward pass (the "bypass" mode of verl's rollout-correction
    docs; Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training");
  - importance_sampling: the trainer's old log-probs from one more forward pass, and TRL's truncated importance
    sampling weight exp(old - sampler) (its `vllm_importance_sampling_mode` token/sequence x truncate/mask and
    `vllm_importance_sampling_clip_min/max`, read from the GRPOConfig), folded into the advantages, which for
    every loss type but vespo gives TRL's own vLLM-path loss (per_token_loss * ratio), a test shows;
  - none: uncorrected; the gap is still measured.
  Every micro-batch logs TRL's vLLM metric names `sampling/sampling_logp_difference/mean|max` (|log pi_trainer -
  log pi_sampler| over completion tokens) and `sampling/clipped_frac` (tokens whose ratio PPO clips, or the
  importance weight truncates or masks).

Not covered: the continuous and vLLM backends (TRL corrects its own vLLM path).
"""
from __future__ import annotations

import math

import torch

from grpokit import internals
from grpokit.run import SAMPLER_CLIPPED, SAMPLER_GAP_MAX, SAMPLER_GAP_MEAN


# ---------------------------------------------------------------- the correction's arithmetic (TRL's, on the HF path)
def importance_ratio(old, sampled, mask, mode: str, clip_min: float | None, clip_max: float | None):
    """TRL 1.16's vLLM importance-sampling weight exp(old - sampled), per token (B, T) or per sequence (B, 1),
    truncated to [clip_min, clip_max] or masked (0) outside it: `_generate_and_score_completions`' own steps,
    which TRL keeps inline (no function of its to call). NaN log-probs count as no difference."""
    diff = torch.nan_to_num((old - sampled) * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    if mode.endswith("mask"):
        low = clip_min if clip_min is not None else -math.inf
        high = clip_max if clip_max is not None else math.inf
        return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    raise ValueError(f"unknown importance sampling mode {mode!r}")


def fold_into_advantages(advantages, ratio):
    """advantages (B,) or (B, T) times a non-negative weight (B, T) or (B, 1): TRL's loss is linear in the
    advantage inside min(coef * A, clip(coef) * A), so this equals multiplying each token's loss by the weight."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    return advantages * ratio


class SamplerCorrection:
    """A loss step of a GrpokitTrainer: the sampler's recorded log-probs correct TRL's loss by `mode` (the module
    docstring: bypass, importance_sampling, none), and the gap between sampler and trainer is logged. Without a
    sampler copy (the policy samples itself) or without recorded log-probs in the batch: TRL's loss as it is."""

    def __init__(self, mode: str = "bypass"):
        self.mode = mode

    def __call__(self, trainer, model, batch: dict, loss):
        sampled = batch.get(internals.SAMPLED_LOGPS)
        if trainer.sampler is None or sampled is None:  # no copy, or a batch from before it: TRL's loss
            return loss(batch)
        batch, mask = dict(batch), batch[internals.COMPLETION_MASK].float()
        ratio = None
        if self.mode == "bypass":
            batch["old_per_token_logps"] = sampled
        elif self.mode == "importance_sampling":
            old = batch.get("old_per_token_logps")
            old = internals.trainer_logps(trainer, model, batch) if old is None else old
            a = trainer.args
            ratio = importance_ratio(old, sampled, mask, a.vllm_importance_sampling_mode,
                                     a.vllm_importance_sampling_clip_min, a.vllm_importance_sampling_clip_max)
            batch[internals.ADVANTAGES] = fold_into_advantages(batch[internals.ADVANTAGES], ratio)
        value, seen = trainer.logps_seen(loss, batch)
        if seen is not None:
            self._log_mismatch(trainer, seen, sampled, mask, ratio)
        return value

    def _log_mismatch(self, trainer, trainer_logps, sampled, mask, ratio) -> None:
        tokens = mask.sum().clamp(min=1.0)
        gap = torch.nan_to_num((trainer_logps - sampled).abs(), nan=0.0) * mask
        internals.log_metric(trainer, SAMPLER_GAP_MEAN, float(gap.sum() / tokens))
        internals.log_metric(trainer, SAMPLER_GAP_MAX, float(gap.max()))
        a = trainer.args
        if ratio is None:  # bypass / none: the share of tokens PPO's clip holds (pi_trainer / pi_sampler)
            coef = torch.exp(trainer_logps - sampled)
            held = (coef < 1 - a.epsilon) | (coef > 1 + (a.epsilon_high or a.epsilon))
        else:  # importance_sampling: the share the weight truncated or masked, at the mode's level
            high = a.vllm_importance_sampling_clip_max if a.vllm_importance_sampling_clip_max is not None else math.inf
            low = a.vllm_importance_sampling_clip_min if a.vllm_importance_sampling_clip_min is not None else -math.inf
            diff = torch.nan_to_num((trainer_logps - sampled) * mask, nan=0.0)
            if a.vllm_importance_sampling_mode.startswith("sequence"):
                diff = diff.sum(dim=-1, keepdim=True)
            raw = torch.exp(diff).expand_as(mask)
            held = (raw > high) | (raw < low)
        internals.log_metric(trainer, SAMPLER_CLIPPED, float((held.float() * mask).sum() / tokens))
