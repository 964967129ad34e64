"""Run untrusted (model-written) Python against trusted tests, isolated, and decide the verdict.

    from grpokit.sandbox import TestSpec, run_tests
    result = run_tests(code, TestSpec.from_asserts(["assert add(1, 2) == 3"]))
    result.passed, result.total, result.timed_out, result.error

    grpokit sandbox check        # which isolation this machine has

How a run works. Every run is two fresh process trees, each in its own
bubblewrap (`bwrap`) sandbox:

* the *worker* executes the solution's code and nothing else; it answers
  "call function NAME with these arguments" requests with the return value;
* the *judge* executes the trusted test code. The function under test is a
  proxy in the judge: calling it sends the arguments to the worker and turns
  the reply back into genuine builtin objects (None/bool/int/float/complex/
  str/bytes/list/tuple/dict/set/frozenset, nothing else). Every `assert`, every
  `==`, runs in the judge, which the solution never touches.

The judge reports each test's outcome to this process on its own stdout; the
verdict is what the judge saw, never the worker's exit status or output. The
two sandboxes (separate pid, ipc and network namespaces) share only the two
request/reply pipes, and the report pipe is not one of them — so no nonce is
needed: the worker has no way to write where the verdict is read. Whatever the
solution does to its own process (exit 0, `SystemExit`, print "all tests
passed", monkeypatch builtins, rewrite files, return an object whose `__eq__`
is always True, write forged replies ahead of time) can at most make it look
like a (stateful) function returning some plain value — the same as an honest
answer, checked by the judge. (A solution that hard-codes the expected
outputs passes, as it would anywhere: that is the tests' weakness, not an
escape.)

Covered (each item backed by tests/test_sandbox_adversarial.py):
* a pass is decided in the judge: early exit, SystemExit, printed claims,
  always-equal objects, builtin subclasses, monkeypatching or overwriting the
  test code, forged replies all score 0;
* no network: own network namespace (a listener on the host's loopback is not
  reachable);
* filesystem: only /usr, the library dirs, /etc/ld.so.cache and the Python
  install (grpokit's base interpreter, not its venv) are visible, read-only;
  the user's home, the project, the rest of /etc and the host's /tmp are not;
  a private size-capped tmpfs at /tmp;
* own pid namespace: other processes are invisible; when a run ends its whole
  tree dies, grandchildren that called setsid() included;
* an unprivileged uid with no capabilities and no_new_privs (when grpokit runs
  as root, each run gets a fresh random uid so that RLIMIT_NPROC, which root
  ignores and which counts per uid, bounds that run only);
* a clean environment (no secrets from ours), a clean stdin;
* limits: wall-clock timeout for the whole run, CPU seconds, address space
  (large allocations raise MemoryError), file size, process count (fork
  bombs), open files, tmpfs size, no core dumps.

Not covered:
* total memory of a run is bounded by nproc x memory_mb, not by a cgroup;
* kernel exploits. When grpokit runs as root, a solution can still create
  its own user namespace and mount a tmpfs there that no size cap bounds (the
  non-root path forbids nested namespaces with --disable-userns; a seccomp
  filter would close it for root too);
* CPU contention: a run may use all cores until its timeout;
* "unsafe" mode (no bwrap): only the judge/worker split, the clean environment,
  rlimits and a killed process group — no filesystem, network or pid
  isolation, and as root no process limit. It warns on every run;
* inside the sandbox only the standard library of grpokit's own Python is
  importable (no site-packages: numpy etc. are import failures);
* arguments that the function under test mutates in place are not copied back
  to the judge; values that are not plain data cannot be returned.
"""
from __future__ import annotations

import ast
import builtins
import json
import logging
import marshal
import os
import select
import signal
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

# Limits and the bwrap command line: isolation.py.
from grpokit.sandbox.isolation import Isolation, Limits, detect_isolation, rlimit_values, root_uids, sandbox_command

# The worker and judge programs (source strings run in fresh interpreters) live in their own module.
from grpokit.sandbox.programs import JUDGE_SRC, WORKER_SRC

log = logging.getLogger(__name__)

