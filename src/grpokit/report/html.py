"""`grpokit report RUN_DIR`: one HTML page with PNG plots that tells how a run went, readable offline.

    grpokit report runs/smollm2-arithmetic        # -> runs/smollm2-arithmetic/report/report.html

Reads only files of the run directory: `metrics.jsonl` (curves per step,
smoothed with the raw line faint, see report_plots: reward total and per
component, kl, completion length and truncation, share of groups whose rewards
had zero spread, entropy, clip ratio, loss, grad norm, learning rate, step
time, memory), `eval/results.json` and `eval/best.json` (accuracy per
checkpoint with the best one marked, base vs best vs last), `samples.jsonl`
(a searchable table of completions from the first, middle and last logged
step) and `health.jsonl` if present (one finding per line: code, severity,
step, message, evidence; shown as one row per code). A tool-calling run also
gets a "Tool calling" section (report_tools: calls per episode, failed calls,
tool reward components, `eval/results-tools.json`). A metric the run did not
log (kl when beta is 0) is shown as "not logged", never an error. Plots go
into the same folder as report.html, which links them by relative path, and
the search box is a few lines of inline script, so the folder can be copied
or zipped as it is and read offline.

The report folder gets an authorship record (grpokit.run.record, kind report) naming the files a report
writes (`report_files`). A report replaces only those: `--output-dir U` where U holds a `report.html` (or a
plot's name) that no grpokit report recorded is refused before anything is drawn. The run's own `report/` is
a folder of the run's layout, grpokit's whole (a run from before records: its report/ is used as it is), and
used only when the run's record proves grpokit made the run (a folder that merely holds a `metrics.jsonl` gets
its report with `--output-dir`); a `report/` that is a link is refused. Every file goes through
grpokit.run.writer.

Not covered: comparing several runs on one page; interactive plots.
"""
from __future__ import annotations

from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.report import inputs
from grpokit.report.plots import CURVES, number
from grpokit.report.sections import (curves_section, demo_section, escape, eval_section, health_section, html_table,
                                     samples_section)
