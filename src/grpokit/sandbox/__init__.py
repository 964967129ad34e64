"""Running model-written code: a fresh, isolated process per test run, the verdict decided outside it.

    result = run_tests(code, TestSpec(tests=["assert add(1, 2) == 3"]))

execution (run_tests, run_many, probe), isolation (bubblewrap, limits), programs (the worker and judge).
"""
from grpokit.sandbox.execution import RunResult, TestSpec, probe, run_many, run_tests
from grpokit.sandbox.isolation import Limits, detect_isolation, interpreter

__all__ = ["Limits", "RunResult", "TestSpec", "detect_isolation", "interpreter", "probe", "run_many", "run_tests"]
