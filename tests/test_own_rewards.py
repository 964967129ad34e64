"""Your own reward is checked as the built-ins are, before any model loads (issue 27, item 1).

Real bad functions, each in a module a recipe names, through `grpokit recipe check`: a misspelt param
swallowed by **kwargs, an exception on real rows, a scalar, a wrong length, strings, nan and inf, a required
parameter no column fills, a training-only TRL argument without a default, a positional-only signature.
Then `grpokit rewards score` on module:fn and FILE.py:fn, and the names in `recipe check` and the report.
"""
from __future__ import annotations

import json

import pytest
import yaml
from conftest import DEADLINE_SLACK_S, write_jsonl

from grpokit.cli import main

FUNCTIONS = '''
import math


def no_kwargs(completions):
    return [1.0 if c else 0.0 for c in completions]


def with_limit(completions, answer, limit=100, **kwargs):
    return [1.0 if len(c) < limit and c.endswith(str(a)) else 0.0 for c, a in zip(completions, answer)]


def splits(prompts, completions, **kwargs):
    return [float(c.split(":")[1]) for c in completions]


def scalar(completions, **kwargs):
    return 1.0


def one_score(completions, **kwargs):
    return [1.0]


def strings(completions, **kwargs):
    return ["1" for _ in completions]


def nans(completions, **kwargs):
    return [math.nan for _ in completions]


def infs(completions, **kwargs):
    return [math.inf if not c else 0.0 for c in completions]


def needs_gold(completions, gold):
    return [0.0 for _ in completions]


def needs_state(completions, trainer_state):
    return [float(trainer_state.global_step) for _ in completions]


def positional(completions, /):
    return [0.0 for _ in completions]


def kwarg_named_answer(completions, answer=None, **kwargs):
    return [0.0 for _ in completions]


def seen(prompts, completions, completion_ids, answer, trainer_state=None, log_metric=None, **kwargs):
    """Records what TRL's arguments looked like."""
    SEEN.update(prompts=prompts, completions=completions, ids=completion_ids, answer=answer,
                state=trainer_state, columns=sorted(kwargs))
    return [0.0 for _ in completions]


SEEN = {}


def exits(completions, **kwargs):
    import sys
    sys.exit(0)


def interrupts(completions, **kwargs):
    raise KeyboardInterrupt


def endless(completions, **kwargs):
    while True:
        yield 1.0


def huge(completions, **kwargs):
    return [10 ** 400 for _ in completions]


SLEPT = []  # each call's batch size


def sleeps(completions, **kwargs):
    import time
    SLEPT.append(len(completions))
    time.sleep(60)
    return [0.0 for _ in completions]


def clobbers(completions, answer, **kwargs):
    answer[:] = ["clobbered"] * len(answer)
    return [0.0 for _ in completions]


def reads_gold(completions, answer, **kwargs):
    SEEN["gold"] = list(answer)
    return [0.0 for _ in completions]


def key_error_on_some(completions, answer, **kwargs):
    return [{"1": 1.0, "2": 0.0}[a] for a in answer]


def second_ctrl_c(completions, **kwargs):
    import signal
    STOP._handle(signal.SIGINT, None)  # grpokit's own handler, as a second Ctrl-C in training runs it
    STOP._handle(signal.SIGINT, None)


STOP = None
'''


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)  # another test's module of that name
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_rewards.py").write_text(FUNCTIONS)
    write_jsonl(tmp_path / "train.jsonl", [{"question": f"{i} + 1 = ?", "answer": str(i + 1), "level": i}
                                           for i in range(6)])
    yield tmp_path
    import sys

    sys.modules.pop("my_rewards", None)  # each test imports the module afresh


def _recipe(folder, entry, data="train.jsonl"):
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": data, "eval_fraction": 0.0, "template": "plain_en"},
                                    "rewards": [entry]}))
    return path


