"""Which folders grpokit may train into, and what `--overwrite` may delete: grpokit's own files, nothing else.

    refuse_output_dir(path, overwrite, keep=[recipe, data])   # before any model loads: where, what, fix
    clear_run(path)                                           # --overwrite: grpokit's entries only
    is_run_dir(path)                                          # config.yaml of a recipe + run.json (or nothing else)

A folder is a grpokit run directory when it holds the config.yaml grpokit writes (a mapping with the recipe's
`data` and `rewards` sections) and either the run.json grpokit writes (a `status` of `STATUSES`) or no entry
grpokit does not write itself (a run killed between the two files). `--overwrite` clears only such a folder,
and only the entries of `own_entries()` (the layout of docs/run-directory.md); anything else in it (a user's
notes, a data file) stays. Refused whatever they hold: the file system's root, the home folder and its
ancestors, a git work tree, a folder that holds the recipe or the data. A folder that cannot be written is
refused too, by trying (a root user ignores permission bits, so `os.access` would not tell).

Not covered: files a user put inside grpokit's own folders (checkpoints/, eval/, ...): those folders are
grpokit's and go whole.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

_MAX_CONFIG_BYTES = 1 << 20  # a run's config.yaml is a few KB; a larger one is not grpokit's (and not worth parsing)
_NEW_DIR_FIX = "pick a new --output-dir (a folder that does not exist yet, or an earlier grpokit run directory)"


def own_entries() -> tuple[set[str], set[str]]:
    """(files, folders) grpokit writes at the top of a run directory; --overwrite removes these and nothing else."""
    from grpokit.run import rundir as r

    logs = (r.METRICS_FILE, r.SAMPLES_FILE, r.HEALTH_FILE)
    files = {r.CONFIG_FILE, r.RUN_FILE, r.DEMO_FILE, r.PREFLIGHT_FILE, *logs,
             *(log.replace(".jsonl", ".rolled_back.jsonl") for log in logs)}
    files |= {f"{f}.tmp" for f in files}  # grpokit.run.files.atomic_write's half-done writes
    folders = {r.CHECKPOINTS_DIR, r.EVAL_DIR, r.REPORT_DIR, r.EXPORT_DIR, r.REFERENCE_DIR, f"{r.REFERENCE_DIR}.tmp",
               "tensorboard"}  # tensorboard/: grpokit.training.tracking's event files
    return files, folders


def _recipe_config(path: Path) -> bool:
    import yaml

    try:
        if path.stat().st_size > _MAX_CONFIG_BYTES:
            return False
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return False
    return isinstance(data, dict) and "data" in data and "rewards" in data


def _run_status(path: Path) -> bool:
    from grpokit.run.files import read_json
    from grpokit.run.rundir import STATUSES

    data = read_json(path, note=lambda _: None) if path.is_file() else None
    return data is not None and data.get("status") in STATUSES


def is_run_dir(path: str | Path) -> bool:
    """A folder grpokit trained into (see the module docstring)."""
    from grpokit.run.rundir import CONFIG_FILE, LOCK_FILE, RUN_FILE

    path = Path(path)
    if not path.is_dir() or not _recipe_config(path / CONFIG_FILE):
        return False
    if _run_status(path / RUN_FILE):
        return True
    files, folders = own_entries()
    return all(p.name in files | folders | {LOCK_FILE} for p in path.iterdir())


def _holds(folder: Path, item: Path) -> bool:
    return item == folder or folder in item.parents


def _protected(path: Path, keep: list[Path]) -> str | None:
    """Why `path` may never be a run directory, or None."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry: there is no home folder to protect
        home = None
    if path.parent == path:
        return "is the root of the file system"
    if home is not None and _holds(path, home):
        return "is your home folder" if path == home else f"holds your home folder ({home})"
    if (path / ".git").exists():
        return "is a git work tree (it has a .git)"
    for item in keep:
        if _holds(path, item):
            return f"holds {item}, which this run reads"
    return None


def writable_problem(path: Path) -> Problem | None:
    """A Problem when nothing can be written at `path` (or, not there yet, in its nearest existing parent)."""
    probe_dir = path
    while not probe_dir.exists() and probe_dir.parent != probe_dir:
        probe_dir = probe_dir.parent
    try:
        fd, name = tempfile.mkstemp(prefix=".grpokit-write-check-", dir=probe_dir)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        where = "" if probe_dir == path else f" (nor in {probe_dir}, where it would be created)"
        return Problem(str(path), f"cannot write here{where}: {e.strerror or e}",
                       "pick an --output-dir you can write to (check the folder's permissions, or whether its disk "
                       "is mounted read-only)")
    return None


def refuse_output_dir(path: str | Path, overwrite: bool, keep: list[str | Path] = ()) -> None:
    """Refuse a run directory that training may not use, before anything loads (nothing is created or deleted).

    `keep`: files the run reads (the recipe, the data); a folder that holds one is never a run directory.
    """
    from grpokit.run.rundir import LOCK_FILE

    raw = str(path)
    if not raw.strip():
        raise GrpokitError([Problem("--output-dir / output_dir", "is empty (it would mean the current folder)",
                                    _NEW_DIR_FIX)])
    path = Path(path).resolve()
    if path.exists() and not path.is_dir():
        raise GrpokitError([Problem(str(path), "exists and is not a directory", _NEW_DIR_FIX)])
    why = _protected(path, [Path(k).resolve() for k in keep if k])
    if why:
        raise GrpokitError([Problem(str(path), f"cannot be a run directory: it {why}", _NEW_DIR_FIX)])
    problem = writable_problem(path)
    if problem:
        raise GrpokitError([problem])
    if not path.is_dir() or not any(p.name != LOCK_FILE for p in path.iterdir()):
        return
    if not overwrite:
        raise GrpokitError([Problem(str(path), "run directory already exists and is not empty",
                                    f"continue it with `grpokit train --resume {path}`, pick another "
                                    "--output-dir, or pass --overwrite to start again")])
    if not is_run_dir(path):
        raise GrpokitError([Problem(str(path), "--overwrite replaces a grpokit run directory only, and this folder is "
                                    "not one (no config.yaml and run.json written by grpokit): nothing was deleted",
                                    _NEW_DIR_FIX)])


def clear_run(path: str | Path) -> list[str]:
    """Delete an earlier run's entries (--overwrite): grpokit's own names only, never the lock; the names removed."""
    files, folders = own_entries()
    gone = []
    for p in Path(path).iterdir():
        if p.is_symlink() and p.name in files | folders:
            p.unlink()  # a link grpokit did not make: the link goes, never what it points at
        elif p.name in folders and p.is_dir():
            shutil.rmtree(p)
        elif p.name in files and p.is_file():
            p.unlink()
        else:
            continue
        gone.append(p.name)
    return gone
