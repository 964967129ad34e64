"""What every demo task does the same way: its run folder, its table, its demo.json, and the one-recipe GRPO demo.

A family's module (grpokit.demo TASKS) calls `claim_run_dir` before any model loads, prints its held-out figures
with `results_table` (one column per stage: before / after, or base / after SFT / after GRPO) and ends with
`write_demo_json`. A family that is one GRPO recipe (arithmetic, json) is `grpo_before_after(recipe)`: the base
model evaluated on the held-out rows, trained, evaluated again the same way (greedy, the training template and
rewards: grpokit.evaluation), the table of `metric_rows`, two samples, demo.json, eval/results.json (steps 0 and
the last) and the run report, whose path it prints.

`--output-dir` is replaced only when its authorship record says it is an earlier demo (kind demo,
grpokit.run.record); a training run and any other non-empty folder are refused before the model loads, as
`grpokit train --overwrite` refuses a folder that is no run (grpokit.run.ownership).
"""
from __future__ import annotations

import importlib.resources
import json
import time
from pathlib import Path

from rich.table import Table

from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation import pct  # one percentage format for every table
from grpokit.evaluation.paired import Paired, as_paired, paired, unpaired
from grpokit.run import RunDir, run_end
from grpokit.run.writer import write_file

# The shipped recipes: package data (the wheel carries them; a checkout's top-level recipes/ links here), so `grpokit
# demo` runs from any folder of any install.
RECIPES = Path(str(importlib.resources.files("grpokit") / "recipes"))
# A difference between two models is "beyond noise" by grpokit.evaluation.paired's rule: the exact sign test for
# pass/fail rows, SIGMAS standard errors for the rest.


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


def paired_recipes(overrides, sft_path: Path, grpo_path: Path, what: str):
    """(SFT recipe, GRPO recipe) of a demo that trains both, `--set` applied to each; refused (nothing loaded) when a
    recipe is missing or their prompt settings differ (the warm start would teach prompts GRPO never shows:
    grpokit.training.lineage)."""
    from grpokit.recipe import load_recipe
    from grpokit.training import prompt_drift

    for path in (sft_path, grpo_path):
        if not path.is_file():
            raise GrpokitError([Problem(str(path), f"a recipe of {what} is missing",
                                        "reinstall grpokit (its package carries the recipes: grpokit/recipes/)")])
    sft, grpo = load_recipe(sft_path, overrides), load_recipe(grpo_path, overrides)
    drift = prompt_drift(sft, grpo)
    if drift:
        raise GrpokitError([Problem(f"{sft_path} and {grpo_path}", f"their {', '.join(drift)} differ",
                                    "give both recipes the same prompt settings")])
    return sft, grpo


def claim_warm_start(output_dir: str, overrides, sft_path: Path, grpo_path: Path, what: str):
    """(SFT recipe, GRPO recipe, the GRPO run's folder, the SFT run's folder `<output_dir>-sft`) of a demo that runs
    SFT then GRPO from it: both recipes loaded (`paired_recipes`) and both folders claimed before any model loads."""
    sft, grpo = paired_recipes(overrides, sft_path, grpo_path, what)
    inputs = [str(sft_path), str(grpo_path), sft.resolve_data_path(sft.data.train), grpo.resolve_data_path(grpo.data.train)]
    return sft, grpo, claim_run_dir(output_dir, keep=inputs), claim_run_dir(f"{str(output_dir).rstrip('/')}-sft", keep=inputs)


def kept_sft(sft_recipe, sft_dir: Path) -> dict | None:
    """The SFT run of a stopped demo, when `--resume` may keep it: its run.json says an SFT run finished (completed;
    claim_run_dir has checked the folder is a demo's) with the recipe this demo would train (`--set`
    applied: every value compared but output_dir, which the run sets to its folder). None: SFT runs again."""
    import yaml

    run = RunDir(sft_dir)
    status = run.read_status() if run.is_run() else {}
    if status.get("status") != "completed" or status.get("kind") != "sft":
        return None
    ran, wanted = run.raw_config() or {}, yaml.safe_load(sft_recipe.to_yaml())  # config.yaml: the recipe's to_yaml()
    same = {**ran, "output_dir": None} == {**wanted, "output_dir": None}
    return status if same else None


