"""Memory planning without loading weights: what one GPU holds for a recipe, per strategy, and a recommendation.

    grpokit preflight recipes/qwen3-4b-gsm8k-lora.yaml --memory
    grpokit preflight RECIPE --memory --num-processes 8 --accelerate-config zero3 --gpu-memory 80

The model is built from its own config on torch's `meta` device (shapes, no storage), so every architecture
is counted exactly: its parameters, its LoRA adapters (peft on the meta model), and the activations autograd
saves in one forward pass (a forward of the meta model with saved-tensor hooks: every tensor kept for the
backward pass, whatever the layer types, MLP width, GQA or adapter dropout). Per GPU, with
P = all parameters, T = trained parameters (P, or the LoRA adapters), b = bytes per weight (float32 4,
bfloat16/float16 2; 'auto' = bfloat16 on a GPU, float32 on the CPU), N = processes (GPUs):

    weights     P x b (+ T x 4 for LoRA: peft keeps adapters in float32)   /N under zero3 and fsdp
    optimizer   AdamW's two moments in the trained weights' dtype, 2 x T x (b, or 4 for adapters), as the
                Trainer keeps them (no master copy); zero2/zero3/fsdp train with a float32 master copy,
                12 bytes per trained parameter (the ZeRO paper's accounting), /N
    reference   P x b when beta > 0 and every weight trains (/N under zero3, fsdp); LoRA: 0 (the base
                model with the adapter switched off is the reference)
    sampler     a copy of the policy in generation.sampler_dtype when it is not the weights' own (P x its
                bytes, + T for LoRA's adapter; grpokit.training.sampler), else 0
    then the larger of the two phases of a step:
    training    activations of one micro-batch of m sequences of s = prompt + completion tokens, as the meta
                forward saved them; with gradient checkpointing each layer's input (L x m x s x hidden x b) plus
                one layer's saved tensors, recomputed in the backward pass. The attention probabilities
                (m x heads x s x s per layer) are counted only on the CPU: CUDA's fused SDPA kernels do not keep
                them, the CPU's masked SDPA does
              + lm_head: TRL 1.16 scores log-probabilities through a fused LM head (trl.kernels.chunked_logprob)
                that never holds the [positions, vocab] logits: it works on tiles of min(positions, 4096) x
                min(vocab, 32768) in the compute dtype (float32 on the CPU), one on CUDA (Triton folds each tile in
                place), HEAD_TILES_CPU on the CPU (its torch fallback makes temporaries; measured), plus, when the
                head's weight trains (full fine-tuning), its float32 gradient accumulator vocab x hidden x 4;
                positions = m x s on the CPU (every position is scored there), m x completion on CUDA;
                the head's backward runs first and frees its tiles, so the larger of lm_head and
              + gradients T x (b or 4) (/N under zero2, zero3, fsdp), which build up layer by layer after it
    generation  KV cache 2 x L x kv_heads x head_dim x s x g x b for the g = per_device_train_batch_size x
                gradient_accumulation_steps sequences one GPU generates per step (HF generate; TRL's default
                steps_per_generation); gradients are freed before it (the Trainer zeroes them to None)

Without the training libraries: the decoder families whose layers are known (DECODERS: Llama, Mistral, Qwen2,
Qwen3) are counted from their config.json alone (`shape_from_dict`: parameters by the layer formula, saved
activations by the per-layer table ACTIVATIONS, written from what the meta forward above saves), so the plan
answers in about a second without importing torch, transformers or peft; tests/test_memory.py checks the two
agree on every shipped recipe and on small configs of each family (rerun it after upgrading those libraries).
Any other architecture, or LoRA on a subset of the linear layers, takes the meta forward.

Checked against measured peaks (benchmarks/memory_plan.py writes benchmarks/results/memory_*.json, which
tests/test_memory.py reads). Not covered: allocator fragmentation and the CUDA context (~1-2 GiB: the
recommendation keeps 15% headroom), DeepSpeed/FSDP communication buffers, the gathered layer under
zero3/fsdp, vLLM's own weight copy and cache (it takes `gpu_memory_utilization` of the GPU when colocated).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from grpokit.errors import GrpokitError, Problem

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
ADAPTER_BYTES = 4           # peft keeps LoRA weights (and so their gradients and Adam moments) in float32
MASTER_OPTIMIZER_BYTES = 12  # zero2/zero3/fsdp mixed precision: fp32 master copy + two fp32 Adam moments
HEAD_TOKENS, HEAD_VOCAB = 4096, 32768  # TRL 1.16's fused LM head tile: TOKEN_CHUNK_SIZE x _CHUNKED_LOGPROB_CHUNK_SIZE
# Tiles live at once in the backward pass of that head on the CPU, where torch ops fold each tile (Triton, one):
# 6 fits benchmarks/memory_plan.py's measured peaks on this project's 2-core CPU (2026-12-01).
HEAD_TILES_CPU = 6
STRATEGIES = ("ddp", "zero2", "zero3", "fsdp")
SHARDS_STATES = {"zero2", "zero3", "fsdp"}   # gradients + optimizer state split over the GPUs
SHARDS_WEIGHTS = {"zero3", "fsdp"}           # the weights too
HEADROOM = 0.85             # plan to fill at most 85% of a GPU: CUDA context, fragmentation, buffers
GPU_SIZES_GIB = (24, 40, 80, 141)  # common cards: 24 GB consumer, A100 40/80 GB, H200 141 GB
# Sequence length of the meta forward that measures activations per token: a prime, so that no model dimension
# (head_dim 64 of the embedded model) also measures token x token and is taken for attention probabilities.
_PROBE_TOKENS = 61

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
# The embedded model (model.name: default) before its first conversion from GGUF: the sizes of its converted
# config.json (tests/test_memory.py compares them), so a plan never needs the conversion (torch).
EMBEDDED_CONFIG = dict(model_type="llama", hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                       num_key_value_heads=3, head_dim=64, intermediate_size=1536, vocab_size=49152,
                       tie_word_embeddings=True)


def weight_bytes(dtype: str, device: str = "cuda") -> int:
    """Bytes per weight of a recipe's model.dtype on the device it will train on ('auto': grpokit.models)."""
    if dtype == "auto":
        return 2 if device == "cuda" else 4
    return DTYPE_BYTES[dtype]


