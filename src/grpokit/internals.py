"""The seam with TRL: every private part of TRL grpokit relies on, in this one module, each reached through a
function or a hook below with a maintenance note. No other grpokit module touches TRL's private parts
but grpokit.generation_internals, the same seam for TRL's HF generation path (how its `generate` calls reach
grpokit's decoding loop; transformers' and torch's parts are grpokit.hf_internals, on the same terms); grpokit.trl_compat checks each one
against the installed TRL before any training starts and names what changed.

| TRL 1.16 surface (TESTED_TRL)                    | what grpokit does with it, and why                         | pinned by (tests/)                |
|--------------------------------------------------|------------------------------------------------------------|-----------------------------------|
| GRPOTrainer._compute_loss(model, inputs)         | `grpokit_loss` hook: the trainer's loss steps (skip the    | test_no_signal, test_sampler      |
|                                                  | rows without signal, the sampler's correction) before TRL's|                                   |
| ._get_per_token_logps_and_entropies(model,       | `grpokit_logps` hook: every caller's log-probs over the    | test_tree, slow/test_tree_embedded|
|   input_ids, attention_mask, logits_to_keep)     | tree of shared prefixes (the loss, old policy, reference)  |                                   |
| ._generate_and_score_completions(inputs) and the | `grpokit_generate` hook: pass rates from each batch, DAPO  | test_selection, test_internals    |
|   batch dict it returns (the key constants)      | refill; the loss steps read and trim the batch             | (batch_problems)                  |
| ._get_train_sampler(dataset)                     | `grpokit_sampler` hook: the signal-aware sampler, keeping  | test_selection                    |
|                                                  | RepeatSampler's layout (`sampler_layout`)                  |                                   |
| ._generate_single_turn(prompt_ids)               | `grpokit_logprobs` hook: a sampler copy's log-probs become | test_sampler                      |
|                                                  | the batch's sampling_per_token_logps                       |                                   |
| Trainer._save_checkpoint(model, trial)           | `grpokit_saved` hook: selection estimates in the checkpoint| test_selection                    |
| .prediction_step + ._prepare_inputs              | `grpokit_predict` hook: tool evaluation plays and scores    | test_envs_train                   |
|                                                  | episodes without the eval loss (`play_and_score`)          |                                   |
| ._metrics[mode][name], ._logs[...]               | grpokit's metrics beside TRL's; the latest batch's prompts,| test_internals (instance_problems)|
|                                                  | completions and rewards (samples.jsonl, pass rates)        |                                   |
| trl.trainer.utils._use_triton                    | `labelled_positions_only`: the fused LM head scores only   | test_internals                    |
|                                                  | completion tokens on the CPU too, inside the trainer's     |                                   |
|                                                  | log-prob calls only (restored after each)                  |                                   |
| .ref_model                                       | `reference_model`: a rollback's restored KL reference      | test_health_train                 |
| FusedCausalLMOutput; SFTTrainer.compute_loss's   | `fused_output`: SFT's loss over the tree answers that call | test_tree                         |
|   `model(..., fused_lm_head=True)` call          | (grpokit.training.trainer.GrpokitSFTTrainer)               |                                   |
| _generate_single_turn, _calculate_rewards, the    | `wrap_method`: benchmarks/step_breakdown.py times phases   | (benchmarks only)                 |
|   log-prob method                                |                                                            |                                   |

TRL changes private parts between releases without notice: grpokit.trl_compat.problems() compares each method
and the batch keys with what grpokit expects, `fused_head_problems()` the LM-head switch, and the trainer
(grpokit.training.trainer) refuses a TRL it cannot use before training starts.
"""
from __future__ import annotations

import contextlib
import importlib
import os
from collections import defaultdict, deque
from typing import Callable


TESTED_TRL = "1.16.0"  # the TRL these internals were last checked against (pyproject pins it)

