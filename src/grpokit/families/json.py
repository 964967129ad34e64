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
import random
from dataclasses import dataclass
from typing import Any, Callable

from grpokit.errors import Problem
from grpokit.families.base import AnswerForm, Demo, Family, Generator, Trick, Variant, registrar

# ---------------------------------------------------------------- rows
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


def has_schema(obj: dict) -> bool:
    """A row json_schema can judge without a gold answer."""
    return obj.get("schema") not in (None, "")


# ---------------------------------------------------------------- the generated extraction task
NAMES = ("Maria", "Tom", "Aisha", "Kenji", "Lena", "Omar", "Sofia", "Daniel", "Priya", "Lucas", "Emma", "Yusuf",
         "Chloe", "Mateo", "Hana", "Noah", "Ines", "Felix", "Zara", "Ivan", "Nora", "Leo", "Amara", "Jonas")
CITIES = ("Lisbon", "Oslo", "Nairobi", "Lima", "Kyoto", "Dublin", "Cairo", "Denver", "Porto", "Seoul", "Vienna",
          "Quito", "Perth", "Madrid", "Hanoi", "Boston", "Accra", "Prague", "Austin", "Turin", "Bergen", "Malaga")
ITEMS = ("green tea", "printer paper", "olive oil", "coffee beans", "AA batteries", "blue pens", "rice",
         "dish soap", "tomato sauce", "notebooks", "light bulbs", "oat milk", "paper towels", "honey")
MEETINGS = ("budget review", "team standup", "design sync", "sales call", "planning session", "safety briefing",
            "code review", "board meeting", "hiring panel", "product demo")
PRODUCTS = ("desk lamp", "rice cooker", "travel mug", "phone case", "hiking boots", "office chair", "blender",
            "backpack", "keyboard", "water bottle", "umbrella", "headphones")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_TYPE_WORDS = {"string": "string", "integer": "integer", "number": "number", "boolean": "true or false"}


@dataclass(frozen=True)
class Kind:
    """A kind of record: its fields (key -> JSON Schema), how to draw values, the sentence shapes."""

    name: str
    fields: dict[str, dict]
    draw: Callable[[random.Random], dict]  # values for the fields, plus any words the sentences need
    sentences: tuple[Callable[[dict], str], ...]
    rewritten: tuple[Callable[[dict], str], ...] = ()  # shapes kept for evaluation only (`generate` never uses them)

    @property
    def shapes(self) -> tuple[Callable[[dict], str], ...]:
        """Every sentence shape: a row's `shape` indexes this (the training ones first)."""
        return self.sentences + self.rewritten

    def schema(self) -> dict:
        return {"type": "object", "properties": self.fields, "required": list(self.fields),
                "additionalProperties": False}


def _price(rng: random.Random) -> float:
    return rng.randrange(50, 2000, 25) / 100  # 0.50 .. 19.75 in quarters: written "$4.50", parsed 4.5


def _dollars(value: float) -> str:
    return f"${value:.2f}"


KINDS: tuple[Kind, ...] = (
    Kind("person", {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}},
         lambda r: {"name": r.choice(NAMES), "age": r.randint(18, 90), "city": r.choice(CITIES)},
         (lambda v: f"{v['name']} is {v['age']} years old and lives in {v['city']}.",
          lambda v: f"Meet {v['name']}, a {v['age']}-year-old from {v['city']}.",
          lambda v: f"Living in {v['city']}, {v['name']} turned {v['age']} this year."),
         (lambda v: f"Our new neighbour from {v['city']} is called {v['name']}; {v['name']} is {v['age']}.",)),
    Kind("order", {"item": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"}},
         lambda r: {"item": r.choice(ITEMS), "quantity": r.randint(2, 40), "price": _price(r)},
         (lambda v: f"Please send {v['quantity']} packs of {v['item']} at {_dollars(v['price'])} per pack.",
          lambda v: f"Order: {v['item']}, {v['quantity']} packs, {_dollars(v['price'])} each.",
          lambda v: f"We need {v['item']} again: {v['quantity']} packs, still {_dollars(v['price'])} a pack."),
         (lambda v: f"The invoice lists {v['item']}: {_dollars(v['price'])} per pack, {v['quantity']} packs in total.",)),
    Kind("meeting", {"title": {"type": "string"}, "day": {"type": "string", "enum": list(DAYS)},
                     "hour": {"type": "integer"}},
         lambda r: {"title": r.choice(MEETINGS), "day": r.choice(DAYS), "hour": r.randint(8, 18)},
         (lambda v: f"The {v['title']} is on {v['day']} at {v['hour']}:00.",
          lambda v: f"Reminder: {v['title']} moved to {v['day']}, starting at {v['hour']}:00.",
          lambda v: f"On {v['day']} at {v['hour']}:00 we hold the {v['title']}."),
         (lambda v: f"Put the {v['title']} in the calendar: {v['hour']}:00 sharp, {v['day']}.",)),
    Kind("review", {"product": {"type": "string"}, "rating": {"type": "integer"}, "recommended": {"type": "boolean"}},
         lambda r: {"product": r.choice(PRODUCTS), "rating": r.randint(1, 5), "recommended": r.random() < 0.5},
         (lambda v: f"I gave the {v['product']} {v['rating']} out of 5 stars and I would "
                    f"{'' if v['recommended'] else 'not '}recommend it.",
          lambda v: f"{v['rating']}/5 for this {v['product']}. "
                    f"{'Recommended to friends.' if v['recommended'] else 'Not recommended.'}",
          lambda v: f"My rating for the {v['product']}: {v['rating']} stars. Would I recommend it? "
                    f"{'Yes.' if v['recommended'] else 'No.'}"),
         (lambda v: f"Score given to the {v['product']}: {v['rating']} of 5. "
                    f"{'I would buy it again.' if v['recommended'] else 'I would not buy it again.'}",)),
    Kind("weather", {"city": {"type": "string"}, "temperature": {"type": "integer"}, "raining": {"type": "boolean"}},
         lambda r: {"city": r.choice(CITIES), "temperature": r.randint(-5, 35), "raining": r.random() < 0.5},
         (lambda v: f"In {v['city']} it is {v['temperature']} degrees and "
                    f"{'raining' if v['raining'] else 'dry'}.",
          lambda v: f"Weather update for {v['city']}: {v['temperature']} degrees, "
                    f"{'rain all day' if v['raining'] else 'no rain'}.",
          lambda v: f"{v['city']} today: {'rainy' if v['raining'] else 'sunny'}, {v['temperature']} degrees."),
         (lambda v: f"The forecast says {v['temperature']} degrees for {v['city']}, "
                    f"{'with showers' if v['raining'] else 'and not a drop of rain'}.",)),
    Kind("flight", {"origin": {"type": "string"}, "destination": {"type": "string"}, "passengers": {"type": "integer"}},
         lambda r: dict(zip(("origin", "destination"), r.sample(CITIES, 2)), passengers=r.randint(1, 9)),
         (lambda v: f"Book a flight from {v['origin']} to {v['destination']} for {v['passengers']} passengers.",
          lambda v: f"{v['passengers']} passengers fly {v['origin']} to {v['destination']} next week.",
          lambda v: f"Flight request: {v['destination']}, leaving {v['origin']}, {v['passengers']} seats."),
         (lambda v: f"Reserve {v['passengers']} tickets departing {v['origin']} and landing in {v['destination']}.",)),
)
KIND_NAMES = tuple(k.name for k in KINDS)


