"""`grpokit demo --task composition` (grpokit.demo.composition) on a tiny model: the one-step model, then GRPO,
answer-only SFT, rejection-sampling fine-tuning and worked SFT from it, each evaluated on unseen compositions and
their seen copy, one table, a verdict said from the numbers, and the refusals before any model loads."""
from __future__ import annotations

import json

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.demo import TASKS, composition
from grpokit.demo.common import RECIPES
from grpokit.errors import GrpokitError
from grpokit.families import math, two_step
from grpokit.report.comparison import PAGE, RESULT_FILE


def _recipes(folder, model_dir, **edits) -> tuple:
    """(one-step SFT, two-step SFT, GRPO) recipe files on a few generated rows; `edits`: {recipe: {section: {...}}}
    on top. The GRPO recipe judges by an own pass/fail reward (tests/reward_fns.py even_text) that a tiny model
    passes on about half its samples, so RFT has solutions to train on; the SFT recipes read math's rows (its
    `reference` writes the worked solutions)."""
    one = write_jsonl(folder / "one.jsonl", math.generate(16, seed=7))
    two = write_jsonl(folder / "two.jsonl", two_step.generate(12, seed=0, high=20))
    held = write_jsonl(folder / "held.jsonl", two_step.generate(6, seed=1, high=20, compositions="unseen"))
    train = {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 8,
             "max_steps": 2, "save_steps": 1, "logging_steps": 1, "temperature": 1.0, "num_samples_logged": 2}
    math_rewards = [{"name": "math_correctness"}, {"name": "format", "weight": 0.2}]
    specs = {"atomic": (one, math_rewards), "sft": (two, math_rewards),
             "grpo": (two, [{"name": "reward_fns:even_text", "role": "correctness"}, {"name": "format", "weight": 0.2}])}
    paths = []
    for name, (rows, rewards) in specs.items():
        raw = {"model": {"name": str(model_dir)}, "data": {"train": str(rows), "eval": str(held), "template": "plain_en"},
               "rewards": rewards, "train": dict(train), "health": {"probe_rows": 0}}
        for section, values in edits.get(name, {}).items():
            raw[section] = {**raw[section], **values} if isinstance(values, dict) else values  # rewards: a list
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw))
        paths.append(path)
    return tuple(paths)