# ---------------------------------------------------------------- the batch _compute_loss receives
PROMPT_IDS, PROMPT_MASK = "prompt_ids", "prompt_mask"  # (B, P), left-padded
COMPLETION_IDS, COMPLETION_MASK = "completion_ids", "completion_mask"  # (B, C), right-padded
ADVANTAGES = "advantages"  # (B,) or (B, C)
NUM_ITEMS = "num_items_in_batch"  # token count of the whole generation batch (the dapo/cispo/vespo normaliser)
BATCH_KEYS = (PROMPT_IDS, PROMPT_MASK, COMPLETION_IDS, COMPLETION_MASK, ADVANTAGES, NUM_ITEMS)
# Optional (B, C) tensors aligned with completion_ids: trimmed together with it.
COMPLETION_ALIGNED = ("old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps",
                      "importance_sampling_ratio", "tool_mask")
SAMPLED_LOGPS = "sampling_per_token_logps"  # the sampler's own log-probs of each completion token
# Optional multimodal inputs whose layout is not per-row text.
MULTIMODAL_KEYS = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
                   "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")

# ---------------------------------------------------------------- methods, with the leading parameters grpokit passes
LOGPS_METHOD = "_get_per_token_logps_and_entropies"
PROFILED_METHODS = {"generation": "_generate_single_turn", "rewards": "_calculate_rewards", "logps": LOGPS_METHOD}
METHODS: dict[str, tuple[str, ...]] = {
    "_compute_loss": ("model", "inputs"),
    "_generate_and_score_completions": ("inputs",),
    "_get_train_sampler": ("dataset",),
    "_save_checkpoint": ("model", "trial"),
    "_generate_single_turn": ("prompt_ids",),  # returns (completion_ids, logprobs)
    "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),
    LOGPS_METHOD: ("model", "input_ids", "attention_mask", "logits_to_keep"),
    "_prepare_inputs": ("generation_batch",),  # evaluation: play and score a batch (`play_and_score`)
    "prediction_step": ("model", "inputs"),
}
LOG_KEYS = ("prompt", "completion", "rewards")

# ---------------------------------------------------------------- TRL's fused LM head: only the scored positions
FUSED_HEAD_MODULE = "trl.trainer.utils"  # where add_fused_lm_head decides `compact = _use_triton(device)`
FUSED_HEAD_SWITCH = "_use_triton"
FUSED_HEAD_KERNEL = "_ChunkedLogProbFunction"  # the autograd function add_fused_lm_head's forward calls, by this name


# ---------------------------------------------------------------- the trainer's hooks
class TrainerHooks:
    """Mixin for GRPOTrainer: each private method grpokit changes goes through a `grpokit_*` hook, which a
    subclass implements (grpokit.training.trainer.GrpokitTrainer); by default each is TRL's own behaviour.

    Maintenance note: relies on the methods of METHODS keeping their names and leading parameters (checked by
    grpokit.trl_compat.problems()), on _generate_and_score_completions returning the batch dict of BATCH_KEYS,
    _generate_single_turn returning (completion_ids, logprobs) (the logprobs become the batch's
    `sampling_per_token_logps`), _get_per_token_logps_and_entropies returning (logps, entropies, aux_loss), each
    (B, C) for the last C columns, and prediction_step being `_prepare_inputs` then the eval loss. If one changes,
    the trainer refuses the TRL before training starts.
    """

    def _compute_loss(self, model, inputs):
        return self.grpokit_loss(model, inputs, lambda batch: super(TrainerHooks, self)._compute_loss(model, batch))

    def grpokit_loss(self, model, inputs, trl_loss: Callable):
        return trl_loss(inputs)

    def _get_train_sampler(self, dataset=None):
        return self.grpokit_sampler(dataset, lambda d: super(TrainerHooks, self)._get_train_sampler(d))

    def grpokit_sampler(self, dataset, trl_sampler: Callable):
        return trl_sampler(dataset)

    def _generate_and_score_completions(self, inputs):
        return self.grpokit_generate(inputs, lambda rows: super(TrainerHooks, self)._generate_and_score_completions(rows))

    def grpokit_generate(self, inputs, trl_generate: Callable):
        return trl_generate(inputs)

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        self.grpokit_saved(checkpoint_folder(self, trial))

    def grpokit_saved(self, folder: str) -> None:
        """Called after TRL wrote a checkpoint folder (on every rank)."""

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        completion_ids, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        return completion_ids, self.grpokit_logprobs(completion_ids, logprobs)

    def grpokit_logprobs(self, completion_ids: list[list[int]], logprobs):
        """The sampler's per-token log-probs of `completion_ids` (TRL's HF path returns None; vLLM's its own)."""
        return logprobs

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        trl_logps = super(TrainerHooks, self)._get_per_token_logps_and_entropies
        return self.grpokit_logps(model, input_ids, attention_mask, logits_to_keep, trl_logps, *args, **kwargs)

    def grpokit_logps(self, model, input_ids, attention_mask, logits_to_keep, trl_logps: Callable, *args, **kwargs):
        """Per-token (log-probs, entropies or None, aux loss or None) of the completions, TRL's (B, C) layout."""
        return trl_logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        trl_prediction = super(TrainerHooks, self).prediction_step
        return self.grpokit_predict(model, inputs, lambda: trl_prediction(model, inputs, prediction_loss_only,
                                                                          ignore_keys))

    def grpokit_predict(self, model, inputs, trl_prediction: Callable):
        return trl_prediction()


