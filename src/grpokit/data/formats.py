"""Read a data file into raw rows, each with the place a user can find it.

    .jsonl   one JSON object per line: "FILE:LINE"
    .json    a JSON array of objects ("FILE row N"); a .json file that starts
             with "{" is JSON Lines, as `datasets` reads it too
    .csv     a header line, then one row per record: "FILE:LINE" (header = line 1)
    .parquet "FILE row N"
    hf:ID    a hub dataset: "hf:ID[split]#i"

CSV and Parquet are read by `datasets` (pandas / pyarrow underneath). JSONL
is read by grpokit's own line-by-line reader, which is the first and only
pass for it: `datasets`' JSON reader stops at the first bad line without
saying which one, and a line-numbered report of every bad line is the point
of `grpokit data check`. A JSON array is parsed by the stdlib, as `datasets`
does too (see `read_json` for why not through it). The rows reach TRL as a
`datasets.Dataset` either way.

A row nested past `MAX_ROW_DEPTH` or holding an integer past 64 bits (`HugeInt`) is a problem of that row
(`row_structure_problem`), never a traceback, and the rest of the file is still checked.

Every text format is split on b"\\n" only and decoded line by line, so an
invalid UTF-8 byte is reported with its line (in JSONL only that line is
lost), and U+2028 / U+2029 / U+0085 inside a JSON string do not shift line
numbers as `str.splitlines` would.
"""
from __future__ import annotations

import contextlib
import csv
import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grpokit.errors import Problem
from grpokit.run.reads import reading

FORMATS = (".jsonl", ".json", ".csv", ".parquet")
_BOM = b"\xef\xbb\xbf"
# Structural bounds on a row, each a problem of that row (the rest of the file is still checked):
MAX_ROW_DEPTH = 64  # nesting levels: rows nest 3-10 (messages, tool schemas, JSON Schemas); the JSON parser
# recurses per level, so 200k levels would end in a RecursionError instead of a line number
_INT64 = 2**63  # datasets stores integers in Arrow's 64-bit type: a larger one fails the whole Dataset later


class HugeInt(str):
    """A JSON integer past 64 bits, kept as its digits (never converted: Python refuses 4,300+ digits)."""


def _parse_int(digits: str) -> int | HugeInt:
    if len(digits) > 20:  # 2**63 has 19 digits: decide without converting a million-digit string
        return HugeInt(digits)
    n = int(digits)
    return n if -_INT64 <= n < _INT64 else HugeInt(digits)


def loads_row(text: str) -> object:
    """json.loads with integers past 64 bits kept as HugeInt (reported by `row_structure_problem`)."""
    return json.loads(text, parse_int=_parse_int)


_DEEP_FIX = "keep rows a few levels deep: put large nested data in a file the row names"
_HUGE_FIX = 'write a number that long as a string ("123...")'


def row_structure_problem(value: object) -> tuple[str, str] | None:
    """(what, fix) when a parsed row is unusable whatever its columns mean: nesting past MAX_ROW_DEPTH, an integer
    past 64 bits."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_ROW_DEPTH:
            return f"nested more than {MAX_ROW_DEPTH} levels deep", _DEEP_FIX
        if isinstance(item, HugeInt):
            return (f"an integer of {len(item.lstrip('-'))} digits, beyond the 64-bit integers datasets stores "
                    f"({item[:12]}...)", _HUGE_FIX)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


@dataclass
class RawData:
    """What a reader found: (where, object) rows, plus problems that are not about one row's content."""

    rows: list[tuple[str, object]] = field(default_factory=list)
    row_errors: list[Problem] = field(default_factory=list)  # each costs one row (skippable)
    file_errors: list[Problem] = field(default_factory=list)  # the whole file is unusable
    warnings: list[Problem] = field(default_factory=list)
    columns: list[str] | None = None  # for tabular formats: the columns every row has
    lines_read: int = 0


def _lines(raw: bytes, path: str, out: RawData) -> list[tuple[int, str | None]]:
    """(line number, text or None when the line is not UTF-8); a BOM is dropped with a warning."""
    if raw.startswith(_BOM):
        out.warnings.append(Problem(f"{path}:1", "file starts with a UTF-8 BOM (ignored)",
                                    "save the file as UTF-8 without BOM"))
        raw = raw[len(_BOM):]
    pieces = raw.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()  # the final newline ends the last line; it does not start a blank one
    lines = []
    for n, piece in enumerate(pieces, start=1):
        piece = piece[:-1] if piece.endswith(b"\r") else piece
        try:
            lines.append((n, piece.decode("utf-8")))
        except UnicodeDecodeError as e:
            out.row_errors.append(Problem(f"{path}:{n}", f"not UTF-8: byte 0x{piece[e.start]:02x} at column {e.start + 1}",
                                          "re-encode the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or fix "
                                          "that byte"))
            lines.append((n, None))
    out.lines_read = len(lines)
    return lines


