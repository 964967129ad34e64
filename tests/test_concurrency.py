"""Two commands on one run at once: each waits for nothing it cannot, refuses naming the holder, or works on a
consistent view (issue 53). One command runs in a process of its own, the other here, while the first is at work.

| pair | what holds |
|---|---|
| train + eval | eval reads the complete checkpoints (COMPLETE written last), training goes on undisturbed |
| eval + report | report reads eval/results.json whole (renamed into place), also while it is replaced again and again |
| report + report | the second is refused at once, naming the first's PID (FolderLock on the report folder) |
| eval + train --overwrite | refused before any model loads (the overwrite takes eval/'s lock); a replaced run gets no results |
| eval + a health rollback | the rollback is refused before it changes anything |
| eval + eval | the second is refused at once, naming the first's PID (grpokit.run.locks.FolderLock on eval/) |
| export + eval | separate folders of the run (export/, eval/): both complete |
| rm train + rm train / rm eval | one writer per reward model folder: refused naming the PID, then rm eval works |
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DEADLINE_SLACK_S, make_recipe

import grpokit
from grpokit.cli import main
from grpokit.datasets import BUILTIN_DATA
from grpokit.run import RunDir

REWARDS = [{"name": "math_correctness"}, {"name": "format"}]  # a correctness reward: eval --samples samples
# Training that lingers after each checkpoint it completes: another command runs meanwhile.
LINGERING = """
import sys, time
from grpokit.run.rundir import RunDir
mark = RunDir.mark_complete
def lingering(self, step):
    mark(self, step)
    print(f"complete {step}", flush=True)
    time.sleep(3)
RunDir.mark_complete = lingering
from grpokit.cli import main
sys.exit(main(sys.argv[1:]))
"""
# An evaluation that holds its folder a few seconds before it evaluates (its lock taken): another command runs then.
EVALUATING = """
import sys, time
import grpokit.evaluation.runs as runs
steps = runs.evaluate_steps
def lingering(*args, **kwargs):
    print("evaluating now", flush=True)
    time.sleep(4)
    return steps(*args, **kwargs)
runs.evaluate_steps = lingering
from grpokit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict:
    src, tests = Path(grpokit.__file__).parents[1], Path(__file__).parent
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(tests)]), "PYTHONUNBUFFERED": "1"}


def _started(argv: list[str], until: str, script: str | None = None) -> subprocess.Popen:
    """`grpokit ARGV` in a process of its own, returned once a line of its output holds `until`."""
    cmd = [sys.executable, "-c", script, *argv] if script else [sys.executable, "-m", "grpokit", *argv]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if until in line:
            return proc
    raise AssertionError(f"`grpokit {' '.join(argv)}` ended before {until!r}:\n{''.join(seen)[-3000:]}")


def _finished(proc: subprocess.Popen) -> int:
    out = proc.stdout.read()
    code = proc.wait(timeout=600)
    assert "Traceback" not in out, out
    return code


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir) -> Path:
    tmp = tmp_path_factory.mktemp("pairs")
    run = tmp / "run"
    assert main(["train", str(make_recipe(tmp, tiny_model_dir, REWARDS)), "--output-dir", str(run), "--skip-audit"]) == 0
    return run