_STARTUP_GRACE_S = 3.0  # bwrap + two interpreters start in ~0.15 s; on a loaded 2-core box much longer
_MAX_REPORT_BYTES = 4 << 20  # judge output is one short record per test
_ERROR_CHARS = 2000  # error text kept in a result
_REAP_S = 5.0  # after SIGKILL to pid 1, the namespace is torn down in milliseconds
_HOST_ENV = {"PATH": "/usr/bin:/bin"}  # what bwrap (or, unsafe, the child) inherits: none of our secrets


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the solution): bwrap missing or broken, judge crashed."""


@dataclass(frozen=True)
class TestSpec:
    """Trusted test code, split into units the judge runs one by one.

    `prelude` runs first in the judge (HumanEval's prompt: imports and helper
    functions tests use), then `setup`; then each unit. Units of kind "test"
    are counted; "setup" units (assignments, imports inside `check`) are not.
    `proxies` maps names in the judge's namespace to worker functions.
    """

    __test__ = False  # not a pytest class, despite the name

    units: tuple[tuple[str, str], ...]  # (kind, source)
    proxies: dict[str, str] = field(default_factory=dict)  # judge name -> solution name; {} = every referenced name
    prelude: str = ""
    setup: str = ""

    @property
    def total(self) -> int:
        return sum(1 for kind, _ in self.units if kind == "test")

    @classmethod
    def from_asserts(cls, asserts: list[str], setup: str = "") -> "TestSpec":
        """MBPP-style: each string is one test; the names it calls are the solution's functions."""
        units = []
        for i, src in enumerate(asserts):
            try:
                ast.parse(src)
            except SyntaxError as e:
                raise ValueError(f"test {i} does not parse: {e}") from None
            units.append(("test", src))
        return cls(tuple(units), {}, "", setup)

    @classmethod
    def from_humaneval(cls, test: str, entry_point: str, prompt: str = "") -> "TestSpec":
        """HumanEval-style: `test` defines `check(candidate)`; each top-level statement of
        `check` that asserts something about `candidate` is one test."""
        tree = ast.parse(test)
        setup, check = [], None
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "check":
                check = node
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(
                node.value.func, "id", None
            ) == "check":
                continue  # a trailing `check(f)` would call the real function; the judge calls it by units
            else:
                setup.append(node)
        if check is None or not check.args.args:
            raise ValueError("HumanEval test has no `def check(candidate):`")
        param = check.args.args[0].arg
        units = []
        for stmt in check.body:
            names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            has_assert = any(isinstance(n, ast.Assert) for n in ast.walk(stmt))
            # `assert True` says nothing about the solution: run it, don't count it.
            kind = "test" if has_assert and (param in names or entry_point in names) else "setup"
            units.append((kind, ast.unparse(stmt)))
        setup_src = "\n".join(ast.unparse(n) for n in setup)
        return cls(tuple(units), {param: entry_point, entry_point: entry_point}, prompt, setup_src)


@dataclass
class RunResult:
    """What the judge saw. `passed`/`total` count tests; everything else explains failures."""

    passed: int = 0
    total: int = 0
    compiled: bool = False  # the solution compiled and its top level ran to the end
    failed_tests: list[str] = field(default_factory=list)  # "source -> reason", in order
    timed_out: bool = False
    memory_exceeded: bool = False
    error: str = ""  # compile/import error, worker death, timeout
    isolation: str = ""  # "bwrap" or "unsafe"
    duration_s: float = 0.0

    @property
    def all_passed(self) -> bool:
        return self.compiled and self.total > 0 and self.passed == self.total

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


# ------------------------------------------------------------------ isolation (isolation.py)



def _referenced_names(spec: TestSpec) -> list[str]:
    names = set()
    for _, src in spec.units:
        names |= {n.id for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Name)}
    return sorted(n for n in names if not hasattr(builtins, n))


# ------------------------------------------------------------------------ runs