def _empty(path: str, out: RawData, lines) -> bool:
    if not any(text is None or text.strip() for _, text in lines):
        what = "file is empty" if not lines else "file has only blank lines"
        out.file_errors.append(Problem(path, what, "write one row per line, or point data.train/eval at the right file"))
        return True
    return False


def read_jsonl(path: str, raw: bytes) -> RawData:
    out = RawData()
    lines = _lines(raw, path, out)
    if _empty(path, out, lines):
        return out
    for n, text in lines:
        where = f"{path}:{n}"
        if text is None:
            continue  # already reported as not UTF-8
        if not text.strip():
            out.warnings.append(Problem(where, "blank line (skipped)", "delete it"))
            continue
        try:
            row = loads_row(text)
        except json.JSONDecodeError as e:
            out.row_errors.append(Problem(where, f"invalid JSON: {e.msg} at column {e.colno}",
                                          "each line must be one complete JSON object"))
            continue
        except RecursionError:
            out.row_errors.append(Problem(where, f"nested more than {MAX_ROW_DEPTH} levels deep (too deep to read)",
                                          _DEEP_FIX))
            continue
        problem = row_structure_problem(row)
        if problem:
            out.row_errors.append(Problem(where, *problem))
        else:
            out.rows.append((where, row))
    return out


@contextlib.contextmanager
def _quiet_datasets():
    """datasets logs its own copy of a read error and draws progress bars; grpokit reports the error itself."""
    import datasets  # loads pyarrow and more: `data check` of a local file never needs it

    logger = logging.getLogger("datasets")
    level, bars_on = logger.level, datasets.is_progress_bar_enabled()
    logger.setLevel(logging.CRITICAL)
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        logger.setLevel(level)
        if bars_on:
            datasets.enable_progress_bars()


def _root_message(e: BaseException) -> str:
    while e.__cause__ is not None or (e.__context__ is not None and not e.__suppress_context__):
        e = e.__cause__ or e.__context__
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def load_with_datasets(builder: str, path: str, **kwargs) -> tuple[list[dict], list[str]]:
    """Rows and columns of a local file read by a `datasets` packaged builder (json, csv, parquet).

    The Arrow cache goes to a temporary folder: a checked file is read once, and a file
    edited in place must never be answered from a stale cache.
    """
    import datasets  # loads pyarrow and more: `data check` of a local file never needs it

    with tempfile.TemporaryDirectory(prefix="grpokit-data-") as cache, _quiet_datasets():
        ds = datasets.load_dataset(builder, data_files=path, split="train", cache_dir=cache, **kwargs)
        return ds.to_list(), list(ds.column_names)


def _table_rows(path: str, rows: list[dict], wheres: list[str] | None = None) -> list[tuple[str, object]]:
    # An absent value reads as null in a table; drop it so the row reports "missing answer", as JSONL does.
    return [((wheres[i] if wheres else f"{path} row {i + 1}"), {k: v for k, v in r.items() if v is not None})
            for i, r in enumerate(rows)]


def read_json(path: str, raw: bytes) -> RawData:
    """A JSON array of row objects, read with the stdlib parser.

    `datasets` reads a JSON array with this same parser (its fallback when pyarrow's line reader
    fails) and then stores NaN as null; reading it here keeps a NaN answer a NaN (reported as such,
    not as "missing") and gives a syntax error its line and column.
    """
    body = raw.removeprefix(_BOM)
    if body.lstrip()[:1] != b"[":
        return read_jsonl(path, raw)  # JSON Lines with a .json name (datasets reads these first as well)
    out = RawData()
    _lines(raw, path, out)
    if out.row_errors:  # a JSON array is one document: a bad byte spoils it all
        out.file_errors, out.row_errors = out.row_errors, []
        return out
    fix = "write a JSON array of row objects, or JSON Lines (.jsonl)"
    try:
        rows = loads_row(body.decode("utf-8"))
    except json.JSONDecodeError as e:
        out.file_errors.append(Problem(f"{path}:{e.lineno}", f"invalid JSON: {e.msg} at column {e.colno}", fix))
        return out
    except RecursionError:  # one document: the parser cannot say which row
        out.file_errors.append(Problem(path, f"nested too deeply to read (a row deeper than {MAX_ROW_DEPTH} levels)",
                                       "find the deep row, or write the rows as JSON Lines (.jsonl): each line is "
                                       "read on its own and a bad one names its line"))
        return out
    if not rows:
        out.file_errors.append(Problem(path, "the JSON array is empty", "add rows"))
        return out
    for i, r in enumerate(rows if isinstance(rows, list) else [rows], start=1):
        problem = row_structure_problem(r)
        if problem:
            out.row_errors.append(Problem(f"{path} row {i}", *problem))
        else:
            out.rows.append((f"{path} row {i}", r))
    return out


