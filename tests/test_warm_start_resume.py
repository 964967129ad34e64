"""The default demo (grpokit.demo.warm_start) stopped during GRPO goes on with `--resume`: its SFT stage is kept, not
trained again, GRPO continues from its checkpoint; the report says what the terminal said (base, after SFT, after
GRPO, every copy of the rows, GRPO's own share) and every printed sample carries its verdict."""

from __future__ import annotations

import html
import json
import os
import signal

import pytest
from conftest import make_recipe
from transformers import TrainerCallback

from grpokit.demo import run_demo
from grpokit.demo.common import sample_lines, verdict
from grpokit.demo.warm_start import run


class SignalAt(TrainerCallback):
    """SIGTERM at the end of a step, as `kill PID` (or closing the terminal) does; the run stops at step + 1."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("warm-resume")
    recipe = make_recipe(
        tmp,
        tiny_model_dir,
        [{"name": "math_correctness"}, {"name": "format", "weight": 0.2}],
        sections={"health": {"probe_rows": 0}},
        max_steps=3,
    )
    out = tmp / "demo"
    first = run(str(out), recipes=(recipe, recipe), callbacks=[SignalAt(1)])
    sft_run = (tmp / "demo-sft" / "run.json").read_bytes()
    stopped = json.loads((out / "run.json").read_text())
    second = run_demo(str(out), resume=True, recipes=(recipe, recipe))  # `grpokit demo --resume`'s path
    return tmp, out, first, sft_run, stopped, second


def test_an_interrupted_default_demo_resumes_without_training_sft_again(resumed, capsys):
    tmp, out, first, sft_run, stopped, second = resumed
    assert first["after"] is None and stopped["status"] == "interrupted" and stopped["step"] == 2
    assert (tmp / "demo-sft" / "run.json").read_bytes() == sft_run  # SFT was not trained again
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["status"] == "completed" and run_json["step"] == 3
    assert run_json["init_from"]["run"] == str((tmp / "demo-sft").resolve())
    assert second["columns"] == ["base", "after SFT", "after GRPO"] and second["after"]["rows"] == 6


def test_the_report_says_what_the_terminal_said(resumed):
    _, out, _, _, _, second = resumed
    page = (out / "report" / "report.html").read_text()
    shown = second["shown"]
    assert shown["columns"] == ["metric", "base", "after SFT", "after GRPO"]
    assert [r[0] for r in shown["rows"]][:3] == [
        "accuracy",
        "accuracy, perturbed numbers",
        "accuracy, rewritten wording",
    ]
    for row in shown["rows"]:
        assert "".join(f"<td>{html.escape(c)}</td>" for c in row) in page
    assert html.escape(second["grpo_share"]) in page and second["grpo_share"] == shown["lines"][0]
    assert html.escape("GRPO's own share (after GRPO minus after SFT)") in page
    assert all("sample after GRPO (" in line for line in shown["lines"][1:])
    assert "(base)" not in page  # step 0 of the GRPO run is the SFT model: never called the base


def test_a_printed_sample_carries_its_verdict():
    wrong = {
        "question": "What is 18 + 40?",
        "answer": "58",
        "completion": "18 + 40 = 68\nFinal answer: 68",
        "correct": 0.0,
    }
    assert verdict(wrong, "accuracy") == "wrong by accuracy; the answer is 58"
    assert verdict({**wrong, "correct": 1.0}, "accuracy") == "right by accuracy"
    assert sample_lines([wrong], "after GRPO", "accuracy") == [
        "sample after GRPO (wrong by accuracy; the answer is 58) Q: What is 18 + 40?\n  '18 + 40 = 68\\nFinal answer: 68'"
    ]
