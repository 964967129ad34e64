"""grpokit.sandbox: the judge/worker protocol, test splitting and results (honest solutions).

Attacks live in test_sandbox_adversarial.py. Runs use bwrap where it works
and fall back to "unsafe" mode (same judge/worker split) elsewhere, so the
verdict logic is tested on every machine; each run takes ~0.1 s.
"""
from __future__ import annotations

import pytest

from grpokit.cli.sandbox import cmd_check
from grpokit.sandbox.execution import SandboxError, TestSpec, run_many, run_tests
from grpokit.sandbox.isolation import Limits, detect_isolation

ISOLATION = "bwrap" if detect_isolation().kind == "bwrap" else "unsafe"
FAST = Limits(timeout_s=5)


def run(code, asserts, **kw):
    return run_tests(code, TestSpec.from_asserts(asserts), limits=kw.pop("limits", FAST), isolation=ISOLATION, **kw)


ADD = "def add(a, b):\n    return a + b\n"

# (id, solution, asserts, passed, compiled, error substring)
CASES = [
    ("all pass", ADD, ["assert add(1, 2) == 3", "assert add('a', 'b') == 'ab'"], 2, True, ""),
    ("one fails", ADD, ["assert add(1, 2) == 3", "assert add(1, 1) == 3"], 1, True, ""),
    ("syntax error is a compile failure", "def add(a, b)\n    return a + b\n", ["assert add(1, 2) == 3"], 0, False,
     "compile error: SyntaxError"),
    ("top level raising is an import failure", "x = 1 / 0\n" + ADD, ["assert add(1, 2) == 3"], 0, False,
     "import error: ZeroDivisionError"),
    ("missing function fails its tests, compiles", "def other():\n    pass\n", ["assert add(1, 2) == 3"], 0, True, ""),
    # the function raising fails that test only
    ("raising function", "def f(x):\n    return 1 // x\n", ["assert f(1) == 1", "assert f(0) == 0"], 1, True, ""),
    # the demo block of a completion must not run (it would block on input())
    ("main guard does not run", ADD + "if __name__ == '__main__':\n    input()\n", ["assert add(1, 2) == 3"], 1, True, ""),
    ("prints do not disturb the channel", "print('noise' * 10000)\ndef f():\n    print('x' * 100000)\n    return 1\n",
     ["assert f() == 1"], 1, True, ""),
    ("module state persists between tests", "n = []\ndef push(x):\n    n.append(x)\n    return len(n)\n",
     ["assert push(1) == 1", "assert push(1) == 2"], 2, True, ""),
    ("keyword arguments", "def f(a, *, b=0):\n    return a - b\n", ["assert f(5, b=2) == 3"], 1, True, ""),
    ("exception type crosses over", "def f():\n    raise ValueError('bad')\n",
     ["try:\n    f()\n    assert False\nexcept ValueError:\n    pass"], 1, True, ""),
    ("empty solution", "", ["assert add(1, 2) == 3"], 0, True, ""),
]


@pytest.mark.parametrize("name,code,asserts,passed,compiled,error", CASES, ids=[c[0] for c in CASES])
def test_cases(name, code, asserts, passed, compiled, error):
    r = run(code, asserts)
    assert (r.passed, r.total, r.compiled) == (passed, len(asserts), compiled), r
    assert error in r.error
    assert len(r.failed_tests) == len(asserts) - passed


# Values cross the judge/worker boundary as genuine builtins: types survive.
VALUES = ["None", "True", "0", "-7", "2**200", "1.5", "float('inf')", "1+2j", "'é\\n'", "b'\\x00\\xff'",
          "[1, [2]]", "(1, (2,))", "{1: 'a', (2, 3): [4]}", "{1, 2}", "frozenset({3})", "()", "[]", "{}"]


@pytest.mark.parametrize("value", VALUES)
def test_values_round_trip_with_their_types(value):
    code = f"def f(x):\n    assert type(x) is type({value}) and x == {value}\n    return {value}\n"
    r = run(code, [f"assert f({value}) == {value} and type(f({value})) is type({value})"])
    assert r.passed == 1, r


def test_nan_round_trips():
    r = run("def f():\n    return float('nan')\n", ["import math\nassert math.isnan(f())"])
    assert r.passed == 1, r


def test_tuple_is_not_list():
    # HumanEval compares against tuples: a list must not pass, as in plain Python.
    r = run("def f():\n    return [1, 2]\n", ["assert f() == (1, 2)"])
    assert r.passed == 0


