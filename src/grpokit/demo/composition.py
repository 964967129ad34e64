"""`grpokit demo --task composition`: does GRPO compose skills a model has into combinations it never saw, from rows
that carry final answers only?

    grpokit demo --task composition [--output-dir runs/composition] [--set train.seed=1]

The "From Atomic to Composite" experiment on the two-step arithmetic of grpokit.families.two_step: the atomic skill
is the one-step sums, the composite task two of them in a word problem, and the held-out rows are combinations of
scenario and order of operations no training row uses. From the same base model, under one system prompt (the
three recipes of the family's demo row: the one-step SFT recipe, the two-step SFT recipe, the GRPO recipe):

    atomic        grpokit sft ATOMIC_SFT_RECIPE                                 (one-step worked sums: model A)
    grpo          grpokit train GRPO_RECIPE --init-from A                       (answer-only rows; lr 3e-6)
    sft-answers   grpokit sft SFT_RECIPE --init-from A                          (the same rows' answers only)
    rft           grpokit data mine-solutions A --recipe GRPO_RECIPE --samples 8 --max-rows N --out rft.jsonl
                  grpokit sft SFT_RECIPE --set data.train=rft.jsonl --init-from A   (A's own right solutions)
    sft-worked    grpokit sft SFT_RECIPE --set data.train=worked.jsonl --init-from A  (the same rows worked out:
                                                                                    what a user with worked
                                                                                    solutions would train on)

Arms (b) to (d) are the SFT-only ways to use the same rows; sft-worked needs working the rows do not carry (the
demo writes it from their operands, the family's `worked_rows`, as `data generate two-step --operands` does), so it
is the reference, not a competitor. Budgets are the recipes' steps, fixed before any held-out figure; minutes are
each pipeline's, all stages (A's and, for rft, the sampling). RFT samples GRPO's budget: the first N training rows,
N the prompts GRPO's run draws (`rft_rows`: 60 steps x 2 prompts = 120 with the shipped recipe), 8 samples each,
the completions a GRPO group of 8 draws for each (refill aside): the same sampling, not 8 of every row (8x more).

Each final model and A are evaluated by the GRPO recipe (its template and rewards) on the held-out rows (unseen
compositions) greedy and sampled (a group of num_generations per row at its temperature: pass@1, pass@8), on the
`seen` copy of them (the same numbers in trained compositions, greedy), and on the JSON extraction family's
held-out set (retention, grpokit.demo.sft_vs_grpo). The verdict gives GRPO's own share against each SFT arm
(paired differences on the same rows, beyond noise by grpokit.evaluation.paired's exact sign test), against the best SFT-only arm with the same rows whether
it reaches +5 points beyond noise (the bar a GRPO gain must clear to matter here), each model's seen-minus-unseen gap, and GRPO's retention against the
answer-only SFT run's checkpoint of the nearest held-out accuracy. comparison.json and report.html (grpokit.report.
comparison) hold every figure; each arm is a run folder; worked.jsonl and rft.jsonl are the SFT arms' rows.
docs/measurements.md "Composition from answer-only rows" has the measured runs.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from grpokit.demo.common import paired_difference, paired_recipes, results_table, said
from grpokit.demo.progress import Stages, recipes_identity
from grpokit.evaluation.paired import SIGMAS, as_paired
from grpokit.demo.sft_vs_grpo import (claim_comparison, evaluate_models, matched_retention, retention_recipe,
                                      retention_verdict, sampled_set)
from grpokit.errors import GrpokitError, Problem
from grpokit.families import family_of
from grpokit.report.comparison import RESULT_FILE, comparison_table, write_comparison_report
from grpokit.run.writer import write_file

ARMS = ("atomic", "grpo", "sft-answers", "rft", "sft-worked")
SFT_ONLY = ("sft-answers", "rft")  # the SFT-only ways to use the answer-only rows GRPO trains on
WORKED, MINED = "worked.jsonl", "rft.jsonl"  # the worked-SFT arm's rows and the RFT arm's, in the output folder
RFT_SAMPLES = 8  # completions sampled per training row for RFT: a GRPO group's worth (num_generations)
TARGET = 0.05  # GRPO's own share must be at least 5 points, and beyond noise, to count as a gain


def rft_rows(grpo) -> int:
    """How many training rows RFT samples: as many prompts as the GRPO recipe's run draws (max_steps x the prompts of
    a step), so that RFT with a group's worth of samples a row draws the completions GRPO draws."""
    t = grpo.train
    return max(1, t.max_steps * t.per_device_train_batch_size * t.gradient_accumulation_steps // t.num_generations)


def _recipes(overrides, paths: tuple[Path, Path, Path]):
    """(one-step SFT, two-step SFT, GRPO) recipes, refused before any model loads: a missing file, prompt settings
    that differ (every arm reads one prompt), SFT and GRPO on other rows, rows that are not two-step problems."""
    from grpokit.data import load_train_rows

    atomic_path, sft_path, grpo_path = paths
    atomic, sft = paired_recipes(overrides, atomic_path, sft_path, "the composition demo")
    _, grpo = paired_recipes(overrides, sft_path, grpo_path, "the composition demo")
    if (sft.data.train, sft.data.eval) != (grpo.data.train, grpo.data.eval):
        raise GrpokitError([Problem(f"{sft_path} and {grpo_path}", "they train or evaluate on different rows",
                                    "give both recipes the same data.train and data.eval")])
    family = family_of(sft.rewards)
    if family is None or family.worked_rows is None:
        raise GrpokitError([Problem(f"{sft_path}", "its rewards read no task family that works answer-only rows out "
                                    "(the worked-SFT arm's rows)", "judge the two-step rows with math_correctness, as "
                                    "recipes/smollm2-composition-sft.yaml does")])
    try:
        worked = family.worked_rows(load_train_rows(sft))
    except ValueError as e:
        raise GrpokitError([Problem(f"{sft.data.train}", str(e), "train the composition demo on rows of `grpokit "
                                    "data generate two-step`")]) from None
    return atomic, sft, grpo, worked


def run(output_dir: str, overrides: list[str] | None = None, recipes: tuple[Path, Path, Path] | None = None,
        callbacks: list | None = None, samples: int = RFT_SAMPLES, resume: bool = False,
        again: str | None = None) -> dict:
    """The demo (module docstring) of `recipes` (the one-step SFT, two-step SFT and GRPO recipes: the family's demo
    row gives them); `callbacks`: further TrainerCallbacks for its GRPO training (tests); `samples`: RFT's per row;
    `resume`: go on with the stopped demo in `output_dir` (grpokit.demo.progress.Progress); `again`: its command."""
    from grpokit.console import console, print_table
    from grpokit.data import load_train_rows
    from grpokit.evaluation.rft import sample_solutions
    from grpokit.recipe import load_recipe
    from grpokit.training import apply_init_from, train, train_sft

    if not recipes or len(recipes) != 3:
        raise GrpokitError([Problem("recipes", "the composition demo needs a one-step SFT, a two-step SFT and a GRPO "
                                    "recipe", "run it as `grpokit demo --task composition`")])
    paths = tuple(Path(p) for p in recipes)
    atomic, sft, grpo, worked = _recipes(overrides, paths)
    keep = [*map(str, paths), *(r.resolve_data_path(r.data.train) for r in (atomic, grpo))]
    again = again or f"grpokit demo --task composition --output-dir {output_dir}"
    out, progress = claim_comparison(output_dir, keep, recipes_identity((atomic, sft, grpo), overrides), resume, again,
                                     ARMS, (WORKED, MINED))
    dirs = {name: out / name for name in ARMS}
    say = lambda m: console.print(m, markup=False)  # noqa: E731
    stages = Stages(dirs, progress)
    stage, seconds, ends = stages.run, stages.seconds, stages.ends

    def from_atomic(recipe, continuing: bool = False):
        return apply_init_from(recipe, str(dirs["atomic"]), list(overrides or []), continuing=continuing)

    def sft_on(path: Path | None):  # the two-step SFT recipe on other rows of the same problems
        recipe = sft if path is None else load_recipe(paths[1], [*(overrides or []), f"data.train={path}"])
        return from_atomic(recipe)

    t_all = time.time()
    _write_rows(out / WORKED, worked, out)
    stage("atomic", lambda: train_sft(atomic, run_dir=dirs["atomic"], overwrite=True, kind="demo", log=say),
          atomic.train.max_steps)
    recipe, lineage = from_atomic(grpo, continuing=True)
    stage("grpo", lambda: train(recipe, run_dir=dirs["grpo"], overwrite=True, init_from=lineage, callbacks=callbacks,
                                kind="demo"), recipe.train.max_steps)
    for name, path in (("sft-answers", None), ("sft-worked", out / WORKED)):
        arm, arm_lineage = sft_on(path)
        stage(name, lambda: train_sft(arm, run_dir=dirs[name], overwrite=True, init_from=arm_lineage, kind="demo",
                                      log=say), arm.train.max_steps)

    def mine() -> dict:
        rows = load_train_rows(grpo)[:rft_rows(grpo)]
        console.print(f"[bold]rft[/]: sampling {samples} completions of each of the first {len(rows)} training rows "
                      f"(GRPO's prompts) from {dirs['atomic']} ...")
        t0 = time.time()
        solutions, mined = sample_solutions(_final(dirs["atomic"]), grpo, samples, rows, log=say)
        _write_rows(out / MINED, solutions, out)
        return {"mined": mined, "seconds": time.time() - t0}

    mining = progress.once("RFT mining", mine, lambda v: isinstance(v["mined"], dict) and (out / MINED).is_file())
    mined, seconds["rft"] = mining["mined"], mining["seconds"]
    say(f"rft: {mined['rows_solved']} of {mined['rows']} rows kept at least one right solution "
        f"({mined['solutions']} distinct, {mined['right_samples']} of {mined['rows'] * samples} samples right)")
    if mined["solutions"]:
        arm, arm_lineage = sft_on(out / MINED)
        stage("rft", lambda: train_sft(arm, run_dir=dirs["rft"], overwrite=True, init_from=arm_lineage, kind="demo",
                                       log=say), arm.train.max_steps)

    targets = {name: _final(dirs[name]) for name in ARMS if name != "rft" or mined["solutions"]}
    if "rft" not in targets:  # nothing to train on: RFT leaves the model as it was
        targets["rft"] = targets["atomic"]
    targets = {name: targets[name] for name in ARMS}
    console.print(f"evaluating the one-step model and the four final models on {grpo.data.eval} (unseen "
                  "compositions: greedy and sampled), its seen copy and retention ...")
    retention = retention_recipe(grpo)
    models = evaluate_models(grpo, targets, say, retention, progress)
    matched = (progress.once("matched retention", lambda: matched_retention(grpo, retention, dirs["sft-answers"], {
        "base": models["atomic"], "sft": models["sft-answers"], "grpo": models["grpo"]}, say))
        if retention is not None else {})
    for name in ARMS:
        models[name]["stage_minutes"] = seconds.get(name, 0.0) / 60
        models[name]["minutes"] = (seconds["atomic"] + (seconds.get(name, 0.0) if name != "atomic" else 0.0)) / 60
    lines = verdict(models, mined) + retention_verdict(matched, retention)
    print_table(_table(models))
    for line in lines:
        console.print(f"[bold]verdict:[/] {line}", highlight=False)
    result = {"title": "Composition from answer-only rows", "pipelines": list(ARMS), "models": models,
              "verdict": lines, "rft": mined,
              "recipes": {"one-step SFT": str(paths[0]), "two-step SFT": str(paths[1]), "GRPO": str(paths[2])},
              "overrides": list(overrides or []), "continuing": (lineage or {}).get("continuing"), "run_end": ends,
              "resumed": progress.kept,
              "retention": {"recipe": None if retention is None else retention.data.eval, "matched": matched},
              "seconds_total": round(time.time() - t_all, 1)}
    write_file(out / RESULT_FILE, json.dumps(result, indent=2, ensure_ascii=False), within=out, replace=True)
    page = write_comparison_report(out)
    console.print(f"composition demo finished in {result['seconds_total'] / 60:.1f} min: {out / RESULT_FILE}, {page}")
    return result


def _write_rows(path: Path, rows: list[dict], folder: Path) -> None:
    """An arm's rows as JSON lines in the demo's own folder (one of the files its record names)."""
    write_file(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), within=folder)