def _copy(trained: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    return run


QUICK = ["--max-rows", "2", "--max-new-tokens", "4"]


def test_train_and_eval(tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "run"
    recipe = make_recipe(tmp_path, tiny_model_dir, REWARDS)
    training = _started(["train", str(recipe), "--output-dir", str(run), "--skip-audit"], "complete 1", LINGERING)
    assert main(["eval", str(run), "--max-rows", "2", "--max-new-tokens", "4"]) == 0
    steps = [e["step"] for e in json.loads((run / "eval" / "results.json").read_text())["checkpoints"]]
    assert steps[0] == 0 and 1 in steps and set(steps) <= {0, 1, 2}  # the checkpoints complete when it began
    assert _finished(training) == 0
    assert RunDir(run).read_status()["status"] == "completed"
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]


def test_eval_and_report(trained, tmp_path, capsys):
    run = _copy(trained, tmp_path)
    evaluating = _started(["eval", str(run), *QUICK], "evaluating now", EVALUATING)
    assert main(["report", str(run)]) == 0  # no results yet: the report says so, and is whole
    assert _finished(evaluating) == 0
    assert main(["report", str(run)]) == 0  # the results, renamed into place whole
    assert "Traceback" not in capsys.readouterr().err


def test_eval_and_eval(trained, tmp_path, capsys):
    run = _copy(trained, tmp_path)
    evaluating = _started(["eval", str(run), *QUICK], "evaluating now", EVALUATING)
    start = time.monotonic()
    assert main(["eval", str(run), *QUICK]) == 2
    err = capsys.readouterr().err
    assert f"another grpokit process is writing here (PID {evaluating.pid}" in err and "fix: wait for it" in err, err
    assert time.monotonic() - start < DEADLINE_SLACK_S  # refused at once, not after loading models
    assert _finished(evaluating) == 0
    assert main(["eval", str(run), *QUICK]) == 0  # then it runs


def test_export_and_eval(trained, tmp_path, capsys):
    run = _copy(trained, tmp_path)
    evaluating = _started(["eval", str(run), *QUICK], "evaluating now", EVALUATING)
    assert main(["export", str(run), "--checkpoint", "last", "--prompts", "1"]) == 0
    assert _finished(evaluating) == 0
    assert (run / "export" / "checkpoint-2" / "hf" / "config.json").is_file()
    assert [e["step"] for e in json.loads((run / "eval" / "results.json").read_text())["checkpoints"]] == [0, 1, 2]


def test_one_reward_model_folder_takes_one_writer(tiny_rm_dir, tiny_rm_base_dir, tmp_path, capsys):
    rm = tmp_path / "rm"
    shutil.copytree(tiny_rm_dir, rm)
    rankings = str(BUILTIN_DATA / "preference" / "rankings.jsonl")
    retrain = ["rm", "train", rankings, "--base", str(tiny_rm_base_dir), "--out", str(rm), "--max-steps", "40",
               "--batch-size", "4"]
    training = _started(retrain, "training a reward model")
    for argv in (retrain, ["rm", "eval", str(rm), rankings]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"another grpokit process is writing here (PID {training.pid}" in err, err
    assert _finished(training) == 0
    assert main(["rm", "eval", str(rm), rankings]) == 0


# ---------------------------------------------------------------- issue 67: pairs that could not fail before
# results.json replaced again and again, as `grpokit eval` replaces it (grpokit.run.writer.write_file), until killed.
REPLACING = """
import sys
from pathlib import Path
from grpokit.run.writer import write_file
run, texts = Path(sys.argv[1]), [Path(sys.argv[2]).read_text(), Path(sys.argv[3]).read_text()]
print("replacing now", flush=True)
i = 0
while True:
    write_file(run / "eval" / "results.json", texts[i % 2], within=run)
    i += 1
"""
# A report that holds its folder a few seconds before it draws (its lock taken): another report runs then.
REPORTING = """
import sys, time
import grpokit.report.html as html
page = html._write_page
def lingering(*args, **kwargs):
    print("reporting now", flush=True)
    time.sleep(4)
    return page(*args, **kwargs)
html._write_page = lingering
from grpokit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_report_while_eval_replaces_results_json(trained, tmp_path, capsys):
    # The pair's old test reported before the evaluation wrote anything; here results.json is replaced all along
    # while reports read it: each sees one whole version, never "no evaluation yet" or a cut file.
    run = _copy(trained, tmp_path)
    assert main(["eval", str(run), *QUICK]) == 0
    old = json.loads((run / "eval" / "results.json").read_text())
    (tmp_path / "a.json").write_text(json.dumps({**old, "data": "first set"}, indent=2))
    (tmp_path / "b.json").write_text(json.dumps({**old, "data": "second set"}, indent=2))
    replacing = _started([str(run), str(tmp_path / "a.json"), str(tmp_path / "b.json")], "replacing now", REPLACING)
    try:
        for _ in range(4):
            assert main(["report", str(run)]) == 0
            page = (run / "report" / "report.html").read_text()
            assert "No evaluation yet" not in page and ("first set" in page) != ("second set" in page)
    finally:
        replacing.kill()
        replacing.wait()
    assert "not readable" not in capsys.readouterr().err


def test_two_reports_at_once(trained, tmp_path, capsys):
    run = _copy(trained, tmp_path)
    reporting = _started(["report", str(run)], "reporting now", REPORTING)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"another grpokit process is writing here (PID {reporting.pid}" in err and "run this report again" in err
    assert _finished(reporting) == 0
    assert main(["report", str(run)]) == 0  # then it runs


def test_overwrite_while_eval_runs_is_refused(trained, tmp_path, tiny_model_dir, capsys):
    # The re-test: `train --output-dir R --overwrite` while `eval R` ran was not refused, and the evaluation then
    # wrote the old run's results and best.json into the new run.
    run = _copy(trained, tmp_path)
    evaluating = _started(["eval", str(run), *QUICK], "evaluating now", EVALUATING)
    recipe = make_recipe(tmp_path, tiny_model_dir, REWARDS)
    start = time.monotonic()
    assert main(["train", str(recipe), "--output-dir", str(run), "--overwrite", "--skip-audit"]) == 2
    err = capsys.readouterr().err
    assert f"another grpokit process is writing here (PID {evaluating.pid}" in err, err
    assert "then run this train --overwrite again" in err
    assert time.monotonic() - start < DEADLINE_SLACK_S  # refused before any model loads
    assert _finished(evaluating) == 0
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]  # untouched
    assert [e["step"] for e in json.loads((run / "eval" / "results.json").read_text())["checkpoints"]] == [0, 1, 2]


def test_an_evaluation_never_writes_into_the_run_that_replaced_its_run(trained, tmp_path, capsys):
    # A new run's record (what --overwrite writes) put in place while an evaluation runs: its results are the old
    # run's, so they are not written, and it says why.
    from grpokit.run.layout import own_entries
    from grpokit.run.record import new_record
    from grpokit.run.claims import write_record

    run = _copy(trained, tmp_path)
    evaluating = _started(["eval", str(run), *QUICK], "evaluating now", EVALUATING)
    write_record(run, new_record("run", own_entries(), lock_token="new"))
    out = evaluating.stdout.read()
    assert evaluating.wait(timeout=600) == 2 and "was replaced by a new run while this evaluation ran" in out, out
    assert not (run / "eval" / "results.json").exists() and not (run / "eval" / "best.json").exists()


def test_a_rollback_while_eval_runs_is_refused(trained, tmp_path, capsys):
    from grpokit.errors import GrpokitError
    from grpokit.recipe import load_run_recipe
    from grpokit.training.rollback import apply_rollback

    run = _copy(trained, tmp_path)
    metrics = (run / "metrics.jsonl").read_text()
    evaluating = _started(["eval", str(run), *QUICK], "evaluating now", EVALUATING)
    plan = {"step": 1, "checkpoint": "checkpoint-1", "learning_rate": 1e-6, "beta": 0.1}
    with pytest.raises(GrpokitError) as e:
        apply_rollback(load_run_recipe(RunDir(run)), RunDir(run), plan)
    assert f"PID {evaluating.pid}" in str(e.value) and f"grpokit train --resume {run}" in str(e.value)
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1", "checkpoint-2"]
    assert (run / "metrics.jsonl").read_text() == metrics  # nothing changed before the refusal
    assert _finished(evaluating) == 0
    apply_rollback(load_run_recipe(RunDir(run)), RunDir(run), plan)  # then it runs
    assert [p.name for p in RunDir(run).complete_checkpoints()] == ["checkpoint-1"]
