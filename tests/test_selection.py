"""Signal-aware prompt selection and refill: bands, the sampler, TRL's order when off, online updates from a real
tiny training run, refill on a real trainer, its multi-process layout check, shuffle_dataset reaching GRPOConfig."""
from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml
from conftest import grpo_trainer, write_jsonl
from trl.trainer.utils import RepeatSampler

from grpokit.families.math import generate
from grpokit.errors import GrpokitError
from grpokit.internals import generation_io, metric_values, wrap_method
from grpokit.recipe.load import load_recipe
from grpokit.recipe.schema import Recipe
from grpokit.recipe.selection_section import SelectionConfig
from grpokit.recipe.trl_args import grpo_args
from grpokit.report.sections import curves_section
from grpokit.training.no_signal import SkipNoSignal
from grpokit.training.refill import Selection, group_signal, merge_rows, selection_of
from grpokit.training.trainer import Parts
from grpokit.training.selection import STATE_FILE, PassRates, Selector, SignalSampler, choose, prompt_key


# ---------------------------------------------------------------- bands
@pytest.mark.parametrize("observed, band", [
    ([], "unseen"),                  # never sampled
    ([0.0], "never_solved"),         # one all-wrong group
    ([1.0], "always_solved"),        # one all-right group
    ([0.5], "mixed"),                # half right: a learning signal
    ([0.125, 0.0], "mixed"),         # 1 of 8 right, then none: EMA 0.0625, still above the 0.05 margin
    ([0.0625, 0.0], "never_solved"),  # EMA 0.03125: within the margin of 0
    ([0.98], "always_solved"),       # within the margin of 1
    ([1.5], "always_solved"),        # a reward above 1 is clipped
])
def test_bands(observed, band):
    rates = PassRates(1, ema=0.5, band_margin=0.05)
    for r in observed:
        rates.observe(0, r)
    assert rates.band(0) == band


def _rates(bands: dict[str, int]) -> PassRates:
    """Prompts 0.. in the given bands, in order."""
    value = {"never_solved": 0.0, "mixed": 0.5, "always_solved": 1.0}
    rates = PassRates(sum(bands.values()))
    i = 0
    for band, n in bands.items():
        for _ in range(n):
            if band != "unseen":
                rates.observe(i, value[band])
            i += 1
    return rates


def test_choice_prefers_mixed_explores_unseen_and_revisits_the_rest():
    rates = _rates({"mixed": 50, "unseen": 50, "never_solved": 50, "always_solved": 50})
    rng = random.Random(0)
    counts = Counter(rates.band(i) for _ in range(500) for i in choose(rates, 4, rng, (0.6, 0.3)))
    total = sum(counts.values())
    assert counts["mixed"] / total == pytest.approx(0.6, abs=0.04)
    assert counts["unseen"] / total == pytest.approx(0.3, abs=0.04)
    assert (counts["never_solved"] + counts["always_solved"]) / total == pytest.approx(0.1, abs=0.03)


@pytest.mark.parametrize("bands, k, shares, exclude, expect", [
    # no mixed prompt yet: its share goes to the other bands, all 3 unseen ones fill first most of the time
    ({"unseen": 3, "never_solved": 3}, 6, (0.6, 0.3), (), {"unseen": 3, "never_solved": 3}),
    # fewer prompts than asked: every prompt once, no repeats
    ({"mixed": 2}, 5, (0.6, 0.3), (), {"mixed": 2}),
    # excluded prompts are never chosen
    ({"mixed": 3, "unseen": 1}, 4, (1.0, 0.0), (0, 1), {"mixed": 1, "unseen": 1}),
    # only zero-share bands left: still drawn rather than an empty batch
    ({"always_solved": 2}, 2, (0.7, 0.3), (), {"always_solved": 2}),
])
def test_choice_edges(bands, k, shares, exclude, expect):
    rates = _rates(bands)
    picked = choose(rates, k, random.Random(1), shares, exclude)
    assert len(picked) == len(set(picked)) and not set(picked) & set(exclude)
    assert Counter(rates.band(i) for i in picked) == expect


