"""Authorship records: which folders grpokit made and which entries in them it wrote.

    rec = read_record(folder)                      # None: no record, or not one grpokit could have written
    rec = claim(folder, "report", ["report.html"])  # a record in a folder grpokit may write to (refuses otherwise)
    foreign(folder, rec, ["report.html"])          # the names there that grpokit did not write
    remove_entries(folder, rec)                    # delete the recorded entries, refusing any that changed kind
    write_bytes(path, data)                        # a new file put in place (never written through a link)

A folder is a grpokit run, demo, export or report only by its record, `RECORD_FILE` (one JSON object: `kind`,
`id`, `entries` as name -> "file" | "dir", and for a run the `lock_token` that proves its lock file), written
by grpokit when it creates or claims the folder and before it writes any entry the record names. Nothing is
guessed from the names of the files in a folder. An entry whose kind on disk is not the recorded one (a link, a
file where grpokit wrote a folder, a file with a second hard link) is not grpokit's and is refused, never
removed or written through.

Not covered: a user who writes a record by hand, or puts files of their own into a folder grpokit recorded
(`checkpoints/`, `eval/`, ...: such a folder is grpokit's and goes whole).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import tempfile
import time
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

RECORD_FILE = ".grpokit-record.json"
KINDS = ("run", "demo", "export", "report")
_FORMAT = 1
_MAX_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; a larger file is not one


def write_bytes(path: Path, data: bytes) -> None:
    """Put `data` at `path` as a new file: written to a temporary file of our own (O_EXCL), then renamed over the
    name, so a link or a hard-linked file at `path` is replaced, never written through; a crash leaves the old file
    or the new one, never half of either."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _kind_on_disk(path: Path) -> str | None:
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


def _describe(path: Path) -> str:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return f"a file with {st.st_nlink - 1} other hard link(s)"
    if stat.S_ISDIR(st.st_mode):
        return "a folder"
    return "a file" if stat.S_ISREG(st.st_mode) else "not a regular file"


def read_record(folder: str | Path) -> dict | None:
    """The folder's record, or None (none, or not a record grpokit wrote: a link, a damaged file)."""
    path = Path(folder) / RECORD_FILE
    if _kind_on_disk(path) != "file":
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            raw = f.read(_MAX_RECORD_BYTES + 1)
        data = json.loads(raw.decode("utf-8")) if len(raw) <= _MAX_RECORD_BYTES else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not (isinstance(data, dict) and data.get("grpokit_record") == _FORMAT and data.get("kind") in KINDS
            and isinstance(data.get("id"), str) and isinstance(data.get("entries"), dict)
            and all(isinstance(k, str) and v in ("file", "dir") for k, v in data["entries"].items())):
        return None
    return data


def new_record(kind: str, entries: dict[str, str], **extra) -> dict:
    return {"grpokit_record": _FORMAT, "kind": kind, "id": secrets.token_hex(8), "created": time.time(),
            "entries": dict(sorted(entries.items())), **extra}


def write_record(folder: str | Path, record: dict) -> None:
    write_bytes(Path(folder) / RECORD_FILE, json.dumps(record, indent=1).encode("utf-8"))


def foreign(folder: str | Path, record: dict | None, names) -> list[str]:
    """Of `names`, those present in `folder` that grpokit did not write there: not in its record, or no longer
    of the recorded kind."""
    entries = (record or {}).get("entries", {})
    return [n for n in names if (k := _kind_on_disk(Path(folder) / n)) is not None and entries.get(n) != k]


def refuse_foreign(folder: Path, record: dict | None, names, fix: str) -> None:
    bad = foreign(folder, record, names)
    if bad:
        raise GrpokitError([Problem(str(folder / n), f"is {_describe(folder / n)} grpokit did not write (it is not in "
                                    f"{folder / RECORD_FILE}): grpokit would replace it, so nothing was written", fix)
                            for n in bad])


def claim(folder: str | Path, kind: str, entries: dict[str, str], fix: str, **extra) -> dict:
    """The record of `folder`, a folder of `kind` that is about to get `entries`: an existing record of that kind
    gains them; an empty (or new) folder gets a new record. Refused, with nothing written: a folder with another
    kind's record, or a name of `entries` that grpokit did not write there."""
    folder = Path(folder)
    record = read_record(folder)
    if record is not None and record["kind"] != kind:
        raise GrpokitError([Problem(str(folder), f"is a grpokit {record['kind']} folder (its {RECORD_FILE} says so), "
                                    f"not a {kind} folder: nothing was written", fix)])
    refuse_foreign(folder, record, entries, fix)
    if record is None:
        record = new_record(kind, entries, **extra)
    else:
        record = {**record, "entries": dict(sorted({**record["entries"], **entries}.items())), **extra}
    folder.mkdir(parents=True, exist_ok=True)
    write_record(folder, record)
    return record


def remove_entries(folder: str | Path, record: dict, keep=()) -> list[str]:
    """Delete the entries of `record` that are in `folder` (a file, or a folder with all it holds; never through a
    link); their names. An entry whose kind changed since grpokit wrote it is refused before anything goes."""
    folder = Path(folder)
    names = [n for n in record["entries"] if n not in keep]
    changed = [n for n in names if _kind_on_disk(folder / n) not in (None, record["entries"][n])]
    if changed:
        raise GrpokitError([Problem(str(folder / n), f"is {_describe(folder / n)}, not the {record['entries'][n]} "
                                    "grpokit wrote there: nothing was deleted",
                                    f"move it out of {folder} (it is not grpokit's), then run the command again")
                            for n in changed])
    gone = []
    for n in names:
        kind = _kind_on_disk(folder / n)
        if kind == "dir":
            shutil.rmtree(folder / n)  # rmtree removes links inside a folder, never what they point at
        elif kind == "file":
            (folder / n).unlink()
        else:
            continue
        gone.append(n)
    return gone
