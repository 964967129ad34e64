"""Compare two runs (e.g. SFT vs GRPO) on the held-out set and a rewritten set, from `grpokit eval` results.

    grpokit compare runs/smollm2-arithmetic runs/smollm2-arithmetic-sft [--data rewritten.jsonl] [--evaluate]

The SFT-vs-GRPO table of the articles: each run's chosen checkpoint (eval/best.json,
else its last evaluated step) on the recipe's held-out set and on a
*rewritten* held-out set (new numbers, reworded questions). A model that
memorised its training distribution drops on the rewritten set; one that
learned the skill holds. Numbers come from `eval/results.json` and
`eval/results-<stem>.json`; where they are missing the command that makes
them is named (or run, with `--evaluate`).

Rewritten sets: `grpokit data perturb` redraws the numbers of generated
arithmetic rows; for GSM8K, write questions with changed numbers and
wording and recomputed answers into a JSONL file (docs/evaluation.md "Comparing two runs").
Every accuracy carries its 95% Wilson interval over its rows
(grpokit.evaluation.intervals). Not covered: a paired test of the two runs on
the same rows (two intervals that overlap do not mean "no difference").
"""
from __future__ import annotations

from pathlib import Path

from rich.table import Table

from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation.metrics import pct, rows_of  # one percentage format for every terminal table
from grpokit.run import RunDir, read_json


def _read(path: Path) -> dict | None:
    return read_json(path)  # None when the file is missing


def _run_facts(run: RunDir) -> dict:
    if not run.is_run():
        raise GrpokitError([Problem(str(run), "not a grpokit run directory (no config.yaml)",
                                    "pass the output_dir of `grpokit train` or `grpokit sft`")])
    cfg = run.raw_config() or {}
    status = run.read_status()
    return {"kind": status.get("kind", "grpo"), "template": (cfg.get("data") or {}).get("template"),
            "system_prompt": (cfg.get("data") or {}).get("system_prompt"), "init_from": status.get("init_from")}


def _chosen(results: dict) -> dict:
    """The entry of the best checkpoint (held-out), else the last evaluated step."""
    best = (results.get("best") or {}).get("step")
    entries = results["checkpoints"]
    return next((e for e in entries if e["step"] == best), entries[-1])


def compare_runs(run_a: str, run_b: str, data: str | None = None, evaluate: bool = False, log=print) -> dict:
    from grpokit.evaluation.runs import evaluate_run

    runs, missing = [], []
    for spec in (run_a, run_b):
        run_dir = Path(spec)
        facts = _run_facts(RunDir(run_dir))
        held = _read(RunDir(run_dir).results_path(None))
        if held is None and evaluate:
            log(f"evaluating {run_dir} (all checkpoints, held-out set) ...")
            held = evaluate_run(run_dir, log=log)
        if held is None:
            missing.append(f"grpokit eval {run_dir}")
            continue
        entry = _chosen(held)
        other = None
        if data is not None:
            found = _read(RunDir(run_dir).results_path(data))
            other = next((e for e in (found or {}).get("checkpoints", []) if e["step"] == entry["step"]), None)
            if other is None and evaluate:
                log(f"evaluating {run_dir} step {entry['step']} on {data} ...")
                found = evaluate_run(run_dir, data, checkpoints=str(entry["step"]), log=log)
                other = next(e for e in found["checkpoints"] if e["step"] == entry["step"])
            if other is None:
                missing.append(f"grpokit eval {run_dir} --data {data} --checkpoints {entry['step']}")
        runs.append({"run": str(run_dir), **facts, "results": held, "entry": entry, "rewritten": other})
    if missing:
        raise GrpokitError([Problem(m.split(" ")[2], "no evaluation results to compare yet", f"run `{m}` (or pass "
                                    "--evaluate to run it now)") for m in missing], exit_code=1,
                           title="compare reads `grpokit eval` results")
    return {"runs": runs, "data": data, "rows": _rows(runs, data), "warnings": _warnings(runs)}


def _rows(runs: list[dict], data: str | None) -> list[list[str]]:
    a, b = runs
    rows = [["kind", a["kind"], b["kind"]],
            ["checkpoint", *[f"step {r['entry']['step']}" + (" (best)" if (r["results"].get("best") or {}).get("step")
                                                              == r["entry"]["step"] else "") for r in runs]],
            ["held-out accuracy", *[pct(r["entry"]["heldout"]["accuracy"], rows_of(r["entry"]["heldout"])) for r in runs]],
            ["held-out format", *[pct(r["entry"]["heldout"]["format_rate"]) for r in runs]]]
    for kind, label in (("perturbed", "perturbed-numbers accuracy"), ("rewritten", "rewritten-phrasing accuracy")):
        if any(r["entry"].get(kind) for r in runs):
            rows.append([label, *[pct((r["entry"].get(kind) or {}).get("accuracy"), rows_of(r["entry"].get(kind)))
                                  for r in runs]])
    if data is not None:
        rows.append([f"rewritten set accuracy ({Path(data).name})",
                     *[pct(r["rewritten"]["heldout"]["accuracy"], rows_of(r["rewritten"]["heldout"])) for r in runs]])
        rows.append(["drop on the rewritten set", *[
            "-" if None in (r["entry"]["heldout"]["accuracy"], r["rewritten"]["heldout"]["accuracy"]) else
            f"{100 * (r['entry']['heldout']['accuracy'] - r['rewritten']['heldout']['accuracy']):+.1f} pts"
            for r in runs]])
    rows.append(["mean length (tokens)", *[f"{r['entry']['heldout']['mean_length']:.1f}" for r in runs]])
    rows.append(["held-out rows", *[str(r["results"]["rows"]) for r in runs]])
    return rows


def _warnings(runs: list[dict]) -> list[str]:
    a, b = runs
    out = []
    if a["results"].get("fingerprint") != b["results"].get("fingerprint"):
        out.append("the two runs were evaluated on different held-out sets: their held-out numbers are not comparable")
    if (a["template"], a["system_prompt"]) != (b["template"], b["system_prompt"]):
        out.append(f"the runs use different prompts (template {a['template']} vs {b['template']}, or the system "
                   "prompt): the comparison mixes the prompt with the training method")
    return out


def compare_table(result: dict):
    a, b = result["runs"]
    table = Table(title="comparison (each run's chosen checkpoint)")
    table.add_column("")
    for r in (a, b):
        table.add_column(Path(r["run"]).name, justify="right")
    for row in result["rows"]:
        table.add_row(*row)
    return table
