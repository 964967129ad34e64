"""How the loss computes per-token log-probs: each distinct prefix once (grpokit.generation.tree), not TRL's rows.

    train: {shared_prefix: true}     # the default; false computes every row as TRL lays it out

TRL's `_get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep)` receives one row per
completion, the prompt left-padded before each and the completions right-padded to the longest, and runs the model
over every position of that rectangle. `TreeLogps` (the log-prob part of a GrpokitTrainer, grpokit.training.trainer,
called through grpokit.internals' `grpokit_logps` hook) reads the same rows, packs them as a tree of shared prefixes
and runs the model over the tree instead, then puts each completion token's log-prob (and entropy) back where TRL's
rectangle has it, zeros where TRL's are zero.
Every caller of that method goes through it: the policy's forward and backward in the loss, the old-policy and
reference log-probs, and the sampler correction's trainer log-probs (below). Tool episodes
are rows like any other (their tool results are completion tokens the loss masks, as in TRL's layout).

Per step, metrics.jsonl gets `grpokit/positions/computed` (positions the policy's loss pass ran),
`grpokit/positions/trl_layout` (what TRL's rectangle would have run for the same rows) and their `ratio`, which
the report plots (SFT logs the same three, averaged over its micro-batches).
`train --dry-run` prints the ratio to expect for the recipe (`expected_ratio`).

The sampler's correction (`SamplerCorrection`, one of a GrpokitTrainer's loss steps), for a sampler in another
precision (grpokit.training.sampling), with the sampler's recorded log-probs:
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

import contextlib
import math
import random
from typing import Callable, Sequence

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from grpokit import internals, models
from grpokit.data import load_datasets
from grpokit.envs import tool_setup, training_tools
from grpokit.generation.tree import IGNORE, TreeCost, mask_form, pack, positions, refusal
from grpokit.run import (
    POSITIONS_COMPUTED,
    POSITIONS_RATIO,
    POSITIONS_TRL,
    SAMPLER_CLIPPED,
    SAMPLER_GAP_MAX,
    SAMPLER_GAP_MEAN,
)
from grpokit.task import template_of


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


def tree_outputs(model, sequences: Sequence[Sequence[int]], scored: Sequence, columns: Sequence[Sequence[int]],
                 shape: tuple[int, int], fields: Sequence[str] = ("log_probs",), cost: TreeCost | None = None,
                 form: str = "bool", autocast: Callable | None = None) -> tuple[dict, int]:
    """The fused LM head's per-token `fields` (TRL's `add_fused_lm_head`: log_probs, entropy, is_top1, ...) of each
    row's scored tokens, computed over the tree (grpokit.generation.tree.pack: `scored[r]` an index or flags),
    placed in `shape` tensors at row r, columns `columns[r]` (one per scored token), zeros elsewhere; and the
    positions the tree computed. A field the head did not compute is None."""
    device = next(model.parameters()).device
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    trees = pack(sequences, scored, cost)
    placed: dict = {f: None for f in fields}
    for tree in trees:
        with (autocast() if autocast else contextlib.nullcontext()):
            out = model(**tree.inputs(form, device, dtype), fused_lm_head=True)
        rows = [r for r in tree.rows if tree.scored[r]]
        if not rows:
            continue
        index = torch.tensor([p for r in rows for p in tree.scored[r]], device=device)
        row_of = torch.tensor([r for r in rows for _ in tree.scored[r]], device=device)
        col_of = torch.tensor([c for r in rows for c in columns[r]], device=device)
        for f in fields:
            values = getattr(out, f, None)
            if values is not None:
                base = values.new_zeros(shape) if placed[f] is None else placed[f]
                placed[f] = base.index_put((row_of, col_of), values[0, index])
    return placed, positions(trees)


class TreeLogps:
    """The log-prob part of a trainer: TRL's per-token log-probs over the tree of shared prefixes when
    `shared_prefix` (the module docstring), else TRL's own; the positions the policy's loss pass computed are
    logged either way. `longest` (prompt + completion tokens) is what the run's line about it is judged on."""

    def __init__(self, shared_prefix: bool = True, longest: int = 0, what: str = "log-probs"):
        self.shared_prefix, self.longest, self.what = shared_prefix, longest, what
        self.costs: dict[int, TreeCost] = {}  # per model: counting its parameters once
        self.step: int | None = None  # the step whose positions are being summed
        self.positions = [0, 0]  # computed, TRL's layout

    def decision(self, model) -> str:
        """The run's line about how its loss computes log-probs (said once, when the trainer is built)."""
        return decision(model, self.longest, self.shared_prefix, self.what)

    def cost(self, inner) -> TreeCost:
        """The model's TreeCost, computed once per model (it counts the parameters)."""
        if id(inner) not in self.costs:
            self.costs[id(inner)] = TreeCost.of(inner)
        return self.costs[id(inner)]

    def __call__(self, trainer, model, input_ids, attention_mask, logits_to_keep, trl_logps, batch_size=None,
                 compute_entropy=False, compute_aux_loss=False, **extra):
        trl = lambda: trl_logps(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)
        rows = None
        if self.shared_prefix and not compute_aux_loss and all(v is None for v in extra.values()):
            inner = trainer.accelerator.unwrap_model(model)
            if refusal(inner, longest=input_ids.size(1)) is None:
                rows = rows_of(input_ids, attention_mask, logits_to_keep)
        if rows is None or not any(rows[2]):
            out = trl()
            self.count(trainer, input_ids.numel(), input_ids.numel())
            return out
        sequences, scored_from, lengths = rows
        fields = ("log_probs", "entropy") if compute_entropy else ("log_probs",)
        out, computed = tree_outputs(model, sequences, scored_from, [range(n) for n in lengths],
                                     (len(sequences), logits_to_keep), fields, self.cost(inner), mask_form(inner),
                                     trainer.accelerator.autocast)
        self.count(trainer, computed, input_ids.numel())
        return out["log_probs"], out.get("entropy"), None

    def count(self, trainer, computed: int, trl_layout: int) -> None:
        """The positions of the policy's loss pass (the pass with gradients), summed over the step's micro-batches."""
        if not torch.is_grad_enabled() or not trainer.model.training:
            return
        step = trainer.state.global_step
        if self.step != step:
            self.step, self.positions = step, [0, 0]
        self.positions[0] += computed
        self.positions[1] += trl_layout
        internals.set_metric(trainer, POSITIONS_COMPUTED, float(self.positions[0]))
        internals.set_metric(trainer, POSITIONS_TRL, float(self.positions[1]))
        internals.set_metric(trainer, POSITIONS_RATIO, self.positions[0] / max(1, self.positions[1]))


