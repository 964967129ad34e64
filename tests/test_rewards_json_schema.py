"""json_schema: parsing, fenced blocks, validation, partial credit, bad schemas."""
from __future__ import annotations

import json
import time

import pytest
from conftest import DEADLINE_SLACK_S

from grpokit.rewards.json_schema import check_json
from grpokit.rewards.registry import build_reward

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}

SELF = {"type": "array", "items": {"$ref": "#"}}  # arrays of arrays of ..., to any depth
UNIQUE = {"type": "array", "uniqueItems": True, "items": {"type": "object", "required": ["id"]}}
# Two branches that both recurse and fail at the leaf: validation time doubles with every level.
EXPONENTIAL = {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "minItems": 1, "items": {"$ref": "#"}}]}
_FAST_S = 0.2  # the deadline used by the table: each case, adversarial ones included, must end about then

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
    # a key given twice: parsers disagree on which value counts (Python keeps the last), so none is read; the
    # JSON demo's trained model wrote `{"day": 1, "hour": 11, "day": "Sunday"}`
    ('{"name": "Ann", "age": 3, "age": 4}', SCHEMA, 0.3, 0.0, "duplicate_key"),
    ('{"name": "Ann", "age": 3, "x": {"a": 1, "a": 1}}', {"type": "object"}, 0.0, 0.0, "duplicate_key"),  # nested
    ('[{"a": 1}, {"a": 2}]', {"type": "array"}, 0.0, 1.0, "valid"),  # one key in two objects is no duplicate
    ("", SCHEMA, 0.0, 0.0, "not_json"),  # empty
    ("我不知道", SCHEMA, 0.0, 0.0, "not_json"),  # refusal
    ('<think>\n{"name": "Ann", "age": 3}', SCHEMA, 0.0, 0.0, "unclosed_think"),  # answer only in an open think
    ('{"name": "Ann", "age": 3}', None, 0.0, None, "no_schema"),  # row without a schema: not applicable
    ('{"name": "Ann", "age": 3}', {**SCHEMA, "$schema": "http://json-schema.org/draft-07/schema#"}, 0.0, 1.0, "valid"),  # draft 7
    ('{"name": "Ann", "age": 3.5}', {**SCHEMA, "$schema": "http://json-schema.org/draft-04/schema#"}, 0.0, 0.0,
     "schema_mismatch"),  # draft 4
    # --- adversarial output: bounded, scored 0 (never a reward error), and fast
    ("[" * 100_000 + "]" * 100_000, SCHEMA, 0.0, 0.0, "too_large"),  # longer than any answer: not even parsed
    ("[" * 20_000 + "]" * 20_000, SCHEMA, 0.0, 0.0, "too_deep"),  # deeper than Python's JSON parser goes
    ("[" * 900 + "]" * 900, SELF, 0.0, 0.0, "too_deep"),  # 900 levels through a self-referencing schema
    ('{"a":' * 900 + "1" + "}" * 900, {"type": "object"}, 0.0, 0.0, "too_deep"),  # deep objects, shallow schema
    ("[" * 32 + "]" * 32, SELF, 0.0, 1.0, "valid"),  # ... the depth bound itself still validates
    (json.dumps([{"id": i} for i in range(20_000)]), UNIQUE, 0.0, 0.0, "too_large"),  # the 20k-object uniqueItems array
    ("[" + ",".join(["0"] * 20_000) + "]", UNIQUE, 0.0, 0.0, "too_large"),  # 20k values in fewer characters
    (json.dumps([{"id": i} for i in range(3000)]), UNIQUE, 0.3, 1.0, "valid"),  # 3000 distinct objects: linear check
    (json.dumps([{"id": i % 7} for i in range(3000)]), UNIQUE, 0.3, 0.3, "schema_mismatch"),  # ... with repeats
    ("[" * 24 + '"x"' + "]" * 24, EXPONENTIAL, 0.0, 0.0, "timeout"),  # 2^24 anyOf branches: the deadline stops it
    ("[" * 24 + '"x"' + "]" * 24, {**EXPONENTIAL, "$schema": "http://json-schema.org/draft-07/schema#"}, 0.0, 0.0,
     "timeout"),  # ... also when "$schema" names the draft (jsonschema re-picks the class at "#")
    ("[" * 24 + '"x"' + "]" * 24, {**EXPONENTIAL, "$schema": "https://json-schema.org/draft/2020-12/schema"}, 0.0, 0.0,
     "timeout"),  # ... the current draft named explicitly
    ("[[[]]]", {**EXPONENTIAL, "$schema": "http://json-schema.org/draft-07/schema#"}, 0.0, 1.0, "valid"),  # shallow: fine
    ("1" * 10_000, SCHEMA, 0.0, 0.0, "not_json"),  # an integer longer than Python converts
]


@pytest.mark.parametrize("completion,schema,partial,reward,reason", CASES, ids=[str(i) for i in range(len(CASES))])
def test_json_schema(completion, schema, partial, reward, reason):
    start = time.perf_counter()
    assert check_json(completion, schema, partial, timeout_s=_FAST_S)[:2] == (reward, reason)
    # The deadline stops the 2^24-branch cases (minutes without it); how fast it stops them is benchmarks/deadlines.py's
    assert time.perf_counter() - start < _FAST_S + DEADLINE_SLACK_S
    fn = build_reward("json_schema", {"partial_credit": partial, "timeout_s": _FAST_S})
    assert fn(completions=[completion], schema=[schema]) == [reward]
    assert fn.errors == 0  # adversarial output is a score, not a reward error


@pytest.mark.parametrize(
    "array",
    [
        [1, 1.0],  # equal numbers of two types: not unique
        [1, True],  # true is not 1 in JSON Schema
        [0, False],  # nor false 0
        [{"a": [1, {"b": 2}]}, {"a": [1, {"b": 2.0}]}],  # equal nested content
        [{"a": 1, "b": 2}, {"b": 2, "a": 1}],  # key order does not matter
        [[1, 2], [2, 1]],  # array order does
        [None, "null", 0, "", [], {}],  # no two alike
        [{"a": True}, {"a": 1}],  # bool vs number, nested
    ],
)
def test_unique_items_agrees_with_jsonschema(array):
    # Our linear uniqueItems must give jsonschema's verdict (its pairwise check, fine on small arrays).
    from jsonschema import Draft202012Validator

    expected = Draft202012Validator({"uniqueItems": True}).is_valid(array)
    assert check_json(json.dumps(array), {"uniqueItems": True})[1] == ("valid" if expected else "schema_mismatch")


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


@pytest.mark.parametrize("timeout_s", [0, -1, float("inf")])
def test_timeout_checked(timeout_s):
    with pytest.raises(ValueError, match="timeout_s"):
        build_reward("json_schema", {"timeout_s": timeout_s})


def test_schema_too_deep_to_check_is_a_dataset_error():
    # A 900-level schema comes from the dataset, not the model: reported (raised), not a RecursionError.
    deep = json.loads('{"items": ' * 900 + "{}" + "}" * 900)
    with pytest.raises(ValueError, match="nested too deeply"):
        check_json("[]", deep)
