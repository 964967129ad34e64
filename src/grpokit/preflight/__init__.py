"""Preflight: what a recipe will do before it trains — baseline rollouts and the memory plan.

    report, rows = preflight_recipe(recipe, prompts=16)
    print(render_memory_plan(memory_report(recipe, num_gpus=8), recipe))

sample (rollouts: rewards, zero-variance groups, truncation, recommendations), memory (per-GPU plans). The names
load their module on first use (PEP 562): the memory plan never imports torch, the rollouts do.
"""
_LAZY = {
    "checkpointing_of": "grpokit.preflight.memory",
    "memory_report": "grpokit.preflight.memory",
    "render_memory_plan": "grpokit.preflight.memory",
    "preflight_recipe": "grpokit.preflight.sample",
    "render_preflight": "grpokit.preflight.sample",
    "run_preflight": "grpokit.preflight.sample",
    "write_filtered": "grpokit.preflight.sample",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'grpokit.preflight' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = ["checkpointing_of", "memory_report", "preflight_recipe", "render_memory_plan", "render_preflight", "run_preflight",
           "write_filtered"]
