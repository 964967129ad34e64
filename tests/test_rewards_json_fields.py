"""json_fields: the share of the gold object's fields right, read as json_schema reads the JSON; bad gold answers."""
from __future__ import annotations

import json

import pytest

from grpokit.rewards.json_fields import check_fields
from grpokit.rewards.registry import build_reward

GOLD = json.dumps({"name": "Maria", "age": 34, "city": "Lisbon"})

# (id, completion, gold answer, expected reward, expected reason)
CASES = [
    ("all right, bare JSON", '{"name": "Maria", "age": 34, "city": "Lisbon"}', GOLD, 1.0, "all_right"),
    ("all right, fenced", 'Here:\n```json\n{"name": "Maria", "age": 34, "city": "Lisbon"}\n```', GOLD, 1.0,
     "all_right"),
    ("the last fenced block counts", '```json\n{"name": "Tom"}\n```\nfixed:\n```json\n'
     '{"name": "Maria", "age": 34, "city": "Lisbon"}\n```', GOLD, 1.0, "all_right"),
    ("key order does not matter", '{"city": "Lisbon", "age": 34, "name": "Maria"}', GOLD, 1.0, "all_right"),
    ("case and spaces of strings are folded", '{"name": " maria ", "age": 34, "city": "LISBON"}', GOLD, 1.0,
     "all_right"),
    ("34.0 is the number 34", '{"name": "Maria", "age": 34.0, "city": "Lisbon"}', GOLD, 1.0, "all_right"),
    ("an extra key earns and costs nothing here", '{"name": "Maria", "age": 34, "city": "Lisbon", "x": 1}', GOLD,
     1.0, "all_right"),
    ("after a closed think block", '<think>\n{"name": "x"}\n</think>\n{"name": "Maria", "age": 34, "city": "Lisbon"}',
     GOLD, 1.0, "all_right"),
    ("one field wrong", '{"name": "Maria", "age": 43, "city": "Lisbon"}', GOLD, 2 / 3, "some_wrong"),
    ("one field missing", '{"name": "Maria", "city": "Lisbon"}', GOLD, 2 / 3, "some_wrong"),
    ("a number as a string is the wrong type", '{"name": "Maria", "age": "34", "city": "Lisbon"}', GOLD, 2 / 3,
     "some_wrong"),
    ("every candidate in a list is no answer", '{"name": ["Maria", "Lisbon"], "age": [34, 90], "city": ["Lisbon"]}',
     GOLD, 0.0, "some_wrong"),
    ("true is not 1", '{"ok": 1}', json.dumps({"ok": True}), 0.0, "some_wrong"),
    ("1 is not true", '{"n": true}', json.dumps({"n": 1}), 0.0, "some_wrong"),
    ("false is right for false", '{"ok": false}', json.dumps({"ok": False}), 1.0, "all_right"),
    ("null is right for null only", '{"a": null, "b": null}', json.dumps({"a": None, "b": ""}), 0.5, "some_wrong"),
    ("4.50 is 4.5", '{"price": 4.50}', json.dumps({"price": 4.5}), 1.0, "all_right"),
    ("nested values compare element by element", '{"tags": ["A", "b"], "m": {"x": 1}}',
     json.dumps({"tags": ["a", "b"], "m": {"x": 1.0}}), 1.0, "all_right"),
    ("a nested object with another key is wrong", '{"m": {"x": 1, "y": 2}}', json.dumps({"m": {"x": 1}}), 0.0,
     "some_wrong"),
    ("an array is not an object", '[{"name": "Maria"}]', GOLD, 0.0, "not_an_object"),
    ("prose", "Maria is 34 and lives in Lisbon.", GOLD, 0.0, "not_json"),
    ("a key given twice, the right value last: no hedging", '{"name": "Tom", "name": "Maria", "age": 34, '
     '"city": "Lisbon"}', GOLD, 0.0, "duplicate_key"),
    ("JavaScript keys", '{name: "Maria", age: 34, city: "Lisbon"}', GOLD, 0.0, "not_json"),
    ("empty", "", GOLD, 0.0, "not_json"),
    ("the answer only in an open think", '<think>\n{"name": "Maria", "age": 34, "city": "Lisbon"}', GOLD, 0.0,
     "unclosed_think"),
    ("deeper than an answer", "[" * 100 + "]" * 100, GOLD, 0.0, "too_deep"),
    ("larger than an answer", '{"name": "' + "x" * 60_000 + '"}', GOLD, 0.0, "too_large"),
    ("a row without a gold answer: not applicable", '{"name": "Maria"}', None, None, "no_gold"),
    ("the gold given as an object", '{"name": "Maria", "age": 34, "city": "Lisbon"}', json.loads(GOLD), 1.0,
     "all_right"),
]


