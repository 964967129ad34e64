"""A sampler that may differ from the trainer: a copy of the policy in another precision, and its correction.

    generation: {sampler_dtype: bfloat16, sampler_correction: bypass}     # or auto, importance_sampling, none

Sampling is half of a CPU step and bfloat16 roughly halves its arithmetic, but a bf16 copy's log-probs are not
the float32 trainer's (docs/measurements.md "Generation choices on the CPU"), and TRL corrects that gap only
when vLLM samples (`vllm_importance_sampling_correction`). This module gives the HF path the same footing:

- `SamplerCopy`: the policy's weights cast to the sampler's dtype (buffers such as rotary frequencies stay as
  they are). Refreshed from the trained weights before each generation whose optimizer step moved: after every
  step, after a rollback (a new trainer builds a new copy) and on resume (the first refresh copies every
  weight, so the checkpoint's are in; later ones only the trainable ones, the LoRA adapter for LoRA).
  It samples through the same warpers (grpokit.internals.sample_through) and records each drawn token's
  log-prob from its raw logits / temperature (grpokit.generation.SampledLogprobs); TRL carries them in the
  batch as `sampling_per_token_logps`.
- `SamplerCorrection` (a trainer mixin, grpokit.internals.LossHook's `grpokit_loss`):
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

Not covered: sharded models (FSDP / ZeRO-3: the copy would gather every weight; refused), the continuous and
vLLM backends (they sample in their own precision; vLLM's own correction applies), tool loops beyond what TRL's
HF path does with the log-probs.
"""
from __future__ import annotations

import copy
import math

import torch

from grpokit import hf_internals, internals
from grpokit.errors import GrpokitError, Problem
from grpokit.generation import SampledLogprobs
from grpokit.run import SAMPLER_CLIPPED, SAMPLER_GAP_MAX, SAMPLER_GAP_MEAN

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class SamplerCopy:
    """The policy's weights in the sampler's dtype; see the module docstring."""

    def __init__(self, policy, dtype: torch.dtype):
        self.dtype = dtype
        self.model = copy.deepcopy(policy)
        drop_foreign_forwards(self.model)
        self.model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
            p.data = p.data.to(dtype)
        self.synced_step: int | None = None  # None: not yet copied from the trained weights
        self.refreshes = 0
        self._pending = None

    def refresh(self, policy, step: int) -> None:
        """Copy the trained weights (cast) when the optimizer step moved since the last copy."""
        if step == self.synced_step:
            return
        with torch.no_grad():
            for (name, mine), (_, theirs) in zip(self.model.named_parameters(), policy.named_parameters(),
                                                 strict=True):
                if self.synced_step is None or theirs.requires_grad:
                    mine.copy_(theirs)
        self.synced_step = step
        self.refreshes += 1

    def generate(self, trainer, *args, **kwargs):
        """The policy's `generate` call made on the copy, recording the drawn tokens' log-probs."""
        self.refresh(trainer.model, trainer.state.global_step)
        recorder = SampledLogprobs(trainer.args.temperature)
        kwargs["logits_processor"] = [recorder, *(kwargs.get("logits_processor") or [])]
        with torch.no_grad():
            out = self.model.generate(*args, **kwargs)
        sequences = out if isinstance(out, torch.Tensor) else out.sequences
        self._pending = recorder.finish(sequences)
        return out

    def take_logprobs(self, completion_ids: list[list[int]]) -> list[list[float]] | None:
        """The recorded log-probs of the last generate call, cut to each completion as TRL cut it (after EOS)."""
        pending, self._pending = self._pending, None
        if pending is None or pending.shape[0] != len(completion_ids):
            return None
        return [row[:len(ids)].tolist() for row, ids in zip(pending.cpu(), completion_ids)]


def drop_foreign_forwards(model) -> list[str]:
    """Remove the per-instance `forward` patches of a deep copy that still call another model's forward; returns
    the names of the modules they were on.

    TRL 1.16's GRPOTrainer patches the policy's `forward` for its fused LM head (trl.trainer.utils, a closure
    over `original_forward`, the policy's bound method). `copy.deepcopy` copies modules but not functions, so
    the copy's patched forward still runs the *policy's* forward, in the policy's precision: the copy's weights
    would never be used (every sampled log-prob equal to the trainer's, no speed-up). Without the patch the copy
    runs its class's own forward, which is what the patch does anyway when not asked for the fused head
    (generation never asks). A patch that closes over nothing outside the copy (accelerate's device hooks)
    is kept."""
    own = {id(m) for m in model.modules()}
    dropped = []
    for name, module in model.named_modules():
        patched = module.__dict__.get("forward")
        cells = getattr(getattr(patched, "__func__", patched), "__closure__", None) or ()
        for cell in cells:
            try:
                owner = getattr(cell.cell_contents, "__self__", None)
            except ValueError:  # an empty cell
                continue
            if isinstance(owner, torch.nn.Module) and id(owner) not in own:
                del module.__dict__["forward"]
                dropped.append(name)
                break
    return dropped