BAD = [
    # (id, reward entry, where, what, fix)
    ("misspelt param swallowed by **kwargs", {"name": "my_rewards:with_limit", "params": {"limt": 150}},
     "rewards.0.params.limt", "with_limit() has no parameter 'limt' (it takes **kwargs", "did you mean 'limit'?"),
    ("raises on real rows, with its line", {"name": "my_rewards:splits"}, "rewards.0.name",
     "splits() raised IndexError: list index out of range (my_rewards.py:", "for any completion text"),
    ("returns a scalar", {"name": "my_rewards:scalar"}, "rewards.0.name", "scalar() returned float 1.0, not a list",
     "return a list"),
    ("wrong length", {"name": "my_rewards:one_score"}, "rewards.0.name", "returned 1 score(s) for 8 completions",
     "exactly one score per completion"),
    ("strings", {"name": "my_rewards:strings"}, "rewards.0.name", "returned str '1' for completion 0, not a number",
     "return a float"),
    ("nan", {"name": "my_rewards:nans"}, "rewards.0.name", "nans() returned nan for completion 0", "finite number"),
    ("inf on the empty completion", {"path": "my_rewards.py", "function": "infs"}, "rewards.0.path",
     "infs() returned inf for completion 1 ('')", "finite number"),
    ("a required parameter no column fills", {"name": "my_rewards:needs_gold"}, "rewards.0.name",
     "needs_gold() requires `gold`, which is neither a dataset column (the rows have: answer, level, question)",
     "give it a default"),
    ("a training-only TRL argument without a default", {"name": "my_rewards:needs_state"}, "rewards.0.name",
     "requires `trainer_state`, which TRL passes in training only", "trainer_state=None"),
    ("positional-only", {"name": "my_rewards:positional"}, "rewards.0.name", "takes `completions` positionally only",
     "remove the `/`"),
    # issue 34 item 5: user code is contained, and the errors name the function (module:function, file:line)
    ("sys.exit(0)", {"name": "my_rewards:exits"}, "rewards.0.name", "my_rewards:exits (my_rewards.py:",
     "never exit"),
    ("KeyboardInterrupt", {"name": "my_rewards:interrupts"}, "rewards.0.name",
     "my_rewards:interrupts (my_rewards.py:", "do not raise KeyboardInterrupt"),
    ("an endless generator", {"name": "my_rewards:endless"}, "rewards.0.name",
     "endless() returned more than 8 score(s) (an endless iterator?) for 8 completions [my_rewards:endless",
     "exactly one score per completion"),
    ("10**400", {"name": "my_rewards:huge"}, "rewards.0.name",
     "huge() returned int of about 400 digits for completion 0, a number too large for a float [my_rewards:huge",
     "return a float"),
    ("a call past its timeout_s", {"name": "my_rewards:sleeps", "timeout_s": 1}, "rewards.0.name",
     "my_rewards:sleeps (my_rewards.py:", "raise timeout_s"),
    ("timeout_s on a built-in", {"name": "format", "timeout_s": 5}, "rewards.0.timeout_s",
     "timeout_s is for your own reward functions", "code_tests params.timeout_s"),
    ("a param that shadows a column", {"name": "my_rewards:kwarg_named_answer", "params": {"answer": "7"}},
     "rewards.0.params.answer", "param 'answer' would replace a dataset column", "rename the parameter"),
]


