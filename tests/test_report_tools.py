"""The report's "Tool calling" section: TRL's tool metrics, tool reward components and the tool eval per checkpoint."""
from __future__ import annotations

import json

import pytest
import yaml
from conftest import write_jsonl, grpokit_run

from grpokit.cli import main
from grpokit.report.tools import tool_reward_names

TOOL_REWARDS = ("task_success", "tool_choice", "tool_args", "tool_shaping")


def _run(tmp_path, tool_metrics=True, steps=5):
    """A run directory as training writes it for a recipe with env: (the keys TRL 1.16 and grpokit log)."""
    run = grpokit_run(tmp_path / "run")
    (run / "config.yaml").write_text(yaml.safe_dump({
        "model": {"name": "default"}, "train": {"beta": 0.0}, "env": {"name": "calculator"},
        "rewards": [{"name": n, "weight": 1.0} for n in TOOL_REWARDS]}))
    (run / "run.json").write_text(json.dumps({"status": "completed", "step": steps, "seconds": 60.0}))
    metrics = []
    for s in range(1, steps + 1):
        m = {"step": s, "reward": 0.2 * s, "completions/mean_length": 40.0}
        if tool_metrics:
            m.update({"tools/call_frequency": 0.5 * s, "tools/failure_frequency": 0.1 * (steps - s),
                      **{f"rewards/{n}/mean": 0.1 * s for n in TOOL_REWARDS}})
        metrics.append(m)
    write_jsonl(run / "metrics.jsonl", metrics)
    return run


def _tool_eval(run):
    (run / "eval").mkdir(exist_ok=True)
    (run / "eval" / "results-tools.json").write_text(json.dumps({  # what grpokit.evaluation.tools writes
        "task": "calculator", "rows": 8, "generations": 2, "checkpoints": [
            {"step": 0, "model": "default", "task_success": 0.125, "tool_args": None, "tool_failures": 0.0,
             "calls_per_episode": 0.0, "episodes": 16, "metrics": {}},
            {"step": 5, "model": "ck-5", "task_success": 0.625, "tool_args": 0.9, "tool_failures": 0.25,
             "calls_per_episode": 1.5, "episodes": 16, "metrics": {}}]}))


def test_a_tool_run_reports_calls_failures_components_and_the_tool_eval(tmp_path):
    run = _run(tmp_path)
    _tool_eval(run)
    assert main(["report", str(run)]) == 0
    out = run / "report"
    page = (out / "report.html").read_text()
    assert "<h2>Tool calling</h2>" in page
    for png in ("tool_calls", "tool_failures", "tool_rewards", "eval_tools"):
        assert (out / f"{png}.png").stat().st_size > 5000, png  # a real plot
        assert f'src="{png}.png"' in page
    # the eval table: base vs step 5, shares as percentages, calls per episode as a number, no-call args as –
    assert "12.5%" in page and "62.5%" in page and "90.0%" in page and "25.0%" in page and "1.50" in page
    assert "0 (base)" in page and "8 evaluation row(s) × 2 sampled episodes per checkpoint" in page
    assert "tools/failure_frequency" in page and "rewards/tool_args/mean" in page  # last-step table


@pytest.mark.parametrize("tool_metrics,tool_eval,expected", [
    (True, False, "No tool evaluation yet"),            # trained, not yet evaluated: says the command
    (False, True, "No tool metrics in metrics.jsonl"),   # evaluated only (e.g. metrics lost): the eval still shows
])
def test_a_tool_section_with_a_part_missing_says_so(tmp_path, tool_metrics, tool_eval, expected):
    run = _run(tmp_path, tool_metrics=tool_metrics)
    if tool_eval:
        _tool_eval(run)
    assert main(["report", str(run)]) == 0
    page = (run / "report" / "report.html").read_text()
    assert "<h2>Tool calling</h2>" in page and expected in page


def test_a_run_without_tools_has_no_tool_section(tmp_path):
    run = _run(tmp_path, tool_metrics=False)
    assert main(["report", str(run)]) == 0
    page = (run / "report" / "report.html").read_text()
    assert "Tool calling" not in page and not list((run / "report").glob("tool_*.png"))


@pytest.mark.parametrize("logged,expected", [
    ({"rewards/task_success/mean", "rewards/tool_args/mean"}, ["task_success", "tool_args"]),  # reward-table order
    ({"rewards/math_correctness/mean", "rewards/format/mean"}, []),  # not episode rewards
    ({"rewards/tool_choice/std"}, []),                                  # only means count
])
def test_tool_reward_names(logged, expected):
    assert tool_reward_names([{k: 0.5 for k in logged}]) == expected
