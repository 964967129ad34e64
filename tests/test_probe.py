"""The held-out probe and the findings that read it (probe_drop), a format never learned, and --init-from's
settings fit for continuing: detectors on recorded streams, and tiny-model runs end to end."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import make_recipe, write_jsonl
from test_health import FIXTURE_RUN, _records, alter, healthy, healthy_samples, with_probe

from grpokit.cli import main
from grpokit.health.monitor import diagnose, doctor_run
from grpokit.recipe.health_section import HealthConfig


def _found(stream, code, samples=(), **kw):
    return [f for f in diagnose(stream, list(samples), **kw) if f.code == code]


# ---------------------------------------------------------------- probe_drop on recorded runs
# Held-out greedy scores per checkpoint of recorded runs (docs/measurements.md; the last two rows from issue 46's
# table): exactly what the probe measures, on the rows those evaluations used. The healthy runs must stay silent,
# including the demo's long run whose last checkpoint is a point below its best and the learning-efficiency run
# whose accuracy fell 5 points after step 7 (within the noise of 200 rows); the SFT model trained on at lr 2e-5
# must not. (The learning-efficiency run's steps are approximate: its checkpoints were taken by time.)
RECORDED = [
    ("demo 120 steps", 100, {0: .12, 20: .14, 40: .25, 60: .34, 80: .34, 100: .38, 120: .37}, False),
    ("demo seed 0, 40 steps", 100, {0: .12, 10: .16, 20: .17, 30: .23, 40: .25}, False),
    ("demo seed 1, 40 steps", 100, {0: .12, 40: .31}, False),
    ("learning efficiency, seed 0", 200, {0: .05, 7: .225, 12: .185, 18: .175}, False),
    ("json 30 steps, field accuracy", 100, {0: .273, 20: .73, 30: .843}, False),
    ("tools GRPO after SFT, seed 0", 64, {0: .719, 10: .906}, False),
    ("tools GRPO after SFT, seed 1", 64, {0: .906, 10: .922}, False),
    ("SFT then GRPO at lr 3e-6", 100, {0: .60, 10: .60}, False),
    ("SFT then GRPO at lr 2e-5", 100, {0: .60, 10: .31}, True),
]


@pytest.mark.parametrize("name,rows,scores,fires", RECORDED, ids=[r[0] for r in RECORDED])
def test_probe_drop_on_recorded_runs(name, rows, scores, fires):
    stream = with_probe([{"step": s, "reward": 0.5} for s in range(1, max(scores) + 1)], scores, rows)
    found = _found(stream, "probe_drop")
    assert bool(found) is fires, [(f.step, f.evidence) for f in found]
    if fires:
        (f,) = found
        assert (f.step, f.restore, f.since) == (10, 0, 1) and f.evidence["best"] == 0.6 and f.evidence["rows"] == 100
        assert f.as_dict()["evidence"]["restore_step"] == 0 and "restart from the initial model" in f.message


# Real runs of the embedded model (2026-12-04, docs/measurements.md "GRPO from an SFT model"): 10 GRPO steps of the
# demo recipe from its SFT model, probe every 5 steps. At lr 2e-5 as the monitor saw it (the probe 62.5% -> 37.5%
# -> 33.3%; training correctness 0.81 at step 2, 0.16 at steps 8-9); the same after its rollback (lr 1e-5, beta
# 0.04: 60.4% at steps 5 and 10); and at the 3e-6 --init-from chose (62.5% -> 60.4% -> 62.5%).
PROBE_RUNS = Path(__file__).parent / "fixtures" / "probe_runs"
ROLES = {"math_correctness": "correctness", "format": "format"}


def test_probe_drop_on_recorded_runs_of_the_embedded_model():
    fell = diagnose(_records(PROBE_RUNS / "sft-then-grpo-lr2e-5.jsonl"), [], reward_names=ROLES)
    (f,) = [f for f in fell if f.code == "probe_drop"]
    assert (f.step, f.restore, f.evidence["best"], f.evidence["now"]) == (5, 0, 0.625, 0.375)
    assert "correctness_collapse" not in {x.code for x in fell}  # training correctness alone said nothing
    after = diagnose(_records(PROBE_RUNS / "sft-then-grpo-lr2e-5-after-rollback.jsonl"), [], reward_names=ROLES)
    assert "probe_drop" not in {x.code for x in after}
    assert diagnose(_records(PROBE_RUNS / "sft-then-grpo-continuing.jsonl"), [], reward_names=ROLES) == []


def test_a_recorded_healthy_demo_run_raises_neither_new_finding():
    """20 steps of the demo recipe from the base model (2026-12-04): the format reward 0.06 -> 0.38 -> 0.5 -> ... ->
    0.9, the probe 8.3% -> 20.8% -> 16.7% of 48 rows (a 4-point dip, below probe_drop_min and 0.5 of its noise)."""
    metrics = _records(PROBE_RUNS / "demo-20-steps.jsonl")
    assert [m["probe/accuracy"] for m in metrics if "probe/accuracy" in m] == pytest.approx([0.0833, 0.2083, 0.1667],
                                                                                          abs=1e-3)
    assert {f.code for f in diagnose(metrics, [], reward_names=ROLES)} <= {"truncation"}  # its step-2 warning


@pytest.mark.parametrize("scores,rows,fires", [
    ({0: .6, 5: .6, 10: .45}, 48, False),  # 15 points on 48 rows: 1.5 standard errors, noise
    ({0: .6, 5: .6, 10: .31}, 48, True),  # the fall on the probe's default 48 rows: 2.85 errors
    ({0: .6, 5: .6, 10: .31}, 16, False),  # ... on 16 rows it is within their noise (1.65)
    ({0: .625, 5: .375}, 48, True),  # the recorded SFT model at lr 2e-5, step 5: 2.45 errors
    ({0: .97, 5: .97, 10: .93}, 1000, False),  # 4 points is below probe_drop_min however many rows
    ({0: .2, 5: .8, 10: .4}, 48, True),  # judged against the best step (5), not the first
    ({0: .5, 5: .5, 10: .0}, 48, True),
])
def test_probe_drop_is_judged_against_its_noise(scores, rows, fires):
    found = _found(with_probe([{"step": s} for s in range(1, 11)], scores, rows), "probe_drop")
    assert bool(found) is fires, [f.evidence for f in found]
    if fires:
        best = max(sorted(scores), key=lambda s: scores[s])
        assert found[0].restore == best and found[0].evidence["best_step"] == best


def test_probe_drop_compares_probes_of_as_many_rows_and_is_reported_once():
    # Probes of another row count (a resumed run with another health.probe_rows) are not compared.
    stream = with_probe([{"step": s} for s in range(1, 21)], {0: .9, 5: .9}, rows=48)
    stream = [dict(r, **({"probe/accuracy": .2, "probe/rows": 12} if r["step"] == 10 else {})) for r in stream]
    assert _found(stream, "probe_drop") == []
    # Once fallen, it stays reported once while the probe stays down, between probes too.
    stream = with_probe([{"step": s} for s in range(1, 21)], {0: .6, 5: .3, 10: .3, 15: .25, 20: .3})
    assert [f.step for f in _found(stream, "probe_drop")] == [5]


# ---------------------------------------------------------------- format_never_learned
def test_format_never_learned_on_a_recorded_run():
    """The fixture is a real tiny-model run (math_correctness + format on arithmetic): its format reward is 0 at
    each of its 6 steps. With a 5-step horizon it is reported at step 5, once, with the warm-start fix."""
    metrics = _records(FIXTURE_RUN / "metrics.jsonl")
    cfg = HealthConfig(format_never_steps=5, window=2)
    (f,) = _found(metrics, "format_never_learned", cfg=cfg, reward_names={"math_correctness": "correctness",
                                                                              "format": "format"})
    assert (f.step, f.since, f.evidence["full_marks"]) == (5, 1, 1.0)
    assert "SFT warm start" in f.message and "--init-from" in f.message and "format reward's weight" in f.message


# The bf16 demo arm of docs/measurements.md ("Measured again on a 2-core Intel Xeon with AMX"): format reward
# 0.00-0.12 at every one of its 30 steps. Its per-step values were not recorded; these stay inside that range.
NEVER = [0.0, 0.06, 0.0, 0.0, 0.12, 0.06, 0.0, 0.0, 0.06, 0.0, 0.0, 0.06, 0.12, 0.0, 0.0, 0.06, 0.0, 0.12, 0.06, 0.0,
         0.0, 0.06, 0.0, 0.0, 0.12, 0.0, 0.06, 0.0, 0.06, 0.0]


def test_format_never_learned_fires_on_the_bf16_arm_and_not_on_a_learning_run():
    never = [{"step": i + 1, "rewards/format/mean": v, "rewards/math_correctness/mean": 0.3} for i, v in enumerate(NEVER)]
    assert [f.step for f in _found(never, "format_never_learned")] == [20]
    # A run that learns it, however slowly at first (the demo: held-out format 14% before, 100% at step 10).
    rising = [dict(r, **{"rewards/format/mean": min(1.0, 0.05 + 0.03 * r["step"])}) for r in never]
    assert _found(rising, "format_never_learned") == []
    assert _found(healthy(), "format_never_learned", healthy_samples()) == []


def test_format_never_learned_leaves_weight_0_rewards_and_judges_own_ones_by_their_marks():
    never = [{"step": i + 1, "rewards/format/mean": v} for i, v in enumerate(NEVER)]
    assert _found(never, "format_never_learned", weights={"format": 0.0}) == []  # logged, not trained on
    # An own format reward worth 0.2: judged against the 0.2 its best completions earned, not 1.0.
    own = [{"step": s, "rewards/style/mean": 0.15} for s in range(1, 31)]
    samples = [{"step": 1, "completion": "x", "rewards": {"style": 0.2}}]
    assert _found(own, "format_never_learned", samples, reward_names={"style": "format"}) == []
    low = [{"step": s, "rewards/style/mean": 0.02} for s in range(1, 31)]
    (f,) = _found(low, "format_never_learned", samples, reward_names={"style": "format"})
    assert f.evidence["full_marks"] == 0.2


def test_doctor_reads_the_weights_of_the_runs_recipe(tmp_path):
    # The preference recipe logs its direct_answer rule at weight 0: a low rule is no format never learned.
    stream = [{"step": s, "reward": 0.5, "rewards/reward_model/mean": 0.5, "rewards/direct_answer/mean": 0.1}
              for s in range(1, 31)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stream))
    rewards = [{"name": "reward_model", "params": {"path": "runs/rm"}}, {"name": "direct_answer", "weight": 0.0}]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"rewards": rewards}))
    assert "format_never_learned" not in {f.code for f in doctor_run(tmp_path)}
    rewards[1]["weight"] = 0.5
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"rewards": rewards}))
    assert "format_never_learned" in {f.code for f in doctor_run(tmp_path)}


def test_a_tiny_run_that_never_learns_the_format_is_told_live(tmp_path, tiny_model_dir):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"}, {"name": "format"},
                                                    {"name": "reward_fns:text_spread", "role": "shaping"}],
                         sections={"health": {"window": 2, "format_never_steps": 3, "probe_rows": 0}}, max_steps=3)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    health = [json.loads(x) for x in (run / "health.jsonl").read_text().splitlines()]
    (f,) = [h for h in health if h["code"] == "format_never_learned"]
    assert f["step"] == 3 and f["action"] == "warn"


# ---------------------------------------------------------------- the probe in a tiny-model run
def _probe_recipe(tmp_path: Path, model_dir: Path, eval_answers: list[str] | None, **train) -> Path:
    """A recipe whose held-out rows are 6 arithmetic questions answered by `eval_answers` (one model's own greedy
    completions), scored by an own correctness reward that passes only that exact text."""
    from grpokit.families.math import generate

    rows = generate(30, seed=7)
    train_file = write_jsonl(tmp_path / "train.jsonl", rows[:24])
    answers = eval_answers or ["-"] * 6
    eval_file = write_jsonl(tmp_path / "eval.jsonl", [{"question": r["question"], "answer": a}
                                                      for r, a in zip(rows[24:], answers)])
    return make_recipe(tmp_path, model_dir, [{"name": "reward_fns:same_as_answer", "role": "correctness"},
                                             {"name": "reward_fns:text_spread", "role": "shaping"}],
                       sections={"data": {"train": str(train_file), "eval": str(eval_file), "template": "plain_en"},
                                 "health": {"max_rollbacks": 1, "probe_rows": 6}}, **train)


def _greedy(model_dir: Path, recipe_path: Path) -> list[str]:
    from grpokit import models
    from grpokit.generation import SamplingParams, complete
    from grpokit.recipe.load import load_recipe
    from grpokit.task import Task

    task = Task.from_recipe(load_recipe(recipe_path))
    _, heldout, _ = task.rows()
    tokenizer = models.load_tokenizer(str(model_dir))
    model = models.load_recipe_model(task.recipe.model, model_dir)
    ids = [task.template.encode(tokenizer, task.template.build(r["question"])) for r in heldout]
    return [g[0].text for g in complete(model, tokenizer, ids, SamplingParams(max_tokens=8), progress=False)]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def test_a_run_whose_probe_falls_rolls_back_to_the_best_probe_step(tmp_path, tiny_model_dir):
    # The held-out answers are what checkpoint-1 of this very run answers greedily (a first run of one step finds
    # them; training is seeded and the probe leaves the random state alone, so the second run's step 1 is the
    # same), so the probe scores 100% at step 1 and the learning rate of 0.05 then tears it down at step 2.
    first = tmp_path / "first"
    first.mkdir()
    lr = dict(learning_rate=0.05)
    recipe = _probe_recipe(first, tiny_model_dir, None, max_steps=1, **lr)
    assert main(["train", str(recipe), "--output-dir", str(first / "run"), "--skip-audit",
                 "--set", "health.probe_rows=0"]) == 0
    gold = _greedy(first / "run" / "checkpoints" / "checkpoint-1", recipe)

    recipe = _probe_recipe(tmp_path, tiny_model_dir, gold, max_steps=3, **lr)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0

    probes = {m["step"]: m["probe/accuracy"] for m in _lines(run / "metrics.rolled_back.jsonl") + _lines(run / "metrics.jsonl")
              if "probe/accuracy" in m}
    health = _lines(run / "health.jsonl")
    first_drop = next(h for h in health if h["code"] == "probe_drop")
    assert first_drop["step"] == 2 and first_drop["evidence"]["best_step"] == 1 and first_drop["evidence"]["best"] == 1.0
    assert first_drop["evidence"]["restore_step"] == 1
    assert first_drop["action"].startswith("rollback: restore checkpoint-1, learning_rate 0.05 -> 0.025")
    status = json.loads((run / "run.json").read_text())
    assert status["rollbacks"][0] == {"code": "probe_drop", "at_step": 2, "restored": "checkpoint-1",
                                      "learning_rate": 0.025, "beta": 0.04}
    kept = _lines(run / "metrics.jsonl")
    assert kept[0] == {**kept[0], "step": 0, "probe/rows": 6} and probes[1] == 1.0
    # Step 0 is probed once per run: the rollback to checkpoint-1 kept its line, nothing measured it again.
    assert [m["step"] for m in kept if "probe/accuracy" in m][:2] == [0, 1]
    assert sum(1 for m in kept if m["step"] == 0) == 1


def test_the_probe_scores_as_grpokit_eval_does(tmp_path, tiny_model_dir):
    from grpokit.evaluation import evaluate_run

    # Held-out answers: the initial model's own greedy completions (100% at step 0, less once it trained).
    gold = _greedy(tiny_model_dir, _probe_recipe(tmp_path, tiny_model_dir, None))
    recipe = _probe_recipe(tmp_path, tiny_model_dir, gold, max_steps=2, learning_rate=0.01)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit", "--set", "health.probe_rows=4",
                 "--set", "health.actions.probe_drop=warn"]) == 0
    probes = {m["step"]: (m["probe/accuracy"], m["probe/rows"]) for m in _lines(run / "metrics.jsonl")
              if "probe/accuracy" in m}
    assert sorted(probes) == [0, 1, 2] and probes[0] == (1.0, 4) and probes[2][0] < 1.0
    results = evaluate_run(run, checkpoints="all", max_rows=4, log=lambda m: None)
    assert {e["step"]: (e["heldout"]["accuracy"], e["heldout"]["rows"]) for e in results["checkpoints"]} == probes
    # eval's table carries the probe beside its own figure
    assert [e["probe"]["accuracy"] for e in results["checkpoints"]] == [probes[s][0] for s in (0, 1, 2)]


def test_the_probe_leaves_the_samples_alone_and_is_off_where_it_cannot_score(tmp_path, tiny_model_dir, capsys):
    runs = {}
    for rows in (0, 4):
        recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"},
                                                        {"name": "reward_fns:text_spread", "role": "shaping"}],
                             sections={"health": {"probe_rows": rows}})
        run = tmp_path / f"run{rows}"
        assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
        runs[rows] = _lines(run / "samples.jsonl")
    assert runs[0] == runs[4]  # the same completions sampled with and without the probe
    out = capsys.readouterr().out
    assert "health probe off: health.probe_rows: 0" in out and "health probe: the first 4 held-out rows" in out
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:text_spread", "role": "shaping"}])
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run-shaping"), "--skip-audit"]) == 0
    assert "health probe off: no reward with the correctness role" in capsys.readouterr().out


# ---------------------------------------------------------------- --init-from: settings fit for continuing
def test_init_from_a_trained_model_continues_at_a_gentler_learning_rate(tmp_path, tiny_model_dir, capsys):
    from grpokit.training.lineage import CONTINUING_LEARNING_RATE

    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"},
                                                    {"name": "reward_fns:text_spread", "role": "shaping"}],
                         sections={"health": {"probe_rows": 0}}, max_steps=1, learning_rate=2e-5)
    first = tmp_path / "first"
    assert main(["train", str(recipe), "--output-dir", str(first), "--skip-audit"]) == 0
    capsys.readouterr()
    second = tmp_path / "second"
    assert main(["train", str(recipe), "--output-dir", str(second), "--skip-audit", "--init-from", str(first)]) == 0
    out = capsys.readouterr().out
    assert ("continuing from a trained model (--init-from): train.learning_rate 2e-05 -> 3e-06" in out
            and "--set train.learning_rate=2e-05" in out)
    assert yaml.safe_load((second / "config.yaml").read_text())["train"]["learning_rate"] == CONTINUING_LEARNING_RATE
    lineage = json.loads((second / "run.json").read_text())["init_from"]
    assert lineage["continuing"] == {"train.learning_rate": [2e-5, CONTINUING_LEARNING_RATE]}
    assert _lines(second / "metrics.jsonl")[-1]["learning_rate"] == pytest.approx(CONTINUING_LEARNING_RATE)

    # --set names it: the recipe's own value, and nothing said
    third = tmp_path / "third"
    assert main(["train", str(recipe), "--output-dir", str(third), "--skip-audit", "--init-from", str(first),
                 "--set", "train.learning_rate=2e-5"]) == 0
    assert "continuing from a trained model" not in capsys.readouterr().out
    assert yaml.safe_load((third / "config.yaml").read_text())["train"]["learning_rate"] == 2e-5


@pytest.mark.parametrize("lr,sets,kind,continuing,expected", [
    (2e-5, [], "run-last-checkpoint", True, 3e-6),
    (1e-6, [], "run-last-checkpoint", True, 1e-6),  # already gentler: kept
    (2e-5, ["train.learning_rate=1e-5"], "model-folder", True, 2e-5),  # --set: the recipe's (here 2e-5) wins
    (2e-5, [], "run-base", True, 2e-5),  # the earlier run's own untrained start
    (2e-5, [], "model-folder", False, 2e-5),  # SFT: not continuing GRPO
])
def test_continuing_settings(monkeypatch, lr, sets, kind, continuing, expected):
    from grpokit.recipe import validate_raw
    from grpokit.training import lineage as lin

    recipe = validate_raw({"data": {"train": "builtin:arithmetic/train.jsonl"}, "rewards": [{"name": "format"}],
                           "train": {"learning_rate": lr}})
    monkeypatch.setattr(lin, "resolve_init_from", lambda spec: ("/m", {"path": "/m", "step": 3, "kind": kind,
                                                                       "run": None}))
    out, lineage = lin.apply_init_from(recipe, "x", explicit=sets, continuing=continuing)
    assert out.train.learning_rate == expected and out.model.name == "/m"
    assert bool(lineage.get("continuing")) is (expected != lr)
    assert bool(lin.continuing_notes(lineage)) is (expected != lr)


def test_format_never_learned_stays_silent_on_healthy_streams_of_every_seed():
    for seed in range(6):
        assert _found(healthy(seed=seed), "format_never_learned", healthy_samples()) == []
        assert _found(alter(healthy(seed=seed), 1, **{"rewards/format/mean": lambda s, v: 0.3}),
                      "format_never_learned", healthy_samples()) == []


def test_the_probe_generates_with_the_policy_itself_not_through_the_training_sampler():
    from types import SimpleNamespace

    from grpokit import generation_internals

    class Model:
        def generate(self):
            return "own"

    trainer = SimpleNamespace(model=Model())
    generation_internals.generate_through(trainer, lambda generate, *a, **k: "through the sampler")
    assert trainer.model.generate() == "through the sampler"
    with generation_internals.generating_as_itself(trainer):
        assert trainer.model.generate() == "own"
    assert trainer.model.generate() == "through the sampler"  # put back for the next training step
    plain = SimpleNamespace(model=Model())
    with generation_internals.generating_as_itself(plain):  # nothing replaced: nothing to do
        assert plain.model.generate() == "own"
    assert plain.model.generate() == "own"


# ---------------------------------------------------------------- the probe confirms correctness_collapse
# The countdown reward per step of a real GRPO run from the countdown SFT model (2026-12-05, SmolLM2-135M, 2 prompts
# x 8 completions a step, lr 3e-6; the 500-row measurement of docs/measurements.md "Countdown"): correctness_collapse
# read a learned level of 0.273 and 0.109 over steps 14-18 and rolled the run back, while the probe of 48 held-out
# rows read 22.9% at step 0 and 31.2% at every later checkpoint (500 rows: 21.2% -> 22.6% at step 40).
COUNTDOWN_FALSE_FALL = [0.062, 0.194, 0.188, 0.144, 0.156, 0.531, 0.144, 0.2, 0.3, 0.363, 0.138, 0.319, 0.194, 0.2,
                        0.038, 0.069, 0.169, 0.069]


def _monitor(tmp_path, probe, probe_drop: str = "rollback"):
    from grpokit.health import HealthMonitor
    from grpokit.recipe import validate_raw

    recipe = validate_raw({"data": {"train": "builtin:arithmetic/train.jsonl"},
                           "rewards": [{"name": "math_correctness"}],
                           "health": {"actions": {"correctness_collapse": "rollback", "probe_drop": probe_drop}}})
    said: list[str] = []
    monitor = HealthMonitor(recipe.health, tmp_path, {"math_correctness": "correctness"}, rollbacks_left=2,
                            plan_rollback=lambda f: "rollback: planned", printer=said.append, probe=probe)
    monitor.observe({"step": 0, "probe/accuracy": 11 / 48, "probe/rows": 48}, [])
    for step, value in enumerate(COUNTDOWN_FALSE_FALL, start=1):
        monitor.observe({"step": step, "reward": value, "rewards/math_correctness/mean": value}, [])
    return monitor, said, [json.loads(line) for line in (tmp_path / "health.jsonl").read_text().splitlines()]


def test_a_correctness_collapse_the_probe_does_not_confirm_is_a_warning(tmp_path):
    readings: list[int] = []

    def probe():  # what the run's probe read at its next checkpoint: 15 of the 48 rows
        readings.append(1)
        return {"probe/accuracy": 15 / 48, "probe/rows": 48}

    monitor, said, health = _monitor(tmp_path, probe)
    assert monitor.decision is None and len(readings) == 1  # asked once, at the finding (step 18)
    (line,) = [h for h in health if h["code"] == "correctness_collapse"]
    assert line["step"] == 18 and line["action"].startswith(
        "warn (not confirmed by the held-out probe: 31.2% of its 48 rows now, 22.9% at step 0; from 22.9% the probe "
        "cannot confirm a fall under 16.7 points on 48 rows, so a smaller fall of the model, or none, reads the same; "
        "asked again at the next checkpoint's probe")
    assert "harder" not in line["action"]  # nothing measured the drawn prompts' difficulty: no claim about it
    assert line["evidence"]["probe"] == {"now": 0.3125, "best": 0.2292, "best_step": 0, "rows": 48,
                                         "noise": 0.0907, "confirmed": False, "smallest_confirmed_fall": 0.1667}
    assert any("not confirmed" in s for s in said)


# (best rows of 48, the smallest fall in rows the rule confirms, or None): the figures docs/health.md shows
SMALLEST_FALLS_48 = [(2, None), (4, 4), (5, 5), (9, 7), (14, 8), (21, 10), (24, 10), (37, 10), (43, 8), (48, 4)]


@pytest.mark.parametrize("best, fallen", SMALLEST_FALLS_48)
def test_the_smallest_fall_the_probe_confirms(best, fallen):
    from grpokit.health.learning import probe_fall, smallest_confirmed_fall
    from grpokit.recipe import HealthConfig

    cfg = HealthConfig()
    smallest = smallest_confirmed_fall(best / 48, 48, cfg)
    assert smallest == (None if fallen is None else fallen / 48)
    earlier = [{"step": 0, "probe/accuracy": best / 48, "probe/rows": 48}]
    if fallen is not None:  # the rule itself: that fall confirmed, one row less not
        assert probe_fall(earlier, (best - fallen) / 48, 48, cfg).beyond_noise
        assert fallen == 1 or not probe_fall(earlier, (best - fallen + 1) / 48, 48, cfg).beyond_noise
    else:
        assert not probe_fall(earlier, 0.0, 48, cfg).beyond_noise


def _held_at_18(tmp_path, probe_drop="warn"):
    return _monitor(tmp_path, lambda: {"probe/accuracy": 15 / 48, "probe/rows": 48}, probe_drop)


def test_an_unconfirmed_finding_is_asked_again_at_the_next_checkpoint(tmp_path):
    # Held back at step 18; the condition stays (correctness stays low) and the checkpoint of step 19 probes 3 of
    # 48 rows: the probe now confirms the fall, and the rollback it held back happens (probe_drop, which reads the
    # same fall, only warns here; with its default, rollback, it would roll back itself).
    monitor, _, _ = _held_at_18(tmp_path)
    assert monitor.decision is None
    monitor.observe({"step": 19, "reward": 0.05, "rewards/math_correctness/mean": 0.05,
                     "probe/accuracy": 3 / 48, "probe/rows": 48}, [])
    assert monitor.decision is not None and monitor.decision.action == "rollback"
    lines = [json.loads(x) for x in (tmp_path / "health.jsonl").read_text().splitlines()]
    again = [h for h in lines if h["code"] == "correctness_collapse"][-1]
    assert again["step"] == 19 and again["action"] == "rollback: planned"
    assert again["evidence"]["probe"]["confirmed"] is True and again["evidence"]["probe"]["asked_again_since"] == 18


def test_a_finding_held_at_a_checkpoint_step_is_not_asked_twice_there(tmp_path):
    # The finding fires at a step whose metrics line carries that checkpoint's probe: asked once (the probe of the
    # same weights), recorded once.
    monitor, _, _ = _monitor(tmp_path, lambda: {"probe/accuracy": 15 / 48, "probe/rows": 48}, "warn")
    lines = [json.loads(x) for x in (tmp_path / "health.jsonl").read_text().splitlines()]
    assert [h["step"] for h in lines if h["code"] == "correctness_collapse"] == [18]
    (tmp_path / "b").mkdir()
    from grpokit.health import HealthMonitor
    from grpokit.recipe import validate_raw

    recipe = validate_raw({"data": {"train": "builtin:arithmetic/train.jsonl"}, "rewards": [{"name": "math_correctness"}],
                           "health": {"actions": {"correctness_collapse": "rollback", "probe_drop": "warn"}}})
    monitor = HealthMonitor(recipe.health, tmp_path / "b", {"math_correctness": "correctness"}, rollbacks_left=2,
                            printer=lambda _: None, probe=lambda: {"probe/accuracy": 15 / 48, "probe/rows": 48})
    monitor.observe({"step": 0, "probe/accuracy": 11 / 48, "probe/rows": 48}, [])
    last = len(COUNTDOWN_FALSE_FALL)
    for step, value in enumerate(COUNTDOWN_FALSE_FALL, start=1):
        probed = {"probe/accuracy": 15 / 48, "probe/rows": 48} if step == last else {}
        monitor.observe({"step": step, "reward": value, "rewards/math_correctness/mean": value, **probed}, [])
    lines = [json.loads(x) for x in (tmp_path / "b" / "health.jsonl").read_text().splitlines()]
    assert [h["step"] for h in lines if h["code"] == "correctness_collapse"] == [last]


def test_a_finding_still_unconfirmed_is_recorded_again_and_one_that_cleared_is_not(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monitor, _, _ = _held_at_18(tmp_path / "a")
    monitor.observe({"step": 19, "reward": 0.05, "rewards/math_correctness/mean": 0.05}, [])  # no probe: not asked
    monitor.observe({"step": 20, "reward": 0.05, "rewards/math_correctness/mean": 0.05,
                     "probe/accuracy": 12 / 48, "probe/rows": 48}, [])  # within the noise: held again
    assert monitor.decision is None
    lines = [json.loads(x) for x in (tmp_path / "a" / "health.jsonl").read_text().splitlines()]
    found = [h for h in lines if h["code"] == "correctness_collapse"]
    monitor.observe({"step": 21, "reward": 0.05, "rewards/math_correctness/mean": 0.05,
                     "probe/accuracy": 12 / 48, "probe/rows": 48}, [])  # and again, still named by its first step
    lines = [json.loads(x) for x in (tmp_path / "a" / "health.jsonl").read_text().splitlines()]
    found = [h for h in lines if h["code"] == "correctness_collapse"]
    assert [h["step"] for h in found] == [18, 20, 21]
    assert all(h["action"].endswith("first held at step 18)") for h in found[1:])
    # The condition cleared (correctness back up) before the checkpoint: nothing is asked, nothing recorded.
    monitor, _, _ = _held_at_18(tmp_path / "b")
    for step in (19, 20, 21, 22, 23):
        monitor.observe({"step": step, "reward": 0.5, "rewards/math_correctness/mean": 0.5}, [])
    monitor.observe({"step": 24, "reward": 0.5, "rewards/math_correctness/mean": 0.5,
                     "probe/accuracy": 3 / 48, "probe/rows": 48}, [])
    lines = [json.loads(x) for x in (tmp_path / "b" / "health.jsonl").read_text().splitlines()]
    assert [h["step"] for h in lines if h["code"] == "correctness_collapse"] == [18]


def test_a_correctness_collapse_the_probe_confirms_rolls_back(tmp_path):
    monitor, _, health = _monitor(tmp_path, lambda: {"probe/accuracy": 3 / 48, "probe/rows": 48})
    assert monitor.decision is not None and monitor.decision.action == "rollback"
    (line,) = [h for h in health if h["code"] == "correctness_collapse"]
    assert line["action"] == "rollback: planned" and line["evidence"]["probe"]["confirmed"] is True


def test_without_a_probe_or_an_earlier_reading_the_finding_decides_alone(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monitor, _, _ = _monitor(tmp_path / "a", None)
    assert monitor.decision.action == "rollback"
    # A probe on other rows than the earlier readings has nothing to compare with: the finding stands.
    monitor, _, _ = _monitor(tmp_path / "b", lambda: {"probe/accuracy": 0.5, "probe/rows": 40})
    assert monitor.decision.action == "rollback"


def test_the_run_wires_its_probe_into_the_monitor(tmp_path):
    from grpokit.recipe import HEALTH_CODES, validate_raw
    from grpokit.run import RunDir
    from grpokit.training.rollback import Rollbacks

    assert [c for c, row in HEALTH_CODES.items() if row.probe_confirms] == ["correctness_collapse"]

    class Probe:  # the one method the monitor calls (grpokit.training.probe.HeldOutProbe.confirm)
        def confirm(self):
            return {}

    recipe = validate_raw({"data": {"train": "builtin:arithmetic/train.jsonl"}, "rewards": [{"name": "format"}]})
    probe = Probe()
    monitor = Rollbacks(RunDir(tmp_path), print).monitor(recipe, {"format": "format"}, probe)
    assert monitor.probe == probe.confirm


def test_a_live_run_asks_its_probe_before_rolling_back_on_correctness_collapse(tmp_path, tiny_model_dir):
    # A correctness reward that only scatters (a hash of the text) and a learning rate too small to change the
    # model: correctness_collapse, set to fire on any fall, finds one on the drawn prompts; the probe, measured at
    # that step on the same weights as at step 0, has not moved, so the rollback does not happen.
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:text_spread", "role": "correctness"}],
                         sections={"health": {"window": 1, "correctness_learned": 0.0, "correctness_drop": 0.99,
                                              "probe_rows": 6, "actions": {"correctness_collapse": "rollback"}}},
                         max_steps=4, learning_rate=1e-12)
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    found = [h for h in _lines(run / "health.jsonl") if h["code"] == "correctness_collapse"]
    assert found, _lines(run / "health.jsonl")
    for h in found:
        assert h["action"].startswith("warn (not confirmed by the held-out probe: "), h
        probe = h["evidence"]["probe"]
        assert probe["confirmed"] is False and probe["rows"] == 6 and probe["best_step"] == 0
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "completed" and status["rollbacks"] == []
    # The confirming readings stay out of metrics.jsonl: the probe's lines are step 0 and the saved steps.
    assert [m["step"] for m in _lines(run / "metrics.jsonl") if "probe/accuracy" in m] == [0, 1, 2, 3, 4]
