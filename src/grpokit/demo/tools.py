"""`grpokit demo --task tools`: an SFT warm start on tool-call demonstrations, then GRPO from it, on the calculator.

    grpokit demo --task tools [--output-dir runs/demo-tools] [--set train.seed=1]

The loop the articles describe for a model that cannot yet produce the format: the embedded SmolLM2-135M-Instruct
never writes a `<tool_call>` on its own, so GRPO alone learns nothing (every group ties). The demo runs the same
command pair a user runs (docs/tools.md "An SFT warm start, then GRPO"):

    grpokit sft recipes/smollm2-calculator-sft.yaml --output-dir runs/demo-tools-sft
    grpokit train recipes/smollm2-calculator-tools.yaml --init-from runs/demo-tools-sft --output-dir runs/demo-tools
    grpokit eval runs/demo-tools --checkpoints all

through grpokit's own trainers (grpokit.training.train_sft, train with the --init-from lineage) and tool evaluation
(grpokit.evaluation.evaluate_tools: TRL's own rollout, greedy, on the held-out rows), and prints one table with
three columns: the base model, after SFT, after GRPO (task success, the share of episodes that call a tool, valid
arguments, tool failures, calls per episode). `--set` applies to both recipes (e.g. `train.seed=1`). The GRPO run's
folder (`--output-dir`) gets demo.json, eval/results-tools.json (the three models) and report/report.html; the SFT
run sits beside it, `<output-dir>-sft`. Either folder is replaced only when its record says it is an earlier demo.
Figures and minutes on the project's 2-core CPU: docs/measurements.md "Tool calling: SFT warm start, then GRPO".
"""
from __future__ import annotations

import time
from pathlib import Path

from grpokit.demo.common import RECIPES, claim_warm_start, results_table, sft_then_grpo, write_demo_json
from grpokit.evaluation import pct
from grpokit.run import run_end

SFT_RECIPE = RECIPES / "smollm2-calculator-sft.yaml"
GRPO_RECIPE = RECIPES / "smollm2-calculator-tools.yaml"
COLUMNS = ("base", "after SFT", "after GRPO")
# (key of grpokit.evaluation.evaluate_tools' entry, row title, a share)
METRICS = (("task_success", "task success", True), ("tool_call_rate", "episodes with a tool call", True),
           ("tool_args", "valid arguments (of the calls)", True),
           ("tool_failures", "tool failures (of the calls)", True),
           ("calls_per_episode", "calls per episode", False))


def table_rows(entries: list[dict]) -> list[tuple[str, ...]]:
    """The demo's rows (grpokit.demo.common.results_table): a metric per row, a model per column."""
    def cell(v, share):
        return pct(v) if share else ("-" if v is None else f"{v:.2f}")

    return [(title, *(cell(e.get(key), share) for e in entries)) for key, title, share in METRICS]


def run(output_dir: str, overrides: list[str] | None = None, sft_recipe_path: Path | None = None,
        grpo_recipe_path: Path | None = None, callbacks: list | None = None) -> dict:
    """The demo (module docstring); `callbacks`: further TrainerCallbacks for its GRPO training (benchmarks, tests)."""
    from grpokit import models
    from grpokit.console import console, print_table
    from grpokit.data import load_datasets
    from grpokit.evaluation import evaluate_tools
    from grpokit.run import RunDir

    sft_path, grpo_path = Path(sft_recipe_path or SFT_RECIPE), Path(grpo_recipe_path or GRPO_RECIPE)
    sft_recipe, grpo_recipe, run_dir, sft_dir = claim_warm_start(output_dir, overrides, sft_path, grpo_path, "the tools demo")
    t0 = time.time()

    # ---------------------------------------------------------------- SFT on the demonstrations, then GRPO from it
    sft, recipe, lineage, grpo, seconds_sft = sft_then_grpo(sft_recipe, grpo_recipe, sft_dir, run_dir,
                                                            (sft_path.name, grpo_path.name), callbacks, t0, overrides)
    summary = grpo.summary
    end = run_end(summary, recipe.train.max_steps)
    if summary.get("status") == "interrupted":  # Ctrl-C / SIGTERM: the user asked to stop, not to evaluate
        result = {"columns": None, "evaluation": None, "sft": sft, "train": summary, "run_end": end,
                  "sft_run": str(sft_dir), "seconds_total": round(time.time() - t0, 1)}
        write_demo_json(run_dir, result)
        console.print(f"demo stopped at GRPO step {end['step']} of {end['max_steps']}: nothing was evaluated; go on "
                      f"with: grpokit train --resume {run_dir}, then grpokit eval {run_dir} --checkpoints all")
        return result
    if end["note"]:
        console.print(f"[yellow]note:[/] {end['note']}")
    seconds_train = time.time() - t0

    # ---------------------------------------------------------------- the three models on the held-out rows
    _, eval_rows, _ = load_datasets(grpo_recipe)
    grpo_last = RunDir(run_dir).latest_checkpoint()
    targets = [(0, models.resolve_model_path(grpo_recipe.model.name)), ("sft", lineage["path"])]
    targets += [(summary["step"], str(grpo_last))] if grpo_last else []
    console.print(f"evaluating base, SFT and GRPO models on {len(eval_rows)} held-out rows (greedy) ...")
    doc = evaluate_tools(grpo_recipe, targets, eval_rows, 1, RunDir(run_dir).tool_results_file,
                         log=lambda m: console.print(m, markup=False))
    entries = doc["checkpoints"]
    print_table(results_table(table_rows(entries), columns=COLUMNS[:len(entries)],
                                title="held-out tool episodes (greedy)", end=end))
    for column, e in zip(COLUMNS, entries):
        for s in e["samples"][:1]:  # one held-out episode per model, as TRL's rollout played it
            console.print(f"{column}: Q: {s['question']}\n  {s['messages']!r}", markup=False, highlight=False)
    result = {"columns": list(COLUMNS[:len(entries)]), "evaluation": doc, "sft": sft, "train": summary,
              "run_end": end, "sft_run": str(sft_dir), "seconds_sft": round(seconds_sft, 1),
              "seconds_training": round(seconds_train, 1), "seconds_total": round(time.time() - t0, 1)}
    write_demo_json(run_dir, result)
    report = _write_report(run_dir)
    console.print(f"demo finished in {result['seconds_total'] / 60:.1f} min; GRPO run: {run_dir} (demo.json, "
                  f"eval/results-tools.json), SFT run: {sft_dir}")
    console.print(f"report: {report}")
    return result


def _write_report(run_dir: Path) -> Path:
    from grpokit.report import write_report

    return write_report(run_dir)
