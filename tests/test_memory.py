"""The memory planner: parameter counts from real configs and per-GPU bytes, each checked against numbers worked
out by hand from the formulas in grpokit.preflight.memory's docstring."""
from __future__ import annotations

from pathlib import Path

import pytest

from grpokit.cli import main
from grpokit.preflight.memory import GIB, plan, shape_from_config
from grpokit.recipe.schema import LoraConfig

REPO = Path(__file__).resolve().parents[1]
# Qwen3-0.6B by hand: embeddings 151936 x 1024 = 155,582,464 (tied: the head shares them); per layer
# q 1024x2048 + k 1024x1024 + v 1024x1024 + o 2048x1024 = 6,291,456, MLP 3 x 1024 x 3072 = 9,437,184,
# norms 2 x 1024 + q/k norms 2 x 128 = 2,304 -> 15,730,944 x 28 = 440,466,432; final norm 1,024.
QWEN3_06B_PARAMS = 596_049_920
# LoRA r=16 on every Linear but the head: 16 x (in + out) per projection, per layer
# q 16x3072 + k 16x2048 + v 16x2048 + o 16x3072 + gate/up/down 3 x 16x4096 = 360,448 -> x 28
QWEN3_06B_LORA16 = 10_092_544
# SmolLM2-135M (the embedded model) by hand: 49152 x 576 embeddings (tied) + 30 x 3,540,096 + 576
EMBEDDED_PARAMS = 134_515_008


@pytest.fixture(scope="module")
def qwen3_06b():
    from transformers import Qwen3Config

    return Qwen3Config(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True)


def test_parameter_counts(qwen3_06b, embedded_model_dir):
    from transformers import AutoConfig

    shape = shape_from_config(qwen3_06b)
    assert (shape.params, shape.lora_params, shape.layers, shape.kv_heads, shape.head_dim) == (
        QWEN3_06B_PARAMS, None, 28, 8, 128)
    assert shape_from_config(qwen3_06b, LoraConfig(r=16)).lora_params == QWEN3_06B_LORA16
    # only q and v: 16 x (1024 + 2048) + 16 x (1024 + 1024) per layer
    assert shape_from_config(qwen3_06b, LoraConfig(r=16, target_modules=["q_proj", "v_proj"])).lora_params == 28 * 81_920
    emb = shape_from_config(AutoConfig.from_pretrained(embedded_model_dir))
    assert (emb.params, emb.hidden, emb.layers, emb.kv_heads, emb.head_dim, emb.vocab) == (
        EMBEDDED_PARAMS, 576, 30, 3, 64, 49152)


P = QWEN3_06B_PARAMS
ACTS = 28 * 34 * 768 * 8 * 1024          # 8 sequences of 512 + 256 tokens, no checkpointing = 5,989,466,112
ACTS_CKPT = 28 * 2 * 768 * 8 * 1024 + 34 * 768 * 8 * 1024   # layer inputs + one layer recomputed
LOGITS = 8 * 256 * 151936 * 4            # fp32 logits of the completion tokens = 1,244,659,712
KV = 2 * 28 * 8 * 128 * 768 * 8 * 2      # 8 generated sequences of 768 tokens in bf16 = 704,643,072


