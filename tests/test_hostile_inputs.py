"""Hostile recipes, data rows, lock files and log records end in `where: what` +
`fix:`, never a traceback or a hang, and a refused command leaves no folder behind.

Recipes and data go through `grpokit recipe check` / `grpokit data check` as a user runs them, under a deadline
that only catches a hang (SIGALRM, 30 s): "billion laughs" aliases, 50k levels of nesting, a recipe past the size
cap, absurd numbers; a 200k-deep column, a million-digit answer. A read-only run folder is read-only for real:
as root, the CLI runs without the capability that ignores permission bits (setpriv).
"""
from __future__ import annotations

import json
import os
import signal
import socket
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from conftest import unprivileged, write_jsonl, grpokit_run

from grpokit.cli import main

BASE = {"data": {"train": "builtin:arithmetic/train.jsonl"}, "rewards": [{"name": "format"}]}


@contextmanager
def no_hang(seconds: int = 30):
    def fail(*_):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    with no_hang():
        code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# ---------------------------------------------------------------- recipes (point 5)
def _laughs(levels: int = 9) -> str:
    lines = ["    a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines)


RECIPES = [
    # (case, YAML text, the line the message names (marked by this text), words in the message)
    ("billion laughs under model.init_kwargs", f"model:\n  init_kwargs:\n{_laughs()}\n", "a5:", "expands to more than"),
    ("billion laughs under trl:", f"trl:\n  x:\n{_laughs()}\n", "a5:", "expands to more than"),  # 10^6: the first past
    ("an alias inside itself", "model:\n  init_kwargs:\n    x: &a [*a]\n", "x: &a", "recursive alias"),
    ("a 50k-deep list", "model:\n  init_kwargs:\n    x: " + "[" * 50_000 + "]" * 50_000 + "\n", "x: [", "50 levels deep"),
    ("a 200-deep mapping", "trl:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)) + "  " * 200 + "v: 1\n",
     " k49:", "50 levels deep"),  # k49 opens the 51st level
]


@pytest.mark.parametrize("case,text,mark,words", RECIPES, ids=[c[0] for c in RECIPES])
def test_unbounded_yaml_is_refused_with_its_line(tmp_path, capsys, case, text, mark, words):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(BASE) + text)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if mark in t)
    code, out = run_cli(["recipe", "check", str(path)], capsys)
    assert code == 2 and f"{path}:{line}: " in out and words in out and "fix: " in out, out
    assert "Traceback" not in out


def test_a_recipe_past_the_size_cap_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(BASE) + "# " + "x" * (50 << 20) + "\n")  # the 50 MB recipe
    code, out = run_cli(["recipe", "check", str(path)], capsys)
    assert code == 2 and "is 50.0 MiB; a recipe is a few KB (the limit is 1 MiB)" in out and "fix: " in out, out


NUMBERS = [
    # (--set, field, allowed range in the fix)
    ("train.max_steps=1.0e+23", "train.max_steps", "-1 to 1,000,000"),
    ("train.max_steps=2000000", "train.max_steps", "-1 to 1,000,000"),
    ("train.learning_rate=1e300", "train.learning_rate", "> 0 and <= 1.0"),
    ("train.max_completion_length=1000000000000", "train.max_completion_length", "1 to 1,048,576"),
    ("train.max_prompt_length=99999999", "train.max_prompt_length", "1 to 1,048,576"),
    ("train.num_generations=100000000", "train.num_generations", "2 to 65,536"),
    ("train.num_train_epochs=1e9", "train.num_train_epochs", "> 0 and <= 10,000"),
]


@pytest.mark.parametrize("override,field,allowed", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_absurd_numbers_are_refused_with_the_allowed_range(tmp_path, capsys, override, field, allowed):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(BASE))
    code, out = run_cli(["recipe", "check", str(path), "--set", override], capsys)
    assert code == 2 and field in out and allowed in out, out


