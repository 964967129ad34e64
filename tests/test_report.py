"""The run report: plots and HTML from a run directory, missing metrics, health findings, eval results."""
from __future__ import annotations

import json
import re

import pytest
import yaml
from conftest import write_jsonl, grpokit_run

from grpokit.cli import main
from grpokit.report import plots as report_plots
from grpokit.report.html import write_report
from grpokit.report.sections import curves_section, group_findings, health_section, pick_phases
from grpokit.report.plots import CURVES, DPI, FIGSIZE, ema, ema_weight, plot_curve, series


def _fake_run(tmp_path, beta=0.0, with_kl=False, steps=6):
    """A run directory written by hand: what training and evaluation write, without training."""
    run = grpokit_run(tmp_path / "run")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "model": {"name": "default"}, "train": {"beta": beta},
        "rewards": [{"name": "math_correctness", "weight": 1.0}, {"name": "format", "weight": 0.5}]}))
    (run / "run.json").write_text(json.dumps({"status": "completed", "step": steps, "seconds": 90.0}))
    metrics = []
    for s in range(1, steps + 1):
        m = {"step": s, "reward": 0.1 * s, "rewards/math_correctness/mean": 0.05 * s, "rewards/format/mean": 0.1 * s,
             "completions/mean_length": 30.0 - s, "frac_reward_zero_std": 0.5, "entropy": 0.8}
        if with_kl:
            m["kl"] = 0.001 * s
        metrics.append(m)
    metrics[2]["entropy"] = None  # training writes NaN as null; a gap in a curve must not break its plot
    write_jsonl(run / "metrics.jsonl", metrics)
    write_jsonl(run / "samples.jsonl", [
        {"step": s, "prompt": [{"role": "user", "content": f"What is {s} + 1?"}],
         "completion": [{"role": "assistant", "content": f"<b>{s}</b> + 1\nFinal answer: {s + 1}"}],  # chat: messages
         "rewards": {"math_correctness": 1.0, "format": 1.0}}
        for s in range(1, steps + 1)])
    return run


def _results(run, accs):
    entries = [{"step": s, "path": f"ck-{s}", "perturbed": {"accuracy": a / 2, "rows": 8}, "train": None,
                "gap": {"kind": "perturbed", "value": a / 2, "stderr": 0.1, "flagged": a > 0.5},
                "heldout": {"rows": 8, "accuracy": a, "format_rate": 0.9, "mean_length": 20.0, "truncated_rate": 0.0,
                            "refusal_rate": 0.0, "pass_at_k": {"1": a, "4": min(1, 2 * a)}, "samples": []}}
               for s, a in accs.items()]
    best = max(entries, key=lambda e: (e["heldout"]["accuracy"], -e["step"]))
    res = {"model": "default", "data": "held-out set of the recipe", "rows": 8, "perturbed_rows": 8, "train_rows": 0,
           "template": "chat", "samples_per_problem": 4, "checkpoints": entries,
           "best": {"step": best["step"], "path": best["path"], "accuracy": best["heldout"]["accuracy"]}}
    (run / "eval").mkdir()
    (run / "eval" / "results.json").write_text(json.dumps(res))


def test_report_has_every_plot_the_numbers_and_the_best(tmp_path):
    run = _fake_run(tmp_path, beta=0.04, with_kl=True)
    _results(run, {0: 0.125, 3: 0.75, 6: 0.625})
    write_jsonl(run / "health.jsonl", [{"code": "reward_flat", "severity": "warning", "step": 4,
                                        "message": "reward <flat> for 3 steps", "evidence": {"std": 0.0}}])
    assert main(["report", str(run)]) == 0
    out = run / "report"
    page = (out / "report.html").read_text()
    for png in ("reward", "kl", "completion_length", "frac_reward_zero_std", "entropy", "eval_accuracy"):
        assert (out / f"{png}.png").stat().st_size > 5000, png  # a real plot, not an empty file
        assert f'src="{png}.png"' in page
    assert "Best checkpoint: step 3" in page and "75.0%" in page and "12.5%" in page  # best marked, before/after
    assert "before (base model)" in page and "best (step 3)" in page and "last (step 6)" in page
    assert "pass@4" in page and "memorised answers" in page  # the flagged perturbation gap
    assert "reward &lt;flat&gt; for 3 steps" in page and "reward_flat" in page  # health, escaped
    assert "&lt;b&gt;1&lt;/b&gt; + 1\nFinal answer: 2</pre>" in page and "<b>1</b>" not in page  # text, escaped
    for phase in ("beginning of training (step 1)", "middle of training (step 4)", "end of training (step 6)"):
        assert phase in page


def test_missing_metrics_say_not_logged(tmp_path):
    run = _fake_run(tmp_path, beta=0.0, with_kl=False)
    path = write_report(run)
    page = path.read_text()
    assert "not logged (train.beta is 0" in page and not (path.parent / "kl.png").exists()
    assert "No evaluation yet" in page and "grpokit eval" in page
    assert "No health.jsonl" in page


