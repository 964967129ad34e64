"""Authorship records: which folders grpokit made and which entries in them it wrote (reading them only).

    rec = read_record(folder)                      # None: no record, or not one grpokit could have written
    record_problem(folder)                         # why a record there is not one (damaged, an entry "../x")
    foreign(folder, rec, ["report.html"])          # the names there that grpokit did not write

A folder is a grpokit run, demo, export, report, evaluation or reward model only by its record, `RECORD_FILE`
(one JSON object: `kind`, `id`, `entries` as name -> "file" | "dir", and for a run the `lock_token` that proves
its lock file), written by grpokit (grpokit.run.claims.claim) when it creates or claims the folder and before it
writes any entry the record names. Nothing is guessed from the names of the files in a folder. An entry is a
plain name (no separator, no `..`, not absolute; for a run or demo one of the layout's, `own_entries()`): a
record naming anything else is not one of grpokit's, and its folder is refused. An entry whose kind on disk is
not the recorded one (a link, a file where grpokit wrote a folder, a file with a second hard link) is not
grpokit's and is refused, never removed or written through. Writing and removing: grpokit.run.writer.

Not covered: a user who writes a record by hand, or puts files of their own into a folder grpokit recorded
(`checkpoints/`, `eval/`, ...: such a folder is grpokit's and goes whole).
"""
from __future__ import annotations

import json
import os
import secrets
import stat
import time
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run.layout import own_entries

RECORD_FILE = ".grpokit-record.json"
KINDS = ("run", "demo", "export", "report", "eval", "rm", "comparison")
_FORMAT = 1
_MAX_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; a larger file is not one


def kind_on_disk(path: Path) -> str | None:
    """"file" (a regular file with one link), "dir" (a real folder), "other" (a link, a FIFO, a hard-linked file),
    None (nothing there). Never follows a link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        return "file"
    return "other"


def describe(path: Path) -> str:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return f"a file with {st.st_nlink - 1} other hard link(s)"
    if stat.S_ISDIR(st.st_mode):
        return "a folder"
    return "a file" if stat.S_ISREG(st.st_mode) else "not a regular file"


def _plain(name) -> bool:
    """A name of one entry right inside its folder: no separator, not `.` or `..`, not absolute, no NUL."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name and not os.path.isabs(name))


def _parse(folder: str | Path) -> tuple[dict | None, str | None]:
    """(the record, None), or (None, why the file at its name is not a record of grpokit's); (None, None): none."""
    path = Path(folder) / RECORD_FILE
    kind = kind_on_disk(path)
    if kind is None:
        return None, None
    if kind != "file":
        return None, f"its {RECORD_FILE} is {describe(path)}, not a record grpokit wrote"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(_MAX_RECORD_BYTES + 1)
        data = json.loads(raw.decode("utf-8")) if len(raw) <= _MAX_RECORD_BYTES else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        data = None
    if not (isinstance(data, dict) and data.get("grpokit_record") == _FORMAT and data.get("kind") in KINDS
            and isinstance(data.get("id"), str) and isinstance(data.get("entries"), dict)
            and all(v in ("file", "dir") for v in data["entries"].values())):
        return None, f"its {RECORD_FILE} is damaged (not a record grpokit wrote)"
    allowed = own_entries() if data["kind"] in ("run", "demo") else None
    bad = [k for k in data["entries"] if not _plain(k) or (allowed is not None and allowed.get(k) != data["entries"][k])]
    if bad:
        return None, (f"its {RECORD_FILE} names {str(bad[0])[:200]!r}, which is not "
                      + ("a plain name (grpokit records names right inside the folder)" if not _plain(bad[0]) else
                         f"an entry of a grpokit {data['kind']} folder") + ": the record is not one grpokit wrote")
    return data, None


def read_record(folder: str | Path) -> dict | None:
    """The folder's record, or None (none, or not a record grpokit wrote: a link, a damaged file, an entry that is
    no plain name of the folder's kind)."""
    return _parse(folder)[0]


def record_problem(folder: str | Path) -> str | None:
    """Why the file at the folder's record name is not a record grpokit wrote ("its ... names '../../x' ..."), or
    None (a valid record, or none at all)."""
    return _parse(folder)[1]


def new_record(kind: str, entries: dict[str, str], **extra) -> dict:
    return {"grpokit_record": _FORMAT, "kind": kind, "id": secrets.token_hex(8), "created": time.time(),
            "entries": dict(sorted(entries.items())), **extra}


def foreign(folder: str | Path, record: dict | None, names) -> list[str]:
    """Of `names`, those present in `folder` that grpokit did not write there: not in its record, or no longer
    of the recorded kind."""
    entries = (record or {}).get("entries", {})
    return [n for n in names if (k := kind_on_disk(Path(folder) / n)) is not None and entries.get(n) != k]


def refuse_foreign(folder: Path, record: dict | None, names, fix: str) -> None:
    bad = foreign(folder, record, names)
    if bad:
        raise GrpokitError([Problem(str(folder / n), f"is {describe(folder / n)} grpokit did not write (it is not in "
                                    f"{folder / RECORD_FILE}): grpokit would replace it, so nothing was written", fix)
                            for n in bad])
