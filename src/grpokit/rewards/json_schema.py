"""The `json_schema` reward: the completion's JSON parses and validates against the row's schema.

The JSON is the last fenced block (```json ... ``` or ``` ... ```) after any
`<think>` block, or else the whole answer text. Scores: 1.0 valid; `partial_credit`
when it parses but breaks the schema (0.0 by default: a partial credit is a
bonus the policy can farm by emitting any JSON); 0.0 when it does not parse,
when there is no answer (unclosed think), and for adversarial output: JSON
larger (`_MAX_JSON_CHARS`, `_MAX_JSON_NODES`) or deeper (`_MAX_JSON_DEPTH`)
than an answer is, or whose validation runs past `timeout_s`. `None` when the
row has no schema.

Bounded time: the size and depth limits are checked before validating; every
schema keyword checks the deadline before it runs, so a recursive schema that
makes validation exponential (`anyOf` over `$ref: "#"`) stops at `timeout_s`
(no signals or threads: safe in any thread); `uniqueItems` is checked in linear
time (`_unique_items`) where jsonschema compares objects pairwise.

A schema that is itself invalid, or nested too deeply to check, is a dataset
bug: the reward raises (counted and reported by the registry) rather than
scoring every completion 0.

Not covered: `format` keywords (jsonschema leaves them unchecked by default),
catastrophic `pattern` regexes in a schema (the schema is trusted data; the
strings they run on are bounded by `_MAX_JSON_CHARS`), and the time bound
inside an embedded resource that names its own `$schema` (jsonschema validates
it with the stock class; the size and depth bounds still hold).

Run: `grpokit rewards score --reward json_schema --input rows.jsonl` (rows need `schema`).
"""
from __future__ import annotations

import functools
import json
import math
import threading
import time

from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import extend, validator_for

from grpokit.rewards.parsing import answer_region, fenced_blocks
from grpokit.rewards.registry import describe

_JSON_TAGS = frozenset({"", "json"})
# The bounds on what is validated; honest answers sit far below each of them.
_MAX_JSON_CHARS = 50_000  # a JSON answer fits a completion budget of a few thousand tokens; caps parse time and string sizes
_MAX_JSON_NODES = 10_000  # values (objects, arrays, scalars): honest answers have tens to hundreds; validation is linear in them
_MAX_JSON_DEPTH = 32  # nesting levels: jsonschema recurses several Python frames per level; 32 stays far below the ~1000 limit
_VALIDATION_TIMEOUT_S = 1.0  # honest answers validate in milliseconds; a recursive anyOf schema can take exponential time
_deadline = threading.local()  # per thread: one cached validator serves every thread


class _TimedOut(Exception):
    """Validation ran past the deadline: the completion scores 0."""


def extract_json_text(completion: str) -> str | None:
    """The JSON text a completion offers, or None when its think block is never closed."""
    region = answer_region(completion)
    if region is None:
        return None
    blocks = fenced_blocks(region, _JSON_TAGS)
    return (blocks[-1] if blocks else region).strip()


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


def _timed(keyword):
    """A jsonschema keyword function that first checks this thread's deadline."""

    def check(validator, value, instance, schema):
        if time.monotonic() > getattr(_deadline, "at", math.inf):
            raise _TimedOut
        yield from keyword(validator, value, instance, schema) or ()  # a keyword may return None: no errors

    return check


