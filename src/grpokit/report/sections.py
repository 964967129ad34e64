"""The sections of the run report (grpokit.report.html assembles the page and writes it): training curves, the
evaluation per checkpoint, the searchable samples table and the health findings, each rendered as HTML from the run's
files, with the plots it draws.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from grpokit.evaluation.metrics import extra_kinds, further_metrics, pct, rows_of
from grpokit.evaluation.preference import win_names
from grpokit.report.plots import CURVES, number, plot_curve, plot_eval, smoothing_note
from grpokit.run import PROBE_ACCURACY

SAMPLES_PER_PHASE = 4  # completions shown for each of beginning / middle / end (the table has a search box)
EVIDENCE_CHARS = 400  # a finding's evidence is cut here: the full object is in health.jsonl
SEVERITY_ORDER = {"error": 0, "critical": 0, "warning": 1, "info": 2}


def reward_names(metrics: list[dict], recipe: dict | None) -> list[str]:
    names = [r["name"] for r in (recipe or {}).get("rewards", [])]
    logged = sorted({k.split("/")[1] for m in metrics for k in m if k.startswith("rewards/") and k.endswith("/mean")})
    return [n for n in names if n in logged] + [n for n in logged if n not in names]


# ---------------------------------------------------------------- HTML pieces
def escape(x) -> str:
    return html.escape(str(x))


def _pct(x, n=None) -> str:
    """A share as a percentage; with `n` rows, its 95% Wilson interval beside it (grpokit.evaluation's `pct`)."""
    x = number(x)
    return "–" if x is None else pct(x, rows_of({"rows": n}))


def _num(x, digits=3) -> str:
    x = number(x)
    return "–" if x is None else f"{x:.{digits}f}"


def html_table(header: list[str] | None, rows: list[list[str]], cls: str = "", attrs: str = "") -> str:
    """An HTML table; cells are HTML already. header None: no header row (a key/value list)."""
    head = "" if header is None else "<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead>"
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"{attrs}>{head}<tbody>{body}</tbody></table>'


def _not_logged_reason(key: str, recipe: dict | None, metrics: list[dict]) -> str:
    beta = ((recipe or {}).get("train") or {}).get("beta")
    if key == "kl" and beta == 0:
        return "not logged (train.beta is 0: no reference model, so TRL computes no KL)"
    if key == "entropy" and metrics and all(m.get("grpokit/trained_frac") == 0 for m in metrics):
        return ("not logged: in every logged step all groups tied (no learning signal), so train.skip_no_signal "
                "ran no policy pass, which is where entropy is measured")
    if key == PROBE_ACCURACY:
        return ("not logged (health.probe_rows is 0, the task has no correctness reward or no held-out rows, a tool "
                "task, or a run from before the held-out probe)")
    selection = (recipe or {}).get("selection") or {}
    if key.startswith("grpokit/refill/") and recipe is not None and not selection.get("refill"):
        return "not logged (selection.refill is off: no batch was generated again)"
    return "not logged by this run"


def curves_section(metrics: list[dict], recipe: dict | None, out: Path) -> tuple[str, list[str]]:
    parts, images = [], []
    names = reward_names(metrics, recipe)
    if not metrics:
        return "<p>metrics.jsonl is missing or empty: the run logged no step.</p>", []
    for stem, title, keys, ylabel, smooth in CURVES:
        keys = list(keys) + ([f"rewards/{n}/mean" for n in names] if stem == "reward" else [])
        drawn, n = plot_curve(metrics, keys, title, ylabel, out / f"{stem}.png", smooth)
        if drawn:
            images.append(f"{stem}.png")
            missing = [k for k in keys if k not in drawn and stem != "memory"]  # memory: GPU or CPU key, not both
            note = f'<p class="note">{escape(", ".join(missing))}: not logged</p>' if missing else ""
            parts.append(f'<figure><img src="{stem}.png" alt="{escape(title)}"><figcaption>{escape(title)} '
                         f"({escape(smoothing_note(n, smooth))})</figcaption></figure>{note}")
        else:
            parts.append(f'<p class="missing"><b>{escape(title)}</b>: {escape(_not_logged_reason(keys[0], recipe, metrics))}</p>')
    last = metrics[-1]
    keys = ["reward", *[f"rewards/{n}/mean" for n in names], "kl", "completions/mean_length", "frac_reward_zero_std",
            "entropy", "loss", "grad_norm", "step_time"]
    summary = [[escape(k), _num(last[k]) if k in last else "not logged"] for k in keys]
    parts.append(f"<h3>last logged step ({escape(last.get('step'))})</h3>" + html_table(["metric", "value"], summary, "narrow"))
    return "\n".join(parts), images


def _sub(e: dict, key: str) -> dict:
    v = e.get(key)
    return v if isinstance(v, dict) else {}


def _eval_row(label: str, e: dict, k: int, further: list[str] = (), wins: list[str] = ()) -> list[str]:
    h, gap = _sub(e, "heldout"), _sub(e, "gap")
    gap_s = "–" if number(gap.get("value")) is None else (
        f"{100 * gap['value']:+.1f} pts" + (' <b class="bad">large</b>' if gap.get("flagged") is True else ""))
    won = [_pct(_sub(_sub(e, "vs_base"), n).get("win_rate")) for n in wins]
    n = h.get("rows")
    return [label, _pct(h.get("accuracy"), n), *[_pct(_sub(h, "metrics").get(m), n) for m in further], *won,
            *[_pct(_sub(e, kind).get("accuracy"), _sub(e, kind).get("rows")) for kind in extra_kinds()], gap_s,
            *([_pct(_sub(h, "pass_at_k").get(str(k)), n)] if k else []), _pct(h.get("format_rate")),
            _pct(h.get("refusal_rate")), _num(h.get("mean_length"), 1), _pct(h.get("truncated_rate"))]


def demo_section(demo: dict | None) -> str:
    """What a demo printed (demo.json's `shown`: its table and the lines under it, GRPO's own share and the samples
    with their verdicts), the same words on the page; "" for a run that is no demo."""
    shown = (demo or {}).get("shown") if isinstance(demo, dict) else None
    if not isinstance(shown, dict) or not isinstance(shown.get("rows"), list):
        return ""
    columns = [escape(c) for c in shown.get("columns") or []]
    rows = [[escape(c) for c in r] for r in shown["rows"] if isinstance(r, list)]
    lines = "".join(f"<pre>{escape(line)}</pre>" for line in shown.get("lines") or [])
    return (f"<h3>What the demo printed: {escape(shown.get('title', ''))}</h3>"
            + html_table(columns or None, rows) + lines)


def eval_section(results: dict | None, run_dir: Path, out: Path, start: str = "base model") -> tuple[str, list[str]]:
    """The evaluation section; `start`: what step 0 is (the base model, or the trained model `--init-from` named)."""
    if not results or not results.get("checkpoints"):
        return (f"<p>No evaluation yet: run <code>grpokit eval {escape(run_dir)}</code> to evaluate the base model "
                "and every checkpoint, then this report again.</p>"), []
    plot_eval(results, out / "eval_accuracy.png", start)
    k = results.get("samples_per_problem") if type(results.get("samples_per_problem")) is int else 0
    metric = results.get("metric", "accuracy") or "accuracy"  # the task's primary metric, stored as `accuracy`
    further = further_metrics(results)  # the task's other correctness rewards (a JSON task's valid rate)
    wins = win_names(results["checkpoints"])  # a learned reward: each checkpoint against the base, pair by pair
    plotted = metric if results.get("metric") or not wins else "win rate against the base"
    header = ["step", f"held-out {metric}", *[f"held-out {m}" for m in further], *[f"win vs base ({n})" for n in wins],
              *extra_kinds(), "gap", *([f"pass@{k}"] if k else []), "format", "refusal", "mean length", "cut off"]
    best = (results.get("best") or {}).get("step")
    entries = {e["step"]: e for e in results["checkpoints"]}
    per_step = [_eval_row(f"{s}{' (start)' if s == 0 and start != 'base model' else ' (base)' if s == 0 else ''}{' ★ best' if s == best else ''}", e, k, further, wins)
                for s, e in sorted(entries.items())]
    ba = []
    if 0 in entries:
        ba.append((f"before ({start})", entries[0]))
    if best is not None and best in entries and best != 0:
        ba.append((f"best (step {best})", entries[best]))
    last = max(entries)
    if last not in (0, best):
        ba.append((f"last (step {last})", entries[last]))
    src = f"{escape(results.get('rows', '?'))} rows of the {escape(results.get('data', '?'))}"
    extra = []
    variants = results.get("variants") if isinstance(results.get("variants"), dict) else {}
    if results.get("perturbed_rows") and "perturbed" not in variants:  # results written before `variants`
        extra.append(f"{results['perturbed_rows']} perturbed copies (numbers redrawn, answers recomputed)")
    for kind, v in variants.items():
        if isinstance(v, dict) and v.get("rows"):
            extra.append(f"{v['rows']} {kind} copies ({v.get('what') or kind})")
    if results.get("train_rows"):
        extra.append(f"{results['train_rows']} training rows")
    html_ = [f"<p>Greedy decoding on {src}" + (f", plus {escape(' and '.join(extra))}" if extra else "") +
             f"; the training template ({escape(results.get('template'))}) and the training verifiers.</p>",
             (f'<figure><img src="eval_accuracy.png" alt="{escape(plotted)} per checkpoint"><figcaption>{escape(plotted)} per '
              "checkpoint</figcaption></figure>")]
    if best is not None:
        html_.append(f"<p><b>Best checkpoint: step {escape(best)}</b> ({_pct(results['best']['accuracy'], results.get('rows'))} held-out; "
                     f"chosen by held-out greedy {escape(metric)}, ties to the earlier step).</p>")
    if ba:
        html_.append("<h3>before / after</h3>" + html_table(header, [_eval_row(lbl, e, k, further, wins) for lbl, e in ba]))
    html_.append("<h3>every evaluated step</h3>" + html_table(header, per_step))
    for e in results["checkpoints"]:
        g = _sub(e, "gap")
        if g.get("flagged") is True and number(g.get("value")) is not None:
            what = "original vs perturbed numbers: memorised answers" if g.get("kind") == "perturbed" else \
                "training vs held-out rows: overfitting"
            html_.append(f'<p class="bad">step {escape(e["step"])}: {100 * g["value"]:.1f}-point gap, {what}?</p>')
    return "\n".join(html_), ["eval_accuracy.png"]


def _completion_text(completion) -> str:
    if isinstance(completion, list):  # chat completions are logged as message lists
        return "".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in completion)
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