class TreeForward:
    """The model as SFTTrainer.compute_loss calls it, its fused-head call answered over the tree (a
    grpokit.training.trainer.GrpokitSFTTrainer's loss: TRL 1.16 calls `model(input_ids, attention_mask, labels,
    fused_lm_head=True)` and reads the output's per-token log_probs, entropy, is_top1 and label_mask, each
    (B, T - 1) and aligned with labels[:, 1:]); any other call goes to the model as it is."""

    KEYS = {"input_ids", "attention_mask", "labels", "use_cache", "fused_lm_head"}

    def __init__(self, model, trainer, inner):
        self.model, self.trainer, self.inner = model, trainer, inner

    def __getattr__(self, name):
        return getattr(self.model, name)

    def __call__(self, **kwargs):
        rows = self._rows(kwargs) if kwargs.get("fused_lm_head") and set(kwargs) <= self.KEYS else None
        if rows is None:
            return self.model(**kwargs)
        sequences, flags, columns = rows
        labels = kwargs["labels"]
        shape = (labels.size(0), labels.size(1) - 1)
        out, computed = tree_outputs(self.model, sequences, flags, columns, shape, ("log_probs", "entropy", "is_top1"),
                                     self.trainer.logps.cost(self.inner), mask_form(self.inner),
                                     self.trainer.accelerator.autocast)
        trl_layout = kwargs["input_ids"].numel()
        internals.log_metric(self.trainer, POSITIONS_COMPUTED, float(computed))
        internals.log_metric(self.trainer, POSITIONS_TRL, float(trl_layout))
        internals.log_metric(self.trainer, POSITIONS_RATIO, computed / max(1, trl_layout))
        return internals.fused_output(log_probs=out["log_probs"], entropy=out["entropy"], is_top1=out["is_top1"],
                                      label_mask=labels[:, 1:] != IGNORE)

    @staticmethod
    def _rows(kwargs):
        """Each row's tokens, which are scored (labels not ignored) and the column each lands in (t - 1); None
        unless the rows are right-padded and something is scored."""
        ids, mask, labels = kwargs["input_ids"], kwargs.get("attention_mask"), kwargs.get("labels")
        if mask is None or labels is None or mask.dim() != 2:
            return None
        lengths = mask.sum(dim=1)
        cols = torch.arange(mask.size(1), device=mask.device)
        if not torch.equal(mask.bool(), cols[None] < lengths[:, None]):
            return None
        sequences, flags, columns = [], [], []
        for row, lab, n in zip(ids.tolist(), labels.tolist(), lengths.tolist()):
            scored = [t > 0 and lab[t] != IGNORE for t in range(n)]
            sequences.append(row[:n])
            flags.append(scored)
            columns.append([t - 1 for t in range(n) if scored[t]])
        return (sequences, flags, columns) if any(columns) else None