@dataclass
class Shape:
    """What the arithmetic needs from a model config (activation bytes: per sequence, at weight dtype `b`)."""

    params: int
    lora_params: int | None   # trained adapter parameters, None without LoRA
    hidden: int
    layers: int
    kv_heads: int
    head_dim: int
    vocab: int
    act_per_token: float = 0.0    # bytes autograd saves per token of a sequence, all layers (attention scores aside)
    act_per_token_sq: float = 0.0  # ... per (token x token): the attention probabilities of a non-fused SDPA
    act_dtype_bytes: int = 4      # the weight dtype the activations above were measured at


@dataclass
class Plan:
    """Bytes one GPU holds for a recipe under one layout."""

    strategy: str
    num_gpus: int
    gradient_checkpointing: bool
    weights: int
    optimizer: int
    reference: int
    sampler: int
    gradients: int
    activations: int
    lm_head: int
    kv_cache: int

    @property
    def total(self) -> int:
        # The head's backward runs first and frees its tiles before the layers' gradients build up.
        step = self.activations + max(self.lm_head, self.gradients)
        return self.weights + self.optimizer + self.reference + self.sampler + max(step, self.kv_cache)


def _meta_model(config, lora, dtype_bytes: int):
    import torch
    from transformers import AutoModelForCausalLM

    # torch's meta device rather than accelerate's init_empty_weights: the latter leaves tied embeddings untied
    # (counted twice) and takes seconds where this takes a tenth of one.
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32 if dtype_bytes == 4 else torch.bfloat16)
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                                 target_modules=lora.target_modules))
    return model


def saved_activations(model, tokens: int) -> tuple[int, int]:
    """(bytes, of which attention-probability bytes) autograd saves in one forward of one sequence of `tokens`
    through the model's backbone (the LM head is TRL's chunked kernel, counted apart). Runs on the meta device."""
    import torch

    # Storages, not tensor objects: a saved tensor is often a view (a weight's transpose for linear's backward,
    # a reshaped activation) of a storage counted once; a parameter's storage is not an activation.
    weights = {p.untyped_storage()._cdata for p in model.parameters()}
    storages: dict[int, int] = {}
    square = 0

    def pack(t):
        nonlocal square
        storage = t.untyped_storage()
        key = storage._cdata
        if key not in weights and key not in storages:
            storages[key] = storage.nbytes()
            if t.dim() >= 2 and t.shape[-1] == t.shape[-2] == tokens:
                square += storage.nbytes()
        return t

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    model.train()
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        getattr(base, base.base_model_prefix)(input_ids=ids)
    return sum(storages.values()), square


