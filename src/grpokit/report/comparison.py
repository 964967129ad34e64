"""The SFT-vs-GRPO comparison's page (and the composition demo's): its table, verdict and a bar plot, beside its
comparison.json.

    grpokit demo --task sft-vs-grpo --output-dir runs/cmp     # writes runs/cmp/report.html at its end
    grpokit report runs/cmp                                   # writes it again from runs/cmp/comparison.json

Reads only the comparison folder's `comparison.json` (grpokit.demo.sft_vs_grpo and grpokit.demo.composition
write it; its `title` and `recipes` name what was compared) and writes
`report.html` and `scores.png` into the same folder (names its record lists: they replace only what grpokit
wrote there). The table is the one the command prints (`comparison_table`): a row per model, the task's
primary metric on the held-out rows and on each copy the family makes (perturbed numbers, rewritten wording),
the held-out rows' sampled pass@1 and pass@k (a group's worth of samples per row at the recipe's temperature, as
training samples them), the held-out set's other correctness metrics, format rate, retention (another task's held-out score: what the model
kept of a skill it was not trained on) and minutes. Each pipeline's folder is a run with its own `grpokit report`.
"""
from __future__ import annotations

from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation import pct, rows_of
from grpokit.report.plots import DPI, FIGSIZE, save_figure
from grpokit.families import variant
from grpokit.report.sections import escape, html_table
from grpokit.run.files import parse_json
from grpokit.run.writer import write_file
from grpokit.run.claims import claim

RESULT_FILE = "comparison.json"  # every figure of a comparison, in its folder
PAGE, PLOT = "report.html", "scores.png"
REPORT_ENTRIES = {PAGE: "file", PLOT: "file"}  # what the page adds to the comparison folder's record
TITLE = "SFT or GRPO"  # the page's title unless comparison.json names another (the composition demo's)


def set_title(kind: str) -> str:
    """A set's title in the tables: "held-out", else its family variant's own (grpokit.families: `Variant.title`)."""
    if kind == "heldout":
        return "held-out"
    v = variant(kind)
    return (v.title or v.name) if v else kind


def comparison_metric(models: dict[str, dict]) -> str:
    """What the scores are: the task's primary metric (accuracy, field accuracy, ...)."""
    return next((m["sets"]["heldout"].get("metric") for m in models.values() if m["sets"].get("heldout")
                 and m["sets"]["heldout"].get("metric")), None) or "accuracy"


def comparison_sets(models: dict[str, dict]) -> list[str]:
    """The sets evaluated: held-out, then the copies the task's family makes (perturbed, rewritten), in order."""
    return list(dict.fromkeys(k for m in models.values() for k in m["sets"]))


def comparison_table(models: dict[str, dict]) -> tuple[list[str], list[tuple[str, ...]]]:
    """(columns, a row per model): the primary metric on each set (greedy), the held-out rows' sampled pass@1 and
    pass@k (k: the largest sampled), the held-out set's other correctness metrics (a JSON task's valid rate),
    format, retention where measured, minutes (its pipeline's, all stages)."""
    sets, metric = comparison_sets(models), comparison_metric(models)
    others = list(dict.fromkeys(k for m in models.values() for k in (m["sets"].get("heldout") or {}).get("metrics", {})
                                if k != metric))
    sampled = [int(k) for m in models.values() for k in (m["sets"].get("heldout") or {}).get("pass_at_k") or {}]
    ks = list(dict.fromkeys(["1", str(max(sampled))])) if sampled else []  # pass@1 and pass@(samples per row)
    kept = any(m.get("retention") for m in models.values())  # another task's held-out score (RL's Razor)
    columns = ([set_title(k) for k in sets] + [f"held-out sampled pass@{k}" for k in ks]
               + [f"held-out {o}" for o in others] + ["format"] + (["retention"] if kept else []) + ["minutes"])

    def score(m: dict, key: str) -> str:
        s = m["sets"].get(key)
        return pct(s["accuracy"], rows_of(s)) if s else "-"

    rows = [(name, *(score(m, k) for k in sets),
             *(pct((m["sets"].get("heldout") or {}).get("pass_at_k", {}).get(k), rows_of(m["sets"].get("heldout")))
               for k in ks),
             *(pct((m["sets"].get("heldout") or {}).get("metrics", {}).get(o), rows_of(m["sets"].get("heldout")))
               for o in others),
             pct((m["sets"].get("heldout") or {}).get("format_rate")),
             *([pct((m.get("retention") or {}).get("accuracy"))] if kept else []),
             "-" if m.get("minutes") is None else f"{m['minutes']:.1f}") for name, m in models.items()]
    return columns, rows


