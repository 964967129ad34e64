"""`grpokit demo` (task arithmetic, the default): an SFT warm start on worked solutions, then GRPO from it.

    grpokit demo [--output-dir runs/demo] [--set train.seed=1]

The pipeline that gave the best final model per minute of those with GRPO in them (`grpokit demo --task
sft-vs-grpo`; the figures: docs/measurements.md "SFT or GRPO: the comparison"), run as the command pair a user
runs:

    grpokit sft recipes/smollm2-arithmetic-sft.yaml --output-dir runs/demo-sft
    grpokit train recipes/smollm2-arithmetic.yaml --init-from runs/demo-sft --output-dir runs/demo

through grpokit's own trainers (the GRPO run gets `--init-from`'s continuing settings, said in its first lines).
It evaluates the base model, the SFT model and the GRPO model the same way (greedy, the GRPO recipe's template and
rewards: grpokit.evaluation) on the held-out rows and every copy of them the task's family makes (perturbed
numbers, rewritten wording), prints one table with a column per model and a line with GRPO's own share (after
GRPO minus after SFT, with its paired noise), then writes demo.json, eval/results.json (step 0: the SFT model the
run started from; the last step: GRPO's) and the report. The GRPO run is `--output-dir`; the SFT run sits beside
it, `<output-dir>-sft`; either is replaced only when its record says it is an earlier demo. Which recipes: the
family's demo row (`Demo.recipes`). `grpokit demo --task arithmetic-grpo` is GRPO from the base model alone
(grpokit.demo.arithmetic), where GRPO's own effect is the whole gain.
"""
from __future__ import annotations

import time
from pathlib import Path

from grpokit.report.comparison import set_title
from grpokit.demo.common import (claim_warm_start, evaluate_sets, finish, metric_rows, paired_difference, said,
                                 sample_lines, sft_then_grpo, show, stopped)

COLUMNS = ("base", "after SFT", "after GRPO")


def table_rows(evals: list[dict]) -> list[tuple[str, ...]]:
    """The held-out metrics of each model (a column each), the primary metric on each copy of the rows after the
    first (the task's own metric) row."""
    from grpokit.evaluation import pct

    rows = metric_rows(*(e["heldout"] for e in evals))
    metric = evals[0]["heldout"].metric or "accuracy"
    copies = [(f"{metric}, {set_title(kind)}", *(pct(e[kind].accuracy, e[kind].rows) for e in evals))
              for kind in evals[0] if kind != "heldout"]
    return rows[:1] + copies + rows[1:]


def grpo_share(after_sft: dict, after_grpo: dict) -> str:
    """GRPO's own share: after GRPO minus after SFT on each set, with its paired noise."""
    return "GRPO's own share (after GRPO minus after SFT): " + ", ".join(
        f"{set_title(kind)} {said(paired_difference(after_grpo[kind].as_dict(), after_sft[kind].as_dict()))}"
        for kind in after_sft)


def run(output_dir: str, overrides: list[str] | None = None, recipes: tuple[Path, Path] | None = None,
        callbacks: list | None = None, resume: bool = False, again: str | None = None) -> dict:
    """The demo (module docstring) of `recipes` (the SFT recipe, the GRPO recipe: the family's demo row gives
    them); `callbacks`: further TrainerCallbacks for its GRPO training (tests). `resume` (`grpokit demo --resume`;
    `again`: the demo's command): a finished SFT run is kept and a stopped GRPO run continues (`sft_then_grpo`)."""
    from grpokit import models
    from grpokit.console import console
    from grpokit.evaluation import eval_sets
    from grpokit.run import run_end

    sft_path, grpo_path = (Path(p) for p in recipes)
    sft_recipe, grpo_recipe, run_dir, sft_dir = claim_warm_start(output_dir, overrides, sft_path, grpo_path, "the demo")
    t0 = time.time()
    sets = eval_sets(grpo_recipe)
    tokenizer = models.load_recipe_tokenizer(grpo_recipe.model)
    base = models.load_recipe_model(grpo_recipe.model)
    console.print(f"evaluating the base model on {len(sets.heldout)} held-out problems and their copies (greedy) ...")
    evals = [evaluate_sets(base, tokenizer, grpo_recipe, sets)]
    del base

    sft, recipe, lineage, grpo, seconds_sft = sft_then_grpo(sft_recipe, grpo_recipe, sft_dir, run_dir,
                                                            (sft_path.name, grpo_path.name), callbacks, t0, overrides,
                                                            resume=resume, again=again or "grpokit demo")
    summary, trained = grpo.summary, grpo.model
    end = run_end(summary, recipe.train.max_steps)
    result = {"columns": list(COLUMNS), "sft": sft, "train": summary, "run_end": end, "sft_run": str(sft_dir),
              "seconds_to_sft_end": round(seconds_sft, 1), "seconds_to_grpo_end": round(time.time() - t0, 1)}
    if summary.get("status") == "interrupted":  # Ctrl-C / SIGTERM: the user asked to stop, not to evaluate
        return stopped(run_dir, {**result, "before": None, "after": None}, end, t0, again=again or "grpokit demo")
    if end["note"]:
        console.print(f"[yellow]note:[/] {end['note']}")
    console.print("evaluating the SFT and GRPO models the same way ...")
    evals.append(evaluate_sets(models.load_recipe_model(grpo_recipe.model, Path(lineage["path"])), tokenizer, grpo_recipe,
                           sets))
    evals.append(evaluate_sets(trained, tokenizer, grpo_recipe, sets))
    share = grpo_share(evals[1], evals[2])
    after = evals[2]["heldout"]
    shown = show(table_rows(evals), COLUMNS, [share, *sample_lines(after.samples, "after GRPO", after.metric)], end=end)
    result.update({"evaluation": {c: {k: r.as_dict() for k, r in e.items()} for c, e in zip(COLUMNS, evals)},
                   "grpo_share": share, "shown": shown, "before": evals[1]["heldout"].as_dict(),
                   "after": evals[2]["heldout"].as_dict()})
    return finish(run_dir, result, recipe, sets.heldout, evals[1]["heldout"], evals[2]["heldout"], t0,
                  also=f"; the SFT run: {sft_dir}")
