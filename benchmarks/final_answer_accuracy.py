"""math_correctness on the labelled table of final-answer lines: how many hedges it refuses, how many honest answers it keeps.

    python benchmarks/final_answer_accuracy.py [--table tests/fixtures/final_answer_lines.jsonl] [--verbose]

Each row of the table has the truth (`label`: hedge, honest or wrong) and a shape (`kind`). Prints:
- hedges refused: label hedge, scored 0 (the share of hedges the reward does not pay);
- honest kept: label honest with the gold answer, scored 1 (recall on honest answers);
- precision of a 0: of the right-valued lines scored 0, the share that are hedges (not honest answers docked);
- wrong answers scored 0, and the same figures per language and per kind;
then every line where the reward and the label disagree, with the table's note (why shape cannot decide it).
Reads the table only: no model, no network; a second or two.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from grpokit.rewards.math import check_math

_TABLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "final_answer_lines.jsonl"


def _figures(rows: list[dict]) -> dict[str, tuple[int, int]]:
    hedges = [r for r in rows if r["label"] == "hedge"]
    honest = [r for r in rows if r["label"] == "honest"]
    wrong = [r for r in rows if r["label"] == "wrong"]
    zeros = [r for r in hedges + honest if r["reward"] == 0.0]
    return {
        "hedges refused": (sum(r["reward"] == 0.0 for r in hedges), len(hedges)),
        "honest kept": (sum(r["reward"] == 1.0 for r in honest), len(honest)),
        "precision of a 0": (sum(r["label"] == "hedge" for r in zeros), len(zeros)),
        "wrong scored 0": (sum(r["reward"] == 0.0 for r in wrong), len(wrong)),
    }


def _line(name: str, figures: dict[str, tuple[int, int]]) -> str:
    cells = [f"{k} {a}/{b} ({100 * a / b:.1f}%)" if b else f"{k} -" for k, (a, b) in figures.items()]
    return f"{name:<16} " + "; ".join(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=str(_TABLE))
    ap.add_argument("--verbose", action="store_true", help="also list every line with its verdict")
    args = ap.parse_args()
    rows = [json.loads(line) for line in Path(args.table).read_text(encoding="utf-8").splitlines() if line.strip()]
    for r in rows:
        v = check_math(r["text"], r["gold"])
        r["reward"], r["reason"] = v.reward, v.reason
    print(f"{len(rows)} lines, {len({r['lang'] for r in rows})} languages")
    print(_line("all", _figures(rows)))
    for key in ("lang", "kind"):
        groups = defaultdict(list)
        for r in rows:
            groups[r[key]].append(r)
        for name in sorted(groups):
            print(_line(f"  {key}={name}", _figures(groups[name])))
    agree = sum(r["reward"] == r["score"] for r in rows)
    print(f"agrees with the table's expected score: {agree}/{len(rows)}")
    misses = [r for r in rows if (r["reward"] == 1.0) != (r["label"] == "honest")]
    print(f"lines where the reward and the truth disagree: {len(misses)}")
    for r in misses if not args.verbose else rows:
        text = r["text"].split("\n", 1)[-1].replace("\n", "\\n")
        print(f"  [{r['lang']} {r['kind']} {r['label']}] reward {r['reward']} ({r['reason']}): {text}"
              + (f"  -- {r['note']}" if r.get("note") else ""))


if __name__ == "__main__":
    main()
