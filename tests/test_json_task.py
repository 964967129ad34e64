"""The JSON extraction task: its generated rows, the checks of a JSON task's rows (where / what / fix), its metrics
(field accuracy and valid rate) in scoring, `grpokit eval` and the report, and `grpokit demo --task json` on a
tiny model. The reward itself: test_rewards_json_fields.py; its audit: test_audit_tasks.py; the whole pipeline
on a tiny model: tests/slow/test_json_pipeline.py; the measured demo: docs/measurements.md "JSON extraction".
"""
from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO, write_jsonl

from grpokit.cli import main
from grpokit.data import BUILTIN_DATA, load_rows
from grpokit.families import generators
from grpokit.families.json_records import KINDS, field_list, generate
from grpokit.evaluation.evaluate import score
from grpokit.evaluation.metrics import results_legend, results_table, sampled_pass_at_k
from grpokit.recipe.load import validate_raw
from grpokit.rewards.json_fields import check_fields
from grpokit.rewards.json_schema import check_json
from grpokit.task import Task

PERSON = KINDS[0].schema()


# ---------------------------------------------------------------- the generated rows
def test_generated_rows_are_seeded_typed_and_their_gold_matches_their_schema():
    rows = generate(60, seed=3)
    assert rows == generate(60, seed=3) and rows != generate(60, seed=4)
    assert len({r["question"] for r in rows}) == 60
    assert {r["kind"] for r in rows} == {k.name for k in KINDS}  # every kind, in turn
    for r in rows:
        assert check_json(r["answer"], r["schema"])[:2] == (1.0, "valid")  # the gold validates against its schema
        assert check_fields(r["answer"], r["answer"])[0] == 1.0  # and is right by json_fields
        assert field_list(r["schema"]) in r["question"]  # the question names the schema's fields and types
        gold = json.loads(r["answer"])
        # the values are read from the text, not known: every one of them appears in it
        text = r["question"].split("\n", 1)[1]
        for key, value in gold.items():
            if isinstance(value, bool):
                continue  # told in words ("would not recommend", "dry")
            shown = f"{value:.2f}" if isinstance(value, float) else str(value)
            assert shown in text, (key, value, text)


def test_the_bundled_rows_are_what_the_documented_commands_make_and_held_out_is_disjoint():
    # recipes/smollm2-json-extraction.yaml: `grpokit data generate json FILE --rows 1000 --seed 0`, then
    # `--rows 100 --seed 1 --exclude train.jsonl`
    train = [json.loads(line) for line in (BUILTIN_DATA / "json" / "train.jsonl").read_text().splitlines()]
    held = [json.loads(line) for line in (BUILTIN_DATA / "json" / "eval.jsonl").read_text().splitlines()]
    assert train == generate(1000, seed=0)
    assert held == generate(100, seed=1, exclude={r["question"] for r in train})
    assert not {r["question"] for r in train} & {r["question"] for r in held}


