"""`grpokit compare RUN_A RUN_B [--data REWRITTEN]`: one table of two runs' evaluation (SFT vs GRPO)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("compare", help="held-out and rewritten-set metrics of two runs in one table "
                                       "(from grpokit eval results)")
    p.add_argument("run_a", help="a run directory (e.g. the GRPO run)")
    p.add_argument("run_b", help="another run directory (e.g. the SFT run)")
    p.add_argument("--data", metavar="REWRITTEN.jsonl",
                   help="a rewritten held-out set (new numbers, reworded questions) evaluated for both runs")
    p.add_argument("--evaluate", action="store_true", help="run the missing `grpokit eval` commands now")
    p.set_defaults(func=cmd_compare)


def cmd_compare(args) -> int:
    from grpokit.console import console, print_table
    from grpokit.evaluation import compare_runs, compare_table

    result = compare_runs(args.run_a, args.run_b, args.data, args.evaluate, log=lambda m: console.print(m))
    print_table(compare_table(result))
    for w in result["warnings"]:
        console.print(f"[yellow]warning:[/] {w}")
    return 0