def shape_from_config(config, lora=None, dtype: str = "bfloat16", device: str = "cuda") -> Shape:
    """Count parameters and saved activations on the meta device (no memory) and read the sizes the plan uses."""
    import torch

    b = weight_bytes(dtype, device)
    model = _meta_model(config, None, b)
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
        model = _meta_model(config, lora, b)
    try:
        total, square = saved_activations(model, _PROBE_TOKENS)
        per_token, per_token_sq = (total - square) / _PROBE_TOKENS, square / _PROBE_TOKENS ** 2
    except Exception:  # noqa: BLE001 - an architecture whose forward needs real data (.item()): the formula instead
        per_token, per_token_sq = _fallback_activations(config, b), 0.0
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    return Shape(params=params, lora_params=lora_params, hidden=text.hidden_size, layers=text.num_hidden_layers,
                 kv_heads=getattr(text, "num_key_value_heads", None) or heads,
                 head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads, vocab=text.vocab_size,
                 act_per_token=per_token, act_per_token_sq=per_token_sq, act_dtype_bytes=b)


def _fallback_activations(config, b: int) -> float:
    """Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models": 34 bytes per token
    per hidden unit per layer in 16 bits (attention scores not stored), for a model the meta forward cannot run."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return 34 * text.hidden_size * text.num_hidden_layers * b / 2


def read_config(name: str) -> dict | None:
    """The model's config.json as a dict (find_config without its note)."""
    return find_config(name)[0]


def find_config(name: str) -> tuple[dict | None, str | None]:
    """(the model's config.json as a dict, a note when it is not the model's own file on this machine), without
    transformers: a local folder, the embedded model's converted folder, the Hugging Face hub cache, or the
    table of Qwen3 sizes above; (None, None) when none has it. Never the network (the planner runs before
    anything is downloaded, often on a laptop without it)."""
    import json
    from pathlib import Path

    from grpokit.models import DEFAULT_MODEL_DIRNAME, cache_dir

    if name == "default":
        path = cache_dir() / "models" / DEFAULT_MODEL_DIRNAME / "config.json"
        return (json.loads(path.read_text()), None) if path.is_file() else (dict(EMBEDDED_CONFIG), None)
    local = Path(name).expanduser() / "config.json"
    if local.is_file():
        return json.loads(local.read_text()), None
    if name.count("/") <= 1 and not name.startswith(("/", ".", "~")):
        from huggingface_hub import try_to_load_from_cache

        try:
            cached = try_to_load_from_cache(name, "config.json")
        except ValueError:  # not a valid repo id
            cached = None
        if isinstance(cached, str) and Path(cached).is_file():
            return json.loads(Path(cached).read_text()), None
    if name in KNOWN_CONFIGS:
        return {"model_type": "qwen3", **KNOWN_CONFIGS[name]}, (
            f"model.name {name}: not in this machine's Hugging Face cache; planned from grpokit's table of its "
            f"published sizes (training needs it downloaded: `hf download {name}`)")
    return None, None


def _offline_problem(name: str) -> GrpokitError:
    return GrpokitError([Problem(f"model.name {name}", "its config.json is not on this machine (a local folder, the "
                                 "Hugging Face cache) and the planner does not download",
                                 "pass a local model folder, or download the config once: "
                                 f"`hf download {name} config.json`")])


def load_config(name: str):
    """The model's transformers config (for the meta forward), from read_config's sources."""
    from transformers import AutoConfig, Qwen3Config

    from grpokit.models import resolve_model_path

    path = resolve_model_path(name)
    try:
        return AutoConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError):
        if name in KNOWN_CONFIGS:
            return Qwen3Config(**KNOWN_CONFIGS[name])
        raise _offline_problem(name) from None


