"""Ranking files: candidate answers per prompt, ranked by a person, for training a reward model.

    grpokit rm candidates RECIPE --prompts prompts.jsonl --n 4 --out rankings.jsonl
    grpokit rm export-csv rankings.jsonl rankings.csv      # rank in a spreadsheet ...
    grpokit rm import-csv rankings.csv rankings.jsonl      # ... and back

A ranking file is JSON Lines, one object per prompt:

    {"id": "p1", "question": "Write a one-line welcome for new users.",
     "candidates": [{"id": "c1", "text": "Welcome aboard!", "rank": 1},
                    {"id": "c2", "text": "hello user. this is the app.", "rank": 2}]}

`question` (or `prompt`) is a string or a conversation (a list of
`{role, content}` messages); `rank` is 1 for the best answer, then 2, 3, ...
with every rank used exactly once (no ties: a tie carries no preference
and a person who meant one should drop a candidate instead). A freshly
generated file has `"rank": null` everywhere. Other keys are kept.

The CSV form has one line per candidate (prompt_id, question, candidate_id,
text, rank) so a spreadsheet shows each answer in its own row; `rank` is the
only cell to fill in. Every problem (JSON, missing or duplicate ids, a rank
missing, out of range or tied) is reported at once with its file:line.

`pairs()` turns rankings into TRL's preference pairs: every better-than pair
of a prompt (n candidates give n(n-1)/2 pairs). `split_prompts()` holds out
whole prompts (seeded), so no held-out pair shares a prompt with training.
Not covered: partial rankings (rank some, leave others null) and ties.
"""
from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path

from grpokit.data import read_file, resolve_data_path
from grpokit.errors import GrpokitError, Problem
from grpokit.run.reads import command, reading
from grpokit.run.writer import check_target, new_file

QUESTION_KEYS = ("question", "prompt")
CSV_COLUMNS = ("prompt_id", "question", "candidate_id", "text", "rank")


@dataclass(frozen=True)
class Pair:
    prompt_id: str
    question: str | list[dict]
    chosen: str
    rejected: str


def _rank_fix(n: int) -> str:
    return f"give each candidate of this prompt a different whole number from 1 (best) to {n}"


def check_ranking(obj: object, where: str, seen_ids: dict[str, str]) -> tuple[dict | None, list[Problem]]:
    """One ranking line -> (normalised {id, question, candidates, ...}, problems). `seen_ids`: prompt id -> where."""
    if not isinstance(obj, dict):
        return None, [Problem(where, f"line is a JSON {type(obj).__name__}, not an object",
                              'write one object per line: {"id": ..., "question": ..., "candidates": [...]}')]
    problems = []
    qk = next((k for k in QUESTION_KEYS if k in obj), None)
    q = obj.get(qk) if qk else None
    if not (isinstance(q, str) and q.strip()) and not (isinstance(q, list) and q):
        problems.append(Problem(where, "missing or empty question", 'add "question": "the prompt text"'))
    pid = obj.get("id")
    if not isinstance(pid, (str, int)) or isinstance(pid, bool) or str(pid) == "":
        problems.append(Problem(where, "missing prompt id", 'add "id": "p1" (any text unique in the file)'))
    elif str(pid) in seen_ids:
        problems.append(Problem(f"{where} id", f"duplicate prompt id {pid!r} (first at {seen_ids[str(pid)]})",
                                "give every prompt its own id"))
    else:
        seen_ids[str(pid)] = where
    cands = obj.get("candidates")
    if not isinstance(cands, list) or len(cands) < 2:
        problems.append(Problem(f"{where} candidates", "needs a list of at least 2 candidates",
                                'write "candidates": [{"id": "c1", "text": ..., "rank": 1}, ...]'))
        return None, problems
    n, ids, ranks = len(cands), {}, {}
    for i, c in enumerate(cands):
        at = f"{where} candidates[{i}]"
        if not isinstance(c, dict):
            problems.append(Problem(at, "not an object", '{"id": "c1", "text": "...", "rank": 1}'))
            continue
        cid = c.get("id")
        if not isinstance(cid, (str, int)) or isinstance(cid, bool) or str(cid) == "":
            problems.append(Problem(at, "missing candidate id", 'add "id": "c1" (unique within the prompt)'))
        elif str(cid) in ids:
            problems.append(Problem(at, f"duplicate candidate id {cid!r} (also candidates[{ids[str(cid)]}])",
                                    "give every candidate of a prompt its own id"))
        else:
            ids[str(cid)] = i
        if not isinstance(c.get("text"), str) or not c["text"].strip():
            problems.append(Problem(at, "missing or empty text", "put the candidate answer in \"text\""))
        r = c.get("rank")
        if r is None:
            problems.append(Problem(at, "not ranked (rank is missing or null)", _rank_fix(n)))
        elif isinstance(r, bool) or not isinstance(r, int):
            problems.append(Problem(at, f"rank must be a whole number, got {json.dumps(r)}", _rank_fix(n)))
        elif not 1 <= r <= n:
            problems.append(Problem(at, f"rank {r} is out of range for {n} candidates", _rank_fix(n)))
        elif r in ranks:
            problems.append(Problem(at, f"tie: rank {r} is also given to candidates[{ranks[r]}]",
                                    _rank_fix(n) + " (no ties: drop one of the two if they are equally good)"))
        else:
            ranks[r] = i
    if problems:
        return None, problems
    return {**{k: v for k, v in obj.items() if k != qk}, "id": str(pid), "question": q}, []