def test_report_of_an_empty_run_does_not_crash(tmp_path):
    run = grpokit_run(tmp_path / "run")
    (run / "metrics.jsonl").write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "rew')  # cut by a crash
    page = write_report(run).read_text()
    assert "not logged" in page and "samples.jsonl is missing" in page
    assert re.findall(r'src="([^"]+)"', page) == ["reward.png"]


@pytest.mark.parametrize("steps, phases", [
    ([], []),
    ([5], [("beginning", 5)]),
    ([1, 2], [("beginning", 1), ("middle", 2)]),
    ([1, 2, 3, 4, 5], [("beginning", 1), ("middle", 3), ("end", 5)]),
])
def test_sample_phases(steps, phases):
    assert pick_phases([{"step": s} for s in steps]) == phases


def test_series_skips_missing_and_non_finite():
    metrics = [{"step": 1, "kl": 0.1}, {"step": 2}, {"step": 3, "kl": None}, {"step": 4, "kl": "inf"}, {"step": 5, "kl": 0.2}]
    assert series(metrics, "kl") == ([1, 5], [0.1, 0.2])



def test_demo_ends_with_the_report(tmp_path, tiny_model_dir, capsys):
    from test_train import CHARS, make_recipe

    from grpokit.demo import run_demo

    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS, {"name": "format", "weight": 0.5}],
                         max_steps=1)
    run_demo(output_dir=str(tmp_path / "demo"), task="arithmetic-grpo", recipe_path=recipe)
    report = tmp_path / "demo" / "report" / "report.html"
    assert f"report: {report}" in capsys.readouterr().out
    page = report.read_text()
    assert "before (base model)" in page and 'src="eval_accuracy.png"' in page and 'src="reward.png"' in page


def test_missing_entropy_is_explained_when_no_step_trained(tmp_path):
    metrics = [{"step": s, "reward": 0.0, "frac_reward_zero_std": 1.0, "grpokit/trained_frac": 0.0} for s in (1, 2)]
    html, images = curves_section(metrics, {"train": {"beta": 0.0}}, tmp_path)
    assert "entropy.png" not in images and "train.skip_no_signal ran no policy pass" in html


# ---------------------------------------------------------------- smoothing
@pytest.mark.parametrize("values, weight, expected", [
    ([], 0.5, []),                                   # nothing logged
    ([4.0], 0.8, [4.0]),                             # one point: itself
    ([2.0, 2.0, 2.0], 0.8, [2.0, 2.0, 2.0]),         # a constant stays constant (seeded with the first value, not 0)
    ([0.0, 1.0, 1.0], 0.5, [0.0, 0.5, 0.75]),        # half the past, half the new point
    ([1.0, 0.0], 0.0, [1.0, 0.0]),                   # weight 0: the raw values
])
def test_ema(values, weight, expected):
    assert ema(values, weight) == pytest.approx(expected)


@pytest.mark.parametrize("n_points, weight", [
    (8, 0.5),      # a short demo: the minimum span of 3 points
    (108, 0.8),    # a 108-step GPU run: span 9
    (5000, 0.95),  # a long run: the span stops at 40 so a trend does not lag by hundreds of steps
])
def test_ema_weight_follows_the_run_length(n_points, weight):
    assert ema_weight(n_points) == weight


def test_smoothed_curves_say_their_weight(tmp_path):
    metrics = [{"step": s, "reward": s % 3} for s in range(1, 41)]
    html, _ = curves_section(metrics, None, tmp_path)
    assert "exponential moving average, weight 0.5 on the past; faint: raw values" in html
    short, _ = curves_section(metrics[:4], None, tmp_path)
    assert "fewer than 8 points: not smoothed" in short


# ---------------------------------------------------------------- every curve: drawn when logged, "not logged" otherwise
OPTIONAL_CURVES = [
    # (stem, a metrics.jsonl key that draws it)
    ("truncated", "completions/clipped_ratio"),
    ("clip_ratio", "clip_ratio/region_mean"),
    ("loss", "loss"),
    ("grad_norm", "grad_norm"),
    ("learning_rate", "learning_rate"),
    ("step_time", "step_time"),
    ("memory", "grpokit/peak_memory_gib"),  # a GPU run
    ("memory", "grpokit/peak_rss_gib"),     # a CPU run
    ("kl", "kl"),
    ("entropy", "entropy"),
    ("refill", "grpokit/refill/discarded_tokens"),
    ("sampler_gap", "sampling/sampling_logp_difference/mean"),
    ("positions", "grpokit/positions/ratio"),
]


