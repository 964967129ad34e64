"""The audit tries the tricks that fit each reward's role and task (issue 27, item 3).

Every shipped recipe passes its own audit (set up as its comments say: HumanEval imported, a reward model
folder for the preference recipe, GSM8K-style rows for the Qwen3 recipes, which read GSM8K from the hub).
JSON and SQL recipes pass theirs; and each suite can fail: a schema that accepts anything, a SQL reward
that matches an empty result with no query, fraction-mode code_tests paying for the docstring's examples.
"""
from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
import yaml
from conftest import REPO, write_jsonl

from grpokit.cli import main
from grpokit.sandbox.isolation import detect_isolation

BWRAP = detect_isolation().kind == "bwrap"
GSM8K_ROWS = [  # GSM8K's layout: a worked rationale with calculator annotations, then "#### N"
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
               "altogether in April and May.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
                 "How much did she earn?",
     "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = "
               "$<<0.2*50=10>>10.\n#### 10"},
    {"question": "James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a "
                 "year?", "answer": "He writes each friend 3*2=<<3*2=6>>6 pages a week\nSo he writes 6*2=<<6*2=12>>12 "
                                    "pages every week\nThat means he writes 12*52=<<12*52=624>>624 pages a year\n#### 624"},
    {"question": "Albert buys 2 large pizzas and 2 small pizzas. A large pizza has 16 slices and a small pizza has 8 "
                 "slices. If he eats it all, how many pieces does he eat that day?",
     "answer": "He eats 2 x 16 = <<2*16=32>>32 from the large pizzas\nHe eats 2 x 8 = <<2*8=16>>16 from the small "
               "pizzas\nHe eats 32 + 16 = <<32+16=48>>48 pieces\n#### 48"},
] * 3


def _shipped(tmp_path, monkeypatch, name: str) -> list[str]:
    """The recipe laid out as in the repository, its data made as its comment says; the audit's argv."""
    (tmp_path / "recipes").mkdir()
    path = shutil.copy(REPO / "recipes" / name, tmp_path / "recipes" / name)
    argv = ["rewards", "audit", str(path)]
    if name == "smollm2-humaneval.yaml":
        if not BWRAP:
            pytest.skip("code_tests refuses to run without bubblewrap")
        assert main(["data", "import", "humaneval", str(tmp_path / "data" / "humaneval.jsonl")]) == 0
    if name == "smollm2-preference.yaml":  # `grpokit rm train ... --out runs/rm-style` first; what validation reads
        monkeypatch.chdir(tmp_path)
        (tmp_path / "runs" / "rm-style").mkdir(parents=True)
        for f in ("rm.json", "config.json"):
            (tmp_path / "runs" / "rm-style" / f).write_text("{}")
    if yaml.safe_load(open(path))["data"]["train"].startswith("hf:"):
        argv += ["--set", f"data.train={write_jsonl(tmp_path / 'gsm8k.jsonl', GSM8K_ROWS)}"]
    return argv


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "recipes").glob("*.yaml")))
def test_every_shipped_recipe_passes_its_own_audit(tmp_path, monkeypatch, capsys, name):
    assert main(_shipped(tmp_path, monkeypatch, name)) == 0, capsys.readouterr()
    out = capsys.readouterr()
    text = out.out + out.err
    expected = {"smollm2-humaneval.yaml": "code tricks, for code_tests", "smollm2-preference.yaml": "learned reward",
                "smollm2-calculator-tools.yaml": "tool-hack audit", "smollm2-calculator-sft.yaml": "tool-hack audit",
                "smollm2-repofix.yaml": "tool-hack audit", "qwen3-4b-tools.yaml": "tool-hack audit",
                "smollm2-json-extraction.yaml": "schema tricks, for json_fields",
                "smollm2-json-extraction-sft.yaml": "schema tricks, for json_fields",
                "smollm2-countdown.yaml": "no trick scored more than an honest wrong answer (13 tried)",
                "smollm2-countdown-large.yaml": "no trick scored more than an honest wrong answer (13 tried)",
                "smollm2-countdown-sft.yaml": "no trick scored more than an honest wrong answer (13 tried)"}.get(
        name, "no trick scored as much as an honest wrong")
    assert expected in text, text
    if name == "smollm2-humaneval.yaml":  # the math answer-line audit no longer runs against code_tests
        assert "refusal" not in text and "hedge" not in text


def _recipe(tmp_path, rows, rewards, **data):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": str(write_jsonl(tmp_path / "rows.jsonl", rows)),
                                             "eval_fraction": 0.0, "template": "chat", **data},
                                    "rewards": rewards}))
    return str(path)


SCHEMA = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def _sql_rows(tmp_path, limits):
    db = tmp_path / "shop.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE items (name TEXT, price REAL)")
    conn.executemany("INSERT INTO items VALUES (?, ?)", [("fig", 3.0), ("pear", 2.0), ("kiwi", 1.0)])
    conn.commit()
    conn.close()
    return [{"question": f"Items cheaper than {p}?", "answer": f"SELECT name FROM items WHERE price < {p}",
             "db": str(db)} for p in limits]


