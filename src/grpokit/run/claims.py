"""Folders by proof: a folder grpokit writes into is one its record (grpokit.run.record) says it made.

    claim(folder, "report", entries, fix)              # a folder by proof: its record first
    refuse_claim(folder, "report", entries, fix)       # ... what claim refuses, checked before any model loads
    install(staging, folder, "rm", fix)                # what a library saved elsewhere, moved in name by name
    remove_entries(folder, record)                     # what grpokit wrote there, and nothing else

Every write here goes through the one writer (grpokit.run.writer).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run.reads import read_by_this_command
from grpokit.run.record import RECORD_FILE, describe, foreign, kind_on_disk, new_record, read_record, record_problem
from grpokit.run.temporaries import contents
from grpokit.run.writer import make_folder, move, refused, remove, write_file


def write_record(folder: str | Path, record: dict) -> None:
    write_file(Path(folder) / RECORD_FILE, json.dumps(record, indent=1), within=folder)


def refuse_claim(folder: str | Path, kind: str, entries: dict[str, str], fix: str) -> dict | None:
    """What `claim` refuses, checked without writing anything (before any model loads); the folder's record (None:
    a new or empty folder)."""
    folder = Path(os.path.abspath(folder))
    if os.path.islink(folder) or (folder.exists() and not folder.is_dir()):
        raise refused(folder, "is not a folder grpokit made (a symbolic link or a file)", fix)
    if read_by_this_command(folder) is not None:
        raise refused(folder, "is a file this command reads", fix)
    record = read_record(folder) if folder.is_dir() else None
    if record is not None and record["kind"] != kind:
        raise refused(folder, f"is a grpokit {record['kind']} folder (its {RECORD_FILE} says so), not a {kind} "
                               "folder", fix)
    bad = foreign(folder, record, entries)
    if bad:  # the names it would replace first: the most telling reason
        raise GrpokitError([Problem(str(folder / n), f"is {describe(folder / n)} grpokit did not write (it is not "
                                    f"in {folder / RECORD_FILE}): grpokit would replace it, so nothing was written",
                                    fix) for n in bad], title="nothing was written")
    if folder.is_dir() and record is None and contents(folder):
        why = record_problem(folder) or f"has content but no {RECORD_FILE} of grpokit's"
        raise refused(folder, f"{why}: grpokit writes only into a folder it made, so nothing was written", fix)
    return record


def claim(folder: str | Path, kind: str, entries: dict[str, str], fix: str, **extra) -> dict:
    """The record of `folder`, a folder of `kind` about to get `entries`: an existing record of that kind gains
    them; an empty (or new) folder gets a new record. Refused, with nothing written (`refuse_claim`): `folder` a
    link or a file, a folder with content but no record (or a record that is damaged or names something that is
    no plain name), another kind's record, a name of `entries` that grpokit did not write there."""
    record = refuse_claim(folder, kind, entries, fix)
    if record is None:
        record = new_record(kind, entries, **extra)
    else:
        record = {**record, "entries": dict(sorted({**record["entries"], **entries}.items())), **extra}
    make_folder(folder)
    write_record(folder, record)
    return record


def install(staging: str | Path, folder: str | Path, kind: str, fix: str, also: dict[str, str] | None = None,
            **extra) -> dict:
    """Move what a library wrote into `staging` (a folder of grpokit's own, e.g. transformers' save_pretrained) into
    `folder`, a folder of `kind` by proof: each name is claimed first (refused if a user's file is there), an older
    entry of grpokit's at that name is replaced, and `staging` is removed. `also`: names grpokit writes there
    itself afterwards (recorded with the rest). The record."""
    staging, folder = Path(staging), Path(folder)
    entries = {p.name: kind_on_disk(p) for p in staging.iterdir()}
    record = claim(folder, kind, {**(also or {}), **entries}, fix, **extra)
    for name in entries:
        remove(folder / name)
        move(staging / name, folder / name, within=folder)
    remove(staging)
    return record


def remove_entries(folder: str | Path, record: dict, keep=()) -> list[str]:
    """Delete the entries of `record` that are in `folder` (a file, or a folder with all it holds; never through a
    link); their names. An entry whose kind changed since grpokit wrote it is refused before anything goes."""
    folder = Path(folder)
    names = [n for n in record["entries"] if n not in keep]
    changed = [n for n in names if kind_on_disk(folder / n) not in (None, record["entries"][n])]
    if changed:
        raise GrpokitError([Problem(str(folder / n), f"is {describe(folder / n)}, not the {record['entries'][n]} "
                                    "grpokit wrote there: nothing was deleted",
                                    f"move it out of {folder} (it is not grpokit's), then run the command again")
                            for n in changed])
    return [n for n in names if remove(folder / n)]
