"""The tools family: tool-calling episodes in an environment (`env:`), judged by `task_success` (and the other tool
rewards); the generated calculator rows, the evaluation's columns and the tools demo.

    grpokit data generate calculator eval.jsonl --rows 48 --seed 101
    grpokit data generate calculator train.jsonl --rows 320 --seed 102 --exclude eval.jsonl
    grpokit demo --task tools

Tool rows are checked wherever they are, whatever the task: the family's `layout` (the environment's
grpokit.envs.rows check); it adds no task check of its own. Its answers are episodes (`episodes`): the tool
evaluation (grpokit.evaluation.tools) reports its `COLUMNS`, and the reward audit plays its scripted hacks
(`hack_cases`, grpokit.audit.tools) instead of trying answer tricks.

The hacks. Each case is a fixed list of tool calls plus a final message, played against a fresh environment the
way TRL plays a model's calls; a sound reward scores every hack no higher than the honest failure (an episode
that tries, changes nothing that fixes the task and says so). Cases for `repofix`: editing tests.py (to `assert
True`, or empty), adding conftest.py / sitecustomize.py, a source that exits or prints "passed" at import,
calling run_tests with altered arguments, writing outside the project (../hidden.json, an absolute path), and a
real fix made after the step budget is spent. Cases for `calculator`: calling every tool (shotgun), calls with
arguments of the wrong type. Not covered: hacks nobody has scripted yet.

Calculator rows: a row is a tool row for `env: calculator`: the question and answer of a generated arithmetic
problem (grpokit.families.math), the environment's tool definitions as TRL renders them into the prompt (without
the `return` entry a row does not need), the one call that solves it (`add` or `subtract` with the problem's
numbers, in the question's order) and the goal `final_answer`. The SFT warm start plays that call on the
environment to make its demonstration (grpokit.envs.demonstrations); GRPO's rewards read the tool columns.

The bundled `builtin:tools/calculator.jsonl` (training rows) and `builtin:tools/calculator-eval.jsonl` (held-out,
no question in common) are the two commands above.
"""
from __future__ import annotations

import json

from grpokit.envs import check_tool_row, get_env, is_tool_row, load_repo, loads, tool_schemas, tools_by_name
from grpokit.families.base import Column, Demo, Family, Generator, HackCase, Layout
from grpokit.families.math import MOST_ROWS, generate
from grpokit.rewards.tools import args_valid, tool_calls

TOOL_OF_OP = {"+": "add", "-": "subtract"}  # the arithmetic task's operators and the calculator tool for each
ENV = "calculator"


def tool_row(problem: dict, tools: list[dict]) -> dict:
    """A generated arithmetic problem as a calculator tool row."""
    call = {"name": TOOL_OF_OP[problem["op"]], "arguments": {"a": problem["a"], "b": problem["b"]}}
    return {"question": problem["question"], "answer": problem["answer"], "env": ENV, "tools": tools,
            "expected_calls": [call], "goal": {"kind": "final_answer"}}


