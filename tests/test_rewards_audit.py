"""The reward audit: a sound reward passes; each known loophole is caught by name."""
from __future__ import annotations

import pytest

from grpokit.audit.rewards import audit_rewards
from grpokit.families.answer_lines import TRICKS
from grpokit.rewards.registry import RewardFunction
from grpokit.rewards.registry import build_reward as _build_builtin

ROWS = [
    {"question": "Natalia sold clips to 48 friends in April and half as many in May. How many in total?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"},
    {"question": "小明有 3 个苹果，又买了 36 个，一共有几个？", "answer": "39"},
    {"question": "What is 1.5 + 1?", "answer": "2.5"},
    {"question": "Name the capital of France.", "answer": "Paris"},  # not numeric: skipped
]


def _flagged(rewards, rows=ROWS):
    return {t.name for t in audit_rewards(rewards, rows).flagged}


def _naive_substring(completions, answer, **_):
    # The classic broken check: the gold string appears somewhere in the completion.
    return [1.0 if str(a).split("####")[-1].strip() in c else 0.0 for c, a in zip(completions, answer)]


def _naive_last_number(completions, answer, **_):
    # Another classic: the last number in the text, wherever it is (think blocks, hedges, padding...).
    import re

    out = []
    for c, a in zip(completions, answer):
        nums = re.findall(r"\d+(?:\.\d+)?", c)
        out.append(1.0 if nums and float(nums[-1]) == float(str(a).split("####")[-1]) else 0.0)
    return out


def _marker_only_format(completions, **_):
    # The article's loophole: any marker line earns the bonus ("最终答案：不知道" included).
    return [1.0 if ("Final answer:" in c or "最终答案" in c) else 0.0 for c in completions]


BROKEN = {"_naive_substring": _naive_substring, "_naive_last_number": _naive_last_number,
          "_marker_only_format": _marker_only_format}


def build_reward(name, params=None):
    # The broken test rewards are plain scorers wrapped like any reward; no global registry to patch.
    return RewardFunction(name, BROKEN[name], {}) if name in BROKEN else _build_builtin(name, params)


def test_sound_recipe_passes():
    # 0.8 correctness + 0.2 format (the Qwen3-0.6B-Base article) plus the length safeguards.
    rewards = [(build_reward("math_correctness"), 0.8), (build_reward("format"), 0.2),
               (build_reward("length", {"max_completion_length": 512}), 1.0)]
    result = audit_rewards(rewards, ROWS)
    assert result.flagged == [] and result.ok
    assert result.rows == 3 and result.skipped_rows == 1
    assert result.errors == {"math_correctness": 0, "format": 0, "length": 0}
    assert "no trick scored" in result.table()


def test_thinking_mode_recipe_passes():
    rewards = [(build_reward("math_correctness"), 0.8), (build_reward("format", {"require_think": True}), 0.2)]
    assert audit_rewards(rewards, ROWS).ok


# (rewards, tricks that must be flagged, tricks that must not)
CASES = [
    # substring matching credits hedges, think-only answers, padding and numbers containing the gold
    ([("_naive_substring", 1.0)], {"hedge_or", "answer_only_in_think", "long_padding", "contains_gold", "negated"}, set()),
    # "last number" credits ranges, repeated markers and unclosed think
    ([("_naive_last_number", 1.0)], {"unclosed_think", "answer_only_in_think"}, set()),
    # the article's marker-only format bonus: refusal with the marker beats an honest wrong answer
    ([("math_correctness", 0.8), ("_marker_only_format", 0.2)], {"refusal", "refusal_undetermined", "hedge_or", "marker_no_reasoning"}, {"empty"}),
    # correctness alone cannot tell a refusal from an honest attempt: everything ties at 0
    ([("math_correctness", 1.0)], {"refusal", "empty", "garbage_then_marker"}, set()),
    # format without a reasoning requirement lets a bare guessed answer line tie with honest work
    ([("math_correctness", 0.8), ("format", 0.2)], set(), {"marker_no_reasoning"}),
]


@pytest.mark.parametrize("spec,must,must_not", CASES, ids=[str(i) for i in range(len(CASES))])
def test_loopholes_are_named(spec, must, must_not):
    rewards = [(build_reward(name), w) for name, w in spec]
    flagged = _flagged(rewards)
    assert must <= flagged, f"missing {must - flagged}"
    assert not (must_not & flagged)


def test_min_reasoning_zero_lets_bare_guess_tie():
    rewards = [(build_reward("math_correctness"), 0.8), (build_reward("format", {"min_reasoning_lines": 0}), 0.2)]
    assert "marker_no_reasoning" in _flagged(rewards)


def test_table_lists_flagged_tricks():
    result = audit_rewards([(build_reward("_naive_substring"), 1.0)], ROWS)
    table = result.table()
    assert not result.ok
    assert "hedge_or" in table and "trick mean" in table


def test_reward_blind_to_correctness_is_reported():
    # format alone scores right and wrong answers alike: the audit says the reward cannot tell them apart.
    result = audit_rewards([(build_reward("format"), 1.0)], ROWS)
    assert result.right_not_preferred == 3 and not result.ok
    assert "does not beat the honest wrong one" in result.table()


def test_custom_marker_is_used_for_the_honest_answers():
    # The audit writes its completions with the recipe's own marker, so right still beats wrong.
    result = audit_rewards([(build_reward("math_correctness", {"markers": ["ANSWER>>"]}), 1.0)], ROWS)
    assert result.right_not_preferred == 0