def test_choice_is_seeded():
    rates = _rates({"mixed": 10, "unseen": 10, "never_solved": 10})
    a = [choose(rates, 3, random.Random(7), (0.6, 0.3)) for _ in range(3)]
    b = [choose(rates, 3, random.Random(7), (0.6, 0.3)) for _ in range(3)]
    assert a == b


@pytest.mark.parametrize("a, b, same", [
    ("1 + 1 =", "1 + 1 =", True),  # plain prompts are their own key
    ([{"role": "user", "content": "hi"}], [{"content": "hi", "role": "user"}], True),  # message key order ignored
    ([{"role": "user", "content": "hi"}], [{"role": "user", "content": "ho"}], False),
])
def test_prompt_key(a, b, same):
    assert (prompt_key(a) == prompt_key(b)) is same


def test_shares_above_one_are_refused():
    with pytest.raises(ValueError, match="above 1"):
        SelectionConfig(mixed_share=0.8, unseen_share=0.3)


def _selector(n: int, **cfg) -> Selector:
    return Selector(SelectionConfig(enabled=True, **cfg), [f"p{i}" for i in range(n)], None, 0, "ok", {"ok": 1.0})


def test_sampler_keeps_trls_layout_and_is_seeded():
    s = _selector(7)
    sampler = SignalSampler(s, mini_repeat_count=2, batch_size=3, repeat_count=2)
    order = list(sampler)
    assert len(order) == len(sampler) == len(RepeatSampler(list(range(7)), 2, 3, 2))
    chunks = [order[i:i + 12] for i in range(0, len(order), 12)]  # 3 prompts x 2 generations x 2 repeats
    for c in chunks:
        assert c[:6] == c[6:] and c[0::2] == c[1::2] and len(set(c)) == 3
    sampler.set_epoch(0)
    assert list(sampler) == order  # the same epoch and estimates choose the same prompts


def test_observe_updates_the_groups_prompts_and_state_round_trips(tmp_path):
    s = _selector(4)
    # two groups of 3: p1 half right (mixed), p3 all wrong; an unknown prompt is ignored
    s.observe(["p1"] * 3 + ["p3"] * 3 + ["zz"] * 3, {"ok": [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1, 1, 1]}, 3)
    assert [s.rates.band(i) for i in range(4)] == ["unseen", "mixed", "unseen", "never_solved"]
    s.save(tmp_path)
    t = _selector(4)
    assert t.load(tmp_path) and t.rates.rate == s.rates.rate and t.rates.seen == [0, 1, 0, 1]
    assert not _selector(5).load(tmp_path / "missing")


def test_without_a_correctness_reward_a_tie_is_banded_by_the_best_total_seen():
    s = Selector(SelectionConfig(), ["a", "b", "c"], None, 0, None, {"x": 1.0})
    s.observe(["a", "a", "b", "b", "c", "c"], {"x": [0.2, 0.7, 0.7, 0.7, 0.1, 0.1]}, 2)
    assert [s.rates.band(i) for i in range(3)] == ["mixed", "always_solved", "never_solved"]


def test_seeded_from_preflight(tmp_path):
    report = {"per_prompt": [{"question": "q0", "correct_rate": 0.5, "zero_variance": False},
                             {"question": "q2", "correct_rate": None, "zero_variance": True},  # unknown: not seeded
                             {"question": "q1", "correct_rate": 0.0, "zero_variance": True}]}
    path = tmp_path / "preflight.json"
    path.write_text(json.dumps(report))
    s = Selector(SelectionConfig(), ["p0", "p1", "p2"], ["q0", "q1", "q2"], 0, "ok", {"ok": 1.0})
    assert s.seed_from_preflight(path) == 2
    assert [s.rates.band(i) for i in range(3)] == ["mixed", "never_solved", "unseen"]


# ---------------------------------------------------------------- on a real trainer
def _trainer(model_dir, tokenizer, tmp_path, prompts: list[str], reward, selector: Selector | None = None,
             loss_steps: tuple = (), **cfg):
    parts = Parts(selection=Selection(selector) if selector is not None else None, loss_steps=loss_steps)
    return grpo_trainer(model_dir, tokenizer, tmp_path, parts, prompts=prompts, reward=reward, num_generations=2,
                        per_device_train_batch_size=4, max_completion_length=6, seed=3, **cfg)


