"""How grpokit isolates a run: resource limits and the bubblewrap command line (see execution.py).

`detect_isolation()` probes once per process whether bwrap can start an
isolated interpreter here; `_bwrap_argv` builds the read-only, offline world
each judge and worker process runs in. execution.py runs the processes and
decides the verdict.
"""
from __future__ import annotations

import functools
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass

_ROOT_UID_BASE = 1_879_048_192  # 0x70000000: far above any real account; root mode draws uids from here
_ROOT_UID_SPAN = 1 << 20  # random per run, so concurrent runs almost never share an NPROC budget


@dataclass(frozen=True)
class Limits:
    """Resource limits for one run; each process of the run gets the per-process ones."""

    timeout_s: float = 10.0  # wall clock for the whole run; the tree is killed after it
    cpu_s: int = 10  # RLIMIT_CPU per process
    memory_mb: int = 1024  # RLIMIT_AS per process: large allocations raise MemoryError
    file_size_mb: int = 16  # RLIMIT_FSIZE: larger writes fail with "File too large"
    nproc: int = 32  # RLIMIT_NPROC for the run's uid: fork bombs stop here
    nofile: int = 256  # RLIMIT_NOFILE
    tmp_mb: int = 64  # size of the private /tmp (tmpfs lives in RAM)

@dataclass(frozen=True)
class Isolation:
    """What this machine offers. `kind` is "bwrap" or "none"; `detail` says how or why not."""

    kind: str
    detail: str
    fix: str = ""


def interpreter() -> tuple[str, str]:
    """The interpreter (not the venv shim) and its installation prefix."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    return exe, os.path.realpath(sys.base_prefix)


def _bwrap_argv(uid: int | None, limits: Limits, info_fd: int | None = None) -> list[str]:
    """bwrap arguments up to `--`: a fresh, read-only, offline world."""
    exe, prefix = interpreter()
    argv = [shutil.which("bwrap") or "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent",
            "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp",
            "--setenv", "LANG", "C.UTF-8", "--ro-bind", "/usr", "/usr"]
    if uid is None:  # not root: bwrap makes a user namespace; forbid nested ones (unbounded tmpfs mounts)
        argv += ["--unshare-user", "--disable-userns"]
    for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    # /etc holds only the loader's cache (readable: the unprivileged uid must find libraries)
    argv += ["--perms", "0755", "--dir", "/etc", "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp"]
    if not prefix.startswith("/usr/"):
        # The install may sit under a private home (pyenv in /root): recreate its parents
        # world-traversable inside, so the unprivileged uid can reach it, and show nothing else.
        parts = prefix.strip("/").split("/")
        for i in range(1, len(parts)):
            argv += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
        argv += ["--ro-bind", prefix, prefix]
    if info_fd is not None:  # bwrap writes the sandbox's pid 1 here: see _stop()
        argv += ["--info-fd", str(info_fd)]
    argv += ["--chdir", "/tmp", "--"]
    if uid is not None:  # root: bwrap keeps root; drop to a fresh uid with no way back
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    return argv + [exe]


def root_uids() -> tuple[int | None, int | None]:
    if os.geteuid() != 0:
        return None, None
    a = _ROOT_UID_BASE + random.randrange(_ROOT_UID_SPAN)
    return a, a + _ROOT_UID_SPAN  # judge and worker never share a uid


@functools.lru_cache(maxsize=1)
def detect_isolation() -> Isolation:
    """Probe once per process: can bwrap start an isolated interpreter here?"""
    if not sys.platform.startswith("linux"):
        return Isolation("none", f"bubblewrap needs Linux; this is {sys.platform}")
    if shutil.which("bwrap") is None:
        return Isolation("none", "bwrap (bubblewrap) is not installed", "apt-get install -y bubblewrap")
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return Isolation("none", "running as root but setpriv (util-linux) is missing", "apt-get install -y util-linux")
    uid, _ = root_uids()
    argv = _bwrap_argv(uid, Limits()) + ["-I", "-S", "-c", "import os; print(os.getuid())"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Isolation("none", f"bwrap failed to start: {e}")
    if p.returncode != 0:
        fix = ("allow unprivileged user namespaces (Ubuntu 24.04: sysctl kernel.apparmor_restrict_unprivileged_userns=0)"
               if uid is None else "")
        return Isolation("none", f"bwrap cannot run here: {p.stderr.strip()[:300]}", fix)
    how = "root: bwrap + setpriv to a fresh uid per run" if uid is not None else "user namespace, --disable-userns"
    return Isolation("bwrap", f"bubblewrap ({how}); sandboxed uid {p.stdout.strip()}; python {interpreter()[0]}")


def sandbox_command(isolation: str, uid: int | None, limits: Limits, src: str, arg: str, info_fd: int) -> list[str]:
    tail = ["-I", "-S", "-c", src] + ([arg] if arg else [])
    if isolation == "bwrap":
        return _bwrap_argv(uid, limits, info_fd) + tail
    return [interpreter()[0]] + tail


def rlimit_values(limits: Limits) -> list[int]:
    # order: CPU, AS, FSIZE, NPROC, NOFILE, CORE (see _limits in sandbox_programs._COMMON_SRC)
    return [limits.cpu_s, limits.memory_mb << 20, limits.file_size_mb << 20, limits.nproc, limits.nofile, 0]
