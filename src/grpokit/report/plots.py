"""The report's PNG plots: training curves (smoothed, raw line faint) and eval accuracy per checkpoint.

Used by `grpokit report` (html.py writes the HTML around them). Drawn with
matplotlib's Agg backend, so no display is needed; matplotlib is imported
only when a plot is drawn.

Smoothing is an exponential moving average, as TensorBoard and W&B draw it:
s[0] = x[0], s[t] = w * s[t-1] + (1 - w) * x[t] over the logged points in
step order (a missing step is skipped, not zero). The weight follows the
run's length (`ema_weight`: pandas' span convention, w = 1 - 2 / (span + 1),
span = points / `SPAN_DIVISOR` within `SPAN_RANGE`), so a 20-step demo and a
500-step run are both readable; every caption states the weight used. The raw
values stay on the plot as a faint line, so a spike is never hidden. Curves
with fewer than `MIN_POINTS_TO_SMOOTH` points, and schedules such as the
learning rate, are drawn raw only.

Not covered: interactive plots, several runs on one plot.
"""
from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

from grpokit.evaluation.preference import win_names
from grpokit.run import MEMORY_KEYS, POSITIONS_RATIO, PROBE_ACCURACY, SAMPLER_KEYS  # written by the training run
from grpokit.run.writer import write_file

SPAN_DIVISOR = 12  # span = 1/12 of the run: a 108-step run averages over ~9 steps (weight 0.8)
SPAN_RANGE = (3, 40)  # at least 3 points (weight 0.5), at most 40 (0.95): beyond that a trend lags by too much
MIN_POINTS_TO_SMOOTH = 8  # below this an average of a handful of points hides more than it shows
FIGSIZE = (9.0, 4.2)  # inches; at DPI 110: 990 x 462 px, readable at the page's 1000 px width
DPI = 110
TITLE_WIDTH = 80  # characters per title line; longer titles wrap instead of running off the figure

# (file stem, title, metrics.jsonl keys, y label, smoothed); rewards/<name>/mean are added to "reward" at run time.
CURVES = (
    ("reward", "reward (total and per component)", ("reward",), "mean reward", True),
    ("probe", "held-out probe: the task's metric on the first health.probe_rows held-out rows, greedy, at step 0 and "
     "each checkpoint (what health's probe_drop judges)", (PROBE_ACCURACY,), "share of the rows", False),
    ("kl", "KL to the reference model", ("kl",), "kl", True),
    ("completion_length", "completion length", ("completions/mean_length", "completions/min_length",
                                                "completions/max_length"), "tokens", True),
    ("truncated", "completions cut off at max_completion_length", ("completions/clipped_ratio",), "fraction", True),
    ("frac_reward_zero_std", "learning signal: groups with zero reward spread, completions trained on",
     ("frac_reward_zero_std", "grpokit/trained_frac"), "fraction", True),
    ("entropy", "token entropy of the policy (over the completions trained on)", ("entropy",), "nats", True),
    ("selection", "prompt bands (share of training prompts by estimated pass rate) and groups trained on with signal",
     ("grpokit/bands/unseen", "grpokit/bands/never_solved", "grpokit/bands/mixed", "grpokit/bands/always_solved",
      "grpokit/signal_groups"), "fraction", False),
    ("refill", "refill cost: completion tokens generated for groups not trained on (selection.refill)",
     ("grpokit/refill/discarded_tokens",), "tokens", False),
    ("clip_ratio", "policy-ratio clipping: share of tokens whose ratio hit the clip range",
     ("clip_ratio/region_mean", "clip_ratio/low_mean", "clip_ratio/high_mean"), "fraction", True),
    ("sampler_gap", "sampler vs trainer: |log-prob gap| per token (mean, max) and share of tokens the correction "
     "clipped or masked (generation.sampler_dtype)", SAMPLER_KEYS, "nats / fraction", True),
    ("positions", "token positions the loss computed, as a share of the padded layout TRL uses (each prompt once per group, "
     "completions unpadded: train.shared_prefix)", (POSITIONS_RATIO,), "fraction", False),
    ("loss", "training loss (GRPO objective)", ("loss",), "loss", True),
    ("grad_norm", "gradient norm (before clipping)", ("grad_norm",), "L2 norm", True),
    ("learning_rate", "learning rate (the schedule)", ("learning_rate",), "learning rate", False),
    ("step_time", "seconds per optimizer step", ("step_time",), "seconds", True),
    ("memory", "peak memory of the training process", MEMORY_KEYS, "GiB", False),
)


