"""The `json_schema` reward: the completion's JSON parses and validates against the row's schema.

The JSON is the last fenced block (```json ... ``` or ``` ... ```) after any
`<think>` block, or else the whole answer text. Scores: 1.0 valid; `partial_credit`
when it parses but breaks the schema (0.0 by default: a partial credit is a
bonus the policy can farm by emitting any JSON); 0.0 when it does not parse,
when there is no answer (unclosed think) or when the JSON is nested deeper than
Python's parser allows. `None` when the row has no schema.

A schema that is itself invalid is a dataset bug: the reward raises (counted
and reported by the registry) rather than scoring every completion 0.

Not covered: `format` keywords (jsonschema leaves them unchecked by default)
and catastrophic `pattern` regexes in a schema (the schema is trusted data).

Run: `grpokit rewards score --reward json_schema --input rows.jsonl` (rows need `schema`).
"""
from __future__ import annotations

import functools
import json
import re

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from grpokit.rewards.math import answer_region
from grpokit.rewards.registry import register

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.S)


def extract_json_text(completion: str) -> str | None:
    """The JSON text a completion offers, or None when its think block is never closed."""
    region = answer_region(completion)
    if region is None:
        return None
    blocks = _FENCE.findall(region)
    return (blocks[-1] if blocks else region).strip()


@functools.lru_cache(maxsize=1024)
def _validator(schema_json: str):
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as e:
        raise ValueError(f"the row's schema is not a valid JSON Schema: {e.message}") from None
    return cls(schema)


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


def check_json(completion: str, schema: object, partial_credit: float = 0.0) -> tuple[float | None, str, list[str]]:
    """(reward, reason, first schema errors) for one completion."""
    key = _schema_key(schema)
    if key is None:
        return None, "no_schema", []
    validator = _validator(key)
    text = extract_json_text(completion)
    if text is None:
        return 0.0, "unclosed_think", []
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError; very deep nesting is a RecursionError
        return 0.0, "not_json", []
    errors = [e.message for _, e in zip(range(3), validator.iter_errors(value))]
    if errors:
        return partial_credit, "schema_mismatch", errors
    return 1.0, "valid", []


@register(
    "json_schema",
    description="1.0 when the completion (or its last fenced JSON block) parses and validates against the row's "
    "JSON Schema; partial_credit when it parses but does not validate; 0.0 otherwise; null without a schema.",
    columns=("schema",),
    params={"partial_credit": "score for JSON that parses but breaks the schema (default 0.0)"},
)
def get_json_schema_reward(partial_credit: float = 0.0):
    if not 0.0 <= partial_credit <= 1.0:
        raise ValueError(f"partial_credit must be between 0 and 1, got {partial_credit}")

    def score(completions: list[str], schema: list, **_columns) -> list[float | None]:
        return [check_json(c, s, partial_credit)[0] for c, s in zip(completions, schema)]

    def explain(completion: str, schema: object = None, **_row) -> dict:
        reward, reason, errors = check_json(completion, schema, partial_credit)
        return {"reward": reward, "reason": reason, **({"errors": errors} if errors else {})}

    score.explain = explain
    return score
