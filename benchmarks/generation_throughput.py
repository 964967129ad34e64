"""Generated tokens/s of grpokit's generation backends at a recipe's training batch: hf generate vs vLLM.

    python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml --backends hf
    python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml --backends hf \
        --set train.per_device_train_batch_size=32    # 4 prompts x 8 in one call: selection.refill_upfront's cost
    .venv-vllm/bin/python benchmarks/generation_throughput.py recipes/smollm2-arithmetic.yaml --backends hf,vllm

One training step's generation, the way the recipe samples it: per_device_train_batch_size completions
(prompts x num_generations) of max_completion_length new tokens at the recipe's temperature/top_p, on
the recipe's training prompts and initial model, through `grpokit.generation.complete` (so the same ids,
stop ids and decoding for both backends). The first call per backend is warm-up (for vLLM it builds
the engine: reported as start_s); then `--repeats` calls on other prompts are timed. Tokens counted are
the completions' ids (stop id included: the engine generated it). vLLM needs `.venv-vllm` on CPU
(scripts/install_vllm_cpu.sh); `--gpu-memory-utilization` is then the share of system memory for its cache.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit


def measure(backend: str, model, tokenizer, prompt_ids: list[list[int]], params, per_call: int, repeats: int,
            options: dict) -> dict:
    from grpokit.generation import complete

    calls = [prompt_ids[i * per_call:(i + 1) * per_call] for i in range(repeats + 1)]
    # All of a step's rows in one generate call, as TRL does in training (complete's default sizes its calls by a
    # token budget, grpokit.generation.rows_per_call).
    rows = per_call * params.n
    t = time.perf_counter()
    complete(model, tokenizer, calls[0], params, backend=backend, backend_options=options, batch_size=rows,
             progress=False)
    start = time.perf_counter() - t
    tokens, seconds = 0, 0.0
    for ids in calls[1:]:
        t = time.perf_counter()
        groups = complete(model, tokenizer, ids, params, backend=backend, backend_options=options, batch_size=rows,
                          progress=False)
        seconds += time.perf_counter() - t
        tokens += sum(len(c.ids) for g in groups for c in g)
    return dict(backend=backend, start_s=round(start, 1), timed_calls=repeats, tokens=tokens,
                seconds=round(seconds, 2), tokens_per_s=round(tokens / seconds, 1),
                completions_per_call=per_call * params.n)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe")
    p.add_argument("--backends", default="hf,vllm")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.15)
    p.add_argument("--max-model-len", type=int, default=512)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override the recipe, e.g. train.per_device_train_batch_size=32 (rows per call)")
    args = p.parse_args(argv)

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
    import torch

    print(json.dumps(dict(recipe=args.recipe, model=path, dtype=str(model.dtype), threads=torch.get_num_threads())))
    for backend in args.backends.split(","):
        options = {} if backend == "hf" else dict(gpu_memory_utilization=args.gpu_memory_utilization,
                                                   max_model_len=args.max_model_len)
        print(json.dumps(measure(backend, model, tokenizer, prompt_ids, params, per_call, args.repeats, options)),
              flush=True)
    return 0


if __name__ == "__main__":  # vLLM starts its engine with spawn: the guard is required
    sys.exit(main())
