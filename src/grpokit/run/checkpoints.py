"""Checkpoints of a run: their names, whether their files are whole, and the one-writer lock.

    step_of(path)                          # checkpoint-N -> N (the one place steps are parsed)
    checkpoint_damage(ck)                  # "config.json is missing", "model.safetensors is unreadable (...)"
    torch_state_damage(ck)                 # "optimizer.pt has no param_groups (list): ..." (resume, rollback)
    refuse_nonfinite(model, ck)            # NaN/inf weights -> GrpokitError
    with RunLock(run / ".lock"): ...       # a second writer is refused, naming the holder
    with FolderLock(run / "eval", "evaluation"): ...   # eval, export, rm: one at a time per folder, nothing written

Damage checks read file headers only (safetensors, zip end records), never the weights.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import secrets
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
        state = read_json(ck / "trainer_state.json", note=lambda _: None)
        if state is None:
            return "trainer_state.json is missing or corrupt"
        why = _trainer_state_damage(state)
        if why:
            return why
        return torch_state_damage(ck)
    return None


def torch_state_damage(ck: Path) -> str | None:
    """Why the trainer could not restore a checkpoint's optimizer, scheduler or rng states (those present), or None:
    checked before a resume or a rollback starts, so that neither fails on them at its first step."""
    for f in sorted([*ck.glob("*.pt"), *ck.glob("*.pth")]):  # optimizer, scheduler, rng states: torch.save zips
        if not zipfile.is_zipfile(f):  # a cut or foreign one lacks the zip's end record
            return f"{f.name} is truncated or not a file torch wrote"
        why = _torch_state_damage(f)
        if why:
            return why
    return None


def _torch_state_damage(f: Path) -> str | None:
    """Why the Trainer could not restore `f` (optimizer.pt, scheduler.pt, rng_state*.pth): not loadable as plain
    tensors and containers (an empty zip, a pickled object), or another state than its name says; None. Loaded as
    transformers loads it (weights_only, numpy's rng types allowed), its tensors mapped, not read."""
    import torch
    from transformers.trainer_pt_utils import safe_globals

    try:
        with safe_globals():
            state = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - whatever torch says of a foreign file, the verdict is the same
        # torch's text for a refused object suggests turning the safety check off: never repeated to a user
        return f"{f.name} is not a state torch saved for this trainer (it does not load as plain tensors: " \
               f"{type(e).__name__})"
    need = ({"param_groups": list, "state": dict} if f.name == "optimizer.pt" else
            {"last_epoch": int} if f.name == "scheduler.pt" else
            {"python": tuple, "cpu": torch.Tensor} if f.name.startswith("rng_state") else {})
    if need and not isinstance(state, dict):
        return f"{f.name} holds a {type(state).__name__}, not the {f.stem} state the trainer saves"
    for key, kind in need.items():
        if not isinstance(state.get(key), kind):
            return f"{f.name} has no {key} ({kind.__name__}): not the {f.stem} state the trainer saves"
    return None


# What transformers' resume reads from trainer_state.json without a default: the step, and the batch size that
# compare_trainer_and_checkpoint_args divides (missing, it raised a TypeError on every --resume, for ever).
_STATE_FIELDS = {"global_step": int, "train_batch_size": int}
_STATE_TYPES = {"max_steps": int, "log_history": list, "epoch": (int, float)}  # when present: of this type


def _trainer_state_damage(state: dict) -> str | None:
    """Why transformers could not resume from this trainer_state.json (a field it needs missing or of another
    type, a key TrainerState does not take), or None."""
    for key, kind in _STATE_FIELDS.items():
        if type(state.get(key)) is not kind:
            return f"trainer_state.json has no {kind.__name__} {key} (not a state transformers wrote)"
    for key, kind in _STATE_TYPES.items():
        if state.get(key) is not None and not isinstance(state[key], kind):
            return f"trainer_state.json's {key} is not a {getattr(kind, '__name__', 'number')}"
    from dataclasses import fields

    from transformers import TrainerState

    unknown = sorted(set(state) - {f.name for f in fields(TrainerState)})
    if unknown:
        return f"trainer_state.json holds keys transformers does not read ({', '.join(unknown[:3])})"
    callbacks = state.get("stateful_callbacks")  # {name: {"args", "attributes"} or a list of them}, read on resume
    if callbacks is not None and not (isinstance(callbacks, dict) and all(
            all(isinstance(s, dict) and isinstance(s.get("args", {}), dict) and isinstance(s.get("attributes", {}), dict)
                for s in (v if isinstance(v, list) else [v])) for v in callbacks.values())):
        return "trainer_state.json's stateful_callbacks is not the callbacks' states transformers wrote"
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
