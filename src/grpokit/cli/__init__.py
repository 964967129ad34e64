"""The `grpokit` command line: one sub-command per stage, each a thin call into its module.

    grpokit demo                               # the main job on the embedded model
    grpokit train RECIPE.yaml [--set k=v ...] [--output-dir DIR] [--overwrite]
    grpokit train --resume RUN_DIR
    grpokit recipe check RECIPE.yaml [--set k=v ...]
    grpokit data check FILE.jsonl
    grpokit data generate arithmetic OUT.jsonl [--rows N] [--seed S]
    grpokit data perturb IN.jsonl OUT.jsonl [--seed S] [--exclude TRAIN.jsonl]
    grpokit data import humaneval OUT.jsonl
    grpokit rewards list | score | audit
    grpokit sandbox check

Input problems (`GrpokitError`) are printed as a list of `where: what / fix`
lines with exit code 2 (1 for unusable data), never as a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from rich.console import Console

from grpokit.errors import GrpokitError, Problem

err = Console(stderr=True, highlight=False, soft_wrap=True)


def _quiet_libraries() -> None:
    # transformers/TRL warnings about generation flags and experimental features are noise for a user.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import warnings

    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


# ---------------------------------------------------------------- handlers
def cmd_demo(args) -> int:
    from grpokit.demo import run_demo

    run_demo(output_dir=args.output_dir, overrides=args.set)
    return 0


def cmd_train(args) -> int:
    from grpokit.config import load_recipe
    from grpokit.train import load_run_recipe, train

    if args.resume:
        if args.recipe:
            raise GrpokitError([Problem("grpokit train", "give either RECIPE or --resume RUN_DIR, not both",
                                        "--resume reads the recipe saved in the run directory")])
        recipe = load_run_recipe(args.resume)
        train(recipe, run_dir=args.resume, resume=True)
        return 0
    if not args.recipe:
        raise GrpokitError([Problem("grpokit train", "no recipe given", "grpokit train RECIPE.yaml (see recipes/)")])
    recipe = load_recipe(args.recipe, args.set)
    if not args.skip_audit:
        _audit_warnings(recipe)
    train(recipe, run_dir=args.output_dir, overwrite=args.overwrite)
    return 0


def _audit_warnings(recipe) -> None:
    from grpokit.rewards.audit import audit_warnings
    from grpokit.train import console

    for w in audit_warnings(recipe):  # each line already starts with "reward audit:"
        console.print(f"[yellow]{w}[/]")


def cmd_recipe_check(args) -> int:
    from grpokit.config import load_recipe

    recipe = load_recipe(args.recipe, args.set)
    print(recipe.to_yaml(), end="")
    err.print(f"[green]{args.recipe}: valid[/]")
    return 0


def cmd_data_check(args) -> int:
    from grpokit.data.io import check_jsonl

    report = check_jsonl(args.file, args.question_field, args.answer_field)
    for p in report.errors:
        print(f"error   {p}")
    for p in report.warnings:
        print(f"warning {p}")
    print(report.summary())
    return 0 if report.ok else 1


def cmd_data_generate(args) -> int:
    from grpokit.data.arithmetic import generate

    exclude = set()
    for path in args.exclude or []:
        from grpokit.data.io import load_rows

        exclude |= {r["question"] for r in load_rows(path)[0]}
    rows = generate(args.rows, args.seed, exclude)
    _write_jsonl(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


def cmd_data_perturb(args) -> int:
    from grpokit.data.arithmetic import is_generated, perturb_rows
    from grpokit.data.io import load_rows

    rows = load_rows(args.file)[0]
    bad = [i + 1 for i, r in enumerate(rows) if not is_generated(r)]
    if bad:
        raise GrpokitError([Problem(f"{args.file} row {bad[0]}", f"{len(bad)} of {len(rows)} rows are not generated "
                                    "arithmetic rows (kind/a/b matching the question)",
                                    "perturb only files from `grpokit data generate arithmetic`; for other sets "
                                    "`grpokit eval` reports the train-vs-held-out gap instead")])
    exclude = {r["question"] for path in args.exclude or [] for r in load_rows(path)[0]}
    _write_jsonl(args.out, perturb_rows(rows, args.seed, exclude))
    print(f"wrote {len(rows)} perturbed rows to {args.out}")
    return 0


def cmd_data_import(args) -> int:
    from grpokit.data.humaneval import import_humaneval

    n = import_humaneval(args.out)
    print(f"wrote {n} rows to {args.out}")
    return 0


def _write_jsonl(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpokit", description="GRPO fine-tuning with verifiable rewards, around TRL.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="train the embedded model on the bundled arithmetic task (~9 min on a 2-core CPU)")
    demo.add_argument("--output-dir", default="runs/demo", help="run directory (replaced on each demo run)")
    demo.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                      help="override a demo recipe value, e.g. --set train.max_steps=5")
    demo.set_defaults(func=cmd_demo)

    tr = sub.add_parser("train", help="train a recipe, or --resume a run")
    tr.add_argument("recipe", nargs="?", help="recipe YAML file")
    tr.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="override a recipe value (repeatable), e.g. --set train.learning_rate=2e-5")
    tr.add_argument("--output-dir", help="run directory (default: the recipe's output_dir)")
    tr.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    tr.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest complete checkpoint")
    tr.add_argument("--skip-audit", action="store_true", help="do not run the reward audit before training")
    tr.set_defaults(func=cmd_train)

    rc = sub.add_parser("recipe", help="recipe tools").add_subparsers(dest="recipe_command", required=True, metavar="ACTION")
    chk = rc.add_parser("check", help="validate a recipe and print it resolved")
    chk.add_argument("recipe")
    chk.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    chk.set_defaults(func=cmd_recipe_check)

    data = sub.add_parser("data", help="dataset tools").add_subparsers(dest="data_command", required=True, metavar="ACTION")
    dc = data.add_parser("check", help="report every problem in a .jsonl dataset (exit 1 if a row is unusable)")
    dc.add_argument("file")
    dc.add_argument("--question-field", help="column holding the question (default: question, then prompt)")
    dc.add_argument("--answer-field", help="column holding the answer (default: answer, then expected_answer)")
    dc.set_defaults(func=cmd_data_check)
    dg = data.add_parser("generate", help="generate a task dataset")
    dg.add_argument("task", choices=["arithmetic"])
    dg.add_argument("out")
    dg.add_argument("--rows", type=int, default=500)
    dg.add_argument("--seed", type=int, default=0)
    dg.add_argument("--exclude", action="append", metavar="FILE.jsonl", help="never produce questions found in FILE")
    dg.set_defaults(func=cmd_data_generate)
    dp = data.add_parser("perturb", help="redraw the numbers of generated problems and recompute the answers")
    dp.add_argument("file")
    dp.add_argument("out")
    dp.add_argument("--seed", type=int, default=0)
    dp.add_argument("--exclude", action="append", metavar="FILE.jsonl", help="never produce questions found in FILE (train)")
    dp.set_defaults(func=cmd_data_perturb)
    di = data.add_parser("import", help="turn a packaged benchmark into grpokit rows")
    di.add_argument("source", choices=["humaneval"])
    di.add_argument("out")
    di.set_defaults(func=cmd_data_import)

    from grpokit.rewards import cli as rewards_cli
    from grpokit import evaluate, report, sandbox

    rewards_cli.register(sub)
    from grpokit import export; export.register(sub)  # noqa: E702 - grpokit export
    from grpokit import health, preflight; health.register(sub); preflight.register(sub)  # noqa: E702 - doctor, preflight
    evaluate.register(sub); report.register(sub)  # noqa: E702 - grpokit eval, grpokit report
    sandbox.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GrpokitError as e:
        err.print(f"[red]error:[/] {e.title or 'cannot continue'}")
        for p in e.problems:
            err.print(f"  - {p.where}: {p.message}")
            if p.fix:
                err.print(f"      fix: {p.fix}")
        return e.exit_code
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