def _tie(completions, **_):
    return [0.0] * len(completions)


def _spread_on_b(prompts, completions, **_):
    """A spread inside each group of prompts starting with 'B'; prompts starting with 'A' tie at 0."""
    return [float(i % 2) if p.startswith("B") else 0.0 for i, p in enumerate(prompts)]


@pytest.mark.parametrize("shuffle", [True, False])
def test_off_is_trls_own_sampler_and_order(tmp_path, tiny_model_dir, tokenizer, shuffle):
    prompts = [f"A {i}" for i in range(10)]
    trainer, on = (_trainer(tiny_model_dir, tokenizer, tmp_path, prompts, _tie, shuffle_dataset=shuffle,
                            selector=Selector(SelectionConfig(enabled=enabled), prompts, None, 3, None, {"_tie": 1.0}))
                   for enabled in (False, True))
    sampler = trainer._get_train_sampler()
    assert type(sampler) is RepeatSampler
    assert list(sampler) == list(RepeatSampler(trainer.train_dataset, 2, 2, 1, shuffle=shuffle, seed=3))
    assert isinstance(on._get_train_sampler(), SignalSampler)


def test_refill_generates_more_groups_until_the_batch_has_signal(tmp_path, tiny_model_dir, tokenizer):
    prompts = [f"A {i}" for i in range(6)] + [f"B {i}" for i in range(6)]
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, prompts, _spread_on_b, beta=0.0, loss_type="dapo",
                       selector=Selector(SelectionConfig(refill=True, refill_max_rounds=8), prompts, None, 3, None,
                                         {"_spread_on_b": 1.0}))
    inputs = [{"prompt": p} for p in ("A 0", "A 0", "A 1", "A 1")]  # both groups tie
    batch = trainer._generate_and_score_completions(inputs)
    assert batch["completion_ids"].shape[0] == 4 and group_signal(batch["advantages"], 2).all()
    assert int(batch["num_items_in_batch"]) == int(batch["completion_mask"].sum())
    assert batch["prompt_ids"].shape == batch["prompt_mask"].shape
    rounds = metric_values(trainer, "grpokit/refill/rounds")[0]
    assert rounds >= 1 and metric_values(trainer, "grpokit/refill/extra_groups") == [2 * rounds]
    assert metric_values(trainer, "grpokit/refill/discarded_tokens")[0] > 0  # at least the two tied groups
    assert metric_values(trainer, "grpokit/signal_groups") == [1.0]
    # TRL's pre-filter figure: one value per generation batch, the step's own (all tied) among them
    zero_std = metric_values(trainer, "frac_reward_zero_std")
    assert len(zero_std) == rounds + 1 and zero_std[0] == 1.0


def test_refill_with_nothing_to_find_trains_the_ties_and_logs_the_waste(tmp_path, tiny_model_dir, tokenizer):
    prompts = [f"A {i}" for i in range(8)]
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, prompts, _tie,
                       selector=Selector(SelectionConfig(refill=True, refill_max_rounds=2), prompts, None, 3, None,
                                         {"_tie": 1.0}))
    batch = trainer._generate_and_score_completions([{"prompt": p} for p in ("A 0", "A 0", "A 1", "A 1")])
    assert batch["completion_ids"].shape[0] == 4 and not group_signal(batch["advantages"], 2).any()
    assert metric_values(trainer, "grpokit/refill/rounds") == [2]
    assert metric_values(trainer, "grpokit/refill/extra_groups") == [4]
    assert metric_values(trainer, "grpokit/signal_groups") == [0.0]
    assert trainer.selection.selector.rates.shares()["never_solved"] == pytest.approx(6 / 8)  # every group generated counts


