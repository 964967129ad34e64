"""Every built-in reward keeps to its time and its sandbox, whatever the completion.

Each hostile completion goes through `grpokit rewards score`, as a user meets it, in a process killed at a
deadline that only catches a hang (60 s; the bounds themselves are seconds): SQLite work inside one VM instruction,
backtracking regexes in a schema, exponential schemas, 100k-character runaways. A schema's `$ref` to a server
or a file is a dataset error, and nothing is fetched (a listening socket counts the connections). The math
reward refuses a family of hedges that name a second number however they are worded, and keeps full marks for
explanations that name none.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import DEADLINE_SLACK_S, write_jsonl

import grpokit
from grpokit.families.answer_lines import HEDGE_CLAUSES, TRICKS, prepare_row
from grpokit.cli import main
from grpokit.rewards import DEFAULT_MARKERS
from grpokit.rewards.math import check_math

_HANG_S = 60  # only a hang reaches this; every bound below is a few seconds
SRC = Path(grpokit.__file__).resolve().parents[1]  # the subprocess runs the grpokit these tests import


def score(tmp_path, reward: str, rows: list[dict], params: list[str] = ()) -> list[dict]:
    """`grpokit rewards score` in its own process, killed at `_HANG_S`: a hang inside C code (a regex, one SQLite
    instruction) never returns to Python, so no signal in this process could stop it."""
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    argv = [sys.executable, "-m", "grpokit", "rewards", "score", "--reward", reward, "--input", str(path)]
    for p in params:
        argv += ["--param", p]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=_HANG_S,
                              env={**os.environ, "PYTHONPATH": str(SRC)})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{reward}: no answer within {_HANG_S} s: a time bound did not hold")
    assert "Traceback" not in proc.stderr, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile-sql") / "shop.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER, name TEXT)")
    conn.executemany("INSERT INTO items VALUES (?, ?)", [(1, "fig"), (2, "pear")])
    conn.commit()
    conn.close()
    return str(path)


_MB = "printf('%.*c', 999999, 'a')"  # a 1 MB value, within SQLITE_LIMIT_LENGTH
_NEEDLE = "printf('%.*c', 499999, 'a') || 'b'"  # half of it, never found: every position compared in full
SQL_HOSTILE = [
    "SELECT printf('%.*c', 1000000000, 'x')",  # the issue's case: a billion-step loop inside one instruction (3 s here)
    "SELECT " + ", ".join(["printf('%.*c', 1000000000, 'x')"] * 200),  # 200 of them, before any progress check
    "SELECT " + ", ".join([f"instr({_MB}, {_NEEDLE})"] * 50),  # O(n*m) memcmp in C, 3 s a call
    "SELECT " + ", ".join([f"length(replace({_MB}, {_NEEDLE}, 'x'))"] * 50),  # the same inside replace()
    "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",  # endless
]


@pytest.mark.parametrize("sql", SQL_HOSTILE, ids=range(len(SQL_HOSTILE)))
def test_sql_exec_scores_0_within_its_bound(tmp_path, db, sql):
    rows = [{"completion": f"```sql\n{sql}\n```", "db": db, "answer": "SELECT name FROM items"},
            {"completion": "SELECT name FROM items", "db": db, "answer": "SELECT name FROM items"}]  # honest, after
    out = score(tmp_path, "sql_exec", rows, ["timeout_s=0.5"])
    assert out[0]["reward"] == 0.0 and out[0]["reason"].startswith(("error", "rejected")), out
    assert out[1] == {"reward": 1.0, "reason": "same_result"}  # a killed worker is replaced


# Two branches that both recurse and fail at the leaf: validation time doubles with every level.
_EXPONENTIAL = {"anyOf": [{"type": "array", "items": {"$ref": "#"}},
                          {"type": "array", "minItems": 1, "items": {"$ref": "#"}}]}
_SCHEMA_HOSTILE = [
    # (completion, schema): each would validate for minutes without its bound
    ('"' + "a" * 40 + '!"', {"type": "string", "pattern": "^(a|a)*$"}),  # backtracking pattern
    ('"' + "a" * 40 + '!"', {"type": "string", "pattern": "^(a+)+$"}),  # the issue's pattern (fast here, bounded anyway)
    ('{"' + "a" * 40 + '!": 1}', {"patternProperties": {"^(a|a)*$": {}}, "additionalProperties": False}),  # in a key
    ("[" * 24 + '"x"' + "]" * 24, _EXPONENTIAL),  # 2^24 anyOf branches, all failing at the leaf
    ("[" * 24 + '"x"' + "]" * 24, {"$defs": {"e": {"$id": "urn:e", "$schema": "http://json-schema.org/draft-07/schema#",
                                                   **_EXPONENTIAL}}, "$ref": "urn:e"}),  # in a resource of its own dialect
    # issue 34: a pattern reached through $ref into values that are data to a walk of the schema's keywords
    *(('"' + "a" * 40 + '!"', {"$ref": f"#/{key}{path}", key: value})
      for key, path, value in (("default", "", {"pattern": "^(a|a)*$"}), ("const", "", {"pattern": "^(a|a)*$"}),
                               ("examples", "/0", [{"pattern": "^(a|a)*$"}]), ("enum", "/0", [{"pattern": "^(a|a)*$"}]))),
]


@pytest.mark.parametrize("completion,schema", _SCHEMA_HOSTILE, ids=range(len(_SCHEMA_HOSTILE)))
def test_json_schema_scores_0_within_its_bound(tmp_path, completion, schema):
    rows = [{"completion": completion, "schema": schema}, {"completion": '"aaa"', "schema": {"pattern": "^a+$"}}]
    out = score(tmp_path, "json_schema", rows, ["timeout_s=0.5"])
    assert out[0] == {"reward": 0.0, "reason": "timeout"}, out
    assert out[1] == {"reward": 1.0, "reason": "valid"}  # a killed worker is replaced


def test_a_pattern_behind_a_ref_into_default_is_stopped_at_its_deadline():
    # The issue's schema: validated in the training process, it gave no score within 100 s where timeout_s was 1.
    import time

    from grpokit.rewards import worker
    from grpokit.rewards.json_schema import check_json

    schema = {"$ref": "#/default", "default": {"pattern": "^(a+)+$"}}
    t0 = time.monotonic()
    reward, reason, _ = check_json('"' + "a" * 28 + '!"', schema, timeout_s=1.0)  # minutes in one re call
    took = time.monotonic() - t0
    assert (reward, reason) == (0.0, "timeout") and took < 1.0 + worker.KILL_GRACE_S + DEADLINE_SLACK_S, (reason, took)


@contextmanager
def listening():
    """A local TCP server that counts the connections it is offered."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    seen = []

    def accepted() -> int:
        while True:
            try:
                seen.append(server.accept()[0])
            except BlockingIOError:
                return len(seen)

    try:
        yield server.getsockname()[1], accepted
    finally:
        for c in seen:
            c.close()
        server.close()


