"""`grpokit data check | generate | perturb | rewrite | import | mine-failures`: dataset tools."""
from __future__ import annotations

import time

from grpokit.cli.output import add_overwrite_option, err
from grpokit.data import check_file, grouped, load_rows, question_keys
from grpokit.errors import GrpokitError, Problem
from grpokit.families import FAMILIES, generators, importers, variant_by_name
from grpokit.run.reads import reading
from grpokit.run.writer import check_target, write_rows
from grpokit.templates import TEMPLATE_NAMES

MAX_GENERATED_ROWS = 1_000_000  # far above any training set generated here; a larger number is a typo


def register(sub) -> None:
    data = sub.add_parser("data", help="dataset tools").add_subparsers(dest="data_command", required=True,
                                                                        metavar="ACTION")
    dc = data.add_parser("check", help="report every problem in a dataset (exit 1 if a row or the file is unusable)")
    dc.add_argument("file", help="a .jsonl, .json, .csv or .parquet file, builtin:<bundled file>, or hf:<dataset id>")
    dc.add_argument("--question-field", help="column holding the question (default: question, then prompt)")
    dc.add_argument("--answer-field", help="column holding the answer (default: answer, then expected_answer)")
    dc.add_argument("--template", choices=TEMPLATE_NAMES,
                    help="the recipe's data.template: plain templates refuse message-list questions")
    checked = {n: f.check for n, f in FAMILIES.items() if f.check}
    dc.add_argument("--task", choices=list(FAMILIES), help="the task family the rows are for, which adds its own "
                    "checks: " + "; ".join(f"{n}: {c}" for n, c in checked.items()) + "; "
                    + ", ".join(n for n in FAMILIES if n not in checked) + ": none beyond every row's")
    dc.set_defaults(func=cmd_data_check)
    dg = data.add_parser("generate", help="generate a task dataset")
    dg.add_argument("task", choices=list(generators()), help="which task to generate: " + ", ".join(
        f"{n} ({g.what})" for n, g in generators().items()))
    dg.add_argument("out", help="where to write the rows (.jsonl)")
    dg.add_argument("--rows", type=int, default=500, help="how many rows (default 500)")
    dg.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same rows (default 0)")
    dg.add_argument("--exclude", action="append", metavar="FILE.jsonl", help="never produce questions found in FILE")
    for option in {o.flag: o for g in generators().values() for o in g.options}.values():
        dg.add_argument(f"--{option.flag}", dest=f"option_{option.keyword}", type=option.type, help=option.help)
    add_overwrite_option(dg)
    dg.set_defaults(func=cmd_data_generate)
    # Two evaluation-only copies of generated rows (grpokit.families' variants): the same arguments each.
    for name, func, what, made, seed in (
            ("perturb", cmd_data_perturb, "redraw the numbers of generated problems and recompute the answers",
             "perturbed", "the new numbers"),
            ("rewrite", cmd_data_rewrite, "ask generated problems in words no training row uses (same numbers and "
             "answers): a rewritten evaluation set", "rewritten", "the choice of phrasing")):
        source = "|".join(_generators_copied_by(made))
        dc = data.add_parser(name, help=what)
        dc.add_argument("file", help=f"rows from `grpokit data generate {source}` (.jsonl)")
        dc.add_argument("out", help=f"where to write the {made} rows (.jsonl)")
        dc.add_argument("--seed", type=int, default=0, help=f"random seed for {seed} (default 0)")
        dc.add_argument("--exclude", action="append", metavar="FILE.jsonl",
                        help="never produce questions found in FILE (train)")
        add_overwrite_option(dc)
        dc.set_defaults(func=func)
    di = data.add_parser("import", help="turn a packaged benchmark into grpokit rows")
    di.add_argument("source", choices=list(importers()), help="which benchmark: " + ", ".join(
        f"{n} ({g.what})" for n, g in importers().items()))
    di.add_argument("out", help="where to write the rows (.jsonl)")
    add_overwrite_option(di)
    di.set_defaults(func=cmd_data_import)
    dm = data.add_parser("mine-failures", help="rows a run's best checkpoint got wrong (+ failures from use), "
                                               "deduplicated against its training set, for the next round")
    dm.add_argument("run_dir", help="an evaluated run directory (grpokit eval RUN_DIR)")
    dm.add_argument("--out", required=True, help="where to write the rows (.jsonl)")
    dm.add_argument("--from-file", metavar="FILE", help="failures collected in use, in the same row format")
    dm.add_argument("--results", metavar="FILE", help="eval results to mine (default RUN_DIR/eval/results.json)")
    add_overwrite_option(dm)
    dm.set_defaults(func=cmd_data_mine_failures)


