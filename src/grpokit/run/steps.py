"""How a command names the steps of a run to evaluate or export: `all`, `best`, `last`, `auto` or `N,M,...`.

    select_steps("auto", [10, 20, 30], best_step=20)   # -> [20]

The spec is the `--checkpoints` of `grpokit eval` and the tools evaluation; the run directory (grpokit.run.rundir)
resolves a step to its checkpoint folder.
"""
from __future__ import annotations

from grpokit.errors import GrpokitError, Problem

CHECKPOINT_SPECS = "all|best|last|auto|N"


def select_steps(spec: str, available: list[int], best_step: int | None = None) -> list[int]:
    """Steps to evaluate: `all` (base + every checkpoint), `last`, `best`, `auto` or `N,M,...` (0 = base)."""
    spec = spec.strip()
    if spec == "auto":
        spec = "best" if best_step is not None else "last"
    if spec == "all":
        return sorted({0, *available})
    if spec == "last":
        return [max(available)] if available else [0]
    if spec == "best":
        if best_step is None:
            raise GrpokitError([Problem("--checkpoints best", "no best checkpoint recorded yet",
                                        "run `grpokit eval RUN_DIR` (all checkpoints) first")])
        return [best_step]
    try:
        steps = sorted({int(s) for s in spec.split(",") if s.strip()})
    except ValueError:
        raise GrpokitError([Problem("--checkpoints", f"cannot read {spec!r}", f"use {CHECKPOINT_SPECS},M,...")]) from None
    missing = [s for s in steps if s != 0 and s not in available]
    if missing or not steps:
        raise GrpokitError([Problem("--checkpoints", f"no complete checkpoint at step(s) {missing or spec}",
                                    f"complete checkpoints: {sorted(available) or 'none'} (0 is the base model)")])
    return steps