def test_unsendable_return_value_fails_the_test():
    r = run("def f():\n    return object()\n", ["assert f() is not None"])
    assert r.passed == 0 and "cannot be passed" in r.failed_tests[0]


# ------------------------------------------------------------ HumanEval split

HE_PROMPT = 'def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\n\n\ndef double(x):\n    """Double x."""\n'
HE_TEST = """
METADATA = {'author': 'jt'}


def check(candidate):
    import math
    assert candidate(2) == 4
    assert True, 'not about the solution'
    for i in range(5):
        assert candidate(i) == poly([0, 2], i)
    assert math.isclose(candidate(0.5), 1.0)
"""


def test_humaneval_spec_counts_only_asserts_about_the_candidate():
    spec = TestSpec.from_humaneval(HE_TEST, "double", HE_PROMPT)
    kinds = [k for k, _ in spec.units]
    assert kinds == ["setup", "test", "setup", "test", "test"]  # import, assert, assert True, loop, isclose
    assert spec.total == 3
    assert spec.proxies == {"candidate": "double", "double": "double"}


def test_humaneval_prompt_helpers_available_to_tests():
    spec = TestSpec.from_humaneval(HE_TEST, "double", HE_PROMPT)
    good = run_tests(HE_PROMPT + "    return 2 * x\n", spec, limits=FAST, isolation=ISOLATION)
    assert (good.passed, good.total) == (3, 3), good
    stub = run_tests(HE_PROMPT, spec, limits=FAST, isolation=ISOLATION)  # the docstring-only stub returns None
    assert (stub.passed, stub.compiled) == (0, True), stub


def test_humaneval_spec_without_check_is_rejected():
    with pytest.raises(ValueError, match="check"):
        TestSpec.from_humaneval("assert 1", "f")


def test_unparseable_assert_is_rejected():
    with pytest.raises(ValueError, match="test 0"):
        TestSpec.from_asserts(["assert f(("])


def test_broken_test_code_is_a_sandbox_error_not_a_score():
    # A prelude that raises is the dataset's fault: reported, never scored 0.
    spec = TestSpec(units=(("test", "assert f() == 1"),), prelude="1 / 0")
    with pytest.raises(SandboxError, match="ZeroDivisionError"):
        run_tests("def f():\n    return 1\n", spec, limits=FAST, isolation=ISOLATION)


def test_run_many_keeps_order():
    jobs = [(f"def f():\n    return {i}\n", TestSpec.from_asserts(["assert f() == 2"])) for i in range(4)]
    results = run_many(jobs, limits=FAST, isolation=ISOLATION, max_workers=2)
    assert [r.passed for r in results] == [0, 0, 1, 0]


def test_unknown_isolation_is_rejected():
    with pytest.raises(ValueError, match="isolation"):
        run_tests("", TestSpec.from_asserts([]), isolation="docker")


def test_unsafe_mode_runs_the_same_protocol():
    r = run_tests(ADD, TestSpec.from_asserts(["assert add(1, 2) == 3", "assert add(1, 2) == 4"]),
                  limits=FAST, isolation="unsafe")
    assert (r.passed, r.total, r.isolation) == (1, 2, "unsafe")


def test_sandbox_check_command(capsys):
    rc = cmd_check()
    out = capsys.readouterr().out
    assert out.startswith("isolation: ")
    assert rc == (0 if ISOLATION == "bwrap" else 1)


def test_sandbox_check_is_registered_as_a_subcommand():
    from grpokit.cli import build_parser

    args = build_parser().parse_args(["sandbox", "check"])
    assert args.func is cmd_check


def test_worker_sandbox_failing_to_start_is_an_error_not_a_penalty(monkeypatch):
    # If the worker never reaches the solution, the solution must not get the compile penalty.
    from grpokit.sandbox import execution

    real = execution.sandbox_command

    def broken_worker(isolation, uid, limits, src, arg, info_fd):
        argv = real(isolation, uid, limits, src, arg, info_fd)
        if src is execution.WORKER_SRC:
            argv[argv.index("-I")] = "--no-such-option"  # the interpreter refuses to start
        return argv

    monkeypatch.setattr(execution, "sandbox_command", broken_worker)
    with pytest.raises(SandboxError, match="failed to start"):
        run(ADD, ["assert add(1, 2) == 3"])
