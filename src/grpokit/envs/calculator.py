"""The calculator environment: arithmetic word problems with add/subtract/multiply/divide tools.

    grpokit train recipes/smollm2-calculator-tools.yaml

TRL creates one `CalculatorEnv` per rollout and exposes its four public
methods as tools (schemas from the type hints and docstrings). The episode
ends when the model answers without a tool call; `task_success` then checks
the answer line `Final answer: N` with the same math verifier as the
arithmetic task. The environment keeps the calls it served, so rewards and
evaluation can count them. Bad calls (division by zero, a missing argument)
raise: TRL turns the exception into an `{"error": ...}` tool result and
counts it in `tools/failure_frequency`.
"""
from __future__ import annotations


def _num(x: float) -> float | int:
    """Integral results as ints: `42`, not `42.0`, so the model can copy them into its answer line."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


class CalculatorEnv:
    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def reset(self, **row) -> None:
        self.calls = []
        return None  # the question already says everything; nothing is appended to the prompt

    def _served(self, name: str, a: float, b: float, value):
        self.calls.append((name, {"a": a, "b": b}))
        return _num(value)

    def add(self, a: float, b: float) -> float:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        return self._served("add", a, b, a + b)

    def subtract(self, a: float, b: float) -> float:
        """Subtract the second number from the first.

        Args:
            a: The number to subtract from.
            b: The number to subtract.
        """
        return self._served("subtract", a, b, a - b)

    def multiply(self, a: float, b: float) -> float:
        """Multiply two numbers.

        Args:
            a: The first factor.
            b: The second factor.
        """
        return self._served("multiply", a, b, a * b)

    def divide(self, a: float, b: float) -> float:
        """Divide the first number by the second.

        Args:
            a: The dividend.
            b: The divisor (not zero).
        """
        if b == 0:
            raise ValueError("division by zero")
        return self._served("divide", a, b, a / b)
