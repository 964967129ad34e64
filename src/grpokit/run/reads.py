"""What the current command reads: the files no write of grpokit.run.writer may go over.

    with command():                                    # cli.main: one command's inputs, forgotten after it
    reading(recipe, data, exclude)                     # the files this command reads: never written over
    read_by_this_command(path)                         # the writer's check: is this name one of them?

A file is one of them by its resolved path, or by device and inode looked up again at the write (a hard link or
another name of the same file). Outside a `command()` nothing is recorded.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

_inputs: list[Path] = []  # the files the current command reads (`reading`), while a `command()` is open
_open = [0]  # how many `command()` blocks are open (nested ones share the outermost's inputs)


@contextlib.contextmanager
def command():
    """One command's scope: the inputs `reading` records inside it are forgotten when the outermost ends (a
    library function with inputs of its own opens one too; inside a command it joins the command's)."""
    if not _open[0]:
        _inputs.clear()
    _open[0] += 1
    try:
        yield
    finally:
        _open[0] -= 1
        if not _open[0]:
            _inputs.clear()


def reading(*paths) -> None:
    """Record files this command reads (None and `hf:` / `builtin:` names are skipped): no write goes over them.
    Outside a `command()` nothing is recorded (a long-lived process would otherwise collect every file it read)."""
    if not _open[0]:
        return
    for p in paths:
        if p is None or not str(p).strip() or str(p).startswith(("hf:", "builtin:")):
            continue
        path = Path(os.path.abspath(os.path.expanduser(str(p))))
        if path not in _inputs:
            _inputs.append(path)


def _same_file(a: Path, b: Path) -> bool:
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def read_by_this_command(path: str | Path) -> Path | None:
    """The input (`reading`) that `path` is, by resolved path or by device and inode; None."""
    return next((p for p in _inputs if _same_file(Path(path), p)), None)
