"""`grpokit demo [--task NAME]`: a task family of the articles, trained end to end on the embedded model.

    grpokit demo                      # arithmetic (the default): GRPO with math_correctness + format
    grpokit demo --task NAME          # another family; `grpokit demo --help` lists them

Each entry of `TASKS` is one module of this package with a `run(output_dir, overrides, **options) -> dict`
function: it evaluates the base model on held-out rows, trains, evaluates again the same way and prints a
before/after table (grpokit.demo.tables), writing `demo.json` into the run directory. Adding a family is one
module plus one row here. This module imports nothing heavy: the command line reads
`TASKS` to build its choices without loading torch.
"""
from __future__ import annotations

import importlib
from typing import NamedTuple


class DemoTask(NamedTuple):
    module: str          # grpokit.demo.<module> holds run()
    output_dir: str      # the default run directory
    what: str            # one line for --help


TASKS: dict[str, DemoTask] = {
    "arithmetic": DemoTask("arithmetic", "runs/demo",
                           "GRPO on generated additions/subtractions (recipes/smollm2-arithmetic.yaml)"),
    "json": DemoTask("json_extraction", "runs/demo-json",
                     "GRPO on short texts -> JSON objects with typed fields (recipes/smollm2-json-extraction.yaml)"),
    "preference": DemoTask("preference", "runs/demo-preference",
                           "a reward model from the bundled rankings, then GRPO against it "
                           "(recipes/smollm2-preference.yaml)"),
    "tools": DemoTask("tools", "runs/demo-tools", "calculator tool calls: SFT on demonstrations, then GRPO from it "
                      "(recipes/smollm2-calculator-sft.yaml, smollm2-calculator-tools.yaml)"),
}
DEFAULT_TASK = "arithmetic"


def run_demo(output_dir: str | None = None, overrides: list[str] | None = None, *, task: str = DEFAULT_TASK,
             **options) -> dict:
    """The demo of `task` (a key of TASKS) into `output_dir` (default: the task's); `options` go to its run()."""
    from grpokit.errors import GrpokitError, Problem

    if task not in TASKS:
        raise GrpokitError([Problem("--task", f"unknown demo task {task!r}", f"choose one of {', '.join(TASKS)}")])
    entry = TASKS[task]
    module = importlib.import_module(f"grpokit.demo.{entry.module}")
    return module.run(entry.output_dir if output_dir is None else output_dir, overrides, **options)