def cmd_data_check(args) -> int:
    if args.file.startswith("hf:"):
        from grpokit.hub_access import hub_reachable, offline_reason

        if not hub_reachable():  # said at once; datasets then reads its cache instead of retrying for ~30 s
            err.print(f"[yellow]note:[/] offline ({offline_reason()}): {args.file} is read from the datasets "
                      "cache only", highlight=False)
    report = check_file(args.file, args.question_field, args.answer_field, template=args.template,
                        family=FAMILIES[args.task] if args.task else None)
    if report.columns:
        print(report.columns_line())
    for p in grouped(report.errors):  # "40 rows (lines 1, 2, 3, ...): missing question", not 40 lines
        print(f"error   {p}")
    for p in grouped(report.warnings):
        print(f"warning {p}")
    print(report.summary())
    return 0 if report.ok else 1


def cmd_data_generate(args) -> int:
    generator = generators()[args.task]
    most = min(MAX_GENERATED_ROWS, generator.most or MAX_GENERATED_ROWS)
    if not 1 <= args.rows <= most:
        raise GrpokitError([Problem("--rows", f"must be 1 to {most:,} for {args.task}, got {args.rows:,}" + (
            f" ({args.task} makes at most {most:,} distinct rows)" if most < MAX_GENERATED_ROWS else ""),
            f"e.g. --rows 500 (the default); at most --rows {most:,}")])
    given = {k[len("option_"):]: v for k, v in vars(args).items() if k.startswith("option_") and v is not None}
    own = {o.keyword: o for o in generator.options}
    foreign = [k for k in given if k not in own]
    if foreign:
        flags = [f"--{o.flag}" for g in generators().values() for o in g.options if o.keyword in foreign]
        raise GrpokitError([Problem(", ".join(dict.fromkeys(flags)), f"does not apply to {args.task}",
                                    "leave it out (`grpokit data generate --help` says which task each option is for)")])
    reading(*(args.exclude or []))
    check_target(args.out, replace=args.overwrite)  # before generating: a link, a hard link, --exclude itself
    t0 = time.perf_counter()
    try:
        rows = generator.make(args.rows, args.seed, question_keys(args.exclude or []), **given)
    except ValueError as e:  # a knob out of range, or fewer distinct rows than asked besides --exclude: it says which
        raise GrpokitError([Problem(f"grpokit data generate {args.task}", str(e),
                                    "change the options, ask for fewer rows, or exclude fewer questions")]) from None
    write_rows(args.out, rows, replace=args.overwrite)
    print(f"wrote {len(rows)} rows to {args.out} ({time.perf_counter() - t0:.1f} s to generate and, for countdown, "
          "solve them)")
    return 0


def _generators_copied_by(variant: str) -> list[str]:
    """The `data generate` names whose rows the families' variant called `variant` copies."""
    return [g for f in FAMILIES.values() if any(v.name == variant for v in f.variants) for g in f.generators]


def _write_variant(args, variant: str, verb: str, fix: str) -> int:
    """`data perturb|rewrite`: the family variant called `variant` applied to every row of args.file, written to
    args.out; refused with the first row it cannot copy."""
    reading(args.file, *(args.exclude or []))
    check_target(args.out, replace=args.overwrite)  # before reading: its own input is never written over
    rows = load_rows(args.file)[0]
    chosen = variant_by_name(rows, variant)
    bad = [i + 1 for i, r in enumerate(rows) if chosen is None or not chosen.applies(r)]
    if bad:
        copied = " or ".join(v.copies for f in FAMILIES.values() for v in f.variants if v.name == variant)
        sources = " or ".join(f"`grpokit data generate {g}`" for g in _generators_copied_by(variant))
        raise GrpokitError([Problem(f"{args.file} row {bad[0]}", f"{len(bad)} of {len(rows)} rows are not {copied}",
                                    f"{verb} only files from {sources}; {fix}")])
    write_rows(args.out, chosen.make(rows, args.seed, question_keys(args.exclude or [])), replace=args.overwrite)
    print(f"wrote {len(rows)} {variant} rows to {args.out}")
    return 0


def cmd_data_perturb(args) -> int:
    return _write_variant(args, "perturbed", "perturb", "for other sets `grpokit eval` reports the train-vs-held-out "
                          "gap instead")


def cmd_data_rewrite(args) -> int:
    return _write_variant(args, "rewritten", "rewrite", "with your own data, hold out a phrasing, a source or a "
                          "template yourself (docs/evaluation.md \"Rewritten questions\")")


def cmd_data_import(args) -> int:
    check_target(args.out, replace=args.overwrite)  # before the benchmark is read
    n = write_rows(args.out, importers()[args.source].make(), replace=args.overwrite)
    print(f"wrote {n} rows to {args.out}")
    return 0


def cmd_data_mine_failures(args) -> int:
    from grpokit.evaluation import mine_failures

    r = mine_failures(args.run_dir, args.out, args.from_file, args.results, args.overwrite)
    print(f"wrote {r['written']} rows to {r['out']}: {r['from_eval']} failed at eval step {r['step']}, "
          f"{r['from_file']} from --from-file; dropped {r['in_train']} already in training, {r['repeated']} repeats")
    print("note: held-out rows added to training no longer measure generalisation; evaluate the next round on a "
          "fresh held-out set")
    return 0
