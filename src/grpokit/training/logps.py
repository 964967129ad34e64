"""How the loss computes per-token log-probs: each distinct prefix once (grpokit.generation.tree), not TRL's rows.

    train: {shared_prefix: true}     # the default; false computes every row as TRL lays it out

TRL's `_get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep)` receives one row per
completion, the prompt left-padded before each and the completions right-padded to the longest, and runs the model
over every position of that rectangle. `TreeLogps` (a trainer mixin, through grpokit.internals' `grpokit_logps`
hook) reads the same rows, packs them as a tree of shared prefixes and runs the model over the tree instead, then
puts each completion token's log-prob (and entropy) back where TRL's rectangle has it, zeros where TRL's are zero.
Every caller of that method goes through it: the policy's forward and backward in the loss, the old-policy and
reference log-probs, and the sampler correction's trainer log-probs (below). Tool episodes
are rows like any other (their tool results are completion tokens the loss masks, as in TRL's layout).

Per step, metrics.jsonl gets `grpokit/positions/computed` (positions the policy's loss pass ran) and
`grpokit/positions/trl_layout` (what TRL's rectangle would have run for the same rows); the report plots the ratio.
`train --dry-run` prints the ratio to expect for the recipe (`expected_ratio`).

The sampler's correction (`SamplerCorrection`, a trainer mixin through internals.LossHook's `grpokit_loss`), for
a sampler in another precision (grpokit.training.sampling), with the sampler's recorded log-probs:
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

The tree falls back to TRL's own computation, with one line saying why (`note_decision`), for a model the tree cannot be
exact on (grpokit.generation.tree.refusal: attention other than eager/SDPA, no rotary positions, a sliding window
shorter than the rows), multimodal inputs, an MoE auxiliary loss, or a batch whose masks are not TRL's left-padded
prompts and right-padded completions. Not covered: sequence parallelism (TRL's shift_labels path of its own).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from grpokit import internals
from grpokit.generation.tree import TreeCost, mask_form, pack, positions, refusal
from grpokit.run import POSITIONS_COMPUTED, POSITIONS_TRL, SAMPLER_CLIPPED, SAMPLER_GAP_MAX, SAMPLER_GAP_MEAN


def rows_of(input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int):
    """Each row's unpadded tokens and where its completion starts, from TRL's layout (prompt left-padded, completion
    right-padded, the last `logits_to_keep` columns the completion); None when the masks are not that layout."""
    prompt_mask, completion_mask = attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:]
    p_len, c_len = prompt_mask.sum(dim=1), completion_mask.sum(dim=1)
    cols_p = torch.arange(prompt_mask.size(1), device=attention_mask.device)
    cols_c = torch.arange(logits_to_keep, device=attention_mask.device)
    left_padded = torch.equal(prompt_mask.bool(), cols_p[None] >= (prompt_mask.size(1) - p_len)[:, None])
    right_padded = torch.equal(completion_mask.bool(), cols_c[None] < c_len[:, None])
    if not (left_padded and right_padded) or int(p_len.min()) < 1:
        return None
    ids = input_ids.tolist()
    width = prompt_mask.size(1)
    sequences = [row[width - p: width + c] for row, p, c in zip(ids, p_len.tolist(), c_len.tolist())]
    return sequences, p_len.tolist(), c_len.tolist()


def tree_logps(model, sequences: Sequence[Sequence[int]], scored_from: Sequence[int], width: int,
               compute_entropy: bool = False, cost: TreeCost | None = None, form: str = "bool",
               autocast: Callable | None = None):
    """(log-probs, entropies or None, positions computed): (rows, width) tensors with row r's scored tokens
    (sequences[r][scored_from[r]:]) from column 0, zeros after, through `model`'s fused LM head (TRL's
    `add_fused_lm_head`: `shift_labels` scored, nothing else)."""
    device = next(model.parameters()).device
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    trees = pack(sequences, scored_from, cost)
    logps = entropies = None
    for tree in trees:
        with (autocast() if autocast else _nothing()):
            out = model(**tree.inputs(form, device, dtype), fused_lm_head=True)
        rows = [r for r in tree.rows if tree.scored[r]]
        if not rows:
            continue
        index = torch.tensor([p for r in rows for p in tree.scored[r]], device=device)
        row_of = torch.tensor([r for r in rows for _ in tree.scored[r]], device=device)
        col_of = torch.tensor([c for r in rows for c in range(len(tree.scored[r]))], device=device)
        logps = _place(logps, out.log_probs[0, index], row_of, col_of, len(sequences), width)
        if compute_entropy and out.entropy is not None:
            entropies = _place(entropies, out.entropy[0, index], row_of, col_of, len(sequences), width)
    return logps, entropies, positions(trees)


def _place(into, values, rows, cols, n_rows: int, width: int):
    base = values.new_zeros(n_rows, width) if into is None else into
    return base.index_put((rows, cols), values)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class TreeLogps:
    """Trainer mixin: TRL's per-token log-probs over the tree of shared prefixes (the module docstring)."""

    shared_prefix: bool = True
    _tree_costs: dict | None = None

    def grpokit_logps(self, model, input_ids, attention_mask, logits_to_keep, trl_logps, batch_size=None,
                      compute_entropy=False, compute_aux_loss=False, **extra):
        trl = lambda: trl_logps(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
        rows = None
        if self.shared_prefix and not compute_aux_loss and all(v is None for v in extra.values()):
            inner = self.accelerator.unwrap_model(model)
            if refusal(inner, longest=input_ids.size(1)) is None:
                rows = rows_of(input_ids, attention_mask, logits_to_keep)
        if rows is None or not any(rows[2]):
            out = trl()
            self._count(model, input_ids.numel(), input_ids.numel())
            return out
        sequences, scored_from, _ = rows
        logps, entropies, computed = tree_logps(model, sequences, scored_from, logits_to_keep, compute_entropy,
                                                self._cost(inner), mask_form(inner), self.accelerator.autocast)
        self._count(model, computed, input_ids.numel())
        return logps, entropies, None

    def _cost(self, inner) -> TreeCost:
        self._tree_costs = self._tree_costs or {}
        if id(inner) not in self._tree_costs:
            self._tree_costs[id(inner)] = TreeCost.of(inner)
        return self._tree_costs[id(inner)]

    def _count(self, model, computed: int, trl_layout: int) -> None:
        """The positions of the policy's loss pass (the pass with gradients), summed over the step's micro-batches."""
        if not torch.is_grad_enabled() or not self.model.training:
            return
        step = self.state.global_step
        if getattr(self, "_positions_step", None) != step:
            self._positions_step, self._positions = step, [0, 0]
        self._positions[0] += computed
        self._positions[1] += trl_layout
        internals.set_metric(self, POSITIONS_COMPUTED, float(self._positions[0]))
        internals.set_metric(self, POSITIONS_TRL, float(self._positions[1]))


def decision(model, longest: int, enabled: bool = True) -> str:
    """The run's line about how its loss computes log-probs (said once, before training)."""
    if not enabled:
        return "log-probs: TRL's layout (train.shared_prefix: false)"
    why = refusal(model, longest=longest)
    if why is not None:
        return f"log-probs: TRL's layout, one row per completion: {why}"
    return "log-probs: each distinct prefix computed once (a group's prompt once, completions to their own length)"


def expected_ratio(prompt_lengths: Sequence[Sequence[int]], shared: Sequence[int], generations: int,
                   completion_length: int) -> float:
    """Positions the tree computes over TRL's layout, for steps whose prompts have these token lengths (one list
    per step's micro-batch, each prompt once) and share `shared[i]` leading tokens, every completion at
    `completion_length` tokens and none alike: the most the tree costs (shorter or alike completions cost less).
    Each group's completions after the first need an anchor (grpokit.generation.tree)."""
    ours = trl = 0
    for lengths, common in zip(prompt_lengths, shared):
        ours += common + sum(p - common for p in lengths) + generations * len(lengths) * completion_length
        ours += (generations - 1) * len(lengths)
        trl += generations * len(lengths) * (max(lengths) + completion_length)
    return ours / trl if trl else 1.0


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

    sampler = None  # grpokit.training.sampling.SamplerCopy, set by attach_sampling
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