def read_csv(path: str, raw: bytes) -> RawData:
    out = RawData()
    lines = _lines(raw, path, out)
    if out.row_errors:  # a CSV record may span lines, so a bad byte cannot be pinned to one row
        out.file_errors, out.row_errors = out.row_errors, []
        return out
    if _empty(path, out, lines):
        return out
    # The stdlib reader only maps each record to its line (pandas, which reads the values, does not say),
    # and finds rows with more cells than the header, which pandas would refuse the whole file for.
    reader = csv.reader(text + "\n" for _, text in lines)
    header, record_lines, long_rows = None, [], 0
    for record in reader:
        start = reader.line_num - (sum(c.count("\n") for c in record))
        if not record:
            out.warnings.append(Problem(f"{path}:{start}", "blank line (skipped)", "delete it"))
        elif header is None:
            header = record
        elif len(record) > len(header):
            long_rows += 1
            out.row_errors.append(Problem(f"{path}:{start}", f"{len(record)} cells, but the header has {len(header)}",
                                          'quote cells that contain commas: "a, b"'))
        else:
            record_lines.append(f"{path}:{start}")
    if not record_lines:
        out.file_errors.append(Problem(path, "no rows below the header line", "add rows"))
        return out
    from datasets import Features, Value  # as above: only a hub or Parquet read needs datasets

    try:  # every cell as text: CSV has no types, and "007" or "3.50" must stay what the file says
        rows, columns = load_with_datasets(
            "csv", path, encoding="utf-8-sig", keep_default_na=False,
            features=Features({c: Value("string") for c in header}),
            **({"on_bad_lines": "skip"} if long_rows else {}))
    except Exception as e:  # noqa: BLE001 - pandas/pyarrow raise many types; all mean "cannot read"
        out.file_errors.append(Problem(path, f"cannot read as CSV: {_root_message(e)}",
                                       "check the header line and the quoting, or save it again from a spreadsheet"))
        return out
    wheres = record_lines if len(record_lines) == len(rows) else None  # the two readers disagree: count rows
    out.rows, out.columns = _table_rows(path, rows, wheres), columns
    return out


def read_parquet(path: str, raw: bytes) -> RawData:
    out = RawData()
    if not raw:
        out.file_errors.append(Problem(path, "file is empty", "write the rows with pandas' or datasets' to_parquet"))
        return out
    try:
        rows, columns = load_with_datasets("parquet", path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises many types; all mean "cannot read"
        out.file_errors.append(Problem(path, f"not a readable Parquet file: {_root_message(e)}",
                                       "write it with pandas' or datasets' to_parquet, or give the file the "
                                       "extension of its real format (.jsonl, .json, .csv)"))
        return out
    if not rows:
        out.file_errors.append(Problem(path, "the Parquet file has no rows", "add rows"))
        return out
    out.rows, out.columns = _table_rows(path, rows), columns
    return out


READERS = {".jsonl": read_jsonl, ".json": read_json, ".csv": read_csv, ".parquet": read_parquet}


def read_file(path: str | Path) -> RawData:
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    out = RawData()
    if reader is None:
        out.file_errors.append(Problem(str(path), f"unknown data format {path.suffix or '(no extension)'!r}",
                                       f"use one of {', '.join(FORMATS)} or hf:<dataset id>"))
    elif not path.is_file():
        out.file_errors.append(Problem(str(path), "file not found", "check the path"))
    else:
        reading(path)  # an input of this command: no output of it is written over it (grpokit.run.writer)
        return reader(str(path), path.read_bytes())
    return out


def read_hf(spec: str, config: str | None, split: str) -> RawData:
    """Rows of a hub dataset (`hf:openai/gsm8k`)."""
    import datasets  # loads pyarrow and more: `data check` of a local file never needs it

    out = RawData()
    try:
        with _quiet_datasets():
            ds = datasets.load_dataset(spec[len("hf:"):], config, split=split)
    except Exception as e:  # noqa: BLE001 - network / hub errors come in many types; all mean "cannot load"
        out.file_errors.append(Problem(spec, f"cannot load hub dataset: {_root_message(e)[:200]}",
                                       "check the dataset id and network access, or download it to a .jsonl file"))
        return out
    out.rows = [(f"{spec}[{split}]#{i}", dict(r)) for i, r in enumerate(ds)]
    out.columns = list(ds.column_names)
    return out
