"""Rows are valid for what their task needs (issue 27, item 2).

One parser decides what an answer is: `data check --task math` warns exactly where math_correctness cannot
read a number. `builtin:` paths work in every command that takes a data file. Code rows are accepted in
HumanEval's own layout and with a `tests` list, the reference solution optional, and evaluated as such.
"""
from __future__ import annotations

import gzip
import json

import pytest
import yaml
from conftest import REPO, write_jsonl

from grpokit.cli import main
from grpokit.sandbox.isolation import detect_isolation

SANDBOX = "bwrap" if detect_isolation().kind == "bwrap" else "unsafe"

# (answer as the user wrote it, does math_correctness read it as a number?) - the examples first
ANSWERS = [
    ("18元", True), ("26厘米", True), ("1,225 stamps", True), ("10 cups", True), ("1/2", True), ("$3.50", True),
    ("40%", True), ("48 + 24 = 72\n#### 72", True), ("seventy-two", False), ("nan", False), ("1e400", False),
]


def test_data_check_and_the_math_reward_agree_on_every_answer(tmp_path, capsys):
    path = tmp_path / "zh_math.csv"
    path.write_text("题目,答案\n" + "".join(f"q{i},\"{a}\"\n" for i, (a, _) in enumerate(ANSWERS)), encoding="utf-8")
    assert main(["data", "check", str(path), "--question-field", "题目", "--answer-field", "答案", "--task", "math"]) == 0
    out = capsys.readouterr().out
    warned = {line.split(": answer ")[1].split(" is not")[0].strip("'") for line in out.splitlines()
              if line.startswith("warning") and "is not a number" in line}
    assert warned == {"seventy-two", "nan", "1e400"}, out
    from grpokit.rewards import build_reward, parse_gold

    reward = build_reward("math_correctness")
    for answer, number in ANSWERS:
        if number:  # what data check accepts, the reward scores: the gold's own number is a right answer
            value = parse_gold(answer).split("=")[-1].strip()
            assert reward(prompts=[None], completions=[f"Final answer: {value}"], answer=[answer]) == [1.0], answer


BUILTIN = [
    # (id, argv; {out} is a file in tmp_path, exit code, expected in the output)
    ("data check", ["data", "check", "builtin:arithmetic/train.jsonl", "--task", "math"], 0, "1000 usable rows"),
    ("data check, a missing bundled file", ["data", "check", "builtin:arithmetic/nope.jsonl"], 1,
     "bundled files: builtin:arithmetic/eval.jsonl"),
    ("data perturb", ["data", "perturb", "builtin:arithmetic/eval.jsonl", "{out}"], 0, "wrote 100 perturbed rows"),
    ("data generate --exclude", ["data", "generate", "arithmetic", "{out}", "--rows", "5", "--exclude",
                                 "builtin:arithmetic/train.jsonl"], 0, "wrote 5 rows"),
    ("data generate calculator", ["data", "generate", "calculator", "{out}", "--rows", "3", "--exclude",
                                  "builtin:tools/calculator-eval.jsonl"], 0, "wrote 3 rows"),
    ("rewards score --input", ["rewards", "score", "--reward", "format", "--input", "builtin:tools/calculator.jsonl"],
     2, "row has no 'completion'"),  # read (and refused for what it lacks), not "input file not found"
]


@pytest.mark.parametrize("argv, code, expected", [c[1:] for c in BUILTIN], ids=[c[0] for c in BUILTIN])
def test_builtin_paths_work_in_every_data_command(tmp_path, capsys, argv, code, expected):
    assert main([a.format(out=tmp_path / "out.jsonl") for a in argv]) == code
    out = capsys.readouterr()
    assert expected in out.out + out.err and "file not found" not in out.out + out.err


def _humaneval(n: int, drop_references: bool = True) -> list[dict]:
    from grpokit.families.humaneval import humaneval_path

    with gzip.open(humaneval_path(), "rt", encoding="utf-8") as fh:
        problems = [json.loads(line) for _, line in zip(range(n), fh)]
    for i, p in enumerate(problems):
        if drop_references and i % 2:
            p.pop("canonical_solution")  # the reference is optional: every other row goes without
    return problems


