"""What every demo task does the same way: its run folder, its table, its demo.json.

A family's module (grpokit.demo TASKS) calls `claim_run_dir` before any model loads, prints its held-out figures
with `results_table` (one column per stage: before / after, or base / after SFT / after GRPO) and ends with
`write_demo_json`.
"""
from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from grpokit.errors import GrpokitError, Problem
from grpokit.run import RunDir
from grpokit.run.files import atomic_write


def claim_run_dir(output_dir: str, keep: list[str]) -> Path:
    """The demo's folder, refused before the model loads unless it is new or an earlier demo (its record says kind
    demo; a training run and any other non-empty folder are refused, grpokit.run.ownership). `keep`: input files
    that must not be inside it."""
    if not str(output_dir).strip():
        raise GrpokitError([Problem("--output-dir", "is empty (it would mean the current folder)",
                                    "name a new folder for the demo run, e.g. runs/demo")])
    run_dir = Path(output_dir)
    RunDir(run_dir).refuse_existing(overwrite=True, keep=keep, kinds=("demo",))
    return run_dir


def results_table(rows: list[tuple[str, ...]], columns: tuple[str, ...] = ("before", "after"),
                  title: str = "held-out evaluation (greedy)", end: dict | None = None) -> Table:
    """A metric per row, a stage per column; `end` (grpokit.run.run_end) of a run that stopped early puts its step
    in the title."""
    if end and not end["reached_end"]:
        title += f"; after = step {end['step']}" + (f" of {end['max_steps']}" if end["max_steps"] else "") + \
            f" ({end['status']})"
    table = Table(title=title)
    table.add_column("metric")
    for c in columns:
        table.add_column(c, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def write_demo_json(run_dir: Path, result: dict) -> None:
    atomic_write(RunDir(run_dir).demo_file, json.dumps(result, indent=2, ensure_ascii=False).encode("utf-8"))
