"""The JSON a completion offers: the one reading `json_schema` validates and `json_fields` compares with the gold.

The JSON is the last fenced block (```json ... ``` or ``` ... ```) after any `<think>` block, or else the whole
answer text (`parse_answer`); with `anywhere`, the first JSON object anywhere in the answer instead
(`first_object`: prose or a stray fence around a right object no longer hides it, what a comparison's retention set
scores). Refused, with the reason as the reward's: an answer inside a think block never closed (unclosed_think),
text that is no JSON (not_json), an object naming a key twice (duplicate_key: parsers disagree on which value
counts, Python's keeps the last, so a policy could hedge), and adversarial output larger (`_MAX_JSON_CHARS`,
`_MAX_JSON_NODES`: too_large) or deeper (`_MAX_JSON_DEPTH`: too_deep) than an answer is. The bounds are checked
before anything validates the value, so validation stays linear in an honest answer's size.
"""
from __future__ import annotations

import json

from grpokit.rewards.parsing import answer_region, fenced_blocks

_JSON_TAGS = frozenset({"", "json"})
# The bounds on what is read; honest answers sit far below each of them.
_MAX_JSON_CHARS = 50_000  # a JSON answer fits a completion budget of a few thousand tokens; caps parse time and string sizes
_MAX_JSON_NODES = 10_000  # values (objects, arrays, scalars): honest answers have tens to hundreds; validation is linear in them
_MAX_JSON_DEPTH = 32  # nesting levels: jsonschema recurses several Python frames per level; 32 stays far below the ~1000 limit
_MAX_OBJECT_STARTS = 64  # `{` tried by first_object: an answer with a right object has it within its first few


class _DuplicateKey(ValueError):
    """An object names a key twice."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) < len(pairs):
        raise _DuplicateKey
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)  # json.loads with a duplicate key refused


def extract_json_text(completion: str) -> str | None:
    """The JSON text a completion offers, or None when its think block is never closed."""
    region = answer_region(completion)
    if region is None:
        return None
    blocks = fenced_blocks(region, _JSON_TAGS)
    return (blocks[-1] if blocks else region).strip()


def _decoded(read) -> tuple[object, str]:
    """(the value `read()` decodes, "") or (None, not_json | duplicate_key | too_deep | too_large)."""
    try:
        value = read()
    except RecursionError:  # deeper than Python's parser allows
        return None, "too_deep"
    except _DuplicateKey:
        return None, "duplicate_key"
    except ValueError:  # JSONDecodeError, and integers longer than Python converts
        return None, "not_json"
    problem = _shape_problem(value)
    return (None, problem) if problem else (value, "")


def parse_answer(completion: str, anywhere: bool = False) -> tuple[object, str]:
    """(the JSON value a completion offers, "") or (None, why there is none: unclosed_think | too_large | not_json |
    duplicate_key | too_deep). `anywhere`: the first JSON object in the answer instead (`first_object`), so that
    prose or a stray fence around a right object does not hide it (json_fields' `anywhere`: the fields without the
    form)."""
    if anywhere:
        return first_object(completion)
    text = extract_json_text(completion)
    if text is None:
        return None, "unclosed_think"
    if len(text) > _MAX_JSON_CHARS:
        return None, "too_large"
    return _decoded(lambda: _DECODER.decode(text))


def first_object(completion: str) -> tuple[dict | None, str]:
    """The first JSON object in a completion's answer (after any think block), wherever it stands: from each `{`
    in turn (at most `_MAX_OBJECT_STARTS` of them), the first from which a whole object parses, with what follows
    it ignored ("Here it is: {...}" or "{...}" and a stray closing fence both read the object); the same size, depth
    and duplicate-key rules as `parse_answer`. (None, not_json) when no `{` starts an object."""
    region = answer_region(completion)
    if region is None:
        return None, "unclosed_think"
    if len(region) > _MAX_JSON_CHARS:
        return None, "too_large"
    start = region.find("{")
    for _ in range(_MAX_OBJECT_STARTS):
        if start < 0:
            break
        value, problem = _decoded(lambda: _DECODER.raw_decode(region, start)[0])
        if problem != "not_json":
            return value, problem
        start = region.find("{", start + 1)
    return None, "not_json"


def _shape_problem(value: object) -> str:
    """'too_large' / 'too_deep' when parsed JSON exceeds the bounds, else ''; iterative, so deep input is safe."""
    nodes, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > _MAX_JSON_NODES:
            return "too_large"
        if depth > _MAX_JSON_DEPTH:
            return "too_deep"
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return ""
