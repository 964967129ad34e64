"""The generated JSON extraction task: records of a few kinds told in short texts, a row per record with its own
schema and gold object (`grpokit data generate json`), and the sentence shapes kept for evaluation only (the
family's `rewritten` variant). The family's row (checks, audit, demos) is grpokit.families.json.
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
    rewritten: tuple[Callable[[dict], str], ...] = ()  # shapes kept for evaluation only (`generate` never uses them)
    values: int = 0  # how many distinct records `draw` gives (the product of its fields' choices)

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
         (lambda v: f"Our new neighbour from {v['city']} is called {v['name']}; {v['name']} is {v['age']}.",),
         len(NAMES) * 73 * len(CITIES)),
    Kind("order", {"item": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"}},
         lambda r: {"item": r.choice(ITEMS), "quantity": r.randint(2, 40), "price": _price(r)},
         (lambda v: f"Please send {v['quantity']} packs of {v['item']} at {_dollars(v['price'])} per pack.",
          lambda v: f"Order: {v['item']}, {v['quantity']} packs, {_dollars(v['price'])} each.",
          lambda v: f"We need {v['item']} again: {v['quantity']} packs, still {_dollars(v['price'])} a pack."),
         (lambda v: f"The invoice lists {v['item']}: {_dollars(v['price'])} per pack, {v['quantity']} packs in total.",),
         len(ITEMS) * 39 * len(range(50, 2000, 25))),
    Kind("meeting", {"title": {"type": "string"}, "day": {"type": "string", "enum": list(DAYS)},
                     "hour": {"type": "integer"}},
         lambda r: {"title": r.choice(MEETINGS), "day": r.choice(DAYS), "hour": r.randint(8, 18)},
         (lambda v: f"The {v['title']} is on {v['day']} at {v['hour']}:00.",
          lambda v: f"Reminder: {v['title']} moved to {v['day']}, starting at {v['hour']}:00.",
          lambda v: f"On {v['day']} at {v['hour']}:00 we hold the {v['title']}."),
         (lambda v: f"Put the {v['title']} in the calendar: {v['hour']}:00 sharp, {v['day']}.",),
         len(MEETINGS) * len(DAYS) * 11),
    Kind("review", {"product": {"type": "string"}, "rating": {"type": "integer"}, "recommended": {"type": "boolean"}},
         lambda r: {"product": r.choice(PRODUCTS), "rating": r.randint(1, 5), "recommended": r.random() < 0.5},
         (lambda v: f"I gave the {v['product']} {v['rating']} out of 5 stars and I would "
                    f"{'' if v['recommended'] else 'not '}recommend it.",
          lambda v: f"{v['rating']}/5 for this {v['product']}. "
                    f"{'Recommended to friends.' if v['recommended'] else 'Not recommended.'}",
          lambda v: f"My rating for the {v['product']}: {v['rating']} stars. Would I recommend it? "
                    f"{'Yes.' if v['recommended'] else 'No.'}"),
         (lambda v: f"Score given to the {v['product']}: {v['rating']} of 5. "
                    f"{'I would buy it again.' if v['recommended'] else 'I would not buy it again.'}",),
         len(PRODUCTS) * 5 * 2),
    Kind("weather", {"city": {"type": "string"}, "temperature": {"type": "integer"}, "raining": {"type": "boolean"}},
         lambda r: {"city": r.choice(CITIES), "temperature": r.randint(-5, 35), "raining": r.random() < 0.5},
         (lambda v: f"In {v['city']} it is {v['temperature']} degrees and "
                    f"{'raining' if v['raining'] else 'dry'}.",
          lambda v: f"Weather update for {v['city']}: {v['temperature']} degrees, "
                    f"{'rain all day' if v['raining'] else 'no rain'}.",
          lambda v: f"{v['city']} today: {'rainy' if v['raining'] else 'sunny'}, {v['temperature']} degrees."),
         (lambda v: f"The forecast says {v['temperature']} degrees for {v['city']}, "
                    f"{'with showers' if v['raining'] else 'and not a drop of rain'}.",),
         len(CITIES) * 41 * 2),
    Kind("flight", {"origin": {"type": "string"}, "destination": {"type": "string"}, "passengers": {"type": "integer"}},
         lambda r: dict(zip(("origin", "destination"), r.sample(CITIES, 2)), passengers=r.randint(1, 9)),
         (lambda v: f"Book a flight from {v['origin']} to {v['destination']} for {v['passengers']} passengers.",
          lambda v: f"{v['passengers']} passengers fly {v['origin']} to {v['destination']} next week.",
          lambda v: f"Flight request: {v['destination']}, leaving {v['origin']}, {v['passengers']} seats."),
         (lambda v: f"Reserve {v['passengers']} tickets departing {v['origin']} and landing in {v['destination']}.",),
         len(CITIES) * (len(CITIES) - 1) * 9),
)
KIND_NAMES = tuple(k.name for k in KINDS)
# Distinct rows `generate` can make: it takes the kinds in turn, so the kind with the fewest records and training
# sentence shapes bounds every kind's share.
MOST_ROWS = len(KINDS) * min(k.values * len(k.sentences) for k in KINDS)


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
            if misses > 100 * rows:  # this many repeats: the rows `exclude` leaves are (nearly) all drawn
                raise ValueError(f"could not draw {rows:,} distinct rows besides the {len(exclude or ()):,} "
                                 f"excluded (at most {MOST_ROWS:,} exist)")
            continue
        seen.add(row["question"])
        out.append(row)
    return out
