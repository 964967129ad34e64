"""Memory planning without loading weights: what one GPU holds for a recipe, per strategy, and a recommendation.

    grpokit preflight recipes/qwen3-4b-gsm8k-lora.yaml --memory
    grpokit preflight RECIPE --memory --num-processes 8 --accelerate-config zero3 --gpu-memory 80

The parameter count comes from the model's own config: transformers builds
the model on torch's `meta` device (shapes, no storage), so any architecture is counted exactly, LoRA adapters included
(r x (in + out) per adapted Linear). Everything else is arithmetic, per GPU:

    P  = all parameters, T = trained parameters (P, or the LoRA adapters), b = bytes per weight
         (float32 4, bfloat16/float16 2; 'auto' = bfloat16, the GPU default), N = processes (GPUs)
    weights     P x b                      (/N under zero3 and fsdp, which shard the weights)
    gradients   T x b                      (/N under zero2, zero3, fsdp)
    optimizer   T x (8 + 4 if b < 4)       Adam's two fp32 states, plus the fp32 master copy kept under
                                           mixed precision (the ZeRO paper's 16 bytes per parameter with
                                           weights and gradients); /N under zero2, zero3, fsdp
    reference   P x b when beta > 0 and every weight trains (/N under zero3, fsdp); LoRA: 0 (the base
                model with the adapter switched off is the reference)
    activations L x 34 x s x m x H x b/2   per micro-batch of m sequences of s = prompt + completion tokens
                                           (Korthikanti et al., "Reducing Activation Recomputation in Large
                                           Transformer Models", 16-bit, attention scores not stored: SDPA)
                with gradient checkpointing L x 2 x s x m x H x b/2 (each layer's input) + one layer's 34 x ...
              + m x completion x V x 4     the fp32 logits of the completion tokens (log-probabilities)
    KV cache    2 x L x kv_heads x head_dim x s x g x b   for the g = per_device_train_batch_size x
                                           gradient_accumulation_steps sequences one GPU generates per step
                                           (HF generate; TRL's default steps_per_generation)

Not covered: allocator fragmentation and CUDA context (~1-2 GiB: the recommendation keeps 15% headroom),
DeepSpeed/FSDP communication buffers, the gathered layer under zero3/fsdp, vLLM's own weight copy and
cache (it takes `gpu_memory_utilization` of the GPU when colocated).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from grpokit.errors import GrpokitError, Problem

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}  # auto: bfloat16 on a GPU (models.torch_dtype)
ADAM_STATE_BYTES = 8        # exp_avg and exp_avg_sq in fp32
MASTER_COPY_BYTES = 4       # fp32 master weights kept by mixed-precision optimizers (DeepSpeed, FSDP, apex)
ACT_PER_TOKEN_HIDDEN = 34   # Korthikanti et al.: bytes per token per hidden unit per layer, 16-bit, no s^2 term
CKPT_PER_TOKEN_HIDDEN = 2   # gradient checkpointing keeps each layer's 16-bit input
LOGIT_BYTES = 4             # logits are upcast to fp32 for the log-probabilities
STRATEGIES = ("ddp", "zero2", "zero3", "fsdp")
SHARDS_STATES = {"zero2", "zero3", "fsdp"}   # gradients + optimizer state split over the GPUs
SHARDS_WEIGHTS = {"zero3", "fsdp"}           # the weights too
HEADROOM = 0.85             # plan to fill at most 85% of a GPU: CUDA context, fragmentation, buffers
GPU_SIZES_GIB = (24, 40, 80, 141)  # common cards: 24 GB consumer, A100 40/80 GB, H200 141 GB

# Sizes of the Qwen3 models the shipped recipes use, from their published config.json, so the planner works
# offline for them; any other model is read from its config (a local folder or the hub cache).
KNOWN_CONFIGS = {
    "Qwen/Qwen3-0.6B": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                            head_dim=128, intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True),
    "Qwen/Qwen3-4B": dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                          head_dim=128, intermediate_size=9728, vocab_size=151936, tie_word_embeddings=True),
    "Qwen/Qwen3-14B": dict(hidden_size=5120, num_hidden_layers=40, num_attention_heads=40, num_key_value_heads=8,
                           head_dim=128, intermediate_size=17408, vocab_size=151936, tie_word_embeddings=False),
}
KNOWN_CONFIGS["Qwen/Qwen3-0.6B-Base"] = KNOWN_CONFIGS["Qwen/Qwen3-0.6B"]


@dataclass
class Shape:
    """What the arithmetic needs from a model config."""

    params: int
    lora_params: int | None   # trained adapter parameters, None without LoRA
    hidden: int
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int


@dataclass
class Plan:
    """Bytes one GPU holds for a recipe under one layout."""

    strategy: str
    num_gpus: int
    gradient_checkpointing: bool
    weights: int
    gradients: int
    optimizer: int
    reference: int
    activations: int
    kv_cache: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.reference + self.activations + self.kv_cache


def shape_from_config(config, lora=None) -> Shape:
    """Count parameters on the meta device (no memory) and read the sizes the formulas use."""
    import torch
    from transformers import AutoModelForCausalLM

    # torch's meta device rather than accelerate's init_empty_weights: the latter leaves tied embeddings untied
    # (counted twice) and takes seconds where this takes a tenth of one.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    lora_params = None
    if lora is not None:
        out_emb = model.get_output_embeddings()
        targets = lora.target_modules
        lora_params = 0
        for name, mod in model.named_modules():
            if not isinstance(mod, torch.nn.Linear) or mod is out_emb:  # peft's all-linear skips the output layer
                continue
            if targets == "all-linear" or name.split(".")[-1] in targets:
                lora_params += lora.r * (mod.in_features + mod.out_features)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    return Shape(params=params, lora_params=lora_params, hidden=text.hidden_size, layers=text.num_hidden_layers,
                 kv_heads=getattr(text, "num_key_value_heads", None) or heads,
                 head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads, vocab=text.vocab_size)


def load_config(name: str):
    """The model's config without its weights: a local folder, the embedded model, the hub cache, or the table
    of Qwen3 sizes above; never the network (the planner runs before anything is downloaded)."""
    from transformers import AutoConfig, Qwen3Config

    from grpokit.models import resolve_model_path

    path = resolve_model_path(name)
    try:
        return AutoConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as e:
        if name in KNOWN_CONFIGS:
            return Qwen3Config(**KNOWN_CONFIGS[name])
        raise GrpokitError([Problem(f"model.name {name}", f"cannot read its config offline ({type(e).__name__})",
                                    "pass a local model folder, or download it once: "
                                    f"`huggingface-cli download {name} config.json`")]) from None


def plan(shape: Shape, *, strategy: str, num_gpus: int, dtype: str, beta: float, micro_batch: int,
         generation_batch: int, prompt_len: int, completion_len: int, gradient_checkpointing: bool) -> Plan:
    """Per-GPU bytes by the formulas in the module docstring."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    b = DTYPE_BYTES[dtype]
    n = max(1, num_gpus)
    lora = shape.lora_params is not None
    trained = shape.lora_params if lora else shape.params
    w_div = n if strategy in SHARDS_WEIGHTS else 1
    s_div = n if strategy in SHARDS_STATES else 1
    opt_per_param = ADAM_STATE_BYTES + (MASTER_COPY_BYTES if b < 4 else 0)
    s = prompt_len + completion_len
    h, L = shape.hidden, shape.layers
    per_layer = ACT_PER_TOKEN_HIDDEN * s * micro_batch * h * b // 2
    if gradient_checkpointing:
        acts = L * CKPT_PER_TOKEN_HIDDEN * s * micro_batch * h * b // 2 + per_layer
    else:
        acts = L * per_layer
    acts += micro_batch * completion_len * shape.vocab * LOGIT_BYTES
    return Plan(
        strategy=strategy, num_gpus=n, gradient_checkpointing=gradient_checkpointing,
        weights=(shape.params + (trained if lora else 0)) * b // w_div,
        gradients=trained * b // s_div,
        optimizer=trained * opt_per_param // s_div,
        reference=0 if (lora or beta <= 0) else shape.params * b // w_div,
        activations=acts,
        kv_cache=2 * L * shape.kv_heads * shape.head_dim * s * generation_batch * b,
    )


