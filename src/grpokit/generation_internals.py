"""The seam with TRL's HF generation path: how the `generate` calls TRL's trainer makes reach grpokit's decoding
loop, and the generation settings it hands them. The other half of the seam with TRL (the trainer's loss, log-probs,
batch and metrics) is grpokit.internals, on the same terms: each private part reached through a function below
with a maintenance note, checked against the installed TRL by grpokit.trl_compat before training starts.

| TRL 1.16 surface (internals.TESTED_TRL)           | what grpokit does with it, and why                         | pinned by (tests/)                |
|---------------------------------------------------|------------------------------------------------------------|-----------------------------------|
| the policy's `generate`, as TRL's HF path calls it | `generate_through`: grpokit's decoding loop answers it, on | test_decode, test_sampler         |
|                                                   | the policy instance for the trainer's life (undone after)  |                                   |
| .generation_config / .generation_kwargs           | `sampling_neutral` (read), `compile_generation` (the       | test_sampling, test_generation_   |
|                                                   | trainer's own config; nothing process-wide)                | section                           |
| the fused-head `forward` TRL patches on the policy | `drop_foreign_forwards`: a sampler's deep copy drops it    | test_sampler                      |

Each replacement lasts as long as the trainer that made it (undone by `stop_generating_through`, or around a
probe by `generating_as_itself`): nothing here is process-wide.
"""
from __future__ import annotations

from typing import Callable

from grpokit import hf_internals

# generation_config values under which transformers' generate adds none of its own sampling warpers
# (temperature, top_k, top_p, min_p; GenerationMixin._get_logits_processor), so a caller's warpers replace them.
NEUTRAL_SAMPLING = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": None}


def generate_through(trainer, replacement: Callable) -> None:
    """TRL's HF generation calls `replacement(generate, *args, **kwargs)` instead of the policy's `generate(*args,
    **kwargs)` (grpokit.training.sampling: grpokit's decoding loop, or `generate` itself through other warpers or
    on a sampler's copy), until `stop_generating_through`.

    Maintenance note: relies on TRL 1.16's HF path calling `unwrapped_model.generate(input_ids=..., attention_mask=...,
    generation_config=self.generation_config)` on the model `accelerator.unwrap_model` returns (the trainer's `model`,
    a PeftModel for LoRA), inside `unwrap_model_for_generation` (which switches gradient checkpointing off and
    applies `self.generation_kwargs` to the model's own generation config) and `torch.no_grad()`, and taking the
    returned tensor as prompt + completion ids (cut after the first eos id). If TRL stops passing through
    `model.generate`, the replacement is simply not called: TRL samples with transformers' own generate, which a
    test (tests/test_decode.py) would catch as a changed sample."""
    model = trainer.model
    original = model.generate

    def generate(*args, **kwargs):
        # the input-embedding hooks TRL's checkpointing switch leaves behind each step: a leak, and a new graph a
        # step for a compiled token step (hf_internals.drop_stale_input_grad_hooks)
        hf_internals.drop_stale_input_grad_hooks(model)
        return replacement(original, *args, **kwargs)

    generate.grpokit_sampling = True  # stop_generating_through removes this wrapper, and only this one
    model.generate = generate


def stop_generating_through(trainer) -> None:
    """Undo `generate_through` when the trainer is done: whoever uses the model afterwards (the demo's evaluation,
    an in-process caller) generates with the model itself, in its own precision, not through the training sampler's
    copy and warpers."""
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


def sampling_neutral(trainer) -> bool:
    """Whether transformers' own sampling warpers are off in the trainer's generation config (NEUTRAL_SAMPLING), as
    a caller that passes its own as `logits_processor` needs (transformers appends a caller's processors before its
    own warpers). They are switched off by building the trainer with them in GRPOConfig.generation_kwargs, which
    TRL applies to the config it builds (grpokit.training.sampling.Sampling.generation_kwargs).

    Maintenance note: relies on TRL 1.16 keeping its GenerationConfig as `generation_config`."""
    config = trainer.generation_config
    return all(getattr(config, key, None) == value for key, value in NEUTRAL_SAMPLING.items())


def compile_generation(trainer) -> None:
    """TRL's HF generation compiles the decode step (transformers' own torch.compile, with a static cache).

    Maintenance note: TRL 1.16 builds its GenerationConfig with `disable_compile=True` and no way to override
    it (generation_kwargs are applied before that keyword), so the flag is switched back on the built config,
    with `hf_internals.generation_compile_config`'s settings. If TRL rebuilds the config per call, compile
    simply stays off (benchmarks/generation_throughput.py shows it)."""
    device = next(trainer.model.parameters()).device.type
    trainer.generation_config.disable_compile = False
    trainer.generation_config.compile_config = hf_internals.generation_compile_config(device)


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
    import torch  # torch loads with it: this module is imported by model-free commands

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
