"""Where a decoding token step's time goes: matrix products, attention, the other kernels, sampling, and Python.

    from token_profile import profile_call, print_breakdown     # beside this script
    profile = profile_call(lambda: complete(...))              # one call of grpokit's decoding loop, profiled
    print_breakdown("hf", profile, unprofiled_ms_per_step)

Used by benchmarks/generation_throughput.py (`--profile`) for each variant that runs grpokit's decoding loop
(grpokit.generation.decode). One call runs under torch.profiler (CPU activity), with three ranges marked for the
call only (the loop's functions wrapped in `torch.profiler.record_function` here, grpokit unchanged):

  prefill      grpokit.generation.decode.prefill: the prompts' forward (the tree of shared prefixes)
  forward      a token step's model forward (grpokit.generation.steps' EagerStep / CompiledStep `__call__`)
  the rest     of the decoding call: the logits processors, the draw, the stop test, finished rows out, and the
               call's own work outside the loop (tokenising, decoding the text)

Each PyTorch operator's self time (its time less its children's) is put in the range it ran in, and in the
forward split by what the operator is: `matmul` (aten::mm / addmm / bmm: the linear layers and the LM head),
`attention` (the scaled-dot-product kernels), `other ops` (every other operator: norms, rotary embeddings,
activations, the cache's cat, views and the operators that only dispatch to others, such as aten::linear).
`outside operators` is the range's time in no operator: the modules' Python and the dispatch before an operator
starts; in a compiled step also inductor's fused kernels, which are not PyTorch operators (so there it is mostly
the work the eager step's `other ops` did, fused). The profiler adds a few microseconds to each operator, so its step is
slower than the unprofiled one: the table gives both, and the shares are of the profiled step.

Why torch.profiler and not a home-made timer: it sees every operator the forward dispatches, nested, with self
times, which per-module hooks cannot.
"""
from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::_addmm_activation")
ATTENTION = ("scaled_dot_product", "flash_attention", "_efficient_attention")
PREFILL, FORWARD, CALL = "grpokit.prefill", "grpokit.token_step", "grpokit.call"


def _marked(function, label: str):
    """`function` run inside a profiler range named `label`."""
    import torch

    def marked(*args, **kwargs):
        with torch.profiler.record_function(label):
            return function(*args, **kwargs)

    return marked


def profile_call(call) -> dict:
    """Run `call()` once under torch.profiler with the loop's ranges marked; return the milliseconds of each range
    and category (module docstring), and how many token steps ran."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from grpokit.generation import decode, steps

    with ExitStack() as patches:
        patches.enter_context(mock.patch.object(decode, "prefill", _marked(decode.prefill, PREFILL)))
        for cls in (steps.EagerStep, steps.CompiledStep):
            patches.enter_context(mock.patch.object(cls, "__call__", _marked(cls.__call__, FORWARD)))
        with profile(activities=[ProfilerActivity.CPU]) as prof, record_function(CALL):
            call()
    totals: dict[tuple[str, str], float] = {}
    ranges = {PREFILL: 0.0, FORWARD: 0.0, CALL: 0.0}
    forwards = 0
    for e in prof.events():
        if e.name in ranges:
            if _enclosing(e.cpu_parent, {e.name}):  # a range inside its own kind (a compiled step fallen back to eager)
                continue
            ranges[e.name] += e.cpu_time_total / 1e3
            forwards += e.name == FORWARD
        elif e.name.startswith("aten::"):
            where = _enclosing(e.cpu_parent, ranges) or CALL
            kind = "ops" if where != FORWARD else "matmul" if e.name in MATMUL else \
                "attention" if any(a in e.name for a in ATTENTION) else "other ops"
            totals[(where, kind)] = totals.get((where, kind), 0.0) + e.self_cpu_time_total / 1e3
    return dict(ranges=ranges, ops=totals, token_steps=forwards)


def _enclosing(event, names) -> str | None:
    """The name of the nearest range among `names` that `event` (or an ancestor of it) is."""
    while event is not None:
        if event.name in names:
            return event.name
        event = event.cpu_parent
    return None


def breakdown(profile: dict) -> dict:
    """Milliseconds per token step of each part (the prefill and the rest of the call spread over the steps)."""
    steps = max(profile["token_steps"], 1)
    ranges, ops = profile["ranges"], profile["ops"]
    forward_ops = {k: v for (where, k), v in ops.items() if where == FORWARD}
    rest = ranges[CALL] - ranges[PREFILL] - ranges[FORWARD]
    parts = {
        "forward: matmul": forward_ops.get("matmul", 0.0),
        "forward: attention": forward_ops.get("attention", 0.0),
        "forward: other ops": forward_ops.get("other ops", 0.0),
        "forward: outside operators": ranges[FORWARD] - sum(forward_ops.values()),
        "prefill": ranges[PREFILL],
        "sampling and the loop: ops": ops.get((CALL, "ops"), 0.0),
        "sampling and the loop: outside operators": rest - ops.get((CALL, "ops"), 0.0),
    }
    return {k: v / steps for k, v in parts.items()}


def print_breakdown(name: str, profile: dict, unprofiled_ms: float | None = None) -> dict:
    """Print where a token step's time went (ms a step and share of the profiled step); return the figures."""
    parts = breakdown(profile)
    total = sum(parts.values())
    print(f"{name}: where a token step's time goes ({profile['token_steps']} token steps profiled; "
          f"{total:.1f} ms a step under the profiler"
          + (f", {unprofiled_ms:.1f} ms without it" if unprofiled_ms else "") + ")")
    for k, v in parts.items():
        print(f"  {k:42s} {v:7.2f} ms  {100 * v / total:5.1f}%")
    return dict(variant=name, token_steps=profile["token_steps"], profiled_ms=round(total, 2),
                unprofiled_ms=round(unprofiled_ms, 2) if unprofiled_ms else None,
                parts_ms={k: round(v, 2) for k, v in parts.items()})
