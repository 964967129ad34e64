"""Preflight: measurements and recommendations, on a tiny model and on reports built here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import build_parser
from grpokit.families.math import generate
from grpokit.preflight.sample import interleave_easy_hard, quantile, recommend, write_filtered
from grpokit.recipe.load import load_recipe


def _recipe_file(tmp_path: Path, model_dir: Path, rewards: list[dict], **train) -> Path:
    data = write_jsonl(tmp_path / "train.jsonl", generate(20, seed=3))
    raw = {"model": {"name": str(model_dir)},
           "data": {"train": str(data), "eval_fraction": 0.2, "template": "plain_en"},
           "rewards": rewards,
           "train": {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 8, **train}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _preflight(argv) -> int:
    args = build_parser().parse_args(["preflight", *argv])
    return args.func(args)


def test_preflight_on_a_tiny_model(tmp_path, tiny_model_dir, capsys):
    recipe = _recipe_file(tmp_path, tiny_model_dir, [{"name": "math_correctness", "weight": 0.8},
                                                     {"name": "format", "weight": 0.2},
                                                     {"name": "reward_fns:plus_spread", "weight": 0.1, "role": "shaping"}])
    out, filtered = tmp_path / "preflight.json", tmp_path / "filtered.jsonl"
    assert _preflight([str(recipe), "--prompts", "8", "--output", str(out), "--write-filtered", str(filtered)]) == 0
    text = capsys.readouterr().out
    r = json.loads(out.read_text())
    assert r["prompts"] == 8 and r["generations"] == 2 and len(r["per_prompt"]) == 8
    assert set(r["rewards"]) == {"math_correctness", "format", "plus_spread"}
    # A random tiny model rambles to the limit and never answers.
    assert r["truncated_share"] > 0.5 and r["length_quantiles"]["p99"] == 8
    assert r["all_wrong_share"] == 1.0 and r["format_rate"] == 0.0 and len(r["never_solved"]) == 8
    ops = {x["question"]: x["op"] for x in generate(20, seed=3)}
    plus = [p for p in r["per_prompt"] if ops[p["question"]] == "+"]
    assert 0 < len(plus) < 8 and r["zero_variance_share"] == pytest.approx(1 - len(plus) / 8)
    settings = {x["setting"]: x for x in r["recommendations"]}
    assert settings["train.max_completion_length"]["value"] >= 16 and "hit the limit" in settings[
        "train.max_completion_length"]["reason"]
    assert "data" in settings
    assert "recommendations:" in text and "p99" in text
    assert r["sampling"]["precision"] == "float32" and "max 8 tokens, in float32)" in text  # what it sampled in

    rows = [json.loads(l) for l in filtered.read_text().splitlines()]
    # Only the judged prompts with a spread (no-signal and the 8 unjudged of 16 train rows are left out), in the
    # easy/hard order the report promises.
    assert [x["question"] for x in rows] == [p["question"] for p in interleave_easy_hard(plus)]
    assert "unjudged row(s) left out" in text and "train.shuffle_dataset: false" in text


def test_bad_counts_are_reported(tmp_path, tiny_model_dir):
    from grpokit.errors import GrpokitError

    recipe = _recipe_file(tmp_path, tiny_model_dir, [{"name": "format"}])
    with pytest.raises(GrpokitError):
        _preflight([str(recipe), "--generations", "1"])


def test_quantile_and_easy_hard_alternation():
    assert quantile([1, 2, 3, 4, 5], 0.5) == 3 and quantile([10], 0.99) == 10 and quantile([], 0.5) == 0
    items = [{"q": i, "mean_reward": m} for i, m in enumerate([0.5, 0.9, 0.1, 0.7, 0.3])]
    assert [x["mean_reward"] for x in interleave_easy_hard(items)] == [0.9, 0.1, 0.7, 0.3, 0.5]


def _report(**kw) -> dict:
    base = {"length_quantiles": {"p50": 100, "p90": 180, "p99": 200}, "truncated_share": 0.0,
            "zero_variance_share": 0.1, "format_rate": 0.9, "always_solved": [], "never_solved": [],
            "all_wrong_share": 0.2, "prompts": 16}
    return {**base, **kw}


REC_CASES = [
    # (id, recipe train/reward changes, report changes, expected settings, absent settings)
    ("healthy settings: nothing to change", {}, {}, set(), {"train.num_generations", "data"}),
    ("truncation raises the length limit", {}, {"truncated_share": 0.3, "length_quantiles": {"p50": 256, "p90": 256, "p99": 256}},
     {"train.max_completion_length"}, set()),
    ("short completions lower it", {"max_completion_length": 1024}, {}, {"train.max_completion_length"}, set()),
    ("no signal: more generations, more format weight", {}, {"zero_variance_share": 0.8, "format_rate": 0.1},
     {"train.num_generations", "rewards.format.weight"}, set()),
    ("never solved: easier data and filtering", {}, {"all_wrong_share": 0.95, "never_solved": ["q"] * 15},
     {"data"}, set()),
]


@pytest.mark.parametrize("train,report,expected,absent", [c[1:] for c in REC_CASES], ids=[c[0] for c in REC_CASES])
def test_recommendations(tmp_path, train, report, expected, absent):
    raw = {"data": {"train": "builtin:arithmetic/train.jsonl"},
           "rewards": [{"name": "math_correctness", "weight": 0.8}, {"name": "format", "weight": 0.2}],
           "train": {"max_completion_length": 256, "num_generations": 8, **train}}
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(raw))
    recs = recommend(load_recipe(p), _report(**report))
    settings = {r["setting"] for r in recs}
    assert expected <= settings and not (absent & settings), recs
    assert all(r["reason"] for r in recs)


def _judged(index: int, mean_reward: float, zero_variance: bool) -> dict:
    return {"index": index, "question": f"q{index}", "mean_reward": mean_reward, "zero_variance": zero_variance}


@pytest.mark.parametrize("judged, expected, counts", [
    # easy/hard alternating among the judged rows with a spread; tied and unjudged rows are not written
    ([_judged(1, 0.2, False), _judged(3, 0.9, False), _judged(4, 0.5, False), _judged(0, 0.0, True)],
     ["q3", "q1", "q4"], (3, 1, 2)),
    # every judged prompt tied: an empty file, not the unjudged rows
    ([_judged(2, 0.0, True)], [], (0, 1, 5)),
    # nothing judged
    ([], [], (0, 0, 6)),
])
def test_write_filtered_writes_only_judged_rows_in_order(tmp_path, judged, expected, counts):
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(6)]
    out = tmp_path / "f.jsonl"
    assert write_filtered({"per_prompt": judged}, rows, out) == counts
    assert [json.loads(l)["question"] for l in out.read_text().splitlines()] == expected