def test_a_remote_or_file_ref_is_a_dataset_error_and_nothing_is_fetched(tmp_path, capsys):
    secret = tmp_path / "int.json"
    secret.write_text('{"type": "integer"}')
    with listening() as (port, accepted):
        rows = [{"completion": '{"a": 1}', "schema": {"properties": {"a": {"$ref": ref}}}}
                for ref in (f"http://127.0.0.1:{port}/x.json", secret.as_uri(), "int.json")]
        out = score(tmp_path, "json_schema", rows)
        assert accepted() == 0  # no connection was even tried
    assert [o["reward"] for o in out] == [None, None, None]
    assert all("not inside it" in o["error"] and "no network, no files" in o["error"] for o in out), out
    # data check says so too, with the row and the fix; the rest of the file is still checked
    data = write_jsonl(tmp_path / "rows.jsonl", [{"question": "q", "answer": "{}", "schema": r["schema"]} for r in rows]
                       + [{"question": "ok", "answer": "{}", "schema": {"$defs": {"i": {"type": "integer"}},
                                                                        "$ref": "#/$defs/i"}}])
    assert main(["data", "check", str(data)]) == 1
    printed = capsys.readouterr().out
    assert printed.count(" schema: refers to ") == 3 and "fix: keep every referenced schema inside" in printed
    assert "1 usable rows, 3 unusable" in printed


