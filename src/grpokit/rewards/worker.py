"""A killable worker process for reward work that C code can stall: a hard deadline that holds where a
Python-level check cannot.

    value = call("sql", (db, sql, timeout_s, max_rows), deadline_s)   # or WorkerTimeout / WorkerDied / TaskError

SQLite checks its progress handler between VM instructions, and jsonschema runs `re` inside four keywords
with no hook for another engine: one instruction (`printf('%.*c', 1e9, 'x')`, `instr` of two 1 MB strings) or
one backtracking match (`^(a|a)*$` on 40 characters) can run for minutes where no deadline is checked. Such
work runs here, in one long-lived process per trainer process, and the caller kills it (its whole process
group) once the deadline passes; the next call starts a fresh one. A worker is bounded in memory too
(`WORKER_MEMORY_BYTES`, its address space), so a query cannot take the trainer's memory with it.

Protocol: length-prefixed pickles over the worker's stdin/stdout, one request at a time. Replies carry only
plain values (numbers, strings, bytes, None, tuples, lists, dicts), read with an unpickler that refuses every
class, so a reply can never make the trainer run code. A task's own exception comes back as its class name
and message (`TaskError`).

Not covered: work a reward does in the trainer itself (each reward bounds that on its own), and a worker
that blocks the kill (SIGKILL cannot be blocked).
"""
from __future__ import annotations

import atexit
import importlib
import io
import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WORKER_MEMORY_BYTES = 4 << 30  # address space of a worker: Python, sqlite3 and jsonschema take ~0.3 GB; a query
# or a schema that needs more is hostile (SQLite then fails with "out of memory": a 0 score, not a dead trainer)
KILL_GRACE_S = 1.0  # past a task's own timeout: the time its soft check (progress handler, keyword deadline)
# gets to return on its own before the process is killed; a kill costs a restart (~0.1 s)
_START_TIMEOUT_S = 30.0  # a fresh worker answers its first request within this, imports included
_HEADER = struct.Struct("!Q")
_IMPORT = "import"  # the request a fresh worker answers first: its task's module imported
# The tasks a worker runs: name -> "module:function" (imported in the worker on first use).
TASKS = {
    "sql": "grpokit.rewards.sqlite_ro:run_readonly",
    "json_schema": "grpokit.rewards.json_schema:check_in_worker",
}
# Run by the worker's interpreter: grpokit from the same tree as the caller, never the caller's current folder.
_BOOT = ("import sys; sys.path[:] = [sys.argv[1], *(p for p in sys.path if p not in ('', '.'))]; "
         "from grpokit.rewards.worker import serve; serve()")


class WorkerTimeout(Exception):
    """The task ran past its deadline and the worker was killed."""


class WorkerDied(Exception):
    """The worker ended without an answer (out of memory, a crash in C)."""


class WorkerBroken(RuntimeError):
    """A fresh worker did not start or could not import its task: an installation problem, raised (a reward
    error, counted), never a silent 0 for every completion."""


class TaskError(Exception):
    """The task raised: `kind` is the exception's class name."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # replies are plain values: no class may be built from one
        raise pickle.UnpicklingError(f"a worker reply may not name {module}.{name}")


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=4)
    return _HEADER.pack(len(data)) + data


# ---------------------------------------------------------------- the worker process
def _limit_self() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    try:  # die with the trainer even when it is killed outright (Linux); stdin's EOF covers the rest
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _read_exact(stream, n: int) -> bytes:
    data = stream.read(n)
    if len(data) < n:
        raise EOFError
    return data


def serve() -> None:
    """The worker's loop: read a request, run the task, write the reply; exits at EOF."""
    _limit_self()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a task that prints cannot corrupt the replies
    functions = {}
    while True:
        try:
            (n,) = _HEADER.unpack(_read_exact(stdin, _HEADER.size))
            task, args = pickle.loads(_read_exact(stdin, n))
        except EOFError:
            return
        try:
            name = args[0] if task == _IMPORT else task
            if name not in functions:
                module, _, attr = TASKS[name].partition(":")
                functions[name] = getattr(importlib.import_module(module), attr)
            reply = ("ok", True if task == _IMPORT else functions[task](*args))
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller as kind + message
            reply = ("err", type(e).__name__, str(e)[:2000])
        try:
            stdout.write(_frame(reply))
        except (pickle.PicklingError, TypeError) as e:  # a value that is not plain
            stdout.write(_frame(("err", "TypeError", f"the reply is not a plain value: {e}")))
        stdout.flush()


# ---------------------------------------------------------------- the caller's side
class Worker:
    """One worker process, started on first use and after a kill; calls from several threads take turns."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self._ready: set[str] = set()
        self._owner = 0
        self._lock = threading.Lock()

    def _start(self) -> None:
        src = str(Path(__file__).resolve().parents[2])  # the folder holding this grpokit package
        self._stderr = tempfile.TemporaryFile()  # read only when the worker fails to start; a pipe could fill up
        self._proc = subprocess.Popen([sys.executable, "-c", _BOOT, src], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, start_new_session=True, close_fds=True)
        self._owner = os.getpid()
        self._ready = set()

    def _prepare(self, task: str) -> None:
        """The task's module imported in the worker before the clock of a request starts: the kill comes at the
        request's own deadline, whatever the start cost."""
        try:
            reply = self._ask((_IMPORT, (task,)), time.monotonic() + _START_TIMEOUT_S)
        except (WorkerTimeout, WorkerDied, OSError, EOFError, ValueError, pickle.UnpicklingError, struct.error):
            reply = ("err", "", "no answer")
        if reply[0] != "ok":
            self._stderr.seek(0)
            tail = self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
            self.kill()
            raise WorkerBroken(f"the {task} worker did not start ({sys.executable}): {reply[2]}; {tail}")
        self._ready.add(task)

    def kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or self._owner != os.getpid():
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: whatever it started goes with it
        except (ProcessLookupError, PermissionError):
            pass
        for f in (proc.stdin, proc.stdout, self._stderr):
            try:
                f.close()
            except OSError:
                pass
        proc.wait()

    def _read(self, n: int, deadline: float) -> bytes:
        fd, parts, got = self._proc.stdout.fileno(), [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WorkerTimeout
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise WorkerDied
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def _ask(self, request: tuple, deadline: float):
        self._proc.stdin.write(_frame(request))
        self._proc.stdin.flush()
        (n,) = _HEADER.unpack(self._read(_HEADER.size, deadline))
        return _PlainUnpickler(io.BytesIO(self._read(n, deadline))).load()

    def call(self, task: str, args: tuple, timeout_s: float):
        """The task's value; WorkerTimeout past `timeout_s` (the worker is killed), WorkerDied, or TaskError."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None or self._owner != os.getpid():
                self._proc = None  # in a forked child too: the parent's worker is not this process's to use
                self._start()
            if task not in self._ready:
                self._prepare(task)
            try:
                reply = self._ask((task, args), time.monotonic() + timeout_s)
            except WorkerTimeout:
                self.kill()
                raise
            except (OSError, EOFError, ValueError, WorkerDied, pickle.UnpicklingError, struct.error):
                self.kill()
                raise WorkerDied(f"the {task} worker ended without an answer") from None
        if reply[0] == "ok":
            return reply[1]
        raise TaskError(reply[1], reply[2])


_WORKER = Worker()


def call(task: str, args: tuple, timeout_s: float):
    """Run `task` in this process's worker, killed `timeout_s` after the request (see `Worker.call`)."""
    return _WORKER.call(task, args, timeout_s)


def _stop_at_exit() -> None:
    _WORKER.kill()


atexit.register(_stop_at_exit)