def plan_recipe(recipe, shape: Shape, strategy: str, num_gpus: int, gradient_checkpointing: bool | None = None) -> Plan:
    t = recipe.train
    gc = recipe.model.gradient_checkpointing if gradient_checkpointing is None else gradient_checkpointing
    return plan(shape, strategy=strategy, num_gpus=num_gpus, dtype=recipe.model.dtype, beta=t.beta,
                micro_batch=t.per_device_train_batch_size,
                generation_batch=t.per_device_train_batch_size * t.gradient_accumulation_steps,
                prompt_len=t.max_prompt_length or 512, completion_len=t.max_completion_length,
                gradient_checkpointing=gc)


def recommend(recipe, shape: Shape, gpu_gib: float | None = None) -> str:
    """The simplest layout that fits: fewest GPUs, then DDP before ZeRO-2 before ZeRO-3, checkpointing last."""
    sizes = (gpu_gib,) if gpu_gib else GPU_SIZES_GIB
    for size in sizes:
        for n in (1, 2, 4, 8):
            for strategy in ("ddp", "zero2", "zero3") if n > 1 else ("ddp",):
                for gc in (False, True):
                    p = plan_recipe(recipe, shape, strategy, n, gc)
                    if p.total <= size * GIB * HEADROOM:
                        how = f"{n} x {size:g} GiB GPU" + ("" if n == 1 else f"s, --num-processes {n} "
                                                          f"--accelerate-config {strategy}")
                        gc_note = " with model.gradient_checkpointing: true" if gc else ""
                        return f"{how}{gc_note} ({p.total / GIB:.1f} GiB per GPU planned)"
    return (f"does not fit 8 x {sizes[-1]:g} GiB GPUs: use LoRA (model.lora), shorter max_completion_length, a "
            "smaller per_device_train_batch_size, or more machines")