def play_and_score(trainer, inputs) -> None:
    """What GRPOTrainer.prediction_step does before its eval loss: generate (play the episodes), score them and log
    TRL's eval metrics (grpokit.evaluation.tools reads them; the loss, a forward pass over every sequence, is not
    needed: 64 tool episodes of ~650 tokens cost about half a minute on a 2-core CPU).

    Maintenance note: relies on `_prepare_inputs(inputs)` logging the eval metrics (TRL 1.16); if TRL moves them,
    they go missing from the log, which the tool evaluation's tests see (tests/test_envs_train.py)."""
    trainer._prepare_inputs(inputs)


# ---------------------------------------------------------------- metrics and the latest batch
def log_metric(trainer, name: str, value: float, mode: str = "train") -> None:
    """Logged with TRL's metrics at the next logging step (averaged over the steps since the last one)."""
    trainer._metrics[mode][name].append(value)


def metric_values(trainer, name: str, mode: str = "train") -> list:
    """The values of a metric since TRL last logged (absent metric: [])."""
    return list(trainer._metrics[mode].get(name, []))


def set_metric(trainer, name: str, value: float, mode: str = "train") -> None:
    """Logged at the next logging step as this value (a snapshot, not averaged with earlier ones)."""
    trainer._metrics[mode][name] = [value]


def widen_logs(trainer, n: int) -> None:
    """TRL keeps the last generation_batch_size rows' prompts and rewards (`_logs`, bounded deques); a
    generation call with more rows (grpokit.training.refill's refill_upfront) needs room for `n`."""

    def narrow(d) -> bool:
        return isinstance(d, deque) and d.maxlen is not None and d.maxlen < n

    for key, value in trainer._logs.items():
        if isinstance(value, defaultdict) and value.default_factory is not None and narrow(value.default_factory()):
            trainer._logs[key] = defaultdict(lambda: deque(maxlen=n),
                                             {k: deque(v, maxlen=n) for k, v in value.items()})
        elif narrow(value):
            trainer._logs[key] = deque(value, maxlen=n)


def generation_rewards(trainer, n: int) -> tuple[list, dict[str, list]]:
    """Prompts and per-reward scores of the last `n` completions scored (all processes' rows, in order)."""
    logs = trainer._logs
    return list(logs["prompt"])[-n:], {k: list(v)[-n:] for k, v in logs["rewards"].items()}


