"""Preflight: what a recipe will do before it trains — baseline rollouts and the memory plan.

    report, rows = preflight_recipe(recipe, prompts=16)
    print(render_memory_plan(memory_report(recipe, num_gpus=8), recipe))

sample (rollouts: rewards, zero-variance groups, truncation, recommendations), memory (per-GPU plans).
"""
from grpokit.preflight.memory import memory_report, render_memory_plan
from grpokit.preflight.sample import preflight_recipe, render_preflight, run_preflight, write_filtered

__all__ = ["memory_report", "preflight_recipe", "render_memory_plan", "render_preflight", "run_preflight",
           "write_filtered"]
