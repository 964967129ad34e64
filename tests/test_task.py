"""The task: the rewards table with roles, own reward functions, tasks from the shipped recipes, scoring by role."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest
import yaml
from conftest import REPO, addition_recipe, write_jsonl

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.evaluation.evaluate import score
from grpokit.evaluation.metrics import sampled_pass_at_k
from grpokit.recipe.load import load_recipe, validate_raw
from grpokit.rewards.registry import ROLES, available, build_reward, get_spec
from grpokit.sandbox.isolation import detect_isolation
from grpokit.task import Task

SANDBOX = "bwrap" if detect_isolation().kind == "bwrap" else "unsafe"


# ---------------------------------------------------------------- the table
@pytest.mark.parametrize("name", available())
def test_every_builtin_declares_a_role_and_a_correctness_reward_its_metric(name):
    # What the rest of grpokit relies on (a new reward row that breaks it fails here): a role of ROLES, a description
    # for `grpokit rewards list`, and a metric exactly when it judges the answer (evaluation's primary metric is the
    # pass rate of the correctness reward: grpokit.task.TaskReward.metric).
    spec = get_spec(name)
    assert spec.role in ROLES and spec.description
    assert (spec.metric is not None) == (spec.role == "correctness"), (name, spec.role, spec.metric)


def test_the_builtin_metrics_are_distinct():
    # Task.metric_values keys every correctness reward's values by its metric: two built-ins sharing one would
    # overwrite each other in a recipe that uses both.
    metrics = [get_spec(n).metric for n in available() if get_spec(n).metric]
    assert len(metrics) == len(set(metrics)), metrics


def test_listing_rewards_imports_no_reward_module():
    # The table is read without importing the reward modules (they load on first use); guard.py is no reward but
    # the containment of own ones, whose error class the table's callers catch.
    code = ("import sys; from grpokit.rewards import available; available(); print(sorted(m for m in sys.modules "
            "if m.startswith('grpokit.rewards.') and m not in ('grpokit.rewards.registry', 'grpokit.rewards.guard')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO / "src")}).stdout
    assert out.strip() == "[]"


def test_length_counts_real_tokens_when_trl_passes_completion_ids():
    fn = build_reward("length", {"max_completion_length": 100, "overlong_buffer": 50, "min_chars": 0})
    text = "word " * 40  # ~50 estimated tokens: no penalty by the estimate
    assert fn(prompts=["p"], completions=[text]) == [0.0]
    assert fn(prompts=["p"], completions=[text], completion_ids=[[7] * 100]) == [-1.0]  # 100 real tokens: the limit


# ---------------------------------------------------------------- own reward functions
OWN_MODULE = '''
def score(prompts, completions, answer, **kwargs):
    """1.0 when the gold answer is the completion's last word."""
    return [1.0 if c.split() and c.split()[-1] == str(a) else 0.0 for c, a in zip(completions, answer)]


def scaled(prompts, completions, factor=1.0, **kwargs):
    return [factor * len(c) for c in completions]
