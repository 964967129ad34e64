"""Skipping zero-advantage completions leaves TRL's loss and gradient unchanged (tiny real model, real trainer):
a trainer with the SkipNoSignal loss step against the same trainer without it, on the same weights."""
from __future__ import annotations

import pytest
import torch

from conftest import grpo_trainer, trl_batch

from grpokit.internals import metric_values, wrap_method
from grpokit.training.no_signal import SkipNoSignal, applies, keep_rows, signal_rows
from grpokit.training.trainer import Parts

PAD = 0


def _trainer(model_dir, tokenizer, tmp_path, skip: bool, **cfg):
    return grpo_trainer(model_dir, tokenizer, tmp_path, Parts(loss_steps=(SkipNoSignal(),) if skip else ()),
                        num_generations=2, per_device_train_batch_size=6, max_completion_length=8, **cfg)


def _inputs(advantages: list[float]) -> dict:
    return trl_batch(advantages, PAD)


def _loss_and_grads(trainer, inputs):
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, inputs)  # the Trainer entry point; TRL's _compute_loss behind it
    loss.backward()
    return loss.detach(), [p.grad.clone() if p.grad is not None else None for p in trainer.model.parameters()]


@pytest.mark.parametrize("advantages", [
    [0.0, 1.2, 0.0, -0.7, 0.0, 0.4],   # two groups with signal, one mixed
    [0.0, 0.0, 0.0, 0.0, 1.0, -1.0],  # only the last group (the longest prompt among them is trimmed away)
    [0.5, -0.5, 1.0, -1.0, 0.3, -0.3],  # every row: the filter changes nothing
])
def test_loss_and_gradient_equal_trls(tmp_path, tiny_model_dir, tokenizer, advantages):
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, True, beta=0.0, loss_type="dapo")
    inputs = _inputs(advantages)
    ref_loss, ref_grads = _loss_and_grads(_trainer(tiny_model_dir, tokenizer, tmp_path, False, beta=0.0,
                                                   loss_type="dapo"), inputs)
    loss, grads = _loss_and_grads(trainer, inputs)
    assert torch.allclose(loss, ref_loss, rtol=1e-5, atol=1e-7)
    compared = 0
    for g, r in zip(grads, ref_grads):
        assert (g is None) == (r is None)
        if r is not None:
            assert torch.allclose(g, r, rtol=1e-4, atol=1e-7)
            compared += 1
    assert compared > 0 and any(r.abs().sum() > 0 for r in ref_grads if r is not None)
    assert metric_values(trainer, "grpokit/trained_frac")[-1] == pytest.approx(
        sum(a != 0 for a in advantages) / len(advantages))


def test_a_micro_batch_without_signal_costs_no_pass_and_gives_zero_gradients(tmp_path, tiny_model_dir, tokenizer):
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, True, beta=0.0, loss_type="dapo")
    calls = []
    wrap_method(trainer, "logps", lambda fn: lambda *a, **k: calls.append(1))  # would be the forward pass
    loss, grads = _loss_and_grads(trainer, _inputs([0.0] * 6))
    assert calls == [] and float(loss) == 0.0
    assert all(g is not None and not g.any() for g in grads)  # zero, as TRL's own pass would have given
    assert metric_values(trainer, "grpokit/trained_frac") == [0.0]


@pytest.mark.parametrize("loss_type,beta,expected", [
    ("dapo", 0.0, True), ("cispo", 0.0, True), ("vespo", 0.0, True),
    ("dapo", 0.04, False),  # the KL term has a gradient on zero-advantage rows
    ("grpo", 0.0, False), ("bnpo", 0.0, False), ("dr_grpo", 0.0, False),  # normalisers count the micro-batch
])
def test_applies_only_where_exact(loss_type, beta, expected):
    assert applies(loss_type, beta) is expected


@pytest.mark.parametrize("cfg", [
    {"loss_type": "grpo"},  # its normaliser counts the micro-batch's rows
    {"loss_type": "dapo", "top_entropy_quantile": 0.5},  # the entropy threshold is a quantile over the micro-batch
])
def test_stands_aside_where_not_exact(tmp_path, tiny_model_dir, tokenizer, cfg):
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, True, beta=0.0, **cfg)
    inputs = _inputs([0.0, 1.2, 0.0, -0.7, 0.0, 0.4])
    ref_loss, _ = _loss_and_grads(_trainer(tiny_model_dir, tokenizer, tmp_path, False, beta=0.0, **cfg), inputs)
    loss, _ = _loss_and_grads(trainer, inputs)
    assert float(loss) == float(ref_loss)
    assert metric_values(trainer, "grpokit/trained_frac") == []


def test_keep_rows_trims_padding_columns():
    inputs = _inputs([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])  # row 3: prompt of 2 tokens, completion of 4
    keep = signal_rows(inputs["advantages"])
    out = keep_rows(inputs, keep)
    assert out["prompt_ids"].shape == (1, 2) and out["completion_ids"].shape == (1, 4)
    assert out["completion_mask"].all() and out["prompt_mask"].all()
    assert int(out["num_items_in_batch"]) == int(inputs["num_items_in_batch"])  # the normaliser is untouched
    assert signal_rows(torch.tensor([[0.0, 0.0], [0.0, 2e-6]])).tolist() == [False, True]


def test_stands_aside_with_several_processes(tmp_path, tiny_model_dir, tokenizer, monkeypatch):
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, True, beta=0.0, loss_type="dapo")
    monkeypatch.setattr(type(trainer.accelerator), "num_processes", property(lambda self: 2))
    _loss_and_grads(trainer, _inputs([0.0] * 6))  # DDP ranks must all run the pass
    assert metric_values(trainer, "grpokit/trained_frac") == []
