"""`grpokit eval` scores code, JSON and SQL tasks with their own correctness reward, on a tiny real model.

The tiny model's completions are random text, so every primary metric is 0; what is checked is that the
metric is the task's (pass@1 from code_tests through the sandbox, valid rate, execution match), that pass@k
is computed from --samples, that a run is evaluated per checkpoint and its best chosen by that metric, and
that a task without a correctness reward says what it measures. Scoring itself is tested on given
completions in test_task.py.
"""
from __future__ import annotations

import json
import sqlite3

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.sandbox.isolation import detect_isolation

SANDBOX = "bwrap" if detect_isolation().kind == "bwrap" else "unsafe"
HE_ROWS = [
    {"question": "Complete add.", "answer": "    return a + b\n", "entry_point": "add",
     "humaneval_prompt": "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n",
     "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"},
    {"question": "Complete neg.", "answer": "    return -x\n", "entry_point": "neg",
     "humaneval_prompt": "def neg(x):\n    \"\"\"Negate x.\"\"\"\n",
     "test": "def check(candidate):\n    assert candidate(2) == -2\n"},
]


def _recipe(tmp_path, model_dir, rewards, train_rows, **train):
    data = write_jsonl(tmp_path / "train.jsonl", train_rows)
    raw = {"model": {"name": str(model_dir)},
           "data": {"train": str(data), "eval_fraction": 0.5, "template": "plain_en"},
           "rewards": rewards,
           "train": {"num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 6,
                     "max_steps": 2, "save_steps": 1, "logging_steps": 1, **train}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _results(folder, name="results.json"):
    return json.loads((folder / "eval" / name).read_text())


def test_code_run_reports_pass_at_1_per_checkpoint_and_picks_the_best_by_it(tmp_path, tiny_model_dir, capsys):
    code = [{"name": "code_tests", "params": {"sandbox": SANDBOX, "timeout_s": 5, "mode": "all"}}]
    recipe = _recipe(tmp_path, tiny_model_dir, code, HE_ROWS * 2)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--samples", "2", "--max-new-tokens", "6"]) == 0
    out = capsys.readouterr().out
    res = _results(run)
    assert res["metric"] == "pass@1" and [e["step"] for e in res["checkpoints"]] == [0, 1, 2]
    for e in res["checkpoints"]:
        h = e["heldout"]
        assert h["metric"] == "pass@1" and h["accuracy"] == 0.0  # random text never passes the tests
        assert set(h["pass_at_k"]) == {"1", "2"} and h["samples_per_problem"] == 2
        assert h["format_rate"] is None and h["refusal_rate"] is None  # no format reward; code cannot refuse
        assert h["reward_means"]["code_tests"] == -0.5  # random text does not compile: compile_penalty
    best = json.loads((run / "eval" / "best.json").read_text())
    assert best["metric"] == "pass@1" and best["step"] == 0  # every step ties at 0%: the earliest wins
    assert "greedy pass@1" in out and "pass@2" in out and "best: step 0" in out


def test_eval_model_on_code_data_with_a_recipe_and_samples(tmp_path, tiny_model_dir, capsys):
    code = [{"name": "code_tests", "params": {"sandbox": SANDBOX, "timeout_s": 5}}]
    recipe = _recipe(tmp_path, tiny_model_dir, code, HE_ROWS * 2)
    data = write_jsonl(tmp_path / "he.jsonl", HE_ROWS)
    out = tmp_path / "out"
    assert main(["eval", str(tiny_model_dir), "--data", str(data), "--recipe", str(recipe), "--samples", "4",
                 "--max-new-tokens", "6", "--output-dir", str(out)]) == 0
    res = _results(out)
    h = res["checkpoints"][0]["heldout"]
    assert res["metric"] == "pass@1" and h["rows"] == 2 and h["accuracy"] == 0.0
    assert set(h["pass_at_k"]) == {"1", "2", "4"} and all(v == 0.0 for v in h["pass_at_k"].values())
    assert h["reward_means"]["code_tests"] == -0.5  # random text does not compile: compile_penalty
    assert "pass@4" in capsys.readouterr().out


def test_json_eval_reports_the_valid_rate(tmp_path, tiny_model_dir, capsys):
    schema = {"type": "object", "required": ["name"]}
    rows = [{"question": f"Give a JSON object for person {i}.", "answer": json.dumps({"name": f"p{i}"}),
             "schema": schema} for i in range(4)]
    recipe = _recipe(tmp_path, tiny_model_dir, [{"name": "json_schema"}], rows)
    out = tmp_path / "out"
    assert main(["eval", str(tiny_model_dir), "--recipe", str(recipe), "--max-new-tokens", "4",
                 "--output-dir", str(out)]) == 0
    res = _results(out)
    assert res["metric"] == "valid rate" and res["checkpoints"][0]["heldout"]["accuracy"] == 0.0
    assert "greedy valid rate" in capsys.readouterr().out


def test_sql_eval_reports_the_execution_match(tmp_path, tiny_model_dir, capsys):
    db = tmp_path / "shop.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE items (name TEXT, price REAL)")
    conn.executemany("INSERT INTO items VALUES (?, ?)", [("fig", 3.0), ("pear", 2.0)])
    conn.commit()
    conn.close()
    rows = [{"question": f"Items cheaper than {p}?", "answer": f"SELECT name FROM items WHERE price < {p}",
             "db": str(db)} for p in (1, 2, 3, 4)]
    recipe = _recipe(tmp_path, tiny_model_dir, [{"name": "sql_exec"}], rows)
    out = tmp_path / "out"
    assert main(["eval", str(tiny_model_dir), "--recipe", str(recipe), "--max-new-tokens", "4",
                 "--output-dir", str(out)]) == 0
    res = _results(out)
    assert res["metric"] == "execution match" and res["checkpoints"][0]["heldout"]["accuracy"] == 0.0