@pytest.mark.parametrize("change,where,words", [
    ({"output_dir": ""}, "output_dir", "an empty one would be the current folder"),  # '' = the current folder
    ({"output_dir": "  "}, "output_dir", "an empty one would be the current folder"),
    ({"data": {"train": "/etc/hostname"}}, "data.train", "unknown data format '(no extension)'"),  # data check refuses it
    ({"data": {"train": "rows.txt"}}, "data.train", "unknown data format '.txt'"),
    # passed, then train hung in step 1 generating 99999999 tokens, deaf to SIGTERM, run.json left `running`
    ({"trl": {"generation_kwargs": {"max_new_tokens": 99999999}}}, "trl.generation_kwargs.max_new_tokens",
     "set train.max_completion_length instead"),
    ({"trl": {"generation_kwargs": {"max_length": 5}}}, "trl.generation_kwargs.max_length",
     "train.max_completion_length's"),
])
def test_recipe_check_refuses_what_training_would(tmp_path, capsys, change, where, words):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({**BASE, **change}))
    code, out = run_cli(["recipe", "check", str(path)], capsys)
    assert code == 2 and where in out and words in out and "fix: " in out, out


# ---------------------------------------------------------------- data rows (points 5, 6)
def test_hostile_rows_are_row_errors_and_the_rest_is_still_checked(tmp_path, capsys):
    rows = ['{"question": "one", "answer": "1"}',
            '{"question": "deep", "answer": "2", "extra": ' + "[" * 200_000 + "]" * 200_000 + "}",  # RecursionError
            '{"question": "huge", "answer": ' + "9" * 1_000_000 + "}",  # past Python's 4,300-digit conversion
            '{"question": "long", "answer": 123456789012345678901234}',  # past Arrow's 64 bits
            '{"question": "nested", "answer": "3", "extra": ' + "[" * 70 + "]" * 70 + "}",  # parses, too deep
            '{"question": "two", "answer": "2"}']
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    code, out = run_cli(["data", "check", str(path), "--task", "math"], capsys)
    assert code == 1 and "Traceback" not in out
    assert f"{path}:2: nested more than 64 levels deep" in out and f"{path}:5: nested more than 64" in out
    assert f"{path}:3: an integer of 1000000 digits" in out and f"{path}:4: an integer of 24 digits" in out
    assert out.count("fix: ") == 4 and "2 usable rows, 4 unusable" in out, out


def test_a_json_array_with_a_hostile_row(tmp_path, capsys):
    path = tmp_path / "rows.json"
    path.write_text('[{"question": "a", "answer": "1"}, {"question": "b", "answer": ' + "7" * 5000 + "}]")
    code, out = run_cli(["data", "check", str(path)], capsys)
    assert code == 1 and f"{path} row 2: an integer of 5000 digits" in out and "1 usable rows" in out, out


# ---------------------------------------------------------------- the lock file (point 7)
HOST = socket.gethostname()
LOCKS = [
    # (case, how the .lock is made, words of the refusal (None: taken, as a stale lock), words of the note). The run's
    # record names lock token "t0": a lock with it was left by a grpokit process of this run that died.
    ("stale, since 1e999", lambda p: p.write_text('{"pid": 1, "host": "%s", "since": 1e999, "token": "t0"}' % HOST),
     None, f"PID 1 on host {HOST}, since ?"),
    ("stale, on another machine", lambda p: p.write_text('{"pid": 1, "host": "h", "since": 0, "token": "t0"}'),
     "another machine", None),  # issue 67: host-local locks: never taken over
    ("stale, since a string", lambda p: p.write_text('{"pid": 1, "since": "yesterday", "token": "t0"}'), None, "since ?"),
    ("empty (an older grpokit's)", lambda p: p.write_text(""), None, None),
    ("not JSON", lambda p: p.write_bytes(b"\xff\xfe garbage"), "is a file without this run's lock token", None),
    ("another run's token", lambda p: p.write_text('{"pid": 1, "token": "t1"}'), "without this run's lock token", None),
    ("a folder", lambda p: p.mkdir(), "is a folder, not grpokit's lock file", None),
    ("a symlink to a user's file", lambda p: p.symlink_to(p.parent.parent / "thesis.txt"), "is a symbolic link", None),
    ("a hard link to a user's file", lambda p: os.link(p.parent.parent / "thesis.txt", p),  # issue 34
     "is a file with 1 other hard link(s)", None),
    ("a FIFO", lambda p: os.mkfifo(p), "is not a regular file", None),
]


