"""Every TRL internal grpokit relies on still exists in the installed TRL, with the shape grpokit expects.

When this fails after a TRL upgrade, the message names the TRL version and the internal that changed:
update src/grpokit/internals.py (the only module that names them) or pin the tested TRL.
"""
from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer

from grpokit import internals
from grpokit.errors import GrpokitError
from grpokit.training.grpo import _trainer_class


def test_installed_trl_has_every_method_grpokit_relies_on():
    found = internals.problems()
    assert not found, "\n".join(found)


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, tiny_model_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("trl")), num_generations=2,
                      per_device_train_batch_size=4, max_completion_length=4, report_to="none", use_cpu=True,
                      beta=0.0, loss_type="dapo")
    data = Dataset.from_list([{"prompt": "1 + 1 ="}, {"prompt": "2 + 2 ="}] * 2)
    score = lambda completions, **_: [float(len(c)) for c in completions]  # noqa: E731  (spread: non-zero advantages)
    return _trainer_class()(model=model, reward_funcs=[score], args=args, train_dataset=data,
                            processing_class=tokenizer)


def test_a_real_generation_batch_has_the_keys_and_shapes_grpokit_reads(trainer):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() for each optimizer step
    batch = trainer._generate_and_score_completions([{"prompt": "1 + 1 ="}] * 2 + [{"prompt": "2 + 2 ="}] * 2)
    found = internals.batch_problems(batch) + internals.instance_problems(trainer)
    assert not found, "\n".join(found)
    prompts, completions, rewards = internals.latest_generation(trainer)
    assert len(prompts) == len(completions) == 4 and all(len(v) == 4 for v in rewards.values())
    loss = trainer.compute_loss(trainer.model, batch)  # through LossHook into TRL's _compute_loss
    assert loss.requires_grad and torch.isfinite(loss)
    internals.log_metric(trainer, "grpokit/probe", 0.5)
    assert internals.metric_values(trainer, "grpokit/probe") == [0.5]


# A TRL that changed what grpokit relies on, one change per case.
class _NewLoss(GRPOTrainer):
    def _compute_loss(self, model, batch, extra=None):  # renamed parameter
        return None


class _NoSingleTurn(GRPOTrainer):
    _generate_single_turn = None  # removed method


class _NewBatchKey(GRPOTrainer):
    def _generate_and_score_completions(self, inputs):
        output = {}
        output["completion_weights"] = inputs  # a new per-row tensor grpokit would not trim
        return output


@pytest.mark.parametrize("cls, internal, change", [
    (_NewLoss, "GRPOTrainer._compute_loss(model, inputs)", "its parameters are now (model, batch, extra)"),
    (_NoSingleTurn, "GRPOTrainer._generate_single_turn(prompt_ids)", "it no longer exists"),
    (_NewBatchKey, "GRPOTrainer._generate_and_score_completions(inputs)", "does not know how to filter: "
                                                                          "completion_weights"),
])
def test_a_changed_trl_is_named_with_its_version_and_internal(cls, internal, change):
    found = internals.problems(cls, version="9.9.0")
    assert len(found) == 1
    assert found[0].startswith(f"grpokit relies on {internal}; TRL 9.9.0 changed it: ")
    assert change in found[0] and f"trl=={internals.TESTED_TRL}" in found[0]


@pytest.mark.parametrize("edit, change", [
    (lambda b: b.pop("advantages"), "the batch lacks advantages"),
    (lambda b: b.update(prompt_mask=b["prompt_mask"][:, 1:]), "ids and masks no longer have the same shape"),
    (lambda b: b.update(completion_ids=b["completion_ids"].flatten()), "batch['completion_ids'] has shape"),
])
def test_a_changed_batch_is_named(edit, change):
    batch = {"prompt_ids": torch.ones(2, 3), "prompt_mask": torch.ones(2, 3), "completion_ids": torch.ones(2, 4),
             "completion_mask": torch.ones(2, 4), "advantages": torch.zeros(2), "num_items_in_batch": 8}
    assert internals.batch_problems(dict(batch), "9.9.0") == []
    edit(batch)
    found = internals.batch_problems(batch, "9.9.0")
    assert found and all("TRL 9.9.0 changed it" in f for f in found) and any(change in f for f in found)


def test_instance_dicts_that_changed_are_named():
    class Changed:
        _metrics = {"train": {}}  # a plain dict: appending to a new metric would raise KeyError
        _logs = {"prompt": [], "completion": []}  # rewards no longer kept
    found = internals.instance_problems(Changed(), "9.9.0")
    assert len(found) == 2 and all("TRL 9.9.0 changed it" in f for f in found)


def test_training_refuses_a_trl_it_cannot_use(monkeypatch):
    import trl

    monkeypatch.setattr(trl, "GRPOTrainer", _NewLoss)
    with pytest.raises(GrpokitError, match="_compute_loss") as e:
        internals.trainer_base()
    assert e.value.problems[0].fix == f"pip install trl=={internals.TESTED_TRL}"
