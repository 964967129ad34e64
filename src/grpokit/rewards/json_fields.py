"""The `json_fields` reward: the share of the gold object's fields the completion's JSON gets right.

The completion's JSON is read exactly as `json_schema` reads it (`parse_answer`: the last fenced block after any
`<think>` block, or the whole answer, within the same size and depth bounds); the gold object is the row's
`answer`, as JSON text (`{"name": "Maria", "age": 34}`). The score is the share of the gold's keys whose value
the completion's object gives right: 2 of 3 fields right scores 0.667, a dense signal beside json_schema's
valid-or-not. Evaluation reports its mean as the task's **field accuracy** (`graded` in the reward table).

A value is right when it has the gold's JSON type and value: numbers compare as numbers (34 == 34.0, 4.5 ==
4.50), never as strings ("34" is wrong for 34) nor booleans (true is not 1); strings compare with their
whitespace collapsed and, unless `case_sensitive`, case folded ("lisbon" for "Lisbon"); arrays and objects
compare element by element with the same rules. Keys the gold does not have earn nothing and cost nothing
here: the row's schema (`additionalProperties: false`, json_schema) is what refuses them.

With `anywhere`, the object read is the first JSON object anywhere in the answer (json_answer.first_object):
prose before it or a stray fence after it no longer hides a right object, so the score is the fields alone. That
is what a comparison's retention set scores (grpokit.demo.sft_vs_grpo: whether a model kept the skill, not its
form); training keeps the strict reading, where the form is part of the task.

Scores 0.0 when the completion offers no JSON object (prose, an array, invalid JSON, an object naming a key twice,
an unclosed think); None
when the row has no gold answer (a JSON row may carry a schema alone: json_schema still judges it). A gold
answer that is not a JSON object is a dataset bug: the reward raises (counted and reported by the registry),
as json_schema does for an invalid schema; `grpokit data check --task json` reports it with its line first.

Run: `grpokit rewards score --reward json_fields --input rows.jsonl` (rows need `answer`).
"""
from __future__ import annotations

import json

from grpokit.rewards.json_answer import parse_answer
from grpokit.rewards.registry import describe


def gold_object(answer: object) -> dict | None:
    """A row's gold object from its `answer` (JSON text, or the object itself); None without one; ValueError when
    it is not a JSON object (a dataset bug)."""
    if answer is None or answer == "":
        return None
    value = answer
    if isinstance(answer, str):
        try:
            value = json.loads(answer)
        except json.JSONDecodeError as e:
            raise ValueError(f"the row's answer is not JSON ({e}): json_fields compares the completion with the "
                             "gold object written as JSON text, e.g. '{\"name\": \"Maria\", \"age\": 34}'") from None
    if not isinstance(value, dict) or not value:
        raise ValueError(f"the row's answer must be a JSON object with at least one field, got "
                         f"{json.dumps(value)[:60]}")
    return value


def same_value(got: object, gold: object, case_sensitive: bool = False) -> bool:
    """`got` is right for `gold`: same JSON type, same value (module docstring)."""
    if isinstance(gold, bool) or gold is None:
        return got is gold
    if isinstance(gold, (int, float)):
        return isinstance(got, (int, float)) and not isinstance(got, bool) and got == gold
    if isinstance(gold, str):
        if not isinstance(got, str):
            return False
        a, b = " ".join(got.split()), " ".join(gold.split())
        return a == b if case_sensitive else a.casefold() == b.casefold()
    if isinstance(gold, list):
        return isinstance(got, list) and len(got) == len(gold) and \
            all(same_value(x, y, case_sensitive) for x, y in zip(got, gold))
    if isinstance(gold, dict):
        return isinstance(got, dict) and got.keys() == gold.keys() and \
            all(same_value(got[k], v, case_sensitive) for k, v in gold.items())
    return False


def check_fields(completion: str, answer: object, case_sensitive: bool = False,
                 anywhere: bool = False) -> tuple[float | None, str, list[str]]:
    """(reward, reason, the gold keys got wrong). Reasons: all_right | some_wrong | not_an_object | no_gold, or the
    JSON reading's own (not_json, duplicate_key, unclosed_think, too_large, too_deep)."""
    gold = gold_object(answer)
    if gold is None:
        return None, "no_gold", []
    value, problem = parse_answer(completion, anywhere)
    if problem:
        return 0.0, problem, list(gold)
    if not isinstance(value, dict):
        return 0.0, "not_an_object", list(gold)
    wrong = [k for k, v in gold.items() if k not in value or not same_value(value[k], v, case_sensitive)]
    return (len(gold) - len(wrong)) / len(gold), ("some_wrong" if wrong else "all_right"), wrong


@describe(
    description="The share of the gold object's fields (the row's `answer`, JSON text) that the completion's JSON "
    "object (its last fenced block, as json_schema reads it) gets right, type included; 0.0 without a JSON object; "
    "null without a gold answer.",
    columns=("answer",),
    params={"case_sensitive": "compare string values with their case (default false: 'lisbon' is right for "
                              "'Lisbon'; whitespace is always collapsed)",
            "anywhere": "read the first JSON object anywhere in the answer, prose or a stray fence around it "
                        "ignored (default false: the last fenced block or the whole answer, as json_schema reads "
                        "it): the fields without the form, as a comparison's retention set scores them"},
)
def get_json_fields_reward(case_sensitive: bool = False, anywhere: bool = False):
    r"""The `json_fields` scorer: the share of the gold object's fields the completion's JSON gets right (graded;
    a value of the wrong type is wrong, a string compared without case unless `case_sensitive`), 0.0 for no JSON.

    Example:

    >>> from grpokit.rewards.json_fields import get_json_fields_reward
    >>> gold = '{"name": "Zara", "age": 26, "city": "Porto"}'
    >>> score = get_json_fields_reward()
    >>> score(['{"name": "Zara", "age": 26, "city": "Porto"}',
    ...        '```json\n{"name": "zara", "age": "26", "city": "Lisbon"}\n```', "Zara, 26, Porto"], answer=[gold] * 3)
    [1.0, 0.3333333333333333, 0.0]
    """
    for name, value in (("case_sensitive", case_sensitive), ("anywhere", anywhere)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")

    def score(completions: list[str], answer: list, **_columns) -> list[float | None]:
        return [check_fields(c, a, case_sensitive, anywhere)[0] for c, a in zip(completions, answer)]

    def explain(completion: str, answer: object = None, **_row) -> dict:
        reward, reason, wrong = check_fields(completion, answer, case_sensitive, anywhere)
        return {"reward": reward, "reason": reason, **({"wrong_fields": wrong} if wrong else {})}

    score.explain = explain
    return score