@pytest.mark.parametrize("case,make,refused,noted", LOCKS, ids=[c[0] for c in LOCKS])
def test_a_lock_that_is_not_a_lock_file(tmp_path, case, make, refused, noted):
    from grpokit.errors import GrpokitError
    from grpokit.run import RunDir
    from grpokit.run.record import new_record
    from grpokit.run.claims import write_record

    thesis = tmp_path / "thesis.txt"
    thesis.write_text("years of work")
    run = tmp_path / "run"
    run.mkdir()
    write_record(run, new_record("run", {}, lock_token="t0"))
    make(run / ".lock")
    notes = []
    with no_hang():
        if refused is None:  # a stale lock of this run, damaged holder record or not: taken over, never a traceback
            with RunDir(run).lock(note=notes.append):
                pass
            assert (noted is None and notes == []) or (len(notes) == 1 and noted in notes[0]), notes
            assert not (run / ".lock").exists()
        else:
            with pytest.raises(GrpokitError) as e:
                RunDir(run).lock(note=notes.append).acquire()
            assert refused in str(e.value) and "fix: if no grpokit process is writing this run, move it away" in \
                str(e.value), str(e.value)
            assert os.path.lexists(run / ".lock")  # refused: left as it was
    assert thesis.read_text() == "years of work"  # a link is never followed, a user's file never truncated


# ---------------------------------------------------------------- the report (point 7)
def _run_folder(tmp_path: Path) -> Path:
    run = grpokit_run(tmp_path / "run")
    (run / "config.yaml").write_text(yaml.safe_dump({**BASE, "model": {"name": "default"}}))
    (run / "run.json").write_text(json.dumps({"status": "completed", "step": 2, "seconds": 9.0}))
    write_jsonl(run / "metrics.jsonl", [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.7}])
    return run


def test_report_on_log_records_of_the_wrong_type(tmp_path, capsys):
    run = _run_folder(tmp_path)
    write_jsonl(run / "metrics.jsonl", [{"step": 1, "reward": 0.5}, {"step": "2", "reward": "abc"}, {"step": 2.5},
                                        {"step": True}, {"step": 3, "reward": [1], "loss": {"a": 1}}])
    write_jsonl(run / "samples.jsonl", [{"step": "1", "prompt": "p", "completion": "c"},  # the case
                                        {"step": 1, "prompt": 5, "completion": {"a": 1}, "rewards": [1, 2]},
                                        {"step": 2, "prompt": [1], "completion": [1, "x"], "rewards": "no"}])
    write_jsonl(run / "health.jsonl", [{"code": ["x"], "step": "3", "severity": 5, "message": {"m": 1}}])
    (run / "run.json").write_text(json.dumps({"status": ["x"], "seconds": "abc", "init_from": "weird"}))
    (run / "eval").mkdir()
    (run / "eval" / "results.json").write_text(json.dumps({"checkpoints": [
        {"step": "1"}, 5, {"step": 2, "heldout": {"accuracy": "x", "mean_length": "y"}, "gap": {"value": "a"}}],
        "best": {"step": "2"}, "samples_per_problem": "4"}))
    code, out = run_cli(["report", str(run)], capsys)
    assert code == 0 and "Traceback" not in out and (run / "report" / "report.html").is_file(), out
    assert "metrics.jsonl: skipped 3 record(s) whose step is not an integer" in out
    assert "samples.jsonl: skipped 1 record(s)" in out


def test_report_on_a_read_only_run_folder(tmp_path):
    run = _run_folder(tmp_path)
    before = sorted(p.name for p in run.iterdir())
    run.chmod(0o555)
    try:
        proc = unprivileged(["report", str(run)], tmp_path)
    finally:
        run.chmod(0o755)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{run}/report: cannot write here" in proc.stderr and "--output-dir DIR" in proc.stderr, proc.stderr
    assert sorted(p.name for p in run.iterdir()) == before
    elsewhere = tmp_path / "out"  # the fix works
    proc = unprivileged(["report", str(run), "--output-dir", str(elsewhere)], tmp_path)
    assert proc.returncode == 0 and (elsewhere / "report.html").is_file(), proc.stderr


