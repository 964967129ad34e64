"""Evaluation of tool tasks: task success, tool-call validity and calls per episode, per checkpoint.

    grpokit eval runs/smollm2-calculator-tools                 # a run whose recipe has env:
    grpokit eval default --recipe recipes/smollm2-calculator-tools.yaml --max-rows 8

Episodes are played by TRL's own multi-turn rollout, in evaluation mode
(`GRPOTrainer.evaluate()` on the held-out rows, the recipe's environment and
rewards): the same code path, chat template and tool parser as training, no
second rollout loop. One episode per row (the default) is greedy, as the
other tasks' pass@1 is; `generations` > 1 (`--samples N`) samples N episodes
per row at the recipe's temperature.

The rewards are the recipe's, built as training builds them (grpokit.task.Task: an
own reward function included) and found by their role. Reported per model: the
columns of the family whose answers are episodes (grpokit.families.episodes_family; the tools family's: task success, the mean of
the correctness reward (answer line right, or hidden-test share); the share of
episodes with at least one tool call; the share of calls with valid arguments,
over the episodes that call; the share of calls that raised in the environment,
undefined tool, bad arguments, budget spent, TRL's tools/failure_frequency; calls
per episode, TRL's tools/call_frequency), plus every reward's mean, the first
episodes as played and up to 16 episodes the correctness reward did not solve
(`failed`: what is left to learn). Results go to the run's
eval/results-tools.json.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from grpokit import models
from grpokit.data import load_datasets, load_rows
from grpokit.envs import tool_setup
from grpokit.families import Column, episodes_family
from grpokit.recipe import build_prompt_dataset
from grpokit.run import EVAL_DIR, TOOL_RESULTS_FILE, select_steps
from grpokit.run.writer import write_file
from grpokit.task import Task


def tool_columns() -> tuple[Column, ...]:
    """The evaluation columns of the family whose answers are tool episodes (grpokit.families.episodes_family)."""
    family = episodes_family()
    return family.columns if family is not None else ()


_EVAL_BATCH_ROWS = 64  # rows per evaluation batch (whole groups of `generations` episodes): docs/measurements.md
# "Evaluation batching" (more rows a call cost little more time until the matrix products fill the cores)
_EPISODES_KEPT = 4  # episodes written to the results file per model: what the figures look like
_FAILED_KEPT = 16  # unsolved episodes written per model (`failed`): what the model still gets wrong


class EpisodeLog:
    """A reward function that scores nothing (None, weight 0) and keeps every episode TRL's rollout played: the
    per-episode figures TRL's averaged metrics do not give (how many episodes call a tool at all). With `success`
    (the recipe's correctness reward) each episode also keeps its score under `success_key`, so the unsolved ones
    can be listed; each column of `columns` (a Column with `per_row`) is measured on every episode."""

    __name__ = "episodes"  # TRL names a reward function by __name__

    def __init__(self, success=None, success_key: str = "score", columns=()):
        self.episodes: list[dict] = []
        self.success, self.success_key = success, success_key
        self.columns = [c for c in columns if c.per_row is not None]
        self.values: dict[str, list] = {c.key: [] for c in self.columns}

    def __call__(self, completions, question=None, **kwargs):
        # The same call TRL makes to the recipe's reward (the batch's columns as keywords), once more: it is cheap
        # next to the rollout, and TRL keeps no per-episode reward a later reader could take it from.
        scores = self.success(completions=completions, question=question, **kwargs) if self.success else None
        columns = {k: v for k, v in kwargs.items() if isinstance(v, list) and len(v) == len(completions)}
        for i, messages in enumerate(completions):
            row = {k: v[i] for k, v in columns.items()}
            for c in self.columns:
                self.values[c.key].append(c.per_row(messages, row))
            self.episodes.append({"question": question[i] if question else None, "messages": messages,
                                  **({self.success_key: scores[i]} if scores is not None else {})})
        return [None] * len(completions)

    def failed(self) -> list[dict]:
        """The episodes the correctness reward did not give full marks (a None score counts as failed)."""
        return [e for e in self.episodes if self.success_key in e and (e[self.success_key] or 0.0) < 1.0]

    def mean(self, key: str) -> float | None:
        values = [v for v in self.values[key] if v is not None]
        return sum(values) / len(values) if values else None


def _model_metrics(recipe, model_path: str, rows: list[dict], generations: int) -> dict:
    checkpoint = None if model_path == models.resolve_model_path(recipe.model.name) else model_path
    tokenizer = models.load_recipe_tokenizer(recipe.model, checkpoint)
    model = models.load_recipe_model(recipe.model, checkpoint, on_device=True)
    rows, tool_kwargs = tool_setup(recipe, tokenizer, rows)
    task = Task.from_recipe(recipe)  # the recipe's rewards as training builds them, its own functions included
    dataset, _ = build_prompt_dataset(rows, task.template, tokenizer, None)
    columns = tool_columns()
    success_key = next(c.key for c in columns if c.role == "correctness")
    # The episode log scores with its own copy of the correctness reward: its error counts stay the recipe's.
    success = Task.from_recipe(recipe).correctness if task.correctness is not None else None
    log = EpisodeLog(success.fn if success else None, success_key, columns)
    from grpokit.training.factory import episode_trainer  # TRL and torch: grpokit.evaluation stays light (report)

    with tempfile.TemporaryDirectory(prefix="grpokit-tool-eval-") as tmp:
        trainer = episode_trainer(recipe, model, tokenizer, dataset, [*(r.fn for r in task.rewards), log], Path(tmp),
                                  generations=generations, batch_rows=min(len(rows), _EVAL_BATCH_ROWS),
                                  tool_kwargs=tool_kwargs)
        trainer.evaluate()  # TRL's rollout, its rewards and eval metrics; no eval loss (episodes_only)
        logged = next(x for x in reversed(trainer.state.log_history) if "eval_reward" in x)
    logged = {k[len("eval_"):]: v for k, v in logged.items() if k.startswith("eval_")}
    out = {k: v for k, v in logged.items()
           if (k.startswith("rewards/") or k.startswith("tools/")) and f"/{log.__name__}/" not in k}
    return {
        **{c.key: _column(c, task, logged, log) for c in columns},
        "episodes": len(log.episodes),
        "greedy": generations == 1,
        "metrics": out,
        "samples": log.episodes[:_EPISODES_KEPT],
        "failed": log.failed()[:_FAILED_KEPT],
    }


def _column(c, task, logged: dict, log: EpisodeLog) -> float | None:
    """A column's value for one model: measured on each episode, the mean of the task's reward with its role (as
    TRL logged it), or a metric TRL logged."""
    if c.per_row is not None:
        return log.mean(c.key)
    if c.role is not None:
        reward = next(iter(task.by_role(c.role)), None)
        return None if reward is None else logged.get(f"rewards/{reward.name}/mean")
    return logged.get(c.logged)


def evaluate_tools(recipe, targets: list[tuple[int | str, str]], rows: list[dict], generations: int = 1,
                   out_path: Path | None = None, log=print) -> dict:
    """Evaluate each (step or name, model path) on `rows`; write results to out_path when given."""
    results = []
    for step, path in targets:
        log(f"tool eval: {step} ({path}) on {len(rows)} row(s) x {generations} episode(s)")
        results.append({"step": step, "model": str(path), **_model_metrics(recipe, str(path), rows, generations)})
    doc = {"task": recipe.env.name, "rows": len(rows), "generations": generations, "checkpoints": results}
    if out_path is not None:
        write_file(out_path, json.dumps(doc, indent=2), within=out_path.parent.parent)  # the run (or eval) folder
        doc["path"] = str(out_path)
    return doc


def _fmt(v, share=True) -> str:
    from grpokit.evaluation.metrics import pct  # one percentage format for every terminal table

    return pct(v) if share else ("-" if v is None else f"{v:.2f}")


def tools_table(doc: dict) -> str:
    columns = tool_columns()
    head = "  ".join([f"{'step':>10}", *(c.header for c in columns)])
    how = "greedy" if doc["generations"] == 1 else "sampled"
    lines = [f"tool task {doc['task']}: {doc['rows']} row(s) x {doc['generations']} episode(s), {how}", head]
    for e in doc["checkpoints"]:
        lines.append("  ".join([f"{str(e['step']):>10}",
                                *(f"{_fmt(e.get(c.key), c.share):>{len(c.header)}}" for c in columns)]))
    return "\n".join(lines)


def cli_eval(args, recipe, run) -> int:
    """`grpokit eval` for a recipe with env: (a run directory, or a model with --recipe)."""
    rows = load_rows(args.data if args.data.startswith(("builtin:", "hf:")) else str(Path(args.data).resolve()))[0] \
        if args.data else load_datasets(recipe)[1]  # --data: from the working directory, as every path argument
    if not rows:  # a recipe that holds nothing out (eval_fraction 0): evaluate on its training rows, said below
        rows = load_datasets(recipe)[0]
        print("note: the recipe holds out no rows; evaluating on training rows")
    rows = rows[: args.max_rows] if args.max_rows else rows
    generations = max(1, args.samples or 1)
    if run is not None:
        by_step = run.by_step()
        steps = select_steps(args.checkpoints, sorted(by_step), (run.read_best() or {}).get("step"))
        targets = [(s, models.resolve_model_path(recipe.model.name) if s == 0 else str(by_step[s])) for s in steps]
        out = run.tool_results_file
    else:
        targets = [(args.target, models.resolve_model_path(args.target))]
        out = Path(args.output_dir or f"runs/eval-{Path(args.target).name}") / EVAL_DIR / TOOL_RESULTS_FILE
    from grpokit.evaluation.results import (claim_eval_output, record_tool_best, refuse_eval_output,  # results ->
                                            tool_results_names, write_tool_results)  # metrics -> this package

    data = args.data if run is not None else None  # a model's evaluation folder holds one evaluation
    refuse_eval_output(out.parent.parent, run is not None, tool_results_names(data))  # before any model loads
    claim_eval_output(out.parent.parent, run is not None)
    doc = write_tool_results(out, evaluate_tools(recipe, targets, rows, generations), data, out.parent.parent)
    if run is not None and doc["path"] == str(out):  # the best checkpoint by task_success, from the full file only
        if (best := record_tool_best(run, doc)) is not None:
            print(f"best: step {best['step']} (task_success {best['accuracy']:.3f}) -> {run.best_file}")
    print(tools_table(doc))
    for note in (doc.get("replaced"), doc.get("kept")):
        if note:
            print(f"note: {note}")
    print(f"results: {doc['path']}")
    return 0
