"""`grpokit rm candidates | export-csv | import-csv | train | eval`: a reward model from human rankings."""
from __future__ import annotations

from grpokit.cli.output import add_overwrite_option, add_set_option
from grpokit.recipe import load_recipe


def register(sub) -> None:
    rm = sub.add_parser("rm", help="reward model from human rankings: candidates, CSV, train, eval").add_subparsers(
        dest="rm_command", required=True, metavar="ACTION")
    c = rm.add_parser("candidates", help="sample K answers per prompt into a ranking file (ranks left empty)")
    c.add_argument("recipe", help="recipe YAML: its model, template and temperature")
    c.add_argument("--prompts", required=True, metavar="FILE", help="prompts (a question/prompt column; any format)")
    c.add_argument("--n", type=int, default=4, metavar="K", help="candidates per prompt (default 4)")
    c.add_argument("--out", required=True, metavar="RANKINGS.jsonl", help="where to write the ranking file")
    c.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    add_set_option(c)
    add_overwrite_option(c)
    c.set_defaults(func=cmd_candidates)
    e = rm.add_parser("export-csv", help="ranking file -> CSV, one line per candidate, to rank in a spreadsheet")
    e.add_argument("rankings", help="ranking file (.jsonl)")
    e.add_argument("csv", help="CSV to write")
    add_overwrite_option(e)
    e.set_defaults(func=cmd_export_csv)
    i = rm.add_parser("import-csv", help="ranked CSV -> ranking file (checked: no ties, every rank 1..n)")
    i.add_argument("csv", help="the CSV from export-csv, with its rank column filled in")
    i.add_argument("rankings", help="ranking file to write (.jsonl)")
    add_overwrite_option(i)
    i.set_defaults(func=cmd_import_csv)
    t = rm.add_parser("train", help="train a reward model on rankings (TRL RewardTrainer); held-out accuracy")
    t.add_argument("rankings", help="ranking file (.jsonl) with every candidate ranked")
    t.add_argument("--base", default="default", help="base model: 'default', a local folder or a hub id")
    t.add_argument("--out", required=True, metavar="DIR", help="reward model folder (replaced if it is one)")
    t.add_argument("--eval-fraction", type=float, default=0.2, help="share of prompts held out (default 0.2)")
    t.add_argument("--seed", type=int, default=0, help="seed of the split and the new head (default 0)")
    t.add_argument("--epochs", type=float, default=3.0, help="passes over the pairs (default 3)")
    t.add_argument("--max-steps", type=int, default=-1, help="optimizer steps; overrides --epochs")
    t.add_argument("--learning-rate", type=float, default=2e-5, help="default 2e-5")
    t.add_argument("--batch-size", type=int, default=8, help="pairs per step (default 8)")
    t.add_argument("--max-length", type=int, default=512, help="tokens of question + answer (default 512)")
    t.set_defaults(func=cmd_train)
    v = rm.add_parser("eval", help="pairwise accuracy of a reward model on a ranking file")
    v.add_argument("rm_dir", help="reward model folder from `grpokit rm train`")
    v.add_argument("rankings", help="ranking file (.jsonl)")
    v.set_defaults(func=cmd_eval)


def cmd_candidates(args) -> int:
    from grpokit.rm import write_candidates

    recipe = load_recipe(args.recipe, args.set)
    r = write_candidates(recipe, args.prompts, args.n, args.out, seed=args.seed, overwrite=args.overwrite)
    dup = f" ({r['dropped_duplicates']} identical answers dropped)" if r["dropped_duplicates"] else ""
    print(f"wrote {r['candidates']} candidates for {r['prompts']} prompts to {args.out}{dup}")
    if r["too_few"]:
        print(f"warning: {len(r['too_few'])} prompt(s) got fewer than 2 different answers ({', '.join(r['too_few'][:5])}):"
              " delete them or sample again with another --seed or a higher temperature (--set train.temperature=1.2)")
    print(f"next: fill in each rank (1 = best), in the file or via `grpokit rm export-csv {args.out} rankings.csv`")
    return 0


def cmd_export_csv(args) -> int:
    from grpokit.rm import export_csv

    n = export_csv(args.rankings, args.csv, args.overwrite)
    print(f"wrote {n} candidates to {args.csv}; fill in the rank column, then "
          f"`grpokit rm import-csv {args.csv} {args.rankings}`")
    return 0


def cmd_import_csv(args) -> int:
    from grpokit.rm import import_csv, pairs

    rows = import_csv(args.csv, args.rankings, args.overwrite)
    print(f"wrote {len(rows)} ranked prompts ({len(pairs(rows))} pairs) to {args.rankings}")
    return 0


def cmd_train(args) -> int:
    from grpokit.rm import fmt_accuracy, train_reward_model

    info = train_reward_model(args.rankings, args.base, args.out, eval_fraction=args.eval_fraction, seed=args.seed,
                              epochs=args.epochs, max_steps=args.max_steps, learning_rate=args.learning_rate,
                              batch_size=args.batch_size, max_length=args.max_length)
    h = info["heldout"]
    print(f"trained {info['steps']} steps in {info['seconds']:.0f}s; training-pair accuracy "
          f"{fmt_accuracy(info['train']['accuracy'])}")
    if h["pairs"]:
        print(f"held-out pairwise accuracy {fmt_accuracy(h['accuracy'])} on {h['pairs']} pairs of "
              f"{len(info['heldout_prompts'])} prompts (chance: 50%)")
    else:
        print("no held-out prompts (--eval-fraction 0): held-out pairwise accuracy not measured")
    print(f"reward model: {args.out} (use it with `{{name: reward_model, params: {{path: {args.out}}}}}`)")
    return 0


def cmd_eval(args) -> int:
    from grpokit.rm import evaluate_reward_model, fmt_accuracy

    r = evaluate_reward_model(args.rm_dir, args.rankings)
    print(f"pairwise accuracy {fmt_accuracy(r['accuracy'])} on {r['pairs']} pairs of {r['prompts']} prompts "
          f"(mean margin {r['mean_margin']:.3f})")
    if "heldout" in r:
        h = r["heldout"]
        print(f"held-out prompts only (the model trained on the rest of this file): {fmt_accuracy(h['accuracy'])} "
              f"on {h['pairs']} pairs")
    print(f"results: {r['path']}")
    return 0
