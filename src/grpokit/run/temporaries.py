"""The writer's temporary files: a new file beside the name it will be renamed to, named by its process.

    tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".tmp", dir=path.parent)   # grpokit.run.writer
    sweep(folder)            # remove the ones a killed process left (its PID is gone), staging folders too;
                             # whole=True: every folder below
    contents(folder)         # what a folder holds, those left out: a folder with nothing else is empty

grpokit.run.writer removes its temporary file on any error; only a process killed between creating and renaming it
leaves one. Nothing will ever rename it, so the next write into its folder removes it (a resume sweeps the whole
run: grpokit.run.rundir), and a folder holding nothing else is empty to every check (a run killed before its
record was renamed into place can be trained into again).

Not covered: a temporary left by a process on another machine sharing the folder (its PID means nothing here: it
is kept); a PID reused by a live process since (kept until that process ends).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

# `.NAME.PID-XXXXXXXX.tmp`: the writer's own new file beside NAME, named by the process writing it.
_TEMPORARY = re.compile(r"^\..+\.(\d+)-[a-z0-9_]+\.tmp$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process (or a PID no process can have)
        return False
    except PermissionError:  # another user's process
        return True
    return True


def stale_temporary(path: str | Path) -> bool:
    """A temporary file of the writer's whose process is gone (killed mid-write): nothing will rename it."""
    m = _TEMPORARY.match(Path(path).name)
    return m is not None and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1)))


def sweep(folder: str | Path, whole: bool = False) -> list[Path]:
    """Remove the writer's temporaries that a killed process left in `folder` (`whole`: in every folder below it,
    never through a link); what was removed."""
    out = []
    for root, dirs, files in os.walk(folder) if whole else [(str(folder), [], _names(folder))]:
        for name in [*files, *dirs]:
            path = Path(root) / name
            if not stale_temporary(path) or os.path.islink(path):
                continue
            if os.path.isdir(path):  # a staging folder (grpokit.run.writer.staging_folder): a library's save
                shutil.rmtree(path, ignore_errors=True)  # rmtree removes links inside, never what they point at
                if name in dirs:
                    dirs.remove(name)
                out.append(path)
            elif os.path.isfile(path):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    out.append(path)
    return out


def _names(folder) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def contents(folder: str | Path, ignore=()) -> list[Path]:
    """What `folder` holds but `ignore` (names) and the temporaries of killed writers (`stale_temporary`)."""
    return [Path(folder) / n for n in _names(folder) if n not in ignore and not stale_temporary(Path(folder) / n)]


def temporary_prefix(path: Path) -> str:
    """`.NAME.PID-`: what a temporary for `path` starts with (mkstemp adds its random part and `.tmp`)."""
    return f".{path.name}.{os.getpid()}-"
