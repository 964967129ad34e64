"""Answer parsing shared by every reward: one rule each for the think block, fenced blocks and answer lines.

- think block: Qwen3 puts reasoning in `<think>…</think>` (the opener may sit in
  the prompt). The answer is what follows the LAST `</think>`; a `<think>` that
  is never closed has no answer (a truncated thought) -> `answer_region` is None.
  `think_text` is the thinking part itself (for budgets).
- fenced blocks: ```` ```tag ```` ... ```` ``` ````; a fence cut off by the
  length limit runs to the end of the text. `fenced_blocks(text, tags)` keeps
  the blocks whose tag is one of `tags` ("" = no tag), in order.
- answer line: a line starting with one of the markers (`Final answer:`,
  `最终答案：` ..., case-insensitive), after markdown decoration only (`**`, `#`,
  `>`, `-`, spaces: `**Final answer:** 72`, `**Final answer**: 72`, `## Final answer: 72`); a marker in
  the middle of a line ("Before I give the final answer: ...") is prose, not an
  answer. Its value may sit on the next non-empty line. Emphasis around the
  value (`**Final answer: 72**`, `Final answer: **72**`) is no part of it.
  `answer_lines` gives (start, end, value) of each, the value whole as written
  (never cut: a reward refuses a value too long as `too_long`); `answer_key`
  is what two answers must share to be one answer (spacing aside).

The math, format, length, code, JSON and SQL rewards all read completions
through these functions, so a completion means the same thing to each of them.
"""
from __future__ import annotations

import functools
import re

DEFAULT_MARKERS = ("Final answer:", "最终答案：", "最终答案:")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def answer_markers(markers) -> tuple[str, ...]:
    """A reward's `markers` param, checked: a string would become one marker per character, [] matches nothing."""
    if isinstance(markers, str) or not markers or not all(isinstance(m, str) and m.strip() for m in markers):
        raise ValueError(f"markers must be a non-empty list of non-empty strings, got {markers!r}")
    return tuple(markers)

MAX_ANSWER_CHARS = 200  # a final answer is a value, not a paragraph: longer ones are refused as too_long
MAX_CANDIDATES = 16  # no honest completion states 16 final answers; bounds work on 100k-char inputs
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)  # \Z: a fence cut off by max length


# ---------------------------------------------------------------- think block
def answer_region(text: str) -> str | None:
    """The part of a completion that may hold the answer: after the last `</think>`.

    None when a `<think>` is never closed: a truncated thought has no answer.
    """
    close = text.rfind(THINK_CLOSE)
    if text.rfind(THINK_OPEN) > close:
        return None
    return text if close < 0 else text[close + len(THINK_CLOSE):]


def think_text(text: str) -> str:
    """The thinking part: between `<think>` (or the start, as Qwen3 puts `<think>` in the prompt) and `</think>`."""
    close = text.find(THINK_CLOSE)
    open_ = text.find(THINK_OPEN)
    start = 0 if open_ < 0 else open_ + len(THINK_OPEN)
    if close >= 0 and close >= start:
        return text[start:close]
    return text[start:] if open_ >= 0 else ""


# ---------------------------------------------------------------- fenced blocks
def fenced_blocks(text: str, tags: frozenset[str] | set[str] | tuple[str, ...]) -> list[str]:
    """Bodies of the fenced blocks whose (lower-cased) tag is in `tags`; "" in `tags` accepts untagged fences."""
    return [body for tag, body in _FENCE.findall(text) if tag.lower() in tags]


# ---------------------------------------------------------------- answer lines
@functools.lru_cache(maxsize=64)
def marker_pattern(markers: tuple[str, ...]) -> re.Pattern:
    """The markers, as one pattern to `match` at the start of a line stripped of its decoration (DECORATION)."""
    # Longest first so that "最终答案：" wins over a shorter marker that prefixes it. Emphasis may close before a
    # marker's colon ("**Final answer**: 72" is "Final answer:" in bold, as "**Final answer:** 72" is).
    alternatives = sorted((_marker_regex(m) for m in markers if m), key=len, reverse=True)
    return re.compile("|".join(alternatives), re.IGNORECASE)


def _marker_regex(marker: str) -> str:
    body, colon = (marker[:-1], marker[-1]) if marker[-1] in ":：" and len(marker) > 1 else (marker, "")
    return re.escape(body) + (r"[*_]*" + re.escape(colon) if colon else "")


DECORATION = "*_#>`- \t"  # markdown before a marker: "**Final answer:** 3", "## 最终答案：3", "> - Final answer: 3"
_EMPHASIS_RUN = re.compile(r"[*_]{1,3}")  # markdown emphasis is 1 to 3 marks; a longer run is text


@functools.lru_cache(maxsize=64)
def _line_start_pattern(markers: tuple[str, ...]) -> re.Pattern:
    decoration = "(?P<decoration>[" + re.escape(DECORATION) + "]*)"
    return re.compile(f"^{decoration}(?:{marker_pattern(markers).pattern})", re.IGNORECASE | re.MULTILINE)


def emphasis_opened(decoration: str) -> str:
    """The emphasis run glued to the marker ("**" in "- **Final answer:**"; none in "* Final answer:", a bullet)."""
    run = re.search(r"(?<![*_])[*_]{1,3}$", decoration)
    return run.group(0) if run else ""


