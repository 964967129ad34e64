"""json_schema: parsing, fenced blocks, validation, partial credit, bad schemas."""
from __future__ import annotations

import json

import pytest

from grpokit.rewards import build_reward
from grpokit.rewards.json_schema import check_json

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}

# (completion, schema, partial_credit, expected reward, expected reason)
CASES = [
    ('{"name": "Ann", "age": 3}', SCHEMA, 0.0, 1.0, "valid"),  # bare JSON
    ('{"name": "小明", "age": 9}', SCHEMA, 0.0, 1.0, "valid"),  # Chinese values
    ('Here it is:\n```json\n{"name": "Ann", "age": 3}\n```', SCHEMA, 0.0, 1.0, "valid"),  # fenced block
    ('```\n{"name": "A", "age": 1}\n```\nfixed:\n```json\n{"name": "B", "age": 2}\n```', SCHEMA, 0.0, 1.0, "valid"),  # last block
    ('<think>\n{"draft": 1}\n</think>\n{"name": "Ann", "age": 3}', SCHEMA, 0.0, 1.0, "valid"),  # after think
    ('{"name": "Ann", "age": 3}', json.dumps(SCHEMA), 0.0, 1.0, "valid"),  # schema stored as JSON text
    ('{"name": "Ann"}', SCHEMA, 0.0, 0.0, "schema_mismatch"),  # missing field
    ('{"name": "Ann", "age": -1}', SCHEMA, 0.0, 0.0, "schema_mismatch"),  # out of range
    ('{"name": "Ann", "age": 3, "x": 1}', SCHEMA, 0.0, 0.0, "schema_mismatch"),  # extra field
    ('{"name": "Ann"}', SCHEMA, 0.3, 0.3, "schema_mismatch"),  # partial credit when configured
    ('{"name": "Ann", age: 3}', SCHEMA, 0.3, 0.0, "not_json"),  # not JSON: no partial credit
    ("", SCHEMA, 0.0, 0.0, "not_json"),  # empty
    ("我不知道", SCHEMA, 0.0, 0.0, "not_json"),  # refusal
    ('<think>\n{"name": "Ann", "age": 3}', SCHEMA, 0.0, 0.0, "unclosed_think"),  # answer only in an open think
    ("[" * 100_000 + "]" * 100_000, SCHEMA, 0.0, 0.0, "not_json"),  # nesting too deep for the parser
    ('{"name": "Ann", "age": 3}', None, 0.0, None, "no_schema"),  # row without a schema: not applicable
]


@pytest.mark.parametrize("completion,schema,partial,reward,reason", CASES, ids=[str(i) for i in range(len(CASES))])
def test_json_schema(completion, schema, partial, reward, reason):
    assert check_json(completion, schema, partial)[:2] == (reward, reason)
    fn = build_reward("json_schema", {"partial_credit": partial})
    assert fn(completions=[completion], schema=[schema]) == [reward]


@pytest.mark.parametrize(
    "schema,message",
    [
        ({"type": "no-such-type"}, "not a valid JSON Schema"),  # invalid schema: a dataset bug, raised
        ("{not json", "not valid JSON"),  # unparseable schema text
        ([1, 2], "must be a JSON object"),  # wrong type
    ],
)
def test_bad_schema_raises(schema, message):
    with pytest.raises(ValueError, match=message):
        check_json("{}", schema)


def test_partial_credit_range_checked():
    with pytest.raises(ValueError, match="partial_credit"):
        build_reward("json_schema", {"partial_credit": 2})
