"""Load and check question/answer datasets.

    grpokit data check train.jsonl

Rows are JSON objects `{question, answer}`; `prompt` / `expected_answer` (the
articles' names) are accepted too, and the recipe can name other columns.
Every other column passes through to the rewards. GSM8K answers
(`... #### 72`) are kept whole; the verifier reads the part after `####`.

`check_jsonl` reports every problem with its line number. Unusable rows
(invalid JSON, not an object, a missing / empty / non-string question, a
missing or empty answer, or an answer that is a list, object or boolean)
make the file unusable unless the caller skips them; blank lines, a BOM and
duplicate questions are warnings. Numeric answers are accepted and turned
into strings.
"""
from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

QUESTION_FIELDS = ("question", "prompt")
ANSWER_FIELDS = ("answer", "expected_answer")


@dataclass
class DataReport:
    path: str
    rows: list[dict] = field(default_factory=list)  # usable rows, normalised to question/answer
    errors: list[Problem] = field(default_factory=list)  # each makes one row unusable
    warnings: list[Problem] = field(default_factory=list)
    lines_read: int = 0
    answer_types: Counter = field(default_factory=Counter)
    duplicates: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        types = ", ".join(f"{k}: {v}" for k, v in sorted(self.answer_types.items())) or "none"
        return (f"{self.path}: {len(self.rows)} usable rows, {len(self.errors)} unusable, "
                f"{self.duplicates} duplicate questions, {len(self.warnings)} warnings; answer types: {types}")


def _pick(obj: dict, preferred: str | None, fallbacks: tuple[str, ...]) -> str | None:
    if preferred:
        return preferred if preferred in obj else None
    return next((k for k in fallbacks if k in obj), None)


def _answer_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        if "####" in value:
            return "gsm8k"
        try:
            float(value.replace(",", ""))
            return "numeric string"
        except ValueError:
            return "text"
    return type(value).__name__


def normalize_row(obj: object, where: str, question_field: str | None = None,
                  answer_field: str | None = None) -> tuple[dict | None, list[Problem]]:
    """One raw row -> (normalised row or None, problems that make it unusable)."""
    qf_names = (question_field,) if question_field else QUESTION_FIELDS
    af_names = (answer_field,) if answer_field else ANSWER_FIELDS
    if not isinstance(obj, dict):
        return None, [Problem(where, f"row is a JSON {type(obj).__name__}, not an object",
                              'write one object per line: {"question": ..., "answer": ...}')]
    problems = []
    qk = _pick(obj, question_field, QUESTION_FIELDS)
    ak = _pick(obj, answer_field, ANSWER_FIELDS)
    if qk is None:
        problems.append(Problem(where, f"missing question (looked for {' / '.join(qf_names)})",
                                "add a \"question\" field, or set data.question_field in the recipe"))
    elif not isinstance(obj[qk], str):
        problems.append(Problem(f"{where} {qk}", f"question must be a string, got {type(obj[qk]).__name__}",
                                "write the question as a JSON string"))
    elif not obj[qk].strip():
        problems.append(Problem(f"{where} {qk}", "question is empty", "fill it in or delete the row"))
    if ak is None:
        problems.append(Problem(where, f"missing answer (looked for {' / '.join(af_names)})",
                                "add an \"answer\" field, or set data.answer_field in the recipe"))
    else:
        a = obj[ak]
        if a is None or isinstance(a, (bool, list, dict)):
            problems.append(Problem(f"{where} {ak}", f"answer must be a string or a number, got {json.dumps(a)[:40]}",
                                    'write the gold answer as a string, e.g. "72"'))
        elif isinstance(a, str) and not a.strip():
            problems.append(Problem(f"{where} {ak}", "answer is empty", "fill in the gold answer or delete the row"))
    if problems:
        return None, problems
    row = {k: v for k, v in obj.items() if k not in (qk, ak)}
    row.pop("prompt", None)  # `prompt` is the rendered prompt column TRL reads; never pass a raw one through
    row["question"] = obj[qk]
    a = obj[ak]
    row["answer"] = a if isinstance(a, str) else (str(int(a)) if isinstance(a, float) and a.is_integer() else str(a))
    return row, []