@pytest.mark.parametrize("completion, gold, reward, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_json_fields(completion, gold, reward, reason):
    got, why, _ = check_fields(completion, gold)
    assert why == reason
    assert got == (None if reward is None else pytest.approx(reward))
    fn = build_reward("json_fields")
    assert fn(completions=[completion], answer=[gold]) == [got]
    assert fn.errors == 0  # whatever the completion, a score, never a reward error


def test_case_sensitive_compares_strings_with_their_case():
    assert check_fields('{"name": "maria"}', '{"name": "Maria"}', case_sensitive=True)[:2] == (0.0, "some_wrong")
    assert check_fields('{"name": " Maria"}', '{"name": "Maria"}', case_sensitive=True)[:2] == (1.0, "all_right")
    with pytest.raises(ValueError, match="case_sensitive must be true or false"):
        build_reward("json_fields", {"case_sensitive": "yes"})


def test_explain_names_the_wrong_fields():
    fn = build_reward("json_fields")
    assert fn.scorer.explain('{"name": "Maria", "age": "34"}', answer=GOLD) == {
        "reward": pytest.approx(1 / 3), "reason": "some_wrong", "wrong_fields": ["age", "city"]}


RIGHT = '{"name": "Maria", "age": 34, "city": "Lisbon"}'
# (id, completion, expected with anywhere: reward, reason; the strict reading's reason): the fields alone, the form
# ignored; every refusal the strict reading makes of the object itself still holds
ANYWHERE = [
    ("a stray closing fence after a right object (the comparisons' SFT models)", RIGHT + "\n```", 1.0, "all_right",
     "not_json"),
    ("prose before and after it", f"Sure! Here is the object: {RIGHT} Hope this helps.", 1.0, "all_right",
     "not_json"),
    ("an object that does not parse, then a right one", '{name: "Tom"} and then ' + RIGHT, 1.0, "all_right",
     "not_json"),
    ("the first object counts, not the best", '{"name": "Tom"}\n' + RIGHT, 0.0, "some_wrong", "not_json"),
    ("inside a Python snippet", f"data = {RIGHT}\nprint(data)", 1.0, "all_right", "not_json"),
    ("a key given twice is still no answer", 'x {"name": "Tom", "name": "Maria", "age": 34, "city": "Lisbon"} ```',
     0.0, "duplicate_key", "not_json"),
    ("no object at all", "Maria is 34 and lives in Lisbon.", 0.0, "not_json", "not_json"),
    ("cut off mid-object", '{"name": "Maria", "age": 3', 0.0, "not_json", "not_json"),
    ("only in an open think", "<think>\n" + RIGHT, 0.0, "unclosed_think", "unclosed_think"),
    ("deeper than an answer", "x " + '{"a": ' * 40 + "1" + "}" * 40, 0.0, "too_deep", "not_json"),
    ("more braces than it tries before the object", "{" * 70 + RIGHT, 0.0, "not_json", "not_json"),
    ("larger than an answer", '{"name": "' + "x" * 60_000 + '"}', 0.0, "too_large", "too_large"),
]


@pytest.mark.parametrize("completion, reward, reason, strict", [c[1:] for c in ANYWHERE], ids=[c[0] for c in ANYWHERE])
def test_anywhere_reads_the_fields_without_the_form(completion, reward, reason, strict):
    assert check_fields(completion, GOLD, anywhere=True)[:2] == (pytest.approx(reward), reason)
    assert check_fields(completion, GOLD)[1] == strict  # the training reading keeps the form
    fn = build_reward("json_fields", {"anywhere": True})
    assert fn(completions=[completion], answer=[GOLD]) == [pytest.approx(reward)] and fn.errors == 0
    with pytest.raises(ValueError, match="anywhere must be true or false"):
        build_reward("json_fields", {"anywhere": "yes"})


@pytest.mark.parametrize("gold, words", [
    ("Maria, 34", "the row's answer is not JSON"),  # a gold written as prose
    ("[1, 2]", "must be a JSON object with at least one field"),  # a gold that is no object
    ("{}", "must be a JSON object with at least one field"),  # nothing to compare
])
def test_a_gold_answer_that_is_no_object_is_a_dataset_error(gold, words):
    with pytest.raises(ValueError, match=words):
        check_fields('{"name": "Maria"}', gold)
    fn = build_reward("json_fields")
    # counted, reported, scored null (not 0) for the row; a batch where every row raises fails loudly
    assert fn(completions=['{"a": 1}', '{"a": 1}'], answer=[gold, json.dumps({"a": 1})]) == [None, 1.0]
    assert fn.errors == 1
    with pytest.raises(RuntimeError, match=words):
        fn(completions=['{"a": 1}'], answer=[gold])


def test_rewards_score_reads_the_fields_anywhere_from_the_command_line(tmp_path, capsys):
    """`grpokit rewards score --reward json_fields --param anywhere=true`: what the retention sets score, per row."""
    from grpokit.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"completion": RIGHT + "\n```", "answer": GOLD}) + "\n")
    for params, expected in (([], (0.0, "not_json")), (["--param", "anywhere=true"], (1.0, "all_right"))):
        assert main(["rewards", "score", "--reward", "json_fields", *params, "--input", str(rows)]) == 0
        (out,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert (out["reward"], out["reason"]) == expected
