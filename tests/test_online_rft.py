"""Online RFT (train.algorithm: rft, grpokit.training.online_rft): its loss is the SFT loss of the step's right
completions, as one SFT batch of them (tiny real model, real trainer); `grpokit train` runs it from a recipe; the
recipe check refuses what it cannot do.

Why the loss and its gradient, not the weights after a step: Adam's first step moves each weight by about the
learning rate times the sign of its gradient, so two losses that differ by a factor give the same first update; the
loss and gradient are where a wrong normalisation shows."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import grpo_trainer, make_recipe, trl_batch

from grpokit.training.online_rft import RIGHT, RIGHT_TOKENS, RFTLoss
from grpokit.training.trainer import Parts

PAD = 0
RIGHT_ROWS = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]


def _rft_batch(right: list[float]) -> dict:
    batch = trl_batch([0.0] * len(right), PAD)
    r = torch.tensor(right)
    batch[RIGHT] = r
    batch[RIGHT_TOKENS] = ((batch["completion_mask"].sum(1).float() * r).sum()).expand(len(right)).clone()
    return batch


def _sft_loss(model, batch: dict, right: list[float]):
    """What `grpokit sft` computes on the right rows as one batch: transformers' causal-LM loss with the prompt
    tokens masked (completion_only_loss), the sum of the completion tokens' NLL over their number. The rows keep
    the trainer's layout (prompts left-padded, completions right-padded): a layout SFT would pad differently, which
    moves the float rounding, not the loss."""
    rows = torch.tensor([bool(r) for r in right])
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)[rows]
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)[rows]
    labels = torch.cat([torch.full_like(batch["prompt_ids"], -100),
                        batch["completion_ids"].masked_fill(batch["completion_mask"] == 0, -100)], dim=1)[rows]
    items = int((labels[:, 1:] != -100).sum())
    return model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=items).loss


def _grads(model):
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_the_loss_and_gradient_are_sft_on_the_right_rows(tmp_path, tiny_model_dir, tokenizer):
    trainer = grpo_trainer(tiny_model_dir, tokenizer, tmp_path, Parts(loss_steps=(RFTLoss(),)),
                           num_generations=2, per_device_train_batch_size=6, max_completion_length=8, bf16=False)
    batch = _rft_batch(RIGHT_ROWS)
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, batch)  # the Trainer entry point: grpokit_loss -> RFTLoss
    loss.backward()
    got = _grads(trainer.model)
    trainer.model.zero_grad(set_to_none=True)
    ref = _sft_loss(trainer.model, batch, RIGHT_ROWS)
    ref.backward()
    want = _grads(trainer.model)
    assert torch.allclose(loss.detach(), ref.detach(), rtol=1e-5, atol=1e-6), (loss, ref)
    assert len(got) == len(want) > 0 and any(w.abs().sum() > 0 for w in want)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, rtol=1e-4, atol=1e-6)


def test_split_into_micro_batches_the_step_adds_up_to_one_sft_batch(tmp_path, tiny_model_dir, tokenizer):
    """Gradient accumulation over 2 micro-batches of 3 rows: the summed gradient is the one-batch SFT gradient."""
    trainer = grpo_trainer(tiny_model_dir, tokenizer, tmp_path, Parts(loss_steps=(RFTLoss(),)), num_generations=2,
                           per_device_train_batch_size=3, gradient_accumulation_steps=2, max_completion_length=8,
                           bf16=False)
    trainer.current_gradient_accumulation_steps = 2
    batch = _rft_batch(RIGHT_ROWS)
    trainer.model.zero_grad(set_to_none=True)
    for rows in (slice(0, 3), slice(3, 6)):
        part = {k: (v[rows] if isinstance(v, torch.Tensor) and v.dim() >= 1 else v) for k, v in batch.items()}
        trainer.compute_loss(trainer.model, part).backward()
    got = _grads(trainer.model)
    trainer.model.zero_grad(set_to_none=True)
    _sft_loss(trainer.model, batch, RIGHT_ROWS).backward()
    for g, w in zip(got, _grads(trainer.model)):
        assert torch.allclose(g, w, rtol=1e-4, atol=1e-6)


def test_no_right_row_trains_nothing(tmp_path, tiny_model_dir, tokenizer):
    trainer = grpo_trainer(tiny_model_dir, tokenizer, tmp_path, Parts(loss_steps=(RFTLoss(),)),
                           num_generations=2, per_device_train_batch_size=6, max_completion_length=8, bf16=False)
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer.compute_loss(trainer.model, _rft_batch([0.0] * 6))
    loss.backward()
    assert float(loss.detach()) == 0.0 and all(float(g.abs().sum()) == 0.0 for g in _grads(trainer.model))


def test_grpokit_train_runs_online_rft_from_a_recipe(tmp_path, tiny_model_dir):
    """Sampling, scoring, the right rows kept and trained, logged, checkpointed: the CLI's whole step."""
    from grpokit.cli import main

    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:even_text", "role": "correctness"}],
                         algorithm="rft", max_steps=2)
    out = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(out)]) == 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    fracs = [m["grpokit/rft/right_frac"] for m in metrics if "grpokit/rft/right_frac" in m]
    assert len(fracs) == 2 and all(0.0 <= f <= 1.0 for f in fracs) and any(f > 0 for f in fracs)
    assert json.loads((out / "run.json").read_text())["status"] == "completed"


@pytest.mark.parametrize("rewards, train, field, words", [
    ([{"name": "format"}], {}, "algorithm", "no correctness reward"),
    ([{"name": "math_correctness"}], {"temperature": 0.7}, "temperature", "temperature 1.0"),
    ([{"name": "math_correctness"}], {"beta": 0.04}, "beta", "no KL term"),
])
def test_the_recipe_check_refuses_what_online_rft_cannot_do(tmp_path, tiny_model_dir, rewards, train, field, words):
    from grpokit.errors import GrpokitError
    from grpokit.recipe import load_recipe

    recipe = make_recipe(tmp_path, tiny_model_dir, rewards, algorithm="rft", **train)
    with pytest.raises(GrpokitError) as e:
        load_recipe(recipe, use="check")
    assert f"train.{field}" in str(e.value) and words in str(e.value)


def test_the_dry_run_names_the_loss(tmp_path, tiny_model_dir, capsys):
    from grpokit.cli import main

    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"}], algorithm="rft")
    assert main(["train", str(recipe), "--dry-run"]) == 0
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert "online RFT (train.algorithm: rft)" in out and "loss        dapo" not in out
