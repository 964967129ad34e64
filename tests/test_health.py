"""Health detectors on metric streams built here: a healthy run gives nothing, each pathology its code."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from grpokit.cli import build_parser
from grpokit.health.completions import repeated_share
from grpokit.health.monitor import HealthMonitor, diagnose, doctor_run, load_evals
from grpokit.recipe.health_section import HEALTH_CODES, HealthConfig

STEPS = 60
GOOD_TEXT = [
    "First add 12 and 30 to get 42.\nFinal answer: 42",
    "We subtract 7 from 19, which leaves 12.\nFinal answer: 12",
    "Twice 14 is 28 and then 28 minus 3 is 25.\nFinal answer: 25",
    "The sum of 5 and 6 equals 11.\nFinal answer: 11",
]


def healthy(steps: int = STEPS, seed: int = 0) -> list[dict]:
    """A run that learns: reward and correctness climb with noise, kl small, length and entropy steady."""
    rng = random.Random(seed)
    out = []
    for s in range(1, steps + 1):
        correct = min(0.9, 0.1 + 0.012 * s) + rng.uniform(-0.04, 0.04)
        fmt = min(1.0, 0.4 + 0.02 * s)
        out.append({
            "step": s, "loss": 0.01 + rng.uniform(-0.005, 0.005), "grad_norm": 0.4 + rng.uniform(0, 0.2),
            "learning_rate": 3e-6, "reward": correct + 0.5 * fmt, "reward_std": 0.3,
            "rewards/math_correctness/mean": correct, "rewards/format/mean": fmt,
            "kl": 0.002 + 0.0004 * s + rng.uniform(0, 0.002), "entropy": 1.1 - 0.003 * s + rng.uniform(-0.05, 0.05),
            "completions/mean_length": 60 + rng.uniform(-6, 6), "completions/clipped_ratio": rng.uniform(0, 0.08),
            "frac_reward_zero_std": rng.uniform(0.1, 0.4),
        })
    return out


def healthy_samples(steps: int = STEPS) -> list[dict]:
    return [{"step": s, "prompt": "p", "completion": t, "rewards": {"math_correctness": 1.0, "format": 1.0}}
            for s in range(1, steps + 1) for t in GOOD_TEXT]


def alter(stream: list[dict], from_step: int, **changes) -> list[dict]:
    """Copy of `stream` where each key in `changes` becomes f(step, old) from `from_step` on."""
    out = []
    for r in stream:
        r = dict(r)
        if r["step"] >= from_step:
            for k, f in changes.items():
                r[k] = f(r["step"], r.get(k))
        out.append(r)
    return out


def with_probe(stream: list[dict], scores: dict[int, float], rows: int = 48) -> list[dict]:
    """`stream` with the held-out probe's figures at the steps of `scores` (step 0 a record of its own, as
    training writes it: grpokit.training.probe)."""
    out = [{"step": 0, "probe/accuracy": scores[0], "probe/rows": rows, "probe/seconds": 9.0}] if 0 in scores else []
    for r in stream:
        extra = {"probe/accuracy": scores[r["step"]], "probe/rows": rows, "probe/seconds": 9.0} \
            if r["step"] in scores else {}
        out.append({**r, **extra})
    return out


def codes(findings) -> set[str]:
    return {f.code for f in findings}


def test_healthy_run_has_no_finding():
    assert diagnose(healthy(), healthy_samples()) == []


def test_healthy_runs_with_other_seeds_have_no_finding():
    for seed in range(1, 6):
        assert diagnose(healthy(seed=seed), healthy_samples()) == [], seed


CASES = [
    # (code, stream, samples, the step from which it must be reported)
    ("nan", alter(healthy(), 30, loss=lambda s, v: None), healthy_samples(), 30),
    ("nan", alter(healthy(), 30, kl=lambda s, v: "inf"), healthy_samples(), 30),
    # Every group all-right or all-wrong from step 20 on: no learning signal.
    ("zero_variance_groups", alter(healthy(), 20, frac_reward_zero_std=lambda s, v: 0.95), healthy_samples(), 24),
    # The reward stops moving after step 20.
    ("reward_plateau", alter(healthy(), 20, reward=lambda s, v: 0.9 + 0.005 * math.sin(s),
                             **{"rewards/math_correctness/mean": lambda s, v: 0.3}), healthy_samples(), 49),
    # kl jumps 30x at step 40 (still under the absolute bound): the Qwen3-0.6B-Base article's "KL突然爆炸".
    ("kl_spike", alter(healthy(), 40, kl=lambda s, v: 0.4), healthy_samples(), 40),
    # kl over the absolute bound.
    ("kl_spike", alter(healthy(), 12, kl=lambda s, v: 2.0), healthy_samples(), 12),
    # Length 60 -> 12 tokens (the Qwen3-4B/14B article's 2000 -> 300).
    ("length_collapse", alter(healthy(), 35, **{"completions/mean_length": lambda s, v: 12.0}), healthy_samples(), 37),
    ("truncation", alter(healthy(), 10, **{"completions/clipped_ratio": lambda s, v: 0.7}), healthy_samples(), 10),
    ("empty_completions", healthy(), [x if x["step"] < 25 else {**x, "completion": " \n"} for x in healthy_samples()], 25),
    ("repetition", healthy(), [x if x["step"] < 25 else {**x, "completion": "the answer is " * 20}
                               for x in healthy_samples()], 25),
    # Format learned (1.0) then lost.
    ("format_collapse", alter(healthy(), 45, **{"rewards/format/mean": lambda s, v: 0.1}), healthy_samples(), 47),
    # Total reward climbs on the format alone, correctness flat.
    ("reward_hacking_suspected", alter(healthy(), 1, **{"rewards/math_correctness/mean": lambda s, v: 0.2},
                                       reward=lambda s, v: 0.2 + 0.02 * s), healthy_samples(), 15),
    ("entropy_collapse", alter(healthy(), 30, entropy=lambda s, v: 0.01), healthy_samples(), 30),
    # Correctness learned (~0.55), then every group all-wrong from step 40.
    ("correctness_collapse", alter(healthy(), 40, **{"rewards/math_correctness/mean": lambda s, v: 0.02}),
     healthy_samples(), 43),
    # Every group tied from step 20 (loss and grad_norm 0, as TRL logs them then): nothing learned from step 22.
    ("nothing_learned", alter(healthy(), 20, frac_reward_zero_std=lambda s, v: 1.0, loss=lambda s, v: 0.0,
                              grad_norm=lambda s, v: 0.0), healthy_samples(), 22),
    # A bf16 sampler at its usual gap (0.03), then 0.2 per token from step 30: the policy drifted.
    ("sampler_mismatch", alter(alter(healthy(), 1, **{"sampling/sampling_logp_difference/mean": lambda s, v: 0.03,
                                                    "sampling/clipped_frac": lambda s, v: 0.01}), 30,
                               **{"sampling/sampling_logp_difference/mean": lambda s, v: 0.2,
                                  "sampling/clipped_frac": lambda s, v: 0.3}), healthy_samples(), 32),
    # The held-out probe (48 rows) holds near 60% for 20 steps, then falls to 30% at step 30.
    ("probe_drop", with_probe(healthy(), {0: 0.6, 10: 0.62, 20: 0.65, 30: 0.3, 40: 0.3}), healthy_samples(), 30),
    # The format reward never gets going: 0.05 of its full marks from the first step.
    ("format_never_learned", alter(healthy(), 1, **{"rewards/format/mean": lambda s, v: 0.05}), healthy_samples(),
     20),
    # The answer line never written: correctness 0 from the first step while format and length move (issue 68).
    ("correctness_never_moved", alter(healthy(), 1, **{"rewards/math_correctness/mean": lambda s, v: 0.0}),
     [{**x, "completion": "I think about it.", "rewards": {"math_correctness": 0.0, "format": 0.0}}
      for x in healthy_samples()], 3),
    # Tool task: 5% of tool calls fail, then 80% from step 30 (TRL's tools/failure_frequency).
    ("tool_failures_rising", alter(alter(healthy(), 1, **{"tools/failure_frequency": lambda s, v: 0.05}), 30,
                                   **{"tools/failure_frequency": lambda s, v: 0.8}), healthy_samples(), 30),
]


@pytest.mark.parametrize("code,stream,samples,step", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_pathology_gives_its_code(code, stream, samples, step):
    found = [f for f in diagnose(stream, samples) if f.code == code]
    assert found, f"{code} not reported; got {codes(diagnose(stream, samples))}"
    first = found[0]
    # Not before the pathology shows (a false alarm), and within 5 steps of it (the detectors' windows).
    assert step <= first.step <= step + 5, (first.step, step)
    d = first.as_dict()
    assert set(d) == {"code", "severity", "step", "message", "evidence"}
    assert d["severity"] in ("warning", "error") and d["evidence"] and "Fix" in d["message"]
    json.dumps(d)


def test_every_code_has_a_case():
    # (every code has a detector: detectors.py asserts it when it is imported)
    assert set(HEALTH_CODES) == {c[0] for c in CASES}


def test_eval_accuracy_falling_while_reward_climbs_is_reward_hacking():
    evals = [{"step": 10, "accuracy": 0.6}, {"step": 30, "accuracy": 0.7}, {"step": 50, "accuracy": 0.5}]
    found = [f for f in diagnose(healthy(), healthy_samples(), evals=evals) if f.code == "reward_hacking_suspected"]
    assert found and found[0].step == 50 and found[0].evidence["eval_best"]["step"] == 30


def test_a_condition_is_reported_once_per_episode():
    # kl spikes twice with a calm stretch between: two findings, not one per step.
    stream = alter(healthy(), 20, kl=lambda s, v: 2.0 if 20 <= s < 25 or 40 <= s < 43 else v)
    found = [f.step for f in diagnose(stream, healthy_samples()) if f.code == "kl_spike"]
    assert found[:1] == [20] and 40 in found and len(found) <= 3


def test_length_falling_from_truncated_rambling_is_not_a_collapse():
    stream = alter(healthy(), 1, **{"completions/mean_length": lambda s, v: 200.0 if s < 20 else 40.0,
                                   "completions/clipped_ratio": lambda s, v: 0.9 if s < 20 else 0.0})
    assert "length_collapse" not in codes(diagnose(stream, healthy_samples()))


def test_thresholds_come_from_the_recipe():
    stream = alter(healthy(), 10, **{"completions/clipped_ratio": lambda s, v: 0.2})
    assert "truncation" not in codes(diagnose(stream, healthy_samples()))
    assert "truncation" in codes(diagnose(stream, healthy_samples(), HealthConfig(truncation_frac=0.15)))


def test_repeated_share_handles_words_and_unspaced_text():
    assert repeated_share("one two three four five six seven eight nine ten", 4) == 0
    assert repeated_share("go go go go go go go go go go go go", 4) > 0.8
    assert repeated_share("答案是十二答案是十二答案是十二答案是十二", 4) > 0.5


def test_monitor_writes_health_jsonl_and_decides(tmp_path):
    cfg = HealthConfig.model_validate({"actions": {"kl_spike": "stop"}})
    printed = []
    mon = HealthMonitor(cfg, tmp_path, ["math_correctness", "format"], rollbacks_left=0, printer=printed.append)
    stream = alter(healthy(30), 12, **{"completions/clipped_ratio": lambda s, v: 0.9}, kl=lambda s, v: 5.0 if s >= 20 else v)
    decision = None
    for r in stream:
        decision = mon.observe(r, []) or decision
        if decision:
            break
    assert decision.action == "stop" and decision.finding.code == "kl_spike" and decision.finding.step == 20
    lines = [json.loads(l) for l in (tmp_path / "health.jsonl").read_text().splitlines()]
    assert [(l["code"], l["action"]) for l in lines] == [("truncation", "warn"), ("kl_spike", "stop")]
    assert all({"code", "severity", "step", "message", "evidence", "action"} <= set(l) for l in lines)
    assert any("kl_spike" in p for p in printed)


def test_rollback_past_the_budget_stops(tmp_path):
    cfg = HealthConfig.model_validate({"actions": {"nan": "rollback"}, "max_rollbacks": 1})
    mon = HealthMonitor(cfg, tmp_path, [], rollbacks_left=0, printer=lambda s: None)
    decision = mon.observe({"step": 1, "loss": None}, [])
    assert decision.action == "stop"
    assert "max_rollbacks=1 spent" in json.loads((tmp_path / "health.jsonl").read_text())["action"]


def _doctor(argv) -> int:
    args = build_parser().parse_args(["doctor", *argv])
    return args.func(args)


def test_doctor_json_is_empty_on_a_healthy_run(tmp_path, capsys):
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in healthy()))
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in healthy_samples()))
    assert _doctor([str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_doctor_reads_the_run_recipe_thresholds_and_eval_results(tmp_path, capsys):
    stream = alter(healthy(), 10, **{"completions/clipped_ratio": lambda s, v: 0.2})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stream))
    (tmp_path / "config.yaml").write_text("health:\n  truncation_frac: 0.15\nrewards:\n  - name: math_correctness\n")
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "results.json").write_text(json.dumps(  # the layout grpokit eval writes
        {"checkpoints": [{"step": 0, "heldout": {"accuracy": 0.5}}, {"step": 10, "heldout": {"accuracy": 0.7}},
                         {"step": 40, "heldout": {"accuracy": 0.4}, "train": {"accuracy": 0.9}}],
         "best": {"step": 10, "accuracy": 0.7}}))
    assert _doctor([str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"truncation", "reward_hacking_suspected"} <= {f["code"] for f in out}
    (tmp_path / "health.jsonl").write_text(json.dumps({"code": "kl_spike", "step": 7, "action": "rollback: restore "
                                                                   "checkpoint-5"}) + "\n")
    assert _doctor([str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "truncation" in text and "step 7: kl_spike -> rollback: restore checkpoint-5" in text
    assert [f.code for f in doctor_run(tmp_path)] == [f["code"] for f in out]
    assert load_evals(tmp_path) == [{"step": 0, "accuracy": 0.5}, {"step": 10, "accuracy": 0.7},
                                    {"step": 40, "accuracy": 0.4}]


@pytest.mark.parametrize("override,expected", [
    ("health.kl_maxx=1", ["health.kl_maxx", "did you mean 'kl_max'"]),
    ("health.actions.kl_spike=rolback", ["health.actions.kl_spike", "'warn', 'stop' or 'rollback'"]),
    ("health.actions.kl_spkie=stop", ["health.actions.kl_spkie", "did you mean 'kl_spike'"]),
])
def test_health_section_is_validated_with_fixes(override, expected):
    from pathlib import Path

    from grpokit.errors import GrpokitError
    from grpokit.recipe.load import load_recipe

    recipe = Path(__file__).resolve().parents[1] / "recipes" / "smollm2-arithmetic.yaml"
    with pytest.raises(GrpokitError) as exc:
        load_recipe(recipe, [override])
    for s in expected:
        assert s in exc.value.render()


def _reward_run(level, steps: int = 108, sigma: float = 0.06, seed: int = 0, every: int = 1) -> list[dict]:
    """A metrics stream whose reward is level(step) plus Gaussian noise (GRPO's per-step reward is noisy)."""
    rng = random.Random(seed)
    return [{"step": s, "reward": level(s) + rng.gauss(0, sigma)} for s in range(every, steps + 1, every)]


def _rising(s):  # the 108-step GPU run that fired reward_plateau 4 times: 0.05 -> 0.43
    return 0.05 + 0.38 * s / 108


PLATEAU_CASES = [
    # (level, noise, steps, logging every, seeds, plateau expected)
    (_rising, 0.06, 108, 1, range(10), False),  # a noisy steady climb: never a plateau
    (_rising, 0.10, 108, 1, range(10), False),  # ... with more noise
    (_rising, 0.06, 540, 5, range(5), False),  # the same climb logged every 5 steps (the trend is per step)
    (lambda s: 0.05 + 0.38 * min(s, 40) / 40, 0.01, 108, 1, range(5), True),  # climbs to step 40, then flat
    (lambda s: 0.3, 0.02, 108, 1, range(5), True),  # flat from the start
    (lambda s: 0.3 + 0.005 * math.sin(s), 0.0, 60, 1, range(1), True),  # flat and noiseless
    (lambda s: 0.6 - 0.004 * s, 0.02, 108, 1, range(3), True),  # falling: not rising either, reported
]


@pytest.mark.parametrize("level,sigma,steps,every,seeds,expected", PLATEAU_CASES,
                         ids=["climb", "climb-noisy", "climb-every-5", "climb-then-flat", "flat", "noiseless", "falling"])
def test_reward_plateau_follows_the_trend(level, sigma, steps, every, seeds, expected):
    for seed in seeds:
        found = [f for f in diagnose(_reward_run(level, steps, sigma, seed, every), []) if f.code == "reward_plateau"]
        assert bool(found) == expected, (seed, [(f.step, f.evidence) for f in found])
        for f in found:
            assert f.evidence["fitted_change"] + 2 * f.evidence["change_error"] <= f.evidence["threshold"] + 1e-3


def _format_run(values, scale: float, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Metrics whose format reward mean follows values(step) (a share of full marks) times `scale`, and samples
    whose completions earn full marks (`scale`) or 0."""
    rng = random.Random(seed)
    metrics, samples = [], []
    for s in range(1, 61):
        share = values(s)
        metrics.append({"step": s, "reward": 0.5, "rewards/math_correctness/mean": 0.5, "rewards/format/mean": share * scale})
        samples += [{"step": s, "completion": "x", "rewards": {"format": scale if rng.random() < share else 0.0}}
                    for _ in range(4)]
    return metrics, samples


FORMAT_CASES = [
    # (share of full marks per step, full marks, with samples, collapse expected)
    (lambda s: min(1.0, s / 20) if s < 45 else 0.1, 0.2, True, True),  # the article's 0.2 scale: 0.2 -> 0.02
    (lambda s: min(1.0, s / 20) if s < 45 else 0.1, 0.2, False, True),  # ... judged from the metrics alone
    (lambda s: min(1.0, s / 20) if s < 45 else 0.1, 1.0, True, True),  # the built-in 0/1 format reward
    (lambda s: min(1.0, s / 20), 0.2, True, False),  # learned and kept
    (lambda s: min(1.0, s / 20) if s < 45 else 0.75, 0.2, True, False),  # a dip to 0.15: not a collapse
    (lambda s: 0.04 if s % 3 else 0.01, 1.0, True, False),  # never learned: noise near 0 of a 0/1 reward
]


@pytest.mark.parametrize("values,scale,with_samples,expected", FORMAT_CASES,
                         ids=["scale-0.2", "scale-0.2-no-samples", "scale-1", "kept", "dip", "never-learned"])
def test_format_collapse_is_relative_to_full_marks(values, scale, with_samples, expected):
    metrics, samples = _format_run(values, scale)
    found = [f for f in diagnose(metrics, samples if with_samples else [], reward_names=["math_correctness", "format"])
             if f.code == "format_collapse"]
    assert bool(found) == expected, [(f.step, f.evidence) for f in found]
    if expected:
        assert found[0].step >= 45 and found[0].evidence["full_marks"] == pytest.approx(scale, rel=0.05)


# math_correctness per step, read off the progress lines of two real 20/40-step runs of the demo recipe
# (2026-11-30, SmolLM2-135M, 2 prompts x 8 completions): DEGRADING at lr 1e-4 constant (held-out accuracy
# 8% -> 2%, entropy 0.67 -> 0.25, format 100%: no other detector fired); LEARNING is `grpokit demo` with
# seed 1 (12% -> 31% held out), the healthy run whose dips come closest to the threshold.
DEGRADING = [0.0, 0.0, 0.0, 0.0, 0.0, 0.031, 0.062, 0.125, 0.5, 0.0, 0.5, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0,
             0.0, 0.0]
LEARNING = [0.0, 0.125, 0.0, 0.188, 0.312, 0.438, 0.125, 0.438, 0.188, 0.438, 0.312, 0.625, 0.062, 1.0, 0.312,
            0.188, 0.375, 0.0, 0.125, 0.688, 0.75, 0.125, 0.938, 0.531, 0.5, 0.5, 0.625, 0.531, 1.0, 0.312, 0.719,
            0.625, 1.0, 0.719, 0.844, 0.688, 0.625, 0.656, 0.469, 0.625]


# The countdown reward per step of a real 45-step GRPO run from a countdown SFT model (2026-12-05, SmolLM2-135M,
# 2 prompts x 8 completions, lr 3e-6): nothing learned or lost (held-out 12.5% -> 15% at every checkpoint), the step
# means spread by 0.085 around 0.15 because the prompts' difficulty differs; the best 5-step window alone (0.22-0.28)
# made correctness_collapse fire three times in it.
COUNTDOWN_NOISE = [0.094, 0.306, 0.131, 0.05, 0.275, 0.194, 0.062, 0.162, 0.113, 0.125, 0.062, 0.103, 0.334, 0.188,
                   0.056, 0.062, 0.188, 0.194, 0.062, 0.062, 0.044, 0.212, 0.362, 0.187, 0.175, 0.181, 0.062, 0.175,
                   0.169, 0.312, 0.225, 0.181, 0.05, 0.131, 0.194, 0.237, 0.075, 0.044, 0.141, 0.163, 0.081, 0.05,
                   0.081, 0.106, 0.062]


def _real(correct: list[float]) -> list[dict]:
    return [{"step": i + 1, "reward": c + 0.2, "rewards/math_correctness/mean": c, "rewards/format/mean": 0.2}
            for i, c in enumerate(correct)]


def test_correctness_collapse_on_real_runs():
    found = [f for f in diagnose(_real(DEGRADING), []) if f.code == "correctness_collapse"]
    assert [f.step for f in found] == [17]
    # The fall began after the best 5-step window before the recent one (steps 8-12, mean 0.275): a rollback
    # restores a checkpoint of step 11 or earlier (grpokit.training.rollback).
    assert found[0].since == 13 and found[0].evidence == {**found[0].evidence, "peak_mean": 0.275, "recent_mean": 0.1}
    assert [f for f in diagnose(_real(LEARNING), []) if f.code == "correctness_collapse"] == []
    assert [f.step for f in diagnose(_real(COUNTDOWN_NOISE), []) if f.code == "correctness_collapse"] == []


# ---------------------------------------------------------------- nothing_learned on real records
FIXTURE_RUN = Path(__file__).parent / "fixtures" / "run_before_layout"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_nothing_learned_on_a_real_run_where_every_group_tied():
    """The fixture's metrics are a real tiny-model run (math_correctness on arithmetic): 6 steps, every group tied,
    loss 0.0 and grad_norm 0.0. Reported at step 3, once (the condition never clears), with the too-hard fix."""
    found = [f for f in diagnose(_records(FIXTURE_RUN / "metrics.jsonl"), [], reward_names=["math_correctness"])
             if f.code == "nothing_learned"]
    assert [(f.step, f.since, f.severity) for f in found] == [(3, 1, "error")]
    f = found[0]
    assert f.evidence["frac_reward_zero_std"] == [1.0, 1.0, 1.0] and f.evidence["grad_norm"] == [0.0, 0.0, 0.0]
    assert "nothing was learned in steps 1-3" in f.message and "too hard" in f.message
    assert "grpokit preflight RECIPE" in f.message and "num_generations" in f.message and "graded reward" in f.message


@pytest.mark.parametrize("zero_std, fires", [
    ([1.0, 1.0, 1.0], True),
    ([1.0, 1.0, 0.5], False),   # one step with a spread in half its groups: something was learned
    ([1.0, 0.95, 1.0], False),  # one group of 20 carried signal
    ([0.0, 1.0, 1.0, 1.0], True),
])
def test_nothing_learned_needs_every_group_tied_over_the_window(zero_std, fires):
    stream = [{"step": i + 1, "loss": 0.0, "reward": 0.5, "frac_reward_zero_std": z} for i, z in enumerate(zero_std)]
    found = [f.code for f in diagnose(stream, []) if f.code == "nothing_learned"]
    assert bool(found) is fires


def test_nothing_learned_says_too_easy_when_every_completion_is_right():
    stream = [{"step": i, "frac_reward_zero_std": 1.0, "rewards/math_correctness/mean": 1.0, "reward": 1.0}
              for i in range(1, 4)]
    (f,) = [f for f in diagnose(stream, [], reward_names=["math_correctness"]) if f.code == "nothing_learned"]
    assert "too easy" in f.message and "too hard" not in f.message


def test_doctor_says_nothing_was_learned(tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    assert _doctor([str(run)]) == 0
    out = capsys.readouterr().out
    assert "nothing_learned" in out and "nothing was learned in steps 1-3" in out


# ---------------------------------------------------------------- sampler_mismatch
def test_a_bf16_samplers_usual_gap_is_no_mismatch():
    # 0.027 per token is what a bf16 sampler of the float32 embedded model measured: the precision, not a problem
    stream = alter(healthy(), 1, **{"sampling/sampling_logp_difference/mean": lambda s, v: 0.027 + 0.01 * (s % 3)})
    assert "sampler_mismatch" not in codes(diagnose(stream, healthy_samples()))
    (f,) = [f for f in diagnose(alter(stream, 40, **{"sampling/sampling_logp_difference/mean": lambda s, v: 0.15}),
                                healthy_samples()) if f.code == "sampler_mismatch"]
    assert f.step == 42 and "generation.sampler_dtype: same" in f.message  # the 5-step mean passes 0.1 at 42
