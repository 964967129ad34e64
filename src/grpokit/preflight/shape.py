"""A model's shape for the memory plan (grpokit.preflight.memory): parameters, layers, heads, vocabulary, LoRA
adapters and the activations autograd saves per token, from its config.json alone for the decoder families whose
layers are known (no torch, transformers or peft imported), else from a forward of the model built on torch's
meta device. Where the config comes from: a local folder, the embedded model's cache, the Hugging Face cache, or
the tables below for the Qwen3 models the shipped recipes name (offline, nothing is downloaded).

Not covered: the plan's arithmetic (grpokit.preflight.memory).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.models import DEFAULT_MODEL_DIRNAME, cache_dir, resolve_model_path

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
ADAPTER_BYTES = 4           # peft keeps LoRA weights (and so their gradients and Adam moments) in float32


def weight_bytes(dtype: str, device: str = "cuda") -> int:
    """Bytes per weight of a recipe's model.dtype on the device it will train on ('auto': grpokit.models)."""
    if dtype == "auto":
        return 2 if device == "cuda" else 4
    return DTYPE_BYTES[dtype]


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
