"""The one writer: every file and folder a grpokit command writes, appends to or removes goes through here.

    write_file(path, data, within=run.path)            # a new file renamed into place (a folder grpokit made)
    with new_file(out, replace=args.overwrite) as f:   # a file the user named, streamed, renamed at the end
    write_rows(out, rows, replace=args.overwrite)      # JSON lines, the same way
    with append_file(run.metrics) as f: ...            # a run's logs: appended, never through a link
    make_folder(path, within=run.path)                 # folders, none of them through a link
    check_folder(path, within=run.path)                # ... and a folder checked so, before anything is made
    check_library_target(path, within=run.path)        # where a library (TRL, transformers) is about to write
    remove(path)                                       # a file, or a folder with all it holds, never a link's target
    move(src, dest, within=run.path)                   # a file or folder of grpokit's to a new name, never over one
    with staging_folder(target) as tmp: ...            # where a library saves, beside its target; swept if killed
    rewrite_in_place(run.run_json, text, within=...)   # a full disk only: run.json over its own blocks

What every write refuses, with where / what / fix (a GrpokitError, exit 2), before a byte is written:
- at the name: a symbolic link (one to nowhere too), a file with another hard link, a folder, a FIFO or a device;
- a file this command reads: the same resolved path, or the same file (device and inode, looked up again at the
  write), as one given to grpokit.run.reads.reading (the recipe, the data, `--exclude`, `--results`, a run's
  training file; `cli.main` opens each command's `command()` scope there);
- an existing file, unless `replace`: a command's `--overwrite`, or `within` (a folder grpokit's record proves
  it made, whose files grpokit writes again and again: run.json, eval/results.json);
- for a name the user gave (no `within`): a name inside a folder grpokit's record says it made (a run's
  `metrics.jsonl`, its `checkpoints/`): those files are the run's, and written by the run alone;
- with `within`: a folder between `within` and the name that is a link or not a folder (`RUN/report` a link
  to a user's folder), so nothing is written into a folder grpokit did not make.
A file is written to a new file of its own beside the name (O_EXCL), flushed, given the mode the user's umask
gives a new file, and renamed over the name: a crash, a full disk or an error leaves the old file or the new
one, never half of either. An error removes the temporary file; a process killed meanwhile leaves it, and the
next write into that folder removes it (grpokit.run.temporaries). benchmarks/fault_injection.py fails every
write, rename and fsync of a pipeline in turn, and kills it at each.

Files libraries write into a run folder by name (TRL's model card in checkpoints/, transformers'
checkpoint-N/) are checked by `check_library_target` just before the library writes (grpokit.training.trainer),
or the library writes into a staging folder of grpokit's own (`staging_folder`), moved in by `install` or `move`
(an export, a reward model, the model cache). Folders claimed by their record (`claim`, `install`):
grpokit.run.claims.

Not covered: another process that puts a link at the name between the check and the rename (the rename replaces
the name itself, so that link is replaced, never followed), or into a library's folder while the library writes; a temporary left by a process on
another machine sharing the folder (its PID means nothing here: it is kept).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run.reads import read_by_this_command
from grpokit.run.record import RECORD_FILE, read_record
from grpokit.run.temporaries import sweep, temporary_prefix

_NEW_NAME_FIX = "name a new file for the output (one that is not a link and that this command does not read)"
_EXISTS_FIX = "name a new file, or pass --overwrite to replace it"


# ---------------------------------------------------------------- the checks
def refused(path, what: str, fix: str) -> GrpokitError:
    return GrpokitError([Problem(str(path), what, fix)], title="nothing was written")


def _kind(st: os.stat_result) -> str | None:
    """Why a name cannot be written over (a link, a folder, ...), or None for a file with one link."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link: grpokit never writes through a link (the file it points at would change)"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, a socket or a device)"
    if st.st_nlink > 1:
        return (f"is a file with {st.st_nlink - 1} other hard link(s): grpokit never writes a file that has another "
                "name (the other names would change too)")
    return None


def _owner(path: Path) -> tuple[Path, str, dict] | None:
    """(folder, entry, record) when `path` is an entry of a folder grpokit's record says it made, or inside one."""
    parts = path.parts
    for i in range(len(parts) - 1, 0, -1):
        folder = Path(*parts[:i])
        if os.path.lexists(folder / RECORD_FILE):
            record = read_record(folder)
            entry = parts[i]
            if record is not None and (entry in record["entries"] or entry == RECORD_FILE):
                return folder, entry, record
            return None
    return None


