"""The `sql_exec` reward: run the completion's SQL read-only on the row's SQLite database and
compare its result set with the gold query's.

Row columns: `db` (path to a SQLite file) and the gold query in `answer`
(or in `gold_sql`, which wins when both are present).

Isolation, in layers: the database is opened through a `file:...?mode=ro`
URI (SQLite refuses writes at the file level); an authorizer allows only
reads, SELECT, functions and recursive CTEs (so INSERT/UPDATE/DELETE/DDL,
ATTACH, PRAGMA and transactions are denied before they run); only one
statement runs (sqlite3 rejects a second). Bounds, each a named constant with
its reason: the query's length (`_MAX_SQL_CHARS`, before SQLite parses it),
its expression depth (`_MAX_EXPR_DEPTH`; "((((...))))" 900 levels deep is a
parser error, not a stack overflow), each value's size (`_MAX_VALUE_BYTES`),
the whole result's size (`_MAX_RESULT_BYTES`) and rows (`max_rows`), and time:
a progress handler interrupts a query past `timeout_s` (an endless recursive
CTE, a huge cross join), checked again between fetched rows. A denied write,
an error, a timeout or a result past a bound scores 0.0, never a reward error.

Comparison: rows as tuples, floats rounded to `_FLOAT_DIGITS`; order-insensitive
(a multiset) unless the gold query contains ORDER BY (any ORDER BY, also in a
subquery: a conservative reading); column names are ignored, column order is not.

Not covered: SQLite's own working memory beyond what the time limit allows
(a sort or DISTINCT over rows produced for `timeout_s` spills to temporary
files; a process-wide heap limit would also bind the trainer), databases other
than SQLite, and SQL in prose without a fence (the whole answer text is tried as SQL).

Run: `grpokit rewards score --reward sql_exec --input rows.jsonl` (rows need `db` and `answer`).
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from grpokit.rewards.parsing import answer_region, fenced_blocks
from grpokit.rewards.registry import describe

_FLOAT_DIGITS = 6  # SUM/AVG over floats differ in the last bits between equivalent queries
_PROGRESS_EVERY = 1000  # SQLite VM instructions between time checks: ~microseconds, cheap
_SQL_TAGS = frozenset({"", "sql", "sqlite"})
_ORDER_BY = re.compile(r"\border\s+by\b", re.I)
_ALLOWED_ACTIONS = {sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
# Functions that allocate on request (zeroblob(1e9)) or touch files; the rest are pure.
_DENIED_FUNCTIONS = {"zeroblob", "randomblob", "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
# Bounds on adversarial queries; honest queries and results sit far below each of them.
_MAX_SQL_CHARS = 20_000  # honest queries are a few hundred characters; parsing runs before the progress handler can stop it
_MAX_EXPR_DEPTH = 1000  # SQLITE_LIMIT_EXPR_DEPTH, pinned: a build compiled with 0 would recurse without limit in C
_MAX_VALUE_BYTES = 1_000_000  # SQLITE_LIMIT_LENGTH: caps printf('%.*c', 1e9, 'x') and friends; one opcode builds a value
_MAX_RESULT_BYTES = 10_000_000  # fetched text/blob bytes: 10k rows of 1 MB values would fill memory before the deadline


class SqlRejected(Exception):
    """The completion's query was refused or failed: a 0 score, not a reward error."""


def extract_sql(completion: str) -> str | None:
    """The last fenced SQL block after any think block, else the answer text; None if think is unclosed."""
    region = answer_region(completion)
    if region is None:
        return None
    blocks = fenced_blocks(region, _SQL_TAGS)
    sql = (blocks[-1] if blocks else region).strip()
    return sql.rstrip(";").strip() or None