@pytest.mark.parametrize("stem, key", OPTIONAL_CURVES)
def test_each_curve_is_drawn_when_logged_and_says_not_logged_otherwise(tmp_path, stem, key):
    title = {c[0]: c[1] for c in CURVES}[stem]
    logged = [{"step": s, "reward": 0.1 * s, key: 0.01 * s} for s in range(1, 13)]
    (tmp_path / "with").mkdir()
    html, images = curves_section(logged, None, tmp_path / "with")
    assert f"{stem}.png" in images and (tmp_path / "with" / f"{stem}.png").stat().st_size > 5000
    assert f'src="{stem}.png"' in html and f"<b>{title}</b>: not logged" not in html
    assert "peak_rss_gib: not logged" not in html and "peak_memory_gib: not logged" not in html  # either, not both
    bare = [{"step": s, "reward": 0.1 * s} for s in range(1, 13)]
    (tmp_path / "without").mkdir()
    html, images = curves_section(bare, None, tmp_path / "without")
    assert f"{stem}.png" not in images and not (tmp_path / "without" / f"{stem}.png").exists()
    assert f"<b>{title}</b>: not logged" in html


def test_refill_curve_says_why_it_is_missing_when_refill_is_off(tmp_path):
    bare = [{"step": s, "reward": 0.1 * s} for s in range(1, 13)]
    html, _ = curves_section(bare, {"selection": {"enabled": True, "refill": False}}, tmp_path)
    assert "selection.refill is off" in html


def test_train_logs_peak_memory_for_the_report():
    from grpokit.training.callbacks import peak_memory

    mem = peak_memory()
    assert list(mem) == ["grpokit/peak_rss_gib"] and 0.05 < mem["grpokit/peak_rss_gib"] < 64  # this CPU process


@pytest.mark.parametrize("stem, title", [(c[0], c[1]) for c in CURVES] + [
    ("long", ("a title far longer than any of the report's own, to prove that a long title wraps onto a second "
             "line instead of running off the edge of the figure"))])
def test_titles_fit_inside_the_figure(tmp_path, monkeypatch, stem, title):
    seen = {}

    def keep(plt, fig, path):
        fig.tight_layout()
        fig.canvas.draw()
        seen.update(fig=fig, title=fig.axes[0].title)
        fig.savefig(path)

    monkeypatch.setattr(report_plots, "save_figure", keep)
    plot_curve([{"step": s, "x": s} for s in range(1, 5)], ["x"], title, "y", tmp_path / f"{stem}.png")
    fig, box = seen["fig"], seen["title"].get_window_extent()
    assert 0 <= box.x0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1, (stem, box, fig.bbox)
    assert (fig.bbox.width, fig.bbox.height) == (FIGSIZE[0] * DPI, FIGSIZE[1] * DPI)
    assert fig.bbox.width > 640 and fig.bbox.height > 340  # larger than the old 640 x 340
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---------------------------------------------------------------- page layout: header, completions, health
def test_facts_table_has_no_empty_header_row(tmp_path):
    page = write_report(_fake_run(tmp_path)).read_text()
    assert "<th></th>" not in page and "<td>model</td>" in page


def test_completions_table_is_searchable_offline(tmp_path):
    run = _fake_run(tmp_path, steps=9)
    page = write_report(run).read_text()
    assert 'id="completions-search"' in page and 'oninput="grpokitFilter(this)"' in page
    assert "function grpokitFilter" in page and "<script src" not in page  # inline: works from a copied folder
    table = page.split('id="completions"')[1].split("</table>")[0]
    steps = re.findall(r"<tr><td>(\d+)<br><small>(\w+)</small>", table)
    assert steps == [("1", "beginning"), ("5", "middle"), ("9", "end")]  # one sample per step in this run
    assert "12 of 12" not in page and "3 of 3 completions" in page


HEALTH_CASES = [
    # (findings, expected rows: (code, severity, count, steps, first, last))
    ([{"code": "reward_plateau", "severity": "warning", "step": s, "message": f"flat at {s}"}
      for s in (40, 41, 42, 60, 61, 80, 100)],
     [("reward_plateau", "warning", 7, [40, 41, 42, 60, 61, 80, 100], 40, 100)]),    # 7 warnings: one row
    ([{"code": "a", "severity": "warning", "step": 5}, {"code": "b", "severity": "error", "step": 9},
      {"code": "a", "severity": "error", "step": 2}],
     [("a", "error", 2, [2, 5], 2, 5), ("b", "error", 1, [9], 9, 9)]),                # worst severity; errors first
    ([{"code": "c", "severity": "info"}], [("c", "info", 1, [], None, None)]),       # a finding without a step
]


@pytest.mark.parametrize("findings, expected", HEALTH_CASES)
def test_health_findings_are_grouped_by_code(findings, expected):
    got = [(g["code"], g["severity"], g["count"], g["steps"], g["first"], g["last"]) for g in group_findings(findings)]
    assert got == expected


def test_health_table_has_one_row_per_code_with_its_steps():
    findings = [{"code": "reward_plateau", "severity": "warning", "step": s, "message": f"flat since step {s - 20}"}
                for s in (40, 41, 42, 60, 61, 80, 100)]
    html = health_section(findings)
    assert html.count("<b>reward_plateau</b>") == 1 and "40–42, 60–61, 80, 100" in html
    assert "flat since step 80" in html and "flat since step 20" not in html  # the latest message only
    assert "7 findings of 1 kind;" in html
