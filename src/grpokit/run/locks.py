"""The one-writer locks: a run's lock file and a folder's flock.

    with RunLock(run / ".lock"): ...       # a second writer is refused, naming the holder
    with FolderLock(run / "eval", "evaluation"): ...   # eval, export, rm: one at a time per folder, nothing written

Only EWOULDBLOCK/EAGAIN means "in use"; any other flock error is a file system without locks (`no_locks`).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import socket
import stat
import time
from pathlib import Path
from typing import Callable

from grpokit.errors import GrpokitError, Problem
from grpokit.run.files import note


_IN_USE = (errno.EWOULDBLOCK, errno.EAGAIN)  # flock's one answer for "another descriptor holds it"
NO_LOCKS_FIX = ("put the run on a local disk, or mount the network file system with locking on (NFS: not `nolock`, "
                "not `local_lock=all`): docs/reliability.md \"Shared and network file systems\"")


def no_locks(path, e: OSError) -> GrpokitError:
    """Any flock error but EWOULDBLOCK/EAGAIN: the file system cannot lock (NFS answers ENOLCK without its lock
    service, EBADF for a descriptor opened read-only), which says nothing about another grpokit process."""
    name = errno.errorcode.get(e.errno, str(e.errno))
    return GrpokitError([Problem(str(path), f"cannot be locked: its file system does not support locks ({name}: "
                                 f"{e.strerror or e}), so grpokit cannot make sure it is the only writer here",
                                 NO_LOCKS_FIX)], title="no lock")


def _lock_now(fd: int, path) -> bool:
    """flock(LOCK_EX | LOCK_NB): True when taken, False when another descriptor holds it; any other error
    raises `no_locks`."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in _IN_USE:
            return False
        raise no_locks(path, e) from None


