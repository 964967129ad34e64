"""Every TRL internal grpokit relies on, in one place, with a check against the installed version. No other
grpokit module but grpokit.logps_internals touches TRL's private parts: each one is reached through a function or
a hook here, with a maintenance note saying what it relies on and what breaks if it changes.

grpokit uses TRL's GRPOTrainer through its public API (GRPOConfig, reward functions, callbacks) and, where
no public API exists, through these private parts (each overridden method goes through a hook below, so a
grpokit mixin implements `grpokit_loss`, `grpokit_logps`, `grpokit_generate`, `grpokit_sampler`, `grpokit_saved`):

  GRPOTrainer._compute_loss(model, inputs)          train.skip_no_signal filters the micro-batch first (`LossHook`)
  GRPOTrainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep)
                                                    computed over the tree of shared prefixes (`grpokit_logps`,
                                                    grpokit.training.logps)
  model.generate as TRL's HF path calls it           answered by grpokit's decoding loop (`generate_through`)
  GRPOTrainer._get_train_sampler(dataset)           selection.enabled swaps in its sampler (`sampler_layout`: the
                                                    RepeatSampler layout it must keep)
  GRPOTrainer._generate_and_score_completions(inputs)  pass rates updated from each batch; selection.refill
                                                    calls it again for more groups (grpokit.training.refill)
  Trainer._save_checkpoint(model, trial)            the selection estimates saved into the checkpoint folder
  GRPOTrainer._metrics[mode][name]                  grpokit's own per-step metrics next to TRL's (`log_metric`)
  GRPOTrainer._logs["prompt"|"completion"|"rewards"]  the latest generation batch, for samples.jsonl
  the batch dict _generate_and_score_completions hands _compute_loss (the key constants below)
  _generate_single_turn, _calculate_rewards, _get_per_token_logps_and_entropies
                                                    timed by benchmarks/step_breakdown.py (`PROFILED_METHODS`)
  GRPOTrainer.prediction_step, _prepare_inputs      tool evaluation plays and scores episodes without the eval
                                                    loss (`evaluate_episodes`)

The private parts behind the model's log-probs (TRL's fused LM head switch, the trainer's own log-probs, the loss's
log-probs captured, the fused output SFT reads) are in grpokit.logps_internals, on the same terms.

transformers' and torch's private parts (checkpointing keyword, tracker names, the CPU compile switch, GGUF
quantizer marker, a Trainer's callbacks and sharding flags, an LR scheduler's cached rate) are in
grpokit.hf_internals, on the same terms. GRPOTrainer's `ref_model` (the KL reference) is `reference_model`.

TRL changes private parts between releases without notice. grpokit.trl_compat.problems() compares each with what grpokit
expects and says which one changed; tests/test_internals.py runs it (and a real generation batch) against
the installed TRL, and trl_compat.trainer_base() runs the cheap part before any training starts.
"""
from __future__ import annotations

from typing import Callable

from grpokit import hf_internals

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
# Optional multimodal inputs whose layout is not per-row text.
MULTIMODAL_KEYS = ("pixel_values", "image_grid_thw", "num_images", "pixel_attention_mask", "spatial_shapes",
                   "num_tiles", "image_sizes", "token_type_ids", "mm_token_type_ids", "image_position_ids")

# ---------------------------------------------------------------- methods, with the leading parameters grpokit passes
PROFILED_METHODS = {"generation": "_generate_single_turn", "rewards": "_calculate_rewards",
                    "logps": "_get_per_token_logps_and_entropies"}
METHODS: dict[str, tuple[str, ...]] = {
    "_compute_loss": ("model", "inputs"),
    "_generate_and_score_completions": ("inputs",),
    "_get_train_sampler": ("dataset",),
    "_save_checkpoint": ("model", "trial"),
    "_generate_single_turn": ("prompt_ids",),  # returns (completion_ids, logprobs)
    "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask", "logits_to_keep"),
    "_prepare_inputs": ("generation_batch",),  # evaluation: play and score a batch (`evaluate_episodes`)
    "prediction_step": ("model", "inputs"),
}
LOG_KEYS = ("prompt", "completion", "rewards")


# ---------------------------------------------------------------- what grpokit uses
class LossHook:
    """Mixin for GRPOTrainer: TRL's `_compute_loss(model, inputs)` goes through `grpokit_loss`.

    `grpokit_loss(model, inputs, trl_loss)` may change the batch and calls `trl_loss(batch)` for TRL's own loss
    (or returns a loss of its own); by default it is TRL's loss unchanged.
    """

    def _compute_loss(self, model, inputs):
        return self.grpokit_loss(model, inputs, lambda batch: super(LossHook, self)._compute_loss(model, batch))

    def grpokit_loss(self, model, inputs, trl_loss: Callable):
        return trl_loss(inputs)