# ---------------------------------------------------------------- more tracebacks, ~, booleans
@pytest.mark.parametrize("how", ["in the recipe", "in a --set value"])
@pytest.mark.parametrize("byte,name", [("\x00", "NUL"), ("\x07", "BEL")])
def test_a_control_byte_in_a_recipe_is_a_problem_with_its_line(tmp_path, capsys, how, byte, name):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(BASE) + (f'output_dir: "a{byte}b"\n' if how == "in the recipe" else ""))
    argv = ["recipe", "check", str(path)] + (["--set", f"output_dir=a{byte}b"] if how == "in a --set value" else [])
    code, out = run_cli(argv, capsys)
    line = len(yaml.safe_dump(BASE).splitlines()) + 1 if how == "in the recipe" else 1
    assert code == 2 and f":{line}: holds the control character U+{ord(byte):04X} ({name})" in out, out
    assert "fix: remove it" in out and "Traceback" not in out and byte not in out  # escaped where it is echoed


def test_a_100k_character_assert_is_a_row_error(tmp_path, capsys):
    rows = [{"question": "add", "tests": ["assert add(1, 1) == " + "1+" * 50_000 + "1"]},  # RecursionError in ast
            {"question": "add", "tests": ["assert add(1, 1) == 2"]}]
    path = write_jsonl(tmp_path / "code.jsonl", rows)
    code, out = run_cli(["data", "check", str(path), "--task", "code"], capsys)
    assert code == 1 and f"{path}:1 tests 0: is too deeply nested for Python's parser (100,021 characters)" in out, out
    assert "fix: fix the assert line" in out and "1 usable rows" in out and "Traceback" not in out


@pytest.mark.parametrize("row,words", [
    ('{"completion": "1", "answer": ' + "[" * 200_000 + "]" * 200_000 + "}", "nested too deeply to read"),
    ('{"completion": "1", "answer": ' + "[" * 70 + "]" * 70 + "}", "nested more than 64 levels deep"),
    ('{"completion": "1", "answer": ' + "9" * 100_000 + "}", "an integer of 100,000 digits (999999999999...), past the "
     "4,300 digits Python converts"),
], ids=["200k deep", "70 deep", "100k digits"])
def test_rewards_score_of_a_hostile_row(tmp_path, capsys, row, words):
    path = tmp_path / "rows.jsonl"
    path.write_text(row + "\n")
    code, out = run_cli(["rewards", "score", "--reward", "math_correctness", "--input", str(path)], capsys)
    assert code == 2 and f"{path}:1: {words}" in out and "fix: " in out and "Traceback" not in out, out


def test_home_is_expanded_in_recipe_and_command_paths(tmp_path, capsys, monkeypatch):
    from grpokit.recipe.schema import Recipe

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({**BASE, "output_dir": "~/runs/x",
                                    "rewards": [{"path": "~/r.py", "function": "score"}]}))
    recipe = Recipe.model_validate(yaml.safe_load(path.read_text()))  # the schema: no file is looked at yet
    assert recipe.output_dir == f"{home}/runs/x" and recipe.rewards[0].path == f"{home}/r.py"
    code, _ = run_cli(["data", "generate", "arithmetic", "~/rows.jsonl", "--rows", "3"], capsys)  # quoted: no shell
    assert code == 0 and (home / "rows.jsonl").is_file() and not (tmp_path / "~").exists()


@pytest.mark.parametrize("override", ["train.max_steps=true", "train.num_generations=false",
                                      "train.learning_rate=true"])
def test_a_number_field_refuses_a_boolean(tmp_path, capsys, override):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(BASE))
    code, out = run_cli(["recipe", "check", str(path), "--set", override], capsys)
    field, value = override.split("=")
    assert code == 2 and f"{field}: Value error, {value} is a boolean, not a number" in out, out


def test_long_values_and_escape_bytes_are_shortened_and_escaped(tmp_path, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(BASE))
    code, out = run_cli(["recipe", "check", str(path), "--set", "train.max_steps=" + "x" * 120_000], capsys)
    assert code == 2 and "characters left out" in out and len(out) < 10_000, len(out)
    code, out = run_cli(["report", str(tmp_path / "a\x1b[31mb\x07")], capsys)
    assert code == 2 and "a\\x1b[31mb\\x07" in out and "\x1b" not in out and "\x07" not in out, out