def check_rows(objects: list[tuple[str, object]], path: str, question_field=None, answer_field=None,
               report: DataReport | None = None) -> DataReport:
    report = report or DataReport(path)
    first_seen: dict[str, str] = {}
    for where, obj in objects:
        row, problems = normalize_row(obj, where, question_field, answer_field)
        if problems:
            report.errors.extend(problems)
            continue
        report.answer_types[_answer_type(obj[_pick(obj, answer_field, ANSWER_FIELDS)])] += 1
        q = row["question"].strip()
        if q in first_seen:
            report.duplicates += 1
            report.warnings.append(Problem(where, f"duplicate question (first at {first_seen[q]})",
                                           "remove the duplicate: it weighs that question twice"))
        else:
            first_seen[q] = where
        report.rows.append(row)
    return report


def check_jsonl(path: str | Path, question_field: str | None = None, answer_field: str | None = None) -> DataReport:
    path = Path(path)
    report = DataReport(str(path))
    if not path.is_file():
        report.errors.append(Problem(str(path), "file not found", "check the path"))
        return report
    objects = []
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        report.warnings.append(Problem(f"{path}:1", "file starts with a UTF-8 BOM (ignored)",
                                       "save the file as UTF-8 without BOM"))
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        report.errors.append(Problem(str(path), f"not UTF-8 text ({e.reason} at byte {e.start})",
                                     "re-encode the file as UTF-8"))
        return report
    for n, line in enumerate(text.splitlines(), start=1):
        report.lines_read = n
        where = f"{path}:{n}"
        if not line.strip():
            report.warnings.append(Problem(where, "blank line (skipped)", "delete it"))
            continue
        try:
            objects.append((where, json.loads(line)))
        except json.JSONDecodeError as e:
            report.errors.append(Problem(where, f"invalid JSON: {e.msg} at column {e.colno}",
                                         "each line must be one complete JSON object"))
    return check_rows(objects, str(path), question_field, answer_field, report)


def load_hf(spec: str, config: str | None, split: str) -> list[tuple[str, object]]:
    """Rows of a hub dataset (`hf:openai/gsm8k`), as (where, object) pairs."""
    import datasets

    name = spec[len("hf:"):]
    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # noqa: BLE001 - network / hub errors come in many types; all mean "cannot load"
        raise GrpokitError([Problem(spec, f"cannot load hub dataset: {str(e).splitlines()[0][:200]}",
                                    "check the dataset id and network access, or download it to a .jsonl file")]) from None
    return [(f"{spec}[{split}]#{i}", dict(r)) for i, r in enumerate(ds)]


def load_rows(path_or_spec: str, *, question_field=None, answer_field=None, skip_bad_rows=False,
              hf_config=None, split="train") -> tuple[list[dict], DataReport]:
    """Usable rows of a dataset, or GrpokitError (exit 1) if some are unusable and not skipped."""
    if path_or_spec.startswith("hf:"):
        report = check_rows(load_hf(path_or_spec, hf_config, split), path_or_spec, question_field, answer_field)
    else:
        report = check_jsonl(path_or_spec, question_field, answer_field)
    if report.errors and not skip_bad_rows:
        shown = report.errors[:20]
        more = [Problem(path_or_spec, f"... and {len(report.errors) - 20} more")] if len(report.errors) > 20 else []
        raise GrpokitError(shown + more, exit_code=1,
                           title=f"{path_or_spec}: {len(report.errors)} unusable row(s); fix them, or set "
                                 "data.skip_bad_rows: true to train without them")
    if not report.rows:
        raise GrpokitError([Problem(path_or_spec, "no usable rows", "run `grpokit data check` on the file")], exit_code=1)
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
    seen = {r["question"].strip() for r in train}
    return [r["question"] for r in eval_rows if r["question"].strip() in seen]