def latest_generation(trainer) -> tuple[list, list, dict[str, list]]:
    """Prompts, completions and per-reward scores of the latest generation batch."""
    logs = trainer._logs
    return list(logs["prompt"]), list(logs["completion"]), {k: list(v) for k, v in logs["rewards"].items()}


def sampler_layout(trainer) -> dict:
    """The arguments of TRL's RepeatSampler for training: a replacement sampler must keep this layout."""
    args = trainer.args
    return {"mini_repeat_count": args.num_generations, "batch_size": args.generation_batch_size // args.num_generations,
            "repeat_count": args.num_iterations * args.steps_per_generation}


def checkpoint_folder(trainer, trial=None) -> str:
    """The folder `_save_checkpoint` has just written (grpokit runs no hyper-parameter search: no trial folder)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR  # transformers loads with it; this module is light

    return os.path.join(trainer.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}")


def pad_token_id(trainer) -> int:
    proc = trainer.processing_class
    return getattr(proc, "pad_token_id", None) if getattr(proc, "pad_token_id", None) is not None \
        else proc.tokenizer.pad_token_id


def reference_model(trainer):
    """TRL's KL reference model: a separate copy with beta > 0 and full fine-tuning, None otherwise (beta 0, or
    LoRA, where TRL switches the adapter off instead).

    Maintenance note: relies on GRPOTrainer's `ref_model` attribute; if it is renamed, a rollback's reference
    (the restored weights) is not loaded and KL is measured against the initial model, as TRL's default."""
    return getattr(trainer, "ref_model", None)


# ---------------------------------------------------------------- log-probs: the fused LM head and the trainer's own
@contextlib.contextmanager
def _rebound(attribute: str, make: Callable | None):
    """Within the block, trl.trainer.utils' `attribute` is `make(its original)`, marked `grpokit_rebound`; the
    original again after it. Nothing changes where `make` is None, the name is gone, or it is grpokit's already (a
    nested block)."""
    module = importlib.import_module(FUSED_HEAD_MODULE) if make is not None else None
    original = getattr(module, attribute, None) if module is not None else None
    if original is None or getattr(original, "grpokit_rebound", False):
        yield
        return
    replacement = make(original)
    replacement.grpokit_rebound = True
    setattr(module, attribute, replacement)
    try:
        yield
    finally:
        setattr(module, attribute, original)


def fused_head_kernel(make: Callable | None):
    """Within the block, TRL's fused LM head computes its per-token fields with `make(TRL's function)` (an object
    with TRL's `apply` signature: grpokit.training.lm_head.CpuHead) instead of TRL's `ChunkedLogProbFunction`; TRL's
    own again after it. `make` None leaves TRL as it is.

    Maintenance note: relies on `add_fused_lm_head`'s forward reading the module-level name FUSED_HEAD_KERNEL of
    trl.trainer.utils at each call, as `FUSED_HEAD_KERNEL.apply(hidden, weight, bias, targets, temperature,
    chunk_size, final_logit_softcapping, logit_scale, outputs)`, and returning its five per-token outputs; the
    backward is the replacement's own (autograd binds it at apply). grpokit.trl_compat.fused_head_problems() checks
    the name and the call; only that name is rebound, for the block."""
    return _rebound(FUSED_HEAD_KERNEL, make)


def _compact_on_cpu(original):
    def compact_here(device) -> bool:
        return device.type == "cpu" or original(device)

    return compact_here