SEARCH_JS = """
function grpokitFilter(box) {
  var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
  var rows = document.querySelectorAll("#completions tbody tr");
  rows.forEach(function (tr) {
    var text = tr.textContent.toLowerCase();
    var hit = words.every(function (w) { return text.indexOf(w) >= 0; });
    tr.style.display = hit ? "" : "none"; shown += hit ? 1 : 0;
  });
  document.getElementById("completions-count").textContent = shown + " of " + rows.length + " completions";
}
"""


def samples_section(samples: list[dict]) -> str:
    """A table of completions from the first, middle and last logged step, with a search box (inline script)."""
    phases = pick_phases(samples)
    if not phases:
        return "<p>samples.jsonl is missing or empty (train.num_samples_logged may be 0).</p>"
    rows = []
    for name, step in phases:
        for s in [s for s in samples if s.get("step") == step][:SAMPLES_PER_PHASE]:
            rewards = "<br>".join(f"{escape(k)} {_num(v, 2)}" for k, v in (s.get("rewards") or {}).items())
            rows.append([f"{step}<br><small>{name}</small>", escape(_prompt_text(s.get("prompt", ""))),
                         f'<pre>{escape(_completion_text(s.get("completion", "")))}</pre>', rewards or "–"])
    intro = ", ".join(f"{name} of training (step {step})" for name, step in phases)
    return (f"<p>Completions logged at the {escape(intro)}; up to {SAMPLES_PER_PHASE} each.</p>"
            '<p><input id="completions-search" type="search" placeholder="search prompts, completions, rewards" '
            'oninput="grpokitFilter(this)" size="40"> <span id="completions-count" class="note">'
            f"{len(rows)} of {len(rows)} completions</span></p>"
            + html_table(["step", "prompt", "completion", "rewards"], rows, "samples", ' id="completions"')
            + f"<script>{SEARCH_JS}</script>")


