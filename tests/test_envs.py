"""Tool tasks: row rules, tool rewards, the calculator and repofix environments, the tool-hack audit,
the fallback tool chat template. Fast: no model except the embedded tokenizer."""
from __future__ import annotations

import copy
import json

import pytest
from conftest import REPO, write_jsonl

from grpokit.envs.calculator import CalculatorEnv
from grpokit.envs.registry import ENVIRONMENTS, get_env
from grpokit.envs.rows import check_tool_row, prepare_rows
from grpokit.envs.training import tool_schemas
from grpokit.rewards.registry import build_reward

TOOLS_DIR = REPO / "src" / "grpokit" / "datasets" / "tools"


def _rows(name):
    return [json.loads(line) for line in (TOOLS_DIR / f"{name}.jsonl").read_text().splitlines()]


CALC_ROW = _rows("calculator")[0]
REPO_ROW = _rows("repofix")[0]  # slugify


def _edit(row, **changes):
    out = copy.deepcopy(row)
    for k, v in changes.items():
        if v is ...:
            out.pop(k)
        else:
            out[k] = v
    return out


def _bad_schema(row):
    out = copy.deepcopy(row)
    out["tools"][0]["function"]["parameters"] = {"type": "object", "properties": {"a": {"type": "numbr"}}}
    return out


# ------------------------------------------------------------------ rows
ROW_CASES = [
    (CALC_ROW, None),                                                       # a bundled row is valid
    (REPO_ROW, None),
    (_edit(CALC_ROW, expected_calls=[]), None),                             # rightly calls no tool
    (_edit(CALC_ROW, expected_calls=...), None),                            # expected calls are optional
    (_edit(CALC_ROW, tools="add"), "tools must be a list"),
    (_edit(CALC_ROW, tools=[{"type": "function"}]), "not a function tool definition"),
    (_bad_schema(CALC_ROW), "not a valid JSON schema"),                     # jsonschema's meta-schema check
    (_edit(CALC_ROW, tools=CALC_ROW["tools"] + CALC_ROW["tools"][:1]), "defined twice"),
    (_edit(CALC_ROW, expected_calls=[{"name": "power", "arguments": {}}]), "which the row's tools do not define"),
    (_edit(CALC_ROW, expected_calls=[{"name": "add", "arguments": {"a": "x", "b": 1}}]), "not valid for add"),
    (_edit(CALC_ROW, expected_calls=[{"name": "add", "arguments": {"a": 1}}]), "not valid for add"),  # missing b
    (_edit(CALC_ROW, goal={"kind": "vibes"}), "goal must be an object"),
    (_edit(CALC_ROW, goal=...), "goal must be an object"),
    (_edit(REPO_ROW, goal={"kind": "hidden_tests", "repo": "nope"}), "no bundled repository"),
    (_edit(CALC_ROW, env="repofix"), "environment 'repofix' has"),          # tools must be the env's tools
    (_edit(CALC_ROW, env="shell"), "unknown environment"),
]


@pytest.mark.parametrize("row,error", ROW_CASES)
def test_tool_row_rules(row, error):
    problems = check_tool_row(row, "row 1")
    if error is None:
        assert problems == []
    else:
        assert problems and error in str(problems[0]), problems


def test_data_check_reports_tool_row_problems(tmp_path):
    from grpokit.data.io import check_file

    path = write_jsonl(tmp_path / "t.jsonl", [CALC_ROW, _edit(CALC_ROW, question="other",
                                                              expected_calls=[{"name": "pow", "arguments": {}}])])
    report = check_file(path)
    assert report.unusable == 1 and "pow" in str(report.errors[0]) and len(report.rows) == 1


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
def test_bundled_rows_carry_the_environments_tools(name):
    # one source of truth: the environment's methods; rows copy their schemas (every row carries the tools)
    schemas = tool_schemas(get_env(name).cls())
    rows = _rows(name)
    assert rows and all(r["tools"] == schemas for r in rows)
    assert all(check_tool_row(r, f"{name} {i}") == [] for i, r in enumerate(rows))


# ------------------------------------------------------------------ rewards
def _call(name, **args):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                                                                "function": {"name": name, "arguments": args}}]}


def _tool(content):
    return {"role": "tool", "name": "x", "content": str(content)}


def _say(text):
    return {"role": "assistant", "content": text}


A, B = CALC_ROW["expected_calls"][0]["arguments"]["a"], CALC_ROW["expected_calls"][0]["arguments"]["b"]
RIGHT = CALC_ROW["expected_calls"][0]["name"]
WRONG = "multiply"
ANSWER = CALC_ROW["answer"]