def _authorizer(action, arg1, arg2, db_name, trigger):
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def run_readonly(db_path: str, sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    """Rows of `sql` on `db_path`, read-only; raises sqlite3.Error or SqlRejected when it cannot run."""
    if len(sql) > _MAX_SQL_CHARS:
        raise SqlRejected(f"query longer than {_MAX_SQL_CHARS} characters")
    uri = f"file:{quote(os.path.abspath(db_path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)
    try:
        deadline = time.monotonic() + timeout_s
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_EVERY)
        conn.set_authorizer(_authorizer)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, _MAX_SQL_CHARS * 4)  # bytes: UTF-8 takes up to 4 per character
        conn.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, _MAX_EXPR_DEPTH)
        rows, size = [], 0
        for row in conn.execute(sql):
            rows.append(row)
            size += sum(len(v) for v in row if isinstance(v, (str, bytes)))
            if len(rows) > max_rows:
                raise SqlRejected(f"more than {max_rows} rows")
            if size > _MAX_RESULT_BYTES:
                raise SqlRejected(f"result larger than {_MAX_RESULT_BYTES:,} bytes")
            if time.monotonic() > deadline:  # time spent in Python between rows, which SQLite's handler does not see
                raise sqlite3.OperationalError("interrupted")
        return rows
    finally:
        conn.close()


def _canonical(rows: list[tuple]) -> list[tuple]:
    return [tuple(round(v, _FLOAT_DIGITS) if isinstance(v, float) else v for v in row) for row in rows]


def _gold_rows(db: str, gold_sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    try:
        return _canonical(run_readonly(db, gold_sql, timeout_s, max_rows))
    except (sqlite3.Error, SqlRejected) as e:
        # The gold query is dataset content: its failure is a data bug, raised so the registry reports it.
        raise ValueError(f"the gold query failed on {db}: {e}") from None


def check_sql(completion: str, db: object, gold_sql: object, timeout_s: float = 2.0, max_rows: int = 10_000) -> tuple[float | None, str]:
    """(reward, reason) for one completion."""
    if not db or not gold_sql:
        return None, "no_db_or_gold"
    db = str(db)
    if not Path(db).is_file():
        raise FileNotFoundError(f"the row's db {db!r} does not exist")
    expected = _gold_rows(db, str(gold_sql), timeout_s, max_rows)
    sql = extract_sql(completion)
    if sql is None:
        return 0.0, "no_sql"
    try:
        got = _canonical(run_readonly(db, sql, timeout_s, max_rows))
    except SqlRejected as e:
        return 0.0, f"rejected: {e}"
    except sqlite3.Error as e:  # syntax errors, denied writes ("not authorized"), timeouts ("interrupted")
        return 0.0, f"error: {e}"
    if _ORDER_BY.search(str(gold_sql)):
        same = got == expected
    else:
        same = Counter(got) == Counter(expected)
    return (1.0, "same_result") if same else (0.0, "different_result")


@describe(
    description="1.0 when the completion's SQL, run read-only on the row's SQLite db within a time limit, returns the "
    "same result set as the gold query (order-insensitive unless it has ORDER BY); a write, error or timeout scores 0.0.",
    columns=("db", "answer"),
    params={
        "timeout_s": "seconds a query may run before it is interrupted (default 2.0)",
        "max_rows": "rows fetched at most; a larger result scores 0.0 (default 10000)",
    },
)
def get_sql_exec_reward(timeout_s: float = 2.0, max_rows: int = 10_000):
    if not timeout_s > 0 or max_rows < 1:
        raise ValueError(f"sql_exec: timeout_s must be > 0 and max_rows >= 1, got {timeout_s} and {max_rows}")
    def score(completions: list[str], db: list, answer: list | None = None, gold_sql: list | None = None, **_columns):
        if answer is None and gold_sql is None:
            raise ValueError("sql_exec needs the gold query in an 'answer' or 'gold_sql' column")
        n = len(completions)
        answers, gold_sqls = answer or [None] * n, gold_sql or [None] * n
        return [
            check_sql(c, d, g or a, timeout_s, max_rows)[0]
            for c, d, a, g in zip(completions, db, answers, gold_sqls)
        ]

    def explain(completion: str, db: object = None, answer: object = None, gold_sql: object = None, **_row) -> dict:
        reward, reason = check_sql(completion, db, gold_sql or answer, timeout_s, max_rows)
        return {"reward": reward, "reason": reason}

    score.explain = explain
    return score
