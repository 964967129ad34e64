"""`grpokit rewards ...`: list the rewards, score completions offline, audit a recipe's reward.

    grpokit rewards list
    grpokit rewards score --reward math_correctness --param 'markers=["Answer:"]' --input rows.jsonl
    grpokit rewards score --reward my_rewards:score --input rows.jsonl      # your own function (or FILE.py:FN)
    grpokit rewards audit recipes/smollm2-arithmetic.yaml

Each handler takes the parsed args and returns the exit code. Bad inputs
raise `GrpokitError` (exit 2), which the main CLI prints without a traceback.

`score` prints one JSON object per input row, in order, and nothing else on stdout (what the reward itself
prints goes to stderr): `reward` (float or
null) plus the reward's details (`reason`, `predicted`, ... where the reward
explains itself) or `error` when scoring that row raised; it exits 1 when any
row raised, and 2 when your own function ran past `--timeout` (the next rows
would wait as long). `--answer-field` / `--question-field` give a row's own
column to the reward as `answer` / `question`. `audit` exits 1 when a trick
scores at least as much as an honest wrong answer (naming the reward that pays
for it) or when a reward raised (counted, with the first traceback; see
`grpokit.audit`).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from grpokit.cli.output import add_set_option
from grpokit.data import closest_column, grouped, resolve_data_path
from grpokit.data.formats import MAX_ROW_DEPTH
from grpokit.errors import GrpokitError, Problem
from grpokit.recipe import RewardConfig, load_recipe
from grpokit.rewards import (
    LEARNED_REWARDS,
    OwnRewardError,
    RewardFunction,
    available,
    build_own,
    build_reward,
    completion_text,
    get_spec,
    is_own,
    signature_problems,
)
from grpokit.rewards.guard import OwnRewardTimeout, hard_deadlines

_MAX_REPORTED_PROBLEMS = 20  # a wholly wrong file would otherwise print one problem per line


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "rewards", help="list, score and audit the verifiable rewards", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="rewards_command", metavar="{list,score,audit}", required=True)

    p = sub.add_parser("list", help="reward names, what each checks, parameters and dataset columns")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("score", help="score completions from a JSONL file; one JSON result per row on stdout")
    p.add_argument("--reward", required=True, metavar="NAME|MODULE:FN|FILE.py:FN",
                   help="a built-in reward (see `grpokit rewards list`), or your own function: module:function "
                   "(importable, or in the current folder) or path/to/file.py:function")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE",
        help="reward parameter; VALUE is read as JSON when it parses (2, true, [\"A:\"]), else as a string",
    )
    p.add_argument("--input", required=True, help="JSONL: each row has `completion` and the columns the reward reads")
    p.add_argument("--answer-field", metavar="COLUMN", help="the rows' column holding the gold answer: the reward "
                   "gets it as `answer` as well (as a recipe's data.answer_field does)")
    p.add_argument("--question-field", metavar="COLUMN", help="the rows' column holding the question, likewise "
                   "given as `question`")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="your own function: seconds one row may take before it is stopped (default 60)")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("audit", help="try adversarial completions against a recipe's combined reward")
    p.add_argument("recipe", help="recipe YAML")
    p.add_argument("--rows", type=int, default=8, help="training rows to build the tricks from (default 8)")
    add_set_option(p, "override a recipe value (repeatable) before auditing it")
    p.set_defaults(func=cmd_audit)


# ------------------------------------------------------------------ list


def cmd_list(args: argparse.Namespace) -> int:
    for name in available():
        spec = get_spec(name)
        defaults = spec.param_defaults()
        print(name)
        print(f"  checks:  {spec.description}")
        print(f"  role:    {spec.role}" + (f" (evaluation reports its {spec.metric})" if spec.metric else ""))
        print(f"  columns: {', '.join(spec.columns) or '(completion only)'}")
        for param, help_text in spec.params.items():
            print(f"  param {param} = {defaults.get(param)!r}: {help_text}")
        print()
    return 0


# ----------------------------------------------------------------- score


def parse_params(assignments: list[str]) -> dict:
    params, problems = {}, []
    for a in assignments:
        key, sep, raw = a.partition("=")
        if not sep or not key.strip():
            problems.append(Problem(f"--param {a}", "expected KEY=VALUE", "write e.g. --param min_reasoning_lines=2"))
            continue
        try:
            params[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            params[key.strip()] = raw  # a bare word is a string: --param marker=Answer:
    if problems:
        raise GrpokitError(problems, exit_code=2)
    return params


def _build(name: str, params: dict, timeout_s: float | None = None) -> RewardFunction:
    module, sep, function = name.rpartition(":")
    if sep and (module.endswith(".py") or "/" in module):
        return _build_own({"path": str(Path(module).resolve()), "function": function, "timeout_s": timeout_s},
                          params)
    if is_own(name):
        return _build_own({"name": name, "timeout_s": timeout_s}, params)
    try:
        return build_reward(name, params)
    except KeyError as e:
        fix = f"use one of: {', '.join(available())}, or your own function as module:function or FILE.py:function"
        raise GrpokitError([Problem("--reward", str(e.args[0]), fix)], exit_code=2) from None
    except (TypeError, ValueError) as e:  # unknown or badly typed parameters, checked by the factory
        raise GrpokitError([Problem("--param", str(e), "see `grpokit rewards list` for the parameters")], exit_code=2) from None


def _build_own(entry: dict, params: dict) -> RewardFunction:
    """Your own function, loaded and signature-checked exactly as a recipe's `rewards:` entry would be."""
    try:
        fn = build_own(RewardConfig(**entry, params=params), Path.cwd(), "--reward")
    except OwnRewardError as e:
        raise GrpokitError([e.problem]) from None
    found = signature_problems(fn.function, params, None)
    if found:
        raise GrpokitError([Problem(f"--param {loc[1]}" if loc else "--reward", what, fix) for loc, what, fix in found])
    return fn


