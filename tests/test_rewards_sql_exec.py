"""sql_exec: read-only execution, result-set comparison, writes and errors score 0."""
from __future__ import annotations

import sqlite3
import time

import pytest
from conftest import DEADLINE_SLACK_S

from grpokit.rewards.registry import build_reward
from grpokit.rewards.sql_exec import check_sql


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("sql") / "shop.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE items (id INTEGER, name TEXT, price REAL)")
    conn.executemany("INSERT INTO items VALUES (?, ?, ?)", [(1, "苹果", 1.5), (2, "pear", 2.25), (3, "fig", 3.0)])
    conn.commit()
    conn.close()
    return str(path)


GOLD = "SELECT name FROM items WHERE price > 2"
BIG = "RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 1000000)"  # a million rows from nothing
_FAST_S = 0.25  # the time limit the table runs under: every case, pathological ones included, ends about then
ORDERED = "SELECT name FROM items ORDER BY price DESC"

# (completion, gold, expected reward, reason fragment)
CASES = [
    ("SELECT name FROM items WHERE price >= 2.25", GOLD, 1.0, "same_result"),  # different query, same rows
    ("```sql\nSELECT name FROM items WHERE id IN (3, 2);\n```", GOLD, 1.0, "same_result"),  # fenced, other order
    ("<think>\nSELECT 1\n</think>\nSELECT name FROM items WHERE price > 2", GOLD, 1.0, "same_result"),  # after think
    ("SELECT name FROM items", GOLD, 0.0, "different_result"),  # too many rows
    ("SELECT name, price FROM items WHERE price > 2", GOLD, 0.0, "different_result"),  # extra column
    ("SELECT name FROM items ORDER BY price DESC", ORDERED, 1.0, "same_result"),  # ORDER BY respected
    ("SELECT name FROM items ORDER BY price ASC", ORDERED, 0.0, "different_result"),  # wrong order
    ("SELECT sum(price) FROM items", "SELECT 6.75", 1.0, "same_result"),  # float sums compared rounded
    ("DELETE FROM items", GOLD, 0.0, "not authorized"),  # a write
    ("DROP TABLE items", GOLD, 0.0, "not authorized"),  # DDL
    ("SELECT name FROM items WHERE price > 2; DELETE FROM items", GOLD, 0.0, "one statement"),  # piggy-backed write
    ("ATTACH DATABASE 'other.db' AS o", GOLD, 0.0, "not authorized"),  # would create a file
    ("PRAGMA writable_schema = 1", GOLD, 0.0, "not authorized"),  # pragma
    ("SELECT zeroblob(1000000000)", GOLD, 0.0, "not authorized"),  # memory bomb
    # --- pathological queries: bounded, fast, scored 0 (never a reward error)
    ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r", GOLD, 0.0, "interrupted"),  # endless
    ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r", GOLD, 0.0, "more than"),  # endless rows
    (f"WITH {BIG} SELECT count(*) FROM r a, r b, r c", GOLD, 0.0, "interrupted"),  # a 10^18-row cross join
    (f"WITH {BIG} SELECT a.i FROM r a, r b ORDER BY random() LIMIT 1", GOLD, 0.0, "interrupted"),  # ... sorted
    ("SELECT count(*) FROM items a, items b, items c, items d, items e, items f, items g, items h, items i, items j, "
     "items k, items l, items m, items n, items o, items p, items q, items r, items s, items t", GOLD, 0.0, "interrupted"),  # 3^20
    ("WITH RECURSIVE r(s) AS (SELECT 'x' UNION SELECT s || s FROM r) SELECT max(length(s)) FROM r", GOLD, 0.0,
     "too big"),  # a string that doubles every row
    (f"WITH {BIG} SELECT printf('%.*c', 900000, 'x') FROM r", GOLD, 0.0, "result larger"),  # 0.9 MB rows until memory is full
    ("SELECT " + "(" * 900 + "1" + ")" * 900, GOLD, 0.0, "parser stack overflow"),  # 900 levels of parentheses
    ("SELECT " + "(SELECT " * 900 + "1" + ")" * 900, GOLD, 0.0, "parser stack overflow"),  # 900 nested subqueries
    ("SELECT 1" + " + 1" * 1500, GOLD, 0.0, "too large"),  # an expression tree deeper than the pinned limit
    ("SELECT '" + "x" * 30_000 + "'", GOLD, 0.0, "longer than"),  # a query longer than any honest one: not parsed
    ("SELEC name FROM items", GOLD, 0.0, "syntax error"),  # syntax error
    ("我不知道", GOLD, 0.0, "error"),  # refusal
    ("", GOLD, 0.0, "no_sql"),  # empty
    ("<think>\nSELECT name FROM items WHERE price > 2", GOLD, 0.0, "no_sql"),  # answer only in an open think
]


@pytest.mark.parametrize("completion,gold,reward,reason", CASES, ids=[str(i) for i in range(len(CASES))])
def test_sql_exec(db, completion, gold, reward, reason):
    start = time.perf_counter()
    got, why = check_sql(completion, db, gold, timeout_s=_FAST_S)
    # The gold query and the completion's, each bounded (unbounded, the runaway cases never end)
    assert time.perf_counter() - start < 2 * _FAST_S + DEADLINE_SLACK_S
    assert got == reward
    assert reason in why
    with sqlite3.connect(db) as conn:  # nothing a completion did may change the database
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (3,)


def test_registered_reward_reads_answer_or_gold_sql(db):
    fn = build_reward("sql_exec", {"timeout_s": 0.5})
    completions = ["SELECT name FROM items WHERE price > 2"] * 2
    assert fn(completions=completions, db=[db, db], answer=[GOLD, GOLD]) == [1.0, 1.0]
    assert fn(completions=completions, db=[db, db], gold_sql=[GOLD, "SELECT 1"]) == [1.0, 0.0]
    assert fn(completions=completions, db=[None, db], answer=[GOLD, GOLD]) == [None, 1.0]  # no db: not applicable


@pytest.mark.parametrize(
    "db_path,gold,error",
    [
        ("/no/such.db", GOLD, FileNotFoundError),  # dataset points at a missing file
        (None, "SELECT nope FROM nowhere", None),  # no db: not applicable, nothing runs
    ],
)
def test_dataset_problems(db_path, gold, error):
    if error is None:
        assert check_sql("SELECT 1", db_path, gold) == (None, "no_db_or_gold")
    else:
        with pytest.raises(error):
            check_sql("SELECT 1", db_path, gold)


def test_broken_gold_query_raises(db):
    # A gold query that fails is a dataset bug: raised (and counted by the registry), never a silent 0.
    with pytest.raises(ValueError, match="gold query failed"):
        check_sql("SELECT 1", db, "SELECT nope FROM nowhere")