def test_data_generate_json_writes_the_generators_rows_and_they_pass_the_json_check(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert main(["data", "generate", "json", str(out), "--rows", "12", "--seed", "5"]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == generate(12, seed=5)
    assert main(["data", "check", str(out), "--task", "json"]) == 0
    assert "12 usable rows, 0 unusable" in capsys.readouterr().out


def test_the_generate_command_offers_every_generator(capsys):
    with pytest.raises(SystemExit):
        main(["data", "generate", "poetry", "x.jsonl"])
    offered = capsys.readouterr().err.split("choose from", 1)[1]
    assert sorted(name.strip(" '\n)") for name in offered.split(",")) == sorted(generators())


# ---------------------------------------------------------------- bad rows of a JSON task: where / what / fix
GOOD = {"question": "Extract.", "answer": json.dumps({"name": "Maria", "age": 34, "city": "Lisbon"}),
        "schema": PERSON}
BAD_ROWS = [
    # (id, the row, where after the line, what, fix, refused outside a JSON task too)
    ("no schema", {"question": "Extract.", "answer": GOOD["answer"]}, "", "no schema", "add e.g. \"schema\"",
     False),
    ("an invalid schema", {**GOOD, "schema": {"type": "objekt"}}, " schema", "is not a valid JSON Schema",
     "validates against its draft's meta-schema", False),
    ("a schema that is not JSON", {**GOOD, "schema": "{type: object}"}, " schema", "is not valid JSON",
     "fix the schema", False),
    ("a $ref outside the schema", {**GOOD, "schema": {"$ref": "https://example.com/person.json"}}, " schema",
     "refers to 'https://example.com/person.json'", "every $ref inside it", True),  # never fetched, by any task
    ("a gold answer that is not JSON", {**GOOD, "answer": "Maria, 34, Lisbon"}, " answer",
     "the gold answer is not JSON", "write the gold object as JSON text", False),
    ("a gold answer of the wrong type", {**GOOD, "answer": json.dumps({"name": "Maria", "age": "34", "city": "L"})},
     " answer", "does not match the row's schema: '34' is not of type 'integer'",
     "correct the gold answer or the schema", False),
    ("a gold answer missing a field", {**GOOD, "answer": json.dumps({"name": "Maria", "age": 34})}, " answer",
     "'city' is a required property", "correct the gold answer or the schema", False),
]


@pytest.mark.parametrize("row, where, what, fix, anyway", [c[1:] for c in BAD_ROWS], ids=[c[0] for c in BAD_ROWS])
def test_a_json_tasks_bad_row_is_reported_with_where_what_and_fix(tmp_path, capsys, row, where, what, fix, anyway):
    path = write_jsonl(tmp_path / "rows.jsonl", [GOOD, row])
    assert main(["data", "check", str(path), "--task", "json"]) == 1
    out = capsys.readouterr().out
    assert out.count("error ") == 1, out  # the good row passes; the bad one, once
    error = out.split("error   ", 1)[1]
    head, fix_line = error.splitlines()[:2]
    assert head.startswith(f"{path}:2{where}: ") and what in head and fix_line.strip().startswith("fix: "), out
    assert fix in fix_line, fix_line
    # training reads the rows the same way: the recipe refuses them before any model loads
    recipe = validate_raw({"data": {"train": str(path), "eval_fraction": 0.0}, "rewards": [{"name": "json_fields"}]})
    from grpokit.data import load_datasets
    from grpokit.errors import GrpokitError

    with pytest.raises(GrpokitError, match="unusable row"):
        load_datasets(recipe)
    # outside a JSON task (another task's rows may carry a `schema` column for an own reward) only a $ref that
    # would be fetched is refused
    assert load_rows(str(path), skip_bad_rows=True)[1].unusable == int(anyway)


# ---------------------------------------------------------------- metrics: field accuracy and valid rate
def _task(tmp_path, rewards):
    data = write_jsonl(tmp_path / "d.jsonl", [GOOD])
    return Task.from_recipe(validate_raw({"data": {"train": str(data)}, "rewards": rewards}))


TEXTS = ['{"name": "Maria", "age": 34, "city": "Lisbon"}',  # right and valid
         '```json\n{"name": "Maria", "age": "34", "city": "Lisbon"}\n```',  # 2 of 3 fields, invalid
         '{"name": "Maria", "age": 43, "city": "Lisbon"}',  # 2 of 3 fields, valid
         "Maria is 34."]  # no JSON


def test_field_accuracy_is_the_mean_share_of_fields_and_the_valid_rate_rides_along(tmp_path):
    task = _task(tmp_path, [{"name": "json_fields"}, {"name": "json_schema", "weight": 0.5}])
    assert task.primary_metric == "field accuracy"
    scores, _ = task.score(TEXTS, [GOOD] * 4)
    values = task.metric_values(scores)
    assert list(values) == ["field accuracy", "valid rate"]  # the primary first
    assert values["field accuracy"] == pytest.approx([1.0, 2 / 3, 2 / 3, 0.0])  # graded: the score itself
    assert values["valid rate"] == [1.0, 0.0, 1.0, 0.0]  # a pass rate: 1.0 or 0.0
    assert score(task, [GOOD] * 4, TEXTS)[0] == values["field accuracy"]
    # pass@k asks for the whole object right: one of the four samples
    assert sampled_pass_at_k(task, [GOOD], [TEXTS]) == pytest.approx({"1": 0.25, "2": 0.5, "4": 1.0})


def _results(metrics: dict, step_metrics: list[dict]) -> dict:
    return {"metric": "field accuracy", "rows": 4, "data": "held-out set", "samples_per_problem": 0,
            "checkpoints": [{"step": i, "heldout": {"accuracy": m["field accuracy"], "metrics": m, "format_rate": None,
                                                    "refusal_rate": None, "mean_length": 20.0, "truncated_rate": 0.0,
                                                    "pass_at_k": {}, "reward_means": {}}}
                            for i, m in enumerate(step_metrics)], **metrics}


def test_the_eval_table_shows_every_correctness_metric():
    results = _results({}, [{"field accuracy": 0.2, "valid rate": 0.3}, {"field accuracy": 0.7, "valid rate": 0.9}])
    table = results_table(results)
    assert [str(c.header) for c in table.columns][:3] == ["step", "field accuracy", "valid rate"]
    assert list(table.columns[2].cells) == ["30.0%", "90.0%"]
    assert any(line.startswith("valid rate: greedy, by another correctness reward") for line in results_legend(results))
    # results written before `metrics` existed: the table it always had
    old = _results({}, [{"field accuracy": 0.2}])
    del old["checkpoints"][0]["heldout"]["metrics"]
    assert [str(c.header) for c in results_table(old).columns][:2] == ["step", "field accuracy"]


# ---------------------------------------------------------------- on a tiny model: eval, the demo
def _json_recipe(tmp_path, model_dir, **train):
    rows = write_jsonl(tmp_path / "rows.jsonl", generate(8, seed=2))
    raw = {"model": {"name": str(model_dir)},
           "data": {"train": str(rows), "eval_fraction": 0.5, "template": "chat"},
           "rewards": [{"name": "json_fields"}, {"name": "json_schema", "weight": 0.5}],
           "train": {"num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 6,
                     "max_steps": 1, "save_steps": 1, "logging_steps": 1, "max_prompt_length": 256, **train}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_eval_reports_field_accuracy_and_valid_rate(tmp_path, tiny_qwen3_dir, capsys):
    recipe = _json_recipe(tmp_path, tiny_qwen3_dir)
    out = tmp_path / "out"
    assert main(["eval", str(tiny_qwen3_dir), "--recipe", str(recipe), "--output-dir", str(out)]) == 0
    results = json.loads((out / "eval" / "results.json").read_text())
    h = results["checkpoints"][0]["heldout"]
    assert results["metric"] == "field accuracy" and list(h["metrics"]) == ["field accuracy", "valid rate"]
    assert h["metrics"]["field accuracy"] == h["accuracy"] and h["metrics"]["valid rate"] == \
        h["reward_means"]["json_schema"]  # partial_credit 0: its mean is its valid rate
    printed = capsys.readouterr().out
    assert "greedy field accuracy" in printed and "valid rate" in printed


def test_demo_task_json_evaluates_trains_and_reports_both_metrics(tmp_path, tiny_qwen3_dir, capsys):
    from grpokit.demo import TASKS, run_demo

    assert TASKS["json"].module == "json_extraction"
    run = tmp_path / "demo"
    result = run_demo(output_dir=str(run), task="json", recipe_path=_json_recipe(tmp_path, tiny_qwen3_dir))
    out = capsys.readouterr().out
    for stage in ("before", "after"):
        assert list(result[stage]["metrics"]) == ["field accuracy", "valid rate"]
    assert "field accuracy" in out and "valid rate" in out and "cut off at max length" in out
    assert "format rate" not in out  # no format reward: no format row
    assert json.loads((run / "demo.json").read_text())["after"]["metrics"] == result["after"]["metrics"]
    page = (run / "report" / "report.html").read_text()
    assert "held-out field accuracy" in page and "held-out valid rate" in page


def test_the_shipped_recipe_is_the_demos_and_reads_its_bundled_rows():
    from grpokit.demo.json_extraction import DEMO_RECIPE
    from grpokit.recipe import load_recipe

    recipe = load_recipe(DEMO_RECIPE)
    assert DEMO_RECIPE.resolve() == (REPO / "recipes" / "smollm2-json-extraction.yaml").resolve()  # the package's
    assert [r.name for r in recipe.rewards][:1] == ["json_fields"]  # the primary metric: field accuracy
    train, held, notes = Task.from_recipe(recipe).rows()
    assert (len(train), len(held), notes) == (1000, 100, [])
