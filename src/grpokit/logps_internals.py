"""TRL's private parts behind the model's log-probs, each with a maintenance note (grpokit.internals holds the
trainer's; the same terms): which positions TRL's fused LM head scores, the trainer's own per-token log-probs of a
batch, the log-probs TRL's loss computed, and the fused output SFTTrainer reads.

    score_labelled_positions_only()        # training, before the first step: the fused head scores completions only
    trainer_logps(trainer, model, batch)   # TRL's "old" log-probs of a batch (a sampler's correction)
    with captured_logps(trainer) as seen:  # the policy log-probs TRL's _compute_loss computed in the block
    fused_output(log_probs=..., ...)       # what `model(..., fused_lm_head=True)` returns, for SFT over the tree

grpokit.trl_compat checks the fused head's switch against the installed TRL (`fused_head_problems`); the log-prob
method's parameters are checked with the trainer's (`problems`). Used by grpokit.training.logps.
"""
from __future__ import annotations

from grpokit.internals import COMPLETION_IDS, COMPLETION_MASK, PROMPT_IDS, PROMPT_MASK

# ---------------------------------------------------------------- TRL's fused LM head: only the scored positions
FUSED_HEAD_MODULE = "trl.trainer.utils"  # where add_fused_lm_head decides `compact = _use_triton(device)`
FUSED_HEAD_SWITCH = "_use_triton"


def score_labelled_positions_only() -> None:
    """TRL's fused LM head (GRPO's log-probs, `add_fused_lm_head`) scores only the positions that have a label,
    the completion tokens, on every device, as it does on CUDA.

    Why: on a device without Triton, TRL 1.16 sends *every* position of the batch (prompt, completion, padding)
    through the chunked log-softmax over the whole vocabulary and masks the prompt's afterwards, because on Neuron a
    changing number of positions would recompile the tile shapes. The CPU compiles nothing, so the prompt's share
    is thrown-away work: the demo scores ~2,100 positions a step for ~700 completion tokens, each a 49,152-wide
    log-softmax forward and backward (docs/measurements.md "Generation choices on the CPU"). The log-probs of the
    scored positions are the same either way (each position's is computed on its own; a test checks both paths).

    Maintenance note: relies on `add_fused_lm_head`'s forward reading the module-level name `_use_triton` of
    trl.trainer.utils when it decides `compact` (the kernel module trl.kernels.chunked_logprob keeps its own
    binding, so its torch-or-Triton choice is unchanged). Only that module's name is rebound, to a function that
    also answers True for the CPU; grpokit.trl_compat.fused_head_problems() checks the name and its use. Idempotent.
    """
    import importlib

    module = importlib.import_module(FUSED_HEAD_MODULE)
    original = getattr(module, FUSED_HEAD_SWITCH)
    if getattr(original, "grpokit_compact_on_cpu", False):
        return

    def compact_here(device) -> bool:
        return device.type == "cpu" or original(device)

    compact_here.grpokit_compact_on_cpu = True
    setattr(module, FUSED_HEAD_SWITCH, compact_here)


# ---------------------------------------------------------------- the trainer's own log-probs (a sampler's correction)
def trainer_logps(trainer, model, batch: dict):
    """The trainer's per-token log-probs of a batch's completions (no gradient): TRL's "old" log-probs, computed
    as TRL computes them before a step (`_get_per_token_logps_and_entropies`, logits / temperature).

    Maintenance note: relies on `_get_per_token_logps_and_entropies(model, input_ids, attention_mask,
    logits_to_keep, batch_size=...)` returning (logps, entropies, ...) (`problems()` checks the parameters)."""
    import torch

    input_ids = torch.cat([batch[PROMPT_IDS], batch[COMPLETION_IDS]], dim=1)
    attention_mask = torch.cat([batch[PROMPT_MASK], batch[COMPLETION_MASK]], dim=1)
    with torch.no_grad():
        out = trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask,
                                                         batch[COMPLETION_IDS].size(1),
                                                         batch_size=batch[COMPLETION_IDS].size(0))
    return out[0]


class captured_logps:
    """`with captured_logps(trainer) as seen:` — the per-token log-probs TRL's `_compute_loss` computes inside the
    block (its first `_get_per_token_logps_and_entropies` call), detached, in `seen` (empty when TRL computed none).

    Maintenance note: relies on `_compute_loss` calling `self._get_per_token_logps_and_entropies(...)` for the
    policy's log-probs first (TRL 1.16); the instance attribute shadows the method inside the block only."""

    def __init__(self, trainer):
        self.trainer, self.seen = trainer, []

    _NAME = "_get_per_token_logps_and_entropies"

    def __enter__(self) -> list:
        self._shadowed = self.trainer.__dict__.get(self._NAME)  # a benchmark's profiling wrapper, kept
        original = getattr(self.trainer, self._NAME)

        def recording(*args, **kwargs):
            out = original(*args, **kwargs)
            if not self.seen:
                self.seen.append(out[0].detach())
            return out

        setattr(self.trainer, self._NAME, recording)
        return self.seen

    def __exit__(self, *exc) -> None:
        if self._shadowed is not None:
            setattr(self.trainer, self._NAME, self._shadowed)
        else:
            self.trainer.__dict__.pop(self._NAME, None)


def fused_output(**fields):
    """The output TRL's fused LM head returns (`model(..., fused_lm_head=True)`), built from its per-token fields
    (grpokit.training.logps answers SFTTrainer's call over the tree).

    Maintenance note: relies on trl.trainer.utils.FusedCausalLMOutput (TRL 1.16) and on SFTTrainer.compute_loss
    reading log_probs, entropy, is_top1 and label_mask from it; if TRL reads another field, SFT with
    train.shared_prefix fails on it at the first step (tests/test_tree.py runs SFT both ways)."""
    from trl.trainer.utils import FusedCausalLMOutput

    return FusedCausalLMOutput(loss=None, **fields)