class RunLock:
    """One writer per run directory: an advisory fcntl lock on RUN/.lock, a file grpokit creates and removes.

    The lock file is created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW) and names its PID, host and `token`, the
    run's `lock_token` from its record (grpokit.run.record); it is removed when the lock is released. A `.lock`
    already there is never written through: one that another process holds is refused naming the holder; one
    that is free and carries the run's token was left by a grpokit process that died (the kernel released its
    lock) and is taken over with a note, and so is one naming a process of this machine that is gone, in a folder
    with no record (a run killed before its record was in place: no token to compare); an empty file with no other
    link (what grpokit before records left after each run) holds nothing and is replaced. Anything else is refused
    with where/what/fix whatever its kind: a folder, a symbolic link, a FIFO, a file with other hard links, a file
    without the run's token, a file naming another host (locks may be each machine's own there: its process cannot
    be seen from here). A lock file removed by its holder while it is looked at (a release: removed, then unlocked)
    is looked at again. Only EWOULDBLOCK/EAGAIN means "held"; any other flock error is `no_locks` (NFS without
    locking, docs/reliability.md "Shared and network file systems"). The file is opened read-write: NFS grants an
    exclusive lock on a writable descriptor only.
    """

    def __init__(self, path: Path, note: Callable[[str], None] = note, token: str | None = None,
                 then: Callable[[], object] | None = None):
        self.path, self.note, self._fd, self.then = Path(path), note, None, then  # then: run once the lock is held
        # No token: a folder without a record (a new run's, or one killed before its record was in place), where a
        # free lock file naming a gone process of this machine can only be a killed grpokit's.
        self.proven = token is not None
        self.token = token or secrets.token_hex(8)

    def _refuse(self, what: str) -> GrpokitError:
        return GrpokitError([Problem(str(self.path), f"{what}, not grpokit's lock file: nothing was written to it",
                                     "if no grpokit process is writing this run, move it away (`mv "
                                     f"{self.path} ...`): grpokit creates its lock file itself")])

    def _existing(self) -> None:
        """Deal with a `.lock` found in place: refused (GrpokitError), or gone (stale, replaced) for a retry."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise self._refuse("is a symbolic link (grpokit would write into the file it points at)")
        if stat.S_ISDIR(st.st_mode):
            raise self._refuse("is a folder")
        if not stat.S_ISREG(st.st_mode):
            raise self._refuse("is not a regular file (a FIFO or a device)")
        if st.st_nlink > 1:
            raise self._refuse(f"is a file with {st.st_nlink - 1} other hard link(s) (grpokit would write into them)")
        try:  # read-write: NFS locks (POSIX locks underneath) refuse an exclusive lock on a read-only descriptor
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as e:
            raise GrpokitError([Problem(str(self.path), f"cannot open the run's lock file: {e.strerror or e}",
                                        "check the run directory's permissions, or whether its disk is read-only")]
                               ) from None
        try:
            if (os.fstat(fd).st_ino, os.fstat(fd).st_dev) != (st.st_ino, st.st_dev):
                return  # replaced meanwhile: look again
            if not _lock_now(fd, self.path):
                now = _lstat(self.path)
                if now is None or (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
                    return  # the holder was releasing it (it removes the file, then unlocks): look again
                raise GrpokitError([Problem(str(self.path.parent), f"another grpokit process is writing this run "
                                            f"({lock_holder(fd)})", "wait for it to finish or stop it; one run "
                                            "directory takes one writer (train into another --output-dir to run "
                                            "both)")], title="run directory is locked")
            holder = _holder_record(fd)
            if st.st_size == 0:
                pass  # grpokit before records truncated its lock on release: an empty file, nothing to lose
            elif holder is None or (holder.get("token") != self.token and (self.proven or not _killed_here(holder))):
                raise self._refuse("is a file without this run's lock token")
            elif isinstance(holder.get("host"), str) and holder["host"] != socket.gethostname():
                # Free here, but a lock may be this machine's own (NFS with local locks): the holder's process on
                # its machine cannot be seen from here, so it is never taken over on a guess.
                raise GrpokitError([Problem(str(self.path), f"was left by {lock_holder(fd)}, another machine: "
                                            "grpokit cannot see from here whether that process still runs",
                                            "if no grpokit process is writing this run, move it away (`mv "
                                            f"{self.path} ...`) once that process on {holder['host']:.100} has "
                                            "ended, and run the command again")],
                                   title="run directory is locked")
            else:
                self.note(f"took over a stale lock of {lock_holder(fd)}: that process is no longer running")
            now = os.lstat(self.path)
            if (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                os.unlink(self.path)
        finally:
            os.close(fd)

    def acquire(self) -> "RunLock":
        for _ in range(10):  # another process may create or remove the lock between two looks
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                self._existing()
                continue
            except OSError as e:
                raise GrpokitError([Problem(str(self.path), f"cannot create the run's lock file: {e.strerror or e}",
                                            "check the run directory's permissions, or whether its disk is "
                                            "read-only")]) from None
            try:  # ours (O_EXCL): blocking is safe, another process can only hold it for the moment it takes to read it
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                os.close(fd)
                raise no_locks(self.path, e) from None
            try:
                os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                                         "token": self.token}).encode("utf-8"))
            except BaseException:  # a full disk: the file this call made goes, and the lock with it
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                os.close(fd)
                raise
            self._fd = fd
            if self.then is not None:
                self.then()
            return self
        raise GrpokitError([Problem(str(self.path), "kept appearing and disappearing while grpokit took the lock",
                                    "another process is starting and stopping here: run one writer at a time")])

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            st, now = os.fstat(self._fd), os.lstat(self.path)
            if (st.st_ino, st.st_dev) == (now.st_ino, now.st_dev):
                os.unlink(self.path)  # removed while still locked: no one can take a lock file that is going
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


class FolderLock:
    """One writer per folder for the commands that write into a folder of grpokit's besides training (eval into a
    run's eval/, export, rm train and rm eval): an advisory flock on the folder's own descriptor. No file is
    written, and the kernel drops the lock when its process ends, so a killed command leaves nothing to clean up. A
    second command is refused at once, before any model loads, naming the holder (from /proc/locks).

        with FolderLock(run / "eval", "evaluation"): ...
    """

    def __init__(self, path: Path, what: str, fix: str | None = None):
        self.path, self.what, self._fd = Path(path), what, None
        self.fix = fix or f"wait for it to finish (or stop it), then run this {what} again"

    def acquire(self) -> "FolderLock":
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            taken = _lock_now(fd, self.path)
        except GrpokitError:
            os.close(fd)
            raise
        if not taken:
            holder = folder_holder(os.fstat(fd))
            os.close(fd)
            raise GrpokitError([Problem(str(self.path), f"another grpokit process is writing here ({holder})",
                                        self.fix)],
                               title=f"{self.path.name} is in use") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def folder_holder(st: os.stat_result) -> str:
    """'PID 123: python -m grpokit eval runs/x': the process holding a flock on the file or folder `st` describes."""
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            pids = [line.split()[4] for line in f if "FLOCK" in line and len(line.split()) > 5
                    and line.split()[5] == key]
    except OSError:
        pids = []
    if not pids:
        return "its process is not named here"
    try:
        with open(f"/proc/{pids[0]}/cmdline", "rb") as f:
            cmd = f.read(400).replace(b"\0", b" ").decode("utf-8", errors="replace").strip()
    except OSError:
        cmd = ""
    return f"PID {pids[0]}" + (f": {cmd[:200]}" if cmd else "")


def _lstat(path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


_MAX_LOCK_BYTES = 4096  # a holder record is ~80 bytes; a larger file is not one, and is not read whole


def _killed_here(h: dict) -> bool:
    """A holder record as `RunLock.acquire` writes it (pid, host, since, token, nothing else), of a process of this
    machine that is gone: a grpokit run killed before its folder's record was in place."""
    if not (set(h) == {"pid", "host", "since", "token"} and type(h["pid"]) is int and h["host"] == socket.gethostname()
            and isinstance(h["since"], (int, float)) and isinstance(h["token"], str)):
        return False
    try:
        os.kill(h["pid"], 0)
    except (ProcessLookupError, OverflowError, ValueError):
        return True
    except OSError:
        return False
    return False


def _holder_record(fd: int) -> dict | None:
    try:
        h = json.loads(os.pread(fd, _MAX_LOCK_BYTES, 0).decode("utf-8", errors="replace") or "null")
    except (ValueError, RecursionError, OSError):
        return None
    return h if isinstance(h, dict) else None


def lock_holder(fd: int) -> str:
    h = _holder_record(fd)
    if h is None:
        return "no holder recorded"
    try:  # a damaged record (inf, 1e999, a year past 9999, a string) has no readable time, not a traceback
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h["since"]))
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        since = "?"
    return f"PID {str(h.get('pid'))[:20]} on host {str(h.get('host'))[:100]}, since {since}"
