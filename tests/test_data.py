"""Dataset checks: every bad row is reported with its line number; aliases, GSM8K, split, generator."""
from __future__ import annotations

import json

import pytest
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.families.math import generate, perturb_row
from grpokit.data.io import check_file, load_rows, overlapping_questions, split_rows
from grpokit.errors import GrpokitError
from grpokit.rewards.math import parse_gold

ROW_CASES = [
    # (id, line content, expected substring in the error, or None when the row is fine)
    ("ok", {"question": "1+1?", "answer": "2"}, None),
    ("article names", {"prompt": "1+1?", "expected_answer": "2"}, None),
    ("numeric answer accepted", {"question": "1+1?", "answer": 2}, None),
    ("gsm8k answer", {"question": "q?", "answer": "48 + 24 = 72\n#### 72"}, None),
    ("invalid json", '{"question": "x", "answer": ', "invalid JSON"),
    ("not an object", "[1, 2]", "not an object"),
    ("missing question", {"answer": "2"}, "missing question"),
    ("missing answer", {"question": "q"}, "missing answer"),
    ("empty question", {"question": "   ", "answer": "2"}, "question is empty"),
    ("empty answer", {"question": "q", "answer": ""}, "answer is empty"),
    ("non-string question", {"question": 5, "answer": "2"}, "question must be a string"),
    ("list answer", {"question": "q", "answer": [1, 2]}, "answer must be a string or a number"),
    ("null answer", {"question": "q", "answer": None}, "answer must be a string or a number"),
]


@pytest.mark.parametrize("line,expected", [c[1:] for c in ROW_CASES], ids=[c[0] for c in ROW_CASES])
def test_each_row_problem_names_line_and_field(tmp_path, line, expected):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "first", "answer": "1"}, line])
    report = check_file(path)
    if expected is None:
        assert report.ok and len(report.rows) == 2
    else:
        assert not report.ok
        (err,) = report.errors
        assert "d.jsonl:2" in err.where and expected in err.message and err.fix


def test_warnings_do_not_make_rows_unusable(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"question": "a", "answer": "1"}\n\n{"question": "a", "answer": "1"}\n')
    report = check_file(path)
    assert report.ok and len(report.rows) == 2 and report.duplicates == 1
    text = " ".join(str(w) for w in report.warnings)
    assert "BOM" in text and "blank line" in text and "duplicate question (first at" in text


def test_rows_are_normalised_and_extra_columns_pass_through(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q?", "expected_answer": 3.0, "schema": {"type": "x"}}])
    (row,) = check_file(path).rows
    # the task's names, and the file's own (issue 35 item 5: a reward may read `expected_answer`); `prompt` is
    # TRL's rendered-prompt column, never passed through raw
    assert row == {"question": "q?", "answer": "3", "expected_answer": 3.0, "schema": {"type": "x"}}


def test_gsm8k_gold_is_read_after_the_hashes():
    assert parse_gold("She sold 48/2 = 24 clips in May.\n#### 72") == "72"


def test_real_gsm8k_file_checks_clean():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k" / "test.jsonl"
    if not path.is_file():
        pytest.skip("shared GSM8K copy not present")
    report = check_file(path)
    assert report.ok and len(report.rows) == 1319 and report.answer_types["gsm8k"] == 1319


def test_training_refuses_unusable_rows_unless_skipped(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "a", "answer": "1"}, {"question": "b"}])
    with pytest.raises(GrpokitError) as exc:
        load_rows(str(path))
    assert exc.value.exit_code == 1 and "skip_bad_rows" in exc.value.title
    rows, report = load_rows(str(path), skip_bad_rows=True)
    assert len(rows) == 1 and len(report.errors) == 1