# ---------------------------------------------------------------- the same shape from config.json alone
# Decoder families whose layers are the same stack: RMSNorm, q/k/v/o attention with rotary embeddings (GQA),
# a gated MLP (gate/up/down), RMSNorm; qk_norm: Qwen3's per-head RMSNorm of q and k. "bias": which projections
# carry a bias (Qwen2: q, k, v always; the others when the config's attention_bias / mlp_bias says so), and the
# config class's default for tie_word_embeddings when config.json leaves it out.
DECODERS = {
    "llama": dict(qk_norm=False, qkv_bias=False, tie=False),
    "mistral": dict(qk_norm=False, qkv_bias=False, tie=False),
    "qwen2": dict(qk_norm=False, qkv_bias=True, tie=False),
    "qwen3": dict(qk_norm=True, qkv_bias=False, tie=False),
}
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Bytes autograd saves per token and layer, as the meta forward counts them (torch 2.13, transformers 5.24,
# peft 0.21), by weight bytes b (4 or 2) and adapter kind: coefficients of (hidden, q = heads x head_dim,
# intermediate, LoRA rank r, a constant). Full fine-tuning: each RMSNorm keeps its float32 input, the rsqrt, its
# normalised output at b and the next linear's input at b ((4 + 2b) x hidden + 4 per norm, two per layer);
# attention keeps q, the repeated k and v in float32 and the o_proj input at b; the MLP keeps 4 intermediate-
# sized tensors at b. Under LoRA (every linear adapted) the frozen weights need no saved input, and the float32
# adapters keep their own inputs (more of them with dropout: the dropped copy as well) and the rank-r outputs.
ACTIVATIONS = {
    # (b, adapter): (hidden, q, intermediate, r, constant)
    (4, None): (24, 16, 16, 0, 8),
    (2, None): (16, 14, 8, 0, 8),
    (4, "lora"): (16, 16, 16, 28, 8),
    (2, "lora"): (28, 16, 10, 28, 8),
    (4, "lora+dropout"): (48, 20, 20, 28, 8),
    (2, "lora+dropout"): (48, 20, 14, 28, 8),
}


def _lora_kind(lora) -> str | None:
    if lora is None:
        return None
    return "lora+dropout" if lora.dropout > 0 else "lora"


def shape_from_dict(cfg: dict, lora=None, dtype: str = "bfloat16", device: str = "cuda") -> Shape | None:
    """The Shape `shape_from_config` measures, from config.json alone (no torch); None for an architecture not in
    DECODERS, or LoRA on only some linear layers (their activations are the meta forward's to count)."""
    family = DECODERS.get(cfg.get("model_type"))
    if family is None or (lora is not None and lora.target_modules != "all-linear"):
        return None
    try:
        h, L, nh, V, inter = (int(cfg[k]) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                      "vocab_size", "intermediate_size"))
    except (KeyError, TypeError, ValueError):
        return None
    nkv = int(cfg.get("num_key_value_heads") or nh)
    hd = int(cfg.get("head_dim") or h // nh)
    q, kv = nh * hd, nkv * hd
    attn_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = family["qkv_bias"] or attn_bias
    dims = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h), "gate_proj": (h, inter),
            "up_proj": (h, inter), "down_proj": (inter, h)}
    per_layer = sum(i * o for i, o in dims.values()) + 2 * h  # the linears' weights and the two RMSNorms
    per_layer += (q + 2 * kv) * qkv_bias + h * attn_bias + (2 * inter + h) * bool(cfg.get("mlp_bias", False))
    per_layer += 2 * hd * family["qk_norm"]
    tied = cfg.get("tie_word_embeddings", family["tie"])
    params = V * h * (1 if tied else 2) + L * per_layer + h
    lora_params = None if lora is None else L * sum(lora.r * (i + o) for i, o in dims.values())
    b = weight_bytes(dtype, device)
    kind = _lora_kind(lora)
    ch, cq, ci, cr, c0 = ACTIVATIONS[(b, kind)]
    layer = ch * h + cq * q + ci * inter + cr * (lora.r if lora else 0) + c0
    if family["qk_norm"]:  # the q and k norms: float32 input and rsqrt, output at b (4 bytes each under LoRA)
        layer += (4 + (b if kind is None else 0)) * (q + kv) + 4 * (nh + nkv)
    # Outside the layers: the rotary cos/sin tables at b; with every weight trained also the token ids (int64,
    # for the embedding's gradient) and the final norm's input, rsqrt and output; LoRA with dropout keeps 12 bytes
    # per hidden unit fewer in the first layer (its input comes from the frozen embedding).
    outer = 2 * hd * b
    if kind is None:
        outer += 8 + (4 + b) * h + 4
    elif kind == "lora+dropout":
        outer -= 12 * h
    return Shape(params=params, lora_params=lora_params, hidden=h, layers=L, kv_heads=nkv, head_dim=hd, vocab=V,
                 act_per_token=float(L * layer + outer), act_per_token_sq=float(4 * nh * L), act_dtype_bytes=b)


