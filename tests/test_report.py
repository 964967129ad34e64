"""The run report: plots and HTML from a run directory, missing metrics, health findings, eval results."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import write_jsonl
from grpokit.cli import main
from grpokit.report import curves_section, pick_phases, series, write_report


def _fake_run(tmp_path, beta=0.0, with_kl=False, steps=6):
    """A run directory written by hand: what train.py and evaluate.py write, without training."""
    run = tmp_path / "run"
    run.mkdir()
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
    metrics[2]["entropy"] = None  # train.py writes NaN as null; a gap in a curve must not break its plot
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
    run = tmp_path / "run"
    run.mkdir()
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
    from grpokit.demo import run_demo
    from test_train import make_recipe

    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "test_chars"}, {"name": "format", "weight": 0.5}],
                         max_steps=1)
    run_demo(output_dir=str(tmp_path / "demo"), recipe_path=recipe)
    report = tmp_path / "demo" / "report" / "report.html"
    assert f"report: {report}" in capsys.readouterr().out
    page = report.read_text()
    assert "before (base model)" in page and 'src="eval_accuracy.png"' in page and 'src="reward.png"' in page


def test_missing_entropy_is_explained_when_no_step_trained(tmp_path):
    metrics = [{"step": s, "reward": 0.0, "frac_reward_zero_std": 1.0, "grpokit/trained_frac": 0.0} for s in (1, 2)]
    html, images = curves_section(metrics, {"train": {"beta": 0.0}}, tmp_path)
    assert "entropy.png" not in images and "train.skip_no_signal ran no policy pass" in html
