"""The `sql_exec` reward: run the completion's SQL read-only on the row's SQLite database and
compare its result set with the gold query's.

Row columns: `db` (path to a SQLite file) and the gold query in `answer`
(or in `gold_sql`, which wins when both are present).

Isolation and bounds are grpokit.rewards.sqlite_ro's: a read-only URI, an authorizer that allows reads only,
one statement, limits on the query's length, expression depth, value size, LIKE pattern, result size and
rows, and a progress handler that interrupts a query past `timeout_s`. Every query runs in a worker process
(grpokit.rewards.worker) that is killed `KILL_GRACE_S` after `timeout_s` when one SQLite instruction runs
past it (`printf('%.*c', 1000000000, 'x')` loops inside one call, where the progress handler never runs),
with an address-space limit of its own. A denied write, an error, a timeout, a kill or a result past a bound
scores 0.0, never a reward error; the scorer logs how many completions hit a time bound as
`rewards/sql_exec/timeouts` (with TRL's log_metric). The gold query runs the same way (a failure is a dataset
error, raised) and its rows are cached per database file and query: a group's completions share one gold.

Comparison: rows as tuples, floats rounded to `_FLOAT_DIGITS`; order-insensitive
(a multiset) unless the gold query contains ORDER BY (any ORDER BY, also in a
subquery: a conservative reading); column names are ignored, column order is not.

Not covered: databases other than SQLite, and SQL in prose without a fence (the whole answer text is tried
as SQL).

Run: `grpokit rewards score --reward sql_exec --input rows.jsonl` (rows need `db` and `answer`).
"""
from __future__ import annotations

import functools
import os
import re
from collections import Counter
from pathlib import Path

from grpokit.rewards import worker
from grpokit.rewards.parsing import answer_region, fenced_blocks
from grpokit.rewards.registry import describe

_FLOAT_DIGITS = 6  # SUM/AVG over floats differ in the last bits between equivalent queries
_SQL_TAGS = frozenset({"", "sql", "sqlite"})
_ORDER_BY = re.compile(r"\border\s+by\b", re.I)
_GOLD_CACHE = 256  # gold results kept (per db file and query): a batch holds a few groups of one gold each
_TIMED_OUT = "interrupted"  # SQLite's word for the progress handler's stop; a kill reads the same


class SqlRejected(Exception):
    """The completion's query was refused or failed: a 0 score, not a reward error."""


class SqlError(Exception):
    """SQLite refused or failed the query (sqlite3.Error in the worker): a 0 score, not a reward error."""


def extract_sql(completion: str) -> str | None:
    """The last fenced SQL block after any think block, else the answer text; None if think is unclosed."""
    region = answer_region(completion)
    if region is None:
        return None
    blocks = fenced_blocks(region, _SQL_TAGS)
    sql = (blocks[-1] if blocks else region).strip()
    return sql.rstrip(";").strip() or None


def run_readonly(db_path: str, sql: str, timeout_s: float, max_rows: int) -> list[tuple]:
    """Rows of `sql` on `db_path`, read-only, in the worker; SqlError (SQLite's, a timeout or a kill) or
    SqlRejected (a grpokit bound) when it cannot run."""
    try:
        return [tuple(r) for r in worker.call("sql", (db_path, sql, timeout_s, max_rows),
                                              timeout_s + worker.KILL_GRACE_S)]
    except worker.WorkerTimeout:
        raise SqlError(f"{_TIMED_OUT} (killed {worker.KILL_GRACE_S:g} s past timeout_s: one SQLite step ran "
                       "that long)") from None
    except worker.WorkerDied as e:
        raise SqlError(f"{e} (out of memory?)") from None
    except worker.TaskError as e:
        if e.kind == "SqlRejected":
            raise SqlRejected(str(e)) from None
        raise SqlError(str(e)) from None


def _canonical(rows: list[tuple]) -> list[tuple]:
    return [tuple(round(v, _FLOAT_DIGITS) if isinstance(v, float) else v for v in row) for row in rows]


