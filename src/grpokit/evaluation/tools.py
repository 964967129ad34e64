"""Evaluation of tool tasks: task success, tool-call validity and calls per episode, per checkpoint.

    grpokit eval runs/smollm2-calculator-tools                 # a run whose recipe has env:
    grpokit eval default --recipe recipes/smollm2-calculator-tools.yaml --max-rows 8

Episodes are played by TRL's own multi-turn rollout, in evaluation mode
(`GRPOTrainer.evaluate()` on the held-out rows, the recipe's environment and
rewards): the same code path, chat template and tool parser as training, no
second rollout loop. One episode per row (the default) is greedy, as the
other tasks' pass@1 is; `generations` > 1 (`--samples N`) samples N episodes
per row at the recipe's temperature.

Reported per model: `task_success` (mean of the task_success reward: answer
line right, or hidden-test share), `tool_call_rate` (share of episodes with at
least one tool call), `tool_args` (share of calls with valid arguments, over
the episodes that call), `tool_failures` (share of calls that raised in the
environment: undefined tool, bad arguments, budget spent; TRL's
tools/failure_frequency) and `calls_per_episode` (TRL's tools/call_frequency),
plus every other reward's mean, the first episodes as played and up to 16
episodes the task_success reward did not solve (`failed`: what is left to
learn). Results go to the run's eval/results-tools.json.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

_EVAL_BATCH_ROWS = 64  # rows per evaluation batch (whole groups of `generations` episodes): see measurements
_EPISODES_KEPT = 4  # episodes written to the results file per model: what the figures look like
_FAILED_KEPT = 16  # unsolved episodes written per model (`failed`): what the model still gets wrong


class EpisodeLog:
    """A reward function that scores nothing (None, weight 0) and keeps every episode TRL's rollout played: the
    per-episode figures TRL's averaged metrics do not give (how many episodes call a tool at all). With `success`
    (the recipe's task_success reward) each episode also keeps its score, so the unsolved ones can be listed."""

    __name__ = "episodes"  # TRL names a reward function by __name__

    def __init__(self, success=None):
        self.episodes: list[dict] = []
        self.success = success

    def __call__(self, completions, question=None, **kwargs):
        # The same call TRL makes to the recipe's reward (the batch's columns as keywords), once more: it is cheap
        # next to the rollout, and TRL keeps no per-episode reward a later reader could take it from.
        scores = self.success(completions=completions, question=question, **kwargs) if self.success else None
        for i, messages in enumerate(completions):
            self.episodes.append({"question": question[i] if question else None, "messages": messages,
                                  **({"task_success": scores[i]} if scores is not None else {})})
        return [None] * len(completions)

    def failed(self) -> list[dict]:
        """The episodes the task_success reward did not give full marks (a None score counts as failed)."""
        return [e for e in self.episodes if "task_success" in e and (e["task_success"] or 0.0) < 1.0]

    def call_rate(self) -> float | None:
        from grpokit.rewards.tools import tool_calls

        return sum(bool(tool_calls(e["messages"])) for e in self.episodes) / len(self.episodes) \
            if self.episodes else None


def _model_metrics(recipe, model_path: str, rows: list[dict], generations: int) -> dict:
    from trl import GRPOTrainer

    from grpokit import internals, models
    from grpokit.envs import tool_setup
    from grpokit.generation.decode import replacing_generate
    from grpokit.recipe import build_prompt_dataset, grpo_args
    from grpokit.rewards import build_reward
    from grpokit.task import template_of

    checkpoint = None if model_path == models.resolve_model_path(recipe.model.name) else model_path
    tokenizer = models.load_recipe_tokenizer(recipe.model, checkpoint)
    model = models.load_recipe_model(recipe.model, checkpoint, on_device=True)
    rows, tool_kwargs = tool_setup(recipe, tokenizer, rows)
    dataset, _ = build_prompt_dataset(rows, template_of(recipe), tokenizer, None)
    success = next((r for r in recipe.rewards if r.name == "task_success"), None)
    log = EpisodeLog(build_reward(success.name, success.params) if success else None)  # its own: no shared counts
    with tempfile.TemporaryDirectory(prefix="grpokit-tool-eval-") as tmp:
        args = grpo_args(recipe, Path(tmp))
        args.num_generations_eval = generations
        args.per_device_eval_batch_size = generations * min(len(rows), _EVAL_BATCH_ROWS)
        args.report_to = []
        args.reward_weights = [*args.reward_weights, 0.0]  # the episode log scores nothing
        if generations == 1:  # one episode per row: greedy (TRL samples unless told not to)
            args.generation_kwargs = {**(args.generation_kwargs or {}), "do_sample": False}
        trainer = GRPOTrainer(model=model, reward_funcs=[*(build_reward(r.name, r.params) for r in recipe.rewards),
                                                         log],
                              args=args, train_dataset=dataset, eval_dataset=dataset, processing_class=tokenizer,
                              **tool_kwargs)
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # the table below says it; not the raw metrics dict
        if recipe.train.shared_prefix and recipe.generation.backend == "hf":  # each prompt prefilled once
            internals.generate_through(trainer, replacing_generate(trainer.model, recipe.generation.top_p_candidates))
        internals.evaluate_episodes(trainer)  # TRL's evaluate() without the GRPO loss nobody reads
        logged = next(x for x in reversed(trainer.state.log_history) if "eval_reward" in x)
    out = {k[len("eval_"):]: v for k, v in logged.items()
           if (k.startswith("eval_rewards/") or k.startswith("eval_tools/")) and f"/{log.__name__}/" not in k}
    return {
        "task_success": logged.get("eval_rewards/task_success/mean"),
        "tool_call_rate": log.call_rate(),
        "tool_args": logged.get("eval_rewards/tool_args/mean"),
        "tool_failures": logged.get("eval_tools/failure_frequency"),
        "calls_per_episode": logged.get("eval_tools/call_frequency"),
        "episodes": len(log.episodes),
        "greedy": generations == 1,
        "metrics": out,
        "samples": log.episodes[:_EPISODES_KEPT],
        "failed": log.failed()[:_FAILED_KEPT],
    }


def evaluate_tools(recipe, targets: list[tuple[int | str, str]], rows: list[dict], generations: int = 1,
                   out_path: Path | None = None, log=print) -> dict:
    """Evaluate each (step or name, model path) on `rows`; write results to out_path when given."""
    results = []
    for step, path in targets:
        log(f"tool eval: {step} ({path}) on {len(rows)} row(s) x {generations} episode(s)")
        results.append({"step": step, "model": str(path), **_model_metrics(recipe, str(path), rows, generations)})
    doc = {"task": recipe.env.name, "rows": len(rows), "generations": generations, "checkpoints": results}
    if out_path is not None:
        from grpokit.run.writer import write_file

        write_file(out_path, json.dumps(doc, indent=2), within=out_path.parent.parent)  # the run (or eval) folder
        doc["path"] = str(out_path)
    return doc


def _fmt(v, share=True) -> str:
    from grpokit.evaluation.metrics import pct  # one percentage format for every terminal table

    return pct(v) if share else ("-" if v is None else f"{v:.2f}")


def tools_table(doc: dict) -> str:
    head = (f"{'step':>10}  {'task success':>12}  {'tool calls':>10}  {'valid args':>10}  {'tool failures':>13}  "
            f"{'calls/episode':>13}")
    how = "greedy" if doc["generations"] == 1 else "sampled"
    lines = [f"tool task {doc['task']}: {doc['rows']} row(s) x {doc['generations']} episode(s), {how}", head]
    for e in doc["checkpoints"]:
        lines.append(f"{str(e['step']):>10}  {_fmt(e['task_success']):>12}  {_fmt(e.get('tool_call_rate')):>10}  "
                     f"{_fmt(e['tool_args']):>10}  {_fmt(e['tool_failures']):>13}  "
                     f"{_fmt(e['calls_per_episode'], share=False):>13}")
    return "\n".join(lines)


def cli_eval(args, recipe, run) -> int:
    """`grpokit eval` for a recipe with env: (a run directory, or a model with --recipe)."""
    from grpokit import models
    from grpokit.data import load_datasets, load_rows
    from grpokit.run import EVAL_DIR, TOOL_RESULTS_FILE, select_steps

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
    from grpokit.evaluation.results import claim_eval_output, refuse_eval_output

    refuse_eval_output(out.parent.parent, run is not None, [out.name])  # before any model loads
    claim_eval_output(out.parent.parent, run is not None)
    doc = evaluate_tools(recipe, targets, rows, generations, out)
    if run is not None and not args.data:  # the best checkpoint by task_success: best.json, as other runs have
        from grpokit.evaluation.results import record_tool_best

        if (best := record_tool_best(run, doc)) is not None:
            print(f"best: step {best['step']} (task_success {best['accuracy']:.3f}) -> {run.best_file}")
    print(tools_table(doc))
    print(f"results: {doc['path']}")
    return 0
