"""The generation benchmarks run on a tiny model and say what their figures rest on: the fast top-p path draws
the very samples transformers' warper draws, and a float32 sampler's log-probs are the trainer's."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "recipes" / "smollm2-arithmetic.yaml"


def _tiny_recipe(tmp_path: Path, model_dir: Path) -> Path:
    raw = yaml.safe_load(DEMO.read_text())
    raw["data"]["train"] = str(REPO / "src" / "grpokit" / "datasets" / "arithmetic" / "train.jsonl")
    raw["data"].pop("eval", None)
    raw["model"] = {"name": str(model_dir)}
    raw["train"].update(num_generations=4, per_device_train_batch_size=8, max_completion_length=8)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _bench(name: str):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def _rows(out: str) -> dict:
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["variant"]: r for r in rows if "variant" in r}


def test_generation_throughput_fast_top_p_draws_the_warpers_samples(tmp_path, tiny_model_dir, capsys):
    recipe = _tiny_recipe(tmp_path, tiny_model_dir)
    assert _bench("generation_throughput").main([str(recipe), "--backends",
                                                 "hf-warper,hf,hf-nucleus,hf-bf16,hf-bf16-eager", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert set(rows) == {"hf-warper", "hf", "hf-nucleus", "hf-bf16", "hf-bf16-eager"}
    # The gap a bf16 sampler opens against the float32 trainer is printed beside its speed; none for float32.
    assert rows["hf-bf16"]["logprob_gap_mean"] > 0 and "logprob_gap_mean" not in rows["hf"]
    assert rows["hf"]["same_as_first"] == 1.0  # the fast top-p path drew the warper's very samples
    assert all(r["tokens"] > 0 and r["tokens_per_s"] > 0 for r in rows.values())
    for v in ("hf", "hf-bf16"):  # each speed-up is its tokens/s over the first variant's, as printed
        want = rows[v]["tokens_per_s"] / rows["hf-warper"]["tokens_per_s"]
        assert rows[v]["vs_first"] == pytest.approx(want, rel=0.05, abs=0.01), (v, rows)
    # the roofline of a token step for each float32 variant, its measured step against the bound
    roofline = [line for line in out.splitlines() if "roofline of a token step at 8 rows" in line]
    assert [line.split(":")[0] for line in roofline] == ["hf-warper", "hf", "hf-nucleus"], out
    assert all("x the bound" in line for line in roofline)


@pytest.mark.parametrize("tied", [False, True], ids=["untied: the input embedding's rows only", "tied: read once"])
def test_the_roofline_counts_a_token_steps_bytes_and_flops(tiny_model_dir, tied):
    import torch
    from transformers import AutoModelForCausalLM

    roofline = _bench("roofline")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    if tied:  # the embedded SmolLM2 ties its embedding and LM head: the LM head reads the matrix whole
        model.lm_head.weight = model.get_input_embeddings().weight
    c, rows, context = model.config, 4, 10
    cost = roofline.token_step(model, rows=rows, context=context)
    head_dim = c.hidden_size // c.num_attention_heads
    embedding = model.get_input_embeddings().weight.numel()
    everything = sum(p.numel() for p in model.parameters())  # parameters() yields a shared matrix once
    weights = everything if tied else everything - embedding + rows * c.hidden_size
    matrices = sum(p.numel() for p in model.parameters() if p.dim() == 2) - (0 if tied else embedding)
    assert cost["weight_bytes"] == 4 * weights  # float32
    assert cost["kv_bytes"] == 4 * 2 * c.num_hidden_layers * rows * c.num_key_value_heads * head_dim * context
    assert cost["flops"] == 2 * rows * matrices + 4 * rows * c.num_hidden_layers * c.num_attention_heads * head_dim * context
    # twice the bandwidth halves a memory-bound step's bound
    slow, fast = roofline.bound(cost, 1.0, 1e6), roofline.bound(cost, 2.0, 1e6)
    assert slow["bound_by"] == "memory" and slow["bound_ms"] == pytest.approx(2 * fast["bound_ms"], rel=1e-3)


def test_generation_throughput_refuses_an_unknown_variant(tmp_path, tiny_model_dir, capsys):
    recipe = _tiny_recipe(tmp_path, tiny_model_dir)
    assert _bench("generation_throughput").main([str(recipe), "--backends", "hf,fast"]) == 2
    assert "unknown variant(s) fast" in capsys.readouterr().err


def test_logprob_gap_is_zero_for_float32_and_not_for_bf16(tmp_path, tiny_model_dir, capsys):
    recipe = _tiny_recipe(tmp_path, tiny_model_dir)
    assert _bench("logprob_gap").main([str(recipe), "--calls", "1"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["fp32"]["mean_abs_gap"] < 1e-4 and rows["fp32"]["tokens"] > 0
    assert rows["bf16-weights/fp32"]["mean_abs_gap"] > rows["fp32"]["mean_abs_gap"]


def test_the_token_step_profile_accounts_for_every_forward_and_the_whole_call(tiny_model_dir):
    """benchmarks/token_profile.py: one profiled decoding call; the token steps it counts are the loop's own forwards
    (a call of N tokens runs N - 1 after the prefill), its parts add up to the call, and the matrix products are
    found inside the forward."""
    import torch

    from grpokit import models
    from grpokit.generation.decode import Decoding, decode

    profiler = _bench("token_profile")
    model = models.load_model(str(tiny_model_dir), "float32")
    decoding = Decoding(max_new_tokens=6, stop_ids=(), pad_id=0, temperature=0.7, top_p=0.9)
    prompts = [[1, 5, 9, 12]] * 4 + [[1, 7, 3]] * 4
    done = []
    torch.manual_seed(0)
    profile = profiler.profile_call(lambda: done.append(decode(model, prompts, decoding)))
    assert profile["token_steps"] == done[0].steps - 1 == 5
    parts = profiler.breakdown(profile)
    call_ms = profile["ranges"][profiler.CALL]
    assert sum(parts.values()) * profile["token_steps"] == pytest.approx(call_ms, rel=1e-6)
    assert parts["forward: matmul"] > 0 and parts["prefill"] > 0 and parts["sampling and the loop: ops"] > 0
    assert all(v >= 0 for k, v in parts.items() if "outside" not in k), parts


def test_generation_throughput_profiles_the_loops_variants_only(tmp_path, tiny_model_dir, capsys):
    recipe = _tiny_recipe(tmp_path, tiny_model_dir)
    assert _bench("generation_throughput").main([str(recipe), "--backends", "hf-warper,hf,hf-nucleus", "--repeats",
                                                 "1", "--no-roofline", "--profile"]) == 0
    out = capsys.readouterr().out
    profiled = [json.loads(line) for line in out.splitlines() if line.startswith("{") and "parts_ms" in line]
    assert [p["variant"] for p in profiled] == ["hf", "hf-nucleus"]  # transformers' generate has no loop to mark
    for p in profiled:
        assert p["token_steps"] > 0 and p["parts_ms"]["forward: matmul"] > 0 and p["unprofiled_ms"] > 0
        assert sum(p["parts_ms"].values()) == pytest.approx(p["profiled_ms"], abs=0.1)
