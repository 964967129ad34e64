"""The seam with transformers and torch: every private part of theirs grpokit relies on, in this one module, each
with a maintenance note (grpokit.internals is the seam with TRL, on the same terms). No other grpokit module touches
these; nothing here is rebound for the whole process (each function reads or sets one object it is given).

| surface (transformers 5.25, torch 2.13)            | what grpokit does with it, and why                      | pinned by (tests/)          |
|----------------------------------------------------|---------------------------------------------------------|-----------------------------|
| CompileConfig._compile_all_devices                 | `generation_compile_config`: generate's decode step     | test_generation_section     |
|                                                    | compiled on the CPU too (generation.compile)            |                             |
| TrainingArguments' field names                     | `checkpointing_kwargs`: activation_checkpointing, or    | test_internals              |
|                                                    | gradient_checkpointing on releases before 5.2x          |                             |
| integrations.integration_utils.INTEGRATION_TO_     | `reporting_integrations`: the tracker names recipe check| test_internals              |
|   CALLBACK                                         | accepts for trl.report_to                               |                             |
| config.quantization_config, model.hf_quantizer,    | `drop_gguf_quantizer`: a model dequantised from GGUF    | test_internals              |
|   model.is_quantized                               | saves and trains as plain weights (the embedded model)  |                             |
| Trainer.callback_handler.callbacks                 | `trainer_callbacks`: tensorboard/ in the run folder     | test_internals              |
| Trainer.is_fsdp_enabled / is_deepspeed_enabled,    | `reference_is_sharded`: no whole-tensor KL reference,   | test_internals              |
|   accelerate's deepspeed_plugin.zero_stage         | probe or sampler copy on sharded weights                |                             |
| LRScheduler._last_lr                               | `scale_learning_rate`: a rollback's lower rate, logged  | test_internals              |
| config._attn_implementation                        | `attention_implementation`: the tree needs eager/SDPA   | test_tree                   |
| `...RotaryEmbedding` module names                  | `has_rotary_positions`: the tree's depth positions      | test_tree                   |
| config.layer_types / use_sliding_window /          | `sliding_window`: the tree refuses a window shorter     | test_tree                   |
|   sliding_window                                   | than its rows                                           |                             |
| DynamicCache.layers[i].keys/.values, the forward's | `cache_tensors`, `cache_of`, `cache_keyword`: grpokit's | test_decode                 |
|   `cache` / `past_key_values` keyword              | decoding loop prefills each prompt once and gathers it  |                             |
| enable_input_require_grads' hook (its name and     | `drop_stale_input_grad_hooks`: the hooks each           | test_internals, test_steps  |
|   `_require_grads_hooks`), Module._forward_hooks   | checkpointing re-enable leaves behind, removed          |                             |

tests/test_internals.py runs the functions against the installed versions; a release that renames one of these
fails there, or degrades as each maintenance note says (never a wrong number).
"""
from __future__ import annotations

import dataclasses
import inspect


def generation_compile_config(device_type: str):
    """transformers' CompileConfig for compiling generate's decode step on `device_type`.

    Maintenance note: transformers compiles automatically (static cache, disable_compile False) only on
    cuda/xpu/neuron/tpu unless the CompileConfig's private `_compile_all_devices` is set; on the CPU it is, with
    mode "default" ("reduce-overhead", the default, means CUDA graphs). If the attribute is renamed, compile on
    the CPU silently does nothing."""
    from transformers import CompileConfig  # this module is imported by model-free modules: transformers lazily

    if device_type == "cuda":
        return CompileConfig()
    config = CompileConfig(mode="default")
    config._compile_all_devices = True
    return config


def checkpointing_kwargs(enabled: bool) -> dict:
    """The TrainingArguments keyword that turns activation (gradient) checkpointing on or off.

    Maintenance note: transformers 5.2x renamed `gradient_checkpointing` to `activation_checkpointing` and
    warns on the old name on every run (removal announced for v6); older 5.x releases know only the old one.
    Relies on TrainingArguments' dataclass field names; if both disappear, GRPOConfig/SFTConfig refuse the
    keyword (a TypeError that `recipe check` reports)."""
    from transformers import TrainingArguments  # as above

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": enabled}


