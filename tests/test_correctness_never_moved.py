"""correctness_never_moved: correctness flat at its lowest from the first step while other rewards move (a
never-written answer line) is said early, with preflight's fix; a real tiny-model run reports it at step 3."""

from __future__ import annotations

import json

from conftest import make_recipe

from grpokit.health.early import detect_correctness_never_moved, writes_answer_line
from grpokit.health.findings import Context
from grpokit.recipe.health_section import HealthConfig


def _metrics(correct, fmt, steps=3):
    return [
        {"step": s, "rewards/math_correctness/mean": correct(s), "rewards/format/mean": fmt(s)}
        for s in range(1, steps + 1)
    ]


def _samples(text, n=4):
    return [{"step": 3, "completion": text, "rewards": {"math_correctness": 0.0, "format": 0.1}} for _ in range(n)]


def _detect(metrics, samples):
    context = Context(["math_correctness", "format"])
    context.see(samples)
    return detect_correctness_never_moved(metrics, samples, HealthConfig(), context)


def test_no_answer_line_is_said_with_preflights_fix():
    found = _detect(_metrics(lambda s: 0.0, lambda s: 0.1 * s), _samples("Some words, then more words"))
    assert found is not None and found.code == "correctness_never_moved" and found.step == 3 and found.since == 1
    assert "math_correctness has scored 0 on every step since the first (steps 1-3)" in found.message
    assert "None of the 4 completions sampled at step 3 writes an answer line" in found.message
    assert "grpokit preflight RECIPE" in found.message and found.evidence["answer_lines"] == [0, 4]


def test_answer_lines_written_but_wrong_is_said_apart():
    found = _detect(_metrics(lambda s: 0.0, lambda s: 0.1 * s), _samples("3 + 4 = 8\nFinal answer: 8"))
    assert (
        "4 of the 4 completions sampled at step 3 write an answer line: the answers are read and all wrong"
        in found.message
    )


def test_not_said_before_its_steps_when_correctness_moves_or_when_nothing_moves():
    silent = "no answer here"
    assert _detect(_metrics(lambda s: 0.0, lambda s: 0.1 * s, steps=2), _samples(silent)) is None  # too early
    assert _detect(_metrics(lambda s: 0.1 * (s - 1), lambda s: 0.1 * s), _samples(silent)) is None  # it moved
    assert _detect(_metrics(lambda s: 0.0, lambda s: 0.5), _samples(silent)) is None  # nothing moves: not this


def test_answer_lines_are_recognised():
    assert writes_answer_line("x\nFinal answer: 3") and writes_answer_line("最终答案：3")
    assert writes_answer_line("**Answer:** Paris") and not writes_answer_line("the answer is Paris")


def test_a_tiny_model_run_that_never_writes_the_answer_line_is_told_at_step_3(tmp_path, tiny_model_dir, capsys):
    """The issue's run, small: an untrained model never writes `Final answer:`, so math_correctness is 0 at every
    step while a shaping reward (length) moves; the terminal and health.jsonl say so at step 3."""
    from grpokit.recipe.load import load_recipe
    from grpokit.training.grpo import train

    path = make_recipe(
        tmp_path,
        tiny_model_dir,
        [{"name": "math_correctness"}, {"name": "reward_fns:text_spread", "role": "shaping"}],
        sections={"health": {"probe_rows": 0}},
        max_steps=3,
    )
    run = tmp_path / "run"
    assert train(load_recipe(path), run_dir=run).status == "completed"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert [m["rewards/math_correctness/mean"] for m in metrics if "rewards/math_correctness/mean" in m] == [0, 0, 0]
    found = [
        json.loads(line)
        for line in (run / "health.jsonl").read_text().splitlines()
        if '"correctness_never_moved"' in line
    ]
    assert [(h["step"], h["severity"]) for h in found] == [(3, "warning")]
    assert "grpokit preflight RECIPE" in found[0]["message"]
    assert "health warning correctness_never_moved at step 3" in capsys.readouterr().out
