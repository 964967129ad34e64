"""How far a run got: the one rule for "did this run reach its end", for every table, report and results file.

    end = run_end(run.read_status(), max_steps)   # {"status", "step", "max_steps", "reached_end", "note"}
    end["note"]   # "the run stopped at step 24 of 30 (interrupted: SIGTERM): these figures are from step 24"

A run reached its end when run.json says `completed` and, with train.max_steps, its step is at least max_steps.
Anything else (interrupted by Ctrl-C or SIGTERM, stopped by the health monitor, failed, aborted, still running)
is partial, and whatever is built from it says which step it holds. Not covered: deciding how a run ends
(grpokit.training) or reading run.json crash-tolerantly (grpokit.run.RunDir.read_status).
"""
from __future__ import annotations

# run.json statuses that say why a run stopped where it did, in the words a table can carry
_WHY = {"interrupted": "interrupted", "stopped": "stopped by the health monitor", "failed": "failed",
        "aborted": "aborted", "running": "still running, or killed"}


def run_end(status: dict | None, max_steps: int | None = None) -> dict:
    """Whether the run of `status` (run.json) reached its end, and if not a note saying which step it holds."""
    status = status if isinstance(status, dict) else {}
    state = str(status.get("status") or "unknown")
    step = status.get("step") if isinstance(status.get("step"), int) and not isinstance(status.get("step"), bool) \
        else None
    target = max_steps if isinstance(max_steps, int) and max_steps > 0 else None
    reached = state == "completed" and (target is None or (step is not None and step >= target))
    note = None
    if not reached:
        of = f" of {target}" if target else ""
        why = _WHY.get(state, state)
        reason = status.get("reason")
        why += f": {str(reason)[:120]}" if reason and state in ("interrupted", "stopped") else ""
        at = f"at step {step}{of}" if step is not None else "before its first step was recorded"
        held = f"these figures are from step {step}" if step is not None else "these figures are not from its end"
        note = f"the run stopped {at} ({why}): {held}"
    return {"status": state, "step": step, "max_steps": target, "reached_end": reached, "note": note}