def test_a_task_without_correctness_is_evaluated_on_what_it_has(tmp_path, tiny_model_dir, capsys):
    rows = [{"question": f"{i} + 1 = ?", "answer": str(i + 1)} for i in range(4)]
    recipe = _recipe(tmp_path, tiny_model_dir, [{"name": "format"}, {"name": "length"}], rows)
    out = tmp_path / "out"
    assert main(["eval", str(tiny_model_dir), "--recipe", str(recipe), "--samples", "2", "--max-new-tokens", "4",
                 "--output-dir", str(out)]) == 0
    text = capsys.readouterr().out
    assert "no reward of this task has the correctness role" in text
    res = _results(out)
    h = res["checkpoints"][0]["heldout"]
    assert res["metric"] is None and h["accuracy"] is None and h["pass_at_k"] == {}
    assert h["format_rate"] == 0.0 and set(h["reward_means"]) == {"format", "length"}


@pytest.mark.parametrize("metric", ["accuracy", None])
def test_results_table_reads_old_and_new_results(metric):
    from grpokit.evaluation.metrics import results_table

    h = {"accuracy": 0.5 if metric else None, "format_rate": 0.25, "refusal_rate": None, "mean_length": 3.0,
         "truncated_rate": 0.0, "pass_at_k": {}, "reward_means": {"format": 0.25}}
    results = {"rows": 4, "data": "x", "checkpoints": [{"step": 0, "heldout": h}]}
    if metric is None:
        results["metric"] = None
    table = results_table(results)
    headers = [c.header for c in table.columns]
    assert headers[1] == ("accuracy" if metric else "format") and "format" in headers[2:] + headers[1:2]
    assert "refusal" not in headers  # no reward could tell a refusal


def test_the_results_table_is_explained_under_it():
    """Every column the table shows has a legend line; the gap says what it subtracts and when it is 'large'."""
    from grpokit.evaluation.metrics import results_legend, results_table

    h = {"accuracy": 0.5, "format_rate": 0.25, "refusal_rate": 0.0, "mean_length": 3.0, "truncated_rate": 0.0,
         "pass_at_k": {"1": 0.4, "4": 0.6}, "reward_means": {}}
    results = {"rows": 4, "data": "x", "samples_per_problem": 4, "metric": "accuracy",
               "checkpoints": [{"step": 0, "heldout": h, "perturbed": {"accuracy": 0.4},
                                "gap": {"kind": "perturbed", "value": 0.1, "stderr": 0.05, "flagged": False}}]}
    legend = results_legend(results)
    headers = [str(c.header) for c in results_table(results).columns]
    for header in headers:
        key = "sampled pass@k" if header.startswith("sampled pass@") else header
        assert any(line.startswith(f"{key}:") for line in legend), header
    (gap,) = [line for line in legend if line.startswith("gap:")]
    assert "held-out minus perturbed" in gap and "'large' above 10 points and 2 standard errors" in gap
    results["checkpoints"][0] = {**results["checkpoints"][0], "perturbed": None, "train": {"accuracy": 0.9},
                                 "gap": {"kind": "train", "value": 0.4, "stderr": 0.1, "flagged": True}}
    assert "train minus held-out" in next(line for line in results_legend(results) if line.startswith("gap:"))