def _inside(path: Path, within: str | Path, fix: str) -> tuple[Path, Path]:
    """(the folder `within`, resolved: a link the user named it by is followed, and `path` in it), or refused
    when `path` is not inside it."""
    w_abs, w_real = Path(os.path.abspath(within)), Path(os.path.realpath(within))
    for base in (w_abs, w_real):
        if path == base or base in path.parents:
            return w_real, w_real / path.relative_to(base)
    raise refused(path, f"is outside {w_abs}, the folder grpokit made for it", fix)


def _check_folders(path: Path, within: Path, fix: str) -> None:
    """Every folder below `within` (resolved) down to `path` that exists is a real folder, not a link to one."""
    here = within
    for part in path.relative_to(within).parts:
        here = here / part
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise refused(here, "is a symbolic link where grpokit made a folder: nothing is written through it",
                           f"move it out of {within} (it is not grpokit's), then run the command again")
        if not stat.S_ISDIR(st.st_mode):
            raise refused(here, "is a file where grpokit writes a folder",
                           f"move it out of {within} (it is not grpokit's), then run the command again")


def check_folder(path: str | Path, *, within: str | Path, fix: str = _NEW_NAME_FIX) -> Path:
    """`path` (resolved), or a GrpokitError when it is outside `within` or a folder from `within` down to it is a
    link or a file; nothing is created."""
    folder, path = _inside(Path(os.path.abspath(os.path.expanduser(str(path)))), within, fix)
    _check_folders(path, folder, fix)
    return path


def check_target(path: str | Path, *, replace: bool = False, within: str | Path | None = None,
                 fix: str = _NEW_NAME_FIX) -> Path:
    """`path` as it will be written, or a GrpokitError saying why nothing may be written there (module docstring).
    Nothing is created or changed."""
    raw = str(path)
    if not raw.strip():
        raise refused("''", "an empty path (it would mean the current folder)", fix)
    path = Path(os.path.abspath(os.path.expanduser(raw)))
    if within is not None:
        folder, path = _inside(path, within, fix)
        _check_folders(path.parent, folder, fix)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise refused(path, f"cannot be looked at: {e.strerror or e}", fix) from None
    if st is not None:
        why = _kind(st)
        if why:
            raise refused(path, why, fix)
    source = read_by_this_command(path)
    if source is not None:
        same = "" if source == path else f" ({source})"
        raise refused(path, f"is a file this command reads{same}: writing it would replace its own input", fix)
    if within is None:
        owner = _owner(path)
        if owner is not None:
            folder, entry, record = owner
            raise refused(path, f"is inside {folder}, a grpokit {record['kind']} folder ({entry} is grpokit's, "
                                 f"by its {RECORD_FILE}): its files are written by grpokit alone", fix)
        parent = path.parent
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        if not parent.is_dir():
            raise refused(path, f"{parent} is not a folder", fix)
    if st is not None and not replace:
        raise refused(path, "already exists: grpokit replaces a file only when told to",
                       _EXISTS_FIX if fix == _NEW_NAME_FIX else fix)
    return path


def check_library_target(path: str | Path, *, within: str | Path, fix: str | None = None) -> Path:
    """A file or folder a library is about to write inside `within` (TRL's model card, transformers' checkpoint
    folder): refused, with nothing written, when a folder on the way is a link or a file, when `path` is a link, a
    file with another hard link or not a file or folder, or (a folder) when anything inside it is. Libraries open
    their files by name and follow links; this is the writer's rule applied before they write. `path` (resolved)."""
    fix = fix or f"move it out of {within} (it is not grpokit's), then run the command again"
    folder, path = _inside(Path(os.path.abspath(os.path.expanduser(str(path)))), within, fix)
    _check_folders(path.parent, folder, fix)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    if not stat.S_ISDIR(st.st_mode):
        why = _kind(st)
        if why:
            raise refused(path, why, fix)
        return path
    for top, dirs, files in os.walk(path):  # never follows a link: each is refused by name
        for name in dirs + files:
            why = _kind(os.lstat(os.path.join(top, name)))
            if why and why != "is a folder":
                raise refused(os.path.join(top, name), why, fix)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- writing
def make_folder(path: str | Path, *, within: str | Path | None = None) -> Path:
    """Create `path` and its missing parents; with `within`, none of the folders from there on may be a link."""
    path = Path(os.path.abspath(os.path.expanduser(str(path))))
    if within is not None:
        folder, path = _inside(path, within, "")
        _check_folders(path, folder, "")
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise refused(path, "is a file, not a folder", "name a folder, or move that file away") from None
    return path


