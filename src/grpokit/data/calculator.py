"""Generated rows of the calculator tool task: the arithmetic task's problems, each with the call that solves it.

    grpokit data generate calculator eval.jsonl --rows 48 --seed 101
    grpokit data generate calculator train.jsonl --rows 320 --seed 102 --exclude eval.jsonl

A row is a tool row (grpokit.envs.rows) for `env: calculator`: the question and answer of a generated arithmetic
problem (grpokit.data.arithmetic), the environment's tool definitions as TRL renders them into the prompt (without
the `return` entry a row does not need), the one call that solves it (`add` or `subtract` with the problem's
numbers, in the question's order) and the goal `final_answer`. The SFT warm start plays that call on the
environment to make its demonstration (grpokit.envs.demonstrations); GRPO's rewards read the tool columns.

The bundled `builtin:tools/calculator.jsonl` (training rows) and `builtin:tools/calculator-eval.jsonl` (held-out,
no question in common) are the two commands above.
"""
from __future__ import annotations

from grpokit.data.arithmetic import generate

TOOL_OF_OP = {"+": "add", "-": "subtract"}  # the arithmetic task's operators and the calculator tool for each
ENV = "calculator"


def tool_row(problem: dict, tools: list[dict]) -> dict:
    """A generated arithmetic problem as a calculator tool row."""
    call = {"name": TOOL_OF_OP[problem["op"]], "arguments": {"a": problem["a"], "b": problem["b"]}}
    return {"question": problem["question"], "answer": problem["answer"], "env": ENV, "tools": tools,
            "expected_calls": [call], "goal": {"kind": "final_answer"}}


def generate_tool_rows(rows: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`rows` distinct calculator rows (grpokit.data.arithmetic.generate's problems); questions in `exclude` never."""
    from grpokit.envs import get_env, tool_schemas

    tools = tool_schemas(get_env(ENV).cls())
    return [tool_row(p, tools) for p in generate(rows, seed, exclude)]
