"""`grpokit compare`: two finished runs in one table, or an SFT recipe against a GRPO recipe on a user's own task.

    grpokit compare RUN_A RUN_B [--data REWRITTEN.jsonl] [--evaluate]      # two runs' evaluations, one table
    grpokit compare SFT.yaml GRPO.yaml [--output-dir D] [--set k=v] [--resume]

Given two recipes it runs the comparison the sft-vs-grpo demos run (grpokit.demo.sft_vs_grpo) on the user's rows,
rewards and template: SFT, GRPO, SFT then GRPO, GRPO then SFT, each final model and the base on the held-out rows
and the copies its task family makes, the paired verdict with its exact test (grpokit.evaluation.paired), one
page (report.html) and one JSON (comparison.json); a stopped comparison goes on with --resume.
"""
from __future__ import annotations

from pathlib import Path

RECIPE_SUFFIXES = (".yaml", ".yml")
DEFAULT_OUTPUT = "runs/compare"


def register(sub) -> None:
    p = sub.add_parser("compare", help="two runs' held-out and rewritten-set metrics in one table (from grpokit eval "
                                       "results), or an SFT recipe against a GRPO recipe trained and evaluated here")
    p.add_argument("run_a", help="a run directory (e.g. the GRPO run), or the SFT recipe (.yaml)")
    p.add_argument("run_b", help="another run directory (e.g. the SFT run), or the GRPO recipe (.yaml)")
    p.add_argument("--data", metavar="REWRITTEN.jsonl",
                   help="runs: a rewritten held-out set (new numbers, reworded questions) evaluated for both runs")
    p.add_argument("--evaluate", action="store_true", help="runs: run the missing `grpokit eval` commands now")
    p.add_argument("--output-dir", help=f"recipes: the comparison's folder (default {DEFAULT_OUTPUT}; an earlier "
                   "comparison there is replaced, any other non-empty folder refused)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="recipes: override a setting of both recipes (repeatable)")
    p.add_argument("--resume", action="store_true", help="recipes: go on with the comparison stopped in "
                   "--output-dir (its finished stages kept)")
    p.set_defaults(func=cmd_compare)


def _is_recipe(path: str) -> bool:
    return Path(path).suffix.lower() in RECIPE_SUFFIXES


def cmd_compare(args) -> int:
    from grpokit.errors import GrpokitError, Problem

    recipes = [_is_recipe(args.run_a), _is_recipe(args.run_b)]
    if any(recipes):
        if not all(recipes):
            raise GrpokitError([Problem("grpokit compare", f"one recipe and one run given ({args.run_a}, "
                                        f"{args.run_b})", "give two recipes (SFT.yaml GRPO.yaml) to train and "
                                        "compare them, or two run folders to compare their evaluations")])
        if args.data or args.evaluate:
            raise GrpokitError([Problem("--data" if args.data else "--evaluate", "applies to two runs, not to two "
                                        "recipes", "drop it: a comparison of recipes evaluates every model on the "
                                        "GRPO recipe's held-out rows and the copies its task makes")])
        return _compare_recipes(args)
    if args.set or args.resume or args.output_dir:
        flag = "--set" if args.set else "--resume" if args.resume else "--output-dir"
        raise GrpokitError([Problem(flag, "applies to two recipes, not to two runs",
                                    "drop it, or give the SFT and GRPO recipes (.yaml) to compare them")])
    from grpokit.console import console, print_table
    from grpokit.evaluation import compare_runs, compare_table

    result = compare_runs(args.run_a, args.run_b, args.data, args.evaluate, log=lambda m: console.print(m))
    print_table(compare_table(result))
    for w in result["warnings"]:
        console.print(f"[yellow]warning:[/] {w}")
    return 0


def _compare_recipes(args) -> int:
    import shlex

    from grpokit.demo import sft_vs_grpo
    from grpokit.errors import GrpokitError, Problem

    for path in (args.run_a, args.run_b):
        if not Path(path).is_file():
            raise GrpokitError([Problem(path, "no such recipe file", "give the SFT recipe, then the GRPO recipe")])
    out = args.output_dir or DEFAULT_OUTPUT
    again = shlex.join(["grpokit", "compare", args.run_a, args.run_b, "--output-dir", out,
                        *(a for o in args.set for a in ("--set", o))])
    sft_vs_grpo.run(out, args.set, recipes=(Path(args.run_a), Path(args.run_b)), resume=args.resume, again=again)
    return 0