def model_shape(name: str, lora=None, dtype: str = "bfloat16", device: str = "cuda") -> tuple[Shape, str | None]:
    """(the model's Shape, find_config's note): from its config.json alone where the family is known, else by the
    meta forward."""
    cfg, note = find_config(name)
    if cfg is None:
        raise _offline_problem(name)
    shape = shape_from_dict(cfg, lora, dtype, device)
    return (shape if shape is not None else shape_from_config(load_config(name), lora, dtype, device)), note


def sampler_bytes_per_weight(sampler_dtype: str, weight_b: int, device: str) -> int:
    """Bytes per weight of a sampler copy (generation.sampler_dtype against the weights' `weight_b`), 0: no copy.
    auto is bf16 on a GPU and on a CPU with native bf16 (read from its flags, no library imported)."""
    if sampler_dtype == "auto":
        from grpokit.recipe.machine import cpu_bf16_flag

        sampler_dtype = "bfloat16" if device == "cuda" or cpu_bf16_flag() else "same"
    want = {"float32": 4, "bfloat16": 2}.get(sampler_dtype, weight_b)
    return 0 if want == weight_b else want


def plan(shape: Shape, *, strategy: str, num_gpus: int, dtype: str, beta: float, micro_batch: int,
         generation_batch: int, prompt_len: int, completion_len: int, gradient_checkpointing: bool,
         device: str = "cuda", sampler_dtype: str = "same") -> Plan:
    """Per-GPU bytes by the rules in the module docstring (`device`: where it trains, cuda or cpu)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    b = weight_bytes(dtype, device)
    n = max(1, num_gpus)
    lora = shape.lora_params is not None
    trained = shape.lora_params if lora else shape.params
    tb = ADAPTER_BYTES if lora else b  # bytes per trained weight
    w_div = n if strategy in SHARDS_WEIGHTS else 1
    s_div = n if strategy in SHARDS_STATES else 1
    opt_per_param = MASTER_OPTIMIZER_BYTES if strategy in SHARDS_STATES else 2 * tb
    s = prompt_len + completion_len
    per_seq = (shape.act_per_token * s + (shape.act_per_token_sq * s * s if device != "cuda" else 0.0)) \
        * b / shape.act_dtype_bytes  # measured at the shape's dtype
    if gradient_checkpointing:
        acts = shape.layers * s * shape.hidden * b + per_seq / max(1, shape.layers)
    else:
        acts = per_seq
    positions = micro_batch * (s if device != "cuda" else completion_len)
    compute = b if device == "cuda" else 4  # the head's tiles: autocast dtype on a GPU, float32 on the CPU
    tile = min(positions, HEAD_TOKENS) * min(shape.vocab, HEAD_VOCAB) * compute
    head = tile * (1 if device == "cuda" else HEAD_TILES_CPU) + positions * shape.hidden * 4  # + grad of the hidden
    if not lora:
        head += shape.vocab * shape.hidden * 4  # the head weight's float32 gradient accumulator
    return Plan(
        strategy=strategy, num_gpus=n, gradient_checkpointing=gradient_checkpointing,
        weights=(shape.params * b + (trained * tb if lora else 0)) // w_div,
        optimizer=trained * opt_per_param // s_div,
        reference=0 if (lora or beta <= 0) else shape.params * b // w_div,
        sampler=(shape.params + (trained if lora else 0)) * sampler_bytes_per_weight(sampler_dtype, b, device),
        gradients=trained * tb // s_div,
        activations=int(micro_batch * acts),
        lm_head=head,
        kv_cache=2 * shape.layers * shape.kv_heads * shape.head_dim * s * generation_batch * b,
    )


def plan_recipe(recipe, shape: Shape, strategy: str, num_gpus: int, gradient_checkpointing: bool | None = None,
                device: str = "cuda") -> Plan:
    t = recipe.train
    gc = recipe.model.gradient_checkpointing if gradient_checkpointing is None else gradient_checkpointing
    return plan(shape, strategy=strategy, num_gpus=num_gpus, dtype=recipe.model.dtype, beta=t.beta,
                micro_batch=t.per_device_train_batch_size,
                generation_batch=t.per_device_train_batch_size * t.gradient_accumulation_steps,
                prompt_len=t.max_prompt_length or 512, completion_len=t.max_completion_length,
                gradient_checkpointing=gc, device=device,
                sampler_dtype=recipe.generation.sampler_dtype if recipe.generation.backend == "hf" else "same")


def checkpoint_bytes(shape: Shape, dtype: str, device: str = "cuda") -> int:
    """One checkpoint on disk: the weights in their dtype (the LoRA adapter alone, in float32) and AdamW's two
    moments of the trained ones (the Trainer saves optimizer.pt so that --resume continues exactly)."""
    b = weight_bytes(dtype, device)
    if shape.lora_params is not None:
        return shape.lora_params * ADAPTER_BYTES * 3
    return shape.params * b * 3


def vllm_share(recipe) -> float:
    """The share of each GPU a colocated vLLM engine reserves for itself (generation.gpu_memory_utilization)."""
    g = recipe.generation
    return g.gpu_memory_utilization if g.backend == "vllm" and g.vllm_mode == "colocate" else 0.0


def recommend(recipe, shape: Shape, gpu_gib: float | None = None) -> str:
    """The simplest layout that fits: fewest GPUs, then DDP before ZeRO-2 before ZeRO-3, checkpointing last. A
    colocated vLLM engine's share of each GPU is left to it."""
    sizes = (gpu_gib,) if gpu_gib else GPU_SIZES_GIB
    for size in sizes:
        for n in (1, 2, 4, 8):
            for strategy in ("ddp", "zero2", "zero3") if n > 1 else ("ddp",):
                for gc in (False, True):
                    p = plan_recipe(recipe, shape, strategy, n, gc)
                    if p.total <= size * GIB * (HEADROOM - vllm_share(recipe)):
                        how = f"{n} x {size:g} GiB GPU" + ("" if n == 1 else f"s, --num-processes {n} "
                                                          f"--accelerate-config {strategy}")
                        gc_note = " with model.gradient_checkpointing: true" if gc else ""
                        return f"{how}{gc_note} ({p.total / GIB:.1f} GiB per GPU planned)"
    return (f"does not fit 8 x {sizes[-1]:g} GiB GPUs: use LoRA (model.lora), shorter max_completion_length, a "
            "smaller per_device_train_batch_size, or more machines")