def _plot(models: dict[str, dict], path: Path) -> None:
    """Grouped bars: a group per model, a bar per set (greedy) and one for the held-out sampled pass@1, in %."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    names = list(models)
    bars_of = [(set_title(k), [(models[n]["sets"].get(k) or {}).get("accuracy") for n in names])
               for k in comparison_sets(models)]
    sampled = [((models[n]["sets"].get("heldout") or {}).get("pass_at_k") or {}).get("1") for n in names]
    if any(v is not None for v in sampled):
        bars_of.append(("held-out, sampled pass@1", sampled))
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    width = 0.8 / max(1, len(bars_of))
    for i, (label, values) in enumerate(bars_of):
        bars = ax.bar([x + (i - (len(bars_of) - 1) / 2) * width for x in range(len(names))],
                      [100 * (v or 0.0) for v in values], width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set(ylabel=f"{comparison_metric(models)} (%)", ylim=(0, 105))
    ax.set_title(f"final models: {comparison_metric(models)} on each set (greedy), and sampled on held-out rows",
                 fontsize=12)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=9)
    save_figure(plt, fig, path)


def read_comparison(folder: Path) -> dict:
    path = folder / RESULT_FILE
    try:
        result = parse_json(path.read_text(encoding="utf-8"))
        if not isinstance(result, dict) or not isinstance(result.get("models"), dict):
            raise ValueError("no `models`")
    except (OSError, ValueError) as e:
        raise GrpokitError([Problem(str(path), f"cannot read the comparison: {e}",
                                    "run the comparison again: grpokit demo --task sft-vs-grpo --output-dir "
                                    f"{folder}")]) from None
    return result


def write_comparison_report(folder: str | Path) -> Path:
    """report.html and scores.png of the comparison in `folder` (module docstring); the page's path."""
    folder = Path(folder)
    result = read_comparison(folder)
    claim(folder, "comparison", REPORT_ENTRIES, "pass `grpokit report` the comparison's own folder")
    models = result["models"]
    _plot(models, folder / PLOT)
    columns, rows = comparison_table(models)
    verdict = "".join(f"<li>{escape(line)}</li>" for line in result.get("verdict") or [])
    recipes = result.get("recipes") or {}
    title = f"{result.get('title') or TITLE}: {folder.name}"
    # each recipe by its role (sft, grpo; the composition demo's three), as comparison.json names them
    used = ", ".join(f"{escape(role)} recipe <code>{escape(path)}</code>" for role, path in recipes.items()) or "?"
    links = "".join(f'<li><a href="{escape(n)}/">{escape(n)}</a> (a run: <code>grpokit report {escape(folder / n)}'
                    "</code>)</li>" for n in result.get("pipelines") or [])
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body {{ font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; }}
table {{ border-collapse: collapse; }} th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }} img {{ max-width: 100%; }} .note {{ color: #777; }}</style>
</head><body>
<h1>{escape(title)}</h1>
<p>{used};
overrides: {escape(" ".join(result.get("overrides") or []) or "none")}; {escape(result.get("seconds_total", "?"))} s
in all.</p>
<h2>Final models, greedy {escape(comparison_metric(models))}</h2>
{html_table(["model", *columns], [[escape(c) for c in row] for row in rows])}
<figure><img src="{PLOT}" alt="scores per model and set"></figure>
<h2>Verdict</h2>
<ul>{verdict}</ul>
<h2>The pipelines</h2>
<ul>{links}</ul>
<p class="note">Written by <code>grpokit report</code> from {escape(folder.resolve() / RESULT_FILE)}.</p>
</body></html>
"""
    return write_file(folder / PAGE, page, within=folder)