def strip_emphasis(value: str, opened: str = "") -> str:
    """An answer line's value without the emphasis around it (`opened`: the emphasis run opened before the marker,
    "**" in "**Final answer:** 72" and "**Final answer: 72**"), and without the spaces at its ends. Only a run that
    closes one opened is emphasis: "12 *(13 also works)*" and "__import__('os')" keep every character."""
    value = value.strip()
    if opened:
        if value.startswith(opened) and not value.startswith(opened + opened[-1]):
            value = value[len(opened):].strip()  # "**Final answer:** 72"
        elif value.endswith(opened):
            value = value[: -len(opened)].strip()  # "**Final answer: 72**"
    run = _EMPHASIS_RUN.match(value)
    if run and len(value) > 2 * len(run.group(0)) and value.endswith(run.group(0)):
        inner = value[len(run.group(0)): -len(run.group(0))]
        if run.group(0) not in inner and inner[0] not in "*_" and inner[-1] not in "*_":  # not "*72* *73*"
            value = inner.strip()  # "Final answer: **72**"
    return value


def answer_lines(region: str, markers: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(start, end, value) for each answer line (a line starting with a marker, after markdown decoration); the
    value may sit on the next non-empty line. The value is whole, as written but for emphasis around it and the
    spaces at its ends: a reward judges its length (MAX_ANSWER_CHARS), nothing here cuts it."""
    out = []
    for m in _line_start_pattern(tuple(markers)).finditer(region):
        eol = region.find("\n", m.end())
        eol = len(region) if eol < 0 else eol
        opened = emphasis_opened(m.group("decoration"))
        value = strip_emphasis(region[m.end():eol], opened)
        if not value.strip("*_"):  # "Final answer:\n72" or "**Final answer:**\n72"
            nxt = eol + 1
            while nxt < len(region):
                nl = region.find("\n", nxt)
                nl = len(region) if nl < 0 else nl
                if region[nxt:nl].strip():
                    value, eol = strip_emphasis(region[nxt:nl]), nl  # the marker line closed its emphasis
                    break
                nxt = nl + 1
        out.append((m.start(), eol, value))
        if len(out) > MAX_CANDIDATES:
            break
    return out


_SPACE = re.compile(r"\s+")


def answer_key(value: str) -> str:
    """What two answers must share to be the same answer: the value with its spacing dropped (kept as one space
    between two letters or digits, where it separates: "3 4" is not "34"), case folded, no full stop at its end.
    "(7-3)*4" and "( 7 - 3 ) * 4" are one answer."""
    def space(m: re.Match) -> str:
        a, b = m.string[m.start() - 1: m.start()], m.string[m.end(): m.end() + 1]
        return " " if a.isalnum() and b.isalnum() else ""
    return _SPACE.sub(space, value.strip()).rstrip(".").casefold()


def boxed_values(region: str, limit: int) -> list[tuple[int, str]]:
    """(start, content) of each `\\boxed{...}` with balanced braces."""
    out, pos = [], 0
    while len(out) <= limit:
        start = region.find("\\boxed", pos)
        if start < 0:
            break
        i = start + len("\\boxed")
        while i < len(region) and region[i] == " ":
            i += 1
        pos = i
        if i >= len(region) or region[i] != "{":
            continue
        depth, j, stop = 0, i, min(len(region), i + MAX_ANSWER_CHARS + 2)
        while j < stop:
            if region[j] == "{":
                depth += 1
            elif region[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth == 0:
            out.append((start, region[i + 1: j]))
        elif j - i > MAX_ANSWER_CHARS:  # no closing brace within the limit: too long to be an answer
            out.append((start, region[i + 1: stop]))  # (a box cut off by the end of text is skipped)
        pos = j + 1
    return out


# ---------------------------------------------------------------- the prompt's own worked example
def _prompt_lines(prompt) -> list[str]:
    """The non-empty lines of a prompt (a string, or chat messages: every message's text), stripped, in order."""
    if isinstance(prompt, list):
        prompt = "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return [ln.strip() for ln in str(prompt or "").splitlines() if ln.strip()]


def copies_prompt(answer_line: str, reasoning_lines: list[str], prompt) -> bool:
    """The completion repeats the prompt's worked example: its answer line is a line of the prompt, and so is
    one of its reasoning lines (or it has none). A policy can earn a format bonus this way without reading
    the question (seen in the demo without refill: "12 + 7 = 19 / Final answer: 19" for every question)."""
    lines = set(_prompt_lines(prompt))
    if answer_line.strip() not in lines:
        return False
    return not reasoning_lines or any(ln.strip() in lines for ln in reasoning_lines)


def worked_example(prompt, markers: tuple[str, ...]) -> str | None:
    """The prompt's example answer as a completion would copy it: the line before its last answer line, then
    that line; None when the prompt shows no answer line."""
    lines = _prompt_lines(prompt)
    pattern = marker_pattern(tuple(markers))
    marked = [i for i, ln in enumerate(lines) if pattern.match(ln.lstrip(DECORATION))]
    if not marked:
        return None
    i = marked[-1]
    return "\n".join(lines[max(0, i - 1):i + 1])