REWARD_CASES = [
    # (reward, episode, expected_calls override or None, score)
    ("tool_choice", [_call(RIGHT, a=A, b=B), _tool(ANSWER), _say(f"Final answer: {ANSWER}")], None, 1.0),
    ("tool_choice", [_call(WRONG, a=A, b=B), _say("Final answer: 1")], None, 0.0),          # wrong tool
    ("tool_choice", [_call(RIGHT, a=A, b=B), _call(WRONG, a=A, b=B)], None, 0.5),          # one extra tool
    ("tool_choice", [_say("Final answer: 3")], [], 1.0),                                    # rightly none
    ("tool_choice", [_call(RIGHT, a=A, b=B)], [], 0.0),                                     # should not call
    ("tool_choice", [_say("hi")], ..., None),                                               # no expected calls
    ("tool_args", [_call(RIGHT, a=A, b=B)], None, 1.0),
    ("tool_args", [_call(RIGHT, a=A, b="x"), _call(RIGHT, a=A, b=B)], None, 0.5),          # one bad argument
    ("tool_args", [_call(RIGHT, a=A)], None, 0.0),                                          # missing argument
    ("tool_args", [_call("power", a=A, b=B)], None, 0.0),                                   # undefined tool
    ("tool_args", [_call(RIGHT, a=A, b=B, c=1)], None, 0.0),                                # unnamed argument
    ("tool_args", [_say("Final answer: 3")], None, None),                                   # no call: n/a
    ("task_success", [_call(RIGHT, a=A, b=B), _tool(ANSWER), _say(f"Final answer: {ANSWER}")], None, 1.0),
    ("task_success", [_say(f"Final answer: {ANSWER}")], None, 1.0),                         # no tool needed
    ("task_success", [_say(f"Final answer: {ANSWER}"), _call(RIGHT, a=A, b=B), _say("no")], None, 0.0),  # last
    ("tool_shaping", [_call(RIGHT, a=A, b=B), _call(RIGHT, a=A, b=B)], None, 0.1),         # capped at expected
    ("tool_shaping", [_call(RIGHT, a=B, b=A)], None, 0.0),                                  # wrong arguments
]


@pytest.mark.parametrize("name,episode,expected,want", REWARD_CASES)
def test_tool_rewards(name, episode, expected, want):
    row = CALC_ROW if expected is None else (_edit(CALC_ROW, expected_calls=...) if expected is ... else
                                             _edit(CALC_ROW, expected_calls=expected))
    row = prepare_rows([row])[0]  # as the training dataset stores it (JSON strings)
    columns = {k: [v] for k, v in row.items()}
    (score,) = build_reward(name)(prompts=[None], completions=[episode], **columns)
    assert score == pytest.approx(want) if want is not None else score is None


# ------------------------------------------------------------------ calculator
CALC_CASES = [("add", 2, 3, 5), ("subtract", 2, 3, -1), ("multiply", 4, 2.5, 10), ("divide", 7, 2, 3.5)]


@pytest.mark.parametrize("tool,a,b,want", CALC_CASES)
def test_calculator_tools(tool, a, b, want):
    env = CalculatorEnv()
    assert env.reset(**CALC_ROW) is None
    out = getattr(env, tool)(a, b)
    assert out == want and env.calls == [(tool, {"a": a, "b": b})]
    assert isinstance(getattr(env, "add")(2.0, 3.0), int)  # integral results print as "5", not "5.0"


def test_calculator_division_by_zero_raises():  # TRL turns it into an {"error": ...} tool result
    with pytest.raises(ValueError, match="division by zero"):
        CalculatorEnv().divide(1, 0)


# ------------------------------------------------------------------ repofix
def _repofix(**kw):
    from grpokit.envs.repofix import RepoFixEnv

    env = RepoFixEnv(**kw)
    env.reset(**prepare_rows([REPO_ROW])[0])
    return env


FIXED = 'def slugify(title):\n    return "-".join(title.casefold().split())\n'


def test_repofix_tools_and_hidden_score():
    env = _repofix()
    assert env.list_files().splitlines() == ["tests.py", "textutils.py"]
    assert "def slugify" in env.read_file("textutils.py")
    assert env.run_tests().startswith("1/2 tests passed")   # sandboxed visible tests
    before = env._goal_score()
    assert 0 < before < 1                                  # the bug fails some hidden tests, not all
    env.write_file("textutils.py", FIXED)
    assert env.run_tests().startswith("2/2 tests passed")
    assert env._goal_score() == 1.0


def test_repofix_episodes_are_isolated():
    a, b = _repofix(), _repofix()
    a.write_file("textutils.py", FIXED)
    assert a.root != b.root and "casefold" not in b.read_file("textutils.py")
    old = a.root
    a.reset(**prepare_rows([REPO_ROW])[0])   # TRL reuses pooled instances: reset gives a fresh copy
    assert not old.exists() and "casefold" not in a.read_file("textutils.py")


PATH_CASES = ["../hidden.json", "/etc/passwd", "sub/../../x.py"]


@pytest.mark.parametrize("path", PATH_CASES)
def test_repofix_refuses_paths_outside_the_project(path):
    env = _repofix()
    with pytest.raises(ValueError, match="outside the project"):
        env.write_file(path, "x")