def test_refill_upfront_generates_every_group_in_one_call(tmp_path, tiny_model_dir, tokenizer):
    prompts = [f"A {i}" for i in range(6)] + [f"B {i}" for i in range(6)]
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, prompts, _spread_on_b, beta=0.0, loss_type="dapo",
                       selector=Selector(SelectionConfig(enabled=False, refill=True, refill_max_rounds=3,
                                                         refill_upfront=True), prompts, None, 3, None,
                                         {"_spread_on_b": 1.0}))
    calls = []

    def counted(generate):
        def call(*a, **k):
            out = generate(*a, **k)
            calls.append(len(generation_io(a, out)[0]))  # prompts (one per completion) in this generation call
            return out
        return call

    wrap_method(trainer, "generation", counted)
    batch = trainer._generate_and_score_completions([{"prompt": p} for p in ("A 0", "A 0", "A 1", "A 1")])
    assert calls == [16]  # the step's 2 groups and 3 rounds of 2, in one generation call
    assert batch["completion_ids"].shape[0] == 4 and int(batch["num_items_in_batch"]) == int(batch["completion_mask"].sum())
    assert metric_values(trainer, "grpokit/refill/rounds") == [3]
    assert metric_values(trainer, "grpokit/refill/extra_groups") == [6]
    # The 6 refill prompts come from A 2-5 and B 0-5, so at least 2 are 'B' (a spread): the step trains on those.
    assert group_signal(batch["advantages"], 2).all() and metric_values(trainer, "grpokit/signal_groups") == [1.0]
    assert len(metric_values(trainer, "frac_reward_zero_std")) == 1  # TRL scored one generation batch
    assert trainer.selection.selector.rates.shares()["unseen"] == pytest.approx(4 / 12)  # all 8 groups updated the estimates


def test_merge_rows_keeps_trls_padding_sides():
    a = {"prompt_ids": torch.tensor([[0, 5], [6, 7]]), "prompt_mask": torch.tensor([[0, 1], [1, 1]]),
         "completion_ids": torch.tensor([[8, 0], [9, 9]]), "completion_mask": torch.tensor([[1, 0], [1, 1]]),
         "advantages": torch.tensor([1.0, -1.0]), "num_items_in_batch": torch.tensor(3)}
    b = {"prompt_ids": torch.tensor([[4, 4, 4]]), "prompt_mask": torch.tensor([[1, 1, 1]]),
         "completion_ids": torch.tensor([[3, 3, 3]]), "completion_mask": torch.tensor([[1, 1, 1]]),
         "advantages": torch.tensor([0.5]), "num_items_in_batch": torch.tensor(3)}
    out = merge_rows([(a, torch.tensor([1])), (b, torch.tensor([0]))], pad_id=0)
    assert out["prompt_ids"].tolist() == [[0, 6, 7], [4, 4, 4]]  # left-padded
    assert out["completion_ids"].tolist() == [[9, 9, 0], [3, 3, 3]]  # right-padded
    assert out["completion_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert out["advantages"].tolist() == [-1.0, 0.5] and int(out["num_items_in_batch"]) == 5


def _recipe(tmp_path: Path, model_dir: Path, **extra) -> Path:
    data = write_jsonl(tmp_path / "train.jsonl", generate(12, seed=5))
    raw = {"model": {"name": str(model_dir)},
           "data": {"train": str(data), "eval_fraction": 0.25, "template": "plain_en"},
           "rewards": [{"name": "math_correctness"}, {"name": "format", "weight": 0.5}],
           "train": {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4,
                     "max_completion_length": 6, "max_steps": 2, "save_steps": 1, "logging_steps": 1}, **extra}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_refill_on_several_processes_needs_whole_groups_per_process():
    from datasets import Dataset

    recipe = Recipe.model_validate({"data": {"train": "x"}, "rewards": [{"name": "math_correctness"}],
                                    "selection": {"refill": True}})
    dataset = Dataset.from_list([{"prompt": p} for p in ("A 0", "A 1")])
    # 4 completions per process per step in groups of 2: whole groups on each of 2 processes
    selection_of(recipe, dataset, 2)
    # groups of 4, trl.generation_batch_size 4 over 2 processes (per_device 2): each process generates 2 completions
    # per round, half a group (the batch geometry is the recipe's: grpokit.recipe.batch_geometry)
    odd = recipe.model_copy(update={"train": recipe.train.model_copy(update={"per_device_train_batch_size": 2,
                                                                            "num_generations": 4}),
                                    "trl": {"generation_batch_size": 4}})
    with pytest.raises(GrpokitError) as err:
        selection_of(odd, dataset, 2)
    assert "would span two processes" in str(err.value) and "multiple of 4" in err.value.problems[0].fix
    selection_of(odd.model_copy(update={"selection": SelectionConfig(enabled=True)}), dataset, 2)


@pytest.mark.parametrize("setting, expected", [("true", True), ("false", False)])
def test_shuffle_dataset_reaches_grpoconfig(tmp_path, tiny_model_dir, setting, expected):
    recipe = load_recipe(_recipe(tmp_path, tiny_model_dir), [f"train.shuffle_dataset={setting}"])
    assert grpo_args(recipe, tmp_path / "run").shuffle_dataset is expected


@pytest.mark.parametrize("target, adaptive", [(None, False), (0.3, True)])
def test_entropy_target_turns_on_trls_adaptive_entropy(tmp_path, tiny_model_dir, target, adaptive):
    recipe = load_recipe(_recipe(tmp_path, tiny_model_dir), [f"train.entropy_target={target}"] if target else [])
    args = grpo_args(recipe, tmp_path / "run")
    assert args.use_adaptive_entropy is adaptive and (not adaptive or args.entropy_target == target)


def test_skip_no_signal_stands_aside_under_an_entropy_bonus(tmp_path, tiny_model_dir, tokenizer):
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, ["A 0", "A 1"], _tie, beta=0.0, loss_type="dapo",
                       use_adaptive_entropy=True, loss_steps=(SkipNoSignal(),))
    batch = trainer._generate_and_score_completions([{"prompt": p} for p in ("A 0", "A 0", "A 1", "A 1")])
    trainer.compute_loss(trainer.model, batch)  # the bonus has a gradient on tied rows: TRL's full pass runs
    assert metric_values(trainer, "grpokit/trained_frac") == []