from grpokit.report.tools import tools_section
from grpokit.rewards import reward_title
from grpokit.run import RunDir, describe_lineage, read_json, run_end, writable_problem
from grpokit.run.locks import FolderLock
from grpokit.run.ownership import refuse_unproven_run
from grpokit.run.record import new_record, read_record, refuse_foreign
from grpokit.run.writer import make_folder, write_file
from grpokit.run.claims import claim, write_record

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1em 0; } img { max-width: 100%; } figcaption { font-size: 0.85em; color: #555; }
.missing, .note { color: #777; } .bad { color: #b00; }
table.samples td, table.health td, table.samples th, table.health th { text-align: left; vertical-align: top; }
table.samples pre { white-space: pre-wrap; margin: 0; max-height: 20em; overflow: auto; font-size: 13px; }
table.samples td:nth-child(2) { min-width: 14em; } table.samples td:nth-child(3) { width: 55%; }
table.health code { font-size: 0.85em; word-break: break-all; }
input[type=search] { font-size: 1em; padding: 0.2em 0.4em; }
"""


# ---------------------------------------------------------------- entry point
def report_files() -> list[str]:
    """Every file a report may write into its folder (report.html and its plots): its record names them."""
    from grpokit.report.tools import TOOL_PLOTS

    return ["report.html", *(f"{c[0]}.png" for c in CURVES), "eval_accuracy.png", *TOOL_PLOTS]


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write report.html and its PNGs; returns the path of report.html."""
    run_dir, run = Path(run_dir), RunDir(run_dir)
    if not run_dir.is_dir():
        raise GrpokitError([Problem(str(run_dir), "no such run directory", "pass the output_dir of a grpokit train")])
    out = Path(out_dir) if out_dir else run.report_dir
    if out_dir is None:
        refuse_unproven_run(run_dir, f"write the report elsewhere: grpokit report {run_dir} --output-dir DIR (a new "
                                     "folder)")
    problem = writable_problem(out)  # before any plot is drawn: a read-only run folder is said, with the way out
    if problem:
        raise GrpokitError([Problem(problem.where, problem.message, "write the report elsewhere: grpokit report "
                                    f"{run_dir} --output-dir DIR (a folder you can write to)")])
    entries = dict.fromkeys(report_files(), "file")
    try:
        if out.resolve() == run.report_dir.resolve():  # the run's own report/: grpokit's folder, whole
            make_folder(out, within=run_dir)  # RUN/report a link to a user's folder: refused, nothing written
            # ... its files, but never a link or a hard link at their names (a plot would be written through it)
            refuse_foreign(out, {"entries": entries}, entries, f"move those out of {out}, or pass --output-dir DIR")
            old = read_record(out)
            if old is None or old["kind"] != "report":
                write_record(out, new_record("report", entries, run=str(run_dir.resolve())))
        else:  # any other folder: only the files a grpokit report recorded writing there are replaced
            claim(out, "report", entries, f"pass --output-dir a new folder (or an earlier report's), or move those "
                                          f"files away; without --output-dir the report goes to {run.report_dir}",
                  run=str(run_dir.resolve()))
    except OSError as e:
        raise GrpokitError([Problem(str(out), f"cannot create the report folder: {e.strerror or e}",
                                    f"pass --output-dir DIR (a folder you can write to, not {out})")]) from None
    # Two reports into one folder at once would mix their plots: the second is refused naming the first
    with FolderLock(out, "report"):
        return _write_page(run, run_dir, out)


def _write_page(run: RunDir, run_dir: Path, out: Path) -> Path:
    """The plots and report.html in `out`, from the run's files as they are now (each read whole: renamed in)."""
    recipe = run.raw_config()
    # Every reader is crash-tolerant: a line cut by a crash is skipped with one note, the rest still shown, and a
    # record of the wrong type (grpokit.report.inputs) is left out the same way.
    metrics = [m for m in inputs.stepped(run.read_metrics(), run.metrics) if "train_runtime" not in m]
    results = inputs.eval_doc(read_json(run.results_path()))
    findings = inputs.findings(run.read_health()) if run.health.is_file() else None
    samples = inputs.samples(inputs.stepped(run.read_samples(), run.samples))
    status = inputs.run_facts(run.read_status())

    curves, images = curves_section(metrics, recipe, out)
    start = "the model it started from, --init-from" if status.get("init_from") else "base model"
    evals, eval_images = eval_section(results, run_dir, out, start)
    evals = demo_section(inputs.demo_doc(read_json(run.demo_file))) + evals  # a demo: its terminal's table first
    tools, tool_images = tools_section(metrics, inputs.eval_doc(read_json(run.tool_results_file)), run_dir, out)
    eval_images += tool_images
    recipe = recipe if isinstance((recipe or {}).get("model", {}), dict) else None
    model = (recipe or {}).get("model", {}).get("name", status.get("model", "?"))
    facts = [["model", escape(model)], ["status", escape(status.get("status", "unknown"))],
             ["steps", escape(status.get("step", metrics[-1]["step"] if metrics else "–"))],
             ["training time", f"{status['seconds'] / 60:.1f} min" if number(status.get("seconds")) else "–"],
             ["rewards", escape(", ".join(f"{reward_title(r)} ×{r.get('weight', 1.0)}"  # own ones by module and function
                                      for r in (recipe or {}).get("rewards", []) if isinstance(r, dict)))]]
    train_cfg = (recipe or {}).get("train")
    end = run_end(status, train_cfg.get("max_steps") if isinstance(train_cfg, dict) else None)
    if end["note"]:  # a run that did not reach its end says which step every figure below is from
        facts.insert(2, ["stopped early", escape(end["note"])])
    if status.get("init_from"):  # --init-from: the run's lineage, one line
        facts.insert(1, ["started from", escape(describe_lineage(status["init_from"]))])
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>grpokit report: {escape(run_dir.name)}</title>
<style>{STYLE}</style></head><body>
<h1>grpokit report: {escape(run_dir.name)}</h1>
{html_table(None, facts, "narrow facts")}
<h2>Evaluation</h2>
{evals}
<h2>Training curves</h2>
{curves}
{f"<h2>Tool calling</h2>{chr(10)}{tools}" if tools else ""}
<h2>Sample completions</h2>
{samples_section(samples)}
<h2>Health findings</h2>
{health_section(findings)}
<p class="note">Written by <code>grpokit report</code> from {escape(run_dir.resolve())}; images: {len(images) + len(eval_images)}.</p>
</body></html>
"""
    path = out / "report.html"
    try:
        write_file(path, page, within=out)
    except OSError as e:  # a disk that fills up or turns read-only while the plots were written
        raise GrpokitError([Problem(str(path), f"cannot write the report: {e.strerror or e}",
                                    "free space, or pass --output-dir DIR (a folder you can write to)")]) from None
    return path
