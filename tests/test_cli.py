"""The command line itself: start-up imports, `--version`, `python -m grpokit`, help text, the error printer."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import grpokit_run

from grpokit.cli import build_parser, version
from grpokit.cli.output import print_error
from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation.evaluate import EvalResult

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
HEAVY = ("torch", "transformers", "trl")  # seconds to import; a command that loads no model must not pay for them


def _env() -> dict:
    # the child must import this tree, as the test process does
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def _run_in_fresh_python(argv: list[str]) -> tuple[int, list[str], str]:
    """Run `grpokit ARGV` in a new interpreter; return its exit code, the heavy modules it imported, its stderr."""
    code = ("import json, sys\nfrom grpokit.cli import main\nrc = main(sys.argv[1:])\n"
            f"print(json.dumps([rc, [m for m in {HEAVY!r} if m in sys.modules]]), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, env=_env())
    assert res.returncode == 0, res.stderr
    rc, heavy = json.loads(res.stderr.strip().splitlines()[-1])
    return rc, heavy, res.stderr


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A run directory as far as `grpokit doctor` reads it: metrics, samples and the recipe it trained with."""
    grpokit_run(tmp_path)
    rows = [{"step": s, "loss": 0.01, "reward": 0.1 * s, "rewards/math_correctness/mean": 0.1 * s,
             "completions/mean_length": 40.0, "kl": 0.001} for s in range(1, 6)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "samples.jsonl").write_text(json.dumps({"step": 5, "completion": "1 + 2 = 3\nFinal answer: 3"}) + "\n",
                                            encoding="utf-8")
    (tmp_path / "config.yaml").write_text("rewards:\n  - {name: math_correctness, weight: 1.0}\n", encoding="utf-8")
    heldout = EvalResult(rows=4, accuracy=0.25, format_rate=1.0, mean_length=19.2, truncated_rate=0.0,
                         metric="accuracy").as_dict()  # what `grpokit eval` writes per checkpoint
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "results.json").write_text(json.dumps(
        {"model": "default", "data": "eval.jsonl", "fingerprint": "f", "rows": 4, "perturbed_rows": 0, "train_rows": 0,
         "template": "chat", "max_new_tokens": 48, "samples_per_problem": 0, "metric": "accuracy",
         "best": {"step": 5, "accuracy": 0.25}, "checkpoints": [{"step": 5, "heldout": heldout}]}))
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["rewards", "list"],  # every reward family is imported to list them
    ["data", "check", str(SRC / "grpokit" / "datasets" / "arithmetic" / "train.jsonl")],
    # Not `recipe check`: it builds what training builds (TRL's GRPOConfig, the scheduler, the model's tokenizer),
    # so that a recipe it passes does not fail after the run directory exists; that needs torch and TRL.
    ["doctor", "RUN_DIR"],  # reads a run's logs and its recipe's health thresholds
    ["compare", "RUN_DIR", "RUN_DIR"],  # two runs' eval/results.json in one table
    ["report", "RUN_DIR"],  # report.html from the logs (matplotlib, no model)
])
def test_model_free_commands_do_not_import_torch(argv, run_dir):
    argv = [str(run_dir) if a == "RUN_DIR" else a for a in argv]
    rc, heavy, stderr = _run_in_fresh_python(argv)
    assert rc == 0, stderr
    assert heavy == [], f"`grpokit {' '.join(argv[:2])}` imported {heavy}"


def test_version_flag_prints_the_installed_version():
    res = subprocess.run([sys.executable, "-m", "grpokit", "--version"], capture_output=True, text=True, timeout=60,
                         env=_env())
    lines = res.stdout.strip().splitlines()
    assert res.returncode == 0 and lines[0] == f"grpokit {version()}"
    assert version().count(".") >= 2
    # what a bug report needs (issue 27): torch with its device, and each library grpokit drives, by version
    import torch
    import trl

    assert any(line.startswith(f"torch {torch.__version__}: ") for line in lines), lines
    assert f"trl {trl.__version__}" in lines and any(line.startswith("transformers ") for line in lines)
    assert any(line.startswith(("vllm ", "vllm: not installed")) for line in lines)
    assert lines[2].endswith("CPU build") or "CUDA" in lines[2] or "MPS" in lines[2], lines[2]


@pytest.mark.parametrize("module", ["grpokit", "grpokit.cli"])  # `python -m grpokit` and the older spelling
def test_python_dash_m_runs_the_cli(module):
    res = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60,
                         env=_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage: grpokit") and "rewards" in res.stdout and "--version" in res.stdout


def _parsers(parser: argparse.ArgumentParser, path: str = "grpokit"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_argument_of_every_command_has_help_text():
    seen, missing = 0, []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            seen += 1
            if not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 50 and missing == []


def test_every_sub_command_has_help_text():
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                assert all(helps.get(name) for name in action.choices), f"{path}: {helps}"


@pytest.mark.parametrize("error, expected", [
    # one problem with a fix, default exit code 2
    (GrpokitError([Problem("recipe.yaml:3 train.lr", "unknown key", "did you mean train.learning_rate?")]),
     (2, ["error: cannot continue", "  - recipe.yaml:3 train.lr: unknown key",
          "      fix: did you mean train.learning_rate?"])),
    # a title and the error's own exit code; no fix line when there is no fix
    (GrpokitError([Problem("gguf weights", "tensor differs")], exit_code=1, title="export check failed"),
     (1, ["error: export check failed", "  - gguf weights: tensor differs"])),
    # user text in brackets is printed as is, not read as console markup
    (GrpokitError([Problem("--param markers=[bold]", "bad [/] value", "use [\"Answer:\"]")]),
     (2, ["error: cannot continue", "  - --param markers=[bold]: bad [/] value", "      fix: use [\"Answer:\"]"])),
])
def test_error_printer(error, expected, capsys):
    code, lines = expected
    assert print_error(error) == code
    assert capsys.readouterr().err.splitlines() == lines


def test_main_prints_input_errors_through_the_printer(tmp_path, capsys):
    from grpokit.cli import main

    empty = tmp_path / "empty"  # a folder of its own: no sibling runs for the fix to name
    empty.mkdir()
    assert main(["doctor", str(empty)]) == 2  # an empty folder is not a run
    assert capsys.readouterr().err.splitlines() == [
        "error: cannot continue",
        f"  - grpokit doctor {empty}: not a grpokit run directory (none of config.yaml, run.json, metrics.jsonl)",
        "      fix: pass the output_dir of an earlier `grpokit train`"]
