"""`grpokit eval`: evaluate every checkpoint of a run, or one model, and pick the best."""
from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import load_recipe, load_run_recipe
from grpokit.recipe.schema import MAX_TOKENS
from grpokit.run import RunDir

# pass@k is read at k of a few hundred at most; each sample is a whole completion of every row, so a larger K is a
# typo that would sample for days.
MAX_SAMPLES = 1024


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate every checkpoint of a run (or one model) and pick the best")
    p.add_argument("target", help="a run directory, or a model: 'default', a local folder or a hub id")
    p.add_argument("--data", metavar="FILE.jsonl", help="evaluate on this file instead of the recipe's held-out set "
                   "(results go to eval/results-<stem>.json; best.json is left alone)")
    p.add_argument("--checkpoints", default="all", metavar="all|best|last|auto|N,...",
                   help="which steps of a run (0 = base model; default all: base + every complete checkpoint)")
    p.add_argument("--samples", type=int, default=0, metavar="K",
                   help="also sample K completions per problem at the recipe's temperature for pass@k (k <= K)")
    p.add_argument("--max-rows", type=int, metavar="N", help="evaluate on the first N held-out rows only")
    p.add_argument("--max-new-tokens", type=int, metavar="N", help="default: the recipe's max_completion_length")
    p.add_argument("--recipe", metavar="RECIPE.yaml", help="MODEL only: template, rewards and eval set from a recipe")
    p.add_argument("--template", choices=["plain_zh", "plain_en", "chat"],
                   help="MODEL only, without --recipe (default: chat if the tokenizer has a chat template, "
                   "else plain_en)")
    p.add_argument("--system-prompt", help="MODEL only: system message for the chat template")
    p.add_argument("--output-dir", help="MODEL only: where eval/results.json goes (default runs/eval-<model name>)")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args) -> int:
    from grpokit.console import console, print_table
    from grpokit.evaluation import evaluate_model, evaluate_run, pct, results_legend, results_table
    target = Path(args.target)
    run = RunDir(target)
    _refuse_what_is_no_target(target, run)
    for flag, value, lo, hi in (("--samples", args.samples, 0, MAX_SAMPLES), ("--max-rows", args.max_rows, 1, None),
                                ("--max-new-tokens", args.max_new_tokens, 1, MAX_TOKENS)):
        if value is not None and (value < lo or (hi is not None and value > hi)):
            span = f"at least {lo}" if hi is None else f"{lo} to {hi:,}"
            raise GrpokitError([Problem(flag, f"must be {span}, got {value:,}",
                                        "e.g. --samples 16 (0 skips pass@k)" if flag == "--samples" else
                                        f"pass a number from {lo}" + (f" to {hi:,}" if hi else ""))])
    tool_recipe = load_run_recipe(run) if run.is_run() else (load_recipe(args.recipe) if args.recipe else None)
    if tool_recipe is not None and tool_recipe.env is not None:  # tool tasks: TRL's own episodes (grpokit.envs)
        from grpokit.evaluation import cli_eval

        return cli_eval(args, tool_recipe, run if run.is_run() else None)
    common = dict(k_samples=args.samples, max_rows=args.max_rows, max_new_tokens=args.max_new_tokens,
                  log=lambda m: console.print(m))
    if run.is_run():
        if args.recipe or args.template or args.system_prompt:
            raise GrpokitError([Problem("grpokit eval RUN_DIR", "--recipe/--template/--system-prompt apply to a model, "
                                        "not a run", "a run is always evaluated with the template it trained with")])
        results = evaluate_run(target, args.data, args.checkpoints, **common)
    else:
        if args.checkpoints != "all":
            raise GrpokitError([Problem(args.target, "--checkpoints applies to a run directory",
                                        "pass a run directory (it holds config.yaml), or drop --checkpoints")])
        results = evaluate_model(args.target, args.data, args.recipe, args.template, args.system_prompt,
                                 out_dir=args.output_dir, **common)
    print_table(results_table(results))
    for line in results_legend(results):  # what each column means (docs/evaluation.md says the same)
        console.print(f"  [dim]{escape(line)}[/]")
    if (results.get("run_end") or {}).get("note"):
        console.print(f"[yellow]note: {escape(results['run_end']['note'])}[/]")
    flagged = [e for e in results["checkpoints"] if (e.get("gap") or {}).get("flagged")]
    for e in flagged:
        g = e["gap"]
        what = ("original vs perturbed numbers: memorised answers?" if g["kind"] == "perturbed"
                else "training vs held-out rows: overfitting?")
        console.print(f"[yellow]step {e['step']}: accuracy gap of {100 * g['value']:.1f} points, {what}[/]")
    for key in ("replaced", "kept"):  # an earlier, wider comparison is never replaced without a word
        if results.get(key):
            console.print(f"[yellow]{results[key]}[/]")
    if results.get("best") and run.is_run() and args.data is None and not results.get("kept"):
        b = results["best"]
        console.print(f"best: step {b['step']} ({pct(b['accuracy'], results.get('rows'))} held-out {b.get('metric', 'accuracy')}) -> "
                      f"{run.best_file}")
    console.print(f"results: {results['path']}")
    return 0


def _refuse_what_is_no_target(target: Path, run) -> None:
    """A folder that is neither a run nor a model, or a local path that does not exist: said now, not as
    "no data to evaluate on" (a hub id, org/name, is only refused later if the hub has no such model)."""
    from grpokit.cli.output import require_run

    if run.is_run() or target.name == "default":
        return
    if target.is_dir() and not (target / "config.json").is_file():
        require_run(str(target), "eval")  # metrics only (a run cut before config.yaml): refused below anyway
        raise GrpokitError([Problem(f"grpokit eval {target}", "a run directory without config.yaml (the recipe it "
                                    "trained with): it cannot be evaluated", "evaluate a checkpoint folder of it as "
                                    "a model: grpokit eval RUN/checkpoints/checkpoint-N --recipe RECIPE.yaml")])
    local = str(target).startswith((".", "/", "~")) or (len(target.parts) > 1 and Path(target.parts[0]).is_dir())
    if not target.exists() and local:
        try:
            require_run(str(target), "eval")
        except GrpokitError as e:  # the target may have meant a model as well as a run: say both
            (p,) = e.problems
            raise GrpokitError([Problem(p.where, f"no such model folder: {target}, nor a run directory", p.fix)]) \
                from None