def read_rankings(path: str | Path) -> list[dict]:
    """The ranked prompts of a ranking file, or GrpokitError listing every problem."""
    path = resolve_data_path(str(path), Path.cwd()) if str(path).startswith("builtin:") else str(path)
    if not Path(path).is_file():
        raise GrpokitError([Problem(path, "no such file", "pass a ranking file from `grpokit rm candidates`")])
    raw = read_file(path)
    problems = raw.file_errors + raw.row_errors
    rows, seen = [], {}
    for where, obj in raw.rows:
        row, found = check_ranking(obj, where, seen)
        problems += found
        if row is not None:
            rows.append(row)
    if not problems and not rows:
        problems.append(Problem(path, "no ranked prompts", "rank the candidates of at least 2 prompts"))
    if problems:
        shown = problems[:30] + ([Problem(path, f"... and {len(problems) - 30} more")] if len(problems) > 30 else [])
        raise GrpokitError(shown, title=f"{path}: not a usable ranking file")
    return rows


# ---------------------------------------------------------------- pairs and split
def pairs(rankings: list[dict]) -> list[Pair]:
    """Every better-than pair of every prompt: (rank i, rank j) for i < j."""
    out = []
    for r in rankings:
        ordered = sorted(r["candidates"], key=lambda c: c["rank"])
        out += [Pair(r["id"], r["question"], a["text"], b["text"])
                for i, a in enumerate(ordered) for b in ordered[i + 1:]]
    return out