def _gold_rows(db: str, gold_sql: str, timeout_s: float, max_rows: int) -> tuple[tuple, ...]:
    stat = os.stat(db)  # the cache key holds the file's identity: an edited database is queried again
    return _cached_gold(os.path.abspath(db), stat.st_mtime_ns, stat.st_size, gold_sql, timeout_s, max_rows)


@functools.lru_cache(maxsize=_GOLD_CACHE)
def _cached_gold(db: str, _mtime: int, _size: int, gold_sql: str, timeout_s: float, max_rows: int) -> tuple[tuple, ...]:
    try:
        return tuple(_canonical(run_readonly(db, gold_sql, timeout_s, max_rows)))
    except (SqlError, SqlRejected) as e:
        # The gold query is dataset content: its failure is a data bug, raised so the registry reports it.
        raise ValueError(f"the gold query failed on {db}: {e}") from None


def check_sql(completion: str, db: object, gold_sql: object, timeout_s: float = 2.0, max_rows: int = 10_000) -> tuple[float | None, str]:
    """(reward, reason) for one completion."""
    if not db or not gold_sql:
        return None, "no_db_or_gold"
    db = str(db)
    if not Path(db).is_file():
        raise FileNotFoundError(f"the row's db {db!r} does not exist")
    expected = list(_gold_rows(db, str(gold_sql), timeout_s, max_rows))
    sql = extract_sql(completion)
    if sql is None:
        return 0.0, "no_sql"
    try:
        got = _canonical(run_readonly(db, sql, timeout_s, max_rows))
    except SqlRejected as e:
        return 0.0, f"rejected: {e}"
    except SqlError as e:  # syntax errors, denied writes ("not authorized"), timeouts ("interrupted"), kills
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
    r"""The `sql_exec` scorer: 1.0 when the completion's query, run read-only on the row's SQLite database, returns
    the gold query's rows; 0.0 for other rows, an error, a write or a timeout.

    Example:

    >>> import sqlite3, tempfile
    >>> from grpokit.rewards.sql_exec import get_sql_exec_reward
    >>> db = tempfile.mkdtemp() + "/shop.db"
    >>> with sqlite3.connect(db) as c:
    ...     _ = c.executescript("CREATE TABLE items(name TEXT, price REAL); INSERT INTO items VALUES ('pen', 2), ('ink', 9);")
    >>> score = get_sql_exec_reward()
    >>> gold = "SELECT name FROM items WHERE price > 5"
    >>> score(["```sql\nSELECT name FROM items WHERE price >= 9\n```", "SELECT name FROM items", "DELETE FROM items"],
    ...       db=[db] * 3, answer=[gold] * 3)
    [1.0, 0.0, 0.0]
    """
    if not timeout_s > 0 or max_rows < 1:
        raise ValueError(f"sql_exec: timeout_s must be > 0 and max_rows >= 1, got {timeout_s} and {max_rows}")
    def score(completions: list[str], db: list, answer: list | None = None, gold_sql: list | None = None,
              log_metric=None, **_columns):
        if answer is None and gold_sql is None:
            raise ValueError("sql_exec needs the gold query in an 'answer' or 'gold_sql' column")
        n = len(completions)
        answers, gold_sqls = answer or [None] * n, gold_sql or [None] * n
        verdicts = [check_sql(c, d, g or a, timeout_s, max_rows)
                    for c, d, a, g in zip(completions, db, answers, gold_sqls)]
        if log_metric is not None:  # the completions that hit the time bound (scored 0), counted
            log_metric("rewards/sql_exec/timeouts", float(sum(_TIMED_OUT in reason for _, reason in verdicts)))
        return [reward for reward, _ in verdicts]

    def explain(completion: str, db: object = None, answer: object = None, gold_sql: object = None, **_row) -> dict:
        reward, reason = check_sql(completion, db, gold_sql or answer, timeout_s, max_rows)
        return {"reward": reward, "reason": reason}

    score.explain = explain
    return score
