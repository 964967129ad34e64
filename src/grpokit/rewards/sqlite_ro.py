"""One SQL query, read-only and bounded, on a SQLite file: what `sql_exec` runs in its worker process.

    rows = run_readonly(db_path, sql, timeout_s, max_rows)   # list of tuples; SqlRejected / sqlite3.Error

Isolation, in layers: the database is opened through a `file:...?mode=ro` URI (SQLite refuses writes at the
file level); an authorizer allows only reads, SELECT, functions and recursive CTEs (so INSERT/UPDATE/DELETE/
DDL, ATTACH, PRAGMA and transactions are denied before they run) and denies the functions that allocate on
request or touch files; only one statement runs (sqlite3 rejects a second). Bounds, each a named constant
with its reason: the query's length (before SQLite parses it), its expression depth, each value's size
(SQLITE_LIMIT_LENGTH), LIKE/GLOB pattern length, the whole result's size and rows, and time: a progress
handler interrupts a query past `timeout_s`, checked again between fetched rows.

The progress handler runs between VM instructions, and one instruction can run for minutes (this build's
`printf('%.*c', 1e9, 'x')` loops a billion times inside one call; `instr` and `replace` compare two 1 MB
values in O(n*m)): that is why grpokit.rewards.sql_exec runs this in grpokit.rewards.worker, which kills it.

Standard library only: the worker imports nothing else.
"""
from __future__ import annotations

import os
import sqlite3
import time
from urllib.parse import quote

_PROGRESS_EVERY = 1000  # SQLite VM instructions between time checks: ~microseconds, cheap
_ALLOWED_ACTIONS = {sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
# Functions that allocate on request (zeroblob(1e9)) or touch files; the rest are pure.
_DENIED_FUNCTIONS = {"zeroblob", "randomblob", "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
# Bounds on adversarial queries; honest queries and results sit far below each of them.
MAX_SQL_CHARS = 20_000  # honest queries are a few hundred characters; parsing runs before the progress handler can stop it
_MAX_EXPR_DEPTH = 1000  # SQLITE_LIMIT_EXPR_DEPTH, pinned: a build compiled with 0 would recurse without limit in C
_MAX_VALUE_BYTES = 1_000_000  # SQLITE_LIMIT_LENGTH: caps printf('%.*c', 1e9, 'x') and friends; one opcode builds a value
_MAX_LIKE_PATTERN = 1_000  # SQLITE_LIMIT_LIKE_PATTERN_LENGTH (default 50,000): LIKE/GLOB match in O(value * pattern)
_MAX_RESULT_BYTES = 10_000_000  # fetched text/blob bytes: 10k rows of 1 MB values would fill memory before the deadline


class SqlRejected(Exception):
    """The completion's query was refused or failed: a 0 score, not a reward error."""


def _authorizer(action, arg1, arg2, db_name, trigger):
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY


def run_readonly(db_path: str, sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    """Rows of `sql` on `db_path`, read-only; raises sqlite3.Error or SqlRejected when it cannot run."""
    if len(sql) > MAX_SQL_CHARS:
        raise SqlRejected(f"query longer than {MAX_SQL_CHARS} characters")
    uri = f"file:{quote(os.path.abspath(db_path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, check_same_thread=False)
    try:
        deadline = time.monotonic() + timeout_s
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_EVERY)
        conn.set_authorizer(_authorizer)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 4)  # bytes: UTF-8 takes up to 4 per character
        conn.setlimit(sqlite3.SQLITE_LIMIT_EXPR_DEPTH, _MAX_EXPR_DEPTH)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, _MAX_LIKE_PATTERN)
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
