"""Generated tokens/s of each generation choice at a recipe's training batch: hf's options, continuous, vLLM.

    python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml     # the CPU-side variants
    python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml --backends hf-warper,hf
    python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml --backends hf \
        --set train.per_device_train_batch_size=32    # 4 prompts x 8 in one call: selection.refill_upfront's cost
    .venv-vllm/bin/python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml --backends hf,vllm

One training step's generation, the way the recipe samples it: per_device_train_batch_size completions
(prompts x num_generations) of max_completion_length new tokens at the recipe's temperature/top_p, on
the recipe's training prompts and initial model, through `grpokit.generation.complete` (so the same ids,
stop ids and decoding for every variant). Variants (`--backends`, comma-separated):

  hf-warper          transformers' generate with its own top_p warper (sorts the vocabulary every token)
  hf-generate        transformers' generate, top_p over the 256 most likely candidates (grpokit.generation.sampling;
                     the default until 2026-12-04, now train.shared_prefix: false)
  hf                 grpokit's decoding loop (grpokit.generation.decode: each distinct prompt prefix prefilled
                     once, finished rows out of the batch), the same top_p, generate's draw over the vocabulary
                     (generation.draw: vocabulary: the warper's very samples)
  hf-nucleus         + the draw over the nucleus only (generation.draw: nucleus, an option: the same
                     distribution, other samples)
  hf-compile         the loop with its token step compiled over its own static cache (generation.compile: true;
                     grpokit.generation.steps; the warm-up call pays the compile)
  hf-compile-nucleus both: the compiled step and the draw over the nucleus only
  hf-static          generate + generation.cache: static
  hf-static-compile  + generation.compile (transformers' torch.compile of its decode step)
  hf-bf16            the default on a bfloat16 copy of the weights (generation only), SDPA attention
  hf-bf16-eager      + eager attention (transformers' matmul + softmax; on some bf16 CPUs faster than SDPA's
                     CPU kernel at a growing KV cache)
  hf-bf16-static     + generation.cache: static
  continuous         generation.backend: continuous (transformers' continuous batching; its KV cache at most 5% of
                     free memory on a CPU: grpokit.generation.backends.continuous_batching)
  continuous-half    + generation.continuous_config: {max_memory_percent: 0.5} (TRL's share, the CPU default
                     until 2026-12-06)
  vllm               grpokit's vLLM backend (needs `.venv-vllm` on the CPU: scripts/install_vllm_cpu.sh;
                     `--gpu-memory-utilization` is then the share of system memory for its cache)

The first call per variant is warm-up (compilation, vLLM's engine start: reported as start_s); then the
variants take turns, `--repeats` rounds of one call each on other prompts, so a change in the machine's speed
reaches every variant alike. Tokens counted are the completions' ids (stop id included: the model generated
it). `same_as_first` is the share of completions identical to the first variant's for the same prompts and
seed (sampled as training samples: 1.0 means the same samples). Last, `--roofline` (on by default): the
roofline of a token step at the call's rows and mean cached positions (benchmarks/roofline.py: bytes read, FLOPs,
the bound at this machine's measured bandwidth and matmul rate), and each float32 variant's measured seconds per
token step (its seconds over the token steps its calls ran, the prefill included) against it. `--profile`: one
more call of each variant that runs grpokit's decoding loop (hf, hf-nucleus, hf-compile, hf-compile-nucleus, the
bf16 ones), under torch.profiler, and where its token step's time went: the matrix products, attention, the other
operators, the forward's time outside operators (Python, dispatch), the prefill, sampling and the loop
(benchmarks/token_profile.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit
from roofline import bandwidth_gb_s, matmul_gflops, print_roofline  # noqa: E402  (beside this script)
from token_profile import print_breakdown, profile_call  # noqa: E402  (beside this script)


VARIANTS = {  # name -> (backend, its options, weights in bfloat16, attention implementation: None = the model's)
    "hf-warper": ("hf", {"top_p_candidates": 0, "shared_prefix": False}, False, None),
    "hf-generate": ("hf", {"shared_prefix": False}, False, None),
    "hf": ("hf", {}, False, None),
    "hf-nucleus": ("hf", {"draw": "nucleus"}, False, None),
    "hf-compile": ("hf", {"compile": True}, False, None),
    "hf-compile-nucleus": ("hf", {"compile": True, "draw": "nucleus"}, False, None),
    "hf-static": ("hf", {"cache": "static"}, False, None),
    "hf-static-compile": ("hf", {"cache": "static", "compile": True}, False, None),
    "hf-bf16": ("hf", {}, True, None),
    "hf-bf16-eager": ("hf", {}, True, "eager"),
    "hf-bf16-static": ("hf", {"cache": "static"}, True, None),
    "continuous": ("continuous", {}, False, None),
    "continuous-half": ("continuous", {"continuous_config": {"max_memory_percent": 0.5}}, False, None),
    "vllm": ("vllm", {}, False, None),
}


def call(variant: str, model, tokenizer, ids, params, rows: int, options: dict):
    from grpokit.generation import complete

    backend, own, _, _ = VARIANTS[variant]
    # All of a step's rows in one generate call, as TRL does in training (complete's default sizes its calls by a
    # token budget, grpokit.generation.rows_per_call).
    t = time.perf_counter()
    groups = complete(model, tokenizer, ids, params, backend=backend, backend_options={**own, **options},
                      batch_size=rows, progress=False)
    return time.perf_counter() - t, [[c.ids for c in g] for g in groups]


def logprob_gaps(trainer_model, sampler_model, tokenizer, prompt_ids, groups, params) -> list[float]:
    """|log pi_trainer - log pi_sampler| of every completion token, both by a full forward pass of prompt +
    completion with logits / temperature (TRL's rule); the sampler's recorded log-probs in training are its cached
    decode's, which the benchmark of the gap (benchmarks/logprob_gap.py) compares with these."""
    import torch

    out = []
    for prompt, group in zip(prompt_ids, groups):
        for completion in group:  # its token ids
            ids = torch.tensor([list(prompt) + list(completion)])
            with torch.no_grad():
                lp = [torch.log_softmax(m(ids).logits[0, len(prompt) - 1:-1].float() / params.temperature, -1)
                      for m in (trainer_model, sampler_model)]
            tok = ids[0, len(prompt):].unsqueeze(1)
            out += (lp[0].gather(1, tok) - lp[1].gather(1, tok)).abs().squeeze(1).tolist()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe")
    p.add_argument("--backends", default="hf-warper,hf-generate,hf,hf-static,hf-bf16,continuous",
                   help="variants, comma-separated (the first is the reference); see the module docstring "
                   "(hf-static-compile is left out by default: on a CPU it recompiles for every prompt length)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.15)
    p.add_argument("--max-model-len", type=int, default=512)
    p.add_argument("--no-roofline", dest="roofline", action="store_false",
                   help="skip the roofline (measuring the bandwidth and matmul rate takes a few seconds)")
    p.add_argument("--profile", action="store_true",
                   help="profile one more call of each variant that runs grpokit's decoding loop: where a token "
                   "step's time goes (benchmarks/token_profile.py)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override the recipe, e.g. train.per_device_train_batch_size=32 (rows per call)")
    args = p.parse_args(argv)
    variants = args.backends.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2

    from grpokit import models
    from grpokit.data import load_datasets
    from grpokit.generation import SamplingParams
    from grpokit.recipe import load_recipe
    from grpokit.task import template_of

    recipe = load_recipe(args.recipe, args.overrides)
    t = recipe.train
    path = models.resolve_model_path(recipe.model.name)
    tokenizer, model = models.load_tokenizer(path), models.load_model(path, recipe.model.dtype)
    template = template_of(recipe)
    per_call = max(1, t.per_device_train_batch_size // t.num_generations)
    rows = load_datasets(recipe)[0][:per_call * (args.repeats + 1)]
    prompt_ids = [template.encode(tokenizer, template.build(r["question"])) for r in rows]
    params = SamplingParams(max_tokens=t.max_completion_length, n=t.num_generations, temperature=t.temperature,
                            top_p=t.top_p, seed=t.seed)
    import copy

    import torch

    print(json.dumps(dict(recipe=args.recipe, model=path, dtype=str(model.dtype), threads=torch.get_num_threads())))
    copies = {}  # (bf16, attention) -> the model that variant samples with
    for v in variants:
        _, _, in_bf16, attn = VARIANTS[v]
        if (in_bf16, attn) not in copies:
            copies[(in_bf16, attn)] = model if (in_bf16, attn) == (False, None) else copy.deepcopy(model)
            if in_bf16:
                copies[(in_bf16, attn)].to(torch.bfloat16)
            if attn:
                copies[(in_bf16, attn)].set_attn_implementation(attn)

    def model_of(v):
        return copies[VARIANTS[v][2:4]]
    calls = [prompt_ids[i * per_call:(i + 1) * per_call] for i in range(args.repeats + 1)]
    rows_per_call, result, outputs, gaps = per_call * params.n, {}, {}, {}
    steps: dict[str, int] = {}  # token steps run per variant: each call decodes until its longest completion ends
    for v in variants:  # warm-up: compilation, engine start
        options = dict(gpu_memory_utilization=args.gpu_memory_utilization, max_model_len=args.max_model_len) \
            if VARIANTS[v][0] == "vllm" else {}
        seconds, _ = call(v, model_of(v), tokenizer, calls[0], params, rows_per_call, options)
        result[v] = dict(variant=v, start_s=round(seconds, 1), tokens=0, seconds=0.0, options=options)
        outputs[v] = []
    for ids in calls[1:]:  # the variants take turns on each prompt set
        for v in variants:
            seconds, done = call(v, model_of(v), tokenizer, ids, params, rows_per_call, result[v]["options"])
            result[v]["seconds"] += seconds
            result[v]["tokens"] += sum(len(c) for g in done for c in g)
            outputs[v] += [c for g in done for c in g]
            steps[v] = steps.get(v, 0) + max(len(c) for g in done for c in g)
            if VARIANTS[v][2]:  # the gap the trainer sees: its float32 log-probs against the sampler's, per token
                gaps.setdefault(v, []).extend(logprob_gaps(model, model_of(v), tokenizer, ids, done, params))
    first = outputs[variants[0]]
    for v in variants:
        r = result[v]
        r.update(tokens_per_s=round(r["tokens"] / r["seconds"], 1), seconds=round(r["seconds"], 2),
                 completions_per_call=rows_per_call, timed_calls=args.repeats,
                 same_as_first=round(sum(a == b for a, b in zip(outputs[v], first)) / len(first), 3),
                 vs_first=round((r["tokens"] / r["seconds"]) / (result[variants[0]]["tokens"] /
                                                                result[variants[0]]["seconds"]), 2))
        r.pop("options")
        if v in gaps:  # mean |log pi_trainer - log pi_sampler| over the completions' tokens, and its 99th percentile
            g = sorted(gaps[v])
            r.update(logprob_gap_mean=round(sum(g) / len(g), 4), logprob_gap_p99=round(g[int(0.99 * (len(g) - 1))], 3))
        print(json.dumps(r), flush=True)
    if args.roofline:
        rates = dict(gb_s=bandwidth_gb_s(), gflop_s=max(matmul_gflops().values()))
        timed = [p for c in calls[1:] for p in c]
        context = sum(map(len, timed)) / len(timed) + sum(map(len, first)) / len(first) / 2
        for v in variants:
            if not VARIANTS[v][2] and VARIANTS[v][0] != "vllm":  # the float32 model in this process
                print(f"{v}: ", end="")
                print_roofline(model, rows_per_call, context, result[v]["seconds"] / steps[v], rates)
    if args.profile:
        for v in variants:
            backend, own = VARIANTS[v][:2]
            if backend != "hf" or own.get("shared_prefix") is False or "cache" in own:
                continue  # transformers' generate, not grpokit's loop: nothing of the loop's to mark
            profile = profile_call(lambda v=v: call(v, model_of(v), tokenizer, calls[1], params, rows_per_call, {}))
            print(json.dumps(print_breakdown(v, profile, 1e3 * result[v]["seconds"] / steps[v])), flush=True)
    return 0


if __name__ == "__main__":  # vLLM starts its engine with spawn: the guard is required
    sys.exit(main())
