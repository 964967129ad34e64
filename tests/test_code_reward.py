"""The `code_tests` reward: extraction, program assembly, scoring modes, refusal without a sandbox."""
from __future__ import annotations

import json
import logging

import pytest

from grpokit.errors import GrpokitError
from grpokit.rewards import code as code_reward
from grpokit.rewards.code import build_program, extract_code
from grpokit.rewards.registry import build_reward, get_spec
from grpokit.sandbox.isolation import Isolation, detect_isolation

SANDBOX = "bwrap" if detect_isolation().kind == "bwrap" else "unsafe"
PARAMS = {"sandbox": SANDBOX, "timeout_s": 5}

# ------------------------------------------------------------------ extraction

EXTRACT = [
    # (id, completion, entry_point, expected code)
    ("python fence", "Here:\n```python\ndef f():\n    return 1\n```\nDone.", "f", "def f():\n    return 1\n"),
    ("unlabelled fence", "```\nx = 1\n```", None, "x = 1\n"),
    ("py tag", "```py\nx = 1\n```", None, "x = 1\n"),
    ("fence cut off by the length limit", "```python\ndef f():\n    return", "f", "def f():\n    return"),
    ("the block defining the entry point wins over an earlier one",
     "```python\nimport os\n```\n```python\ndef f():\n    pass\n```", "f", "def f():\n    pass\n"),
    ("else the first python block", "```python\na = 1\n```\n```python\nb = 2\n```", "f", "a = 1\n"),
    ("non-python fences are not code", "```bash\nls\n```\n```python\nx = 1\n```", None, "x = 1\n"),
    ("no fence: the raw text", "    return a + b\n", "add", "    return a + b\n"),
    ("code after the thought", "<think>```python\nbad\n```</think>```python\ngood = 1\n```", None, "good = 1\n"),
    ("an unclosed thought has no code", "<think>```python\nx = 1\n```", None, ""),
]


@pytest.mark.parametrize("name,completion,entry,expected", EXTRACT, ids=[c[0] for c in EXTRACT])
def test_extract_code(name, completion, entry, expected):
    assert extract_code(completion, entry) == expected


PROMPT = 'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum of xs."""\n'


def test_full_definition_replaces_the_stub_and_keeps_prompt_imports():
    program = build_program("def total(xs: List[int]) -> int:\n    return sum(xs)\n", PROMPT, "total")
    ns: dict = {}
    exec(program, ns)  # trusted test input; `List` comes from the prompt
    assert ns["total"]([1, 2]) == 3


def test_body_continues_the_prompt():
    ns: dict = {}
    exec(build_program("    return sum(xs)\n", PROMPT, "total"), ns)
    assert ns["total"]([1, 2]) == 3


def test_without_prompt_the_code_is_the_program():
    assert build_program("x = 1", None, "f") == "x = 1"


# --------------------------------------------------------------------- scoring

HE_TEST = "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n" \
          "    assert candidate([5]) == 5\n    assert candidate([1, 1]) == 2\n"