def number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def series(metrics: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric; steps where it is missing or not finite are left out."""
    pts = [(m["step"], number(m.get(key))) for m in metrics if "step" in m]
    pts = [(s, v) for s, v in pts if v is not None]
    return [s for s, _ in pts], [v for _, v in pts]


def ema_weight(n_points: int) -> float:
    """The weight of the past for a curve of n points (pandas' span: w = 1 - 2 / (span + 1))."""
    span = min(max(n_points // SPAN_DIVISOR, SPAN_RANGE[0]), SPAN_RANGE[1])
    return round(1 - 2 / (span + 1), 2)


def ema(values: list[float], weight: float) -> list[float]:
    """Exponential moving average, seeded with the first value (no pull towards 0 at the start)."""
    out: list[float] = []
    for v in values:
        out.append(v if not out else weight * out[-1] + (1 - weight) * v)
    return out


def smoothing_note(n_points: int, smoothed: bool = True) -> str:
    """What the plot's bold lines are, for the figure caption."""
    if not smoothed:
        return "raw values"
    if n_points < MIN_POINTS_TO_SMOOTH:
        return f"raw values (fewer than {MIN_POINTS_TO_SMOOTH} points: not smoothed)"
    return f"bold: exponential moving average, weight {ema_weight(n_points)} on the past; faint: raw values"


def _figure():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    return plt, fig, ax


def _title(ax, title: str) -> None:
    ax.set_title(textwrap.fill(title, TITLE_WIDTH), fontsize=12)


def save_figure(plt, fig, path: Path) -> None:
    fig.tight_layout()  # after the title wrapped: tight_layout makes room for every line of it
    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    write_file(path, png.getvalue(), within=path.parent)  # renamed into place, never written through a link


def plot_curve(metrics: list[dict], keys: list[str], title: str, ylabel: str, path: Path,
               smooth: bool = True) -> tuple[list[str], int]:
    """One PNG with a line per logged key: (keys that had data, most points of one key); no data: no file."""
    drawn = [(k, *series(metrics, k)) for k in keys]
    drawn = [d for d in drawn if d[1]]
    if not drawn:
        return [], 0
    n = max(len(xs) for _, xs, _ in drawn)
    plt, fig, ax = _figure()
    for i, (key, xs, ys) in enumerate(drawn):
        color = f"C{i}"
        if smooth and len(xs) >= MIN_POINTS_TO_SMOOTH:
            ax.plot(xs, ys, color=color, alpha=0.25, linewidth=1)
            ax.plot(xs, ema(ys, ema_weight(n)), color=color, linewidth=2, label=key)
        else:
            ax.plot(xs, ys, color=color, marker="o" if len(xs) < 30 else None, markersize=3, label=key)
    _title(ax, title)
    ax.set(xlabel="step", ylabel=ylabel)
    if len(drawn) > 1:
        ax.legend(fontsize=9)
    save_figure(plt, fig, path)
    return [k for k, _, _ in drawn], n


def plot_eval(results: dict, path: Path, start: str = "base model") -> None:
    """Each set's greedy metric per checkpoint; `start`: what step 0 is (the base model, or the model a run started
    from with --init-from: the demo's SFT model is not its base)."""
    plt, fig, ax = _figure()
    entries = results["checkpoints"]
    drawn = False
    for kind, label in (("heldout", "held-out"), ("perturbed", "perturbed numbers"), ("rewritten", "rewritten questions"),
                        ("train", "training rows")):
        pts = [(e["step"], number((e.get(kind) if isinstance(e.get(kind), dict) else {}).get("accuracy")))
               for e in entries]
        pts = [(s, 100 * a) for s, a in pts if a is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
            drawn = True
    if not drawn:  # no correctness reward (a preference task): the win rate against the base, the format reward
        for name in win_names(entries):
            pts = [(0, 50.0)] + [(e["step"], 100 * e["vs_base"][name]["win_rate"]) for e in entries
                                 if ((e.get("vs_base") or {}).get(name) or {}).get("win_rate") is not None]
            ax.plot(*zip(*pts), marker="o", label=f"win rate against the base ({name})")
        pts = [(e["step"], 100 * f) for e in entries
               if (f := number((e.get("heldout") if isinstance(e.get("heldout"), dict) else {}).get("format_rate")))
               is not None]
        if pts:
            ax.plot(*zip(*pts), marker="s", label="format reward pass rate")
    best = results.get("best")
    if best and best.get("accuracy") is not None:
        ax.plot([best["step"]], [100 * best["accuracy"]], marker="*", markersize=16, color="gold",
                markeredgecolor="black", linestyle="none", label=f"best (step {best['step']})")
    metric = results.get("metric") or ("win rate / pass rate" if not drawn else "accuracy")  # stored as `accuracy`
    _title(ax, f"greedy {metric} per checkpoint (step 0 = {start})")
    ax.set(xlabel="step", ylabel=f"{metric} (%)", ylim=(-2, 102))
    ax.legend(fontsize=9)
    save_figure(plt, fig, path)