@pytest.fixture(scope="module")
def demo(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("composition")
    recipes = _recipes(tmp, tiny_model_dir)
    out = tmp / "comp"
    return tmp, recipes, out, composition.run(str(out), recipes=recipes, samples=2)


def test_every_arm_starts_from_the_one_step_model_and_is_evaluated_on_both_sides(demo):
    tmp, _, out, result = demo
    assert list(result["models"]) == list(composition.ARMS)
    atomic = str((out / "atomic").resolve())
    for name in composition.ARMS:
        run = json.loads((out / name / "run.json").read_text())
        assert run["status"] == "completed", name
        assert (run.get("init_from") or {}).get("run") == (None if name == "atomic" else atomic), name
    kinds = {n: json.loads((out / n / "run.json").read_text()).get("kind") for n in composition.ARMS}
    assert kinds == {**dict.fromkeys(composition.ARMS, "sft"), "grpo": None}  # GRPO's run.json has no kind
    for name, m in result["models"].items():
        assert set(m["sets"]) == {"heldout", "seen"}, name  # unseen compositions and their seen copy
        held, seen = m["sets"]["heldout"], m["sets"]["seen"]
        assert held["rows"] == seen["rows"] == 6 and held["samples_per_problem"] == 2  # sampled: a group a row
        assert "retention" in m and m["minutes"] >= m["stage_minutes"]
    assert result["models"]["grpo"]["minutes"] > result["models"]["atomic"]["minutes"]  # all its stages


def test_the_worked_and_rft_arms_train_on_the_rows_the_demo_wrote(demo):
    tmp, _, out, result = demo
    train = [json.loads(line) for line in (tmp / "two.jsonl").read_text().splitlines()]
    worked = [json.loads(line) for line in (out / composition.WORKED).read_text().splitlines()]
    assert worked == two_step.with_operands(train)
    mined = [json.loads(line) for line in (out / composition.MINED).read_text().splitlines()]
    rft = result["rft"]
    # GRPO's budget: its 2 steps draw 2 prompts each (4 completions, groups of 2), so RFT samples the first 4 rows
    assert rft["rows"] == 4 and rft["samples"] == 2 and rft["solutions"] == len(mined) > 0
    assert {r["question"] for r in mined} <= {r["question"] for r in train[:4]} and all(r["solution"] for r in mined)
    assert json.loads((out / "rft" / "run.json").read_text())["train_rows"] == len(mined)
    for name in ("sft-answers", "sft-worked"):  # the same 12 two-step rows: answers only, then worked out
        assert json.loads((out / name / "run.json").read_text())["train_rows"] == 12, name


def test_the_verdict_and_the_page(demo):
    _, _, out, result = demo
    lines = result["verdict"]
    assert lines[0].startswith("GRPO's gain over the one-step model (grpo minus atomic): unseen compositions ")
    assert any(line.startswith("grpo minus sft-answers (answer-only SFT on the same rows)") for line in lines)
    assert any("against the best SFT-only arm with the same rows" in line for line in lines)
    assert any(line.startswith("seen minus unseen compositions on the same numbers") for line in lines)
    saved = json.loads((out / RESULT_FILE).read_text())
    assert saved["verdict"] == lines and saved["title"] == "Composition from answer-only rows"
    page = (out / PAGE).read_text()
    assert "<h1>Composition from answer-only rows: comp</h1>" in page and "seen compositions (same numbers)" in page
    assert all(f'href="{name}/"' in page for name in composition.ARMS)


def _model(unseen: list[float], seen: list[float] | None = None) -> dict:
    sets = {"heldout": {"accuracy": sum(unseen) / len(unseen), "rows": len(unseen), "scores": unseen}}
    if seen is not None:
        sets["seen"] = {"accuracy": sum(seen) / len(seen), "rows": len(seen), "scores": seen}
    return {"sets": sets}


def test_the_target_needs_five_points_beyond_noise_over_the_best_sft_only_arm():
    rows = 400
    right = lambda n: [float(i < n) for i in range(rows)]  # noqa: E731 - the first n rows right
    models = {"atomic": _model(right(40)), "grpo": _model(right(120)), "sft-answers": _model(right(40)),
              "rft": _model(right(90)), "sft-worked": _model(right(200))}
    lines = composition.verdict(models)
    best = next(line for line in lines if "best SFT-only arm" in line)
    assert "(rft, by unseen compositions, greedy): +7.5 points (beyond noise" in best and best.endswith("yes")
    models["rft"] = _model(right(110))  # +2.5 points: beyond noise on these paired rows, yet under +5
    assert composition.verdict(models)[4].endswith("no")
    assert "grpo minus sft-worked" in composition.verdict(models)[3] and "-20.0 points" in composition.verdict(models)[3]
    assert not composition.reaches_target((0.06, 0.04)) and composition.reaches_target((0.06, 0.02))
    # RFT that found no right sample trained nothing: the verdict says its arm is the one-step model
    assert composition.verdict(models, {"solutions": 0})[-1].startswith("rft: no sampled solution was right")
    assert not composition.verdict(models, {"solutions": 3})[-1].startswith("rft:")


def test_refused_before_any_model_loads(tmp_path, tiny_model_dir):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    recipes = _recipes(tmp_path, tiny_model_dir)
    with pytest.raises(GrpokitError, match="grpokit writes only into a folder it made|nothing was written"):
        composition.run(str(tmp_path / "mine"), recipes=recipes)
    # the two-step recipes on one-step rows: no compositions to hold out
    one = str(tmp_path / "one.jsonl")
    bad = _recipes(tmp_path, tiny_model_dir, sft={"data": {"train": one}}, grpo={"data": {"train": one}})
    with pytest.raises(GrpokitError, match="row 1 is not an unedited two-step problem"):
        composition.run(str(tmp_path / "new"), recipes=bad)
    # an SFT recipe judged by an own reward: no family to work its answer-only rows out for the worked arm
    own = _recipes(tmp_path, tiny_model_dir, sft={"rewards": [{"name": "reward_fns:even_text", "role": "correctness"}]})
    with pytest.raises(GrpokitError, match="its rewards read no task family that works answer-only rows out"):
        composition.run(str(tmp_path / "new"), recipes=own)
    drift = _recipes(tmp_path, tiny_model_dir, grpo={"data": {"system_prompt": "Be brief."}})
    with pytest.raises(GrpokitError, match="data.system_prompt differ"):
        composition.run(str(tmp_path / "new"), recipes=drift)
    assert not (tmp_path / "new").exists() and (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_the_demo_row_names_three_recipes_with_one_prompt_and_the_same_two_step_rows():
    paths = tuple(RECIPES / name for name in TASKS["composition"].recipes)
    atomic, sft, grpo, worked = composition._recipes(None, paths)
    assert len(worked) == 1000 and grpo.train.learning_rate == 3e-6  # what --init-from would give it
    assert atomic.data.eval == sft.data.eval == grpo.data.eval == "builtin:two-step/eval.jsonl"
    assert (sft.train.max_steps, atomic.train.max_steps, grpo.train.max_steps) == (40, 40, 60)
    assert grpo.health.probe_rows == 0  # no look at the unseen compositions during training


# (id, argv after `grpokit demo --task composition`; {tmp}: the test's folder, what the message says): the demo's
# bundled recipes, refused before any model loads, in words with the fix, never a traceback
CLI_REFUSED = [
    ("an empty output folder: it would mean the current one", ["--output-dir", ""], "--output-dir: is empty"),
    ("an output folder that is a user's file", ["--output-dir", "{tmp}/notes.txt"],
     "notes.txt: is not a folder grpokit made"),
    ("a --set key no recipe has", ["--output-dir", "{tmp}/c", "--set", "train.learnig_rate=1e-5"],
     "--set train.learnig_rate: unknown key"),
    ("a --set value out of range", ["--output-dir", "{tmp}/c", "--set", "train.max_steps=-3"],
     "--set train.max_steps: Input should be greater than or equal to -1"),
    ("training rows that are not two-step problems: no compositions to hold out",
     ["--output-dir", "{tmp}/c", "--set", "data.train=builtin:arithmetic/train.jsonl"],
     "row 1 is not an unedited two-step problem"),
]


@pytest.mark.parametrize("argv, message", [c[1:] for c in CLI_REFUSED], ids=[c[0] for c in CLI_REFUSED])
def test_the_command_refuses_bad_input_in_words(tmp_path, capsys, argv, message):
    (tmp_path / "notes.txt").write_text("keep me")
    assert main(["demo", "--task", "composition", *(a.format(tmp=tmp_path) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "fix:" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing was written
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_a_finished_demo_resumed_keeps_every_part_the_rft_mining_included(demo, tmp_path):
    """`--resume` on the composition demo (grpokit.demo.progress.Progress): nothing is trained, mined or measured
    again, the mined rows included; a copy of the folder, so the module's demo stays as it ran."""
    import shutil

    _, recipes, out, result = demo
    copy = tmp_path / "comp"
    shutil.copytree(out, copy)
    again = composition.run(str(copy), recipes=recipes, samples=2, resume=True)
    assert again["resumed"][:5] == ["training atomic", "training grpo", "training sft-answers", "training sft-worked",
                                    "RFT mining"]
    assert "matched retention" in again["resumed"] and again["models"] == result["models"]