CASES = [
    # (id, rows builder, rewards, exit code, expected in the table)
    ("json: a closed schema passes",
     lambda t: [{"question": f"Person {i}?", "answer": json.dumps({"name": f"p{i}", "age": i}), "schema": SCHEMA}
                for i in range(4)],
     [{"name": "json_schema"}], 0, "schema tricks, for json_schema"),
    ("json: rows without an answer still get a built instance",
     lambda t: [{"question": f"Person {i}?", "schema": SCHEMA} for i in range(3)],
     [{"name": "json_schema"}], 0, "honest right 1.000 (3 row(s) with a reference)"),
    ("json: a schema that accepts anything is a loophole",
     lambda t: [{"question": f"Anything {i}?", "answer": "{}", "schema": {"type": "object"}} for i in range(3)],
     [{"name": "json_schema"}], 1, "empty_object   3/3"),
    ("json: field correctness beside the schema passes, its own tricks tried",
     lambda t: [{"question": f"Person {i}?", "answer": json.dumps({"name": f"p{i}", "age": i}), "schema": SCHEMA}
                for i in range(4)],
     [{"name": "json_fields"}, {"name": "json_schema", "weight": 0.5}], 0, "no trick scored more than an honest wrong "
     "answer (13 tried)"),
    ("json: a field reward that compares values as text pays for stringified values",
     lambda t: [{"question": f"Person {i}?", "answer": json.dumps({"name": f"p{i}", "age": i}), "schema": SCHEMA}
                for i in range(4)],
     [{"name": "reward_fns:loose_fields", "role": "correctness"}, {"name": "json_schema", "weight": 0.5}], 1,
     "values_as_strings  4/4"),
    ("sql: queries with results pass", lambda t: _sql_rows(t, (2, 3, 4)), [{"name": "sql_exec"}], 0,
     "query tricks, for sql_exec"),
    ("sql: an empty gold result is matched by a commented-out query",  # sql_exec runs an empty statement
     lambda t: _sql_rows(t, (0, 3)), [{"name": "sql_exec"}], 1, "commented_out  1/2"),
]


@pytest.mark.parametrize("rows, rewards, code, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_json_and_sql_recipes_get_their_own_tricks(tmp_path, capsys, rows, rewards, code, expected):
    assert main(["rewards", "audit", _recipe(tmp_path, rows(tmp_path), rewards)]) == code
    out = capsys.readouterr().out
    assert expected in out and "refusal" not in out, out


@pytest.mark.skipif(not BWRAP, reason="code_tests refuses to run without bubblewrap")
def test_code_tricks_find_what_fraction_mode_pays_for(tmp_path, capsys):
    # HumanEval's tests often repeat the docstring's examples: a lookup table of them earns partial credit in
    # fraction mode (why recipes/smollm2-humaneval.yaml scores mode: all); an empty function does not.
    out_file = tmp_path / "he.jsonl"
    assert main(["data", "import", "humaneval", str(out_file)]) == 0
    rows = [json.loads(line) for line in out_file.read_text().splitlines()[:8]]
    code = [{"name": "code_tests", "params": {"mode": "fraction", "timeout_s": 5}}]
    assert main(["rewards", "audit", _recipe(tmp_path, rows, code)]) == 1
    out = capsys.readouterr().out
    assert "special_cased_examples" in out and "empty_function" not in out
    assert "honest right 1.000 (8 row(s) with a reference), honest wrong 0.000" in out


@pytest.mark.skipif(not BWRAP, reason="code_tests refuses to run without bubblewrap")
def test_code_rows_without_a_reference_are_audited_without_a_right_answer(tmp_path, capsys):
    rows = [{"question": "Write add(a, b) returning the sum.", "tests": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]},
            {"question": "Write neg(x). assert neg(2) == -2", "tests": ["assert neg(2) == -2"]}]  # shown in the question
    code = [{"name": "code_tests", "params": {"mode": "fraction", "timeout_s": 5}}]
    assert main(["rewards", "audit", _recipe(tmp_path, rows, code)]) == 1
    out = capsys.readouterr().out
    assert "honest right - (no row has a reference solution)" in out
    # the second row shows its only test in the question: special-casing it passes it
    assert "special_cased_examples  1/1" in out


def test_train_runs_the_tricks_of_its_task_before_training(tmp_path, capsys):
    # the pre-flight audit of a JSON recipe: its loophole is said before any model loads, not "skipped"
    rows = [{"question": f"Anything {i}?", "answer": "{}", "schema": {"type": "object"}} for i in range(3)]
    recipe = _recipe(tmp_path, rows, [{"name": "json_schema"}])
    from grpokit.audit import audit_warnings
    from grpokit.recipe import load_recipe

    warnings = audit_warnings(load_recipe(recipe))
    assert any("trick 'empty_object'" in w for w in warnings) and not any("skipped" in w for w in warnings)
