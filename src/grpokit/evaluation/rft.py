"""Rejection-sampling fine-tuning's data: a model's own right solutions to a recipe's training rows.

    grpokit data mine-solutions runs/atomic --recipe recipes/smollm2-composition.yaml --samples 8 --out rft.jsonl
    grpokit sft recipes/smollm2-composition-sft.yaml --set data.train=rft.jsonl --init-from runs/atomic

Rejection-sampling fine-tuning (RFT, "From Atomic to Composite"'s third arm beside SFT and RL): sample K
completions per training row from the model, keep those the task's correctness reward scores 1.0 (the verifier
GRPO and evaluation use: grpokit.evaluation.metrics.sample_passes), and train on them with SFT. The model is a
run's (its best checkpoint where `grpokit eval` chose one, else its last; `--checkpoint` picks another) or a model
folder; the rows, prompt template, rewards and sampling settings (temperature, top-p, max_completion_length) are
the recipe's (`--recipe`, else the run's own), so the samples are drawn as GRPO draws them, seeded by its
`train.seed` (`--set train.seed=1` mines another set: a second seed of an RFT arm samples anew, as GRPO's does). Each distinct right
completion of a row (equal after stripping outer whitespace) becomes one output row: the training row with the
completion as its `solution` column, which `grpokit sft` trains on as written (grpokit.training.sft). Rows none of
whose samples was right are left out; the counts say how many kept at least one.

Not covered: a model's right answers reached by wrong working (the reward reads the answer line only), sampling
with vLLM across processes (the recipe's generation backend is used, as evaluation uses it).
"""
from __future__ import annotations

import time
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import load_recipe, load_run_recipe
from grpokit.run.reads import command

SOLUTION = "solution"  # the column `grpokit sft` trains on as written (grpokit.training.sft.SOLUTION_FIELDS)


def _model_of(source: Path, checkpoint: str, overrides: list[str] | None):
    """(the run's recipe, `overrides` applied, or None; the checkpoint folder, the model folder, or None for a run's
    base model)."""
    from grpokit.run import RunDir

    if (source / "config.yaml").is_file():  # a grpokit run directory
        run = RunDir(source)
        return load_run_recipe(run, overrides), run.checked(run.resolve_checkpoint(checkpoint))
    if (source / "config.json").is_file():
        return None, source
    raise GrpokitError([Problem(str(source), "neither a grpokit run directory (config.yaml) nor a model folder "
                                "(config.json)", "pass the output_dir of a run (grpokit train / sft), or a folder "
                                "from `grpokit export`, with --recipe RECIPE.yaml for a model folder")])


def distinct_right(texts: list[str], passes: list[bool]) -> list[str]:
    """The right completions of one row, each once (stripped), in the order they were drawn."""
    out: dict[str, None] = {}
    for text, ok in zip(texts, passes):
        if ok and text.strip():
            out.setdefault(text.strip())
    return list(out)


MAX_SAMPLES = 1024  # completions a row: a bound that refuses a typo (99999999 sampled for ever), past any RFT use


def sample_solutions(model_path: str | Path | None, recipe, samples: int, rows: list[dict],
                     log=print) -> tuple[list[dict], dict]:
    """(the rows with their distinct right solutions, the counts) of `samples` completions per row of `rows` drawn
    from the model at `model_path` (None: the recipe's own model) as the recipe's task samples and judges them."""
    from grpokit import models
    from grpokit.evaluation.evaluate import sample
    from grpokit.evaluation.metrics import sample_passes
    from grpokit.generation import backend_of
    from grpokit.task import Task

    t0 = time.time()
    task = Task.of(recipe)
    gen = task.generation
    tokenizer = models.load_recipe_tokenizer(recipe.model)
    loaded = models.load_recipe_model(recipe.model, None if model_path is None else Path(model_path), on_device=True)
    log(f"sampling {samples} completion(s) for each of {len(rows)} training rows of {recipe.data.train} from "
        f"{model_path or recipe.model.name} (temperature {gen.temperature}, top-p {gen.top_p}) ...")
    groups = sample(loaded, tokenizer, task.template, [r["question"] for r in rows], gen.max_new_tokens, samples,
                    gen.temperature, gen.top_p, seed=recipe.train.seed, backend=backend_of(recipe))
    passes = sample_passes(task, rows, groups)
    right = [distinct_right(texts, ok) for texts, ok in zip(groups, passes)]
    # the training row with each solution; a `completion` column would compete with it in `grpokit sft`
    kept = [{**{k: v for k, v in row.items() if k != "completion"}, SOLUTION: text}
            for row, texts in zip(rows, right) for text in texts]
    return kept, {"model": str(model_path or recipe.model.name), "rows": len(rows), "samples": samples,
                  "rows_solved": sum(bool(texts) for texts in right), "solutions": len(kept),
                  "right_samples": sum(map(sum, passes)), "temperature": gen.temperature, "top_p": gen.top_p,
                  "seconds": round(time.time() - t0, 1)}


@command()
def mine_solutions(model: str | Path, out: str | Path, recipe: str | Path | None = None, samples: int = 8,
                   checkpoint: str = "auto", max_rows: int | None = None, overrides: list[str] | None = None,
                   overwrite: bool = False, log=print) -> dict:
    """Write the right solutions (module docstring) to `out` (JSONL); returns the counts (`sample_solutions`) and
    `out`. Everything that can be refused (the model, the recipe, `out`, `samples`) is refused before the model
    loads."""
    from grpokit.data import load_train_rows
    from grpokit.run.writer import check_target, write_rows
    from grpokit.task import Task

    if not 1 <= samples <= MAX_SAMPLES:
        raise GrpokitError([Problem("--samples", f"must be 1 to {MAX_SAMPLES}, got {samples}",
                                    "e.g. --samples 8 (a row no right sample in a few hundred solves is better "
                                    "dropped than sampled for hours)")])
    if max_rows is not None and max_rows < 1:
        raise GrpokitError([Problem("--max-rows", f"must be at least 1, got {max_rows}", "leave it out for every row")])
    source = Path(model).expanduser()
    run_recipe, path = _model_of(source, checkpoint, None if recipe is not None else overrides)
    if recipe is None and run_recipe is None:
        raise GrpokitError([Problem(f"{model}", "a model folder has no recipe to take the rows, template and rewards "
                                    "from", "pass --recipe RECIPE.yaml")])
    chosen = load_recipe(recipe, overrides) if recipe is not None else run_recipe
    # load_recipe recorded the recipe and its rows as this command's inputs: `out` is never one of them
    check_target(out, replace=overwrite)  # before anything loads: a refusal writes nothing
    if Task.of(chosen).correctness is None:
        raise GrpokitError([Problem(str(recipe or source), "the recipe has no correctness reward to judge solutions "
                                    "by", "use a recipe whose rewards include one (math_correctness, code_tests, ...)")])
    rows = load_train_rows(chosen)
    kept, counts = sample_solutions(path, chosen, samples, rows[:max_rows] if max_rows else rows, log)
    if not kept:  # an empty file would replace the user's and its `grpokit sft` next command would fail on it
        kept_note = f"{out} was left as it was" if Path(out).exists() else "nothing was written"
        raise GrpokitError([Problem(str(source), f"no right solution: none of {counts['rows'] * samples} samples "
                                    f"({samples} of each of {counts['rows']} rows) scored 1.0 on the correctness "
                                    f"reward; {kept_note}",
                                    "sample more (--samples), from a stronger model or checkpoint, or on easier "
                                    "rows")], exit_code=1)
    write_rows(out, kept, replace=overwrite)
    return {**counts, "out": str(out)}
