"""`grpokit rewards list|score|audit`: handlers called directly, plus one real subprocess run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grpokit.cli import build_parser
from grpokit.errors import GrpokitError

REPO = Path(__file__).resolve().parents[1]


def run(argv: list[str]) -> int:
    """The handler itself, so a GrpokitError reaches the test instead of the printer."""
    args = build_parser().parse_args(argv)
    return args.func(args)


def write_jsonl(path: Path, rows: list) -> str:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                    encoding="utf-8")
    return str(path)


def test_list_names_every_reward_with_columns_and_params(capsys):
    assert run(["rewards", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("math_correctness", "format", "length", "json_schema", "sql_exec"):
        assert f"\n{name}\n" in f"\n{out}"
    assert "columns: answer" in out and "param min_reasoning_lines = 1" in out


def test_score_prints_one_object_per_row_in_order(tmp_path, capsys):
    rows = [
        {"completion": "48/2 = 24.\nFinal answer: 72", "answer": "#### 72"},  # right
        {"completion": [{"role": "assistant", "content": "想了想。\n最终答案：不知道"}], "answer": "72"},  # chat, refusal
        {"completion": "Final answer: 72", "answer": ""},  # gold unparseable: null
    ]
    assert run(["rewards", "score", "--reward", "math_correctness", "--input", write_jsonl(tmp_path / "r.jsonl", rows)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["reward"] for o in out] == [1.0, 0.0, None]
    assert [o["reason"] for o in out] == ["correct", "refusal", "gold_unparseable"]


def test_score_params_are_parsed_as_json(tmp_path, capsys):
    rows = [{"completion": "One.\nTwo.\nResult: 5"}]
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    assert run(["rewards", "score", "--reward", "format", "--param", 'markers=["Result:"]',
                "--param", "min_reasoning_lines=2", "--input", path]) == 0
    assert json.loads(capsys.readouterr().out)["reward"] == 1.0


def test_score_reads_a_rows_prompt_as_training_hands_it(tmp_path, capsys):
    prompt = [{"role": "system", "content": "Two lines. Example:\n12 + 7 = 19\nFinal answer: 19"},
              {"role": "user", "content": "What is 34 - 13?"}]
    copy = "12 + 7 = 19\nFinal answer: 19"
    rows = [{"completion": copy, "prompt": prompt}, {"completion": "34 - 13 = 21\nFinal answer: 21", "prompt": prompt},
            {"completion": copy}]  # no prompt: the copy rule cannot apply
    assert run(["rewards", "score", "--reward", "format", "--input", write_jsonl(tmp_path / "r.jsonl", rows)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(o["reward"], o["reason"]) for o in out] == [
        (0.0, "repeats the prompt's worked example"), (1.0, "ok"), (1.0, "ok")]


def test_score_row_that_raises_is_reported_not_zeroed(tmp_path, capsys):
    rows = [{"completion": "{}", "schema": {"type": "no-such-type"}}]
    assert run(["rewards", "score", "--reward", "json_schema", "--input", write_jsonl(tmp_path / "r.jsonl", rows)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["reward"] is None and "not a valid JSON Schema" in out["error"]


# (file lines, where the problem must point, message fragment)
BAD_FILES = [
    (['{"completion": "x", "answer": "1"}', "not json"], "r.jsonl:2", "not valid JSON"),  # broken line
    (["[1, 2]"], "r.jsonl:1", "must be a JSON object"),  # not an object
    (['{"answer": "1"}'], "r.jsonl:1", "no 'completion'"),  # missing completion
    (['{"completion": 3, "answer": "1"}'], "r.jsonl:1", "string or a list"),  # completion of the wrong type
    (['{"completion": "x"}'], "r.jsonl:1", "'answer'"),  # a column the reward reads is missing
    (["", "  "], "r.jsonl", "no rows"),  # nothing in it
]


@pytest.mark.parametrize("lines,where,message", BAD_FILES, ids=[str(i) for i in range(len(BAD_FILES))])
def test_bad_input_file_is_exit_2_with_location(tmp_path, lines, where, message):
    path = write_jsonl(tmp_path / "r.jsonl", lines)
    with pytest.raises(GrpokitError) as err:
        run(["rewards", "score", "--reward", "math_correctness", "--input", path])
    assert err.value.exit_code == 2
    assert any(p.where.endswith(where) and message in p.message for p in err.value.problems), err.value.render()


@pytest.mark.parametrize(
    "argv,where",
    [
        (["--reward", "no_such_reward"], "--reward"),  # unknown reward: lists the valid ones
        (["--reward", "format", "--param", "min_lines=2"], "--param"),  # unknown parameter
        (["--reward", "format", "--param", "oops"], "--param oops"),  # not KEY=VALUE
        (["--reward", "format", "--input", "/no/such.jsonl"], "/no/such.jsonl"),  # missing file
    ],
)
def test_bad_arguments_are_exit_2(argv, where):
    if "--input" not in argv:
        argv = [*argv, "--input", "/no/such.jsonl"]
    with pytest.raises(GrpokitError) as err:
        run(["rewards", "score", *argv])
    assert err.value.exit_code == 2 and err.value.problems[0].where == where


def test_audit_demo_recipe_passes(capsys):
    assert run(["rewards", "audit", str(REPO / "recipes" / "smollm2-arithmetic.yaml"), "--rows", "3"]) == 0
    assert "no trick scored" in capsys.readouterr().out


def test_audit_of_the_demo_tries_its_prompt_example_and_flags_it_when_copies_pay(capsys):
    demo = str(REPO / "recipes" / "smollm2-arithmetic.yaml")
    loose = ("rewards=[{name: math_correctness}, {name: format, weight: 0.2, "
             "params: {min_reasoning_lines: 1, refuse_prompt_copies: false}}]")
    assert run(["rewards", "audit", demo, "--rows", "3", "--set", loose]) == 1
    out = capsys.readouterr().out
    assert "prompt_example_copied" in out and "12 + 7 = 19" in out


def test_audit_flags_a_correctness_only_recipe(tmp_path, capsys):
    import yaml

    recipe = yaml.safe_load((REPO / "recipes" / "smollm2-arithmetic.yaml").read_text(encoding="utf-8"))
    recipe["rewards"] = [r for r in recipe["rewards"] if r["name"] != "format"]  # the demo without its format reward
    data = REPO / "src" / "grpokit" / "datasets"
    recipe["data"] = {k: v.replace("builtin:", f"{data}/") if isinstance(v, str) else v for k, v in recipe["data"].items()}
    path = tmp_path / "only-correctness.yaml"
    path.write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    assert run(["rewards", "audit", str(path), "--rows", "3"]) == 1
    assert "refusal" in capsys.readouterr().out


def test_subprocess_score_and_bad_file(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"completion": "a\nFinal answer: 3", "answer": "3"}])
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{oops"])
    cmd = [sys.executable, "-m", "grpokit.cli", "rewards", "score", "--reward", "math_correctness", "--input"]
    ok = subprocess.run([*cmd, good], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout)["reward"] == 1.0
    ko = subprocess.run([*cmd, bad], capture_output=True, text=True, timeout=60)
    assert ko.returncode == 2 and "bad.jsonl:1" in ko.stderr and "Traceback" not in ko.stderr


def test_score_stdout_holds_only_the_rows_when_the_reward_prints(tmp_path):
    # An own reward's print at import and while scoring went to stdout before the JSON rows (issue 67): a program
    # reading the rows failed on the first line. They go to stderr; stdout is the rows, one JSON object each.
    (tmp_path / "noisy.py").write_text(
        'print("loading my reward")\n'
        "def score(completions, answer, **kw):\n"
        '    print("scoring", len(completions))\n'
        "    return [1.0 for _ in completions]\n", encoding="utf-8")
    rows = write_jsonl(tmp_path / "rows.jsonl", [{"completion": "Final answer: 3", "answer": "3"}] * 2)
    cmd = [sys.executable, "-m", "grpokit.cli", "rewards", "score", "--reward", f"{tmp_path / 'noisy.py'}:score",
           "--input", rows]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"reward": 1.0}, {"reward": 1.0}]
    assert "loading my reward" in done.stderr and "scoring 1" in done.stderr


# ---------------------------------------------------------------- your own column names
UNIT_ROWS = [{"completion": "Final answer: 300", "target": "300", "unit": "cm"},
             {"completion": "Final answer: 30", "target": "300", "unit": "cm"}]


def test_score_takes_the_answer_column_by_name(tmp_path, capsys):
    path = write_jsonl(tmp_path / "rows.jsonl", UNIT_ROWS)
    assert run(["rewards", "score", "--reward", "math_correctness", "--input", path, "--answer-field", "target"]) == 0
    assert [json.loads(line)["reward"] for line in capsys.readouterr().out.splitlines()] == [1.0, 0.0]


def test_score_without_the_answer_column_names_the_flag_and_the_closest(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", UNIT_ROWS)
    with pytest.raises(GrpokitError) as e:
        run(["rewards", "score", "--reward", "math_correctness", "--input", path])
    (problem,) = e.value.problems  # grouped: both rows lack it
    assert problem.where == f"{path}: 2 rows (lines 1, 2)"
    assert "row has no 'answer' column(s), which the reward reads (the row has: completion, target, unit)" in \
        problem.message and "--answer-field target" in problem.fix
    with pytest.raises(GrpokitError) as e:
        run(["rewards", "score", "--reward", "math_correctness", "--input", path, "--answer-field", "trget"])
    assert "did you mean --answer-field target?" in str(e.value)