def _step_ranges(steps: list[int]) -> str:
    """[3, 4, 5, 9] -> '3–5, 9'."""
    out, run = [], []
    for s in sorted(set(steps)):
        if run and s != run[-1] + 1:
            out.append(run)
            run = []
        run.append(s)
    if run:
        out.append(run)
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in out)


def group_findings(findings: list[dict]) -> list[dict]:
    """One entry per finding code (worst severity first): its steps, first/last step, count, latest message."""
    groups: dict[str, dict] = {}
    for f in findings:
        g = groups.setdefault(str(f.get("code", "?")), {"code": str(f.get("code", "?")), "findings": []})
        g["findings"].append(f)
    out = []
    for g in groups.values():
        fs = g["findings"]
        steps = sorted({f["step"] for f in fs if isinstance(f.get("step"), int)})
        severity = min((str(f.get("severity", "")) for f in fs), key=lambda v: SEVERITY_ORDER.get(v, 3))
        last = max(fs, key=lambda f: f.get("step") if isinstance(f.get("step"), int) else -1)
        out.append({"code": g["code"], "severity": severity, "count": len(fs), "steps": steps,
                    "first": steps[0] if steps else None, "last": steps[-1] if steps else None,
                    "message": last.get("message", ""), "evidence": last.get("evidence")})
    return sorted(out, key=lambda g: (SEVERITY_ORDER.get(g["severity"], 3), g["first"] if g["first"] is not None else 0))


def health_section(findings: list[dict] | None) -> str:
    if findings is None:
        return "<p>No health.jsonl in this run (the health monitor did not run).</p>"
    if not findings:
        return "<p>The health monitor found nothing wrong.</p>"
    rows = [[escape(g["severity"]), f"<b>{escape(g['code'])}</b>", escape(g["count"]), escape(_step_ranges(g["steps"]) or "–"),
             escape(g["first"] if g["first"] is not None else "–"), escape(g["last"] if g["last"] is not None else "–"),
             escape(g["message"]), f"<code>{escape(json.dumps(g['evidence'], ensure_ascii=False)[:EVIDENCE_CHARS])}</code>"]
            for g in group_findings(findings)]
    kinds = f"{len(rows)} kind{'s' if len(rows) != 1 else ''}"
    return (f"<p>{len(findings)} finding{'s' if len(findings) != 1 else ''} of {kinds}; one row per kind, with the message and evidence "
            "of its latest occurrence (every finding is in health.jsonl).</p>"
            + html_table(["severity", "code", "times", "steps", "first", "last", "latest message", "evidence"], rows,
                     "health"))
