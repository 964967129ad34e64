"""Load and check question/answer datasets.

    grpokit data check train.jsonl [--template chat] [--task math|code|json|...]

Rows are objects `{question, answer}`; `prompt` / `expected_answer` (the
articles' names) are accepted too, and the recipe can name other columns.
Every other column passes through to the rewards. GSM8K answers
(`... #### 72`) are kept whole; the verifier reads the part after `####`.
Files: .jsonl, .json, .csv, .parquet, `builtin:...` (a bundled file, as
recipes name them) or hf:ID (see `formats`).

A row that carries a task family's own columns is read and checked as that family says, whatever the task
(its `layout` in grpokit.families): code rows as HumanEval writes them (`prompt`, `test`, `entry_point`), as
`grpokit data import humaneval` writes them, or with a `tests` list of assert lines, need no answer (the
reference solution is optional); so do JSON rows with a `schema`; tool rows get their tool columns checked.

A task family (grpokit.families: a recipe's, or `--task`) adds its own row
check: a code task refuses rows without tests, a JSON task rows without a
usable schema or with a gold answer that breaks it, and a math task warns
about gold answers its reward does not read as numbers.

The question may be TRL's conversational form: a list of messages
`{"role": ..., "content": ...}` (roles system/user/assistant/tool, string
contents, the last one from the user). Such rows need the chat template.

`check_file` reports every problem with its line (or row) number. Unusable
rows (invalid JSON, a line that is not UTF-8, not an object, a missing /
empty / non-string question, a bad message list, a missing or empty answer,
an answer that is a list, object, boolean, NaN or infinite; a code row's
broken tests, a family's row check) make the file
unusable unless the caller skips them; an empty file, an unreadable table or
a missing column cannot be skipped. Blank lines, a BOM, duplicate questions
and a family's answer warnings are warnings. Numeric
answers are accepted and turned into strings. A row with several problems
counts once.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from grpokit.data.formats import RawData, read_file, read_hf
from grpokit.data.paths import resolve_data_path
from grpokit.data.rows import (
    ANSWER_FIELDS,
    QUESTION_FIELDS,
    answer_type,
    closest_column,
    normalize_row,
    pick_field,
    question_key,
    question_text,
)
from grpokit.datasets import BUILTIN_DATA
from grpokit.errors import GrpokitError, Problem, UnusableData
from grpokit.families import Family, judged_without_answer, layout_of, layout_problems


@dataclass
class DataReport:
    path: str
    rows: list[dict] = field(default_factory=list)  # usable rows, normalised to question/answer
    errors: list[Problem] = field(default_factory=list)  # row errors make rows unusable; file errors the file
    warnings: list[Problem] = field(default_factory=list)
    lines_read: int = 0
    answer_types: Counter = field(default_factory=Counter)
    duplicates: int = 0
    unusable: int = 0  # rows (or lines) lost, each counted once however many problems it has
    fatal: bool = False  # a problem with the whole file: skip_bad_rows cannot help
    conversational: int = 0  # usable rows whose question is a message list
    flagged_answers: list[str] = field(default_factory=list)  # wheres of the answers the family warns about
    wheres: list[str] = field(default_factory=list)  # where each usable row is (file:line), aligned with rows
    columns: list[str] = field(default_factory=list)  # every column the file's rows have, in first-seen order

    @property
    def ok(self) -> bool:
        return not self.errors

    def columns_line(self) -> str:
        return f"{self.path}: columns found: {', '.join(self.columns) or '(none)'}"

    def summary(self) -> str:
        types = ", ".join(f"{k}: {v}" for k, v in sorted(self.answer_types.items())) or "none"
        chat = f" ({self.conversational} conversational)" if self.conversational else ""
        return (f"{self.path}: {len(self.rows)} usable rows{chat}, {self.unusable} unusable, "
                f"{self.duplicates} duplicate questions, {len(self.warnings)} warnings; answer types: {types}")


def grouped(problems: list[Problem], limit: int = 3) -> list[Problem]:
    """Problems with the same what and fix on several rows as one: `FILE: 40 rows (lines 1, 2, 3, ...): missing
    question ...` instead of 40 lines. Order: each group where its first row was."""
    groups: dict[tuple[str, str, str, str], list[Problem]] = {}
    for p in problems:
        file, _, rest = _split_where(p.where)
        groups.setdefault((file, rest, p.message, p.fix or ""), []).append(p)
    out = []
    for (file, rest, message, _), members in groups.items():
        if len(members) == 1:
            out.append(members[0])
            continue
        lines = [_split_where(p.where)[1] for p in members]
        shown = ", ".join(lines[:limit]) + (", ..." if len(lines) > limit else "")
        label = "lines" if all(x.isdigit() for x in lines) else "rows"
        out.append(Problem(f"{file}{rest}: {len(members)} rows ({label} {shown})", message, members[0].fix))
    return out


def _split_where(where: str) -> tuple[str, str, str]:
    """'train.jsonl:12 answer' -> ('train.jsonl', '12', ' answer'); a where without a line: (where, where, '')."""
    m = re.match(r"^(.*?)(?::(\d+)|\s+row\s+(\d+))(\s.*)?$", where)
    if not m:
        return where, where, ""
    return m.group(1), m.group(2) or m.group(3), m.group(4) or ""


def check_rows(objects: list[tuple[str, object]], path: str, question_field=None, answer_field=None,
               report: DataReport | None = None, template: str | None = None,
               family: Family | None = None) -> DataReport:
    """Normalise rows into `report`; `family` (the task family the rows are for: grpokit.families) adds its row
    check (a code task refuses rows without tests, a JSON task rows without a usable schema) and its answer
    warning (a math task: answers its reward does not read as numbers)."""
    report = report or DataReport(path)
    first_seen: dict[str, str] = {}
    seen_columns = dict.fromkeys(report.columns)
    for where, obj in objects:
        own: list[Problem] = []
        if isinstance(obj, dict):
            seen_columns.update(dict.fromkeys(k for k in obj if isinstance(k, str)))
            if family is not None and family.row_problems is not None:  # the family's first: what the row lacks
                own = family.row_problems(obj, where, pick_field(obj, answer_field, ANSWER_FIELDS))
        row, problems = normalize_row(obj, where, question_field, answer_field, template)
        problems = own + problems
        if not problems:  # the family columns it carries, whatever the task: a code row's tests, a JSON row's schema,
            problems = layout_problems(row, where)  # a tool row's tools (each family's `layout`)
        if problems:
            report.errors.extend(problems)
            report.unusable += 1
            continue
        ak = pick_field(obj, answer_field, ANSWER_FIELDS)
        answer = obj[ak] if ak is not None else row.get("answer")  # code rows: the reference solution, if any
        owner = layout_of(row)  # a family's row counts as its kind (code tests, a schema), others by their answer
        kind = owner.layout.kind(row, answer) if owner is not None and owner.layout.kind is not None else None
        report.answer_types[kind or answer_type(answer)] += 1
        warning = family.answer_problem(answer, where) if family is not None and family.answer_problem else None
        if warning is not None:
            report.flagged_answers.append(where)
            report.warnings.append(warning)
        report.conversational += isinstance(row["question"], list)
        key = question_key(row["question"])
        if key in first_seen:
            report.duplicates += 1
            report.warnings.append(Problem(where, f"duplicate question (first at {first_seen[key]})",
                                           "remove the duplicate: it weighs that question twice"))
        else:
            first_seen[key] = where
        report.rows.append(row)
        report.wheres.append(where)
    report.columns = list(seen_columns)
    return report


def _missing_columns(raw: RawData, path: str, question_field, answer_field) -> list[Problem]:
    """A table without a question or answer column: one problem, not one per row."""
    if raw.columns is None or not raw.rows:
        return []
    out = []
    code_table = judged_without_answer(dict.fromkeys(raw.columns, True))  # columns a family judges without an answer
    for what, preferred, names, key in (("question", question_field, QUESTION_FIELDS, "question_field"),
                                        ("answer", answer_field, ANSWER_FIELDS, "answer_field")):
        if what == "answer" and code_table and not answer_field:
            continue
        if pick_field(dict.fromkeys(raw.columns), preferred, names) is None:
            looked = (preferred,) if preferred else names
            other = pick_field(dict.fromkeys(raw.columns), *((answer_field, ANSWER_FIELDS) if what == "question" else
                                                       (question_field, QUESTION_FIELDS)))
            close = closest_column(what, looked, raw.columns, other)
            column = close or "COLUMN"
            out.append(Problem(path, f"no {what} column (looked for {' / '.join(looked)}; the file has: "
                               f"{', '.join(raw.columns)})",
                               (f"did you mean {close!r}? " if close else f"rename a column to {what}, or ") +
                               f"name it: data.{key}: {column} in a recipe, --{key.replace('_', '-')} {column} for "
                               "`grpokit data check`"))
    return out


def question_keys(paths: list[str]) -> set[str]:
    """The question keys of every row in these files (for `--exclude`): strings stripped, conversations as JSON."""
    return {question_key(r["question"]) for path in paths for r in load_rows(str(path))[0]}


def check_file(path: str | Path, question_field: str | None = None, answer_field: str | None = None, *,
               template: str | None = None, hf_config: str | None = None, split: str = "train",
               family: Family | None = None) -> DataReport:
    """Every problem of a data file (any of formats.FORMATS), bundled file (`builtin:...`, as recipes name them)
    or hub dataset (`hf:ID`), with where it is."""
    spec = str(path)
    if spec.startswith("builtin:"):
        path = resolve_data_path(spec, Path.cwd())
        if not Path(path).is_file():
            files = sorted(str(f.relative_to(BUILTIN_DATA)) for f in BUILTIN_DATA.rglob("*.jsonl")
                           if "repos" not in f.parts)
            return DataReport(spec, errors=[Problem(spec, "no such bundled file", "bundled files: " + ", ".join(
                f"builtin:{f}" for f in files))], fatal=True)
    raw = read_hf(spec, hf_config, split) if spec.startswith("hf:") else read_file(path)
    report = DataReport(spec, warnings=list(raw.warnings), lines_read=raw.lines_read)
    file_errors = raw.file_errors + _missing_columns(raw, spec, question_field, answer_field)
    if file_errors:
        report.errors, report.fatal = file_errors, True
        return report
    report.errors.extend(raw.row_errors)
    report.unusable += len(raw.row_errors)
    return check_rows(raw.rows, spec, question_field, answer_field, report, template, family)



def load_rows(path_or_spec: str, *, question_field=None, answer_field=None, skip_bad_rows=False,
              hf_config=None, split="train", template: str | None = None,
              family: Family | None = None) -> tuple[list[dict], DataReport]:
    """Usable rows of a dataset, or GrpokitError (exit 1) if some are unusable and not skipped."""
    report = check_file(path_or_spec, question_field, answer_field, template=template, hf_config=hf_config,
                        split=split, family=family)
    if report.fatal:
        raise UnusableData(report.errors, title=f"{path_or_spec}: cannot be used")
    if report.errors and not skip_bad_rows:
        errors = grouped(report.errors)  # 40 rows missing one column: one line, not 40
        shown = errors[:20]
        more = [Problem(path_or_spec, f"... and {len(errors) - 20} more")] if len(errors) > 20 else []
        raise UnusableData(shown + more,
                           title=f"{path_or_spec}: {report.unusable} unusable row(s); fix them, or set "
                                 "data.skip_bad_rows: true to train without them")
    if not report.rows:
        raise UnusableData([Problem(path_or_spec, "no usable rows", "run `grpokit data check` on the file")])
    return report.rows, report


def split_rows(rows: list[dict], eval_fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """A seeded train/eval split; at least one eval row when eval_fraction > 0."""
    if eval_fraction <= 0:
        return rows, []
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    n_eval = max(1, int(round(len(rows) * eval_fraction)))
    if n_eval >= len(rows):
        raise GrpokitError([Problem("data.eval_fraction", f"{len(rows)} rows are too few to split off {eval_fraction:.0%}",
                                    "add rows, lower eval_fraction, or give data.eval")])
    eval_idx = set(idx[:n_eval])
    return [r for i, r in enumerate(rows) if i not in eval_idx], [rows[i] for i in sorted(eval_idx)]


def overlapping_questions(train: list[dict], eval_rows: list[dict]) -> list[str]:
    seen = {question_key(r["question"]) for r in train}
    return [question_text(r["question"]) for r in eval_rows if question_key(r["question"]) in seen]