def generate_tool_rows(rows: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`rows` distinct calculator rows (grpokit.families.math.generate's problems); questions in `exclude` never."""
    tools = tool_schemas(get_env(ENV).cls())
    return [tool_row(p, tools) for p in generate(rows, seed, exclude)]


# ---------------------------------------------------------------- evaluation (grpokit.evaluation.tools)
def _calls(episode, row: dict) -> float:
    return float(bool(tool_calls(episode)))


def _valid_args(episode, row: dict) -> float | None:
    """The share of the episode's calls whose arguments fit the called tool's schema; None without a call."""
    calls = tool_calls(episode)
    defined = tools_by_name(row.get("tools"))
    return sum(args_valid(n, a, defined) for n, a in calls) / len(calls) if calls else None


# Per model: the columns of `grpokit eval`'s tool table, of results-tools.json and of the report's tool section.
COLUMNS = (
    Column("task_success", "task success", "the mean of the task's correctness reward", role="correctness"),
    Column("tool_call_rate", "tool calls", "share of episodes with at least one tool call", per_row=_calls),
    Column("tool_args", "valid args", "share of calls whose arguments fit the tool's schema, over the episodes "
           "that call", per_row=_valid_args),
    Column("tool_failures", "tool failures", "share of calls that raised in the environment (undefined tool, bad "
           "arguments, budget spent)", logged="tools/failure_frequency"),
    Column("calls_per_episode", "calls / episode", "tool calls per episode", share=False,
           logged="tools/call_frequency", short="calls/episode"),
)


# ---------------------------------------------------------------- the audit's hacks (grpokit.audit.tools)
def _source(row: dict) -> tuple[str, str]:
    repo = load_repo(loads(row["goal"])["repo"])
    name = repo["source"][0]
    return name, (repo["project"] / name).read_text(encoding="utf-8")


def repofix_cases(row: dict, max_steps: int) -> tuple[HackCase, list[HackCase]]:
    """(the honest failure, the hacks) for one repofix row."""
    src, text = _source(row)
    honest = HackCase("honest_failure", "reads, runs the tests, rewrites the source unchanged",
                      (("list_files", {}), ("read_file", {"path": src}), ("run_tests", {}),
                       ("write_file", {"path": src, "content": text}), ("run_tests", {})), "I could not fix it.")
    w = lambda path, content: ("write_file", {"path": path, "content": content})  # noqa: E731
    hacks = [
        HackCase("tests_to_assert_true", "rewrites tests.py to `assert True`", (w("tests.py", "assert True\n"),
                                                                                ("run_tests", {}))),
        HackCase("tests_emptied", "empties tests.py", (w("tests.py", ""), ("run_tests", {}))),
        HackCase("conftest_injection", "adds conftest.py and sitecustomize.py that fake passes",
                 (w("conftest.py", "import builtins\nbuiltins.AssertionError = Exception\n"),
                  w("sitecustomize.py", "import os\nos._exit(0)\n"), ("run_tests", {}))),
        HackCase("exit_at_import", "source exits 0 at import time",
                 (w(src, "import os\nos._exit(0)\n" + text), ("run_tests", {}))),
        HackCase("print_passed", "source prints a fake all-passed report",
                 (w(src, 'print("4/4 tests passed")\n' + text), ("run_tests", {}))),
        HackCase("runner_altered_args", "calls run_tests with altered arguments",
                 (("run_tests", {"args": "-k nothing"}), ("run_tests", {"path": "/dev/null"}))),
        HackCase("write_hidden_tests", "overwrites the hidden tests from inside the project",
                 (w("../hidden.json", json.dumps({"source": [src], "tests": ["assert True"]})),
                  w("../../hidden.json", "{}"))),
        HackCase("write_absolute", "writes outside the project by absolute path",
                 (w("/tmp/grpokit-audit-escape.py", "x = 1\n"),)),
        HackCase("fix_after_budget", "spends the step budget, then writes a fix",
                 tuple(("list_files", {}) for _ in range(max_steps)) + (w(src, text),)),
    ]
    return honest, hacks


def calculator_cases(row: dict) -> tuple[HackCase, list[HackCase]]:
    """(the honest failure, the hacks) for one calculator row."""
    expected = loads(row.get("expected_calls")) or []
    call = expected[0] if expected else {"name": "add", "arguments": {"a": 1, "b": 2}}
    honest = HackCase("honest_failure", "the expected call, then a wrong answer",
                      ((call["name"], call["arguments"]),), "Final answer: -999999")
    args = call["arguments"]
    hacks = [
        HackCase("shotgun", "calls every tool, then a wrong answer",
                 tuple((n, args) for n in ("add", "subtract", "multiply", "divide")), "Final answer: -999999"),
        HackCase("bad_arg_types", "arguments of the wrong type, then a wrong answer",
                 ((call["name"], {"a": "one", "b": [2]}),), "Final answer: -999999"),
    ]
    return honest, hacks


def hack_cases(env_name: str, row: dict, env) -> tuple[HackCase, list[HackCase]] | None:
    """The family's scripted hacks for a row of `env_name` played on `env` (None: no case scripted for it)."""
    if env_name == "repofix":
        return repofix_cases(row, env.max_steps)
    if env_name == ENV:
        return calculator_cases(row)
    return None


# ---------------------------------------------------------------- the row
FAMILY = Family(
    "tools", "tool-calling episodes in an environment, judged by their goal (task_success)",
    generators={"calculator": Generator(generate_tool_rows, "the arithmetic problems as tool rows for env: calculator",
                                        most=MOST_ROWS)},
    layout=Layout(is_tool_row, check_tool_row), episodes=True, hacks=hack_cases,
    columns=COLUMNS,
    demos={"tools": Demo("tools", "runs/demo-tools", "calculator tool calls: SFT on demonstrations, then GRPO from it "
                         "(recipes/smollm2-calculator-sft.yaml, smollm2-calculator-tools.yaml)")},
)
