"""`grpokit demo [--task NAME]`: a task family of the articles, trained end to end on the embedded model.

    grpokit demo                      # arithmetic (the default): GRPO with math_correctness + format
    grpokit demo --task NAME          # another family; `grpokit demo --help` lists them

Each demo is declared by its task family (`demos` of its row in grpokit.families: the module, the default run
directory, the --help line) and is one module of this package with a `run(output_dir, overrides, **options) ->
dict` function: it evaluates the base model on held-out rows, trains, evaluates again the same way and prints a
before/after table, writing `demo.json` into the run directory (grpokit.demo.common has the shared parts). This
module imports nothing heavy: the command line reads `TASKS` to build its choices without loading torch.
"""
from __future__ import annotations

import importlib

from grpokit.families import Demo, demos

TASKS: dict[str, Demo] = demos()  # every family's demos, in the table's order
DEFAULT_TASK = "arithmetic"


def run_demo(output_dir: str | None = None, overrides: list[str] | None = None, *, task: str = DEFAULT_TASK,
             resume: bool = False, **options) -> dict:
    """The demo of `task` (a key of TASKS) into `output_dir` (default: the task's); `options` go to its run().
    `resume` goes on with a stopped comparison there: a demo whose run() takes `resume` (the comparisons: hours of
    stages, grpokit.demo.progress.Progress); any other demo is one training and refuses it."""
    import inspect
    import shlex

    from grpokit.errors import GrpokitError, Problem

    if task not in TASKS:
        raise GrpokitError([Problem("--task", f"unknown demo task {task!r}", f"choose one of {', '.join(TASKS)}")])
    entry = TASKS[task]
    module = importlib.import_module(f"grpokit.demo.{entry.module}")
    output_dir = entry.output_dir if output_dir is None else output_dir
    if "resume" in inspect.signature(module.run).parameters:
        options.update(resume=resume, again=shlex.join(["grpokit", "demo", "--task", task, "--output-dir", str(output_dir),
                                                         *(a for o in overrides or [] for a in ("--set", o))]))
    elif resume:
        raise GrpokitError([Problem("--resume", f"the {task} demo is one training, not a comparison of stages: "
                                    "there is nothing to go on with", f"run `grpokit demo --task {task}` without "
                                    "--resume (it starts the demo over)")])
    if entry.recipes and "recipes" not in options:  # a module serving several families: the row's recipes
        from grpokit.demo.common import RECIPES

        options["recipes"] = tuple(RECIPES / name for name in entry.recipes)
    return module.run(output_dir, overrides, **options)
