"""The results files of an evaluation and the best checkpoint: never silently replaced by a narrower run.

    results = write_results(run_dir, recipe, sets, entries, k_samples, max_new_tokens)
    results["path"], results.get("kept"), results.get("replaced")   # where it went, and why

An evaluation is a comparison of some checkpoints on some rows under some settings (the held-out set's
fingerprint, the template, max_new_tokens, samples per problem, the metric). Its width is
(rows, checkpoints). Where the results go:

- the same settings as `eval/results.json`: merged by checkpoint (a step evaluated again replaces its entry,
  the others stay), so `--checkpoints last` after `--checkpoints all` keeps the comparison whole;
- other settings and at least as wide (rows and checkpoints): it replaces `results.json`, and says so;
- other settings and narrower (`--max-rows 4`, one checkpoint after three): its own file,
  `eval/results-partial.json` (merged the same way with the previous partial one), and `results.json` and
  `best.json` stay as they were, and the command says so.

`best.json` is chosen from `results.json` only, records its width (`rows`, `checkpoints`), and changes
only from a comparison at least as wide as the one that chose it (a `best.json` written before it recorded
a width is compared by its results file's). `--data FILE` results go to `results-<stem>.json` by the same
rules and never touch `best.json`.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation.metrics import choose_best
from grpokit.evaluation.preference import against_base
from grpokit.run import EVAL_DIR, TOOL_RESULTS_FILE, RunDir, read_json, run_end
from grpokit.run.ownership import refuse_unproven_run, writable_problem
from grpokit.run.writer import check_target, write_file
from grpokit.run.claims import claim, refuse_claim
from grpokit.task import Task

PARTIAL_SUFFIX = "-partial"  # results.json -> results-partial.json: a narrower comparison's own file


def results_path(out_dir: Path, data: str | None) -> Path:
    return RunDir(out_dir).results_path(data)


def eval_names(data: str | None) -> list[str]:
    """The names in eval/ an evaluation may write: its results file, the narrower comparison's, best.json."""
    main = results_path(Path("."), data)
    return [main.name, main.stem + PARTIAL_SUFFIX + main.suffix, RunDir(".").best_file.name]


def _eval_fix(out_dir: Path, run: bool) -> str:
    if run:
        return (f"evaluate its checkpoints as models instead: grpokit eval {out_dir}/checkpoints/checkpoint-N "
                "--recipe RECIPE.yaml --output-dir NEW_FOLDER")
    return "pass --output-dir a new folder (or one an earlier `grpokit eval MODEL` wrote)"


def refuse_eval_output(out_dir: str | Path, run: bool, names=()) -> None:
    """Before any model loads: where an evaluation writes. A run's eval/ only when the run's record proves grpokit
    made it (grpokit.run.ownership.refuse_unproven_run: a folder holding a config.yaml is no run); `grpokit eval
    MODEL --output-dir D` a new folder or one whose record says eval. Then each of `names` in eval/ (results.json,
    best.json, ...): never a link, a hard-linked file or a folder (grpokit.run.writer)."""
    out_dir = Path(out_dir)
    if run:
        refuse_unproven_run(out_dir, _eval_fix(out_dir, run))
    else:
        refuse_claim(out_dir, "eval", {EVAL_DIR: "dir"}, _eval_fix(out_dir, run))
    for name in names:
        check_target(out_dir / EVAL_DIR / name, replace=True, within=out_dir, fix=f"move it out of {out_dir / EVAL_DIR} "
                     "(grpokit writes its results there), then evaluate again")
    problem = writable_problem(out_dir / EVAL_DIR)  # a read-only folder: said now, not after every checkpoint
    if problem:
        raise GrpokitError([Problem(problem.where, problem.message,
                                    f"make {out_dir / EVAL_DIR if run else out_dir} writable, or "
                                    + ("copy the run to a folder you can write to and evaluate the copy" if run
                                       else "pass --output-dir a folder you can write to"))],
                           title="nothing was evaluated")


def claim_eval_output(out_dir: str | Path, run: bool) -> None:
    """The folder of `grpokit eval MODEL` gets its record (kind eval) before its results are written."""
    if not run:
        claim(out_dir, "eval", {EVAL_DIR: "dir"}, _eval_fix(Path(out_dir), run))


