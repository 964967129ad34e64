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

The sampler's correction, for a sampler in another precision, is grpokit.training.sampler's (beside the sampler).
`train --dry-run`'s estimate of the ratio is grpokit.training.launch's (`expected_layout`).

The tree falls back to TRL's own computation, with one line saying why (`note_decision`), for a model the tree cannot be
exact on (grpokit.generation.tree.refusal: attention other than eager/SDPA, no rotary positions, a sliding window
shorter than the rows), multimodal inputs, an MoE auxiliary loss, or a batch whose masks are not TRL's left-padded
prompts and right-padded completions. Not covered: sequence parallelism (TRL's shift_labels path of its own).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import torch

from grpokit import internals
from grpokit.generation.tree import IGNORE, TreeCost, mask_form, pack, positions, refusal
from grpokit.run import POSITIONS_COMPUTED, POSITIONS_RATIO, POSITIONS_TRL


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