@pytest.mark.parametrize("entry, where, what, fix", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_recipe_check_reports_a_bad_own_reward_before_any_model_loads(folder, capsys, entry, where, what, fix):
    assert main(["recipe", "check", str(_recipe(folder, entry))]) == 2
    err = capsys.readouterr().err
    assert f"{where}: " in err and what in err and "fix: " in err and fix in err, err
    assert "Traceback" not in err


def test_a_function_without_kwargs_gets_only_what_it_names(folder, capsys):
    # `def no_kwargs(completions)` used to pass every check and fail at step 0 (prompts= was always passed).
    assert main(["recipe", "check", str(_recipe(folder, {"name": "my_rewards:no_kwargs"}))]) == 0
    from grpokit.recipe import load_recipe
    from grpokit.task import Task

    fn = Task.from_recipe(load_recipe(_recipe(folder, {"name": "my_rewards:no_kwargs"}))).rewards[0].fn
    # called exactly as TRL 1.16's _calculate_rewards calls a reward function
    assert fn(prompts=["p", "p"], completions=["a", ""], completion_ids=[[1], []], answer=["1", "1"],
              trainer_state=object(), log_extra=lambda *a: None, log_metric=lambda *a: None) == [1.0, 0.0]


def test_the_trial_call_passes_trls_real_arguments(folder):
    import my_rewards

    from grpokit.recipe import load_recipe

    load_recipe(_recipe(folder, {"name": "my_rewards:seen"}))
    seen = my_rewards.SEEN
    assert len(seen["completions"]) == 8 and seen["completions"][:2] == ["Final answer: 1", ""]  # 4 rows x 2
    assert seen["answer"][:2] == ["1", "1"] and seen["columns"] == ["level", "log_extra", "question"]  # all of them
    assert all(isinstance(i, list) and all(isinstance(t, int) for t in i) for i in seen["ids"])
    assert seen["state"].global_step == 0 and "### Question\n0 + 1 = ?" in seen["prompts"][0]  # plain_en


def test_a_hub_dataset_notes_that_the_reward_was_not_called(folder, capsys):
    path = _recipe(folder, {"name": "my_rewards:no_kwargs"}, data="hf:openai/gsm8k")
    assert main(["recipe", "check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "rewards.0 (my_rewards:no_kwargs): not called on rows before training" in err
    assert "grpokit rewards score --reward my_rewards:no_kwargs" in err


SCORE = [
    # (id, --reward, extra args, exit code, in stdout or stderr)
    ("module:function", "my_rewards:with_limit", [], 0, '{"reward": 1.0}'),
    ("file.py:function", "{folder}/my_rewards.py:with_limit", ["--param", "limit=3"], 0, '{"reward": 0.0}'),
    ("a misspelt --param", "my_rewards:with_limit", ["--param", "limt=3"], 2, "did you mean 'limit'?"),
    ("a column the rows lack", "my_rewards:needs_gold", [], 2, "row has no 'gold' column(s), which the reward reads"),
    ("raising rows are reported, not zeroed", "my_rewards:splits", [], 1, '"error": "IndexError'),
    ("an unknown built-in still lists the rewards", "nosuch", [], 2, "your own function as module:function"),
]


@pytest.mark.parametrize("reward, extra, code, expected", [c[1:] for c in SCORE], ids=[c[0] for c in SCORE])
def test_rewards_score_takes_your_own_function(folder, monkeypatch, capsys, reward, extra, code, expected):
    monkeypatch.chdir(folder)
    rows = write_jsonl(folder / "rows.jsonl", [{"completion": "so 12", "answer": "12"},
                                               {"completion": "Final answer: 3", "answer": "4"}])
    argv = ["rewards", "score", "--reward", reward.format(folder=folder), "--input", str(rows), *extra]
    assert main(argv) == code
    out = capsys.readouterr()
    assert expected in out.out + out.err and "Traceback" not in out.err


def test_recipe_check_names_own_rewards_by_module_and_function(folder, capsys):
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "train.jsonl", "eval_fraction": 0.0, "template": "plain_en"},
                                    "rewards": [{"path": "my_rewards.py", "function": "no_kwargs"},
                                                {"name": "my_rewards.with_limit", "role": "shaping", "weight": 0.5},
                                                {"name": "format", "weight": 0.2}]}))
    assert main(["recipe", "check", str(path)]) == 0
    out = capsys.readouterr()
    assert ("rewards: my_rewards.py:no_kwargs (own, correctness) x1, my_rewards:with_limit (own, shaping) x0.5, "
            "format (format) x0.2") in out.err
    printed = yaml.safe_load(out.out)
    assert printed["rewards"][0] == {"path": "my_rewards.py", "function": "no_kwargs", "weight": 1.0, "params": {}}
    assert "name: null" not in out.out


def test_the_report_header_names_own_rewards(tmp_path, capsys):
    from conftest import grpokit_run

    run = grpokit_run(tmp_path / "run")
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"name": "default"}, "rewards": [
        {"name": None, "path": "/somewhere/my_rewards.py", "function": "dollar_answer", "weight": 1.0},
        {"name": "format", "weight": 0.2}]}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    assert main(["report", str(run)]) == 0
    page = (run / "report" / "report.html").read_text(encoding="utf-8")
    assert "my_rewards.py:dollar_answer ×1.0, format ×0.2" in page and "None ×" not in page


# ---------------------------------------------------------------- user code is contained
def _training_fns(folder, *entries):
    """The rewards as training builds them (grpokit.rewards.build_own), without the recipe check's trial call."""
    from grpokit.recipe import RewardConfig
    from grpokit.rewards import build_own

    return [build_own(RewardConfig(**e), folder, f"rewards.{i}") for i, e in enumerate(entries)]


def test_a_reward_that_changes_a_column_in_place_does_not_change_what_the_next_one_reads(folder):
    import my_rewards

    clobber, read = _training_fns(folder, {"name": "my_rewards:clobbers"}, {"name": "my_rewards:reads_gold"})
    kwargs = {"prompts": ["p", "p"], "completions": ["a", "b"], "answer": ["1", "2"]}  # TRL hands each the same lists
    clobber(**kwargs)
    read(**kwargs)
    assert my_rewards.SEEN["gold"] == ["1", "2"] and kwargs["answer"] == ["1", "2"]


def test_a_hanging_trial_call_is_stopped_with_the_functions_name(folder, capsys):
    import time

    start = time.monotonic()
    assert main(["recipe", "check", str(_recipe(folder, {"name": "my_rewards:sleeps", "timeout_s": 1}))]) == 2
    assert time.monotonic() - start < DEADLINE_SLACK_S  # stopped at its 1 s, not after the 60 s sleep
    err = capsys.readouterr().err
    assert "ran past its time limit of 1 s on 8 completion(s) and was stopped" in err and "Traceback" not in err