def test_two_real_steps_update_the_estimates_and_log_the_bands(tmp_path, tiny_model_dir):
    from grpokit.cli import main

    recipe = _recipe(tmp_path, tiny_model_dir, selection={"enabled": True})
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2] and set(metrics[0]) >= {"probe/accuracy"}  # 0: the probe's
    metrics = metrics[1:]
    for m in metrics:
        shares = [m[f"grpokit/bands/{b}"] for b in ("unseen", "never_solved", "mixed", "always_solved")]
        assert sum(shares) == pytest.approx(1.0) and "grpokit/signal_groups" in m
    # A random tiny model never answers: each step's 2 groups land in never_solved (9 training prompts).
    assert metrics[0]["grpokit/bands/never_solved"] == pytest.approx(2 / 9)
    state = json.loads((run / "checkpoints" / "checkpoint-2" / STATE_FILE).read_text())
    assert sum(state["seen"]) == 4  # 2 steps x 2 groups, each counted once
    assert metrics[1]["grpokit/bands/never_solved"] == pytest.approx(sum(1 for n in state["seen"] if n) / 9)
    html, images = curves_section(metrics, None, tmp_path)
    assert "selection.png" in images  # the report draws the bands

    # Resume from step 1: the estimates come back from checkpoint-1 (2 groups) and step 2 adds its 2 again.
    shutil.rmtree(run / "checkpoints" / "checkpoint-2")
    assert main(["train", "--resume", str(run)]) == 0
    assert sum(json.loads((run / "checkpoints" / "checkpoint-2" / STATE_FILE).read_text())["seen"]) == 4


def test_refill_upfront_trains_from_the_cli(tmp_path, tiny_model_dir):
    from grpokit.cli import main

    recipe = _recipe(tmp_path, tiny_model_dir, selection={"enabled": True, "refill": True, "refill_max_rounds": 1,
                                                          "refill_upfront": True})
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit"]) == 0
    metrics = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()][1:]  # [0]: the probe's
    assert [m["grpokit/refill/extra_groups"] for m in metrics] == [2, 2]  # every step, one round of 2 groups
    state = json.loads((run / "checkpoints" / "checkpoint-2" / STATE_FILE).read_text())
    assert sum(state["seen"]) == 8  # 2 steps x (2 own + 2 refill groups): the estimates saw every row
