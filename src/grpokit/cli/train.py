"""`grpokit demo` and `grpokit train`: the training commands."""
from __future__ import annotations

from grpokit.cli.output import add_set_option
from grpokit.errors import GrpokitError, Problem


def register(sub) -> None:
    demo = sub.add_parser("demo", help="train the embedded model on the bundled arithmetic task "
                                       "(~9 min on a 2-core CPU)")
    demo.add_argument("--output-dir", default="runs/demo", help="run directory (replaced on each demo run)")
    add_set_option(demo, "override a demo recipe value, e.g. --set train.max_steps=5")
    demo.set_defaults(func=cmd_demo)

    tr = sub.add_parser("train", help="train a recipe, or --resume a run")
    tr.add_argument("recipe", nargs="?", help="recipe YAML file")
    add_set_option(tr)
    tr.add_argument("--output-dir", help="run directory (default: the recipe's output_dir)")
    tr.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    tr.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its latest complete checkpoint")
    tr.add_argument("--skip-audit", action="store_true", help="do not run the reward audit before training")
    tr.set_defaults(func=cmd_train)


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