def split_prompts(rankings: list[dict], eval_fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """A seeded split of whole prompts: (train, held-out); at least one held-out prompt when the fraction is > 0."""
    if eval_fraction <= 0:
        return list(rankings), []
    order = list(range(len(rankings)))
    random.Random(seed).shuffle(order)
    n = max(1, round(len(rankings) * eval_fraction))
    if n >= len(rankings):
        raise GrpokitError([Problem("--eval-fraction", f"{len(rankings)} ranked prompts are too few to hold out "
                                    f"{eval_fraction:.0%}", "rank more prompts, or pass --eval-fraction 0")])
    held = set(order[:n])
    return [r for i, r in enumerate(rankings) if i not in held], [r for i, r in enumerate(rankings) if i in held]


# ---------------------------------------------------------------- CSV round trip
@command()
def export_csv(rankings_path: str | Path, csv_path: str | Path, overwrite: bool = False) -> int:
    """One CSV line per candidate; ranks may still be empty. Returns the number of candidates written."""
    reading(rankings_path)
    check_target(csv_path, replace=overwrite)  # before reading: a link, a hard link, the rankings file itself
    raw = read_file(str(rankings_path))
    if raw.file_errors or raw.row_errors:
        raise GrpokitError(raw.file_errors + raw.row_errors, title=f"{rankings_path}: cannot be read")
    lines = []
    for where, obj in raw.rows:
        q = next((obj.get(k) for k in QUESTION_KEYS if isinstance(obj, dict) and k in obj), None)
        if not isinstance(q, str) or not isinstance(obj.get("candidates"), list):
            raise GrpokitError([Problem(where, "the CSV form needs a string question and a candidates list",
                                        "rank conversations (message-list questions) in the JSONL file itself")])
        for c in obj["candidates"]:
            lines.append([str(obj.get("id", "")), q, str(c.get("id", "")), c.get("text", ""),
                          "" if c.get("rank") is None else c["rank"]])
    with new_file(csv_path, replace=overwrite) as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        w.writerows(lines)
    return len(lines)


@command()
def import_csv(csv_path: str | Path, rankings_path: str | Path, overwrite: bool = False) -> list[dict]:
    """Read a ranked CSV back into a ranking file (checked like any ranking file); returns the ranked prompts.

    Read with the stdlib `csv` module rather than `datasets`: every cell stays the text the person typed (an id
    "007" is not turned into 7, an empty rank is empty, not NaN), and the line number is exact.
    """
    from grpokit.run.writer import check_target, write_rows
    path = str(csv_path)
    if not Path(path).is_file():
        raise GrpokitError([Problem(path, "no such file", "pass the CSV written by `grpokit rm export-csv`")])
    reading(path)
    check_target(rankings_path, replace=overwrite)  # before reading: nothing is written over on a refusal
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise GrpokitError([Problem(f"{path}:{line}", "not UTF-8 text (a binary file, or "
                                    "a CSV saved as latin-1?)", "save the CSV as UTF-8 (spreadsheets: \"CSV UTF-8\"), "
                                    "or pass the CSV `grpokit rm export-csv` wrote")]) from None
    if "\0" in text:
        raise GrpokitError([Problem(f"{path}:{text.count(chr(10), 0, text.index(chr(0))) + 1}", "holds a NUL byte: "
                                    "not a CSV file", "pass the CSV `grpokit rm export-csv` wrote")])
    # The csv module refuses a field past 131,072 characters (a long completion is a field): no field of a text
    # already in memory can be longer than the text itself.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    with io.StringIO(text, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or [h.strip() for h in header] != list(CSV_COLUMNS):
            raise GrpokitError([Problem(f"{path}:1", f"the header must be {','.join(CSV_COLUMNS)}, got {header}",
                                        "keep the columns `grpokit rm export-csv` wrote, in that order")])
        prompts: dict[str, dict] = {}
        problems = []
        for cells in reader:
            where = f"{path}:{reader.line_num}"
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(CSV_COLUMNS):
                problems.append(Problem(where, f"{len(cells)} cells, expected {len(CSV_COLUMNS)}",
                                        "keep one candidate per line with all five columns"))
                continue
            pid, question, cid, text, rank = cells
            rank = rank.strip()
            value: object = None
            if rank:
                try:
                    value = int(float(rank)) if float(rank).is_integer() else rank
                except ValueError:
                    value = rank  # reported by check_ranking as "must be a whole number"
            entry = prompts.setdefault(pid, {"id": pid, "question": question, "candidates": [], "_where": where})
            entry["candidates"].append({"id": cid, "text": text, "rank": value})
    rows, seen = [], {}
    for entry in prompts.values():
        where = entry.pop("_where")
        row, found = check_ranking(entry, where, seen)
        problems += found
        if row is not None:
            rows.append(row)
    if not problems and not rows:
        problems.append(Problem(path, "no ranked prompts (only the header, or empty lines)",
                                "fill in the CSV from `grpokit rm export-csv`: one candidate per line"))
    if problems:
        raise GrpokitError(problems, title=f"{path}: not a usable ranking file")
    write_rows(rankings_path, rows, replace=overwrite)
    return rows