def attach_sampler(trainer, recipe, policy_dtype: str, log) -> SamplerCopy | None:
    """The trainer's sampler for generation.sampler_dtype (None: the policy samples itself), said in one line."""
    from grpokit.recipe import sampler_dtype_of

    chosen, why = sampler_dtype_of(recipe.generation, policy_dtype)
    trainer.sampler = None
    trainer.sampler_correction = recipe.generation.sampler_correction
    if chosen == policy_dtype:  # said on every run too: the precision a run sampled in is never left to guess
        log(f"sampling in {chosen}: {why}")
        return None
    if getattr(trainer.model, "hf_quantizer", None) is not None:
        raise GrpokitError([Problem("generation.sampler_dtype", f"{chosen}: the policy's base weights are quantized "
                                    "(model.init_kwargs.quantization_config); a cast copy of them is no sampler",
                                    "set generation.sampler_dtype: same for a QLoRA recipe")])
    if hf_internals.reference_is_sharded(trainer):
        raise GrpokitError([Problem("generation.sampler_dtype", f"{chosen}: the policy's weights are sharded (FSDP / "
                                    "ZeRO-3), and a whole copy of them would gather every weight on each process",
                                    "set generation.sampler_dtype: same, or train without weight sharding")])
    trainer.sampler = SamplerCopy(trainer.model, DTYPES[chosen])
    log(f"sampling in {chosen} (the trainer in {policy_dtype}), corrected by "
        f"{recipe.generation.sampler_correction}: {why}")
    return trainer.sampler


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
    """Trainer mixin: the sampler's log-probs into the batch, and the correction in the loss (module docstring)."""

    sampler: SamplerCopy | None = None
    sampler_correction: str = "bypass"

    def grpokit_logprobs(self, completion_ids, logprobs):
        if logprobs is None and self.sampler is not None:
            logprobs = self.sampler.take_logprobs(completion_ids)
        return super().grpokit_logprobs(completion_ids, logprobs)

    def grpokit_loss(self, model, inputs, trl_loss):
        if self.sampler is None:
            return super().grpokit_loss(model, inputs, trl_loss)
        return super().grpokit_loss(model, inputs, lambda batch: self._corrected_loss(model, batch, trl_loss))

    def _corrected_loss(self, model, batch: dict, trl_loss):
        sampled = batch.get("sampling_per_token_logps")
        if sampled is None:  # a batch from before the sampler (or a path that recorded none): TRL's loss
            return trl_loss(batch)
        batch, mask = dict(batch), batch[internals.COMPLETION_MASK].float()
        ratio = None
        if self.sampler_correction == "bypass":
            batch["old_per_token_logps"] = sampled
        elif self.sampler_correction == "importance_sampling":
            old = batch.get("old_per_token_logps")
            old = internals.trainer_logps(self, model, batch) if old is None else old
            a = self.args
            ratio = importance_ratio(old, sampled, mask, a.vllm_importance_sampling_mode,
                                     a.vllm_importance_sampling_clip_min, a.vllm_importance_sampling_clip_max)
            batch[internals.ADVANTAGES] = fold_into_advantages(batch[internals.ADVANTAGES], ratio)
        with internals.captured_logps(self) as seen:
            loss = trl_loss(batch)
        if seen:
            self._log_mismatch(seen[0], sampled, mask, ratio)
        return loss

    def _log_mismatch(self, trainer_logps, sampled, mask, ratio) -> None:
        tokens = mask.sum().clamp(min=1.0)
        gap = torch.nan_to_num((trainer_logps - sampled).abs(), nan=0.0) * mask
        internals.log_metric(self, SAMPLER_GAP_MEAN, float(gap.sum() / tokens))
        internals.log_metric(self, SAMPLER_GAP_MAX, float(gap.max()))
        if ratio is None:  # bypass / none: the share of tokens PPO's clip holds (pi_trainer / pi_sampler)
            coef = torch.exp(trainer_logps - sampled)
            held = (coef < 1 - self.args.epsilon) | (coef > 1 + (self.args.epsilon_high or self.args.epsilon))
        else:  # importance_sampling: the share the weight truncated or masked, at the mode's level
            a = self.args
            high = a.vllm_importance_sampling_clip_max if a.vllm_importance_sampling_clip_max is not None else math.inf
            low = a.vllm_importance_sampling_clip_min if a.vllm_importance_sampling_clip_min is not None else -math.inf
            diff = torch.nan_to_num((trainer_logps - sampled) * mask, nan=0.0)
            if a.vllm_importance_sampling_mode.startswith("sequence"):
                diff = diff.sum(dim=-1, keepdim=True)
            raw = torch.exp(diff).expand_as(mask)
            held = (raw > high) | (raw < low)
        internals.log_metric(self, SAMPLER_CLIPPED, float((held.float() * mask).sum() / tokens))
