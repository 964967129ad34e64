"""How long past its limit each of grpokit's deadlines takes to stop work that would otherwise run on.

    python benchmarks/deadlines.py [--repeats 3]

Each case is one the tests check with a bound (tests/conftest.py DEADLINE_SLACK_S): work that runs for minutes or
forever unless a deadline stops it, run through grpokit's own code. Prints, per case, the limit and the seconds
each repeat took from the call to its return (the best and the worst), so the bound in the tests can be compared
with what this machine does, idle or loaded (run it beside another job to see the loaded figure). Cases:

- sandbox: a Python loop that never ends, a loop that ignores SIGTERM/SIGINT/SIGXCPU, a fork bomb (run_tests);
- json_schema: 2^24 anyOf branches (check_json, timeout_s 0.2);
- sql_exec: a recursive CTE without an end (check_sql, timeout_s 0.25);
- own reward: a function sleeping 60 s, stopped at its timeout_s of 1 s (guard.guarded_call);
- worker: a catastrophic regex behind a $ref, killed with its worker process (check_json, timeout_s 1).
"""
from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit


def _sandbox_cases():
    from grpokit.sandbox.execution import TestSpec, run_tests
    from grpokit.sandbox.isolation import Limits

    spec = TestSpec.from_asserts(["assert square(2) == 4", "assert square(3) == 9"])

    def run(code, limits):
        return lambda: run_tests(code, spec, limits=limits)

    ignore = ("import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGXCPU):\n"
              "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    return [("sandbox: endless loop in a call", 1.5, run("def square(x):\n    while True:\n        pass\n",
                                                          Limits(timeout_s=1.5))),
            ("sandbox: loop ignoring signals", 1.5, run(ignore, Limits(timeout_s=1.5))),
            ("sandbox: fork bomb", 2.0, run(bomb, Limits(timeout_s=2, nproc=8, cpu_s=2)))]


def _reward_cases(tmp: Path):
    from grpokit.rewards.guard import OwnRewardTimeout, guarded_call
    from grpokit.rewards.json_schema import check_json
    from grpokit.rewards.sql_exec import check_sql

    branches = {"anyOf": [{"type": "array", "items": {"$ref": "#"}},
                          {"type": "array", "minItems": 1, "items": {"$ref": "#"}}]}
    db = tmp / "items.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE items (name TEXT, price REAL)")
        c.execute("INSERT INTO items VALUES ('pen', 1.5)")
    endless = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"

    def sleeps(completions):
        time.sleep(60)
        return [0.0]

    def own():
        try:
            guarded_call(sleeps, lambda: sleeps(["a"]), 1, 1.0)
        except OwnRewardTimeout:
            return

    return [("json_schema: 2^24 anyOf branches", 0.2,
             lambda: check_json("[" * 24 + '"x"' + "]" * 24, branches, timeout_s=0.2)),
            ("sql_exec: an endless recursive query", 0.25, lambda: check_sql(endless, str(db), "SELECT name FROM items",
                                                                           timeout_s=0.25)),
            ("own reward: a 60 s sleep", 1.0, own),
            ("worker: a catastrophic regex", 1.0, lambda: check_json('"' + "a" * 28 + '!"', {
                "$ref": "#/default", "default": {"pattern": "^(a+)+$"}}, timeout_s=1.0))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = _sandbox_cases() + _reward_cases(Path(tmp))
        print(f"{'case':<38} {'limit s':>8} {'best s':>8} {'worst s':>8}")
        for name, limit, call in cases:
            took = []
            for _ in range(args.repeats):
                t0 = time.monotonic()
                call()
                took.append(time.monotonic() - t0)
            print(f"{name:<38} {limit:>8.2f} {min(took):>8.2f} {max(took):>8.2f}", flush=True)


if __name__ == "__main__":
    main()
