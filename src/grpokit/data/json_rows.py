"""Rows of a JSON task: what `json_schema` and `json_fields` need from a row, checked with the row's line.

A JSON task (a recipe scored by a reward that reads JSON, or `grpokit data check --task json`) needs on every
row a `schema` that json_schema can use (valid JSON Schema, every `$ref` inside it), and, where the row has a
gold answer (`answer`, what json_fields compares with), one that is JSON and validates against that schema: a
reference that breaks its own schema would teach json_fields a shape json_schema refuses. Each problem names the
row, what is wrong and the fix; the rewards would otherwise raise on every completion of such a row.
"""
from __future__ import annotations

import json

from grpokit.errors import Problem

_SCHEMA_EXAMPLE = ('"schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], '
                   '"additionalProperties": false}')


def json_row_problems(obj: dict, where: str, answer_key: str | None) -> list[Problem]:
    """The problems of one row of a JSON task (`answer_key`: the column holding its gold answer, if any)."""
    from grpokit.rewards.json_schema import check_json, schema_error

    schema = obj.get("schema")
    if schema in (None, ""):
        return [Problem(where, "no schema: every row of a JSON task needs `schema`, the JSON Schema its answer must "
                        "match (json_schema scores against it)", f"add e.g. {_SCHEMA_EXAMPLE}, or generate rows "
                        "with `grpokit data generate json FILE`")]
    error = schema_error(schema)
    if error:
        return [Problem(f"{where} schema", error.removeprefix("the row's schema ").split("; inline")[0],
                        "fix the schema: it must be a JSON Schema object that validates against its draft's "
                        "meta-schema (jsonschema's check_schema), with every $ref inside it ('#/$defs/NAME')")]
    gold = obj.get(answer_key) if answer_key else None
    if gold in (None, ""):
        return []
    text = gold if isinstance(gold, str) else json.dumps(gold)
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return [Problem(f"{where} {answer_key}", f"the gold answer is not JSON ({e.msg} at character {e.pos})",
                        "write the gold object as JSON text, e.g. \"{\\\"name\\\": \\\"Maria\\\", \\\"age\\\": 34}\"")]
    _, reason, errors = check_json(text, schema)
    if reason != "valid":
        what = "; ".join(errors) or reason
        return [Problem(f"{where} {answer_key}", f"the gold answer does not match the row's schema: {what}",
                        "correct the gold answer or the schema: a reference that breaks its own schema teaches "
                        "json_fields a shape json_schema refuses")]
    return []