_MAX_DIGITS = sys.get_int_max_str_digits() or 10**9  # Python refuses to convert a longer integer string (0: no limit)


class _HugeInt(str):
    """A JSON integer longer than Python converts, kept as its digits and reported."""


def _int(digits: str) -> int | _HugeInt:
    return int(digits) if len(digits.lstrip("-")) <= _MAX_DIGITS else _HugeInt(digits)


def _structure_problem(row: object) -> tuple[str, str] | None:
    """(what, fix) for a row nested past MAX_ROW_DEPTH (grpokit.data.formats, as data files) or holding an integer
    too long to convert; iterative, so a 200,000-deep row is an answer, not a RecursionError."""
    stack = [(row, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_ROW_DEPTH:
            return f"nested more than {MAX_ROW_DEPTH} levels deep", "keep rows a few levels deep"
        if isinstance(item, _HugeInt):
            return (f"an integer of {len(item.lstrip('-')):,} digits ({item[:12]}...), past the {_MAX_DIGITS:,} "
                    "digits Python converts", 'write a number that long as a string ("123...")')
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


def read_rows(path: str, columns: tuple[str, ...], fields: dict[str, str] | None = None) -> list[dict]:
    """The input rows, or GrpokitError listing every bad line (file:LINE, what, fix). `fields` ({"answer":
    "target"}, from --answer-field / --question-field): the row's own column is also given under the task's name,
    as training gives a recipe's data.answer_field."""
    file = Path(resolve_data_path(path, Path.cwd()))  # builtin:... as in a recipe
    if not file.is_file():
        raise GrpokitError([Problem(path, "input file not found", "pass an existing JSONL file to --input")])
    rows, problems = [], []
    with file.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:  # depth bounded as data files are (grpokit.data.formats); ints past Python's own limit kept as digits
                row = json.loads(line, parse_int=_int)
            except json.JSONDecodeError as e:
                problems.append(Problem(where, f"not valid JSON ({e.msg})", "write one JSON object per line"))
                continue
            except RecursionError:  # json's C scanner recurses per level
                problems.append(Problem(where, "nested too deeply to read (thousands of levels)",
                                        "keep rows a few levels deep"))
                continue
            structure = _structure_problem(row)
            if structure:
                problems.append(Problem(where, *structure))
                continue
            if not isinstance(row, dict):
                problems.append(Problem(where, f"a row must be a JSON object, got {type(row).__name__}",
                                        'write {"completion": "...", ...}'))
                continue
            for task_name, own in (fields or {}).items():
                if own in row:
                    row[task_name] = row[own]
                else:
                    close = closest_column(task_name, (own,), row)
                    problems.append(Problem(where, f"row has no {own!r} column (--{task_name}-field; the row has: "
                                            f"{', '.join(row) or 'no columns'})",
                                            f"did you mean --{task_name}-field {close}?" if close else
                                            f"name a column the rows have with --{task_name}-field"))
            if "completion" not in row:
                problems.append(Problem(where, "row has no 'completion'", 'add "completion": "<model output>"'))
            else:
                try:
                    completion_text(row["completion"])
                except TypeError as e:
                    problems.append(Problem(where, str(e), "use a string or a list of {role, content} messages"))
            missing = [c for c in columns if c not in row]
            if missing:
                hint = "; or name the column that holds it: " + ", ".join(
                    f"--{c}-field {closest_column(c, (c,), row) or 'COLUMN'}" for c in missing if c in
                    ("answer", "question")) if any(c in ("answer", "question") for c in missing) else ""
                problems.append(Problem(where, f"row has no {', '.join(map(repr, missing))} column(s), which the reward "
                                        f"reads (the row has: {', '.join(row)})",
                                        f"add {', '.join(map(repr, missing))} to every row{hint}"))
            rows.append(row)
    problems = grouped(problems)  # one line for a column every row lacks
    if problems:
        shown = problems[:_MAX_REPORTED_PROBLEMS]
        if len(problems) > len(shown):
            shown.append(Problem(path, f"... and {len(problems) - len(shown)} more problem(s)"))
        raise GrpokitError(shown, exit_code=2, title=f"{path}: {len(problems)} problem(s) in the input file")
    if not rows:
        raise GrpokitError([Problem(path, "the input file has no rows", "add one JSON object per line")])
    return rows


def score_row(fn: RewardFunction, row: dict) -> dict:
    """The reward of one row through the same path as training, plus the reward's own explanation."""
    text = completion_text(row["completion"])
    columns = {k: v for k, v in row.items() if k != "completion"}
    # A row's `prompt` (TRL's dataset column) reaches rewards that read prompts as training hands it: `prompts`.
    given = {"prompts": [row["prompt"]]} if "prompt" in row and "prompts" in fn.extras else {}
    scores, errors = fn.score_texts([text], {**{k: [v] for k, v in columns.items()}, **given})
    if errors:
        return {"reward": None, "error": str(errors[0]).removeprefix("row 0: ").removeprefix("rows 0-0: "),
                "exception": errors[0]}
    out = {"reward": scores[0]}
    explain = getattr(fn.scorer, "explain", None)
    if explain is not None:
        out.update({k: v for k, v in explain(text, **columns).items() if k != "reward"})
    return out


def cmd_score(args: argparse.Namespace) -> int:
    if not args.timeout > 0:
        raise GrpokitError([Problem(f"--timeout {args.timeout:g}", "must be more than 0 seconds", "e.g. --timeout 60")])
    # stdout holds the JSON rows and nothing else: what a reward prints (an own module's print at import, a debug
    # print while scoring) goes to stderr, so `... | jq` and a program reading the rows never see it.
    rows_out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return _score_rows(args, rows_out)


def _score_rows(args: argparse.Namespace, rows_out) -> int:
    fn = _build(args.reward, parse_params(args.param), args.timeout)
    fields = {k: v for k, v in (("answer", args.answer_field), ("question", args.question_field)) if v}
    rows = read_rows(args.input, fn.spec.columns, fields)
    failed = 0
    for i, row in enumerate(rows):
        with hard_deadlines():  # a function that swallows the interrupt at its deadline ends the command, named
            out = score_row(fn, row)
        exc = getattr(out.pop("exception", None), "exc", None)
        if isinstance(exc, OwnRewardTimeout):  # the next rows would wait as long: stop here, and say so
            raise GrpokitError([Problem(f"{args.input} row {i + 1}", str(exc), exc.fix.replace(
                "raise timeout_s on its rewards: entry", "raise --timeout"))], exit_code=2)
        failed += "error" in out
        print(json.dumps(out, ensure_ascii=False), file=rows_out, flush=True)
    if failed:
        print(f"reward {args.reward!r} raised on {failed}/{len(rows)} row(s); see the 'error' fields", file=sys.stderr)
    return 1 if failed else 0


# ----------------------------------------------------------------- audit


def cmd_audit(args: argparse.Namespace) -> int:
    from grpokit.audit import audit_progress, audit_recipe, audit_warnings
    from grpokit.cli.output import err, print_notes
    recipe = load_recipe(args.recipe, args.set)
    print_notes(recipe)
    log = lambda line: err.print(line, markup=False)  # noqa: E731 - progress to stderr; the table is the result
    if any(r.name in LEARNED_REWARDS for r in recipe.rewards):  # no fixed verdict to trick: say what to watch
        for line in audit_warnings(recipe):
            print(line)
        return 0
    if recipe.env is not None:  # tool tasks: scripted tool hacks instead of answer-line tricks
        from grpokit.audit import audit_recipe_tools, tool_audit_table

        with audit_progress(f"tool hacks on up to {args.rows} row(s) of {recipe.env.name}", log):
            results = audit_recipe_tools(recipe, max_rows=args.rows)
        print(tool_audit_table(results))
        return 0 if all(r.ok for r in results) else 1
    from grpokit.audit.rewards import NoTricks
    try:
        result = audit_recipe(recipe, max_rows=args.rows, log=log)
    except NoTricks as e:  # no trick fits: say so, and what to check by hand
        raise GrpokitError([Problem(args.recipe, str(e), e.fix)]) from None
    except ValueError as e:
        raise GrpokitError([Problem(args.recipe, str(e), "point data.train at rows the task's tricks can be built "
                                    "from (numeric answers; tests; schemas; db + gold query)")]) from None
    print(result.table())
    return 0 if result.ok else 1

