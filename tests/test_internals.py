"""Every TRL internal grpokit relies on still exists in the installed TRL, with the shape grpokit expects.

When this fails after a TRL upgrade, the message names the TRL version and the internal that changed:
update src/grpokit/internals.py (the only module that names them) or pin the tested TRL.
"""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM
from trl import GRPOTrainer

from conftest import grpo_trainer, trl_batch
from grpokit import hf_internals, internals, trl_compat
from grpokit.errors import GrpokitError
from grpokit.training.trainer import GrpokitTrainer, Parts


def test_installed_trl_has_every_method_grpokit_relies_on():
    found = trl_compat.problems() + trl_compat.fused_head_problems()
    assert not found, "\n".join(found)


def test_the_fused_head_scores_only_labelled_positions_with_the_same_log_probs_and_gradients(tiny_model_dir):
    # TRL's fused LM head on the CPU: every position through the vocabulary-wide log-softmax, or (grpokit) only the
    # labelled ones. Both must give the same per-token log-probs and the same gradients.
    import contextlib

    import trl.trainer.utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    original = trl_utils._use_triton
    ids = torch.tensor([[5, 17, 23, 41, 2, 9, 77, 13], [0, 0, 8, 19, 31, 4, 66, 12]])
    mask = (ids != 0).long()
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-3] = -100  # the last three tokens are the completion, as GRPO labels them
    results = []
    for compact in (False, True):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
        add_fused_lm_head(model)
        with internals.labelled_positions_only() if compact else contextlib.nullcontext():
            assert trl_utils._use_triton(torch.device("cpu")) is compact
            out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        assert trl_utils._use_triton is original  # the switch is TRL's own again after the block
        (out.log_probs[:, -3:].sum()).backward()
        results.append((out.log_probs[:, -3:].detach(), [p.grad.clone() for p in model.parameters()]))
    (a, grads_a), (b, grads_b) = results
    assert torch.allclose(a, b, atol=1e-6) and a.abs().sum() > 0
    # float32 sums over other tile shapes: equal to rounding (relative to each gradient's own size)
    worst = max(float((x - y).abs().max() / y.abs().max().clamp(min=1e-12)) for x, y in zip(grads_a, grads_b))
    assert worst < 1e-4, worst
    with internals.labelled_positions_only(), internals.labelled_positions_only():  # nested: wraps nothing twice
        assert trl_utils._use_triton.grpokit_rebound and trl_utils._use_triton(torch.device("meta")) is False
    assert trl_utils._use_triton is original


def test_a_trainers_log_probs_leave_the_switch_to_the_rest_of_the_process(trainer):
    # Scoped to the trainer: the fused head is compact only inside its log-prob calls (no process-wide rebinding,
    # so an SFTTrainer or another GRPOTrainer in the same process is TRL's own).
    import trl.trainer.utils as trl_utils

    original = trl_utils._use_triton
    seen = []
    internals.wrap_method(trainer, "logps", lambda fn: lambda *a, **k: (seen.append(
        trl_utils._use_triton(torch.device("cpu"))), fn(*a, **k))[1])
    trainer.compute_loss(trainer.model, trl_batch([0.5, -0.5, 1.0, -1.0, 0.3, -0.3]))
    assert trl_utils._use_triton is original and seen and not any(seen)  # TRL's own outside the hook's block


def test_a_trl_whose_fused_head_changed_is_named(monkeypatch):
    import trl.trainer.utils as trl_utils

    monkeypatch.delattr(trl_utils, "_use_triton")
    found = trl_compat.fused_head_problems("9.9.0")
    assert len(found) == 1 and "trl.trainer.utils._use_triton" in found[0] and "no longer exists" in found[0]


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, tiny_model_dir, tokenizer):
    score = lambda completions, **_: [float(len(c)) for c in completions]  # noqa: E731  (spread: non-zero advantages)
    return grpo_trainer(tiny_model_dir, tokenizer, tmp_path_factory.mktemp("trl"), prompts=["1 + 1 =", "2 + 2 ="] * 2,
                        reward=score, num_generations=2, per_device_train_batch_size=4, max_completion_length=4,
                        beta=0.0, loss_type="dapo")


def test_a_real_generation_batch_has_the_keys_and_shapes_grpokit_reads(trainer):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() for each optimizer step
    batch = trainer._generate_and_score_completions([{"prompt": "1 + 1 ="}] * 2 + [{"prompt": "2 + 2 ="}] * 2)
    found = trl_compat.batch_problems(batch) + trl_compat.instance_problems(trainer)
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
    found = trl_compat.problems(cls, version="9.9.0")
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
    assert trl_compat.batch_problems(dict(batch), "9.9.0") == []
    edit(batch)
    found = trl_compat.batch_problems(batch, "9.9.0")
    assert found and all("TRL 9.9.0 changed it" in f for f in found) and any(change in f for f in found)


def test_instance_dicts_that_changed_are_named():
    class Changed:
        _metrics = {"train": {}}  # a plain dict: appending to a new metric would raise KeyError
        _logs = {"prompt": [], "completion": []}  # rewards no longer kept
    found = trl_compat.instance_problems(Changed(), "9.9.0")
    assert len(found) == 2 and all("TRL 9.9.0 changed it" in f for f in found)