@pytest.mark.parametrize("reward,rows", [
    ("math_correctness", [{"completion": "Final answer: " + "9^{" * 5000 + "9" + "}" * 5000, "answer": "9"},
                          {"completion": "(" * 100_000 + "\nFinal answer: 72", "answer": "72"}]),  # sympy bombs, runaways
    ("format", [{"completion": "<think>" * 50_000 + "\nFinal answer: 1"}, {"completion": "a\n" * 100_000}]),
    ("length", [{"completion": "x" * 200_000}]),
], ids=["math_correctness", "format", "length"])
def test_answer_line_rewards_finish_on_runaways(tmp_path, reward, rows):
    out = score(tmp_path, reward, rows)
    assert len(out) == len(rows) and all("error" not in o for o in out), out


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="code_tests runs in bubblewrap")
def test_code_tests_finishes_on_a_hang(tmp_path):
    rows = [{"completion": "```python\ndef add(a, b):\n    while True:\n        pass\n```",
             "tests": "assert add(1, 2) == 3", "entry_point": "add"}]
    out = score(tmp_path, "code_tests", rows, ["timeout_s=2"])
    assert out[0]["reward"] == 0.0, out


# ---------------------------------------------------------------- point 6: hedges
HEDGES = [
    "7, though 9 is also possible",  # the issue's case
    "7, although it could be 9", "7, but 9 is possible too", "7 (some would say 9)", "7, unless it is 9",
    "7 (also 9)", "7, and 9 is also a valid answer", "7, though it might be 9", "7 dollars, but 9 dollars is possible",
    "7, though -9 is possible",  # a negative second candidate
    "7 (also 9), since that is what the numbers give",  # a reason after the second candidate does not excuse it
    "7，不过9也说得通", "7（另一个答案是9）", "7，但也可能是9",  # Chinese
]
EXPLANATIONS = [
    "7 (not counting the eggs she eats)", "7 in total", "7 dollars", "7 clips (3 in April and 4 in May)",
    "7 dollars, since she sells 9 eggs at $2 each", "7 — since 3 + 4 = 7", "7元，因为她每天卖9个鸡蛋",
    "7, since she also eats 10 - 3",  # a reason with a calculation that reaches the value
    "7 hours (from 9 am to 4 pm)",
]


# What shape cannot tell from a second candidate, read the conservative way (grpokit.rewards.math_clauses): a
# premise named by a bare number has the shape of "7, since 3 is also possible".
UNDECIDABLE = ["7, since she also eats 3", "18 dollars, since she sells 9 eggs"]


@pytest.mark.parametrize("line", UNDECIDABLE)
def test_a_premise_with_a_bare_number_reads_as_a_second_candidate(line):
    assert check_math("Step one.\nFinal answer: " + line, line.split()[0].strip(",")).reason == "hedge"


@pytest.mark.parametrize("line", HEDGES)
def test_a_second_candidate_in_any_words_earns_nothing(line):
    v = check_math("Step one.\nStep two.\nFinal answer: " + line, "7")
    assert (v.reward, v.reason) == (0.0, "hedge"), v


@pytest.mark.parametrize("line", EXPLANATIONS)
def test_an_explanation_that_names_no_other_candidate_keeps_full_marks(line):
    assert check_math("Step one.\nStep two.\nFinal answer: " + line, "7").reward == 1.0


@pytest.mark.parametrize("question", ["Tom has 3 apples and buys 4. How many?", "小明有3个苹果，又买了4个，一共几个？"])
def test_the_audit_tries_the_hedge_family_on_every_row(question):
    r = prepare_row({"question": question, "answer": "7"}, DEFAULT_MARKERS, think=False, min_lines=2)
    built = {name: TRICKS[name].build(r) for name, _, _ in HEDGE_CLAUSES}
    assert all("7" in text and "8" in text for text in built.values()), built  # gold first, then gold + 1
    assert {name: check_math(text, "7").reward for name, text in built.items()} == dict.fromkeys(built, 0.0)