def test_every_trick_applies_to_a_two_digit_gold():
    result = audit_rewards([(build_reward("math_correctness"), 1.0)], [ROWS[1]], prompt_of=_demo_prompt)
    assert {t.name for t in result.tricks} == set(TRICKS)


def _demo_prompt(row):  # the demo's shape: a system prompt with one worked example, then the question
    return [{"role": "system", "content": "Answer in two lines. Example:\n12 + 7 = 19\nFinal answer: 19"},
            {"role": "user", "content": row["question"]}]


def test_copying_the_prompts_example_is_caught_and_the_format_reward_refuses_it():
    def rewards(**fmt):
        return [(build_reward("math_correctness"), 1.0), (build_reward("format", {"min_reasoning_lines": 1, **fmt}), 0.2)]

    loose = audit_rewards(rewards(refuse_prompt_copies=False), ROWS, prompt_of=_demo_prompt)
    assert "prompt_example_copied" in {t.name for t in loose.flagged}
    copied = next(t for t in loose.flagged if t.name == "prompt_example_copied")
    assert copied.example == "12 + 7 = 19\\nFinal answer: 19" and copied.rows == 3
    assert audit_rewards(rewards(), ROWS, prompt_of=_demo_prompt).ok  # the default refuses the copy
    # without a prompt the trick cannot be built: skipped, not reported as passed
    assert "prompt_example_copied" not in {t.name for t in audit_rewards(rewards(), ROWS).tricks}


def test_the_example_is_not_a_trick_where_it_answers_the_row():
    row = {"question": "What is 12 + 7?", "answer": "19"}
    result = audit_rewards([(build_reward("math_correctness"), 1.0)], [row], prompt_of=_demo_prompt)
    assert "prompt_example_copied" not in {t.name for t in result.tricks}


def test_no_numeric_rows_is_an_error():
    with pytest.raises(ValueError, match="no trick of the audit fits this task"):
        audit_rewards([(build_reward("math_correctness"), 1.0)], [ROWS[3]])


# ---------------------------------------------------------------- an audit that says what it saw
def _raises_on_hedges(completions, **_):
    return [{"no": 0.0}["or" if " or " in c else "no"] for c in completions]


def test_reward_errors_are_findings_counted_with_the_first_traceback():
    rewards = [(build_reward("math_correctness"), 0.8), (build_reward("format"), 0.2),
               (RewardFunction("raises_on_hedges", _raises_on_hedges, {}), 0.1)]
    result = audit_rewards(rewards, ROWS)
    assert not result.ok and result.errors["raises_on_hedges"] > 0 and not result.flagged
    table = result.table()
    assert (f"reward 'raises_on_hedges' raised on {result.errors['raises_on_hedges']} of {result.completions} "
            "completion(s)") in table
    assert "see the log" not in table
    assert "test_rewards_audit.py\", line" in table and "in _raises_on_hedges" in table and "KeyError: 'or'" in table
    assert "fix: make raises_on_hedges return a score (or None) for every completion" in table


def test_a_flagged_trick_names_the_reward_that_pays_for_it_and_the_fix():
    rewards = [(build_reward("math_correctness"), 0.8), (build_reward("format"), 0.2),
               (build_reward("_naive_substring"), 0.3)]
    result = audit_rewards(rewards, ROWS)
    hedge = next(t for t in result.flagged if t.name == "hedge_or")
    (name, trick, wrong), *_ = hedge.culprits()
    assert name == "_naive_substring" and trick == pytest.approx(0.3) and wrong == pytest.approx(0.0)
    table = result.table()
    assert "paid by _naive_substring: up to +0.30 per row over an honest wrong answer, for " in table
    assert "fix: make _naive_substring score these completions no higher than an honest wrong answer" in table
    assert "or lower its weight (0.3)" in table
    assert "paid by math_correctness" not in table and "paid by format" not in table


def test_rewards_audit_and_train_print_the_same_findings(tmp_path, monkeypatch, capsys):
    import yaml
    from conftest import write_jsonl

    from grpokit.cli import main
    from grpokit.cli.train import print_audit_warnings
    from grpokit.recipe import load_recipe

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "audit_own", raising=False)
    (tmp_path / "audit_own.py").write_text(
        "def flaky(completions, **kwargs):\n"
        "    return [{'yes': 1.0}['no' if ' or ' in c else 'yes'] for c in completions]\n")
    write_jsonl(tmp_path / "rows.jsonl", [{"question": f"What is {i} + 5?", "answer": str(i + 5)} for i in range(8)])
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "rows.jsonl", "template": "plain_en"}, "rewards": [
        {"name": "math_correctness", "weight": 0.8}, {"name": "format", "weight": 0.2},
        {"name": "audit_own:flaky", "role": "shaping", "weight": 0.1}]}))
    assert main(["rewards", "audit", str(path)]) == 1  # the errors are findings: non-zero exit
    audit = capsys.readouterr().out
    assert "reward 'flaky' raised on 14 of" in audit and "audit_own.py\", line 2, in" in audit
    print_audit_warnings(load_recipe(path))
    train = capsys.readouterr().out
    assert "reward audit: reward 'flaky' raised on 14 of" in train
    assert "{'yes': 1.0}['no' if ' or ' in c else 'yes']" in train  # the traceback's code line, not eaten as markup
