"""User-facing errors: every problem names where it is (file, line, field) and the fix.

The CLI catches `GrpokitError` and prints its problems without a traceback,
exiting with `exit_code` (2 for bad recipes / inputs, 1 for data that is
unusable). Anything else that escapes is a bug in grpokit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, and how to fix it."""

    where: str  # "recipe.yaml:12 train.num_generations" or "data.jsonl:7"
    message: str  # what is wrong
    fix: str = ""  # the change that would make it right

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}"
        if self.fix:
            text += f"\n    fix: {self.fix}"
        return text


class GrpokitError(Exception):
    """An input problem the user can fix; printed without a traceback."""

    def __init__(self, problems: list[Problem] | str, *, exit_code: int = 2, title: str = ""):
        if isinstance(problems, str):
            problems = [Problem("grpokit", problems)]
        self.problems = list(problems)
        self.exit_code = exit_code
        self.title = title
        super().__init__(self.render())

    def render(self) -> str:
        head = self.title or f"{len(self.problems)} problem(s) found"
        return head + "\n" + "\n".join(f"  - {p}" for p in self.problems)