def labelled_positions_only(enabled: bool = True):
    """Within the block, TRL's fused LM head (GRPO's log-probs, `add_fused_lm_head`) scores only the positions that
    have a label, the completion tokens, on every device, as it does on CUDA; TRL's own choice again after it.

    Why: on a device without Triton, TRL 1.16 sends *every* position of the batch (prompt, completion, padding)
    through the chunked log-softmax over the whole vocabulary and masks the prompt's afterwards, because on Neuron a
    changing number of positions would recompile the tile shapes. The CPU compiles nothing, so the prompt's share
    is thrown-away work: the demo scores ~2,100 positions a step for ~700 completion tokens, each a 49,152-wide
    log-softmax forward and backward (docs/measurements.md "Generation choices on the CPU"). The log-probs of the
    scored positions are the same either way (each position's is computed on its own; a test checks both paths).

    Maintenance note: relies on `add_fused_lm_head`'s forward reading the module-level name `_use_triton` of
    trl.trainer.utils when it decides `compact` (the kernel module trl.kernels.chunked_logprob keeps its own
    binding, so its torch-or-Triton choice is unchanged); the backward reads nothing of it. Only that name is
    rebound, for the block (a GrpokitTrainer's log-prob call): nothing changes for the rest of the process.
    grpokit.trl_compat.fused_head_problems() checks the name and its use; `enabled` False (a TRL that changed it)
    leaves TRL as it is."""
    return _rebound(FUSED_HEAD_SWITCH, _compact_on_cpu if enabled else None)


def trainer_logps(trainer, model, batch: dict):
    """The trainer's per-token log-probs of a batch's completions (no gradient): TRL's "old" log-probs, computed
    as TRL computes them before a step (`_get_per_token_logps_and_entropies`, logits / temperature).

    Maintenance note: relies on `_get_per_token_logps_and_entropies(model, input_ids, attention_mask,
    logits_to_keep, batch_size=...)` returning (logps, entropies, ...) (`problems()` checks the parameters)."""
    import torch  # torch loads with it: this module is imported by model-free commands

    with torch.no_grad():
        return policy_logps(trainer, model, batch)


def policy_logps(trainer, model, batch: dict):
    """The same log-probs with their gradient (online RFT's loss, grpokit.training.online_rft): through the trainer's own
    log-prob call, so the tree and the CPU head apply. At the trainer's temperature, which TRL fixes in the model's
    fused LM head when it is built (online RFT requires 1.0: grpokit.recipe's check)."""
    import torch

    input_ids = torch.cat([batch[PROMPT_IDS], batch[COMPLETION_IDS]], dim=1)
    attention_mask = torch.cat([batch[PROMPT_MASK], batch[COMPLETION_MASK]], dim=1)
    out = trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, batch[COMPLETION_IDS].size(1),
                                                     batch_size=batch[COMPLETION_IDS].size(0))
    return out[0]


def fused_output(**fields):
    """The output TRL's fused LM head returns (`model(..., fused_lm_head=True)`), built from its per-token fields
    (grpokit.training.logps answers SFTTrainer's call over the tree).

    Maintenance note: relies on trl.trainer.utils.FusedCausalLMOutput (TRL 1.16) and on SFTTrainer.compute_loss
    reading log_probs, entropy, is_top1 and label_mask from it; if TRL reads another field, SFT with
    train.shared_prefix fails on it at the first step (tests/test_tree.py runs SFT both ways)."""
    from trl.trainer.utils import FusedCausalLMOutput  # TRL loads with it: this module is imported by light modules

    return FusedCausalLMOutput(loss=None, **fields)


# ---------------------------------------------------------------- profiling (benchmarks/step_breakdown.py)
def wrap_method(trainer, phase: str, make_wrapper: Callable) -> None:
    """Replace the method for `phase` (see PROFILED_METHODS) of a trainer instance, or of a trainer class for the
    process (benchmarks/step_breakdown.py), with make_wrapper(method): a stopwatch, never used in training."""
    name = PROFILED_METHODS[phase]
    setattr(trainer, name, make_wrapper(getattr(trainer, name)))


def generation_io(args: tuple, result) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt_ids, completion_ids) of one `_generate_single_turn` call, from its arguments and result."""
    return args[0], result[0]


def logps_input_ids(args: tuple, kwargs: dict):
    """The input_ids tensor of one `_get_per_token_logps_and_entropies(model, input_ids, ...)` call."""
    return kwargs.get("input_ids", args[1] if len(args) > 1 else None)
