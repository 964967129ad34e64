"""The JSON family: a JSON object judged by the row's schema (`json_schema`) and its gold values (`json_fields`);
its rows, the generated extraction task and the audit's schema tricks.

    grpokit data check rows.jsonl --task json              # every row needs a usable schema
    grpokit data generate json train.jsonl --rows 1000 --seed 0
    grpokit data generate json eval.jsonl --rows 100 --seed 1 --exclude train.jsonl
    grpokit demo --task json

Rows. A JSON task (a recipe scored by a reward that reads JSON, or `grpokit data check --task json`) needs on every
row a `schema` that json_schema can use (valid JSON Schema, every `$ref` inside it), and, where the row has a
gold answer (`answer`, what json_fields compares with), one that is JSON and validates against that schema: a
reference that breaks its own schema would teach json_fields a shape json_schema refuses. Each problem names the
row, what is wrong and the fix; the rewards would otherwise raise on every completion of such a row. A row with a
schema needs no gold answer (json_schema judges validity alone).

The generated extraction task: a short text in, a JSON object with typed fields out. Each row is one record of a
kind (`KINDS`: a person, an order, a meeting, a review, the weather, a flight): three fields of different JSON
types (string, integer, number, boolean, an enum of weekdays), told in one of a few sentence shapes (each kind
keeps one more shape for evaluation only: the `rewritten` variant tells held-out records in it). A row
carries its own JSON Schema (`schema`: the record's fields, all required, nothing else allowed), the gold object
as JSON text (`answer`, which validates against the schema) and the question: an instruction naming the fields
and their types (rendered from the schema, so the two cannot disagree) and the text. The values sit in the text
as they go into the JSON ("Lisbon", "34", "$4.50" -> 4.5, "would not recommend" -> false), so the task is
reading and typing, not knowledge: small enough for a 135M model to learn in minutes on a CPU, yet the base model
gets most objects wrong (types, key names, prose around the JSON).

The audit. For a row scored by its schema, an honest valid instance, an honest invalid one, and the tricks that
try to pass validation without answering:

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

from grpokit.errors import Problem
from grpokit.families.base import AnswerForm, Demo, Family, Generator, Layout, Trick, Variant, registrar
from grpokit.families.json_records import MOST_ROWS, generate, in_training_words, rewrite_rows

# ---------------------------------------------------------------- rows
_SCHEMA_EXAMPLE = ('"schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], '
                   '"additionalProperties": false}')


def json_row_problems(obj: dict, where: str, answer_key: str | None) -> list[Problem]:
    """The problems of one row of a JSON task (`answer_key`: the column holding its gold answer, if any)."""
    from grpokit.rewards.json_schema import check_json, schema_error  # jsonschema: not for the --help table

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


def has_schema(obj: dict) -> bool:
    """A row json_schema can judge without a gold answer."""
    return obj.get("schema") not in (None, "")


def schema_problems(obj: dict, where: str) -> list[Problem]:
    """A row's JSON Schema (json_schema's column, checked on every row that has one whatever the task) as
    json_schema reads it: a $ref outside the schema (no network, no files), an invalid or too deeply nested one."""
    from grpokit.rewards import schema_problem  # jsonschema loads with it: not for `grpokit --help`'s table

    what = schema_problem(obj["schema"])
    if what is None:
        return []
    return [Problem(f"{where} schema", what.removeprefix("the row's schema ").split("; inline")[0],
                    "keep every referenced schema inside the row's schema (under $defs, $ref: '#/$defs/NAME'), "
                    "or fix it with a JSON Schema validator")]


def _row_kind(row: dict, answer: object) -> str | None:
    return "schema, no reference" if answer is None else None


# ---------------------------------------------------------------- the audit's tricks
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
    from jsonschema import validators  # heavy, and only the audit's prepared rows need it

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


# ---------------------------------------------------------------- what SFT teaches
def reference(row: dict, marker: str) -> str | None:
    """The gold object in a ```json fence for `grpokit sft` (what json_schema and json_fields read, and what the
    audit's honest answer is); None when the answer is not JSON (no answer line would help: the rewards read none)."""
    try:
        value = json.loads(row["answer"]) if isinstance(row.get("answer"), str) else row.get("answer")
    except json.JSONDecodeError:
        return None
    return None if value is None else fence(value)


# ---------------------------------------------------------------- the row
FAMILY = Family(
    "json", "a JSON object judged by the row's schema and gold values (json_schema, json_fields)",
    check="every row needs a valid `schema`, and its gold answer must match it",
    row_problems=json_row_problems, without_answer=has_schema,
    layout=Layout(has_schema, schema_problems, kind=_row_kind),
    make_data="`grpokit data generate json FILE` (generated extraction rows)",
    generators={"json": Generator(generate, "short texts -> JSON objects with typed fields, a schema per row",
                                  most=MOST_ROWS)},
    audit=AnswerForm("schema tricks", "a `schema`", JSON_TRICKS, prepare_json_row, honest_answers),
    variants=(Variant("rewritten", "the same held-out records told in sentence shapes no training row uses (kept "
                      "for evaluation only; the same values and answers)", in_training_words, rewrite_rows,
                      "generated JSON extraction rows in a training sentence shape (kind/shape/answer matching the "
                      "question)", "rewritten wording"),),
    demos={"json": Demo("json_extraction", "runs/demo-json", "GRPO on short texts -> JSON objects with typed fields "
                        "(recipes/smollm2-json-extraction.yaml)"),
           "sft-vs-grpo-json": Demo("sft_vs_grpo", "runs/sft-vs-grpo-json",
                                    "SFT on the gold objects, GRPO, SFT then GRPO and GRPO then SFT on the JSON task, "
                                    "each final model on held-out and rewritten texts",
                                    recipes=("smollm2-json-extraction-sft.yaml", "smollm2-json-extraction.yaml"))},
    reference=reference,
)
