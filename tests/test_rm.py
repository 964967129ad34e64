"""Ranking files, pairs, the reward model (TRL RewardTrainer) and the `reward_model` reward, on tiny models."""
from __future__ import annotations

import json

import pytest
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.datasets import BUILTIN_DATA
from grpokit.errors import GrpokitError
from grpokit.rm.rankings import export_csv, import_csv, pairs, read_rankings, split_prompts

BUNDLED = BUILTIN_DATA / "preference" / "rankings.jsonl"


def _row(pid="p1", ranks=(1, 2, 3), ids=None, **extra):
    ids = ids or [f"c{i + 1}" for i in range(len(ranks))]
    return {"id": pid, "question": "Say hi.", "candidates": [{"id": i, "text": f"answer {i}", "rank": r}
                                                             for i, r in zip(ids, ranks)], **extra}


BAD = [
    # (lines of the file, the line in the error, words of the message)
    ([_row(ranks=(1, 1, 2))], ":1 candidates[1]", "tie: rank 1"),                     # a tie
    ([_row(ranks=(1, None, 2))], ":1 candidates[1]", "not ranked"),                   # a rank left empty
    ([_row(ranks=(1, 2, 4))], ":1 candidates[2]", "out of range for 3"),              # rank beyond n
    ([_row(ranks=(0, 1, 2))], ":1 candidates[0]", "out of range"),                    # rank 0
    ([_row(ranks=(1, "2", 3))], ":1 candidates[1]", "whole number"),                  # a string rank
    ([_row(ids=["a", "a", "b"])], ":1 candidates[1]", "duplicate candidate id 'a'"),  # duplicate candidate id
    ([_row(), _row()], ":2 id", "duplicate prompt id 'p1' (first at"),                # duplicate prompt id
    ([_row(ranks=(1,))], ":1 candidates", "at least 2"),                              # nothing to compare
    (['{"id": "p1", "question": "x", "candidates": ['], ":1", "JSON"),               # cut-off line
    ([{"id": "p1", "candidates": _row()["candidates"]}], ":1", "missing or empty question"),
]


@pytest.mark.parametrize("lines,where,what", BAD)
def test_bad_ranking_files_say_where_what_and_fix(tmp_path, lines, where, what):
    path = write_jsonl(tmp_path / "r.jsonl", lines)
    with pytest.raises(GrpokitError) as e:
        read_rankings(path)
    hits = [p for p in e.value.problems if where in p.where and what.lower() in p.message.lower()]
    assert hits, [str(p) for p in e.value.problems]
    assert all(p.fix for p in e.value.problems)


def test_bad_ranking_file_exits_2_without_traceback(tmp_path, capsys):
    path = write_jsonl(tmp_path / "r.jsonl", [_row(ranks=(2, 2, 1))])
    assert main(["rm", "train", str(path), "--out", str(tmp_path / "rm")]) == 2
    assert "tie" in capsys.readouterr().err