def _width(results: dict | None) -> tuple[int, int]:
    """(rows, checkpoints) a results file (or a best record) compared."""
    if not results:
        return 0, 0
    checkpoints = results.get("checkpoints")
    n = len(checkpoints) if isinstance(checkpoints, list) else checkpoints
    return int(results.get("rows") or 0), int(n or 0)


def _describe(width: tuple[int, int]) -> str:
    rows, n = width
    return f"{n} checkpoint{'s' * (n != 1)} x {rows} row{'s' * (rows != 1)}"


def _merge(path: Path, settings: dict, entries: list[dict]) -> list[dict]:
    """`entries` merged by step into the file at `path` when it holds the same settings; else `entries`."""
    prior = read_json(path)
    kept = []
    if prior is not None and all(prior.get(k) == v for k, v in settings.items()):
        new_steps = {e["step"] for e in entries}
        kept = [e for e in prior.get("checkpoints", []) if e["step"] not in new_steps]
    return sorted(kept + entries, key=lambda e: e["step"])


def write_results(out_dir: Path, recipe, sets, entries: list[dict], k_samples: int,
                  max_new_tokens: int | None, data: str | None = None, record_best: bool = True) -> dict:
    """Write `entries` where the rules above send them and record the best; the results, with `path`, and
    `kept` / `replaced` sentences when an earlier results file was kept or replaced."""
    main = results_path(out_dir, data)
    settings = {"data": sets.name, "fingerprint": sets.fingerprint(), "rows": len(sets.heldout),
                "perturbed_rows": len(sets.perturbed or []), "train_rows": len(sets.train or []),
                "variants": {kind: {"rows": len(rows), "what": sets.what.get(kind, kind)} for kind, rows in sets.variants.items()},
                "template": recipe.data.template, "max_new_tokens": max_new_tokens or recipe.train.max_completion_length,
                "samples_per_problem": k_samples, "metric": _metric_of(recipe),
                # what the samples of pass@k were drawn at: two runs' pass@k compare only at the same settings (an
                # SFT recipe left at the default temperature 1.0 samples wider than its GRPO recipe's 0.7)
                "sampling": {"temperature": recipe.train.temperature, "top_p": recipe.train.top_p} if k_samples else None}
    prior = read_json(main)
    same = prior is not None and all(prior.get(k) == v for k, v in settings.items())
    merged = _merge(main, settings, entries)
    new_width, old_width = (len(sets.heldout), len(merged)), _width(prior)
    notes: dict[str, str] = {}
    path = main
    if prior is not None and not same:
        if new_width[0] >= old_width[0] and new_width[1] >= old_width[1]:
            notes["replaced"] = (f"replaced {main.name} ({_describe(old_width)}, other settings) with this "
                                 f"comparison of {_describe(new_width)}")
        else:
            path = main.with_name(main.stem + PARTIAL_SUFFIX + main.suffix)
            merged = _merge(path, settings, entries)
            new_width = (len(sets.heldout), len(merged))
            notes["kept"] = (f"{main.name} ({_describe(old_width)}) and {RunDir(out_dir).best_file.name} kept: this "
                             f"comparison of {_describe(new_width)} is narrower, so it went to {path.name}; evaluate "
                             "every checkpoint on every held-out row (`grpokit eval RUN_DIR`) to replace them")
    merged = against_base(merged)  # after the merge: a step evaluated alone is compared with the base evaluated before
    best = choose_best(merged)
    results = {"model": recipe.model.name, **settings, "checkpoints": merged,
               "best": _best_record(best, settings, new_width) if best else None}
    run = RunDir(out_dir)
    if run.run_json.is_file():  # a run that stopped early: the results say which step the run holds
        results["run_end"] = run_end(run.read_status(), recipe.train.max_steps)
    write_file(path, json.dumps(results, indent=2, ensure_ascii=False), within=out_dir)
    if record_best and best is not None and path == main:
        run = RunDir(out_dir)
        held = run.read_best()
        held_width = _width(held) if held and "checkpoints" in held else old_width if held else (0, 0)
        if new_width[0] >= held_width[0] and new_width[1] >= held_width[1]:
            run.write_best(results["best"])
        else:  # e.g. results.json was deleted and a narrower run wrote a new one
            notes["kept"] = (f"{run.best_file.name} kept (chosen from {_describe(held_width)}; this comparison is "
                             f"{_describe(new_width)})")
    results["path"] = str(path)
    results.update(notes)
    return results