@pytest.mark.parametrize("kw, expected", [
    # full fine-tune, one GPU, bf16: 2 + 2 + 12 bytes per parameter (ZeRO paper accounting)
    (dict(strategy="ddp", num_gpus=1), dict(weights=2 * P, gradients=2 * P, optimizer=12 * P, reference=0,
                                           activations=ACTS + LOGITS, kv_cache=KV)),
    # DDP replicates everything: 8 GPUs hold what one does
    (dict(strategy="ddp", num_gpus=8), dict(weights=2 * P, gradients=2 * P, optimizer=12 * P)),
    # ZeRO-2 shards gradients and optimizer state
    (dict(strategy="zero2", num_gpus=8), dict(weights=2 * P, gradients=2 * P // 8, optimizer=12 * P // 8)),
    # ZeRO-3 and FSDP shard the weights too; activations and KV cache are per GPU either way
    (dict(strategy="zero3", num_gpus=8), dict(weights=2 * P // 8, gradients=2 * P // 8, optimizer=12 * P // 8,
                                             activations=ACTS + LOGITS, kv_cache=KV)),
    (dict(strategy="fsdp", num_gpus=8), dict(weights=2 * P // 8, gradients=2 * P // 8, optimizer=12 * P // 8)),
    # gradient checkpointing keeps each layer's input and recomputes one layer at a time
    (dict(strategy="ddp", num_gpus=1, gradient_checkpointing=True), dict(activations=ACTS_CKPT + LOGITS)),
    # beta > 0 loads a reference copy (sharded under ZeRO-3)
    (dict(strategy="ddp", num_gpus=1, beta=0.04), dict(reference=2 * P)),
    (dict(strategy="zero3", num_gpus=8, beta=0.04), dict(reference=2 * P // 8)),
    # float32: 4 + 4 + 8 (no master copy) and activations twice the 16-bit size
    (dict(strategy="ddp", num_gpus=1, dtype="float32"), dict(weights=4 * P, gradients=4 * P, optimizer=8 * P,
                                                            activations=2 * ACTS + LOGITS, kv_cache=2 * KV)),
])
def test_plan_table(qwen3_06b, kw, expected):
    args = dict(dtype="bfloat16", beta=0.0, micro_batch=8, generation_batch=8, prompt_len=512, completion_len=256,
                gradient_checkpointing=False)
    p = plan(shape_from_config(qwen3_06b), **{**args, **kw})
    assert {k: getattr(p, k) for k in expected} == expected


def test_lora_trains_only_the_adapter(qwen3_06b):
    shape = shape_from_config(qwen3_06b, LoraConfig(r=16))
    p = plan(shape, strategy="ddp", num_gpus=1, dtype="bfloat16", beta=0.04, micro_batch=8, generation_batch=8,
             prompt_len=512, completion_len=256, gradient_checkpointing=False)
    L = QWEN3_06B_LORA16
    # frozen base + adapter weights, adapter gradients and Adam state; the reference is the base (adapter off)
    assert (p.weights, p.gradients, p.optimizer, p.reference) == (2 * (P + L), 2 * L, 12 * L, 0)


@pytest.mark.parametrize("recipe, expected", [
    # every shipped Qwen3 recipe is planned offline (the table of Qwen3 sizes) with a recommendation
    ("qwen3-0.6b-base-gsm8k.yaml", "596.0M parameters"),
    ("qwen3-4b-gsm8k-lora.yaml", "4022.5M parameters, LoRA r=16"),
    ("qwen3-14b-gsm8k-lora.yaml", "14768.3M parameters, LoRA r=32"),
    # the embedded model, from its converted folder
    ("smollm2-arithmetic.yaml", "134.5M parameters"),
])
def test_preflight_memory_cli(capsys, recipe, expected):
    assert main(["preflight", str(REPO / "recipes" / recipe), "--memory", "--num-processes", "8"]) == 0
    out = capsys.readouterr().out
    assert expected in out and "zero3 x8" in out and "recommendation: " in out


def test_preflight_memory_one_strategy_and_gpu_size(capsys):
    recipe = str(REPO / "recipes" / "qwen3-14b-gsm8k-lora.yaml")
    assert main(["preflight", recipe, "--memory", "--num-processes", "2", "--accelerate-config", "fsdp",
                 "--gpu-memory", "80"]) == 0
    out = capsys.readouterr().out
    assert "fsdp x2" in out and "ddp x2" not in out and "80 GiB GPU" in out


def test_plan_totals_fit_headroom_logic(qwen3_06b):
    p = plan(shape_from_config(qwen3_06b), strategy="ddp", num_gpus=1, dtype="bfloat16", beta=0.0, micro_batch=8,
             generation_batch=8, prompt_len=512, completion_len=256, gradient_checkpointing=False)
    assert p.total == 16 * P + ACTS + LOGITS + KV
    assert 16 < p.total / GIB < 17  # ~16.3 GiB: a 24 GiB card (at 85%) holds it, a 16 GiB one does not