def _final(run_dir: Path) -> str | None:
    """The model a user continuing from the run gets (None: the recipe's own base model)."""
    from grpokit.training.lineage import resolve_init_from

    path, lineage = resolve_init_from(str(run_dir))
    return None if lineage["kind"] == "run-base" and not Path(path).is_dir() else path


def _share(a: dict, b: dict) -> dict[str, tuple[float, float] | None]:
    """a minus b on the unseen compositions (greedy, sampled pass@1) and on their seen copy."""
    return {"unseen": paired_difference(a["sets"].get("heldout"), b["sets"].get("heldout")),
            "sampled": paired_difference(sampled_set(a)["sets"].get("heldout"), sampled_set(b)["sets"].get("heldout")),
            "seen": paired_difference(a["sets"].get("seen"), b["sets"].get("seen"))}


def _said(share: dict) -> str:
    return (f"unseen compositions {said(share['unseen'])}; sampled pass@1 {said(share['sampled'])}; "
            f"seen compositions {said(share['seen'])}")


def reaches_target(diff) -> bool:
    """The bar: at least TARGET above, and beyond noise (the exact sign test on pass/fail rows)."""
    diff = as_paired(diff)
    return diff is not None and diff.difference >= TARGET and diff.clearly_ahead


def verdict(models: dict[str, dict], mined: dict | None = None) -> list[str]:
    """What the numbers show, in sentences (the module docstring)."""
    grpo = models["grpo"]
    lines = [f"GRPO's gain over the one-step model (grpo minus atomic): {_said(_share(grpo, models['atomic']))}"]
    for name, what in (("sft-answers", "answer-only SFT on the same rows"), ("rft", "rejection-sampling fine-tuning "
                       "on the same rows"), ("sft-worked", "SFT on worked solutions of the same rows, which the "
                       "answer-only rows do not carry")):
        lines.append(f"grpo minus {name} ({what}): {_said(_share(grpo, models[name]))}")
    best = max(SFT_ONLY, key=lambda n: models[n]["sets"]["heldout"]["accuracy"])
    share = _share(grpo, models[best])["unseen"]
    lower = None if share is None else 100 * (share[0] - SIGMAS * share[1])
    lines.append(f"GRPO's own share against the best SFT-only arm with the same rows ({best}, by unseen compositions, "
                 f"greedy): {said(share)}; its lower end (minus 2 SE) "
                 + ("not measured" if lower is None else f"{lower:+.1f} points")
                 + f"; at least +{100 * TARGET:.0f} points and beyond noise: "
                 + ("yes" if reaches_target(share) else "no"))
    gaps = {n: paired_difference(m["sets"].get("seen"), m["sets"].get("heldout")) for n, m in models.items()}
    lines.append("seen minus unseen compositions on the same numbers (what is tied to the trained combinations): "
                 + "; ".join(f"{n} {said(g)}" for n, g in gaps.items()))
    if mined is not None and not mined.get("solutions"):
        lines.append("rft: no sampled solution was right, so the arm is the one-step model unchanged")
    return lines


def _table(models: dict[str, dict]):
    columns, rows = comparison_table(models)
    return results_table(rows, tuple(columns), first="model", title="composition: held-out = unseen compositions "
                         "(a row per arm; minutes: all its stages)")