def test_pairs_are_every_better_than_pair():
    rows = read_rankings(BUNDLED)
    ps = pairs(rows)
    assert len(ps) == sum(len(r["candidates"]) * (len(r["candidates"]) - 1) // 2 for r in rows) == 240
    # candidates listed out of order: the pair still goes from the better rank to the worse
    (p,) = pairs([{"id": "x", "question": "q", "candidates": [{"text": "worse", "rank": 2}, {"text": "better", "rank": 1}]}])
    assert (p.chosen, p.rejected) == ("better", "worse")


def test_split_holds_out_whole_prompts_seeded():
    rows = read_rankings(BUNDLED)
    assert len(rows) == 40  # the bundled rankings: a quarter is 10 whole prompts
    a, held = split_prompts(rows, 0.25, seed=3)
    assert split_prompts(rows, 0.25, seed=3)[1] == held and len(held) == 10 and len(a) == 30
    assert split_prompts(rows, 0.25, seed=4)[1] != held  # the seed decides which
    assert not {r["id"] for r in a} & {r["id"] for r in held}


def test_csv_round_trip_keeps_ranks_and_reports_lines(tmp_path):
    unranked = [{**r, "candidates": [{**c, "rank": None} for c in r["candidates"]]} for r in read_rankings(BUNDLED)]
    write_jsonl(tmp_path / "u.jsonl", unranked)
    n = export_csv(tmp_path / "u.jsonl", tmp_path / "r.csv")
    assert n == 160  # 40 prompts x 4 candidates: one line each
    lines = (tmp_path / "r.csv").read_text().splitlines()
    # a person fills in the rank column (here: the order the candidates were listed in)
    filled, k = [lines[0]], 0
    for line in lines[1:]:
        filled.append(line + str(k % 4 + 1))
        k += 1
    (tmp_path / "r.csv").write_text("\n".join(filled) + "\n")
    rows = import_csv(tmp_path / "r.csv", tmp_path / "back.jsonl", overwrite=True)
    assert [c["rank"] for c in rows[0]["candidates"]] == [1, 2, 3, 4]
    assert read_rankings(tmp_path / "back.jsonl")[3]["question"] == unranked[3]["question"]
    # an empty rank cell is reported with its CSV line
    (tmp_path / "r.csv").write_text("\n".join(filled[:2] + [filled[2].rsplit(",", 1)[0] + ","] + filled[3:]) + "\n")
    with pytest.raises(GrpokitError) as e:
        import_csv(tmp_path / "r.csv", tmp_path / "back.jsonl", overwrite=True)
    assert any("r.csv:2" in p.where and "not ranked" in p.message for p in e.value.problems)


@pytest.mark.parametrize("chars", [200_000, 3_000_000])  # past the csv module's 131,072-character field limit
def test_import_csv_reads_a_candidate_of_any_length(tmp_path, capsys, chars):
    long = "x" * chars
    (tmp_path / "r.csv").write_text("prompt_id,question,candidate_id,text,rank\n"
                                    f'p1,Say hi.,a,"{long}",1\np1,Say hi.,b,hello,2\n')
    assert main(["rm", "import-csv", str(tmp_path / "r.csv"), str(tmp_path / "back.jsonl")]) == 0, \
        capsys.readouterr().err
    assert read_rankings(tmp_path / "back.jsonl")[0]["candidates"][0]["text"] == long


def test_reward_model_trains_and_reports_heldout_accuracy(tiny_rm_dir):
    info = json.loads((tiny_rm_dir / "rm.json").read_text())
    assert info["steps"] == 3 and info["train_pairs"] + info["heldout_pairs"] == 240
    assert info["heldout_pairs"] > 0 and 0.0 <= info["heldout"]["accuracy"] <= 1.0
    assert (tiny_rm_dir / "config.json").is_file() and (tiny_rm_dir / "model.safetensors").is_file()


def test_rm_train_and_eval_from_the_cli(tmp_path, tiny_rm_base_dir, capsys):
    out = tmp_path / "rm"
    assert main(["rm", "train", str(BUNDLED), "--base", str(tiny_rm_base_dir), "--out", str(out),
                 "--max-steps", "1", "--batch-size", "4"]) == 0
    assert "held-out pairwise accuracy" in capsys.readouterr().out
    assert main(["rm", "eval", str(out), str(BUNDLED)]) == 0
    text = capsys.readouterr().out
    assert "240 pairs" in text and "held-out" in text
    assert json.loads((out / "eval" / "rankings.json").read_text())["pairs"] == 240


def test_reward_model_reward_scores_batched_and_cached(tiny_rm_dir):
    from grpokit.rewards.registry import build_reward

    reward = build_reward("reward_model", {"path": str(tiny_rm_dir), "batch_size": 3})
    questions = ["Say hi."] * 5
    texts = ["Hello!", "Hi there, nice to meet you.", "Hello!", "hi", "Greetings."]
    first = reward(prompts=questions, completions=texts, question=questions)
    scorer = reward.scorer.scorer
    assert scorer.forward_rows == 4  # the repeated "Hello!" is scored once
    assert first[0] == first[2] and all(0.0 < s < 1.0 for s in first)
    again = reward(prompts=questions, completions=texts, question=questions)
    assert again == first and scorer.forward_rows == 4  # all from the cache


@pytest.mark.parametrize("params,what", [
    ({}, "params.path is not set"),                       # no folder named
    ({"path": "/nonexistent/rm"}, "not a reward model"),  # a folder that is not an RM
    ({"path": "x", "scale": "tanh"}, "unknown scale"),    # a scale that does not exist
])
def test_reward_model_reward_bad_params(params, what):
    from grpokit.rewards.registry import build_reward

    with pytest.raises(GrpokitError) as e:
        build_reward("reward_model", params)
    assert what in str(e.value)


def test_candidates_are_sampled_unranked_and_ready_for_csv(tmp_path, tiny_model_dir, capsys):
    import yaml

    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"question": "Say hi."}, {"prompt": "Name a colour."}])
    recipe = {"model": {"name": str(tiny_model_dir)}, "data": {"train": str(prompts), "template": "plain_en"},
              "rewards": [{"name": "length"}], "train": {"max_completion_length": 6, "temperature": 1.0}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    out = tmp_path / "rankings.jsonl"
    assert main(["rm", "candidates", str(tmp_path / "r.yaml"), "--prompts", str(prompts), "--n", "3",
                 "--out", str(out)]) == 0
    assert "fill in each rank" in capsys.readouterr().out
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["question"] for r in rows] == ["Say hi.", "Name a colour."]
    assert all(2 <= len(r["candidates"]) <= 3 and {c["rank"] for c in r["candidates"]} == {None} for r in rows)
    with pytest.raises(GrpokitError):  # unranked: not usable for training yet
        read_rankings(out)
    assert main(["rm", "export-csv", str(out), str(tmp_path / "r.csv")]) == 0


def test_a_killed_rm_trains_staging_folder_is_swept(tmp_path, tiny_rm_base_dir):
    # The re-test: a killed `rm train` left `.grpokit-rm-XXXX/model/` beside --out, and nothing ever removed it.
    # The model is now staged in a folder named by its process (grpokit.run.writer.staging_folder): the next write
    # there removes one whose process is gone.
    out = tmp_path / "rm"
    left = tmp_path / ".rm.999999999-k1.tmp"  # what a killed rm train (PID 999999999) leaves
    (left / "model").mkdir(parents=True)
    (left / "model" / "model.safetensors").write_bytes(b"half a model")
    assert main(["rm", "train", str(BUNDLED), "--base", str(tiny_rm_base_dir), "--out", str(out),
                 "--max-steps", "1", "--batch-size", "4"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rm"]  # swept, and this run's own staging folder gone
    assert (out / "model.safetensors").is_file()