def decision(model, longest: int, enabled: bool = True, what: str = "log-probs") -> str:
    """The run's line about how its loss computes `what` (said once, before training)."""
    if not enabled:
        return f"{what}: TRL's layout (train.shared_prefix: false)"
    why = refusal(model, longest=longest)
    if why is not None:
        return f"{what}: TRL's layout, one row per completion: {why}"
    return f"{what}: each distinct prefix computed once (a shared prompt once, each completion to its own length)"


def expected_layout(recipe, micro_batches: int = 32) -> str:
    """`grpokit train --dry-run`'s line about the loss's layout: TRL's (and why), or the most the tree computes as a
    share of TRL's layout, from the prompts of `micro_batches` micro-batches of the recipe's own rows (drawn with
    its seed), every completion at max_completion_length. Loads the tokenizer, the rows and the model's config
    (an empty model on the meta device for its modules), no weights."""
    t = recipe.train
    if not t.shared_prefix:
        return "TRL's layout, one row per completion (train.shared_prefix: false)"
    path = models.resolve_model_path(recipe.model.name)
    config = AutoConfig.from_pretrained(path, **{k: v for k, v in recipe.model.init_kwargs.items()
                                                  if k == "attn_implementation"})
    with torch.device("meta"):
        empty = AutoModelForCausalLM.from_config(config)
    why = refusal(empty, longest=(t.max_prompt_length or 0) + t.max_completion_length)
    if why is not None:
        return f"TRL's layout, one row per completion: {why}"
    tokenizer, template = models.load_recipe_tokenizer(recipe.model), template_of(recipe)
    rows, _ = tool_setup(recipe, tokenizer, load_datasets(recipe)[0])  # a tool recipe's template, as training sets it
    per_micro = max(1, t.per_device_train_batch_size // t.num_generations)
    drawn = random.Random(t.seed).sample(rows, min(len(rows), per_micro * micro_batches))
    prompts = [template.encode(tokenizer, template.build(r["question"]), training_tools(recipe)) for r in drawn]
    steps = [prompts[i:i + per_micro] for i in range(0, len(prompts), per_micro)]
    shared = [len(_common_prefix(step)) for step in steps]
    ratio = expected_ratio([[len(p) for p in step] for step in steps], shared, t.num_generations,
                           t.max_completion_length)
    return (f"each distinct prefix once: at most {ratio:.2f}x the positions of TRL's layout in the loss "
            f"({len(steps)} micro-batches of this recipe's prompts, every completion at {t.max_completion_length} "
            "tokens; shorter or alike completions cost less)")


def _common_prefix(sequences: Sequence[Sequence[int]]) -> Sequence[int]:
    first = sequences[0]
    n = len(first)
    for other in sequences[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first[:n], other)) if a != b), min(n, len(other)))
    return first[:n]


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
