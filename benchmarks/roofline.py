"""The roofline of a decoding token step: the bytes it reads and the FLOPs it does at a batch, against this
machine's measured memory bandwidth and matmul rate, and the time and tokens/s they bound it to.

    python benchmarks/roofline.py recipes/smollm2-arithmetic.yaml            # the recipe's model and batch
    python benchmarks/roofline.py RECIPE --rows 16 --context 120             # another batch / cache length

    from roofline import print_roofline           # as benchmarks/step_breakdown.py and generation_throughput.py do
    print_roofline(model, rows=16, context=120, seconds_per_step=None)

One token step of `rows` rows whose KV caches hold `context` positions on average (prompt + half the completion,
as printed by the callers) reads (docs/measurements.md "The roofline of a token step" has the method):

  weights   every parameter tensor once (a tied embedding and LM head once: the LM head reads it whole), except
            an untied input embedding, of which only the rows' tokens are read
  KV cache  2 (keys, values) x layers x rows x kv_heads x head_dim x context elements
  FLOPs     2 x rows x (the weights of every matrix product, the LM head included)
            + 4 x rows x layers x heads x head_dim x context (attention's scores and its weighted sum)

and the bound is max(bytes / bandwidth, FLOPs / matmul rate): a step cannot be faster than reading what it reads
nor than multiplying what it multiplies. Bandwidth is measured as a sum over a float32 tensor far larger than the
caches (read only, all threads); the matmul rate as the best fp32 `torch.matmul` of square sizes up to 2048
(`matmul_gflops`). Both in this process, with its thread count.

Not covered: where the time over the bound goes (Python and dispatch, the draw, cache growth: the callers' timings
against this bound say how much there is, not what it is), activations' traffic (small at a token step), bf16.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

_MATMUL_SIZES = (512, 1024, 2048)  # from small (overhead-bound) to big enough to reach the BLAS plateau
_BANDWIDTH_BYTES = 512 * 2**20  # far past the last-level cache of these machines: a read from memory


def matmul_gflops(sizes=_MATMUL_SIZES, min_seconds: float = 1.0) -> dict[int, float]:
    """fp32 torch.matmul GFLOP/s per square size (2*n^3 FLOPs each), best of repeated timings."""
    out = {}
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.matmul(a, b)  # warm-up: thread pool, allocator
        best, spent = 0.0, 0.0
        while spent < min_seconds:
            t = time.perf_counter()
            torch.matmul(a, b)
            dt = time.perf_counter() - t
            spent += dt
            best = max(best, 2 * n**3 / dt / 1e9)
        out[n] = best
    return out


def bandwidth_gb_s(nbytes: int = _BANDWIDTH_BYTES, min_seconds: float = 1.0) -> float:
    """GB/s read from memory: the best of repeated sums over a float32 tensor of `nbytes`."""
    x = torch.ones(nbytes // 4)
    x.sum()  # warm-up: pages touched, thread pool
    best, spent = 0.0, 0.0
    while spent < min_seconds:
        t = time.perf_counter()
        x.sum()
        dt = time.perf_counter() - t
        spent += dt
        best = max(best, nbytes / dt / 1e9)
    return best


def token_step(model, rows: int, context: float) -> dict:
    """Bytes read and FLOPs of one token step of `model` at `rows` rows and `context` cached positions (the
    module docstring's formulas)."""
    config = model.config
    inputs = model.get_input_embeddings().weight
    output = model.get_output_embeddings().weight
    tied = inputs.data_ptr() == output.data_ptr()
    seen, weight_bytes, matmul_params = set(), 0, 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        if p is inputs and not tied:  # an untied input embedding: only the rows' tokens are read
            weight_bytes += rows * p.shape[1] * p.element_size()
            continue
        weight_bytes += p.numel() * p.element_size()
        if p.dim() == 2:  # a matrix product's weight (the LM head's, tied or not, included)
            matmul_params += p.numel()
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    element = next(model.parameters()).element_size()
    kv_bytes = 2 * layers * rows * kv_heads * head_dim * context * element
    flops = 2 * rows * matmul_params + 4 * rows * layers * heads * head_dim * context
    return dict(rows=rows, context=round(context, 1), weight_bytes=weight_bytes, kv_bytes=round(kv_bytes),
                bytes=round(weight_bytes + kv_bytes), flops=round(flops))


def bound(cost: dict, gb_s: float, gflop_s: float) -> dict:
    """The time a step cannot beat at these rates, which of the two bounds it, and the tokens/s it allows."""
    memory, compute = cost["bytes"] / (gb_s * 1e9), cost["flops"] / (gflop_s * 1e9)
    seconds = max(memory, compute)
    return dict(memory_ms=round(1e3 * memory, 2), compute_ms=round(1e3 * compute, 2), bound_ms=round(1e3 * seconds, 2),
                bound_by="memory" if memory >= compute else "compute", tokens_per_s_bound=round(cost["rows"] / seconds, 1))


def print_roofline(model, rows: int, context: float, seconds_per_step: float | None = None, rates: dict | None = None):
    """Print a token step's bytes, FLOPs and bound at `rows` and `context`, and, given the measured seconds a
    step took, how far from the bound it is. `rates`: {"gb_s", "gflop_s"} measured already (else measured now).
    Returns the printed figures."""
    rates = rates or dict(gb_s=bandwidth_gb_s(), gflop_s=max(matmul_gflops().values()))
    cost = token_step(model, rows, context)
    out = {**cost, **{k: round(v, 1) for k, v in rates.items()}, **bound(cost, rates["gb_s"], rates["gflop_s"])}
    if seconds_per_step:
        out.update(measured_ms=round(1e3 * seconds_per_step, 2),
                   times_bound=round(1e3 * seconds_per_step / out["bound_ms"], 2))
    print(f"roofline of a token step at {rows} rows, {cost['context']:.0f} cached positions: reads "
          f"{cost['weight_bytes'] / 1e6:.0f} MB of weights + {cost['kv_bytes'] / 1e6:.1f} MB of KV cache, "
          f"{cost['flops'] / 1e9:.2f} GFLOP; at {rates['gb_s']:.1f} GB/s and {rates['gflop_s']:.1f} GFLOP/s "
          f"measured: >= {out['bound_ms']:.1f} ms a step ({out['bound_by']}-bound: memory {out['memory_ms']:.1f} ms, "
          f"compute {out['compute_ms']:.1f} ms), <= {out['tokens_per_s_bound']:.0f} tokens/s"
          + (f"; measured {out['measured_ms']:.1f} ms a step: {out['times_bound']:.2f}x the bound"
             if seconds_per_step else ""))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe")
    p.add_argument("--rows", type=int, help="rows per step (default: the recipe's per_device_train_batch_size)")
    p.add_argument("--context", type=float, help="cached positions on average (default: max_prompt_length / 2 "
                   "+ max_completion_length / 2, a rough demo prompt)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit
    from grpokit import models
    from grpokit.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)
    t = recipe.train
    if recipe.train.torch_threads:
        torch.set_num_threads(recipe.train.torch_threads)
    model = models.load_model(models.resolve_model_path(recipe.model.name), recipe.model.dtype)
    context = args.context if args.context is not None else ((t.max_prompt_length or 0) + t.max_completion_length) / 2
    print_roofline(model, args.rows or t.per_device_train_batch_size, context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
