"""A generated extraction task: a short text in, a JSON object with typed fields out.

    grpokit data generate json train.jsonl --rows 1000 --seed 0
    grpokit data generate json eval.jsonl --rows 100 --seed 1 --exclude train.jsonl

Each row is one record of a kind (`KINDS`: a person, an order, a meeting, a review, the weather, a flight):
three fields of different JSON types (string, integer, number, boolean, an enum of weekdays), told in one of a
few sentence shapes. A row carries its own JSON Schema (`schema`: the record's fields, all required, nothing
else allowed), the gold object as JSON text (`answer`, which validates against the schema) and the question:
an instruction naming the fields and their types (rendered from the schema, so the two cannot disagree) and the
text. `json_schema` judges the schema, `json_fields` the values against the gold object.

The values sit in the text as they go into the JSON ("Lisbon", "34", "$4.50" -> 4.5, "would not recommend" ->
false), so the task is reading and typing, not knowledge: small enough for a 135M model to learn in minutes on
a CPU, yet the base model gets most objects wrong (types, key names, prose around the JSON).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Callable

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
          lambda v: f"Living in {v['city']}, {v['name']} turned {v['age']} this year.")),
    Kind("order", {"item": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"}},
         lambda r: {"item": r.choice(ITEMS), "quantity": r.randint(2, 40), "price": _price(r)},
         (lambda v: f"Please send {v['quantity']} packs of {v['item']} at {_dollars(v['price'])} per pack.",
          lambda v: f"Order: {v['item']}, {v['quantity']} packs, {_dollars(v['price'])} each.",
          lambda v: f"We need {v['item']} again: {v['quantity']} packs, still {_dollars(v['price'])} a pack.")),
    Kind("meeting", {"title": {"type": "string"}, "day": {"type": "string", "enum": list(DAYS)},
                     "hour": {"type": "integer"}},
         lambda r: {"title": r.choice(MEETINGS), "day": r.choice(DAYS), "hour": r.randint(8, 18)},
         (lambda v: f"The {v['title']} is on {v['day']} at {v['hour']}:00.",
          lambda v: f"Reminder: {v['title']} moved to {v['day']}, starting at {v['hour']}:00.",
          lambda v: f"On {v['day']} at {v['hour']}:00 we hold the {v['title']}.")),
    Kind("review", {"product": {"type": "string"}, "rating": {"type": "integer"}, "recommended": {"type": "boolean"}},
         lambda r: {"product": r.choice(PRODUCTS), "rating": r.randint(1, 5), "recommended": r.random() < 0.5},
         (lambda v: f"I gave the {v['product']} {v['rating']} out of 5 stars and I would "
                    f"{'' if v['recommended'] else 'not '}recommend it.",
          lambda v: f"{v['rating']}/5 for this {v['product']}. "
                    f"{'Recommended to friends.' if v['recommended'] else 'Not recommended.'}",
          lambda v: f"My rating for the {v['product']}: {v['rating']} stars. Would I recommend it? "
                    f"{'Yes.' if v['recommended'] else 'No.'}")),
    Kind("weather", {"city": {"type": "string"}, "temperature": {"type": "integer"}, "raining": {"type": "boolean"}},
         lambda r: {"city": r.choice(CITIES), "temperature": r.randint(-5, 35), "raining": r.random() < 0.5},
         (lambda v: f"In {v['city']} it is {v['temperature']} degrees and "
                    f"{'raining' if v['raining'] else 'dry'}.",
          lambda v: f"Weather update for {v['city']}: {v['temperature']} degrees, "
                    f"{'rain all day' if v['raining'] else 'no rain'}.",
          lambda v: f"{v['city']} today: {'rainy' if v['raining'] else 'sunny'}, {v['temperature']} degrees.")),
    Kind("flight", {"origin": {"type": "string"}, "destination": {"type": "string"}, "passengers": {"type": "integer"}},
         lambda r: dict(zip(("origin", "destination"), r.sample(CITIES, 2)), passengers=r.randint(1, 9)),
         (lambda v: f"Book a flight from {v['origin']} to {v['destination']} for {v['passengers']} passengers.",
          lambda v: f"{v['passengers']} passengers fly {v['origin']} to {v['destination']} next week.",
          lambda v: f"Flight request: {v['destination']}, leaving {v['origin']}, {v['passengers']} seats.")),
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
    return {"question": question_for(schema, k.sentences[shape](values)), "answer": json.dumps(gold),
            "schema": schema, "kind": kind, "shape": shape}


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
