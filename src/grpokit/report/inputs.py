"""What the report reads from a run directory, checked by type: a damaged record is left out, never a traceback.

    metrics = stepped(run.read_metrics(), run.metrics)      # records whose step is an integer; one note per file
    results = eval_doc(read_json(run.results_path()))      # checkpoint entries with an integer step and a dict

The run files are crash-tolerant line by line (grpokit.run.files skips a cut line); a line that parses but holds
the wrong types (a `step` that is a string, `rewards` that is a list, a finding whose `code` is a list) is
skipped or shown as text here, so one damaged record cannot stop the report of a whole run.

Not covered: what the values mean (the sections' job).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from grpokit.run.files import note as _default_note


def _int(v) -> bool:
    return type(v) is int


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def stepped(records: list[dict], path: Path, note: Callable[[str], None] = _default_note) -> list[dict]:
    """The records whose `step` is an integer (what every curve and table is keyed by); the rest with one note."""
    good = [r for r in records if _int(r.get("step"))]
    if len(good) < len(records):
        note(f"{path}: skipped {len(records) - len(good)} record(s) whose step is not an integer (damaged)")
    return good


def samples(records: list[dict]) -> list[dict]:
    """Logged completions with their fields as text and `rewards` as a mapping of names to values."""
    out = []
    for r in records:
        rewards = r.get("rewards")
        out.append({**r, "rewards": {str(k): v for k, v in rewards.items()} if isinstance(rewards, dict) else {}})
    return out


def findings(records: list[dict]) -> list[dict]:
    """Health findings with code, severity and message as text (a step that is not an integer reads as none)."""
    return [{**r, "code": str(r.get("code", "?")), "severity": str(r.get("severity", "")),
             "message": str(r.get("message", "")), "step": r.get("step") if _int(r.get("step")) else None}
            for r in records]


def eval_doc(doc: dict | None) -> dict | None:
    """eval/results*.json with only the checkpoint entries a table can show: a dict with an integer step (and,
    where present, a dict `heldout`); `best` kept only when its step and accuracy are numbers."""
    if not isinstance(doc, dict) or not isinstance(doc.get("checkpoints"), list):
        return None
    entries = [e for e in doc["checkpoints"] if isinstance(e, dict) and _int(e.get("step"))
               and isinstance(e.get("heldout", {}), dict)]
    best = doc.get("best")
    if not (isinstance(best, dict) and _int(best.get("step")) and _number(best.get("accuracy"))):
        best = None
    return {**doc, "checkpoints": entries, "best": best}


def run_facts(status: dict) -> dict:
    """run.json's fields the report shows, each of the type it expects (else left out)."""
    kinds = {"status": str, "model": str, "step": int, "seconds": (int, float), "init_from": dict}
    return {k: v for k, v in status.items() if k not in kinds or (isinstance(v, kinds[k]) and not isinstance(v, bool))}


def demo_doc(doc: dict | None) -> dict | None:
    """demo.json as the report reads it: a dict, else None (no demo, or a file of another shape)."""
    return doc if isinstance(doc, dict) else None