def reporting_integrations() -> tuple[list[str], set[str]]:
    """(every tracker name `report_to` accepts, the installed ones), for `recipe check`.

    Maintenance note: INTEGRATION_TO_CALLBACK (name -> callback) is not exported by transformers; it lives in
    transformers.integrations.integration_utils. If it moves, this import fails and `recipe check` of a recipe
    with trl.report_to raises instead of checking (tests/test_internals.py imports it)."""
    from transformers.integrations.integration_utils import (  # as above
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    return list(INTEGRATION_TO_CALLBACK), set(get_available_reporting_integrations())


def drop_gguf_quantizer(model) -> None:
    """A model dequantised from GGUF as plain weights: without this, save_pretrained refuses and the Trainer
    treats it as quantised (no full fine-tuning).

    Maintenance note: relies on transformers setting `config.quantization_config`, `model.hf_quantizer` and
    `model.is_quantized` on a model loaded with gguf_file=; if they are renamed, the embedded model's first
    conversion fails in save_pretrained (the cached folder of an earlier conversion keeps working)."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False


def trainer_callbacks(trainer) -> list:
    """The callbacks a built Trainer runs (transformers' CallbackHandler keeps them; no public getter).

    Maintenance note: relies on `trainer.callback_handler.callbacks`; if it changes, TensorBoard event files
    stay under checkpoints/ instead of RUN_DIR/tensorboard."""
    return list(trainer.callback_handler.callbacks)



def reference_is_sharded(trainer) -> bool:
    """The reference model's parameters are split across processes (FSDP, DeepSpeed ZeRO-3).

    Maintenance note: relies on Trainer's `is_fsdp_enabled`, `is_deepspeed_enabled` and accelerate's
    `state.deepspeed_plugin.zero_stage`; if they change, a sharded run would try to load whole tensors into
    its shards (load_state_dict then refuses, and the rollback reports the KL reference as not loadable)."""
    if getattr(trainer, "is_fsdp_enabled", False):
        return True
    plugin = getattr(getattr(trainer, "accelerator", None), "state", None)
    plugin = getattr(plugin, "deepspeed_plugin", None) if getattr(trainer, "is_deepspeed_enabled", False) else None
    return getattr(plugin, "zero_stage", None) == 3


def scale_learning_rate(optimizer, lr_scheduler, factor: float) -> None:
    """Scale a resumed optimizer and its scheduler to `factor` times their rate (a rollback's lower rate).

    Maintenance note: torch's LRScheduler caches the last rate in the private `_last_lr` (what get_last_lr()
    returns and the Trainer logs as learning_rate until the next step); it is scaled with the public
    `base_lrs` and the param groups' `lr`/`initial_lr`. If it disappears, the first logged learning rate after
    a rollback shows the old value; training itself uses the scaled param groups either way."""
    lr_scheduler.base_lrs = [b * factor for b in lr_scheduler.base_lrs]
    if getattr(lr_scheduler, "_last_lr", None):
        lr_scheduler._last_lr = [x * factor for x in lr_scheduler._last_lr]
    for group in optimizer.param_groups:
        group["lr"] *= factor
        if "initial_lr" in group:
            group["initial_lr"] *= factor


# ---------------------------------------------------------------- what a tree of shared prefixes needs of a model
def attention_implementation(model) -> str:
    """The attention implementation the model runs ("sdpa", "eager", "flash_attention_2", ...).

    Maintenance note: transformers keeps the resolved choice in the config's private `_attn_implementation`
    (what `attn_implementation=` at loading sets); a PeftModel forwards `.config` to its base model. If it is
    renamed, this answers "unknown" and grpokit.generation.tree refuses the tree layout (TRL's layout is used)."""
    config = getattr(model, "config", None)
    return str(getattr(config, "_attn_implementation", None) or "unknown")


def has_rotary_positions(model) -> bool:
    """The model encodes positions with rotary embeddings (a `...RotaryEmbedding` module, transformers' naming for
    every RoPE family: Llama, Qwen2/3, Mistral, Gemma, Phi-3, ...).

    Maintenance note: relies on transformers' class naming; a RoPE model whose module is named otherwise is
    refused the tree layout (computed in TRL's layout, said in one line), never computed wrongly."""
    return any(type(m).__name__.endswith("RotaryEmbedding") for m in model.modules())


def sliding_window(model) -> int | None:
    """The sliding attention window a model applies in some layer (None: every layer attends to all tokens).

    Maintenance note: transformers 5 lists each layer's kind in `config.layer_types` ("sliding_attention"); older
    configs say it with `use_sliding_window` (Qwen2) or a bare `sliding_window` (Mistral). If a family names it
    otherwise, its window is not seen here."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    window = getattr(config, "sliding_window", None)
    kinds = getattr(config, "layer_types", None)
    if kinds is not None:
        return window if any("sliding" in str(k) for k in kinds) else None
    if hasattr(config, "use_sliding_window"):
        return window if config.use_sliding_window else None
    return window


def cache_tensors(cache) -> list:
    """(keys, values) of every layer of a filled DynamicCache, each (batch, kv_heads, positions, head_dim).

    Maintenance note: transformers 5 keeps a cache as `cache.layers`, each with `.keys` and `.values`; if that
    changes, grpokit.generation.decode's prefill fails at once with an AttributeError (tests/test_decode.py)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def cache_of(tensors) -> object:
    """A DynamicCache holding these (keys, values) per layer, as if a forward pass had filled it."""
    from transformers import DynamicCache  # as above

    cache = DynamicCache()
    for i, (keys, values) in enumerate(tensors):
        cache.update(keys, values, i)
    return cache


def cache_keyword(model) -> str:
    """The forward keyword a KV cache is passed in: `cache` (transformers 5.25 on) or `past_key_values` (before,
    deprecated from 5.25).

    Maintenance note: read from the model class's forward signature (a PeftModel's base model); if a release
    names it otherwise, the cache is ignored and decoding recomputes nothing it should: tests/test_decode.py's
    comparison with `generate` fails."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def drop_stale_input_grad_hooks(model) -> int:
    """Remove the input-embedding hooks that transformers' `enable_input_require_grads` registered and no longer
    holds; return how many. Its own current hooks stay.

    Why: TRL 1.16 switches activation checkpointing off around each step's generation and on again after
    (trl.models.utils.unwrap_model_for_generation); transformers 5.25's `activation_checkpointing_enable` registers
    a new `make_inputs_require_grads` forward hook on the input embedding each time and keeps only the newest in
    `_require_grads_hooks`, while `activation_checkpointing_disable` removes them only for a PEFT model. A full
    fine-tune with checkpointing on gains two hooks a step (measured: 1, 3, 5 at steps 1-3), each called on every
    forward, and torch.compile guards on their number, so `generation.compile` recompiled its token step at every
    training step (docs/measurements.md "The roofline of a token step").

    Maintenance note: relies on the hook's function name `make_inputs_require_grads` and the `_require_grads_hooks`
    list of RemovableHandles on the model(s) that enabled them, and on nn.Module's `_forward_hooks` dicts keyed by
    handle id. If transformers renames either, nothing is removed (the hooks leak as before: no wrong number)."""
    get = getattr(model, "get_input_embeddings", None)
    embeddings = get() if callable(get) else None
    if embeddings is None or not hasattr(embeddings, "_forward_hooks"):
        return 0
    held = {h.id for m in model.modules() for h in (m.__dict__.get("_require_grads_hooks") or ())}
    stale = [k for k, hook in embeddings._forward_hooks.items()
             if getattr(hook, "__name__", "") == "make_inputs_require_grads" and k not in held]
    for k in stale:
        for hooks in (embeddings._forward_hooks, embeddings._forward_hooks_with_kwargs,
                      embeddings._forward_hooks_always_called):
            hooks.pop(k, None)
    return len(stale)