def sft_then_grpo(sft_recipe, grpo_recipe, sft_dir: Path, run_dir: Path, names: tuple[str, str], callbacks, t0: float,
                  overrides: list[str] | None = None, resume: bool = False, again: str | None = None):
    """SFT into `sft_dir`, then GRPO from it into `run_dir` with the settings `--init-from` gives a trained model,
    except those the demo's `--set` (`overrides`) names, as `grpokit train --init-from` keeps them: (the SFT
    summary, the GRPO recipe as it ran, its lineage, GRPO's TrainResult, seconds from `t0` to SFT's end). `names`:
    the two recipes' file names, for the progress lines.

    `resume` (`grpokit demo --resume`, the command `again`): a finished SFT run of the same recipe is kept, not
    trained again (`kept_sft`), and a GRPO run stopped part way continues from its last checkpoint (one that
    finished is kept: its model is read from its last checkpoint). An SFT stage stopped by the user stops the demo
    with the command that goes on."""
    from grpokit.console import console
    from grpokit.training import TrainResult, apply_init_from, train, train_sft

    sft = kept_sft(sft_recipe, sft_dir) if resume else None
    if sft is not None:
        console.print(f"SFT warm start: kept from the stopped demo ({sft_dir}, completed at step {sft.get('step')})")
    else:
        console.print(f"SFT warm start: {names[0]} -> {sft_dir}")
        sft = train_sft(sft_recipe, run_dir=sft_dir, overwrite=True, kind="demo",
                        log=lambda m: console.print(m, markup=False)).summary
        if sft.get("status") == "interrupted":
            go_on = f"run `{again} --resume` to start it again" if again else "run the demo again"
            raise GrpokitError([Problem(str(sft_dir), "the demo was stopped during its SFT warm start: nothing was "
                                        "compared yet", go_on)], exit_code=1)
    seconds_sft = time.time() - t0
    recipe, lineage = apply_init_from(grpo_recipe, str(sft_dir), list(overrides or []))
    grpo_run = RunDir(run_dir)
    earlier = grpo_run.read_status() if resume and grpo_run.is_run() else {}
    if earlier and (earlier.get("init_from") or {}).get("run") == str(Path(sft_dir).resolve()) and \
            grpo_run.resume_checkpoint(note=lambda _: None) is not None:
        console.print(f"GRPO from the SFT model: going on with {run_dir} from its last checkpoint")
        grpo = train(recipe, run_dir=run_dir, resume=True, init_from=lineage, callbacks=callbacks, kind="demo")
        if grpo.model is None:  # it had finished: its model is its last checkpoint's
            from grpokit import models

            last = grpo_run.latest_checkpoint()
            grpo = TrainResult(grpo.summary, models.load_recipe_model(grpo_recipe.model, last), Path(run_dir))
    else:
        console.print(f"GRPO from the SFT model: {names[1]} -> {run_dir}")
        grpo = train(recipe, run_dir=run_dir, overwrite=True, init_from=lineage, callbacks=callbacks, kind="demo")
    return sft, recipe, lineage, grpo, seconds_sft


def evaluate_sets(model, tokenizer, recipe, sets, heldout_samples: int = 0) -> dict:
    """{set: EvalResult} of one model, greedy, on the held-out rows and each copy of them evaluation makes
    (grpokit.evaluation.eval_sets: perturbed, rewritten); `heldout_samples` > 0 also samples each held-out row that
    many times at the recipe's temperature (pass@k)."""
    from grpokit.evaluation import evaluate

    return {kind: evaluate(model, tokenizer, recipe, rows, k_samples=heldout_samples if kind == "heldout" else 0)
            for kind, rows in (("heldout", sets.heldout), *sets.variants.items())}


def paired_difference(x: dict | None, y: dict | None) -> Paired | None:
    """x minus y of two evaluations of one set (EvalResult dicts: accuracy, rows, scores), None where either is
    missing: paired where both answered the same rows (`scores`: each row's primary-metric score, pass/fail for the
    exact sign test), else two independent shares (grpokit.evaluation.paired)."""
    if not x or not y or x["accuracy"] is None or y["accuracy"] is None:
        return None
    xs, ys = x.get("scores") or [], y.get("scores") or []
    if len(xs) > 1 and len(xs) == len(ys):
        d = paired(xs, ys)
        if d is not None:
            return d
    return unpaired(x["accuracy"], x["rows"], y["accuracy"], y["rows"])