def test_training_refuses_a_trl_it_cannot_use(monkeypatch, tiny_model_dir, tokenizer, tmp_path):
    with pytest.raises(GrpokitError, match="_compute_loss") as e:
        trl_compat.refuse_unusable(_NewLoss)
    assert e.value.problems[0].fix == f"pip install trl=={internals.TESTED_TRL}"
    # the trainer asks before TRL's constructor runs: an installed TRL that changed is refused when it is built
    found = trl_compat.problems(_NewLoss)
    monkeypatch.setattr(trl_compat, "problems", lambda cls=None, version=None: found)
    with pytest.raises(GrpokitError, match="_compute_loss"):
        GrpokitTrainer(Parts(), model=str(tiny_model_dir), processing_class=tokenizer)


# ---------------------------------------------------------------- transformers and torch internals
def test_checkpointing_keyword_is_the_installed_spelling_and_warns_nothing(tmp_path):
    import warnings

    from transformers import TrainingArguments

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the deprecated spelling warns on every run
        args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                 **hf_internals.checkpointing_kwargs(True))
    assert getattr(args, "activation_checkpointing", None) is True or args.gradient_checkpointing is True


def test_the_input_grad_hooks_each_checkpointing_switch_leaves_are_dropped(tiny_model_dir):
    # TRL switches checkpointing off and on around every step's generation; each switch on registers another
    # make_inputs_require_grads hook on the input embedding and keeps only the newest (a full fine-tune: no PEFT)
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    assert hf_internals.drop_stale_input_grad_hooks(model) == 0  # checkpointing never on: nothing to drop
    on = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    off = getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable
    for _ in range(3):
        off()
        on()
    embeddings = model.get_input_embeddings()
    assert len(embeddings._forward_hooks) == 3  # the leak, as transformers leaves it
    assert hf_internals.drop_stale_input_grad_hooks(model) == 2
    assert list(embeddings._forward_hooks) == [h.id for h in model._require_grads_hooks]  # the newest one kept
    model.train()
    ids = torch.tensor([[1, 2, 3]])
    assert model.get_input_embeddings()(ids).requires_grad  # and it still does its job
    assert hf_internals.drop_stale_input_grad_hooks(model) == 0


def test_reporting_integrations_know_and_find_tensorboard():
    known, installed = hf_internals.reporting_integrations()
    assert {"tensorboard", "wandb", "trackio"} <= set(known)
    assert "tensorboard" in installed  # the dev extra installs it


def test_dropping_the_gguf_quantizer_lets_transformers_save_the_model(tiny_model_dir, tmp_path):
    class GGUFQuantizer:  # what a gguf_file= load leaves on the model: a quantizer that cannot serialise
        quantization_config = type("Config", (), {"quant_method": "gguf"})()

        def is_serializable(self):
            return False

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.hf_quantizer, model.config.quantization_config = GGUFQuantizer(), {"quant_method": "gguf"}
    with pytest.raises(ValueError, match="gguf"):  # transformers reads the marker and refuses
        model.save_pretrained(tmp_path / "refused")
    hf_internals.drop_gguf_quantizer(model)
    model.save_pretrained(tmp_path / "saved")  # what the embedded model's conversion then does
    assert (tmp_path / "saved" / "config.json").is_file() and not hasattr(model.config, "quantization_config")


def test_trainer_internals_read_from_a_built_trainer(trainer):
    from transformers.trainer_callback import DefaultFlowCallback, PrinterCallback

    callbacks = hf_internals.trainer_callbacks(trainer)
    assert any(isinstance(c, DefaultFlowCallback) for c in callbacks)  # transformers' own, always there
    assert not any(isinstance(c, PrinterCallback) for c in callbacks)  # grpokit's trainer prints its own line
    assert hasattr(trainer, "ref_model") and internals.reference_model(trainer) is None  # beta 0: no copy
    assert hasattr(trainer, "is_fsdp_enabled") and hasattr(trainer, "is_deepspeed_enabled")
    assert hf_internals.reference_is_sharded(trainer) is False


def test_scale_learning_rate_moves_the_scheduler_and_what_it_reports():
    from transformers import get_scheduler

    params = [torch.nn.Parameter(torch.zeros(1))]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    scheduler = get_scheduler("cosine", optimizer, num_warmup_steps=0, num_training_steps=10)
    optimizer.step()
    scheduler.step()
    before = scheduler.get_last_lr()[0]
    hf_internals.scale_learning_rate(optimizer, scheduler, 0.5)
    assert scheduler.get_last_lr()[0] == pytest.approx(before / 2)  # the cached rate the Trainer logs
    assert optimizer.param_groups[0]["lr"] == pytest.approx(before / 2) and scheduler.base_lrs == [5e-5]
    optimizer.step()
    scheduler.step()
    assert scheduler.get_last_lr()[0] < before / 2  # the schedule continues from the scaled rate
