"""The retraining loop: collect the rows a model got wrong, ready to add to the next round's data.

    grpokit data mine-failures runs/smollm2-arithmetic --out failures.jsonl [--from-file production.jsonl]
    cat data/train.jsonl failures.jsonl > data/train-round2.jsonl
    grpokit train RECIPE --set data.train=data/train-round2.jsonl --init-from runs/smollm2-arithmetic

The articles' retraining loop: every week or two, add the failures collected in
use to the data and run another short GRPO round from the deployed model.
Two sources, in the grpokit row format (question, answer, other columns):
- the run's evaluation: the rows the chosen checkpoint (eval/best.json,
  else the last evaluated step) did not answer right, with the verifier's
  `verdict` (wrong, no_answer, refusal, ...), from eval/results.json or the
  results of `grpokit eval RUN --data FILE` (`--results`);
- `--from-file`: failures collected in use, written by hand or by a logger
  (checked like any data file).
Rows whose question is already in the run's training set, or repeated, are
dropped (counted). A held-out row moved into training stops measuring
generalisation: evaluate the next round on a fresh held-out set.
Not covered: deciding the gold answer of a production failure (a person writes it).
"""
from __future__ import annotations

import json
from pathlib import Path

from grpokit.data import load_rows, load_train_rows, question_key
from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import load_run_recipe
from grpokit.run import RunDir
from grpokit.run.reads import command, reading
from grpokit.run.writer import check_target, write_rows


def eval_failures(run_dir: Path, results_file: Path) -> tuple[list[dict], int]:
    """(failed rows of the chosen checkpoint, its step) from an eval results file."""
    if not results_file.is_file():
        raise GrpokitError([Problem(str(results_file), "no evaluation results",
                                    f"run `grpokit eval {run_dir}` first (or pass --results FILE)")])
    try:
        results = json.loads(results_file.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise GrpokitError([Problem(str(results_file), f"not readable eval results ({type(e).__name__}: "
                                    f"{str(e)[:200]})", f"pass --results an eval/results*.json that `grpokit eval "
                                    f"{run_dir}` wrote")]) from None
    entries = results.get("checkpoints") if isinstance(results, dict) else None
    entries = [e for e in entries if isinstance(e, dict) and type(e.get("step")) is int] \
        if isinstance(entries, list) else []
    if not entries:
        raise GrpokitError([Problem(str(results_file), "no evaluated checkpoint", f"run `grpokit eval {run_dir}`")])
    best = (results.get("best") or {}).get("step") if isinstance(results.get("best"), dict) else None
    entry = next((e for e in entries if e["step"] == best), entries[-1])
    heldout = entry.get("heldout")
    failed = heldout.get("failed") if isinstance(heldout, dict) else None
    if not isinstance(failed, list) or not all(isinstance(r, dict) and "question" in r for r in failed):  # results written before per-row verdicts were stored
        raise GrpokitError([Problem(str(results_file), f"step {entry['step']} has no per-row results",
                                    f"re-evaluate it: grpokit eval {run_dir} --checkpoints {entry['step']}")])
    return [{**r, "source": f"eval step {entry['step']}"} for r in failed], entry["step"]


@command()
def mine_failures(run_dir: str | Path, out: str | Path, from_file: str | None = None,
                  results: str | None = None, overwrite: bool = False) -> dict:
    """Write the rows to `out` (JSONL); returns the counts. `out` is never one of the files it reads (the results,
    --from-file, the run's training file) nor a file of the run (grpokit.run.writer)."""
    run_dir = Path(run_dir)
    recipe = load_run_recipe(run_dir)
    results_file = Path(results) if results else RunDir(run_dir).results_path(None)
    reading(results_file, from_file, recipe.data.train, recipe.data.eval)
    check_target(out, replace=overwrite)  # before anything is read: a refusal writes nothing
    rows, step = eval_failures(run_dir, results_file)
    from_eval = len(rows)
    if from_file:
        extra, _ = load_rows(from_file, question_field=recipe.data.question_field,
                             answer_field=recipe.data.answer_field, template=recipe.data.template)
        rows += [{**r, "source": r.get("source", Path(from_file).name)} for r in extra]
    seen = {question_key(r["question"]) for r in load_train_rows(recipe)}
    kept, in_train, repeated = [], 0, 0
    written: set[str] = set()
    for r in rows:
        key = question_key(r["question"])
        if key in seen:
            in_train += 1
        elif key in written:
            repeated += 1
        else:
            written.add(key)
            kept.append(r)
    write_rows(out, kept, replace=overwrite)
    return {"step": step, "from_eval": from_eval, "from_file": len(rows) - from_eval, "in_train": in_train,
            "repeated": repeated, "written": len(kept), "out": str(out)}
