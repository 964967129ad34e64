"""`grpokit demo --task sft-vs-grpo`: the 0.6B-Base article's experiment on one task, as one command.

    grpokit demo --task sft-vs-grpo [--output-dir runs/sft-vs-grpo] [--set train.seed=1]     # arithmetic
    grpokit demo --task sft-vs-grpo-json [--output-dir runs/sft-vs-grpo-json]                 # JSON extraction

A task family offers the comparison by naming its SFT and GRPO recipes in a demo row (`Demo.recipes` in
grpokit.families: math's and json's); from Python, `run(DIR, recipes=(SFT_RECIPE, GRPO_RECIPE))` takes any pair
with the same rows. From the same base model, rows and prompt template it trains four pipelines and evaluates
each final model, and the base, on the held-out rows and every copy of them the family makes: a perturbed copy
(new numbers, arithmetic) and a rewritten copy (new wording, the phrasings or sentence shapes no training row
uses: grpokit.families' `rewritten` variants). Scores are the task's primary metric (accuracy for arithmetic, the
share of fields right for JSON), compared row by row:

    sft             grpokit sft SFT_RECIPE                                   (worked solutions, the control)
    grpo            grpokit train GRPO_RECIPE                                (GRPO from the base model)
    sft-then-grpo   grpokit train GRPO_RECIPE --init-from <the sft run>     (continuing settings: lr <= 3e-6)
    grpo-then-sft   grpokit sft SFT_RECIPE --init-from <the grpo run> --set train.max_steps=POLISH_STEPS
                                                                             (the article's SFT polish after GRPO)

Budgets are the recipes' steps, not equal wall-clock: each stage runs as a user would run it alone, and the table
gives every pipeline's minutes (a two-stage pipeline's are both stages'), so "better per minute" is read off the
table rather than built into it. The second stage reuses the first pipeline's model (sft-then-grpo starts from the
sft run, grpo-then-sft from the grpo run), so the four pipelines cost three trainings and a short polish.

It prints one table (a pipeline per row: held-out, perturbed, rewritten, format, minutes) and a verdict: which final
model is best on held-out plus rewritten questions, GRPO's own share (sft-then-grpo minus sft) and whether it is
beyond noise (grpokit.evaluation.paired: the exact sign test on the rows where two models disagree), and whether SFT's drop from held-out to rewritten questions
is larger than GRPO's (the question the article raises), each said from these numbers alone, never as an
article's verdict. `comparison.json` in the output folder holds every figure; the four runs are its sub-folders (each a demo run: `grpokit eval`, `report`, `export`
work on them). docs/workflows.md "SFT or GRPO: the comparison" explains how to read it. A comparison stopped or
killed part way goes on with `--resume` (grpokit.demo.progress.Progress: its finished trainings and figures kept).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

from grpokit.demo.common import RECIPES, claim_run_dir, evaluate_sets, paired_difference, paired_recipes, results_table, said
from grpokit.demo.progress import PROGRESS_FILE, Progress, Stages, recipes_identity
from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation.paired import SIGMAS, share_stderr
from grpokit.evaluation import pct
from grpokit.report.comparison import REPORT_ENTRIES, RESULT_FILE, comparison_metric, comparison_table, write_comparison_report

PIPELINES = ("sft", "grpo", "sft-then-grpo", "grpo-then-sft")
# The other skill whose retention every comparison measures: JSON extraction's, or arithmetic's when JSON is the
# compared family (the first recipe here of another family: `retention_recipe`), each on 500 rows its training and
# held-out sets never show, scored on what the skill is: for JSON the fields alone, read from the first object
# anywhere in the answer (a right object with a stray fence after it counted right: the strict reading made the
# 100-row column measure form, docs/measurements.md "SFT or GRPO: the comparison").
# `grpokit data generate json retention.jsonl --rows 500 --seed 2 --exclude train.jsonl --exclude eval.jsonl`
RETENTION_RECIPES = {
    "smollm2-json-extraction.yaml": ("data.eval=builtin:json/retention.jsonl", "data.eval_max_rows=500",
                                     "rewards=[{name: json_fields, params: {anywhere: true}}]"),
    "smollm2-arithmetic.yaml": ("data.eval=builtin:arithmetic/eval500.jsonl", "data.eval_max_rows=500"),
}
# A GRPO pipeline and its nearest SFT checkpoint are a matched pair (RL's Razor compares forgetting at equal new-task
# accuracy) when their held-out accuracies are this close; farther apart, the verdict says the pair is not matched
# (GRPO from the base at 23-26% against the base's 12%, docs/measurements.md "SFT or GRPO: the comparison").
MATCHED_WITHIN = 0.05
POLISH_STEPS = 10  # a little SFT after GRPO to tidy the format (the 0.6B-Base article), a quarter of the SFT run


def _recipes(overrides, sft_path: Path, grpo_path: Path):
    sft, grpo = paired_recipes(overrides, sft_path, grpo_path, "the comparison")
    if (sft.data.train, sft.data.eval) != (grpo.data.train, grpo.data.eval):
        raise GrpokitError([Problem(f"{sft_path} and {grpo_path}", "they train or evaluate on different rows",
                                    "give both recipes the same data.train and data.eval")])
    return sft, grpo


def claim_comparison(output_dir: str, keep: list[str], identity: dict, resume: bool, again: str,
                     runs: tuple[str, ...] = PIPELINES, files: tuple[str, ...] = ()) -> tuple[Path, Progress]:
    """The comparison's folder, claimed before any model loads: new or an earlier comparison's, with a run folder per
    name of `runs` (each new or an earlier demo run) and `files` of its own beside comparison.json, the page and the
    progress record; with that record (`Progress`: `resume` goes on with the one there, refused unless it was
    written with the same recipes and --set, `identity`). `again`: the command that runs this comparison."""
    from grpokit.run.claims import claim

    if not str(output_dir).strip():
        raise GrpokitError([Problem("--output-dir", "is empty (it would mean the current folder)",
                                    "name a new folder for the comparison, e.g. runs/sft-vs-grpo")])
    out = Path(output_dir)
    progress = Progress(out, identity, resume, again)  # reads only: a refusal leaves the folder as it was
    entries = {RESULT_FILE: "file", PROGRESS_FILE: "file", **REPORT_ENTRIES, **dict.fromkeys(files, "file"),
               **dict.fromkeys(runs, "dir")}
    claim(out, "comparison", entries, "pass --output-dir a new folder (or an earlier comparison's)")
    for name in runs:  # each pipeline's run: new, or an earlier comparison's demo run
        claim_run_dir(str(out / name), keep=keep)
    progress.start()
    return out, progress


def _difference(a: dict, b: dict, key: str) -> tuple[float, float] | None:
    """Model a's score minus model b's on one set (`paired_difference`), None where either is missing."""
    return paired_difference(a["sets"].get(key), b["sets"].get(key))


def sampled_set(model: dict) -> dict:
    """The model's held-out sampled pass@1 as a set `_difference` reads (each row's score: the share of its samples
    that passed); no sets where the held-out rows were not sampled."""
    held = model["sets"].get("heldout") or {}
    hits, n = held.get("sample_hits") or [], held.get("samples_per_problem") or 0
    if not hits or not n:
        return {"sets": {}}
    return {"sets": {"heldout": {"accuracy": (held.get("pass_at_k") or {}).get("1"), "rows": len(hits),
                                 "scores": [h / n for h in hits]}}}


def at_floor(result: dict) -> bool:
    """Whether a held-out accuracy is not beyond noise of zero (at most SIGMAS standard errors): a model that solves
    (next to) no row, whose drop to another set is 0 by construction rather than measured."""
    acc, rows = result.get("accuracy"), result.get("rows") or 0
    return acc is not None and rows > 0 and acc <= SIGMAS * share_stderr(acc, rows)


def verdict(models: dict[str, dict]) -> list[str]:
    """What these numbers show, in sentences (the module docstring): the best final model, GRPO's own share, and
    whether SFT loses more than GRPO on new wording (the question the 0.6B-Base article raises; the lines say only
    what the numbers show, never an article's verdict)."""
    lines = []
    scored = {n: m for n, m in models.items() if n != "base" and m["sets"].get("heldout")}
    key = "rewritten" if all(m["sets"].get("rewritten") for m in scored.values()) else None

    def score(m):
        return m["sets"]["heldout"]["accuracy"] + (m["sets"][key]["accuracy"] if key else 0.0)

    if scored:
        best = max(scored, key=lambda n: score(scored[n]))
        runner = max((n for n in scored if n != best), key=lambda n: score(scored[n]), default=None)
        what = f"held-out plus rewritten {comparison_metric(models)}" if key else f"held-out {comparison_metric(models)}"
        line = f"best final model by {what}: {best}"
        if runner:
            line += f"; against {runner}: held-out {said(_difference(scored[best], scored[runner], 'heldout'))}"
            if key:
                line += f", rewritten {said(_difference(scored[best], scored[runner], key))}"
        lines.append(line)
    if "sft-then-grpo" in scored and "sft" in scored:
        a, b = scored["sft-then-grpo"], scored["sft"]
        sampled = _difference(sampled_set(a), sampled_set(b), "heldout")
        lines.append("GRPO's own share (sft-then-grpo minus sft): held-out "
                     f"{said(_difference(a, b, 'heldout'))}"
                     + (f", rewritten {said(_difference(a, b, key))}" if key else "")
                     + (f"; sampled pass@1 on held-out rows {said(sampled)}" if sampled else ""))
    if key and "sft" in scored and "grpo" in scored:
        drops = {n: _difference({"sets": {"a": scored[n]["sets"]["heldout"]}}, {"sets": {"a": scored[n]["sets"][key]}},
                                "a") for n in ("sft", "grpo")}
        floor = [n for n in ("sft", "grpo") if at_floor(scored[n]["sets"]["heldout"])]
        if floor:  # a model that solves (next to) nothing has no drop to measure: 0% on both is no robustness
            lines.append(f"held-out -> rewritten: {' and '.join(floor)} at the floor on held-out rows "
                         f"({', '.join(pct(scored[n]['sets']['heldout']['accuracy']) for n in floor)}, not beyond "
                         "noise of zero): no drop to compare, so whether SFT loses more on new wording than GRPO is not "
                         "tested here")
        elif drops["sft"] and drops["grpo"]:
            (sft_drop, sft_se), (grpo_drop, grpo_se) = drops["sft"][:2], drops["grpo"][:2]
            drops_more = sft_drop - grpo_drop > SIGMAS * math.hypot(sft_se, grpo_se)
            ahead = _difference(scored["grpo"], scored["sft"], key)  # GRPO minus SFT on new wording
            grpo_behind = ahead is not None and ahead.clearly_behind
            line = f"held-out -> rewritten: sft {100 * -sft_drop:+.1f} points, grpo {100 * -grpo_drop:+.1f}; "
            if drops_more and ahead is not None and ahead.clearly_ahead:
                line += f"SFT loses clearly more on new wording than GRPO and GRPO is ahead of it there ({said(ahead)})"
            elif drops_more and not grpo_behind:
                line += (f"SFT loses clearly more on new wording than GRPO, and GRPO is not clearly behind it there "
                         f"({said(ahead)}); that GRPO answers new wording better is not shown")
            elif drops_more:
                line += (f"SFT loses clearly more on new wording than GRPO, yet stays {100 * -ahead[0]:.1f} points "
                         "ahead of it there: that GRPO answers new wording better is not shown")
            else:
                line += "SFT does not lose clearly more on new wording than GRPO here"
            lines.append(line)
    return lines


def retention_recipe(recipe):
    """The other skill every final model is also scored on (RL's Razor: at matched new-task accuracy, RL forgets
    less): the held-out set of the first of RETENTION_RECIPES whose family is not the compared one, with its own
    template and rewards."""
    from grpokit.families import family_of
    from grpokit.recipe import load_recipe

    mine = family_of(recipe.rewards)
    for name, overrides in RETENTION_RECIPES.items():
        other = load_recipe(RECIPES / name, list(overrides))
        if family_of(other.rewards) is not mine:
            return other
    return None


def _load(recipe, path: str | None):
    from grpokit import models
    from grpokit.run import refuse_nonfinite

    model = models.load_recipe_model(recipe.model, None if path is None else Path(path), on_device=True)
    if path is not None:
        refuse_nonfinite(model, path)
    return model


def retention_verdict(matched: dict[str, dict], retention) -> list[str]:
    """Per pipeline with GRPO in it: its retention against the trained SFT checkpoint of the nearest held-out
    accuracy, with the start model's retention first (what neither has forgotten yet)."""
    if not matched:
        return []
    what = retention.data.eval if retention is not None else "another task"
    parts = [f"{name} {pct(m['retention'])} against SFT step {m['sft_step']} {pct(m['sft_retention'])} (held-out "
             f"{pct(m['heldout'])} against {pct(m['sft_heldout'])}"
             + ("" if abs(m["heldout"] - m["sft_heldout"]) <= MATCHED_WITHIN + 1e-9 else
                f"; not a matched pair: no SFT checkpoint within {MATCHED_WITHIN * 100:.0f} points")
             + f"): {said(m['difference'])}" for name, m in matched.items()]
    start = next(iter(matched.values())).get("start_retention")  # one start for every pipeline of a comparison
    return [f"retention of {what} at matched held-out accuracy"
            + ("" if start is None else f" (the start model kept {pct(start)})") + ": " + "; ".join(parts)]


def evaluate_models(recipe, targets: dict[str, str | None], log, retention=None,
                    progress: Progress | None = None) -> dict[str, dict]:
    """Each model of `targets` (name -> model folder or the recipe's base) on the held-out rows and every copy of
    them evaluation makes (grpokit.evaluation.eval_sets), greedy; with `retention` (a recipe of another family)
    also on its held-out rows (`retention` in each model's entry). With `progress`, each model's figures are a part
    of it (kept as they are measured, taken from it when the comparison resumes)."""
    from grpokit import models
    from grpokit.evaluation import eval_sets, evaluate
    from grpokit.task import Task

    task = Task.of(recipe)
    sets = eval_sets(recipe)
    tokenizer = models.load_recipe_tokenizer(recipe.model)
    kept = _rows_of(retention) if retention is not None else None

    def one(name: str, path: str | None) -> dict:
        t0 = time.time()
        model = _load(recipe, path)
        # the held-out rows also sampled as training samples them: a group (num_generations) per row at the
        # recipe's temperature, where GRPO's gain shows when greedy decoding hides it (the sampled pass@1)
        results = {kind: r.as_dict() for kind, r in evaluate_sets(model, tokenizer, task, sets,
                                                                   recipe.train.num_generations).items()}
        entry = {"path": path or recipe.model.name, "sets": results}
        if kept is not None:
            entry["retention"] = evaluate(model, tokenizer, retention, kept).as_dict()
        log(f"{name}: " + ", ".join(f"{k} {pct(v['accuracy'])}" for k, v in results.items())
            + (f", retention {pct(entry['retention']['accuracy'])}" if kept is not None else "")
            + f" ({time.time() - t0:.0f}s)")
        return entry

    once = progress.once if progress is not None else lambda key, fn: fn()
    return {name: once(f"evaluation of {name}", lambda: one(name, path)) for name, path in targets.items()}


def _rows_of(recipe) -> list[dict]:
    from grpokit.data import load_datasets

    return load_datasets(recipe)[1]


def matched_retention(recipe, retention, sft_dir: Path, models: dict[str, dict], log) -> dict[str, dict]:
    """For each pipeline with GRPO in it: the SFT run's trained checkpoint whose held-out accuracy is nearest the
    pipeline's, with that checkpoint's retention beside the pipeline's, and their paired difference (pipeline minus
    SFT checkpoint): "forgets less at matched accuracy" as a number (RL's Razor). The start (`models["base"]`) is
    never the match: it has trained on nothing, so against it the difference is the pipeline's own forgetting, not
    RL's against SFT's (the composition demo's seed 1 learned nothing and matched its GRPO run with the start: docs/
    measurements.md "Composition from answer-only rows"); its retention is given beside as `start_retention`."""
    from grpokit import models as model_io
    from grpokit.evaluation import evaluate
    from grpokit.run import RunDir
    from grpokit.task import Task

    task, tokenizer = Task.of(recipe), model_io.load_recipe_tokenizer(recipe.model)
    heldout, kept = _rows_of(recipe), _rows_of(retention)
    points = {}
    final = RunDir(sft_dir).latest_checkpoint()
    for step, path in sorted(RunDir(sft_dir).by_step().items()):
        if path == final:
            points[step] = (models["sft"]["sets"]["heldout"], models["sft"]["retention"])
            continue
        model = _load(recipe, str(path))
        points[step] = (evaluate(model, tokenizer, task, heldout).as_dict(),
                        evaluate(model, tokenizer, retention, kept).as_dict())
        log(f"sft checkpoint {step}: held-out {pct(points[step][0]['accuracy'])}, retention "
            f"{pct(points[step][1]['accuracy'])}")
        del model
    if not points:  # the SFT run saved no checkpoint: nothing to match with
        return {}
    out = {}
    for name, m in models.items():
        if "grpo" not in name or "retention" not in m:
            continue
        acc = m["sets"]["heldout"]["accuracy"]
        step = min(points, key=lambda s: abs(points[s][0]["accuracy"] - acc))
        held, kept_sft = points[step]
        diff = paired_difference(m["retention"], kept_sft)
        out[name] = {"sft_step": step, "sft_heldout": held["accuracy"], "heldout": acc,
                     "sft_retention": kept_sft["accuracy"], "retention": m["retention"]["accuracy"],
                     "start_retention": models["base"]["retention"]["accuracy"],
                     "difference": None if diff is None else diff.stored()}
    return out


def run(output_dir: str, overrides: list[str] | None = None, recipes: tuple[Path, Path] | None = None,
        callbacks: list | None = None, resume: bool = False, again: str | None = None) -> dict:
    """The comparison (module docstring) of `recipes` (the SFT recipe, the GRPO recipe: a family's demo row gives
    them); `callbacks`: further TrainerCallbacks for its GRPO trainings (tests); `resume`: go on with the stopped
    comparison in `output_dir` (`Progress`); `again`: the command that runs it (grpokit.demo.run_demo's)."""
    from grpokit.console import console, print_table
    from grpokit.run.writer import write_file
    from grpokit.training import apply_init_from, train, train_sft

    if not recipes or len(recipes) != 2:
        raise GrpokitError([Problem("recipes", "the comparison needs an SFT recipe and a GRPO recipe",
                                    "run it as `grpokit demo --task sft-vs-grpo` (or a family's sft-vs-grpo task)")])
    sft_path, grpo_path = (Path(p) for p in recipes)
    sft_recipe, grpo_recipe = _recipes(overrides, sft_path, grpo_path)
    keep = [str(sft_path), str(grpo_path), grpo_recipe.resolve_data_path(grpo_recipe.data.train)]
    again = again or f"grpokit demo --task sft-vs-grpo --output-dir {output_dir}"
    out, progress = claim_comparison(output_dir, keep, recipes_identity((sft_recipe, grpo_recipe), overrides),
                                     resume, again)
    dirs = {name: out / name for name in PIPELINES}
    say = lambda m: console.print(m, markup=False)  # noqa: E731
    stages = Stages(dirs, progress)
    stage, seconds, ends = stages.run, stages.seconds, stages.ends

    t_all = time.time()
    stage("sft", lambda: train_sft(sft_recipe, run_dir=dirs["sft"], overwrite=True, kind="demo", log=say),
          sft_recipe.train.max_steps)
    stage("grpo", lambda: train(grpo_recipe, run_dir=dirs["grpo"], overwrite=True, callbacks=callbacks, kind="demo"),
          grpo_recipe.train.max_steps)
    recipe, lineage = apply_init_from(grpo_recipe, str(dirs["sft"]), list(overrides or []))
    stage("sft-then-grpo", lambda: train(recipe, run_dir=dirs["sft-then-grpo"], overwrite=True, init_from=lineage,
                                         callbacks=callbacks, kind="demo"), recipe.train.max_steps)
    polish = sft_recipe.model_copy(update={"train": sft_recipe.train.model_copy(update={"max_steps": POLISH_STEPS})})
    polish, polish_lineage = apply_init_from(polish, str(dirs["grpo"]), continuing=False)
    stage("grpo-then-sft", lambda: train_sft(polish, run_dir=dirs["grpo-then-sft"], overwrite=True,
                                             init_from=polish_lineage, kind="demo", log=say), POLISH_STEPS)

    from grpokit.training.lineage import resolve_init_from

    def final(name: str) -> str | None:  # the model a user continuing from the run gets (None: its own start)
        path, lineage = resolve_init_from(str(dirs[name]))
        return None if lineage["kind"] == "run-base" else path

    targets = {"base": None, **{name: final(name) for name in PIPELINES}}
    console.print(f"evaluating the base and the four final models (greedy) on {grpo_recipe.data.eval} and its "
                  "copies ...")
    retention = retention_recipe(grpo_recipe)
    models = evaluate_models(grpo_recipe, targets, say, retention, progress)
    matched = progress.once("matched retention", lambda: matched_retention(grpo_recipe, retention, dirs["sft"],
                                                                            models, say)) if retention is not None else {}
    minutes = {"sft": seconds["sft"], "grpo": seconds["grpo"],
               "sft-then-grpo": seconds["sft"] + seconds["sft-then-grpo"],
               "grpo-then-sft": seconds["grpo"] + seconds["grpo-then-sft"]}
    for name, s in minutes.items():
        models[name]["minutes"] = s / 60
        models[name]["stage_minutes"] = seconds[name] / 60
    models["base"]["minutes"] = None
    print_table(models_table(models))
    lines = verdict(models) + retention_verdict(matched, retention)
    for line in lines:
        console.print(f"[bold]verdict:[/] {line}", highlight=False)
    result = {"pipelines": list(PIPELINES), "models": models, "verdict": lines, "polish_steps": POLISH_STEPS,
              "recipes": {"sft": str(sft_path), "grpo": str(grpo_path)}, "overrides": list(overrides or []),
              "continuing": lineage.get("continuing") if lineage else None, "run_end": ends, "resumed": progress.kept,
              "retention": {"recipe": None if retention is None else retention.data.eval, "matched": matched},
              "seconds_total": round(time.time() - t_all, 1)}
    write_file(out / RESULT_FILE, json.dumps(result, indent=2, ensure_ascii=False), within=out, replace=True)
    page = write_comparison_report(out)
    console.print(f"comparison finished in {result['seconds_total'] / 60:.1f} min: {out / RESULT_FILE}, {page}; the runs: "
                  + ", ".join(str(d) for d in dirs.values()))
    return result


def models_table(models: dict[str, dict]):
    columns, rows = comparison_table(models)
    return results_table(rows, tuple(columns), first="model", title=f"final models, greedy: "
                         f"{comparison_metric(models)} (a row per pipeline; minutes: all its stages)")