class TrainerHooks(LossHook):
    """Mixin for GRPOTrainer: the other private methods grpokit changes, each through a `grpokit_*` hook.

    Maintenance note: relies on GRPOTrainer._get_train_sampler(dataset), _generate_and_score_completions(inputs)
    (returning the batch dict of BATCH_KEYS), _generate_single_turn(prompt_ids, ...) (returning (completion_ids,
    logprobs), the logprobs becoming the batch's `sampling_per_token_logps`), _get_per_token_logps_and_entropies(
    model, input_ids, attention_mask, logits_to_keep, ...) (returning (logps, entropies, aux_loss), each (B, C)
    for the last C columns) and Trainer._save_checkpoint(model, trial) keeping those names and leading parameters (grpokit.trl_compat.problems() checks them); if one changes, selection, refill or their saved state stop
    working, and trl_compat.trainer_base() refuses the TRL before training starts instead.
    """

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

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        completion_ids, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
        return completion_ids, self.grpokit_logprobs(completion_ids, logprobs)

    def grpokit_logprobs(self, completion_ids: list[list[int]], logprobs):
        """The sampler's per-token log-probs of `completion_ids` (TRL's HF path returns None; vLLM's its own).
        TRL puts them in the batch as `sampling_per_token_logps`."""
        return logprobs

    def grpokit_saved(self, folder: str) -> None:
        """Called after TRL wrote a checkpoint folder (on every rank)."""

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        trl_logps = super(TrainerHooks, self)._get_per_token_logps_and_entropies
        return self.grpokit_logps(model, input_ids, attention_mask, logits_to_keep, trl_logps, *args, **kwargs)

    def grpokit_logps(self, model, input_ids, attention_mask, logits_to_keep, trl_logps: Callable, *args, **kwargs):
        """Per-token (log-probs, entropies or None, aux loss or None) of the completions, TRL's (B, C) layout: every
        caller's (the loss, the old-policy and reference passes); by default TRL's own computation."""
        return trl_logps(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)


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
    from collections import defaultdict, deque

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


def sampler_layout(trainer) -> dict:
    """The arguments of TRL's RepeatSampler for training: a replacement sampler must keep this layout."""
    args = trainer.args
    return {"mini_repeat_count": args.num_generations, "batch_size": args.generation_batch_size // args.num_generations,
            "repeat_count": args.num_iterations * args.steps_per_generation}


def checkpoint_folder(trainer, trial=None) -> str:
    """The folder `_save_checkpoint` has just written (grpokit runs no hyper-parameter search: no trial folder)."""
    import os

    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return os.path.join(trainer.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}")


def pad_token_id(trainer) -> int:
    proc = trainer.processing_class
    return getattr(proc, "pad_token_id", None) if getattr(proc, "pad_token_id", None) is not None \
        else proc.tokenizer.pad_token_id


def evaluate_episodes(trainer) -> None:
    """`trainer.evaluate()`, playing and scoring every evaluation batch and logging TRL's eval metrics, without the
    GRPO loss nobody reads (grpokit.evaluation.tools).

    Maintenance note: relies on TRL 1.16's GRPOTrainer.prediction_step(model, inputs, ...) being
    `_prepare_inputs(inputs)` (generation, rewards, the eval metrics) followed by `compute_loss`, a forward pass over
    every sequence for the eval loss (64 tool episodes of ~650 tokens: about half a minute on a 2-core CPU). The
    instance's prediction_step keeps the first half. If TRL moves its eval metrics out of `_prepare_inputs`, they go
    missing from the log, which the tool evaluation's tests see (tests/test_envs_train.py).
    """
    import torch

    def prediction_step(model, inputs, prediction_loss_only, ignore_keys=None):
        trainer._prepare_inputs(inputs)
        return torch.zeros((), device=trainer.accelerator.device), None, None

    trainer.prediction_step = prediction_step
    trainer.evaluate()


def latest_generation(trainer) -> tuple[list, list, dict[str, list]]:
    """Prompts, completions and per-reward scores of the latest generation batch."""
    logs = trainer._logs
    return list(logs["prompt"]), list(logs["completion"]), {k: list(v) for k, v in logs["rewards"].items()}


# ---------------------------------------------------------------- profiling (benchmarks/step_breakdown.py)
def wrap_method(trainer, phase: str, make_wrapper: Callable) -> None:
    """Replace the trainer instance's method for `phase` (see PROFILED_METHODS) with make_wrapper(method)."""
    name = PROFILED_METHODS[phase]
    setattr(trainer, name, make_wrapper(getattr(trainer, name)))


