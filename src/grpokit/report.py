"""`grpokit report RUN_DIR`: one HTML page with PNG plots that tells how a run went, readable offline.

    grpokit report runs/smollm2-arithmetic        # -> runs/smollm2-arithmetic/report/report.html

Reads only files of the run directory: `metrics.jsonl` (curves per step:
reward total and per component, kl, completion length, share of groups whose
rewards had zero spread, entropy), `eval/results.json` and `eval/best.json`
(accuracy per checkpoint with the best one marked, base vs best vs last),
`samples.jsonl` (completions from the beginning, middle and end of training)
and `health.jsonl` if present (one finding per line: code, severity, step,
message, evidence). A metric the run did not log (kl when beta is 0) is shown
as "not logged", never an error. Plots are drawn with matplotlib's Agg
backend (no display needed) into the same folder as report.html, which links
them by relative path, so the folder can be copied or zipped as it is.

Not covered: comparing several runs on one page; interactive plots.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

from grpokit.rundir import REPORT_DIR, read_json  # noqa: F401 - REPORT_DIR: for the CLI help

SAMPLES_PER_PHASE = 2  # completions shown for each of beginning / middle / end
# (file stem, title, metrics.jsonl keys, y label); rewards/<name>/mean are added to the first at run time.
CURVES = (
    ("reward", "reward (total and per component)", ("reward",), "mean reward"),
    ("kl", "KL to the reference model", ("kl",), "kl"),
    ("completion_length", "completion length", ("completions/mean_length", "completions/min_length",
                                                "completions/max_length"), "tokens"),
    ("frac_reward_zero_std", "learning signal: groups with zero reward spread, completions trained on",
     ("frac_reward_zero_std", "grpokit/trained_frac"), "fraction"),
    ("entropy", "token entropy of the policy (over the completions trained on)", ("entropy",), "nats"),
)


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def series(metrics: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric; steps where it is missing or not finite are left out."""
    pts = [(m["step"], _number(m.get(key))) for m in metrics if "step" in m]
    pts = [(s, v) for s, v in pts if v is not None]
    return [s for s, _ in pts], [v for _, v in pts]


def reward_names(metrics: list[dict], recipe: dict | None) -> list[str]:
    names = [r["name"] for r in (recipe or {}).get("rewards", [])]
    logged = sorted({k.split("/")[1] for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")})
    return [n for n in names if n in logged] + [n for n in logged if n not in names]


# ---------------------------------------------------------------- plots
def _figure():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6.4, 3.4), dpi=100)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    return plt, fig, ax


def _save(plt, fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_curve(metrics: list[dict], keys: list[str], title: str, ylabel: str, path: Path) -> list[str]:
    """One PNG with a line per logged key; returns the keys that had data (none: no file written)."""
    drawn = [(k, *series(metrics, k)) for k in keys]
    drawn = [d for d in drawn if d[1]]
    if not drawn:
        return []
    plt, fig, ax = _figure()
    for key, xs, ys in drawn:
        ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=key)
    ax.set(title=title, xlabel="step", ylabel=ylabel)
    if len(drawn) > 1:
        ax.legend(fontsize=8)
    _save(plt, fig, path)
    return [k for k, _, _ in drawn]


def plot_eval(results: dict, path: Path) -> None:
    plt, fig, ax = _figure()
    entries = results["checkpoints"]
    for kind, label in (("heldout", "held-out"), ("perturbed", "perturbed numbers"), ("train", "training rows")):
        pts = [(e["step"], (e.get(kind) or {}).get("accuracy")) for e in entries]
        pts = [(s, 100 * a) for s, a in pts if a is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    best = results.get("best")
    if best and best.get("accuracy") is not None:
        ax.plot([best["step"]], [100 * best["accuracy"]], marker="*", markersize=16, color="gold",
                markeredgecolor="black", linestyle="none", label=f"best (step {best['step']})")
    ax.set(title="greedy accuracy per checkpoint (step 0 = base model)", xlabel="step", ylabel="accuracy (%)",
           ylim=(-2, 102))
    ax.legend(fontsize=8)
    _save(plt, fig, path)


# ---------------------------------------------------------------- HTML pieces
def _e(x) -> str:
    return html.escape(str(x))


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x, digits=3) -> str:
    x = _number(x)
    return "–" if x is None else f"{x:.{digits}f}"


