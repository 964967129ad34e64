"""The reward audit on a text-answer task ("capital of X", an own reward): the text tricks catch a substring
reward, an exact one passes with notes on the right answers it refuses, a normalised one passes clean, and where
no trick fits (no text answers, or a reward that pays no right answer) `rewards audit` and `train` say so alike."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
import yaml
from conftest import write_jsonl

from grpokit.audit import audit_warnings
from grpokit.audit.rewards import HAND_CHECK, NoTricks, audit_rewards
from grpokit.cli import main
from grpokit.recipe import load_recipe
from grpokit.rewards.registry import RewardFunction, build_reward

CAPITALS = [
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Iceland", "Reykjavík"),
    ("Colombia", "Bogotá"),
    ("Japan", "Tokyo"),
    ("Peru", "Lima"),
    ("Kenya", "Nairobi"),
    ("Chile", "Santiago"),
]
ROWS = [{"question": f"What is the capital of {c}?", "answer": a} for c, a in CAPITALS]


def _answer_line(text: str) -> str | None:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].removeprefix("Final answer:").strip() if lines and lines[-1].startswith("Final answer:") else None


def substring(completions, answer, **_):
    # The loose check the issue found paid "Lyon or Paris or Marseille": the gold anywhere on an answer line.
    return [
        1.0 if any(ln.startswith("Final answer:") and a.lower() in ln.lower() for ln in c.splitlines()) else 0.0
        for c, a in zip(completions, answer)
    ]


def exact(completions, answer, **_):
    # The last line, exactly the gold.
    return [1.0 if _answer_line(c) == a else 0.0 for c, a in zip(completions, answer)]


def _norm(s: str) -> str:
    s = "".join(ch for ch in unicodedata.normalize("NFKD", s) if not unicodedata.combining(ch)).casefold()
    return re.sub(r"^the answer is\s+|[.!]$", "", s.strip()).strip()


def normalised(completions, answer, **_):
    # The last line, casefolded, accents and a full stop off.
    return [
        1.0 if (got := _answer_line(c)) is not None and _norm(got) == _norm(a) else 0.0
        for c, a in zip(completions, answer)
    ]


def blind(completions, **_):
    # Reads no gold at all (a reward written for another task): pays nothing, right or wrong.
    return [0.0 for _ in completions]


def _audit(fn, rows=ROWS):
    return audit_rewards([(RewardFunction(fn.__name__, fn, {}), 1.0)], rows)


def test_a_substring_reward_is_caught_by_the_text_tricks():
    result = _audit(substring)
    assert result.what == "text-answer tricks" and result.rows == 8 and not result.ok
    flagged = {t.name for t in result.flagged}
    assert {"hedge_or", "hedge_list", "negated", "marker_repeated", "gold_in_longer_word"} <= flagged
    hedge = next(t for t in result.flagged if t.name == "hedge_or")
    assert hedge.example.endswith(": Berlin or Paris or Rome")  # other rows' capitals as candidates
    assert "paid by substring: up to +1.00 per row over an honest wrong answer" in result.table()


def test_an_exact_reward_pays_no_trick_and_notes_the_right_answers_it_refuses():
    result = _audit(exact)
    assert all(not t.culprits() for t in result.flagged)  # ties at 0 only: no reward pays a trick
    table = result.table()
    assert "\npaid by" not in table and "tied, paid by no reward: 14 trick(s)" in table
    assert "note: a right answer written in other case (PARIS) scores 0.00 against 1.00 on 8/8 rows" in table
    assert "note: a right answer written without its accents (Reykjavík -> Reykjavik) scores 0.00" in table
    assert "normalise in the reward" in table


def test_a_normalised_reward_pays_no_trick_and_no_right_answer_less():
    result = _audit(normalised)
    assert all(not t.culprits() for t in result.flagged) and "note:" not in result.table()


def test_the_format_bonus_pays_no_text_hedge_beside_an_exact_reward():
    # The built-in format reward read numeric lists only: "Berlin, Paris, Rome" and "Berlin/Paris" earned its full
    # bonus. With the answer line refusing text candidates too, no hedge is paid beside an exact reward.
    result = audit_rewards([(RewardFunction(exact.__name__, exact, {}), 1.0), (build_reward("format"), 0.2)], ROWS)
    paid = {t.name for t in result.flagged if t.culprits()}
    assert not paid & {"hedge_or", "hedge_list", "hedge_though", "hedge_slash"}, result.table()


def test_a_reward_that_pays_no_right_answer_gets_a_plain_statement():
    result = _audit(blind)
    assert result.blind and not result.ok
    table = result.table()
    assert "no trick of this audit fits these rewards" in table and HAND_CHECK in table
    assert "trick(s) score" not in table  # no loophole table against a wrong answer the reward cannot tell


def test_too_few_text_answers_is_no_tricks_with_the_check_by_hand():
    with pytest.raises(NoTricks, match="no trick of the audit fits this task") as e:
        _audit(exact, ROWS[:2])
    assert e.value.fix == HAND_CHECK


@pytest.fixture
def capital_recipe(tmp_path, monkeypatch):
    """The issue's case as a user writes it: capitals, an own reward in a module beside the recipe."""

    def make(reward: str, rows=ROWS):
        monkeypatch.chdir(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.delitem(sys.modules, "capital_rewards", raising=False)
        (tmp_path / "capital_rewards.py").write_text(
            "import re, unicodedata\n"
            + "\n".join(__import__("inspect").getsource(f) for f in (_answer_line, substring, exact, blind))
        )
        write_jsonl(tmp_path / "train.jsonl", rows)
        path = tmp_path / "my.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "data": {"train": "train.jsonl", "template": "plain_en"},
                    "rewards": [{"name": f"capital_rewards:{reward}"}],
                }
            )
        )
        return path

    return make


def test_rewards_audit_on_capitals_exits_1_naming_the_reward(capital_recipe, capsys):
    assert main(["rewards", "audit", str(capital_recipe("substring"))]) == 1
    out = capsys.readouterr().out
    assert "reward audit (text-answer tricks) on 8 training row(s)" in out and "hedge_or" in out
    assert "no training row has a numeric gold answer" not in out


def test_train_says_what_the_audit_says_where_no_trick_fits(capital_recipe, capsys):
    path = capital_recipe("exact", ROWS[:2])
    assert main(["rewards", "audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no trick of the audit fits this task" in err and "check it by hand" in err
    warnings = audit_warnings(load_recipe(path))
    assert warnings[0].startswith("reward audit: no trick of the audit fits this task")
    assert HAND_CHECK in warnings[1] and not any("skipped" in w for w in warnings)


def test_train_says_what_the_audit_says_for_a_blind_reward(capital_recipe, capsys):
    path = capital_recipe("blind")
    assert main(["rewards", "audit", str(path)]) == 1
    assert "no trick of this audit fits these rewards" in capsys.readouterr().out
    warnings = audit_warnings(load_recipe(path))
    assert any("no trick of this audit fits these rewards" in w for w in warnings)
    assert any(HAND_CHECK in w for w in warnings)


def test_train_prints_the_notes_on_right_answers_a_strict_reward_refuses(capital_recipe):
    warnings = audit_warnings(load_recipe(capital_recipe("exact")))
    assert (
        "reward audit: note: a right answer written in other case (PARIS) scores 0.00 against 1.00 on 8/8 rows"
        in "\n".join(warnings)
    )
    assert warnings[-1] == "reward audit: `grpokit rewards audit RECIPE` prints the table"