def _identity(value: object) -> object:
    """A hashable form with JSON Schema's equality: 1 == 1.0, true != 1, objects compare by content."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _identity(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_identity(v) for v in value))
    return ("value", value)  # numbers (1 == 1.0 hash alike), strings, null


def _unique_items(validator, unique, instance, schema):
    # jsonschema's own check compares objects pairwise (20k objects: minutes); hashing is linear.
    # Recursion in _identity is bounded by _MAX_JSON_DEPTH, checked before validation.
    if unique and validator.is_type(instance, "array") and len({_identity(v) for v in instance}) < len(instance):
        yield ValidationError("array has non-unique elements")


@functools.lru_cache(maxsize=1024)
def _validator(schema_json: str):
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise ValueError(f"the row's schema is not a valid JSON Schema: {e.message}") from None
    except RecursionError:
        raise ValueError("the row's schema is nested too deeply to check against its meta-schema") from None
    keywords = {name: _timed(fn) for name, fn in cls.VALIDATORS.items()}
    keywords["uniqueItems"] = _timed(_unique_items)
    if isinstance(schema, dict):
        # jsonschema re-picks the validator class from "$schema" whenever a $ref reaches the root ("#"),
        # which would swap the timed keywords for the stock ones; the class is already chosen from it.
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    return extend(cls, keywords)(schema)


def _schema_key(schema: object) -> str | None:
    """A row's `schema` (dict, or JSON text) as canonical JSON text for the validator cache."""
    if schema is None or schema == "":
        return None
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise ValueError(f"the row's schema is not valid JSON: {e}") from None
    if not isinstance(schema, (dict, bool)):
        raise ValueError(f"the row's schema must be a JSON object, got {type(schema).__name__}")
    return json.dumps(schema, sort_keys=True)


def check_json(
    completion: str, schema: object, partial_credit: float = 0.0, timeout_s: float = _VALIDATION_TIMEOUT_S
) -> tuple[float | None, str, list[str]]:
    """(reward, reason, first schema errors) for one completion.

    Reasons: valid | schema_mismatch | not_json | unclosed_think | too_large | too_deep | timeout | no_schema.
    """
    key = _schema_key(schema)
    if key is None:
        return None, "no_schema", []
    validator = _validator(key)
    text = extract_json_text(completion)
    if text is None:
        return 0.0, "unclosed_think", []
    if len(text) > _MAX_JSON_CHARS:
        return 0.0, "too_large", []
    try:
        value = json.loads(text)
    except RecursionError:  # deeper than Python's parser allows
        return 0.0, "too_deep", []
    except ValueError:  # JSONDecodeError, and integers longer than Python converts
        return 0.0, "not_json", []
    problem = _shape_problem(value)
    if problem:
        return 0.0, problem, []
    _deadline.at = time.monotonic() + timeout_s
    try:
        errors = [e.message for _, e in zip(range(3), validator.iter_errors(value))]
    except _TimedOut:
        return 0.0, "timeout", []
    except RecursionError:  # a schema whose keywords nest deeply enough to exhaust the stack within the depth bound
        return 0.0, "too_deep", []
    finally:
        _deadline.at = math.inf
    if errors:
        return partial_credit, "schema_mismatch", errors
    return 1.0, "valid", []


@describe(
    description="1.0 when the completion (or its last fenced JSON block) parses and validates against the row's "
    "JSON Schema; partial_credit when it parses but does not validate; 0.0 otherwise; null without a schema.",
    columns=("schema",),
    params={
        "partial_credit": "score for JSON that parses but breaks the schema (default 0.0)",
        "timeout_s": f"seconds one validation may run before it scores 0.0 (default {_VALIDATION_TIMEOUT_S})",
    },
)
def get_json_schema_reward(partial_credit: float = 0.0, timeout_s: float = _VALIDATION_TIMEOUT_S):
    if not 0.0 <= partial_credit <= 1.0:
        raise ValueError(f"partial_credit must be between 0 and 1, got {partial_credit}")
    if not 0.0 < timeout_s < math.inf:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")

    def score(completions: list[str], schema: list, **_columns) -> list[float | None]:
        return [check_json(c, s, partial_credit, timeout_s)[0] for c, s in zip(completions, schema)]

    def explain(completion: str, schema: object = None, **_row) -> dict:
        reward, reason, errors = check_json(completion, schema, partial_credit, timeout_s)
        return {"reward": reward, "reason": reason, **({"errors": errors} if errors else {})}

    score.explain = explain
    return score