def test_data_check_cli_exit_codes(tmp_path, capsys):
    good = write_jsonl(tmp_path / "good.jsonl", [{"question": "a", "answer": "1"}])
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": "a", "answer": "1"}, "not json"])
    assert main(["data", "check", str(good)]) == 0
    assert main(["data", "check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "bad.jsonl:2" in out and "invalid JSON" in out and "1 usable rows, 1 unusable" in out


def test_split_is_seeded_and_overlap_is_reported():
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(50)]
    a_train, a_eval = split_rows(rows, 0.2, seed=3)
    b_train, b_eval = split_rows(rows, 0.2, seed=3)
    assert a_eval == b_eval and len(a_eval) == 10 and len(a_train) == 40
    assert not overlapping_questions(a_train, a_eval)
    assert overlapping_questions(a_train, a_eval + [a_train[0]]) == [a_train[0]["question"]]


def test_generator_is_deterministic_distinct_and_correct(tmp_path):
    rows = generate(200, seed=1)
    assert rows == generate(200, seed=1)
    assert len({r["question"] for r in rows}) == 200
    for r in rows:
        assert int(r["answer"]) == (r["a"] + r["b"] if r["op"] == "+" else r["a"] - r["b"]) >= 0
    out = tmp_path / "a.jsonl"
    assert main(["data", "generate", "arithmetic", str(out), "--rows", "20", "--seed", "5"]) == 0
    other = tmp_path / "b.jsonl"
    assert main(["data", "generate", "arithmetic", str(other), "--rows", "20", "--exclude", str(out)]) == 0
    qs = lambda p: {json.loads(l)["question"] for l in p.read_text().splitlines()}
    assert not qs(out) & qs(other)


def test_every_generator_refuses_more_rows_than_it_can_make_at_once(tmp_path, capsys):
    # `--rows` within the documented 1 to 1,000,000 but above what a generator makes: one line, no traceback, no
    # minutes spent drawing (json spun for minutes at 5,000; arithmetic and calculator raised a ValueError).
    from grpokit.families import generators

    for name, g in generators().items():
        if g.most is None:
            continue
        out = tmp_path / f"{name}.jsonl"
        assert main(["data", "generate", name, str(out), "--rows", str(g.most + 1)]) == 2, name
        err = capsys.readouterr().err
        assert f"makes at most {g.most:,} distinct rows" in err and "Traceback" not in err and not out.exists(), err
    assert main(["data", "generate", "json", str(tmp_path / "j.jsonl"), "--rows", str(generators()["json"].most)]) == 0
    rows = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert len({r["question"] for r in rows}) == generators()["json"].most  # the bound is what exists
    assert main(["data", "generate", "json", str(tmp_path / "k.jsonl"), "--rows", "10", "--exclude",
                 str(tmp_path / "j.jsonl")]) == 2
    assert "could not draw 10 distinct rows besides the 2,160 excluded" in capsys.readouterr().err


def test_perturbed_row_keeps_the_answer_correct():
    import random

    rng = random.Random(0)
    for r in generate(50, seed=2):
        p = perturb_row(r, rng)
        assert p["kind"] == r["kind"] and (p["a"], p["b"]) != (r["a"], r["b"])
        assert int(p["answer"]) == (p["a"] + p["b"] if p["op"] == "+" else p["a"] - p["b"])


def test_bundled_demo_data_is_clean_and_disjoint():
    from grpokit.datasets import BUILTIN_DATA

    train = check_file(BUILTIN_DATA / "arithmetic" / "train.jsonl")
    ev = check_file(BUILTIN_DATA / "arithmetic" / "eval.jsonl")
    assert train.ok and ev.ok and not train.duplicates
    assert not overlapping_questions(train.rows, ev.rows)


# ---------------------------------------------------------------- your own columns
UNIT_ROWS = [{"problem": f"{i} m in cm?", "target": str(i * 100), "unit": "cm"} for i in range(40)]


def test_data_check_lists_the_columns_groups_repeats_and_suggests_the_flag(tmp_path, capsys):
    path = write_jsonl(tmp_path / "units.jsonl", UNIT_ROWS)
    assert main(["data", "check", str(path), "--task", "math"]) == 1
    out = capsys.readouterr().out
    assert f"{path}: columns found: problem, target, unit" in out
    assert (f"error   {path}: 40 rows (lines 1, 2, 3, ...): missing question (looked for question / prompt; the row "
            "has: problem, target, unit)") in out
    assert "fix: did you mean 'problem'? name it: data.question_field: problem in a recipe, --question-field problem " \
           "for `grpokit data check`" in out
    assert "did you mean 'target'?" in out and out.count("missing question") == 1  # one line, not 40


def test_a_misspelt_question_field_gets_the_closest_column(tmp_path, capsys):
    path = write_jsonl(tmp_path / "units.jsonl", UNIT_ROWS)
    assert main(["data", "check", str(path), "--question-field", "problme", "--answer-field", "target"]) == 1
    out = capsys.readouterr().out
    assert "missing question (looked for problme;" in out and "--question-field problem" in out
    assert main(["data", "check", str(path), "--question-field", "problem", "--answer-field", "target"]) == 0


def test_a_table_without_the_column_gets_the_closest_too(tmp_path):
    path = tmp_path / "units.csv"
    path.write_text("problem,target,unit\n1 m in cm?,100,cm\n")
    report = check_file(path, answer_field="target")
    (error,) = report.errors
    assert "no question column (looked for question / prompt; the file has: problem, target, unit)" in error.message
    assert error.fix.startswith("did you mean 'problem'? name it: data.question_field: problem")


def test_rows_keep_their_own_column_names_beside_the_tasks(tmp_path):
    path = write_jsonl(tmp_path / "units.jsonl", UNIT_ROWS[:1])
    (row,) = check_file(path, "problem", "target").rows
    assert row == {"problem": "0 m in cm?", "target": "0", "unit": "cm", "question": "0 m in cm?", "answer": "0"}
