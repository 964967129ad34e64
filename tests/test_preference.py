"""The preference family: the rule the rankings prefer (direct_answer), the bundled rankings and held-out prompts,
the win rate against the base, and `grpokit demo --task preference` on tiny models (a tiny reward model too)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from grpokit.cli import main
from grpokit.datasets import BUILTIN_DATA
from grpokit.errors import GrpokitError
from grpokit.evaluation.preference import against_base, win_rate
from grpokit.rewards.direct_answer import failed_check

PREFERENCE = BUILTIN_DATA / "preference"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------- the rule
RULE = [
    # (completion, the first check it fails; None: a direct answer)
    ("Rinse the rice until the water runs clear, then cook it.", None),               # brief, finished, direct
    ('"Back on the road by tomorrow."', None),                                         # a closing quote is no sentence
    ("Thanks for the invite! I can't make it this time, but I'll follow up.", None),   # a quoted decline, no refusal
    ("Rinse the rice until the water runs clear, then cook it with", "unfinished"),    # cut off at the length limit
    ("", "unfinished"),                                                                # empty
    (" ".join(["word"] * 30) + ".", "too_long"),                                       # padded past 25 words
    ("Sour. Obviously.", "too_short"),                                                 # two words
    ("Close your eyes. Works for everyone.", "too_short"),                             # fragments: 3 words a sentence
    ("We fix road bikes and city bikes and mountain bikes quickly.", "repetitive"),    # one word three times
    ("As an AI, I cannot really say what would work for you here.", "hedge"),          # a refusal
    ("Sleep is a medical topic, so please ask a doctor about it today.", "hedge"),     # sent elsewhere
    ("Taste is subjective, so any answer from me would be a guess.", "hedge"),         # hedged
    ("Just spend less money every single month, obviously.", "dismissive"),           # a brush-off
    ("In general you can keep the bananas apart from other fruit.", "filler"),         # padding phrase
    ("Basically, put a little oil on the hinge and move the door.", "filler"),         # padding phrase
]


@pytest.mark.parametrize("text,expected", RULE)
def test_the_rule_names_the_first_check_a_reply_fails(text, expected):
    assert failed_check(text) == expected


def test_the_rule_agrees_with_every_bundled_ranking_and_passes_every_reference():
    # The rule writes down what the rankings prefer: their best reply passes, every other one fails, on all 40.
    for row in _jsonl(PREFERENCE / "rankings.jsonl"):
        for c in row["candidates"]:
            assert (failed_check(c["text"]) is None) == (c["rank"] == 1), (row["id"], c)
    for row in _jsonl(PREFERENCE / "heldout.jsonl"):  # the held-out references are the same kind of reply
        assert failed_check(row["answer"]) is None, row


def test_direct_answer_reward_scores_and_explains():
    from grpokit.rewards.registry import build_reward, get_spec

    fn = build_reward("direct_answer", {})
    assert get_spec("direct_answer").role == "format"
    assert fn(prompts=["q", "q"], completions=["Keep a full bottle on your desk and refill it.", "Look it up."]) == [1.0, 0.0]
    assert fn.scorer.explain("Look it up.") == {"reward": 0.0, "reason": "too_short", "words": 3}
    with pytest.raises(ValueError, match="min_words <= max_words"):
        build_reward("direct_answer", {"min_words": 30, "max_words": 10})


# ---------------------------------------------------------------- the bundled data
def test_preference_data_the_prompts_are_the_rankings_and_the_heldout_prompts_are_new():
    rankings = _jsonl(PREFERENCE / "rankings.jsonl")
    prompts = _jsonl(PREFERENCE / "prompts.jsonl")
    heldout = _jsonl(PREFERENCE / "heldout.jsonl")
    # GRPO trains on the ranked prompts, each with its best reply as `answer` (what SFT would imitate).
    assert prompts == [{"question": r["question"], "answer": min(r["candidates"], key=lambda c: c["rank"])["text"]}
                       for r in rankings]
    assert len(rankings) == 40 and len(heldout) == 32
    seen = {r["question"].strip().lower() for r in rankings}
    assert len(seen) == len(rankings) and len({h["question"].strip().lower() for h in heldout}) == len(heldout)
    assert not seen & {h["question"].strip().lower() for h in heldout}  # neither the RM nor GRPO sees them


# ---------------------------------------------------------------- the win rate
WINS = [
    # (trained scores, base scores, expected (wins, ties, losses, win rate); None: no row to compare)
    ([0.9, 0.8, 0.7], [0.1, 0.2, 0.3], (3, 0, 0, 1.0)),               # better on every row
    ([0.1, 0.2], [0.9, 0.8], (0, 0, 2, 0.0)),                         # worse on every row
    ([0.9, 0.4, 0.7], [0.5, 0.4, 0.8], (1, 1, 1, 0.5)),               # a tie counts half
    ([0.5, 0.5], [0.5, 0.5 + 1e-9], (0, 2, 0, 0.5)),                  # one answer scored twice: a tie, not a loss
    ([0.9, None, 0.2], [0.1, 0.3, None], (1, 0, 0, 1.0)),             # rows either side left unscored are left out
    ([None], [0.4], None),                                            # nothing to compare
    ([], [], None),                                                   # no rows
]


@pytest.mark.parametrize("scores,base,expected", WINS)
def test_win_rate_counts_pairs_row_by_row(scores, base, expected):
    got = win_rate(scores, base)
    if expected is None:
        assert got is None
    else:
        wins, ties, losses, rate = expected
        assert got == {"rows": wins + ties + losses, "wins": wins, "ties": ties, "losses": losses, "win_rate": rate}


def test_win_rate_refuses_rows_that_do_not_line_up():
    with pytest.raises(ValueError, match="same rows"):
        win_rate([0.1, 0.2], [0.3])


def _entry(step: int, scores: list[float]) -> dict:
    return {"step": step, "heldout": {"preference_scores": {"reward_model": scores}}}


def test_every_checkpoint_is_compared_with_step_0_and_nothing_without_it():
    out = against_base([_entry(0, [0.2, 0.5]), _entry(5, [0.6, 0.5]), _entry(10, [0.1, 0.1])])
    assert "vs_base" not in out[0]
    assert out[1]["vs_base"]["reward_model"]["win_rate"] == 0.75 and out[2]["vs_base"]["reward_model"]["win_rate"] == 0
    assert against_base([_entry(5, [0.6])]) == [_entry(5, [0.6])]          # no base evaluated: nothing to say
    plain = [{"step": 0, "heldout": {}}, {"step": 5, "heldout": {}}]       # a task without a learned reward
    assert against_base(plain) == plain


def test_the_results_table_has_a_win_column_with_its_legend():
    from grpokit.evaluation.metrics import results_legend, results_table

    def heldout(mean):
        return {"accuracy": None, "reward_means": {"reward_model": mean}, "format_rate": 0.5, "mean_length": 9.0,
                "truncated_rate": 0.0, "pass_at_k": {}}

    results = {"rows": 2, "data": "held-out", "metric": None, "checkpoints": [
        {"step": 0, "heldout": heldout(0.4)},
        {"step": 5, "heldout": heldout(0.7), "vs_base": {"reward_model": win_rate([0.9, 0.6], [0.4, 0.4])}}]}
    table = results_table(results)
    assert "win vs base (reward_model)" in [str(c.header) for c in table.columns]
    assert list(table.columns[2].cells) == ["-", "100.0%"]
    assert any(line.startswith("win vs base (reward_model): share of held-out rows") for line in results_legend(results))


# ---------------------------------------------------------------- the demo on tiny models
def _tiny_recipe(tmp_path: Path, model_dir: Path, **train) -> Path:
    from test_workflows import TINY_TRAIN

    recipe = yaml.safe_load((REPO / "recipes" / "smollm2-preference.yaml").read_text())
    recipe["model"] = {"name": str(model_dir)}
    recipe["train"].update({**TINY_TRAIN, **train})
    path = tmp_path / "preference.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


TINY_RM = {"max_steps": 2, "batch_size": 4, "learning_rate": 1e-3}


def test_preference_demo_trains_a_reward_model_then_grpo_and_compares_on_heldout_prompts(
        tmp_path, tiny_model_dir, tiny_rm_base_dir, capsys):
    from grpokit.demo import run_demo

    out = tmp_path / "demo"
    result = run_demo(str(out), task="preference", recipe_path=_tiny_recipe(tmp_path, tiny_model_dir),
                      rm_base=str(tiny_rm_base_dir), rm_options=TINY_RM)
    text = capsys.readouterr().out
    rm = tmp_path / "demo-rm"  # beside the run directory, which holds only what training writes
    assert json.loads((rm / "rm.json").read_text())["heldout_pairs"] == 48  # 8 of 40 prompts x 6 pairs
    assert result["reward_model"]["path"] == str(rm.resolve())
    assert yaml.safe_load((out / "config.yaml").read_text())["rewards"][0]["params"]["path"] == str(rm.resolve())
    w = result["win_rates"]["reward_model"]
    assert w["rows"] == 32 and w["wins"] + w["ties"] + w["losses"] == 32
    assert result["after"]["format_rate"] is not None and result["rule_agrees"] in (True, False)
    for row in ("reward_model score (mean)", "win rate against the base (reward_model)", "rule: direct_answer pass rate",
                "mean completion length (tokens)"):
        assert row in text
    assert json.loads((out / "demo.json").read_text())["win_rates"] == result["win_rates"]
    results = json.loads((out / "eval" / "results.json").read_text())
    assert results["checkpoints"][-1]["vs_base"]["reward_model"] == w  # the same figure in eval/results.json
    page = (out / "report" / "report.html").read_text()  # the report plots and tabulates the win rate, not accuracy
    assert "win vs base (reward_model)" in page and "win rate against the base per checkpoint" in page
    # `grpokit eval RUN_DIR` reaches the same comparison from the command line, for every checkpoint.
    assert main(["eval", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "win vs base" in printed and "reward_model" in printed
    steps = json.loads((out / "eval" / "results.json").read_text())["checkpoints"]
    assert [e["step"] for e in steps] == [0, 2] and steps[-1]["vs_base"]["reward_model"]["rows"] == 32


def test_preference_demo_needs_a_reward_model_reward_and_says_so_before_training(tmp_path, tiny_model_dir, capsys):
    recipe = _tiny_recipe(tmp_path, tiny_model_dir)
    raw = yaml.safe_load(recipe.read_text())
    raw["rewards"] = [r for r in raw["rewards"] if r["name"] != "reward_model"]
    recipe.write_text(yaml.safe_dump(raw))
    from grpokit.demo import preference

    with pytest.raises(GrpokitError) as e:
        preference.run(str(tmp_path / "demo"), recipe_path=recipe)
    (p,) = e.value.problems
    assert p.where.endswith("rewards") and "needs a reward_model reward" in p.message and "reward_model" in p.fix
    assert not (tmp_path / "demo-rm").exists() and not (tmp_path / "demo").exists()


def test_preference_demo_refuses_a_folder_that_is_no_run_before_training_the_reward_model(tmp_path, capsys):
    taken = tmp_path / "mine"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert main(["demo", "--task", "preference", "--output-dir", str(taken)]) == 2
    assert "fix:" in capsys.readouterr().err
    assert not (tmp_path / "mine-rm").exists()
