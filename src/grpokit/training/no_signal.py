"""Skip the policy forward/backward on completions that carry no learning signal.

A GRPO group whose completions all score the same has advantage 0 for every
completion (the article's "reward always zero" failure; early in the demo
run every group is like that). TRL still runs the policy forward and
backward pass over those completions, and on a CPU that pass is ~70% of a
step (benchmarks/step_breakdown.py). With

- beta == 0 (no KL term, whose gradient does not vanish with the advantage), and
- a loss whose normaliser does not depend on the micro-batch (dapo, cispo,
  vespo: they divide by `num_items_in_batch`, the token count of the whole
  generation batch, an input computed before this filter),

every per-token loss of a zero-advantage completion is exactly 0, so
dropping those rows (and the padding columns nobody in the kept rows uses)
leaves the loss and its gradient unchanged while the pass gets cheaper. When
no row of a micro-batch carries signal, the pass is skipped entirely and a
zero loss over the trainable weights is returned, so the optimizer sees the
same all-zero gradients TRL would have produced (AdamW momentum and weight
decay still apply, as they would have).

Each step logs `grpokit/trained_frac`: the share of its completions that went
through the pass (1.0 where the filter stands aside is not logged).

What changes: TRL's per-micro-batch metrics computed inside the loss
(`entropy`, `clip_ratio/*`) describe the completions trained on, and are
absent for a step where none were. Other losses (grpo, bnpo, dr_grpo, luspo,
sapo: their normaliser counts the rows of the micro-batch), beta > 0, an
entropy bonus, TRL's top-entropy token mask (top_entropy_quantile < 1: its
threshold is a quantile over the micro-batch, which dropping rows would move)
and multi-process training (DDP/ZeRO ranks must run the same passes) run TRL's
pass unchanged. This is DAPO's "dynamic sampling" without the
re-sampling: the step is not refilled with new prompts, it just costs less.
"""
from __future__ import annotations

import torch

from grpokit.internals import (ADVANTAGES, COMPLETION_ALIGNED, COMPLETION_IDS, COMPLETION_MASK, MULTIMODAL_KEYS,
                               PROMPT_IDS, PROMPT_MASK, log_metric)

EXACT_LOSS_TYPES = ("dapo", "cispo", "vespo")
ADVANTAGE_EPS = 1e-6  # |advantage| at or below this is "no signal" (a zero-variance group gives ~1e-12 from rounding)


def applies(loss_type: str, beta: float) -> bool:
    """Whether dropping zero-advantage rows leaves the loss and its gradient exactly unchanged."""
    return beta == 0.0 and loss_type in EXACT_LOSS_TYPES


def signal_rows(advantages: torch.Tensor) -> torch.Tensor:
    """Boolean (B,) mask: rows whose advantage is not ~0 (a (B, T) advantage counts if any token's is)."""
    a = advantages.abs()
    return (a.flatten(1).amax(dim=1) if a.dim() > 1 else a) > ADVANTAGE_EPS


def keep_rows(inputs: dict, keep: torch.Tensor) -> dict:
    """The micro-batch restricted to rows `keep`, without the prompt/completion columns that are padding everywhere.

    Prompts are left-padded and completions right-padded (TRL's layout), so the trimmed columns are the
    leading prompt columns and the trailing completion columns no kept row uses.
    """
    out = dict(inputs)
    batch = inputs[COMPLETION_IDS].shape[0]
    for k, v in inputs.items():
        if isinstance(v, torch.Tensor) and v.dim() >= 1 and v.shape[0] == batch:
            out[k] = v[keep]
    used = out[COMPLETION_MASK].any(dim=0).nonzero()
    width = int(used.max()) + 1 if used.numel() else 1
    out[COMPLETION_IDS] = out[COMPLETION_IDS][:, :width]
    for k in (COMPLETION_MASK, *COMPLETION_ALIGNED):  # (B, T_completion) tensors, trimmed with completion_ids
        v = out.get(k)
        if isinstance(v, torch.Tensor) and v.dim() == 2:
            out[k] = v[:, :width]
    used = out[PROMPT_MASK].any(dim=0).nonzero()
    start = int(used.min()) if used.numel() else 0
    out[PROMPT_IDS], out[PROMPT_MASK] = out[PROMPT_IDS][:, start:], out[PROMPT_MASK][:, start:]
    return out


def zero_loss(model) -> torch.Tensor:
    """0 with a (zero) gradient path to every trainable weight: what a pass over zero-advantage rows yields."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.stack([p.sum() for p in params]).sum() * 0.0


class SkipNoSignal:
    """A loss step of a GrpokitTrainer (grpokit.training.trainer): TRL's loss over the rows with a learning signal
    only, where that is exact (the module docstring); else the batch as it is."""

    def __call__(self, trainer, model, inputs: dict, loss):
        # One process only: under DDP/ZeRO every rank must run the same forward/backward collectives, and a rank
        # that skipped its pass (or trained on fewer rows) would leave the others waiting.
        # Inputs that are not per-row text tensors (multimodal): the filter stands aside rather than guess.
        # An entropy bonus (entropy_coef, train.entropy_target) has a gradient on every completion: not exact either,
        # nor is TRL's top-entropy mask (top_entropy_quantile < 1): its threshold is a quantile over the micro-batch's
        # tokens, which the dropped rows would move.
        a = trainer.args
        if not (model.training and applies(a.loss_type, a.beta)) or a.entropy_coef or a.use_adaptive_entropy \
                or a.top_entropy_quantile < 1.0 \
                or trainer.accelerator.num_processes != 1 or any(inputs.get(k) is not None for k in MULTIMODAL_KEYS):
            return loss(inputs)
        keep = signal_rows(inputs[ADVANTAGES])
        n = int(keep.sum())
        log_metric(trainer, "grpokit/trained_frac", n / keep.numel())
        if n == keep.numel():
            return loss(inputs)
        if n == 0:
            return zero_loss(model)
        return loss(keep_rows(inputs, keep))