def memory_report(recipe, num_gpus: int = 1, strategy: str | None = None, gpu_gib: float | None = None) -> dict:
    shape = shape_from_config(load_config(recipe.model.name), recipe.model.lora)
    strategies = (strategy,) if strategy else (("ddp",) if num_gpus == 1 else STRATEGIES)
    plans = [plan_recipe(recipe, shape, s, num_gpus, gc) for s in strategies for gc in (False, True)]
    return {"model": recipe.model.name, "shape": shape, "plans": plans, "recommendation": recommend(recipe, shape, gpu_gib)}


def render_memory_plan(report: dict, recipe) -> str:
    sh: Shape = report["shape"]
    t = recipe.train
    lora = f", LoRA r={recipe.model.lora.r}: {sh.lora_params / 1e6:.1f}M trained" if sh.lora_params is not None else ""
    lines = [f"memory plan for {report['model']}: {sh.params / 1e6:.1f}M parameters{lora}, "
             f"{sh.layers} layers, hidden {sh.hidden}, {sh.kv_heads} kv heads x {sh.head_dim}, vocab {sh.vocab}",
             f"dtype {recipe.model.dtype}, beta {t.beta}, micro-batch {t.per_device_train_batch_size}, "
             f"{t.per_device_train_batch_size * t.gradient_accumulation_steps} sequences generated per GPU per step "
             f"of {(t.max_prompt_length or 512)} + {t.max_completion_length} tokens",
             "GiB per GPU:"]
    cols = [f.name for f in fields(Plan) if f.name not in ("strategy", "num_gpus", "gradient_checkpointing")]
    lines.append(f"  {'layout':<22}" + "".join(f"{c:>12}" for c in cols) + f"{'total':>10}")
    for p in report["plans"]:
        name = f"{p.strategy} x{p.num_gpus}{' +ckpt' if p.gradient_checkpointing else ''}"
        lines.append(f"  {name:<22}" + "".join(f"{getattr(p, c) / GIB:>12.2f}" for c in cols) + f"{p.total / GIB:>10.2f}")
    lines.append(f"recommendation: {report['recommendation']}")
    return "\n".join(lines)