def test_in_training_a_deadline_fails_the_whole_batch_at_once_naming_the_function(folder):
    import my_rewards

    (fn,) = _training_fns(folder, {"name": "my_rewards:sleeps", "timeout_s": 1})
    with pytest.raises(RuntimeError, match=r"my_rewards:sleeps \(my_rewards.py:\d+\) ran past its time limit of 1 s "
                       "on 3 completion"):
        fn(prompts=["p"] * 3, completions=["a", "b", "c"], answer=["1", "2", "3"])
    assert my_rewards.SLEPT == [3]  # called once on the batch, not re-scored row by row (a deadline per row)


@pytest.mark.parametrize("function, message", [
    ("exits", "called sys.exit(0)"), ("endless", "an endless iterator?"), ("huge", "too large for a float")])
def test_in_training_exits_generators_and_huge_ints_are_errors_naming_the_function(folder, function, message):
    (fn,) = _training_fns(folder, {"name": f"my_rewards:{function}"})
    with pytest.raises(RuntimeError, match="raised on every completion") as caught:
        fn(prompts=["p", "p"], completions=["a", "b"], answer=["1", "2"])
    assert message in str(caught.value) and f"my_rewards:{function}" in str(caught.value)


def test_a_second_ctrl_c_in_training_still_stops_the_run(folder):
    import my_rewards

    from grpokit.training.callbacks import GracefulStop

    my_rewards.STOP = GracefulStop()
    (fn,) = _training_fns(folder, {"name": "my_rewards:second_ctrl_c"})
    with pytest.raises(KeyboardInterrupt):
        fn(prompts=["p"], completions=["a"], answer=["1"])


def test_rewards_score_stops_a_hanging_function_and_names_it(folder, monkeypatch, capsys):
    monkeypatch.chdir(folder)
    rows = write_jsonl(folder / "rows.jsonl", [{"completion": "a"}, {"completion": "b"}])
    assert main(["rewards", "score", "--reward", "my_rewards:sleeps", "--input", str(rows), "--timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert "rows.jsonl row 1: my_rewards:sleeps (my_rewards.py:" in err and "raise --timeout" in err


def test_rewards_score_reports_an_exit_as_the_rows_error(folder, monkeypatch, capsys):
    monkeypatch.chdir(folder)
    rows = write_jsonl(folder / "rows.jsonl", [{"completion": "a"}])
    assert main(["rewards", "score", "--reward", "my_rewards:exits", "--input", str(rows)]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["error"].startswith("my_rewards:exits (my_rewards.py:")


def test_run_json_keeps_the_traceback_into_the_users_file_and_line(folder, tmp_path):
    # issue 35 item 1 (b): a reward raising on every row used to leave a traceback that stopped at grpokit's wrapper.
    from grpokit.run import RunDir
    from grpokit.run.safety import fail_run

    (fn,) = _training_fns(folder, {"name": "my_rewards:key_error_on_some"})
    with pytest.raises(RuntimeError) as caught:
        fn(prompts=["p"], completions=["a"], answer=["7"])
    assert "row 0: KeyError: '7' (my_rewards.py:" in str(caught.value)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    fail_run(run, {}, caught.value, 3)
    error = json.loads((run.path / "run.json").read_text())["error"]
    line = next(i for i, t in enumerate(FUNCTIONS.splitlines(), 1) if '{"1": 1.0, "2": 0.0}[a]' in t)
    assert f'my_rewards.py", line {line}, in ' in error["traceback"]


def test_off_the_main_thread_a_deadline_still_returns_control():
    """Where no signal can reach the call (another thread), it runs in a daemon thread abandoned at the deadline."""
    import threading
    import time

    from grpokit.rewards.guard import OwnRewardTimeout, guarded_call

    def sleeps(completions):
        time.sleep(30)

    caught = []

    def run():
        try:
            guarded_call(sleeps, lambda: sleeps(["a"]), 1, 0.5)
        except OwnRewardTimeout as e:
            caught.append(str(e))

    start = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(20)
    assert time.monotonic() - start < DEADLINE_SLACK_S and caught and "ran past its time limit of 0.5 s" in caught[0]


def test_the_deadline_leaves_sigalrm_to_the_users_code(folder):
    """math-verify's own timeout uses SIGALRM: a reward using it keeps working under grpokit's deadline."""
    import signal

    from grpokit.rewards.guard import guarded_call

    def uses_alarm(completions):
        fired = []
        previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        import time

        time.sleep(0.2)
        signal.signal(signal.SIGALRM, previous)
        return [float(len(fired))]

    assert guarded_call(uses_alarm, lambda: uses_alarm(["a"]), 1, 5.0)[1] == [1.0]