CODE_ROWS = [
    # (id, row, problem or None)
    ("HumanEval's own layout", None, None),
    ("tests list without a reference", {"question": "Write add(a, b).", "tests": ["assert add(1, 2) == 3"]}, None),
    ("tests list with a reference", {"question": "Write neg(x).", "tests": ["assert neg(2) == -2"],
                                     "answer": "def neg(x):\n    return -x\n"}, None),
    ("an empty tests list", {"question": "q", "tests": []}, "tests: must be a non-empty list of assert lines"),
    ("a test that does not parse", {"question": "q", "tests": ["assert (1 =="]}, "tests 0: does not parse as Python"),
    ("a test without check()", {"prompt": "def f(x):\n    pass\n", "test": "assert f(1) == 1", "entry_point": "f"},
     "test: defines no `def check(candidate):`"),
    ("an entry point the prompt lacks", {"prompt": "def g(x):\n    pass\n", "entry_point": "f",
                                         "test": "def check(candidate):\n    assert candidate(1) == 1\n"},
     "humaneval_prompt: does not define f()"),
    ("a math row on a code task", {"question": "1 + 1?", "answer": "2"}, "no tests: a code task's row needs"),
]


@pytest.mark.parametrize("row, problem", [c[1:] for c in CODE_ROWS], ids=[c[0] for c in CODE_ROWS])
def test_code_rows_need_a_prompt_and_tests_not_a_reference(tmp_path, capsys, row, problem):
    rows = _humaneval(4) if row is None else [row]
    path = write_jsonl(tmp_path / "code.jsonl", rows)
    assert main(["data", "check", str(path), "--task", "code"]) == (1 if problem else 0)
    out = capsys.readouterr().out
    if problem:
        assert problem in out and "fix:" in out
    else:
        assert f"{len(rows)} usable rows, 0 unusable" in out and "missing answer" not in out


def test_humaneval_rows_as_humaneval_writes_them_are_evaluated(tmp_path, tiny_model_dir, capsys):
    # The issue: `eval default --data code.jsonl --recipe recipes/smollm2-humaneval.yaml` refused every row of
    # HumanEval's own layout (`missing answer`); code_tests scores with the tests alone.
    recipe = yaml.safe_load((REPO / "recipes" / "smollm2-humaneval.yaml").read_text())
    recipe["data"]["train"] = str(write_jsonl(tmp_path / "he.jsonl", _humaneval(4)))
    recipe["rewards"][0]["params"].update(sandbox=SANDBOX, timeout_s=5)
    (tmp_path / "he.yaml").write_text(yaml.safe_dump(recipe))
    data = write_jsonl(tmp_path / "code.jsonl", _humaneval(3))
    out = tmp_path / "out"
    assert main(["eval", str(tiny_model_dir), "--data", str(data), "--recipe", str(tmp_path / "he.yaml"),
                 "--max-new-tokens", "4", "--output-dir", str(out)]) == 0
    res = json.loads((out / "eval" / "results.json").read_text())
    heldout = res["checkpoints"][0]["heldout"]
    assert res["metric"] == "pass@1" and heldout["rows"] == 3 and heldout["accuracy"] == 0.0


def test_the_reference_of_humaneval_rows_passes_their_tests(tmp_path):
    # HumanEval's own layout, loaded as training loads it, is scored by code_tests like the imported layout
    from grpokit.data import load_rows
    from grpokit.families import FAMILIES
    from grpokit.rewards import build_reward

    rows, _ = load_rows(str(write_jsonl(tmp_path / "he.jsonl", _humaneval(2, drop_references=False))),
                        family=FAMILIES["code"])
    assert {"question", "humaneval_prompt", "test", "entry_point", "answer"} <= set(rows[0]) and "prompt" not in rows[0]
    reward = build_reward("code_tests", {"sandbox": SANDBOX, "timeout_s": 5})
    texts = [f"```python\n{r['humaneval_prompt']}{r['answer']}```" for r in rows]
    columns = {k: [r[k] for r in rows] for k in ("test", "entry_point", "humaneval_prompt")}
    assert reward(prompts=[None, None], completions=texts, **columns) == [1.0, 1.0]


@pytest.mark.parametrize("rewards, fix", [
    # (the recipe's rewards, the command the fix for a missing data file names)
    ([{"name": "code_tests", "params": {"sandbox": "unsafe"}}], "grpokit data import humaneval FILE"),
    ([{"name": "math_correctness"}], "grpokit data generate arithmetic FILE"),
])
def test_a_missing_data_file_names_the_command_that_makes_it(tmp_path, capsys, rewards, fix):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "../data/humaneval.jsonl"}, "rewards": rewards}))
    assert main(["recipe", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "data.train: file not found" in err and fix in err