def memory_report(recipe, num_gpus: int = 1, strategy: str | None = None, gpu_gib: float | None = None) -> dict:
    shape, note = model_shape(recipe.model.name, recipe.model.lora, recipe.model.dtype)
    strategies = (strategy,) if strategy else (("ddp",) if num_gpus == 1 else STRATEGIES)
    plans = [plan_recipe(recipe, shape, s, num_gpus, gc) for s in strategies for gc in (False, True)]
    return {"model": recipe.model.name, "shape": shape, "plans": plans, "recommendation": recommend(recipe, shape, gpu_gib),
            "notes": [note] if note else []}


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
    lines.append("total = weights + optimizer + reference + sampler + the larger of a step's training (activations + "
                 "the larger of lm_head and gradients) and its generation (kv_cache)")
    if vllm_share(recipe):
        lines.append(f"plus the colocated vLLM engine's {vllm_share(recipe):.0%} of each GPU (its weights and KV cache; "
                     "generation.gpu_memory_utilization), which the recommendation leaves to it")
    lines.append(f"recommendation: {report['recommendation']}")
    lines.append(checkpoint_line(sh, recipe))
    return "\n".join(lines)


def checkpoint_line(shape: Shape, recipe, device: str = "cuda") -> str:
    """The disk a run's checkpoints take (train refuses to start when the disk cannot hold them)."""
    from grpokit.run.safety import checkpoints_at_peak

    each, peak = checkpoint_bytes(shape, recipe.model.dtype, device), checkpoints_at_peak(recipe.train)
    kept = (f", up to {peak} on disk at once (train.save_total_limit {recipe.train.save_total_limit}, save_steps "
            f"{recipe.train.save_steps}): {peak * each / 1e9:.1f} GB") if peak else ""
    return f"checkpoints: about {each / 1e9:.2f} GB each (weights + AdamW's two moments){kept}"
