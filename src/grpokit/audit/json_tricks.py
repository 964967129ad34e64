"""The JSON audit's material: for a row scored by its schema (`json_schema`), an honest valid instance, an honest
invalid one, and the tricks that try to pass validation without answering.

- right: the row's `answer` when it is JSON that validates against the row's `schema`, else a minimal
  instance built from the schema (required properties, each of its type, enums' first value); a schema the
  builder cannot satisfy gives no right answer, and the audit says so;
- wrong: the right instance with a mistake an honest answer makes: a required property left out, else one
  property of the wrong type, else a value of another type altogether; checked to be invalid.

The tricks (`JSON_TRICKS`): empty, prose only, `{}`, `null`, the schema itself echoed back, JSON that is not
JSON (unquoted keys), the right instance cut in half, a valid block followed by a broken last one, nesting
past any honest depth, and an array past any honest size; and, for a reward that compares values with the gold
(`json_fields`), the right values all written as strings ("34" for 34), every field hedged with a list of
candidates (the right value and a wrong one), and every key given twice, a wrong value first (Python's parser
keeps the last one; others keep the first). A trick that scores more than the honest invalid answer is a
loophole: usually a schema that accepts too much (no `required`, `additionalProperties` open), or a value
comparison that accepts another type or a list of guesses.

Not covered: `format` keywords (the reward leaves them unchecked), schemas with `$ref` cycles or `not` that
the instance builder does not try to satisfy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from grpokit.audit.tricks import AnswerForm, Trick, registrar

_MAX_DEPTH = 200  # past the reward's nesting bound (32) and any honest answer
_BIG_ARRAY = 20_000  # past the reward's node bound (10,000)
_PROSE = "The answer is a JSON object with the fields the question asks for, filled in."
_SAMPLES = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "null": None}


@dataclass
class JsonRow:
    row: dict
    schema: Any
    right: Any  # a valid instance (the row's answer or one built from the schema); None when there is none
    has_right: bool


def fence(value: Any) -> str:
    return f"```json\n{json.dumps(value, ensure_ascii=False)}\n```"


def _schema(row: dict) -> Any:
    schema = row.get("schema")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError:
            return None
    return schema if isinstance(schema, (dict, bool)) else None


def _valid(schema: Any, value: Any) -> bool:
    from jsonschema import validators

    try:
        return validators.validator_for(schema)(schema).is_valid(value)
    except Exception:  # noqa: BLE001 - a schema jsonschema cannot use: the reward raises on it; no honest answer here
        return False


def _instance(schema: Any, depth: int = 0) -> Any:
    """A small instance of `schema` (None when it cannot say)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], depth + 1)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties", {})
        return {k: _instance(props.get(k, {"type": "string"}), depth + 1) for k in schema.get("required", [])}
    if kind == "array":
        item = _instance(schema.get("items", {"type": "string"}), depth + 1)
        return [item] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", _SAMPLES[kind])
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    return _SAMPLES.get(kind)


def prepare_json_row(row: dict) -> JsonRow | None:
    schema = _schema(row)
    if schema is None:
        return None
    answer = row.get("answer")
    try:
        given = json.loads(answer) if isinstance(answer, str) else None
    except json.JSONDecodeError:
        given = None
    for candidate in (given, _instance(schema)):
        if candidate is not None and _valid(schema, candidate):
            return JsonRow(row, schema, candidate, True)
    return JsonRow(row, schema, None, False)


def _wrong_of(r: JsonRow) -> Any:
    s = r.schema if isinstance(r.schema, dict) else {}
    base = r.right if r.right is not None else _instance(s) or {}
    candidates = []
    if isinstance(base, dict):
        if s.get("required"):
            candidates.append({k: v for k, v in base.items() if k != s["required"][0]})
        for k, v in base.items():
            candidates.append({**base, k: [v] if not isinstance(v, list) else "x"})
    candidates += [["x"], "x", 12345]
    return next((c for c in candidates if not _valid(r.schema, c)), None)


def honest_answers(r: JsonRow) -> tuple[str | None, list[str]]:
    """(the valid instance or None, [an invalid one]; none when no candidate fails the schema), as completions."""
    wrong = _wrong_of(r)
    return (fence(r.right) if r.has_right else None), ([] if wrong is None else [fence(wrong)])


JSON_TRICKS: dict[str, Trick] = {}
json_trick = registrar(JSON_TRICKS, "json trick")


json_trick("empty", "an empty completion")(lambda r: "")
json_trick("prose_only", "a description of the answer, no JSON")(lambda r: _PROSE)
json_trick("empty_object", "`{}`: an object with nothing in it")(lambda r: fence({}))
json_trick("null", "`null`")(lambda r: fence(None))
json_trick("schema_echoed", "the row's schema itself, sent back as the answer")(lambda r: fence(r.schema))
json_trick("not_json", "JavaScript-style object with unquoted keys")(lambda r: "```json\n{answer: x, ok: true}\n```")
json_trick("truncated", "the valid instance cut in half")(
    lambda r: None if not r.has_right or len(json.dumps(r.right)) < 4 else
    "```json\n" + json.dumps(r.right)[: len(json.dumps(r.right)) // 2] + "\n```")
json_trick("valid_then_broken", "a valid block, then a broken last block")(
    lambda r: None if not r.has_right else fence(r.right) + "\nor, shorter:\n```json\n{\"\n```")
json_trick("deep_nesting", f"arrays nested {_MAX_DEPTH} deep")(lambda r: "```json\n" + "[" * _MAX_DEPTH + "]" * _MAX_DEPTH + "\n```")
json_trick("huge_array", f"an array of {_BIG_ARRAY} zeros")(lambda r: fence([0] * _BIG_ARRAY))
json_trick("values_as_strings", "the right object with every value written as a string (\"34\" for 34)")(
    lambda r: None if not r.has_right or not isinstance(r.right, dict) or all(isinstance(v, str) for v in r.right.values())
    else fence({k: v if isinstance(v, str) else json.dumps(v) for k, v in r.right.items()}))
json_trick("every_candidate", "each field a list of candidates: the right value and a wrong one")(
    lambda r: None if not r.has_right or not isinstance(r.right, dict) or not r.right
    else fence({k: [v, "x" if v != "x" else "y"] for k, v in r.right.items()}))
json_trick("duplicate_keys", "every key twice, a wrong value first and the right one last")(
    lambda r: None if not r.has_right or not isinstance(r.right, dict) or not r.right
    else "```json\n{" + ", ".join(f"{json.dumps(k)}: {json.dumps('x' if v != 'x' else 'y')}, {json.dumps(k)}: "
                                  f"{json.dumps(v)}" for k, v in r.right.items()) + "}\n```")


# The JSON form, as the task audit reads it (grpokit.audit.by_task.FORMS).
FORM = AnswerForm("schema tricks", "a `schema`", JSON_TRICKS, prepare_json_row, honest_answers)