def said(diff) -> str:
    """A difference in points with whether it is beyond noise and the test that says so (Paired.said); a stored
    difference (its JSON list) reads the same."""
    diff = as_paired(diff)
    return "not measured" if diff is None else diff.said()


def results_table(rows: list[tuple[str, ...]], columns: tuple[str, ...] = ("before", "after"),
                  title: str = "held-out evaluation (greedy)", end: dict | None = None, first: str = "metric") -> Table:
    """A metric per row (`first`: what a row is), a stage per column; `end` (grpokit.run.run_end) of a run that
    stopped early puts its step in the title."""
    if end and not end["reached_end"]:
        title += f"; after = step {end['step']}" + (f" of {end['max_steps']}" if end["max_steps"] else "") + \
            f" ({end['status']})"
    table = Table(title=title)
    table.add_column(first)
    for c in columns:
        table.add_column(c, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def verdict(sample: dict, metric: str | None) -> str:
    """A printed sample's verdict by the task's correctness reward (evaluation's `correct`: 1 right, 0 wrong)."""
    ok = sample.get("correct")
    if ok is None:
        return "not judged: the task has no correctness reward"
    if ok >= 1:
        return f"right by {metric or 'the correctness reward'}"
    if ok <= 0:
        return f"wrong by {metric or 'the correctness reward'}; the answer is {sample.get('answer')}"
    return f"{metric} {ok:.2f}"


def sample_lines(samples: list[dict], label: str, metric: str | None, n: int = 2) -> list[str]:
    """The samples a demo prints, each with its verdict (a wrong `18 + 40 = 68` says so)."""
    return [f"sample {label} ({verdict(s, metric)}) Q: {s['question']}\n  {s['completion']!r}" for s in samples[:n]]


def show(rows: list[tuple[str, ...]], columns: tuple[str, ...], lines: list[str], end: dict | None = None,
         title: str = "held-out evaluation (greedy)") -> dict:
    """Print a demo's table and the lines under it, and return them as demo.json keeps them (`shown`): the run's
    report shows the same table and lines (grpokit.report.sections.demo_section), so the page says what the
    terminal said."""
    from grpokit.console import console, print_table

    table = results_table(rows, columns=columns, title=title, end=end)
    print_table(table)
    for line in lines:
        console.print(line, markup=False, highlight=False)
    return {"title": str(table.title), "columns": ["metric", *columns], "rows": [list(r) for r in rows],
            "lines": list(lines)}


def write_demo_json(run_dir: Path, result: dict) -> None:
    write_file(RunDir(run_dir).demo_file, json.dumps(result, indent=2, ensure_ascii=False), within=run_dir)


def metric_rows(*evals) -> list[tuple[str, ...]]:
    """The table rows of evaluations of one set (grpokit.evaluation.evaluate.EvalResult), a column each: every
    correctness metric of the task (accuracy; field accuracy and valid rate), the format rate where a format reward
    exists, length, cut-off."""
    first = evals[0]
    rows = [(m, *(pct(e.metrics.get(m), e.rows) for e in evals)) for m in first.metrics]  # with its interval
    if not rows:  # a task without a correctness reward: its table still says so
        rows = [("accuracy", *(pct(e.accuracy, e.rows) for e in evals))]
    if any(e.format_rate is not None for e in evals):
        rows.append(("format rate", *(pct(e.format_rate) for e in evals)))
    return rows + [("mean completion length (tokens)", *(f"{e.mean_length:.1f}" for e in evals)),
                   ("cut off at max length", *(pct(e.truncated_rate) for e in evals))]


def grpo_before_after(recipe_path: Path, output_dir: str, overrides: list[str] | None = None,
                      callbacks: list | None = None, what: str = "problems") -> dict:
    """One GRPO recipe as a demo (module docstring); `callbacks`: further TrainerCallbacks for its training
    (benchmarks, tests); `what`: the held-out rows, as the progress lines name them."""
    from grpokit import models
    from grpokit.console import console
    from grpokit.data import load_datasets
    from grpokit.evaluation import evaluate
    from grpokit.generation import dtype_name
    from grpokit.recipe import load_recipe
    from grpokit.training import train

    path = Path(recipe_path)
    if not path.is_file():
        raise GrpokitError([Problem(str(path), "the demo recipe is missing",
                                    "reinstall grpokit (its package carries the recipes: grpokit/recipes/)")])
    recipe = load_recipe(path, overrides)
    run_dir = claim_run_dir(output_dir, keep=[str(path), recipe.resolve_data_path(recipe.data.train)])
    t0 = time.time()
    tokenizer, model = models.load_recipe_tokenizer(recipe.model), models.load_recipe_model(recipe.model)
    _, eval_rows, _ = load_datasets(recipe)
    console.print(f"evaluating the base model on {len(eval_rows)} held-out {what} (greedy, in {dtype_name(model)}) ...")
    before = evaluate(model, tokenizer, recipe, eval_rows)
    console.print("before: " + ", ".join(f"{name} {value}" for name, value, _ in metric_rows(before, before)[:2]))
    grpo = train(recipe, run_dir=run_dir, overwrite=True, model=model, tokenizer=tokenizer, callbacks=callbacks,
                 kind="demo")
    summary, trained = grpo.summary, grpo.model
    end = run_end(summary, recipe.train.max_steps)
    if summary.get("status") == "interrupted":  # Ctrl-C / SIGTERM: the user asked to stop, not to evaluate
        return stopped(run_dir, {"before": before.as_dict(), "after": None, "train": summary, "run_end": end}, end, t0)
    if end["note"]:
        console.print(f"[yellow]note:[/] {end['note']}")
    console.print(f"evaluating the trained model (greedy, in {dtype_name(trained)}) ...")
    after = evaluate(trained, tokenizer, recipe, eval_rows)
    shown = show(metric_rows(before, after), ("before", "after"),
                 sample_lines(after.samples, "after training", after.metric), end=end)
    result = {"before": before.as_dict(), "after": after.as_dict(), "train": summary, "run_end": end, "shown": shown}
    return finish(run_dir, result, recipe, eval_rows, before, after, t0)


def finish(run_dir: Path, result: dict, recipe, eval_rows, before, after, t0: float, also: str = "") -> dict:
    """A demo that trained to its end: the time, demo.json, the before/after report, and where they are (`also`:
    what else the demo wrote, after the run directory's files)."""
    from grpokit.console import console

    result["seconds_total"] = round(time.time() - t0, 1)
    write_demo_json(run_dir, result)
    report = write_before_after_report(run_dir, recipe, eval_rows, before, after, result["train"])
    end = result["run_end"]
    done = "finished" if end["reached_end"] else f"stopped at step {end['step']} ({end['status']})"
    console.print(f"demo {done} in {result['seconds_total'] / 60:.1f} min; run directory: {run_dir} "
                  f"(demo.json, metrics.jsonl, samples.jsonl, checkpoints/){also}")
    console.print(f"report: {report}")
    return result


def stopped(run_dir: Path, result: dict, end: dict, t0: float, again: str | None = None) -> dict:
    """The demo stopped by the user during training (`result`: what it has so far): the checkpoint is saved,
    demo.json written, nothing more is evaluated. `again`: the demo's command, where `--resume` goes on with it."""
    from grpokit.console import console

    result["seconds_total"] = round(time.time() - t0, 1)
    write_demo_json(run_dir, result)
    console.print(f"demo stopped at step {end['step']} of {end['max_steps']} after "
                  f"{result['seconds_total'] / 60:.1f} min: the trained model was not evaluated")
    if again:
        console.print(f"go on with: {again} --resume (the finished SFT warm start is kept, GRPO continues from its "
                      "last checkpoint, then every model is evaluated)")
    else:
        console.print(f"continue training with: grpokit train --resume {run_dir}; then evaluate every checkpoint "
                      f"with: grpokit eval {run_dir}")
    return result


def write_before_after_report(run_dir: Path, recipe, eval_rows, before, after, summary) -> Path:
    """The before/after evaluation as eval/results.json (steps 0 and last, with what each EvalResult carries: a
    preference task's win rate), then report.html."""
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
