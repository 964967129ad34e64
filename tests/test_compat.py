"""Run directories written before the layout change still load, resume, evaluate and report.

tests/fixtures/run_before_layout/ was written by grpokit at commit 3fc48e8 (the last commit with the flat
module layout): a LoRA adapter (r 4 on q_proj, v_proj) on the tiny test model, trained on the bundled
arithmetic rows, interrupted by SIGINT at step 6 of 12 (checkpoints 4 and 6), then `grpokit eval RUN
--max-rows 4`. Its absolute paths were replaced by @TINY_MODEL@, @BUILTIN_DATA@ and @RUN_DIR@, and each
checkpoint's tokenizer.json (3.5 MB, the tiny model's own) was left out; the fixture below puts both back.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grpokit.cli import main
from grpokit.data import BUILTIN_DATA
from grpokit.recipe import load_run_recipe
from grpokit.run import RunDir

FIXTURE = Path(__file__).parent / "fixtures" / "run_before_layout"


@pytest.fixture
def old_run(tmp_path, tiny_model_dir) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    subs = {"@TINY_MODEL@": str(tiny_model_dir), "@BUILTIN_DATA@": str(BUILTIN_DATA), "@RUN_DIR@": str(run)}
    for f in run.rglob("*"):
        if f.is_file() and f.suffix in (".yaml", ".json", ".jsonl", ".md"):
            text = f.read_text(encoding="utf-8")
            for k, v in subs.items():
                text = text.replace(k, v)
            f.write_text(text, encoding="utf-8")
    for ck in (run / "checkpoints").glob("checkpoint-*"):
        shutil.copy(tiny_model_dir / "tokenizer.json", ck / "tokenizer.json")
    return run


def test_an_old_run_loads_and_its_logs_read(old_run, capsys):
    recipe = load_run_recipe(old_run)
    assert recipe.model.lora.r == 4 and recipe.train.max_steps == 12
    run = RunDir(old_run)
    assert [c.name for c in run.complete_checkpoints()] == ["checkpoint-4", "checkpoint-6"]
    assert run.read_status()["status"] == "interrupted" and run.read_best()["step"] == 0
    assert main(["doctor", str(old_run)]) == 0


def test_an_old_run_evaluates_and_reports(old_run, capsys):
    assert main(["eval", str(old_run), "--checkpoints", "last", "--max-rows", "2"]) == 0
    results = json.loads((old_run / "eval" / "results.json").read_text())
    assert 6 in [e["step"] for e in results["checkpoints"]]
    assert main(["report", str(old_run)]) == 0
    page = (old_run / "report" / "report.html").read_text(encoding="utf-8")
    assert "checkpoint" in page and "interrupted" in page


def test_an_old_run_resumes_to_its_end(old_run, capsys):
    assert main(["train", "--resume", str(old_run)]) == 0
    assert "resuming from checkpoint-6" in capsys.readouterr().out
    status = RunDir(old_run).read_status()
    assert (status["status"], status["step"]) == ("completed", 12)
    assert [m["step"] for m in RunDir(old_run).read_metrics()] == list(range(1, 13))