@contextlib.contextmanager
def new_file(path: str | Path, *, replace: bool = False, within: str | Path | None = None, text: bool = True,
             fix: str = _NEW_NAME_FIX):
    """A file handle to a new file beside `path` (checked by `check_target`), renamed over `path` when the block
    ends without an error; on an error the new file is removed and `path` is as it was."""
    path = check_target(path, replace=replace, within=within, fix=fix)
    make_folder(path.parent, within=within)
    sweep(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=temporary_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8", "newline": ""} if text else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        check_target(path, replace=replace, within=within, fix=fix)  # again: a link put there meanwhile is refused
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_file(path: str | Path, data: bytes | str, *, replace: bool = False, within: str | Path | None = None,
               fix: str = _NEW_NAME_FIX) -> Path:
    """Put `data` at `path` as a new file (`new_file`); `within` a folder grpokit made, the name is replaced."""
    with new_file(path, replace=replace or within is not None, within=within, text=isinstance(data, str),
                  fix=fix) as f:
        f.write(data)
    return Path(os.path.abspath(path))


def write_rows(path: str | Path, rows, *, replace: bool = False, fix: str = _NEW_NAME_FIX) -> int:
    """Rows as JSON lines at a path the user named (`new_file`: `replace` is the command's --overwrite); how many."""
    import json

    n = 0
    with new_file(path, replace=replace, fix=fix) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


@contextlib.contextmanager
def append_file(path: str | Path, *, within: str | Path | None = None):
    """A log of a run opened to append (created with the umask's mode if missing): never through a link, never a
    file with another hard link (O_NOFOLLOW, then checked on the open file)."""
    path = Path(path)
    if within is not None:
        folder, path = _inside(Path(os.path.abspath(path)), within, "")
        _check_folders(path.parent, folder, "")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError:
        if os.path.islink(path):
            raise refused(path, _kind(os.lstat(path)), f"move it out of {path.parent} (it is not grpokit's)") from None
        raise
    try:
        why = _kind(os.fstat(fd))
        if why:
            raise refused(path, why, f"move it out of {path.parent} (it is not grpokit's)")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        yield f


def rewrite_in_place(path: str | Path, data: str, *, within: str | Path) -> None:
    """The one write that is not a rename: for a disk so full that no new file fits (a failure recorded in run.json),
    the file's own blocks are reused: opened without following a link, refused unless it is a file with one link,
    then truncated and written. A crash in between leaves a cut file (read crash-tolerantly, RunDir.repair_status)."""
    path = Path(path)
    folder, path = _inside(Path(os.path.abspath(path)), within, "")
    _check_folders(path.parent, folder, "")
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        why = _kind(os.fstat(fd))
        if why:
            raise refused(path, why, f"move it out of {path.parent} (it is not grpokit's)")
        os.ftruncate(fd, 0)
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(path: str | Path) -> bool:
    """Delete a file, or a folder with all it holds (links inside it are removed, never followed); a link at `path`
    itself is refused. Whether anything was there."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise refused(path, "is a symbolic link: grpokit removes only what it made", f"move it out of {path.parent}")
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # rmtree removes links inside a folder, never what they point at
    else:
        path.unlink()
    return True


def remove_made(path: str | Path) -> None:
    """Remove a folder this very command made (a refused or failed start), quietly: nothing to tell."""
    with contextlib.suppress(OSError, GrpokitError):
        remove(path)


@contextlib.contextmanager
def staging_folder(beside: str | Path, *, within: str | Path | None = None):
    """A new, empty folder of this process beside `beside` (named as the writer's temporaries, so a killed process's
    is swept by the next write there), for a library to save into (transformers' save_pretrained, llama.cpp's
    converter) before grpokit moves the result in whole (`move`, `install`); removed with what is left in it when
    the block ends."""
    beside = Path(os.path.abspath(os.path.expanduser(str(beside))))
    make_folder(beside.parent, within=within)
    sweep(beside.parent)
    tmp = Path(tempfile.mkdtemp(prefix=temporary_prefix(beside), suffix=".tmp", dir=beside.parent))
    try:
        yield tmp
    finally:
        with contextlib.suppress(OSError, GrpokitError):
            remove(tmp)


def move(src: str | Path, dest: str | Path, *, within: str | Path) -> Path:
    """Move a file or folder of grpokit's to a new name in a folder of its own (never over anything)."""
    dest = Path(dest)
    if os.path.lexists(dest):
        raise refused(dest, "already exists", "move it away, then run the command again")
    make_folder(dest.parent, within=within)
    os.rename(src, dest)
    return dest
