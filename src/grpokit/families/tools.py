"""The tools family: tool-calling episodes in an environment (`env:`), judged by `task_success` (and the other tool
rewards); the generated calculator rows, the evaluation's columns and the tools demo.

    grpokit data generate calculator eval.jsonl --rows 48 --seed 101
    grpokit data generate calculator train.jsonl --rows 320 --seed 102 --exclude eval.jsonl
    grpokit demo --task tools

Tool rows are checked wherever they are, whatever the task (grpokit.envs.rows); the family adds no check of its
own. Its scripted hacks play the environment, so they are grpokit.audit.tools (above the environments' runner),
not an answer form here.

Calculator rows: a row is a tool row for `env: calculator`: the question and answer of a generated arithmetic
problem (grpokit.families.math), the environment's tool definitions as TRL renders them into the prompt (without
the `return` entry a row does not need), the one call that solves it (`add` or `subtract` with the problem's
numbers, in the question's order) and the goal `final_answer`. The SFT warm start plays that call on the
environment to make its demonstration (grpokit.envs.demonstrations); GRPO's rewards read the tool columns.

The bundled `builtin:tools/calculator.jsonl` (training rows) and `builtin:tools/calculator-eval.jsonl` (held-out,
no question in common) are the two commands above.
"""
from __future__ import annotations

from grpokit.families.base import Column, Demo, Family, Generator
from grpokit.families.math import MOST_ROWS, generate

TOOL_OF_OP = {"+": "add", "-": "subtract"}  # the arithmetic task's operators and the calculator tool for each
ENV = "calculator"


def tool_row(problem: dict, tools: list[dict]) -> dict:
    """A generated arithmetic problem as a calculator tool row."""
    call = {"name": TOOL_OF_OP[problem["op"]], "arguments": {"a": problem["a"], "b": problem["b"]}}
    return {"question": problem["question"], "answer": problem["answer"], "env": ENV, "tools": tools,
            "expected_calls": [call], "goal": {"kind": "final_answer"}}


def generate_tool_rows(rows: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`rows` distinct calculator rows (grpokit.families.math.generate's problems); questions in `exclude` never."""
    from grpokit.envs import get_env, tool_schemas

    tools = tool_schemas(get_env(ENV).cls())
    return [tool_row(p, tools) for p in generate(rows, seed, exclude)]


# ---------------------------------------------------------------- evaluation (grpokit.evaluation.tools)
def _calls(episode, row: dict) -> float:
    from grpokit.rewards.tools import tool_calls

    return float(bool(tool_calls(episode)))


def _valid_args(episode, row: dict) -> float | None:
    """The share of the episode's calls whose arguments fit the called tool's schema; None without a call."""
    from grpokit.envs.rows import tools_by_name
    from grpokit.rewards.tools import args_valid, tool_calls

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


# ---------------------------------------------------------------- the row
FAMILY = Family(
    "tools", "tool-calling episodes in an environment, judged by their goal (task_success)",
    generators={"calculator": Generator(generate_tool_rows, "the arithmetic problems as tool rows for env: calculator",
                                        MOST_ROWS)},
    columns=COLUMNS,
    demos={"tools": Demo("tools", "runs/demo-tools", "calculator tool calls: SFT on demonstrations, then GRPO from it "
                         "(recipes/smollm2-calculator-sft.yaml, smollm2-calculator-tools.yaml)")},
)