def run_tests(code: str, spec: TestSpec, *, limits: Limits = Limits(), isolation: str = "bwrap") -> RunResult:
    """Run `code` against `spec` in a fresh judge/worker pair; never raises for what the code does.

    isolation: "bwrap" (raises SandboxError where bwrap cannot run) or "unsafe".
    """
    if isolation == "bwrap":
        found = detect_isolation()
        if found.kind != "bwrap":
            raise SandboxError(f"no sandbox: {found.detail}" + (f" (fix: {found.fix})" if found.fix else ""))
    elif isolation != "unsafe":
        raise ValueError(f"isolation must be 'bwrap' or 'unsafe', not {isolation!r}")
    start = time.monotonic()
    judge_uid, worker_uid = root_uids() if isolation == "bwrap" else (None, None)
    rl = rlimit_values(limits)
    req_r, req_w = os.pipe()  # judge -> worker
    rep_r, rep_w = os.pipe()  # worker -> judge
    winfo_r, winfo_w = os.pipe()  # bwrap -> us: the pid of each sandbox's pid 1
    jinfo_r, jinfo_w = os.pipe()
    fds = [req_r, req_w, rep_r, rep_w, winfo_r, winfo_w, jinfo_r, jinfo_w]
    payload = {"code": code, "units": [tuple(u) for u in spec.units], "proxies": dict(spec.proxies),
               "referenced": _referenced_names(spec), "prelude": spec.prelude, "setup": spec.setup,
               "limits": rl, "timeout_s": limits.timeout_s, "fds": [req_w, rep_r]}
    unsafe = isolation == "unsafe"
    worker = judge = None
    pidfds: list[int | None] = [None, None]
    try:
        # worker_err only ever holds bwrap's and the interpreter's own start-up errors: the worker
        # points fd 2 at /dev/null before it reads the solution.
        with tempfile.TemporaryFile() as spec_file, tempfile.TemporaryFile() as judge_err, \
                tempfile.TemporaryFile() as worker_err:
            spec_file.write(marshal.dumps(payload))
            spec_file.seek(0)
            worker = subprocess.Popen(
                sandbox_command(isolation, worker_uid, limits, WORKER_SRC, ",".join(map(str, rl)), winfo_w),
                stdin=req_r, stdout=rep_w, stderr=worker_err, pass_fds=(winfo_w,), env=_HOST_ENV,
                start_new_session=True)
            judge = subprocess.Popen(
                sandbox_command(isolation, judge_uid, limits, JUDGE_SRC, "", jinfo_w), stdin=spec_file,
                stdout=subprocess.PIPE, stderr=judge_err, pass_fds=(req_w, rep_r, jinfo_w), env=_HOST_ENV,
                start_new_session=True)
            for i in (0, 1, 2, 3, 5, 7):  # only the two sandboxes hold the channel now
                os.close(fds[i])
                fds[i] = -1
            soon = time.monotonic() + _STARTUP_GRACE_S
            pidfds = [_pid1(None if unsafe else info, soon) for info in (winfo_r, jinfo_r)]
            host_timeout = False
            try:
                report, _ = judge.communicate(timeout=limits.timeout_s + _STARTUP_GRACE_S)
            except subprocess.TimeoutExpired:
                host_timeout = True
                _stop(judge, pidfds[1], unsafe)
                report, _ = judge.communicate()
            _stop(worker, pidfds[0], unsafe)
            _stop(judge, pidfds[1], unsafe)  # test code may have left children too
            judge_err.seek(0)
            err_text = judge_err.read(_ERROR_CHARS).decode(errors="replace")
            worker_err.seek(0)
            worker_text = worker_err.read(_ERROR_CHARS).decode(errors="replace")
    finally:
        for p, pidfd in zip((worker, judge), pidfds):
            if p is not None and p.poll() is None:
                _stop(p, pidfd, unsafe)
        for fd in fds + [f for f in pidfds if f is not None]:
            if fd >= 0:
                os.close(fd)
    result = _parse_report(report[:_MAX_REPORT_BYTES], spec, host_timeout, judge.returncode, err_text)
    if not result.compiled and worker_text.strip():
        # The worker never got to the solution: our failure, not a compile error to penalise.
        raise SandboxError(f"the solution's sandbox failed to start: {worker_text.strip()}")
    result.isolation = isolation
    result.duration_s = time.monotonic() - start
    return result


