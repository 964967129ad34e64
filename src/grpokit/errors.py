"""User-facing errors: every problem names where it is (file, line, field) and the fix.

The CLI catches `GrpokitError` and prints its problems without a traceback,
exiting with `exit_code` (2 for bad recipes / inputs, 1 for data that is
unusable). Anything else that escapes is a bug in grpokit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Characters a terminal acts on rather than shows: C0 controls (BEL, ESC, backspace, ...), DEL, C1 controls (a lone
# 0x9b is CSI on some terminals) and the bidirectional overrides that reorder what is shown.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
WHERE_CHARS, MESSAGE_CHARS, FIX_CHARS = 300, 3000, 1500  # far above any message grpokit writes about honest input


def _escape(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def text_of(obj: object, how=str) -> str:
    """`str(obj)` (or `repr`), or what it is when its own `__str__` raises or returns no string: an exception raised
    by a user's code may carry one, and its message must never turn into a traceback of grpokit's."""
    try:
        text = how(obj)
        if isinstance(text, str):
            return text
    except Exception:  # noqa: BLE001 - whatever the user's __str__ raises, the message still prints
        pass
    return f"<a {type(obj).__name__} whose {how.__name__}() fails>"


def shown(text: object, limit: int, lines: bool = True) -> str:
    """`text` as a message may show it: control bytes and escape sequences escaped (\\x1b, \\x07; newlines too
    unless `lines`), and past `limit` characters the middle left out, saying how much (a 120 KB `--set` value is
    not echoed whole)."""
    text = text_of(text)
    if len(text) > limit:
        head, tail = text[: limit * 3 // 4], text[-(limit // 8):]
        text = f"{head} ... [{len(text) - len(head) - len(tail):,} characters left out] ... {tail}"
    return (_CONTROL if lines else _CONTROL_OR_LINE).sub(lambda m: _escape(m.group()), text)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, and how to fix it. Its texts are `shown`: escaped and shortened once, here,
    whatever prints them."""

    where: str  # "recipe.yaml:12 train.num_generations" or "data.jsonl:7"
    message: str  # what is wrong
    fix: str = ""  # the change that would make it right

    def __post_init__(self):
        object.__setattr__(self, "where", shown(self.where, WHERE_CHARS, lines=False))
        object.__setattr__(self, "message", shown(self.message, MESSAGE_CHARS))
        object.__setattr__(self, "fix", shown(self.fix, FIX_CHARS))

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
        self.title = shown(title, WHERE_CHARS, lines=False)
        super().__init__(self.render())

    def render(self) -> str:
        head = self.title or f"{len(self.problems)} problem(s) found"
        return head + "\n" + "\n".join(f"  - {p}" for p in self.problems)


class UnusableData(GrpokitError):
    """Data that cannot be used as it is (a file, or rows not skipped): exit status 1, as against 2 for a bad recipe
    or argument."""

    def __init__(self, problems: list[Problem] | str, *, title: str = ""):
        super().__init__(problems, exit_code=1, title=title)
