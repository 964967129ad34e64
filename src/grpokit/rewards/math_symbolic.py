"""The symbolic half of `math_correctness`: math-verify (sympy) on screened answers only.

math-verify's own timeout uses SIGALRM, which only works in the main thread, so it runs
with the timeout off and `_symbolic_safe` bounds the input instead: short, no exponent
towers or huge factorials (what can keep sympy busy for minutes). Split from math.py.
"""
from __future__ import annotations

import functools
import logging
import re

_MAX_SYMBOLIC_CHARS = 120  # sympy time grows quickly with expression size
_SYMBOLIC_BANNED = re.compile(r"\*\*|\\(?:binom|choose|sum|prod|int|lim|infty)|\^\s*\{[^}]*[\^{]|\d{3,}\s*!")
_EXPONENT = re.compile(r"\^\s*(\{[^}]*\}|\S)")


class _BoundedElsewhere(logging.Filter):
    """Drops math-verify's "timeout is disabled" warning: the bound is `_symbolic_safe` here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_BoundedElsewhere())


@functools.lru_cache(maxsize=8192)
def symbolic_parse(text: str) -> tuple | None:
    """math-verify's parse of a screened answer (cached: gold answers repeat across a group)."""
    from math_verify import parse  # sympy import is slow; only paid when a symbolic answer shows up

    if not _symbolic_safe(text):
        return None
    parsed = parse(f"${text}$", parsing_timeout=None)  # timeout off: SIGALRM breaks in threads
    return tuple(parsed) if parsed else None


def _symbolic_safe(text: str) -> bool:
    if len(text) > _MAX_SYMBOLIC_CHARS or _SYMBOLIC_BANNED.search(text):
        return False
    # Exponents stay small literals: 9^{9^{9^9}} or 10^{10^{10}} keep sympy busy for minutes.
    for m in _EXPONENT.finditer(text):
        exp = m.group(1).strip("{} ")
        if not re.fullmatch(r"-?\d{1,2}|[A-Za-z]|-?\d/\d", exp):
            return False
    return True


def symbolic_equal(predicted: str, gold: str) -> bool:
    from math_verify import verify

    g, p = symbolic_parse(gold), symbolic_parse(predicted)
    if g is None or p is None:
        return False
    return bool(verify(list(g), list(p), timeout_seconds=None))