def test_repofix_step_budget():
    env = _repofix(max_steps=2)
    env.list_files()
    env.list_files()
    with pytest.raises(RuntimeError, match="step budget"):
        env.write_file("textutils.py", FIXED)
    assert env._goal_score() < 1


# ------------------------------------------------------------------ tool-hack audit
@pytest.mark.parametrize("env_name,row,rewards", [
    ("repofix", REPO_ROW, [("task_success", 1.0), ("tool_args", 0.25)]),
    ("calculator", CALC_ROW, [("task_success", 1.0), ("tool_choice", 0.5), ("tool_args", 0.25),
                              ("tool_shaping", 1.0)]),
])
def test_tool_hacks_score_no_more_than_an_honest_failure(env_name, row, rewards):
    from grpokit.audit.tools import audit_tool_hacks, tool_audit_table

    results = audit_tool_hacks(env_name, {}, [(build_reward(n), w) for n, w in rewards], prepare_rows([row]))
    assert len(results) >= 2
    assert all(r.ok for r in results), tool_audit_table(results)


def test_tool_audit_flags_a_reward_that_trusts_the_visible_tests():
    # the audit can fail: a reward reading the workspace's own tests.py is beaten by editing it
    from grpokit.audit.tools import audit_tool_hacks
    from grpokit.envs.repofix import RepoFixEnv

    class Naive:
        def __call__(self, prompts, completions, environments, **_):
            return [float(e.run_tests().startswith(("2/2", "1/1"))) if e.steps < e.max_steps else 0.0
                    for e in environments]

    env_spec = get_env("repofix")
    original = RepoFixEnv.__init__
    try:
        RepoFixEnv.__init__ = lambda self, **kw: original(self, max_steps=50)
        results = audit_tool_hacks(env_spec.name, {}, [(Naive(), 1.0)], prepare_rows([REPO_ROW]))
    finally:
        RepoFixEnv.__init__ = original
    assert {r.case for r in results if not r.ok} >= {"tests_to_assert_true"}


# ------------------------------------------------------------------ chat template
def test_fallback_tool_template_renders_and_parses(tokenizer):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

    from grpokit.envs.chat import ensure_tool_template

    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    assert not supports_tool_calling(tok)                     # SmolLM2's own template drops tools
    ensure_tool_template(tok)
    assert supports_tool_calling(tok) and is_chat_template_prefix_preserving(tok)
    prompt = tok.apply_chat_template([{"role": "user", "content": "2+3?"}], tools=CALC_ROW["tools"],
                                     tokenize=False, add_generation_prompt=True)
    assert '"name": "add"' in prompt and prompt.endswith("<|im_start|>assistant\n")
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>'
    parsed = parse_response(tok, tok(call)["input_ids"], prefix=tok(prompt)["input_ids"])
    assert parsed["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    saved = tok.chat_template
    assert ensure_tool_template(tok).chat_template == saved   # a template with tools is left alone


def test_fallback_refuses_non_chatml_templates(tokenizer):
    from transformers import AutoTokenizer

    from grpokit.envs.chat import ensure_tool_template
    from grpokit.errors import GrpokitError

    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    with pytest.raises(GrpokitError, match="not ChatML"):
        ensure_tool_template(tok)


# ------------------------------------------------------------------ recipes
@pytest.mark.parametrize("recipe", ["smollm2-calculator-tools.yaml", "smollm2-repofix.yaml", "qwen3-4b-tools.yaml"])
def test_tool_recipes_validate_without_a_model(recipe):
    from grpokit.recipe.load import load_recipe

    r = load_recipe(REPO / "recipes" / recipe)
    assert r.env is not None and r.data.template == "chat"


def test_env_recipe_needs_the_chat_template(tmp_path):
    from grpokit.errors import GrpokitError
    from grpokit.recipe.load import load_recipe

    text = (REPO / "recipes" / "smollm2-calculator-tools.yaml").read_text().replace("template: chat",
                                                                                     "template: plain_en")
    (tmp_path / "r.yaml").write_text(text.replace("builtin:tools", str(TOOLS_DIR).replace("\\", "/")))
    with pytest.raises(GrpokitError, match="needs the chat template"):
        load_recipe(tmp_path / "r.yaml")


def test_qwen3_template_is_kept_and_trl_trains_on_its_prefix_preserving_copy(tokenizer):
    # Qwen3's own template carries tools: grpokit keeps it; TRL replaces it for training because it drops
    # earlier think blocks (not prefix-preserving), with the training copy it ships.
    from transformers import AutoTokenizer
    from trl.chat_template_utils import (get_training_chat_template, is_chat_template_prefix_preserving,
                                         qwen3_chat_template)

    from grpokit.envs.chat import ensure_tool_template

    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = qwen3_chat_template
    assert ensure_tool_template(tok).chat_template == qwen3_chat_template
    assert not is_chat_template_prefix_preserving(tok)
    assert "<tool_call>" in get_training_chat_template(tok)
