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
from pathlib import Path

from grpokit.evaluation.metrics import choose_best
from grpokit.evaluation.preference import against_base
from grpokit.run import RunDir, read_json, run_end

PARTIAL_SUFFIX = "-partial"  # results.json -> results-partial.json: a narrower comparison's own file


def results_path(out_dir: Path, data: str | None) -> Path:
    return RunDir(out_dir).results_path(data)


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
                "template": recipe.data.template, "max_new_tokens": max_new_tokens or recipe.train.max_completion_length,
                "samples_per_problem": k_samples, "metric": _metric_of(recipe)}
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False))
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


def _best_record(best: dict, settings: dict, width: tuple[int, int]) -> dict:
    return {"step": best["step"], "path": best["path"], "accuracy": best["heldout"]["accuracy"],
            "metric": settings.get("metric") or "accuracy",
            "chosen_by": f"held-out greedy {settings.get('metric') or 'accuracy'}; ties go to the earlier step",
            "data": settings["data"], "fingerprint": settings["fingerprint"],
            "rows": width[0], "checkpoints": width[1]}


def _metric_of(recipe) -> str | None:
    from grpokit.task import Task

    return Task.of(recipe).primary_metric