def field_list(schema: dict) -> str:
    """The fields of an object schema as the question names them: `"age" (integer)`, enums with their values."""
    parts = []
    for key, sub in schema.get("properties", {}).items():
        what = ("one of " + ", ".join(json.dumps(v) for v in sub["enum"])) if "enum" in sub else \
            _TYPE_WORDS.get(sub.get("type"), str(sub.get("type")))
        parts.append(f"{json.dumps(key)} ({what})")
    return ", ".join(parts)


def question_for(schema: dict, text: str) -> str:
    return f"Extract a JSON object with the fields {field_list(schema)} from this text:\n{text}"


def make_row(kind: str, shape: int, values: dict) -> dict:
    """A row of `kind` told with its sentence `shape` (an index), from the field values."""
    k = KINDS[KIND_NAMES.index(kind)]
    gold = {key: values[key] for key in k.fields}
    schema = k.schema()
    return {"question": question_for(schema, k.shapes[shape](values)), "answer": json.dumps(gold),
            "schema": schema, "kind": kind, "shape": shape}


def in_training_words(row: dict) -> bool:
    """An unedited generated row told in one of its kind's training sentence shapes (its question is exactly what
    its kind, shape and gold values produce)."""
    try:
        k = KINDS[KIND_NAMES.index(row["kind"])]
        shape, values = int(row["shape"]), json.loads(row["answer"])
        return 0 <= shape < len(k.sentences) and make_row(k.name, shape, values)["question"] == row.get("question")
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def rewrite_rows(rows: list[dict], seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """The same records (fields, values, schema, answer) told in a sentence shape kept for evaluation only
    (Kind.rewritten, seeded); other columns are kept. A rewritten question found in `exclude` is kept all the
    same: the values are the row's, and a training file made from these shapes is the user's choice."""
    bad = [i for i, r in enumerate(rows) if not in_training_words(r)]
    if bad:
        raise ValueError(f"{len(bad)} row(s) are not generated JSON rows in a training sentence shape (first: row "
                         f"{bad[0] + 1}); only rows whose question matches their kind/shape/answer can be rewritten")
    rng = random.Random(seed)
    out = []
    for r in rows:
        k = KINDS[KIND_NAMES.index(r["kind"])]
        shape = len(k.sentences) + rng.randrange(len(k.rewritten))
        out.append({**r, **make_row(k.name, shape, json.loads(r["answer"]))})
    return out


def generate(rows: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`rows` distinct rows, kinds and sentence shapes in turn; questions in `exclude` are never produced."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out, misses = [], 0
    while len(out) < rows:
        kind = KINDS[len(out) % len(KINDS)]
        shape = rng.randrange(len(kind.sentences))
        row = make_row(kind.name, shape, kind.draw(rng))
        if row["question"] in seen:
            misses += 1
            if misses > 100 * rows:  # every kind has thousands of records; this many repeats means none are left
                raise ValueError(f"could not draw {rows} distinct rows (exclude holds {len(exclude or ())})")
            continue
        seen.add(row["question"])
        out.append(row)
    return out


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


# ---------------------------------------------------------------- the row
FAMILY = Family(
    "json", "a JSON object judged by the row's schema and gold values (json_schema, json_fields)",
    check="every row needs a valid `schema`, and its gold answer must match it",
    row_problems=json_row_problems, without_answer=has_schema,
    make_data="`grpokit data generate json FILE` (generated extraction rows)",
    generators={"json": Generator(generate, "short texts -> JSON objects with typed fields, a schema per row")},
    audit=AnswerForm("schema tricks", "a `schema`", JSON_TRICKS, prepare_json_row, honest_answers),
    variants=(Variant("rewritten", "the same held-out records told in sentence shapes no training row uses (kept "
                      "for evaluation only; the same values and answers)", in_training_words, rewrite_rows),),
    demos={"json": Demo("json_extraction", "runs/demo-json", "GRPO on short texts -> JSON objects with typed fields "
                        "(recipes/smollm2-json-extraction.yaml)")},
)