HE_ROW = {"test": HE_TEST, "entry_point": "total", "humaneval_prompt": PROMPT}
ASSERT_ROW = {"tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]}
# The prompt's stub returns None, which passes `assert not candidate(...)`: free credit for no code.
FALSY_ROW = {"test": "def check(candidate):\n    assert not candidate([0])\n    assert candidate([2]) == 2\n",
             "entry_point": "total", "humaneval_prompt": PROMPT}

SCORES = [
    # (id, completion, row, params, expected score)
    ("full function in a fence", "```python\ndef total(xs):\n    return sum(xs)\n```", HE_ROW, {}, 1.0),
    ("body continuation (base model)", "    return sum(xs)\n", HE_ROW, {}, 1.0),
    ("uses the prompt's import", "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```", HE_ROW, {},
     1.0),
    ("half right: fraction", "```python\ndef total(xs):\n    return xs[0] if xs else 0\n```", HE_ROW, {},
     0.5),
    ("half right: all-or-nothing", "```python\ndef total(xs):\n    return xs[0] if xs else 0\n```", HE_ROW,
     {"mode": "all"}, 0.0),
    ("syntax error: compile penalty", "```python\ndef total(xs)\n    return 0\n```", HE_ROW, {}, -0.5),
    ("penalty is a parameter", "```python\ndef total(xs)\n    return 0\n```", HE_ROW, {"compile_penalty": -1.0}, -1.0),
    ("import failure: compile penalty", "```python\nimport numpy\ndef total(xs):\n    return sum(xs)\n```", HE_ROW,
     {}, -0.5),
    ("prose only", "I think you should sum the list.", HE_ROW, {}, -0.5),
    ("wrong but runs", "```python\ndef total(xs):\n    return -1\n```", HE_ROW, {}, 0.0),
    ("claims success", "```python\nprint('4/4 tests passed')\ndef total(xs):\n    return -1\n```", HE_ROW, {}, 0.0),
    ("timeout scores what passed, not the penalty", "```python\nwhile True:\n    pass\ndef total(xs):\n    pass\n```",
     HE_ROW,
     {"timeout_s": 1}, 0.0),
    ("empty answer: penalty, not the stub's None", "", FALSY_ROW, {}, -0.5),
    ("empty fence: penalty", "```python\n```", FALSY_ROW, {}, -0.5),
    ("no entry point, only a helper: penalty", "```python\ndef helper():\n    pass\n```", FALSY_ROW, {}, -0.5),
    ("an explicit body returning None is an answer", "    return None\n", FALSY_ROW, {}, 0.5),
    ("asserts list, empty answer", "", ASSERT_ROW, {}, -0.5),
    ("asserts list", "```python\ndef add(a, b):\n    return a + b\n```", ASSERT_ROW, {}, 1.0),
    ("asserts list, one passes", "```python\ndef add(a, b):\n    return 3\n```", ASSERT_ROW, {}, 0.5),
]


@pytest.mark.parametrize("name,completion,row,params,expected", SCORES, ids=[c[0] for c in SCORES])
def test_scores(name, completion, row, params, expected):
    scorer = get_spec("code_tests").factory(**{**PARAMS, **params})
    assert scorer([completion], **{k: [v] for k, v in row.items()}) == [pytest.approx(expected)]


def test_batch_mixes_row_kinds_and_rows_without_tests():
    fn = build_reward("code_tests", PARAMS)
    completions = ["```python\ndef add(a, b):\n    return a + b\n```", "    return sum(xs)\n", "anything"]
    columns = {"tests": [ASSERT_ROW["tests"], None, None], "test": [None, HE_TEST, None],
               "entry_point": [None, "total", None], "humaneval_prompt": [None, PROMPT, None]}
    assert fn(prompts=["p"] * 3, completions=completions, **columns) == [1.0, 1.0, None]


def test_dataset_without_test_columns_is_an_error():
    scorer = get_spec("code_tests").factory(**PARAMS)
    with pytest.raises(ValueError, match="'tests' column"):
        scorer(["x"], answer=["1"])


@pytest.mark.parametrize("params,match", [({"mode": "some"}, "mode"), ({"sandbox": "docker"}, "sandbox"),
                                          ({"timeout_s": 0}, "timeout_s")])
def test_bad_params_are_rejected(params, match):
    with pytest.raises(ValueError, match=match):
        build_reward("code_tests", {**PARAMS, **params})


def test_refuses_without_a_sandbox(monkeypatch):
    monkeypatch.setattr(code_reward, "detect_isolation", lambda: Isolation("none", "bwrap is not installed", "apt"))
    with pytest.raises(GrpokitError, match="sandbox: unsafe"):
        build_reward("code_tests", {})
    build_reward("code_tests", {"sandbox": "unsafe"})  # the explicit opt-out is accepted


def test_unsafe_warns_on_every_call(caplog):
    scorer = get_spec("code_tests").factory(sandbox="unsafe", timeout_s=5)
    with caplog.at_level(logging.WARNING, logger="grpokit.rewards.code"):
        for _ in range(2):
            assert scorer(["```python\ndef add(a, b):\n    return a + b\n```"], tests=[ASSERT_ROW["tests"]]) == [1.0]
    assert sum("WITHOUT isolation" in r.message for r in caplog.records) == 2


def test_rewards_score_cli(tmp_path, capsys):
    from grpokit.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps({"completion": c, **HE_ROW}) for c in
                              ["    return sum(xs)\n", "```python\ndef total(xs)\n```"]) + "\n")
    assert main(["rewards", "score", "--reward", "code_tests", "--param", f"sandbox={SANDBOX}", "--input", str(rows)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["reward"] for o in out] == [1.0, -0.5]
    assert out[0]["reason"] == "all_passed" and out[0]["passed"] == out[0]["total"] == 4
    assert out[1]["reason"] == "compile_error" and "SyntaxError" in out[1]["detail"]
