"""Escape and cheating attempts against grpokit.sandbox: one test per claim in its docstring.

Two kinds of case:
* cheats: a wrong solution that tries to look right. The judge must count 0.
* probes: the solution reports what it can see or do as a return value, and
  the (trusted) test asserts the isolation held: e.g. `assert reach() ==
  'refused'`. A probe passing means the sandbox held.

Needs bubblewrap (skipped where `grpokit sandbox check` finds none). Each run
is bounded by a timeout of a few seconds; the fork bomb runs only in here,
with a process limit of 8.
"""
from __future__ import annotations

import os
import random
import socket
import sys
import time

import pytest
from conftest import DEADLINE_SLACK_S

from grpokit.sandbox.execution import TestSpec, run_tests
from grpokit.sandbox.isolation import Limits, detect_isolation

pytestmark = pytest.mark.skipif(detect_isolation().kind != "bwrap", reason="bubblewrap cannot run here")

FAST = Limits(timeout_s=4)


def run(code, asserts, limits=FAST):
    return run_tests(code, TestSpec.from_asserts(asserts), limits=limits)


def processes_with(tag: str) -> list[str]:
    """Host processes whose command line contains `tag` (what a run must not leave behind)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if tag.encode() in f.read():
                        found.append(pid)
            except OSError:
                pass
    return found


# ------------------------------------------------------------------- cheats
# Every solution is wrong (square(3) is not 9): only a forged verdict could pass.
SQUARE_TESTS = ["assert square(3) == 9", "assert square(4) == 16"]

CHEATS = [
    ("exit 0 at import", "import os\nos._exit(0)\ndef square(x):\n    return 0\n"),
    ("exit 0 inside the call", "import os\ndef square(x):\n    os._exit(0)\n"),
    ("SystemExit at import", "raise SystemExit(0)\n"),
    ("SystemExit inside the call", "def square(x):\n    raise SystemExit(0)\n"),
    ("prints a success claim", "print('all tests passed')\nprint('OK: 2/2')\ndef square(x):\n"
     "    print('passed')\n    return 0\n"),
    ("object whose __eq__ is always True", "class Any:\n    def __eq__(self, other):\n        return True\n"
     "    def __ne__(self, other):\n        return False\n    __hash__ = object.__hash__\n"
     "def square(x):\n    return Any()\n"),
    ("int subclass whose __eq__ is always True", "class I(int):\n    def __eq__(self, other):\n        return True\n"
     "    __hash__ = int.__hash__\ndef square(x):\n    return I(0)\n"),
    ("always-equal object inside a list", "class Any:\n    def __eq__(self, o):\n        return True\n"
     "def square(x):\n    return [Any()]\n"),
    ("monkeypatches assert machinery and builtins",
     "import builtins, sys\nbuiltins.AssertionError = type('Never', (Exception,), {})\n"
     "builtins.isinstance = lambda *a: True\nsys.modules['builtins'].__dict__['len'] = lambda x: 0\n"
     "def square(x):\n    return 0\n"),
    ("overwrites every test-looking file it can reach",
     "import os, sys\nfor root, dirs, files in os.walk('/'):\n    if root.startswith(('/proc', '/sys', '/dev', '/usr', sys.prefix)):\n"
     "        continue\n    for f in files:\n        if 'test' in f:\n            try:\n"
     "                open(os.path.join(root, f), 'w').write('pass')\n            except OSError:\n"
     "                pass\ndef square(x):\n    return 0\n"),
    ("forges the judge's report on every fd and on pid 1's",
     "import os, json\nline = (json.dumps({'event': 'ready'}) + '\\n' + ''.join(json.dumps({'event': 'test', 'i': i,"
     " 'ok': True, 'reason': ''}) + '\\n' for i in range(2)) + json.dumps({'event': 'done'}) + '\\n').encode()\n"
     "for fd in range(64):\n    try:\n        os.write(fd, line)\n    except OSError:\n        pass\n"
     "for p in os.listdir('/proc'):\n    if p.isdigit():\n        for fd in range(8):\n            try:\n"
     "                with open(f'/proc/{p}/fd/{fd}', 'wb') as f:\n                    f.write(line)\n"
     "            except OSError:\n                pass\ndef square(x):\n    return 0\n"),
    ("garbage frames on the reply channel", "import os\nfor fd in range(3, 32):\n    try:\n"
     "        os.write(fd, b'\\x00\\x00\\x00\\x05{bad}' * 100)\n    except OSError:\n        pass\n"
     "def square(x):\n    return 0\n"),
    ("tries to write into the judge's memory", "import os\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n"
     "        try:\n            open(f'/proc/{p}/mem', 'wb').write(b'x')\n        except OSError:\n            pass\n"
     "def square(x):\n    return 0\n"),
    ("huge return value", "def square(x):\n    return 'x' * (20 << 20)\n"),
]


@pytest.mark.parametrize("name,code", CHEATS, ids=[c[0] for c in CHEATS])
def test_cheats_score_zero(name, code):
    r = run(code, SQUARE_TESTS)
    assert r.passed == 0, r
    assert r.total == 2


def test_cheat_controls_pass_when_honest():
    # The same tests do pass for an honest solution: the cheats above fail for the right reason.
    assert run("def square(x):\n    return x * x\n", SQUARE_TESTS).passed == 2


def test_exit_at_import_is_a_load_failure_not_a_pass():
    r = run("import sys\nsys.exit(0)\n", SQUARE_TESTS)
    assert not r.compiled and "SystemExit" in r.error


# --------------------------------------------------------- leftovers, limits


def test_setsid_grandchild_does_not_outlive_the_run():
    tag = f"{random.randrange(10**6)}.{random.randrange(10**6)}"  # a sleep duration no one else uses
    code = ("import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execv('/bin/sleep', ['sleep', '{tag}'])\n    os._exit(0)\n"
            "import time\ntime.sleep(0.3)\ndef square(x):\n    return x * x\n")
    r = run(code, SQUARE_TESTS)
    assert r.passed == 2  # the daemon did not disturb the run...
    assert processes_with(tag) == []  # ...and is gone the moment run_tests returns


def test_fork_bomb_is_contained():
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    t = time.monotonic()
    r = run(bomb, SQUARE_TESTS, limits=Limits(timeout_s=2, nproc=8, cpu_s=2))
    assert r.passed == 0 and r.timed_out and not r.compiled
    assert time.monotonic() - t < DEADLINE_SLACK_S
    # the machine still runs sandboxes afterwards
    assert run("def square(x):\n    return x * x\n", SQUARE_TESTS).passed == 2


def test_process_count_is_limited():
    code = ("def forks():\n    import os, time\n    n = 0\n    for _ in range(64):\n        try:\n"
            "            pid = os.fork()\n        except OSError:\n            return n\n        if pid == 0:\n"
            "            time.sleep(2)\n            os._exit(0)\n        n += 1\n    return n\n")
    r = run(code, ["assert forks() < 8"], limits=Limits(timeout_s=4, nproc=8))
    assert r.passed == 1, r


def test_large_allocation_fails_and_is_reported():
    r = run("def square(x):\n    return len(bytearray(4 << 30))\n", SQUARE_TESTS)
    assert r.passed == 0 and r.memory_exceeded, r


def test_large_allocation_probe():
    code = "def alloc():\n    try:\n        bytearray(4 << 30)\n        return 'allocated'\n    except MemoryError:\n" \
           "        return 'MemoryError'\n"
    assert run(code, ["assert alloc() == 'MemoryError'"]).passed == 1


def test_large_file_is_refused():
    code = ("def write(n):\n    try:\n        with open('/tmp/big', 'wb') as f:\n            f.write(b'x' * n)\n"
            "        return 'written'\n    except OSError as e:\n        return e.errno\n")
    r = run(code, ["assert write(1 << 20) == 'written'", "import errno\nassert write(32 << 20) == errno.EFBIG"],
            limits=Limits(timeout_s=4, file_size_mb=8))
    assert r.passed == 2, r


def test_private_tmp_is_size_capped():
    code = ("def fill():\n    for i in range(100):\n        try:\n            with open(f'/tmp/f{i}', 'wb') as f:\n"
            "                f.write(b'x' * (4 << 20))\n        except OSError as e:\n            return e.errno\n"
            "    return 'filled'\n")
    r = run(code, ["import errno\nassert fill() == errno.ENOSPC"], limits=Limits(timeout_s=4, tmp_mb=16))
    assert r.passed == 1, r


def test_infinite_loop_in_a_call_times_out():
    t = time.monotonic()
    r = run("def square(x):\n    while True:\n        pass\n", SQUARE_TESTS, limits=Limits(timeout_s=1.5))
    assert r.passed == 0 and r.timed_out and r.compiled
    assert time.monotonic() - t < DEADLINE_SLACK_S


def test_infinite_loop_at_import_times_out():
    r = run("while True:\n    pass\n", SQUARE_TESTS, limits=Limits(timeout_s=1.5))
    assert r.passed == 0 and r.timed_out and not r.compiled


def test_loop_that_ignores_signals_is_still_killed():
    code = "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGXCPU):\n" \
           "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n"
    t = time.monotonic()
    r = run(code, SQUARE_TESTS, limits=Limits(timeout_s=1.5))
    assert r.passed == 0 and time.monotonic() - t < DEADLINE_SLACK_S


# ---------------------------------------------------------------- isolation


def test_no_connection_to_a_host_listener():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0)
        port = server.getsockname()[1]
        code = ("def reach(port):\n    import socket\n    try:\n"
                "        socket.create_connection(('127.0.0.1', port), timeout=1).close()\n        return 'connected'\n"
                "    except OSError as e:\n        return 'refused'\n")
        r = run(code, [f"assert reach({port}) == 'refused'"])
        assert r.passed == 1, r
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody knocked


def test_no_outside_network():
    code = ("def reach():\n    import socket\n    try:\n        socket.create_connection(('1.1.1.1', 53), timeout=1)\n"
            "        return 'connected'\n    except OSError as e:\n        return e.errno\n")
    r = run(code, ["import errno\nassert reach() == errno.ENETUNREACH"])
    assert r.passed == 1, r


def test_environment_secrets_are_not_visible(monkeypatch):
    monkeypatch.setenv("GRPOKIT_TEST_SECRET", "hunter2")
    code = ("def env():\n    import os\n    seen = dict(os.environ)\n    for p in os.listdir('/proc'):\n"
            "        try:\n            seen[p] = open(f'/proc/{p}/environ', 'rb').read().decode()\n"
            "        except OSError:\n            pass\n    return repr(seen)\n")
    r = run(code, ["assert 'hunter2' not in env()", "assert 'GRPOKIT_TEST_SECRET' not in env()"])
    assert r.passed == 2, r


@pytest.mark.parametrize("path", [os.path.abspath(__file__), "/etc/passwd", "/etc/shadow", "/work", "/root/.ssh",
                                  "/var", "/home"])
def test_user_files_are_not_visible(path):
    code = ("def look(p):\n    import os\n    try:\n        os.stat(p)\n        return 'visible'\n"
            "    except FileNotFoundError:\n        return 'absent'\n    except OSError as e:\n        return e.errno\n")
    r = run(code, [f"assert look({path!r}) == 'absent'"])
    assert r.passed == 1, r


def test_home_shows_at_most_the_way_to_the_python_install():
    # A pyenv Python lives under the home directory; only the path down to it is recreated.
    home = os.path.expanduser("~")
    prefix = os.path.realpath(sys.base_prefix)
    allowed = [prefix[len(home):].strip("/").split("/")[0]] if prefix.startswith(home + "/") else []
    code = ("def ls(p):\n    import os\n    try:\n        return sorted(os.listdir(p))\n"
            "    except FileNotFoundError:\n        return []\n")
    r = run(code, [f"assert ls({home!r}) == {allowed!r}"])
    assert r.passed == 1, r


def test_filesystem_is_read_only_and_host_tmp_untouched():
    name = f"grpokit-probe-{random.randrange(10**9)}"
    code = ("def write(p):\n    try:\n        open(p, 'w').write('x')\n        return 'wrote'\n"
            "    except OSError as e:\n        return e.errno\n")
    r = run(code, ["import errno\nassert write('/usr/x') == errno.EROFS",
                   "import errno\nassert write('/etc/x') in (errno.EROFS, errno.EACCES, errno.ENOENT)",
                   f"assert write('/tmp/{name}') == 'wrote'"])
    assert r.passed == 3, r
    assert not os.path.exists(f"/tmp/{name}")


def test_own_pid_namespace_hides_other_processes():
    code = ("def procs():\n    import os\n    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n")
    r = run(code, ["assert len(procs()) <= 3", f"assert {os.getpid()} not in procs() or {os.getpid()} < 4"])
    assert r.passed == 2, r


def test_unprivileged_without_capabilities():
    code = ("def who():\n    import os\n    status = open('/proc/self/status').read()\n"
            "    caps = [l.split()[1] for l in status.splitlines() if l.startswith(('CapEff', 'CapPrm', 'CapBnd'))]\n"
            "    nnp = [l.split()[1] for l in status.splitlines() if l.startswith('NoNewPrivs')]\n"
            "    return os.getuid(), os.geteuid(), set(caps), nnp\n")
    r = run(code, ["uid, euid, caps, nnp = who()\nassert uid != 0 and euid != 0",
                   "uid, euid, caps, nnp = who()\nassert caps == {'0000000000000000'}"])
    assert r.passed == 2, r


def test_cannot_kill_or_signal_the_host():
    code = ("def kill():\n    import os, signal\n    hits = 0\n    for pid in (1, " + str(os.getpid()) + ", "
            + str(os.getppid()) + "):\n        try:\n            os.kill(pid, 0)\n            hits += pid != 1\n"
            "        except OSError:\n            pass\n    return hits\n")
    r = run(code, ["assert kill() == 0"])
    assert r.passed == 1, r