def _table(header: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _not_logged_reason(key: str, recipe: dict | None, metrics: list[dict]) -> str:
    beta = ((recipe or {}).get("train") or {}).get("beta")
    if key == "kl" and beta == 0:
        return "not logged (train.beta is 0: no reference model, so TRL computes no KL)"
    if key == "entropy" and metrics and all(m.get("grpokit/trained_frac") == 0 for m in metrics):
        return ("not logged: in every logged step all groups tied (no learning signal), so train.skip_no_signal "
                "ran no policy pass, which is where entropy is measured")
    return "not logged by this run"


def curves_section(metrics: list[dict], recipe: dict | None, out: Path) -> tuple[str, list[str]]:
    parts, images = [], []
    names = reward_names(metrics, recipe)
    if not metrics:
        return "<p>metrics.jsonl is missing or empty: the run logged no step.</p>", []
    for stem, title, keys, ylabel in CURVES:
        keys = list(keys) + ([f"rewards/{n}/mean" for n in names] if stem == "reward" else [])
        drawn = plot_curve(metrics, keys, title, ylabel, out / f"{stem}.png")
        if drawn:
            images.append(f"{stem}.png")
            missing = [k for k in keys if k not in drawn]
            note = f'<p class="note">{_e(", ".join(missing))}: not logged</p>' if missing else ""
            parts.append(f'<figure><img src="{stem}.png" alt="{_e(title)}"><figcaption>{_e(title)}</figcaption>'
                         f"</figure>{note}")
        else:
            parts.append(f'<p class="missing"><b>{_e(title)}</b>: {_e(_not_logged_reason(keys[0], recipe, metrics))}</p>')
    last = metrics[-1]
    summary = [[_e(k), _num(last[k]) if k in last else "not logged"] for k in ["reward", *[f"rewards/{n}/mean" for n in names], "kl",
                                                     "completions/mean_length", "frac_reward_zero_std", "entropy"]]
    parts.append(f"<h3>last logged step ({_e(last.get('step'))})</h3>" + _table(["metric", "value"], summary, "narrow"))
    return "\n".join(parts), images


def _eval_row(label: str, e: dict, k: int) -> list[str]:
    h = e["heldout"]
    gap = e.get("gap")
    gap_s = "–" if not gap else f"{100 * gap['value']:+.1f} pts" + (' <b class="bad">large</b>' if gap["flagged"] else "")
    return [label, _pct(h["accuracy"]), _pct((e.get("perturbed") or {}).get("accuracy")),
            _pct((e.get("train") or {}).get("accuracy")), gap_s,
            *([_pct((h.get("pass_at_k") or {}).get(str(k)))] if k else []), _pct(h["format_rate"]),
            _pct(h.get("refusal_rate")), f"{h['mean_length']:.1f}", _pct(h["truncated_rate"])]


def eval_section(results: dict | None, run_dir: Path, out: Path) -> tuple[str, list[str]]:
    if not results or not results.get("checkpoints"):
        return (f"<p>No evaluation yet: run <code>grpokit eval {_e(run_dir)}</code> to evaluate the base model "
                "and every checkpoint, then this report again.</p>"), []
    plot_eval(results, out / "eval_accuracy.png")
    k = results.get("samples_per_problem") or 0
    header = ["step", "held-out acc", "perturbed acc", "train acc", "gap", *([f"pass@{k}"] if k else []),
              "format", "refusal", "mean length", "cut off"]
    best = (results.get("best") or {}).get("step")
    entries = {e["step"]: e for e in results["checkpoints"]}
    per_step = [_eval_row(f"{s}{' (base)' if s == 0 else ''}{' ★ best' if s == best else ''}", e, k)
                for s, e in sorted(entries.items())]
    ba = []
    if 0 in entries:
        ba.append(("before (base model)", entries[0]))
    if best is not None and best in entries and best != 0:
        ba.append((f"best (step {best})", entries[best]))
    last = max(entries)
    if last not in (0, best):
        ba.append((f"last (step {last})", entries[last]))
    src = f"{_e(results['rows'])} rows of the {_e(results['data'])}"
    extra = []
    if results.get("perturbed_rows"):
        extra.append(f"{results['perturbed_rows']} perturbed copies (numbers redrawn, answers recomputed)")
    if results.get("train_rows"):
        extra.append(f"{results['train_rows']} training rows")
    html_ = [f"<p>Greedy decoding on {src}" + (f", plus {_e(' and '.join(extra))}" if extra else "") +
             f"; the training template ({_e(results.get('template'))}) and the training verifiers.</p>",
             '<figure><img src="eval_accuracy.png" alt="accuracy per checkpoint"><figcaption>accuracy per checkpoint'
             "</figcaption></figure>"]
    if best is not None:
        html_.append(f"<p><b>Best checkpoint: step {_e(best)}</b> ({_pct(results['best']['accuracy'])} held-out; "
                     f"chosen by held-out greedy accuracy, ties to the earlier step).</p>")
    if ba:
        html_.append("<h3>before / after</h3>" + _table(header, [_eval_row(lbl, e, k) for lbl, e in ba]))
    html_.append("<h3>every evaluated step</h3>" + _table(header, per_step))
    for e in results["checkpoints"]:
        g = e.get("gap")
        if g and g["flagged"]:
            what = "original vs perturbed numbers: memorised answers" if g["kind"] == "perturbed" else \
                "training vs held-out rows: overfitting"
            html_.append(f'<p class="bad">step {_e(e["step"])}: {100 * g["value"]:.1f}-point gap, {what}?</p>')
    return "\n".join(html_), ["eval_accuracy.png"]


def _completion_text(completion) -> str:
    if isinstance(completion, list):  # chat completions are logged as message lists
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def _prompt_text(prompt) -> str:
    if isinstance(prompt, list):  # chat messages: the user's last turn is the question
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return str(users[-1] if users else prompt)
    return str(prompt)


def pick_phases(samples: list[dict]) -> list[tuple[str, int]]:
    """(phase, step) for the beginning, middle and end of training among logged steps."""
    steps = sorted({s["step"] for s in samples if "step" in s})
    if not steps:
        return []
    picks = [("beginning", steps[0]), ("middle", steps[len(steps) // 2]), ("end", steps[-1])]
    seen, out = set(), []
    for name, step in picks:
        if step not in seen:
            seen.add(step)
            out.append((name, step))
    return out


def samples_section(samples: list[dict]) -> str:
    phases = pick_phases(samples)
    if not phases:
        return "<p>samples.jsonl is missing or empty (train.num_samples_logged may be 0).</p>"
    parts = []
    for name, step in phases:
        rows = [s for s in samples if s.get("step") == step][:SAMPLES_PER_PHASE]
        parts.append(f"<h3>{name} of training (step {step})</h3>")
        for s in rows:
            rewards = ", ".join(f"{_e(k)} {_num(v, 2)}" for k, v in (s.get("rewards") or {}).items())
            parts.append(f'<div class="sample"><div class="q">{_e(_prompt_text(s.get("prompt", "")))}</div>'
                         f'<pre>{_e(_completion_text(s.get("completion", "")))}</pre><div class="r">rewards: {rewards or "–"}</div></div>')
    return "\n".join(parts)


def health_section(findings: list[dict] | None) -> str:
    if findings is None:
        return "<p>No health.jsonl in this run (the health monitor did not run).</p>"
    if not findings:
        return "<p>The health monitor found nothing wrong.</p>"
    rows = [[_e(f.get("severity", "")), _e(f.get("code", "")), _e(f.get("step", "")), _e(f.get("message", "")),
             f"<code>{_e(json.dumps(f.get('evidence'), ensure_ascii=False))[:400]}</code>"] for f in findings]
    return _table(["severity", "code", "step", "message", "evidence"], rows)


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1em 0; } img { max-width: 100%; } figcaption { font-size: 0.85em; color: #555; }
.missing, .note { color: #777; } .bad { color: #b00; }
.sample { border-left: 3px solid #9ab; padding: 0.3em 0.8em; margin: 0.6em 0; }
.sample pre { white-space: pre-wrap; background: #f6f6f6; padding: 0.4em; }
.q { font-weight: 600; } .r { font-size: 0.85em; color: #555; }
"""


# ---------------------------------------------------------------- entry point
def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write report.html and its PNGs; returns the path of report.html."""
    from grpokit.errors import GrpokitError, Problem
    from grpokit.rundir import RunDir

    run_dir, rd = Path(run_dir), RunDir(run_dir)
    if not run_dir.is_dir():
        raise GrpokitError([Problem(str(run_dir), "no such run directory", "pass the output_dir of a grpokit train")])
    out = Path(out_dir) if out_dir else rd.report_dir
    out.mkdir(parents=True, exist_ok=True)
    recipe = rd.raw_config()
    # Every reader is crash-tolerant: a line cut by a crash is skipped with one note, the rest still shown.
    metrics = [m for m in rd.read_metrics() if "train_runtime" not in m]
    results = read_json(rd.results_path())
    findings = rd.read_health() if rd.health.is_file() else None
    samples, run = rd.read_samples(), rd.read_status()

    curves, images = curves_section(metrics, recipe, out)
    evals, eval_images = eval_section(results, run_dir, out)
    model = (recipe or {}).get("model", {}).get("name", run.get("model", "?"))
    facts = [["model", _e(model)], ["status", _e(run.get("status", "unknown"))],
             ["steps", _e(run.get("step", metrics[-1]["step"] if metrics else "–"))],
             ["training time", f"{run['seconds'] / 60:.1f} min" if _number(run.get("seconds")) else "–"],
             ["rewards", _e(", ".join(f"{r['name']} ×{r.get('weight', 1.0)}" for r in (recipe or {}).get("rewards", [])))]]
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>grpokit report: {_e(run_dir.name)}</title>
<style>{STYLE}</style></head><body>
<h1>grpokit report: {_e(run_dir.name)}</h1>
{_table(["", ""], facts, "narrow")}
<h2>Evaluation</h2>
{evals}
<h2>Training curves</h2>
{curves}
<h2>Sample completions</h2>
{samples_section(samples)}
<h2>Health findings</h2>
{health_section(findings)}
<p class="note">Written by <code>grpokit report</code> from {_e(run_dir.resolve())}; images: {len(images) + len(eval_images)}.</p>
</body></html>
"""
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
