"""The report's tool-calling section, for runs that logged tool metrics or have a tool evaluation.

    grpokit report runs/smollm2-calculator-tools     # report.html gains "Tool calling"

Reads what the run directory already holds: from `metrics.jsonl`, TRL's
`tools/call_frequency` (tool calls per episode) and `tools/failure_frequency`
(share of calls that raised in the environment: undefined tool, bad
arguments, spent step budget) and the per-component tool rewards
(`rewards/<name>/mean` for the rewards of the tools family); from `eval/results-tools.json`
(written by `grpokit eval` for a recipe with `env:`, and by `grpokit demo --task tools`), the tools family's
evaluation columns per checkpoint (those of the family whose answers are episodes, grpokit.families.episodes_family:
the tools family's task success, share of episodes that call a tool, valid arguments, tool failures, calls per
episode). A run with neither gets no section, so other
reports are unchanged.
"""
from __future__ import annotations

import html
from pathlib import Path

from grpokit.families import episodes_family
from grpokit.report.plots import number, plot_curve
from grpokit.rewards import names_reading

TOOL_METRICS = ("tools/call_frequency", "tools/failure_frequency")  # TRL 1.16's names

# The plots this section may write (the report's record names every file a report writes).
TOOL_PLOTS = ("tool_calls.png", "tool_failures.png", "tool_rewards.png", "eval_tools.png")

def tool_reward_names(metrics: list[dict]) -> list[str]:
    """The logged rewards that score tool episodes (the reward table's rewards of the episodes family)."""
    family = episodes_family()
    logged = {k.split("/")[1] for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")}
    return [n for n in names_reading(family.name) if n in logged] if family is not None else []


def _e(x) -> str:
    return html.escape(str(x))


def _cell(v, share: bool) -> str:
    v = number(v)
    if v is None:
        return "–"
    return f"{100 * v:.1f}%" if share else f"{v:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr></thead>"
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="narrow">{head}<tbody>{body}</tbody></table>'


def _figure(name: str, title: str, n_note: str = "") -> str:
    return (f'<figure><img src="{name}" alt="{_e(title)}"><figcaption>{_e(title)}{_e(n_note)}</figcaption>'
            "</figure>")


def _training_part(metrics: list[dict], out: Path) -> tuple[list[str], list[str]]:
    parts, images = [], []
    rewards = [f"rewards/{n}/mean" for n in tool_reward_names(metrics)]
    plots = (("tool_calls.png", "tool calls per episode (TRL tools/call_frequency)", ["tools/call_frequency"],
              "calls per episode"),
             ("tool_failures.png", "share of tool calls that failed (TRL tools/failure_frequency)",
              ["tools/failure_frequency"], "fraction"),
             ("tool_rewards.png", "tool reward components", rewards, "mean reward"))
    for name, title, keys, ylabel in plots:
        drawn, _ = plot_curve(metrics, keys, title, ylabel, out / name, smooth=False) if keys else ([], 0)
        if drawn:
            images.append(name)
            parts.append(_figure(name, title))
    if metrics:
        last = metrics[-1]
        rows = [[_e(k), _cell(last.get(k), False) if k in last else "not logged"] for k in (*TOOL_METRICS, *rewards)]
        parts.append(f"<h3>last logged step ({_e(last.get('step'))})</h3>" + _table(["metric", "value"], rows))
    return parts, images


def _eval_part(doc: dict | None, run_dir: Path, out: Path) -> tuple[list[str], list[str]]:
    if not doc or not doc.get("checkpoints"):
        return [f"<p>No tool evaluation yet: run <code>grpokit eval {_e(run_dir)}</code> (task success, valid "
                "arguments, tool failures and calls per episode for the base model and every checkpoint).</p>"], []
    family = episodes_family()  # the tools family: the tool evaluation's columns
    entries, columns = doc["checkpoints"], family.columns if family is not None else ()
    rows = [[_e(f"{e['step']}{' (base)' if e['step'] == 0 else ''}"),
             *[_cell(e.get(c.key), c.share) for c in columns], _e(e.get("episodes", "–"))] for e in entries]
    how = "greedy episode" if doc.get("generations") == 1 else "sampled episodes"
    parts = [f"<p>{_e(doc.get('rows'))} evaluation row(s) × {_e(doc.get('generations'))} {how} per "
             f"checkpoint, played by TRL's own tool loop with the recipe's environment ({_e(doc.get('task'))}).</p>",
             _table(["step", *[c.title for c in columns], "episodes"], rows)]
    numeric = [{"step": e["step"], **{c.key: e.get(c.key) for c in columns if c.share}}
               for e in entries if isinstance(e.get("step"), int)]
    title = "tool evaluation per checkpoint (step 0 = base model)"
    drawn, _ = plot_curve(numeric, [c.key for c in columns if c.share], title, "fraction",
                          out / "eval_tools.png", smooth=False)
    if drawn:
        parts.append(_figure("eval_tools.png", title))
        return parts, ["eval_tools.png"]
    return parts, []


def tools_section(metrics: list[dict], tool_results: dict | None, run_dir: Path, out: Path) -> tuple[str, list[str]]:
    """HTML and image names of the "Tool calling" section; ("", []) for a run without tool metrics or tool eval."""
    logged = any(k in m for m in metrics for k in TOOL_METRICS)
    if not logged and not tool_results:
        return "", []
    parts, images = _training_part(metrics, out) if logged else (["<p>No tool metrics in metrics.jsonl.</p>"], [])
    eval_parts, eval_images = _eval_part(tool_results, run_dir, out)
    html_ = "\n".join(["<h3>during training</h3>", *parts, "<h3>evaluation</h3>", *eval_parts])
    return html_, images + eval_images