def generation_io(args: tuple, result) -> tuple[list[list[int]], list[list[int]]]:
    """(prompt_ids, completion_ids) of one `_generate_single_turn` call, from its arguments and result."""
    return args[0], result[0]


def logps_input_ids(args: tuple, kwargs: dict):
    """The input_ids tensor of one `_get_per_token_logps_and_entropies(model, input_ids, ...)` call."""
    return kwargs.get("input_ids", args[1] if len(args) > 1 else None)


# generation_config values under which transformers' generate adds none of its own sampling warpers
# (temperature, top_k, top_p, min_p; GenerationMixin._get_logits_processor), so a caller's warpers replace them.
NEUTRAL_SAMPLING = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": None}


def generate_through(trainer, replacement: Callable) -> None:
    """TRL's HF generation calls `replacement(generate, *args, **kwargs)` instead of the policy's `generate(*args,
    **kwargs)` (grpokit.training.sampling: grpokit's decoding loop, or `generate` itself through other warpers or
    on a sampler's copy).

    Maintenance note: relies on TRL 1.16's HF path calling `unwrapped_model.generate(input_ids=..., attention_mask=...,
    generation_config=self.generation_config)` on the model `accelerator.unwrap_model` returns (the trainer's `model`,
    a PeftModel for LoRA), inside `unwrap_model_for_generation` (which switches gradient checkpointing off and
    applies `self.generation_kwargs` to the model's own generation config) and `torch.no_grad()`, and taking the
    returned tensor as prompt + completion ids (cut after the first eos id). If TRL stops passing through
    `model.generate`, the replacement is simply not called: TRL samples with transformers' own generate, which a
    test (tests/test_internals.py) would catch as a changed sample."""
    model = trainer.model
    original = model.generate

    def generate(*args, **kwargs):
        return replacement(original, *args, **kwargs)

    generate.grpokit_sampling = True  # stop_generating_through removes this wrapper, and only this one
    model.generate = generate


def neutral_sampling(trainer) -> None:
    """transformers' own sampling warpers off in TRL's generation config (NEUTRAL_SAMPLING), for a caller that passes
    its own as `logits_processor` (transformers appends a caller's processors before its own warpers).

    Maintenance note: relies on TRL 1.16 keeping its GenerationConfig as `generation_config` and the values it applies
    to the model's own config (unwrap_model_for_generation) as `generation_kwargs`: both are set."""
    for key, value in NEUTRAL_SAMPLING.items():
        setattr(trainer.generation_config, key, value)
        if isinstance(getattr(trainer, "generation_kwargs", None), dict):
            trainer.generation_kwargs[key] = value


def stop_generating_through(trainer) -> None:
    """Undo `generate_through` on the trained model when training ends: whoever uses the model afterwards (the
    demo's evaluation, an in-process caller) generates with the model itself, in its own precision, not through
    the training sampler's copy and warpers."""
    if getattr(trainer.model.__dict__.get("generate"), "grpokit_sampling", False):
        del trainer.model.__dict__["generate"]


class generating_as_itself:
    """Within this block the trained model's `generate` is its own, not `generate_through`'s replacement (the
    held-out probe, grpokit.training.probe, generates greedily with the policy in its own precision mid-training);
    the replacement is put back after. No replacement: nothing to do."""

    def __init__(self, trainer):
        self.model, self.held = trainer.model, None

    def __enter__(self):
        if getattr(self.model.__dict__.get("generate"), "grpokit_sampling", False):
            self.held = self.model.__dict__.pop("generate")
        return self

    def __exit__(self, *exc):
        if self.held is not None:
            self.model.generate = self.held


def compile_generation(trainer) -> None:
    """TRL's HF generation compiles the decode step (transformers' own torch.compile, with a static cache).

    Maintenance note: TRL 1.16 builds its GenerationConfig with `disable_compile=True` and no way to override
    it (generation_kwargs are applied before that keyword), so the flag is switched back on the built config,
    with `hf_internals.generation_compile_config`'s settings. If TRL rebuilds the config per call, compile
    simply stays off (benchmarks/generation_throughput.py shows it)."""
    device = next(trainer.model.parameters()).device.type
    trainer.generation_config.disable_compile = False
    trainer.generation_config.compile_config = hf_internals.generation_compile_config(device)


def reference_model(trainer):
    """TRL's KL reference model: a separate copy with beta > 0 and full fine-tuning, None otherwise (beta 0, or
    LoRA, where TRL switches the adapter off instead).

    Maintenance note: relies on GRPOTrainer's `ref_model` attribute; if it is renamed, a rollback's reference
    (the restored weights) is not loaded and KL is measured against the initial model, as TRL's default."""
    return getattr(trainer, "ref_model", None)
