"""`grpokit demo` (task arithmetic, the default): GRPO on the embedded model, end to end, with a before/after table.

Runs `recipes/smollm2-arithmetic.yaml`: SmolLM2-135M-Instruct (embedded,
converted from GGUF once and cached), a bundled generated arithmetic task,
`math_correctness` + `format` rewards. It evaluates the model on held-out
problems before training, trains, evaluates again with the same greedy
decoding, template and verifiers, prints the table, writes `demo.json`
into the run directory, records both evaluations in `eval/results.json` (as
steps 0 and the last step) and ends by writing the run report
(`report/report.html`, see `grpokit.report`) and printing its path. Its time and tables on the project's 2-core CPU: docs/quickstart.md "What it prints, and how to read
it".

`--output-dir` is replaced only when its authorship record says it is an earlier demo (kind demo,
grpokit.run.record); a training run and any other non-empty folder are refused before the model loads, as
`grpokit train --overwrite` refuses a folder that is no run (grpokit.run.ownership).
"""
from __future__ import annotations

import time
from pathlib import Path

from grpokit.demo.common import claim_run_dir, results_table, write_demo_json
from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation import pct  # one percentage format for every table
from grpokit.recipe import load_recipe
from grpokit.run import RunDir, run_end

DEMO_RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "smollm2-arithmetic.yaml"



def before_after_rows(before, after) -> list[tuple[str, str, str]]:
    """The demo's table rows (grpokit.demo.common.results_table)."""
    return [("accuracy", pct(before.accuracy), pct(after.accuracy)),
            ("format rate", pct(before.format_rate), pct(after.format_rate)),
            ("mean completion length (tokens)", f"{before.mean_length:.1f}", f"{after.mean_length:.1f}"),
            ("cut off at max length", pct(before.truncated_rate), pct(after.truncated_rate))]


def run(output_dir: str, overrides: list[str] | None = None, recipe_path: Path | None = None,
        callbacks: list | None = None) -> dict:
    """The demo (module docstring); `callbacks`: further TrainerCallbacks for its training (benchmarks, tests)."""
    from grpokit import models
    from grpokit.console import console
    from grpokit.data import load_datasets
    from grpokit.evaluation import evaluate
    from grpokit.generation import dtype_name
    from grpokit.training import train

    path = Path(recipe_path or DEMO_RECIPE)
    if not path.is_file():
        raise GrpokitError([Problem(str(path), "the demo recipe is missing",
                                    "run grpokit from a source checkout (pip install -e .)")])
    recipe = load_recipe(path, overrides)
    run_dir = claim_run_dir(output_dir, keep=[str(path), recipe.resolve_data_path(recipe.data.train)])
    t0 = time.time()
    tokenizer, model = models.load_recipe_tokenizer(recipe.model), models.load_recipe_model(recipe.model)
    _, eval_rows, _ = load_datasets(recipe)
    console.print(f"evaluating the base model on {len(eval_rows)} held-out problems (greedy, in "
                  f"{dtype_name(model)}) ...")
    before = evaluate(model, tokenizer, recipe, eval_rows)
    console.print(f"before: accuracy {pct(before.accuracy)}, format {pct(before.format_rate)}")
    summary = train(recipe, run_dir=run_dir, overwrite=True, model=model, tokenizer=tokenizer, callbacks=callbacks,
                    kind="demo")
    trained = summary.pop("trainer").model
    end = run_end(summary, recipe.train.max_steps)
    if summary.get("status") == "interrupted":  # Ctrl-C / SIGTERM: the user asked to stop, not to evaluate
        return _stopped(run_dir, before, summary, end, t0)
    if end["note"]:
        console.print(f"[yellow]note:[/] {end['note']}")
    console.print(f"evaluating the trained model (greedy, in {dtype_name(trained)}) ...")
    after = evaluate(trained, tokenizer, recipe, eval_rows)
    console.print(results_table(before_after_rows(before, after), end=end))
    for s in after.samples[:2]:
        console.print(f"[dim]sample after training[/] Q: {s['question']}\n  {s['completion']!r}")
    result = {"before": before.as_dict(), "after": after.as_dict(), "train": summary, "run_end": end,
              "seconds_total": round(time.time() - t0, 1)}
    write_demo_json(run_dir, result)
    report = _write_report(run_dir, recipe, eval_rows, before, after, summary)
    done = "finished" if end["reached_end"] else f"stopped at step {end['step']} ({end['status']})"
    console.print(f"demo {done} in {result['seconds_total'] / 60:.1f} min; run directory: {run_dir} "
                  f"(demo.json, metrics.jsonl, samples.jsonl, checkpoints/)")
    console.print(f"report: {report}")
    return result


def _stopped(run_dir: Path, before, summary: dict, end: dict, t0: float) -> dict:
    """The demo stopped by the user during training: the checkpoint is saved, nothing more is evaluated."""
    from grpokit.console import console

    result = {"before": before.as_dict(), "after": None, "train": summary, "run_end": end,
              "seconds_total": round(time.time() - t0, 1)}
    write_demo_json(run_dir, result)
    console.print(f"demo stopped at step {end['step']} of {end['max_steps']} after "
                  f"{result['seconds_total'] / 60:.1f} min: the trained model was not evaluated")
    console.print(f"continue training with: grpokit train --resume {run_dir}; then evaluate every checkpoint with: "
                  f"grpokit eval {run_dir}")
    return result


def _write_report(run_dir: Path, recipe, eval_rows, before, after, summary) -> Path:
    """The before/after evaluation as eval/results.json (steps 0 and last), then report.html."""
    from grpokit.evaluation import EvalSets, write_results
    from grpokit.report import write_report

    last = RunDir(run_dir).latest_checkpoint()
    entries = [{"step": step, "path": path, "heldout": r.as_dict(), "perturbed": None, "train": None, "gap": None}
               for step, path, r in ((0, recipe.model.name, before),
                                     (summary["step"], str(last) if last else "final model", after))]
    sets = EvalSets("held-out set of the recipe (the demo evaluates the base and the final model; "
                    "`grpokit eval RUN_DIR` evaluates every checkpoint)", eval_rows)
    write_results(run_dir, recipe, sets, entries, 0, None)
    return write_report(run_dir)
