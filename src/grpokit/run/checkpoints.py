"""Checkpoints of a run: their names, whether their files are whole, and the one-writer lock.

    step_of(path)                          # checkpoint-N -> N (the one place steps are parsed)
    checkpoint_damage(ck)                  # "config.json is missing", "model.safetensors is unreadable (...)"
    refuse_nonfinite(model, ck)            # NaN/inf weights -> GrpokitError
    with RunLock(run / ".lock"): ...       # a second writer is refused, naming the holder

Damage checks read file headers only (safetensors, zip end records), never the weights.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import stat
import time
import zipfile
from pathlib import Path
from typing import Callable

from grpokit.errors import GrpokitError, Problem
from grpokit.run.files import note, read_json

CHECKPOINT_PREFIX, COMPLETE_MARKER = "checkpoint-", "COMPLETE"
_STEP = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")


def step_of(path: str | Path) -> int | None:
    """The step of a `checkpoint-N` folder; None for any other name (the one place steps are parsed)."""
    m = _STEP.match(Path(path).name)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- damaged checkpoints
def checkpoint_damage(ck: Path, for_resume: bool = False) -> str | None:
    """What is wrong with a checkpoint's files (None: they look whole). Reads headers only, not the weights."""
    from safetensors import safe_open

    adapter = (ck / "adapter_config.json").is_file()
    if not adapter and not (ck / "config.json").is_file():
        return "config.json is missing"
    weights = sorted(ck.glob("*.safetensors"))
    if not weights and not list(ck.glob("*.bin")):
        return "no weights file (model.safetensors)"
    for f in weights:
        try:
            with safe_open(str(f), "np") as fh:  # checks the header and that the file covers every tensor
                fh.keys()
        except Exception as e:  # SafetensorError, OSError: the message says truncated / header corrupt
            return f"{f.name} is unreadable ({str(e).splitlines()[0][:120]})"
    if for_resume:
        if read_json(ck / "trainer_state.json", note=lambda _: None) is None:
            return "trainer_state.json is missing or corrupt"
        opt = ck / "optimizer.pt"
        if opt.is_file() and not zipfile.is_zipfile(opt):  # torch.save writes a zip; a cut one lacks its end record
            return "optimizer.pt is truncated"
    return None


def nonfinite_weights(model) -> list[str]:
    """Names of parameters holding NaN or inf (a diverged run saves them without complaint)."""
    import torch

    return [n for n, p in model.named_parameters() if not torch.isfinite(p.detach()).all()]


def refuse_nonfinite(model, ck: Path | str) -> None:
    bad = nonfinite_weights(model)
    if bad:
        raise GrpokitError([Problem(str(ck), f"checkpoint is damaged: {len(bad)} weight tensor(s) hold NaN or inf "
                                    f"({', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''})",
                                    "training diverged before this save: use an earlier checkpoint "
                                    "(`grpokit doctor RUN_DIR` shows where), or lower train.learning_rate")])


def damaged(ck: Path, why: str) -> GrpokitError:
    return GrpokitError([Problem(str(ck), f"checkpoint {step_of(ck)} is damaged: {why}",
                                 "use another checkpoint (last, best or a step), or delete this folder")])


# ---------------------------------------------------------------- the run lock
class RunLock:
    """One writer per run directory: an advisory fcntl lock on RUN/.lock that names its PID and host.

    The kernel releases the lock when its process dies, so a lock file still naming a PID but free to take
    is stale (a killed run) and is taken over with a note. The lock file is opened without following a
    symlink and without blocking, and must be a regular file: a `.lock` that is a folder, a link (which
    would have grpokit truncate the file it points at) or a FIFO is refused with where/what/fix, and a
    damaged holder record (not JSON, `since` out of range) reads as "no holder recorded".
    """

    def __init__(self, path: Path, note: Callable[[str], None] = note):
        self.path, self.note, self._fh = Path(path), note, None

    def _open(self):
        fix = f"delete it (`rm -r {self.path}`): grpokit creates its lock file itself"
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except IsADirectoryError:
            raise GrpokitError([Problem(str(self.path), "is a folder, not grpokit's lock file", fix)]) from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise GrpokitError([Problem(str(self.path), "is a symbolic link, not grpokit's lock file", fix)]) from None
            raise GrpokitError([Problem(str(self.path), f"cannot open the run's lock file: {e.strerror or e}",
                                        "check the run directory's permissions, or whether its disk is read-only")]
                               ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise GrpokitError([Problem(str(self.path), "is not a regular file (a FIFO or a device), not grpokit's lock "
                                        "file", fix)])
        os.set_blocking(fd, True)
        return os.fdopen(fd, "r+", encoding="utf-8", errors="replace")

    def acquire(self) -> "RunLock":
        fh = self._open()
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = lock_holder(fh)
            fh.close()
            raise GrpokitError([Problem(str(self.path.parent), f"another grpokit process is writing this run "
                                        f"({holder})", "wait for it to finish or stop it; one run directory takes "
                                        "one writer (train into another --output-dir to run both)")],
                               title="run directory is locked") from None
        prev = lock_holder(fh)
        if prev != "no holder recorded":
            self.note(f"took over a stale lock of {prev}: that process is no longer running")
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}))
        fh.flush()
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is None:
            return
        try:
            self._fh.seek(0)
            self._fh.truncate()  # an empty lock file is a free one; a named holder without the lock is stale
        except OSError:
            pass
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        self._fh = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


_MAX_LOCK_BYTES = 4096  # a holder record is ~80 bytes; a larger file is not one, and is not read whole


def lock_holder(fh) -> str:
    fh.seek(0)
    try:
        h = json.loads(fh.read(_MAX_LOCK_BYTES) or "null")
    except (ValueError, RecursionError):
        h = None
    if not isinstance(h, dict):
        return "no holder recorded"
    try:  # a damaged record (inf, 1e999, a year past 9999, a string) has no readable time, not a traceback
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h["since"]))
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        since = "?"
    return f"PID {str(h.get('pid'))[:20]} on host {str(h.get('host'))[:100]}, since {since}"