def _pid1(info_r: int | None, deadline: float) -> int | None:
    """A pidfd for the sandbox's pid 1, read from bwrap's --info-fd; None if there is none.

    Taken right after start, while pid 1 certainly exists, and checked against
    the pid namespace bwrap reported so that a recycled pid is never signalled.
    """
    if info_r is None:
        return None
    data = b""
    while not data.rstrip().endswith(b"}"):
        ready, _, _ = select.select([info_r], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(info_r, 4096) if ready else b""
        if not chunk:
            return None  # bwrap died before creating the sandbox, or is stuck
        data += chunk
    try:
        info = json.loads(data)
        pid, ns = int(info["child-pid"]), info["pid-namespace"]
        pidfd = os.pidfd_open(pid)
    except (ValueError, KeyError, TypeError, OSError):
        return None
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") == f"pid:[{ns}]":
            return pidfd
    except OSError:
        pass
    os.close(pidfd)  # already gone (so was its namespace) or not ours
    return None


def _stop(proc: subprocess.Popen, pidfd: int | None, unsafe: bool) -> None:
    """Kill a run's process tree and return only once all of it is gone.

    bwrap: SIGKILL the sandbox's pid 1. The kernel kills every process in its
    pid namespace (setsid() or not) before pid 1 itself finishes exiting, so
    the pidfd turning readable means the whole tree is dead. (The outer bwrap
    may exit earlier than that: it learns the exit status through a pipe.)
    Unsafe: SIGKILL the process group; a setsid() grandchild escapes it.
    """
    if unsafe:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    elif pidfd is not None:
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        select.select([pidfd], [], [], _REAP_S)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _frames(report: bytes) -> list[dict]:
    """The judge's length-prefixed marshal records; a record cut off by a kill is dropped."""
    out, pos = [], 0
    while pos + 4 <= len(report):
        (n,) = struct.unpack_from(">I", report, pos)
        if pos + 4 + n > len(report):
            break
        out.append(marshal.loads(report[pos + 4: pos + 4 + n]))  # written by marshal.dumps in the judge
        pos += 4 + n
    return out


def _parse_report(report: bytes, spec: TestSpec, host_timeout: bool, rc: int | None, err: str) -> RunResult:
    res = RunResult(total=spec.total, timed_out=host_timeout)
    finished = False
    tests = [src for kind, src in spec.units if kind == "test"]
    test_no = {unit: n for n, unit in enumerate(i for i, (kind, _) in enumerate(spec.units) if kind == "test")}
    outcome: dict[int, str] = {}  # test number -> "" when it passed, else why not
    for ev in _frames(report):
        kind = ev.get("event")
        if kind == "ready":
            res.compiled = True
        elif kind == "import_error":
            res.error = ev["error"][:_ERROR_CHARS]
            res.timed_out |= bool(ev.get("timed_out"))
            res.memory_exceeded |= bool(ev.get("memory"))
            finished = True
        elif kind == "test":
            outcome[test_no[ev["i"]]] = "" if ev["ok"] else (ev["reason"] or "failed")
        elif kind == "done":
            finished = True
    if not finished and not host_timeout:
        raise SandboxError(f"the judge failed (exit {rc}): {err.strip() or 'no output'}")
    for n, src in enumerate(tests):
        reason = outcome.get(n, "not run: " + ("timed out" if host_timeout else "the solution did not load"))
        if reason:
            res.failed_tests.append(f"{src[:200]} -> {reason}")
            res.timed_out |= reason.endswith("timed out")
            res.memory_exceeded |= "MemoryError" in reason
    res.passed = sum(1 for r in outcome.values() if not r)
    if not res.error:
        if res.timed_out:
            res.error = "timed out"
        elif any("exited" in r for r in outcome.values()):
            res.error = "the solution's process exited during the tests"
    return res


def run_many(jobs: list[tuple[str, TestSpec]], *, limits: Limits = Limits(), isolation: str = "bwrap",
             max_workers: int | None = None) -> list[RunResult]:
    """Run jobs in parallel, one thread per in-flight run (each run is two processes)."""
    from concurrent.futures import ThreadPoolExecutor

    if not jobs:
        return []
    workers = max_workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        return list(pool.map(lambda job: run_tests(job[0], job[1], limits=limits, isolation=isolation), jobs))


def probe() -> tuple[Isolation, RunResult | None]:
    """The isolation this machine offers and, when it is bwrap, one real test run through it (None otherwise)."""
    iso = detect_isolation()
    if iso.kind != "bwrap":
        return iso, None
    return iso, run_tests("def f():\n    return 42\n", TestSpec.from_asserts(["assert f() == 42"]),
                          limits=Limits(timeout_s=20))
