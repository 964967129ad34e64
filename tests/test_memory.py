"""The memory planner: parameter counts from real configs, how each setting moves each part of the plan, and the
plan against peaks measured by training (benchmarks/results/memory_cpu.json, written by benchmarks/memory_plan.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpokit.cli import main
from grpokit.preflight.memory import GIB, STRATEGIES, memory_report, plan
from grpokit.preflight.shape import EMBEDDED_CONFIG, load_config, read_config, shape_from_config, shape_from_dict
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


@pytest.fixture(scope="module")
def qwen3_shape(qwen3_06b):
    return shape_from_config(qwen3_06b)


# A Qwen3-0.6B full fine-tune on one GPU in bf16: 8 sequences of 512 + 256 tokens a micro-batch and a generation.
BASE = dict(strategy="ddp", num_gpus=1, dtype="bfloat16", beta=0.0, micro_batch=8, generation_batch=8,
            prompt_len=512, completion_len=256, gradient_checkpointing=False)


def planned(shape, **change):
    return plan(shape, **{**BASE, **change})


@pytest.mark.parametrize("change, part, factor", [
    # DDP replicates everything: each of 8 GPUs holds what one GPU holds
    (dict(num_gpus=8), "total", 1),
    # ZeRO-3 and FSDP shard the weights over the GPUs; ZeRO-2 keeps a whole copy on each
    (dict(strategy="zero3", num_gpus=8), "weights", 1 / 8),
    (dict(strategy="fsdp", num_gpus=8), "weights", 1 / 8),
    (dict(strategy="zero2", num_gpus=8), "weights", 1),
    # ZeRO-2 shards the gradients
    (dict(strategy="zero2", num_gpus=8), "gradients", 1 / 8),
    # float32 doubles the weights, their gradients and the KV cache
    (dict(dtype="float32"), "weights", 2),
    (dict(dtype="float32"), "gradients", 2),
    (dict(dtype="float32"), "kv_cache", 2),
    # the KV cache holds every generated sequence; activations every sequence of the micro-batch
    (dict(generation_batch=16), "kv_cache", 2),
    (dict(micro_batch=16), "activations", 2),
    (dict(micro_batch=16), "weights", 1),
])
def test_how_each_setting_moves_the_plan(qwen3_shape, change, part, factor):
    assert getattr(planned(qwen3_shape, **change), part) == pytest.approx(factor * getattr(planned(qwen3_shape), part),
                                                                         rel=1e-6)


def test_sharding_lowers_what_each_gpu_holds(qwen3_shape):
    totals = [planned(qwen3_shape, strategy=s, num_gpus=8).total for s in ("ddp", "zero2", "zero3")]
    assert totals == sorted(totals, reverse=True) and totals[0] > totals[1] > totals[2]
    # ZeRO keeps a float32 master copy with the moments: on one GPU that costs more than AdamW in bf16
    assert planned(qwen3_shape, strategy="zero2").optimizer > planned(qwen3_shape).optimizer


def test_a_kl_penalty_loads_a_reference_copy_sharded_like_the_weights(qwen3_shape):
    assert planned(qwen3_shape).reference == 0
    assert planned(qwen3_shape, beta=0.04).reference == planned(qwen3_shape).weights
    zero3 = planned(qwen3_shape, strategy="zero3", num_gpus=8, beta=0.04)
    assert zero3.reference == zero3.weights


def test_checkpointing_and_the_device_change_the_activations(qwen3_shape):
    full, ckpt = planned(qwen3_shape), planned(qwen3_shape, gradient_checkpointing=True)
    assert ckpt.activations < full.activations / 5  # one layer's input kept per layer, one layer recomputed
    # the attention probabilities count only where SDPA keeps them (the CPU), not under CUDA's fused kernels
    assert planned(qwen3_shape, device="cpu").activations > full.activations


def test_lora_trains_only_the_adapter(qwen3_06b, qwen3_shape):
    lora = planned(shape_from_config(qwen3_06b, LoraConfig(r=16)), beta=0.04)
    full = planned(qwen3_shape, beta=0.04)
    # the frozen base is held whole; the adapter's gradients and moments are a sliver of a full fine-tune's, and the
    # reference is the base itself (the adapter switched off); the frozen head needs no weight gradient
    assert lora.weights > full.weights
    assert lora.gradients < full.gradients / 20 and lora.optimizer < full.optimizer / 20
    assert (lora.reference, full.reference > 0) == (0, True)
    assert lora.lm_head < full.lm_head


def test_generation_and_the_update_do_not_hold_memory_at_once(qwen3_shape):
    # the KV cache is freed before the backward pass: a larger cache moves the total only once it outgrows the step
    small, larger = (planned(qwen3_shape, gradient_checkpointing=True, generation_batch=g) for g in (4, 8))
    assert larger.kv_cache > small.kv_cache and larger.total == small.total
    huge = planned(qwen3_shape, gradient_checkpointing=True, generation_batch=64)
    assert huge.total > larger.total
    assert 5 < larger.total / GIB < 6  # ~5.3 GiB: a 24 GiB card holds a Qwen3-0.6B full fine-tune with checkpointing


MEASURED = json.loads((REPO / "benchmarks" / "results" / "memory_cpu.json").read_text())


@pytest.mark.parametrize("result", MEASURED["results"], ids=lambda r: r["variant"])
def test_plan_is_within_a_quarter_of_a_measured_peak(result, embedded_model_dir):
    """The plan for the settings of a measured run (benchmarks/memory_plan.py: grpokit training, the demo recipe's
    model and batch on the CPU) is within 25% of the peak that run reached. Rerun the benchmark after changing the
    planner or TRL, and commit its JSON."""
    from transformers import AutoConfig

    st = result["settings"]
    lora = LoraConfig(r=st["lora_r"], alpha=2 * st["lora_r"]) if st["lora_r"] else None
    shape = shape_from_config(AutoConfig.from_pretrained(embedded_model_dir), lora, st["dtype"], st["device"])
    p = plan(shape, strategy="ddp", num_gpus=1, dtype=st["dtype"], beta=st["beta"], micro_batch=st["micro_batch"],
             generation_batch=st["generation_batch"], prompt_len=st["prompt_len"], completion_len=st["completion_len"],
             gradient_checkpointing=st["gradient_checkpointing"], device=st["device"])
    ratio = p.total / result["measured_bytes"]
    assert 0.75 <= ratio <= 1.25, f"planned {p.total / GIB:.2f} GiB, measured {result['measured_bytes'] / GIB:.2f} GiB"


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


def test_a_vllm_recipe_is_planned_without_vllm_installed(capsys):
    """A plan is made on a laptop for the GPU machines: a colocated-vLLM recipe is planned (not refused because
    vLLM is missing here), with the engine's share of each GPU left out of what training may fill."""
    recipe = str(REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml")
    assert main(["preflight", recipe, "--memory", "--set", "generation.backend=vllm",
                 "--set", "generation.gpu_memory_utilization=0.4"]) == 0
    out = capsys.readouterr().out
    assert "the colocated vLLM engine's 40% of each GPU" in out and "recommendation: " in out


# ---------------------------------------------------------------- the plan from config.json alone (no torch)
RECIPES = sorted(p.name for p in (REPO / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("name", RECIPES)
def test_the_config_json_plan_is_the_meta_forward_plan_on_every_shipped_recipe(name):
    """The plan `preflight --memory` makes without torch (shape_from_dict on config.json) is, number for number,
    the one the meta model measures (parameters by peft/transformers, activations by saved-tensor hooks)."""
    from dataclasses import asdict

    from grpokit.recipe import load_recipe

    recipe = load_recipe(REPO / "recipes" / name, use="plan")
    m = recipe.model
    fast = shape_from_dict(read_config(m.name), m.lora, m.dtype)
    assert fast is not None, f"{m.name}: its family should be counted from config.json"
    meta = shape_from_config(load_config(m.name), m.lora, m.dtype)
    assert asdict(fast) == asdict(meta)
    report = memory_report(recipe, num_gpus=8)
    assert asdict(report["shape"]) == asdict(meta)
    for p in report["plans"]:
        same = plan(meta, strategy=p.strategy, num_gpus=8, dtype=m.dtype, beta=recipe.train.beta,
                    micro_batch=recipe.train.per_device_train_batch_size,
                    generation_batch=recipe.train.per_device_train_batch_size * recipe.train.gradient_accumulation_steps,
                    prompt_len=recipe.train.max_prompt_length or 512, completion_len=recipe.train.max_completion_length,
                    gradient_checkpointing=p.gradient_checkpointing,
                    generations=recipe.train.num_generations if recipe.train.shared_prefix else None)
        assert asdict(p) == asdict(same)
    assert {p.strategy for p in report["plans"]} == set(STRATEGIES)


FAMILY_CASES = [
    # (model_type, config extras, dtype, lora dropout or None): every adapter kind and weight size once on
    # Qwen3 and Llama, the other families on two; odd sizes so that no dimension stands in for another
    *[("qwen3", {"attention_bias": True}, dt, d) for dt in ("float32", "bfloat16") for d in (None, 0.0, 0.1)],
    *[("llama", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False}, dt, d)
      for dt in ("float32", "bfloat16") for d in (None, 0.0, 0.1)],
    ("mistral", {}, "float32", None), ("mistral", {}, "bfloat16", 0.1),
    ("qwen2", {}, "bfloat16", None), ("qwen2", {}, "float32", 0.0),
]


@pytest.mark.parametrize("model_type, extra, dtype, dropout", FAMILY_CASES)
def test_the_config_json_shape_is_the_meta_forward_shape_for_each_family(model_type, extra, dtype, dropout):
    from dataclasses import asdict

    from transformers import AutoConfig

    cfg = dict(model_type=model_type, hidden_size=80, num_hidden_layers=3, num_attention_heads=5,
               num_key_value_heads=1, head_dim=24, intermediate_size=136, vocab_size=97, **extra)
    lora = None if dropout is None else LoraConfig(r=4, dropout=dropout)
    fast = shape_from_dict(cfg, lora, dtype)
    assert asdict(fast) == asdict(shape_from_config(AutoConfig.for_model(**cfg), lora, dtype))


def test_other_architectures_and_partial_lora_take_the_meta_forward():
    # gpt2 is not a DECODERS family; LoRA on q/v only saves other activations than the table's all-linear one
    assert shape_from_dict({"model_type": "gpt2", "n_embd": 64}) is None
    assert shape_from_dict(read_config("Qwen/Qwen3-0.6B"), LoraConfig(r=16, target_modules=["q_proj"])) is None


def test_the_embedded_model_is_planned_before_its_conversion(embedded_model_dir, tmp_path, monkeypatch):
    import json as _json

    converted = _json.loads((embedded_model_dir / "config.json").read_text())
    assert {k: converted[k] for k in EMBEDDED_CONFIG} == EMBEDDED_CONFIG
    monkeypatch.setenv("GRPOKIT_CACHE", str(tmp_path))  # nothing converted here: the table answers
    assert read_config("default") == EMBEDDED_CONFIG


def test_config_json_from_a_folder_and_the_hub_cache(tmp_path, monkeypatch, embedded_model_dir):
    import huggingface_hub.constants

    assert read_config(str(embedded_model_dir))["hidden_size"] == 576
    snapshot = tmp_path / "models--someorg--tiny" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    (tmp_path / "models--someorg--tiny" / "refs").mkdir()
    (tmp_path / "models--someorg--tiny" / "refs" / "main").write_text("0123abc")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert read_config("someorg/tiny") == {"model_type": "llama", "hidden_size": 64}
    assert read_config("someorg/not-downloaded") is None


def test_a_model_whose_config_is_not_here_is_refused_with_the_download(capsys, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text((REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml").read_text()
                      .replace("name: Qwen/Qwen3-4B", "name: someorg/never-downloaded-7b"))
    assert main(["preflight", str(recipe), "--memory"]) == 2
    err = capsys.readouterr().err
    assert "model.name someorg/never-downloaded-7b" in err and "hf download someorg/never-downloaded-7b config.json" in err


@pytest.mark.parametrize("recipe", ["qwen3-4b-gsm8k-lora.yaml", "smollm2-arithmetic.yaml"])
def test_preflight_memory_imports_no_training_library(recipe):
    """The plan answers from config.json: torch, transformers, peft and TRL are never imported (they cost
    seconds; the meta forward only runs for architectures outside DECODERS)."""
    import subprocess
    import sys

    code = ("import sys; from grpokit.cli import main; rc = main(['preflight', sys.argv[1], '--memory']); "
            "print('IMPORTED', sorted(m for m in ('torch', 'transformers', 'peft', 'trl') if m in sys.modules)); "
            "sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "recipes" / recipe)], capture_output=True,
                         text=True, timeout=120, env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, out.stderr
    assert "recommendation: " in out.stdout and "IMPORTED []" in out.stdout


def test_the_planned_checkpoint_size_is_what_training_writes(tmp_path, tiny_model_dir):
    # The weights and the optimizer's state dominate a checkpoint; the plan says their size before training.
    from conftest import CHARS, make_recipe

    from grpokit.preflight.memory import checkpoint_bytes
    from grpokit.preflight.shape import model_shape

    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], max_steps=1)
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit",
                 "--set", "model.dtype=float32"]) == 0
    ck = tmp_path / "run" / "checkpoints" / "checkpoint-1"
    written = (ck / "model.safetensors").stat().st_size + (ck / "optimizer.pt").stat().st_size
    shape, _ = model_shape(str(tiny_model_dir), None, "float32", "cpu")
    assert checkpoint_bytes(shape, "float32", "cpu") == pytest.approx(written, rel=0.05)


# ---------------------------------------------------------------- model.gradient_checkpointing: auto
# (recipe, memory of the device in GiB, on?) — on only where the plan without checkpointing exceeds 85% of it.
CHECKPOINTING_CASES = [
    ("recipes/qwen3-4b-gsm8k-lora.yaml", 24, True),     # 2 x 2560-token LoRA sequences plan ~64 GiB without it
    ("recipes/qwen3-4b-gsm8k-lora.yaml", 80, False),    # ... their prompt once (train.shared_prefix): under 85% of 80
    ("recipes/qwen3-4b-gsm8k-lora.yaml", 141, False),   # an H200 holds it: no recomputation
    ("recipes/qwen3-0.6b-base-gsm8k.yaml", 80, False),
]


@pytest.mark.parametrize("path,gib,on", CHECKPOINTING_CASES, ids=[f"{Path(c[0]).stem}-{c[1]}GiB" for c in CHECKPOINTING_CASES])
def test_auto_checkpointing_is_on_only_where_the_plan_needs_it(path, gib, on):
    from grpokit.preflight.memory import checkpointing_of, plan_recipe
    from grpokit.preflight.shape import model_shape
    from grpokit.recipe import load_recipe

    recipe = load_recipe(REPO / path, ["model.gradient_checkpointing=auto"])
    got, why = checkpointing_of(recipe, "cuda", memory=(gib * GIB, "GPU memory"))
    need = plan_recipe(recipe, model_shape(recipe.model.name, recipe.model.lora, recipe.model.dtype)[0], "ddp", 1,
                       False).total
    assert got is on and (need > 0.85 * gib * GIB) is on, why
    assert why == (f"model.gradient_checkpointing: auto; the memory plan without it, {need / GIB:.1f} GiB, "
                   f"{'does not fit' if on else 'fits'} 85% of the {gib:.1f} GiB GPU memory on this cuda"), why
    for explicit in (True, False):  # a recipe's own choice is kept, whatever the plan says
        fixed = load_recipe(REPO / path, [f"model.gradient_checkpointing={str(explicit).lower()}"])
        assert checkpointing_of(fixed, "cuda", memory=(gib * GIB, "GPU memory"))[0] is explicit


def test_training_says_what_auto_decided_and_the_folder_keeps_auto(tmp_path, tiny_model_dir, capsys):
    import yaml

    from conftest import CHARS, make_recipe

    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], max_steps=1)
    assert main(["train", str(recipe), "--skip-audit", "--output-dir", str(tmp_path / "run"),
                 "--set", "model.gradient_checkpointing=auto"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "gradient checkpointing off (model.gradient_checkpointing: auto; the memory plan without it," in out
    assert "GiB RAM available on this cpu)" in out
    config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert config["model"]["gradient_checkpointing"] == "auto"  # decided again on the machine that resumes it
    import torch

    args = torch.load(tmp_path / "run" / "checkpoints" / "checkpoint-1" / "training_args.bin", weights_only=False)
    assert args.gradient_checkpointing is False  # what TRL trained with
