"""The `length` reward: the Qwen3-4B/14B article's length safeguards as one configurable penalty (always <= 0).

Three independent parts, summed:
- short: a completion whose stripped text is under `min_chars` characters
  (empty included) scores `short_penalty` (the Qwen3-4B/14B article: -1.0 under 50
  characters) and nothing else, so collapsing to "" never pays;
- over-long (DAPO's soft overlong punishment): with `max_completion_length`
  set, 0 up to `max_completion_length - overlong_buffer` tokens, then a
  linear ramp down to `-overlong_penalty` at `max_completion_length`, flat
  beyond;
- thinking budget (Qwen3): with `think_budget` set, a `<think>` block longer
  than that many tokens costs up to `-think_penalty`, linearly, reaching it at
  twice the budget. An unclosed think block counts to the end of the text.

During training the over-long part counts real tokens: the scorer asks for
TRL's `completion_ids`. Where there are none (`grpokit rewards score`, the
audit) and for the think budget, token counts are a tokenizer-free estimate
(`estimate_tokens`), because loading a tokenizer inside a reward would tie it
to one model: digits count one token
each (Qwen-family tokenizers split numbers into digits), CJK characters 1/1.5
token, other characters 1/4 token. On Qwen3 tokenizers this is within about
±25% for English and Chinese maths text; the ramps make the penalty soft, so
that error moves the penalty by a fraction, not a cliff.

Run: `grpokit rewards score --reward length --param max_completion_length=512 --input rows.jsonl`.
"""
from __future__ import annotations

import math

from grpokit.rewards.parsing import think_text
from grpokit.rewards.registry import describe

_CJK_CHARS_PER_TOKEN = 1.5
_OTHER_CHARS_PER_TOKEN = 4.0
_DEFAULT_BUFFER_FRACTION = 0.2  # DAPO uses a 4k buffer on 20k; 20% keeps the ramp proportional for short runs


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x3000 <= o <= 0x303F or 0xFF00 <= o <= 0xFFEF


def estimate_tokens(text: str) -> int:
    """Approximate token count of `text` for Qwen-style BPE tokenizers (see module docstring)."""
    digits = sum(ch.isdigit() for ch in text)
    cjk = sum(_is_cjk(ch) for ch in text)
    other = len(text) - digits - cjk
    return math.ceil(digits + cjk / _CJK_CHARS_PER_TOKEN + other / _OTHER_CHARS_PER_TOKEN)


def _ramp(value: float, start: float, full: float) -> float:
    """0 at or below `start`, 1 at or above `full`, linear between."""
    if value <= start:
        return 0.0
    if value >= full:
        return 1.0
    return (value - start) / (full - start)


def length_penalty(
    text: str,
    min_chars: int = 50,
    short_penalty: float = -1.0,
    max_completion_length: int | None = None,
    overlong_buffer: int | None = None,
    overlong_penalty: float = 1.0,
    think_budget: int | None = None,
    think_penalty: float = 0.5,
    tokens: int | None = None,
) -> tuple[float, dict]:
    """(penalty, parts) for one completion; parts holds each component and the token counts.

    `tokens` is the completion's real token count when known (TRL's completion_ids), else it is estimated."""
    if len(text.strip()) < min_chars:
        return short_penalty, {"short": short_penalty}
    parts: dict = {}
    total = 0.0
    if max_completion_length:
        counted = tokens is not None
        tokens = tokens if counted else estimate_tokens(text)
        buffer = overlong_buffer if overlong_buffer is not None else int(max_completion_length * _DEFAULT_BUFFER_FRACTION)
        p = -overlong_penalty * _ramp(tokens, max_completion_length - buffer, max_completion_length)
        parts.update({"tokens" if counted else "tokens_est": tokens, "overlong": p})
        total += p
    if think_budget:
        tokens = estimate_tokens(think_text(text))
        p = -think_penalty * _ramp(tokens, think_budget, 2 * think_budget)
        parts.update(think_tokens_est=tokens, think=p)
        total += p
    return total, parts


@describe(
    description="A penalty (<= 0): short_penalty for empty or very short completions, a soft ramp near "
    "max_completion_length (real tokens in training, estimated elsewhere), and optionally for a <think> block "
    "over think_budget tokens.",
    columns=(),
    params={
        "min_chars": "completions with fewer stripped characters get short_penalty (default 50)",
        "short_penalty": "score of an empty or too-short completion (default -1.0)",
        "max_completion_length": "the generation limit in tokens; enables the soft over-long penalty (default off)",
        "overlong_buffer": "tokens before the limit where the penalty ramps in (default 20% of the limit)",
        "overlong_penalty": "penalty size at and beyond max_completion_length (default 1.0)",
        "think_budget": "Qwen3: tokens a <think> block may use before it is penalised (default off)",
        "think_penalty": "penalty size at twice think_budget (default 0.5)",
    },
)
def get_length_reward(
    min_chars: int = 50,
    short_penalty: float = -1.0,
    max_completion_length: int | None = None,
    overlong_buffer: int | None = None,
    overlong_penalty: float = 1.0,
    think_budget: int | None = None,
    think_penalty: float = 0.5,
):
    r"""The `length` scorer: 0.0 for a completion of a fitting length, a penalty for an empty or too-short one and,
    with `max_completion_length`, a penalty growing towards the generation limit (DAPO's soft over-long penalty).

    Example:

    >>> from grpokit.rewards.length import get_length_reward
    >>> score = get_length_reward(min_chars=10)
    >>> score(["", "7", "3 + 4 = 7, so the answer is 7."])
    [-1.0, -1.0, 0.0]
    >>> soft = get_length_reward(min_chars=0, max_completion_length=100, overlong_buffer=20)
    >>> soft(["x", "y", "z"], completion_ids=[[0] * 70, [0] * 90, [0] * 100])  # token counts, as TRL passes them
    [0.0, -0.5, -1.0]
    """
    if min_chars < 0 or any(v is not None and v < 1 for v in (max_completion_length, think_budget)):
        raise ValueError("length: min_chars must be >= 0, max_completion_length and think_budget >= 1")
    if max_completion_length is not None and overlong_buffer is not None and not 0 < overlong_buffer <= max_completion_length:
        raise ValueError(f"overlong_buffer must be in (0, max_completion_length={max_completion_length}], got {overlong_buffer}")
    settings = dict(
        min_chars=min_chars,
        short_penalty=short_penalty,
        max_completion_length=max_completion_length,
        overlong_buffer=overlong_buffer,
        overlong_penalty=overlong_penalty,
        think_budget=think_budget,
        think_penalty=think_penalty,
    )

    def score(completions: list[str], completion_ids: list | None = None, **_columns) -> list[float]:
        counts = [len(ids) for ids in completion_ids] if completion_ids is not None else [None] * len(completions)
        return [length_penalty(c, **settings, tokens=n)[0] for c, n in zip(completions, counts)]

    def explain(completion: str, **_row) -> dict:
        reward, parts = length_penalty(completion, **settings)
        return {"reward": reward, "chars": len(completion), **parts}

    score.explain = explain
    return score