'''


@pytest.fixture()
def own_dir(tmp_path):
    (tmp_path / "my_rewards.py").write_text(OWN_MODULE)
    (tmp_path / "broken_rewards.py").write_text("import no_such_package_xyz\n")
    (tmp_path / "raises.py").write_text("raise RuntimeError('boom at import')\n")
    write_jsonl(tmp_path / "train.jsonl", [{"question": f"q{i}", "answer": str(i)} for i in range(5)])
    return tmp_path


def _recipe(folder, rewards):
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "train.jsonl", "eval_fraction": 0.2}, "rewards": rewards}))
    return path


OWN_CASES = [
    # (id, reward entry, logged name, role)
    ("module:function", {"name": "my_rewards:score"}, "score", "correctness"),  # role defaults to correctness
    ("dotted, as TRL's CLI takes it", {"name": "my_rewards.score", "role": "shaping"}, "score", "shaping"),
    ("a file relative to the recipe", {"path": "my_rewards.py", "function": "score", "role": "penalty"}, "score",
     "penalty"),
]


@pytest.mark.parametrize("entry, label, role", [c[1:] for c in OWN_CASES], ids=[c[0] for c in OWN_CASES])
def test_own_reward_is_loaded_and_called_with_trls_signature(own_dir, entry, label, role):
    task = Task.from_recipe(load_recipe(_recipe(own_dir, [entry, {"name": "format", "weight": 0.2}])))
    r = task.rewards[0]
    assert (r.name, r.role, task.roles) == (label, role, {label: role, "format": "format"})
    # Called as TRL calls it: prompts, completions and the dataset columns as keyword arguments.
    assert r.fn(prompts=["q", "q"], completions=["so 3", "so 4"], answer=["3", "3"]) == [1.0, 0.0]
    assert (task.correctness is r) == (role == "correctness")
    assert task.primary_metric == ("score pass rate" if role == "correctness" else None)


def test_own_reward_params_are_keyword_arguments(own_dir):
    task = Task.from_recipe(load_recipe(_recipe(own_dir, [{"name": "my_rewards:scaled", "params": {"factor": 0.5}}])))
    assert task.rewards[0].fn(prompts=[None], completions=["abcd"]) == [2.0]


BAD_OWN = [
    # (id, reward entry, where, what)
    ("module not found", {"name": "no_such_module_abc:score"}, "rewards.0.name",
     "no module named 'no_such_module_abc'"),
    ("function not in module", {"name": "my_rewards:nope"}, "rewards.0.name", "has no function 'nope'"),
    ("its import fails", {"name": "broken_rewards:score"}, "rewards.0.name", "no_such_package_xyz"),
    ("its import raises", {"path": "raises.py", "function": "score"}, "rewards.0.path", "RuntimeError: boom at import"),
    ("file missing", {"path": "nowhere.py", "function": "score"}, "rewards.0.path", "no file"),
    ("path without function", {"path": "my_rewards.py"}, "rewards.0", "either `name`"),
    ("role on a built-in", {"name": "format", "role": "correctness"}, "rewards.0.role", "is built in"),
    ("two rewards with one name", [{"name": "my_rewards:score"}, {"path": "my_rewards.py", "function": "score"}],
     "rewards.1", "two rewards are named 'score'"),
]


@pytest.mark.parametrize("entry, where, what", [c[1:] for c in BAD_OWN], ids=[c[0] for c in BAD_OWN])
def test_bad_own_rewards_are_reported_by_recipe_check(own_dir, capsys, entry, where, what):
    path = _recipe(own_dir, entry if isinstance(entry, list) else [entry])
    with pytest.raises(GrpokitError) as e:
        load_recipe(path)
    text = str(e.value)
    assert f"{where}" in text and what in text, text
    assert main(["recipe", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert what in err and "fix:" in err and "Traceback" not in err


def test_own_reward_trains_logged_per_component(own_dir, tiny_model_dir):
    path = addition_recipe(own_dir, tiny_model_dir, rows=8, data={"eval_fraction": 0.25}, name="train.yaml",
                           rewards=[{"path": "my_rewards.py", "function": "scaled", "role": "shaping",
                                     "params": {"factor": 0.01}}],
                           train={"num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 4,
                                  "max_steps": 1, "save_steps": 1, "logging_steps": 1})
    run = own_dir / "run"
    assert main(["train", str(path), "--output-dir", str(run), "--skip-audit"]) == 0
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("rewards/scaled/mean" in m for m in metrics)
    saved = yaml.safe_load((run / "config.yaml").read_text())["rewards"][0]
    assert saved["path"] == str(own_dir / "my_rewards.py")  # absolute: the run dir works from anywhere


# ---------------------------------------------------------------- tasks from the shipped recipes
SHIPPED = [
    # (recipe, primary metric, roles)
    ("smollm2-arithmetic.yaml", "accuracy", {"math_correctness": "correctness", "format": "format"}),
    ("smollm2-humaneval.yaml", "pass@1", {"code_tests": "correctness"}),
    ("smollm2-arithmetic-sft.yaml", "accuracy", {"math_correctness": "correctness", "format": "format"}),
    ("qwen3-0.6b-base-gsm8k.yaml", "accuracy", None),
    ("qwen3-4b-gsm8k-lora.yaml", "accuracy", None),
    ("qwen3-14b-gsm8k-lora.yaml", "accuracy", None),
    ("smollm2-calculator-tools.yaml", "task success", {"task_success": "correctness", "tool_choice": "format",
                                                       "tool_args": "format", "tool_shaping": "shaping"}),
    ("smollm2-calculator-sft.yaml", "task success", {"task_success": "correctness", "tool_choice": "format",
                                                     "tool_args": "format"}),
    ("smollm2-calculator-sft.yaml", "task success", {"task_success": "correctness", "tool_choice": "format",
                                                     "tool_args": "format"}),
    ("smollm2-json-extraction.yaml", "field accuracy", {"json_fields": "correctness", "json_schema": "correctness"}),
    ("smollm2-json-extraction-sft.yaml", "field accuracy", {"json_fields": "correctness",
                                                            "json_schema": "correctness"}),
    ("smollm2-repofix.yaml", "task success", {"task_success": "correctness", "tool_args": "format"}),
    ("qwen3-4b-tools.yaml", "task success", None),
    ("smollm2-countdown.yaml", "solve rate", {"countdown": "correctness"}),
    ("smollm2-countdown-large.yaml", "solve rate", {"countdown": "correctness"}),
    ("smollm2-countdown-sft.yaml", "solve rate", {"countdown": "correctness"}),
    ("smollm2-composition.yaml", "accuracy", {"math_correctness": "correctness", "format": "format"}),
    ("smollm2-composition-sft.yaml", "accuracy", {"math_correctness": "correctness", "format": "format"}),
    ("smollm2-composition-atomic-sft.yaml", "accuracy", {"math_correctness": "correctness", "format": "format"}),
]


@pytest.mark.parametrize("name, metric, roles", SHIPPED)
def test_task_from_each_shipped_recipe_without_a_model(tmp_path, name, metric, roles):
    # smollm2-preference.yaml has no correctness reward (a learned one): tests/test_workflows.py trains it
    assert {n for n, *_ in SHIPPED} == {p.name for p in (REPO / "recipes").glob("*.yaml")} - {"smollm2-preference.yaml"}
    folder = tmp_path / "recipes"
    folder.mkdir()
    shutil.copy(REPO / "recipes" / name, folder / name)
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "humaneval.jsonl", [{"question": "q", "answer": "a", "test": "t",
                                                         "entry_point": "f"}])
    if "humaneval" in name and SANDBOX != "bwrap":
        pytest.skip("code_tests refuses to build without bubblewrap (its own test covers that)")
    recipe = load_recipe(folder / name)
    task = Task.from_recipe(recipe)
    assert task.primary_metric == metric and task.correctness is not None and task.measured() is None
    assert roles is None or task.roles == roles
    assert task.generation.max_new_tokens == recipe.train.max_completion_length
    assert task.template.name == recipe.data.template


def test_a_task_without_correctness_says_what_is_measured(tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", [{"question": "q", "answer": "1"}] * 2)
    task = Task.from_recipe(validate_raw({"data": {"train": str(data)}, "rewards": [{"name": "format"},
                                                                                   {"name": "length"}]}))
    assert task.correctness is None and task.primary_metric is None
    msg = task.measured()
    assert "no reward of this task has the correctness role" in msg and "format (format)" in msg
    assert "role: correctness" in msg


# ---------------------------------------------------------------- scoring on given completion texts
HE_PROMPT = "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n"
HE_ROW = {"question": "Write add.", "answer": "    return a + b\n", "humaneval_prompt": HE_PROMPT, "entry_point": "add",
          "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"}
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
BROKEN = "```python\ndef add(a, b)\n    return\n```"


def _task(rewards, tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "1"}])
    return Task.from_recipe(validate_raw({"data": {"train": str(data)}, "rewards": rewards}))


SCORE_CASES = [
    # (id, completions for one row, primary pass per completion, pass@k)
    ("one right, one wrong", [RIGHT, WRONG], [1.0, 0.0], {"1": 0.5, "2": 1.0}),
    ("wrong and not compiling", [WRONG, BROKEN], [0.0, 0.0], {"1": 0.0, "2": 0.0}),
    ("all right", [RIGHT, RIGHT, RIGHT, RIGHT], [1.0] * 4, {"1": 1.0, "2": 1.0, "4": 1.0}),
    ("one of four", [WRONG, RIGHT, BROKEN, WRONG], [0.0, 1.0, 0.0, 0.0], {"1": 0.25, "2": 0.5, "4": 1.0}),
]


@pytest.mark.parametrize("texts, passed, pass_k", [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_code_scoring_gives_pass_at_1_and_pass_at_k(tmp_path, texts, passed, pass_k):
    task = _task([{"name": "code_tests", "params": {"sandbox": SANDBOX, "timeout_s": 5}}], tmp_path)
    correct, fmt = score(task, [HE_ROW] * len(texts), texts)
    assert correct == passed and fmt == [None] * len(texts)  # no format reward: no format rate
    assert sampled_pass_at_k(task, [HE_ROW], [texts]) == pytest.approx(pass_k)


def test_json_and_sql_scoring_by_their_correctness_reward(tmp_path):
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    row = {"question": "q", "answer": '{"name": "x"}', "schema": schema}
    task = _task([{"name": "json_schema"}], tmp_path)
    assert task.primary_metric == "valid rate"
    assert score(task, [row] * 3, ['```json\n{"name": "Ann"}\n```', '{"name": 3}', "no json"])[0] == [1.0, 0.0, 0.0]

    db = tmp_path / "t.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
    conn.commit()
    conn.close()
    row = {"question": "q", "answer": "SELECT x FROM t WHERE x > 1", "db": str(db)}
    task = _task([{"name": "sql_exec"}], tmp_path)
    assert task.primary_metric == "execution match"
    assert score(task, [row] * 3, ["SELECT 2", "SELECT x FROM t", "DELETE FROM t"])[0] == [1.0, 0.0, 0.0]