def tool_results_names(data: str | None) -> list[str]:
    """The names in eval/ a tool evaluation may write (`write_tool_results`), best.json with them."""
    main = Path(TOOL_RESULTS_FILE)
    return [_tool_data_path(main, data).name if data else main.name,
            main.stem + PARTIAL_SUFFIX + main.suffix, RunDir(".").best_file.name]


def _tool_data_path(main: Path, data: str) -> Path:
    stem = re.sub(r"[^\w.-]+", "_", Path(data).stem)  # as RunDir.results_path names results-<stem>.json
    return main.with_name(f"{main.stem}-{stem}{main.suffix}")


def write_tool_results(main: Path, doc: dict, data: str | None, within: Path) -> dict:
    """A tool evaluation's results, by the rule of `write_results`: `--data FILE` to its own file
    (results-tools-<stem>.json); the same settings as results-tools.json merged into it by step; other settings
    that compare as many rows and checkpoints replace it; a narrower comparison (`--max-rows`, `--checkpoints
    best`) goes to results-tools-partial.json, the full file kept. `doc` with `path` (and `kept`/`replaced`)."""
    path, notes = main, {}
    if data is not None:
        path = _tool_data_path(main, data)
    prior = read_json(path)
    settings = ("task", "rows", "generations")
    if isinstance(prior, dict) and isinstance(prior.get("checkpoints"), list):
        new_width, old_width = (int(doc["rows"]), len(doc["checkpoints"])), _width(prior)
        if all(prior.get(k) == doc.get(k) for k in settings):
            steps = {e["step"] for e in doc["checkpoints"]}
            kept = [e for e in prior["checkpoints"] if isinstance(e, dict) and e.get("step") not in steps]
            doc = {**doc, "checkpoints": sorted(kept + doc["checkpoints"], key=lambda e: str(e["step"]).zfill(12))}
        elif new_width[0] >= old_width[0] and new_width[1] >= old_width[1]:
            notes["replaced"] = (f"replaced {path.name} ({_describe(old_width)}, other settings) with this "
                                 f"comparison of {_describe(new_width)}")
        else:
            partial = path.with_name(path.stem + PARTIAL_SUFFIX + path.suffix)
            notes["kept"] = (f"{path.name} ({_describe(old_width)}) and best.json kept: this comparison of "
                             f"{_describe(new_width)} is narrower, so it went to {partial.name}; evaluate every "
                             "checkpoint on every held-out row (`grpokit eval RUN_DIR`) to replace them")
            path = partial
    write_file(path, json.dumps(doc, indent=2), within=within)
    return {**doc, "path": str(path), **notes}


def record_tool_best(run: RunDir, doc: dict) -> dict | None:
    """A tool run's best checkpoint by its primary metric, task_success (ties to the earlier step), written to
    best.json under the rule above: never from a narrower comparison than the one that chose the one held. The
    record written, or None (nothing scored, or kept)."""
    scored = [e for e in doc.get("checkpoints", []) if type(e.get("step")) is int
              and isinstance(e.get("task_success"), (int, float))]
    if not scored:
        return None
    best = max(scored, key=lambda e: (e["task_success"], -e["step"]))
    width = (int(doc.get("rows") or 0), len(scored))
    held = run.read_best()
    held_width = _width(held) if held and "checkpoints" in held else (0, 0)
    if width[0] < held_width[0] or width[1] < held_width[1]:
        return None
    record = {"step": best["step"], "path": best.get("model"), "accuracy": best["task_success"],
              "metric": "task_success", "chosen_by": "held-out task_success (greedy episodes); ties go to the "
              "earlier step", "data": "held-out rows", "rows": width[0], "checkpoints": width[1]}
    run.write_best(record)
    return record


def _best_record(best: dict, settings: dict, width: tuple[int, int]) -> dict:
    return {"step": best["step"], "path": best["path"], "accuracy": best["heldout"]["accuracy"],
            "metric": settings.get("metric") or "accuracy",
            "chosen_by": f"held-out greedy {settings.get('metric') or 'accuracy'}; ties go to the earlier step",
            "data": settings["data"], "fingerprint": settings["fingerprint"],
            "rows": width[0], "checkpoints": width[1]}


def _metric_of(recipe) -> str | None:
    return Task.of(recipe).primary_metric
