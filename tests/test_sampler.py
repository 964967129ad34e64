"""A sampler in another precision (grpokit.training.sampling): its copy tracks the trained weights, its log-probs
are the drawn tokens' from raw logits / temperature, and the correction gives TRL's own losses.

Tiny real models and a real trainer throughout; the arithmetic against TRL's own `_compute_loss`.
"""
from __future__ import annotations

import json

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

from conftest import addition_recipe, grpo_trainer, trl_batch
from grpokit import generation_internals
from grpokit import internals
from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.generation import SampledLogprobs
from grpokit.recipe import GenerationConfig, load_recipe, sampler_dtype_of
from grpokit.recipe import machine
from grpokit.training.sampler import SamplerCorrection, fold_into_advantages, importance_ratio
from grpokit.training.sampling import SamplerCopy
from grpokit.training.trainer import Parts

PAD = 0
MODES = ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]


# ---------------------------------------------------------------- TRL's importance-sampling arithmetic, by hand
# old - sampled per token (2 rows x 3 tokens, the last token of row 2 is padding), clip [0.5, 3.0]
DIFF = [[0.0, 1.5, -1.0], [0.2, 0.3, 9.0]]
E = torch.exp
RATIO_CASES = [
    ("token_truncate", [[1.0, 3.0, 0.5], [E(torch.tensor(0.2)), E(torch.tensor(0.3)), 1.0]]),  # padding: ratio 1
    ("token_mask", [[1.0, 0.0, 0.0], [E(torch.tensor(0.2)), E(torch.tensor(0.3)), 1.0]]),  # e^1.5 > 3, e^-1 < 0.5
    ("sequence_truncate", [[E(torch.tensor(0.5))], [E(torch.tensor(0.5))]]),
    ("sequence_mask", [[E(torch.tensor(0.5))], [E(torch.tensor(0.5))]]),
]


@pytest.mark.parametrize("mode,expected", RATIO_CASES, ids=[c[0] for c in RATIO_CASES])
def test_importance_ratio_is_trls_arithmetic(mode, expected):
    old, sampled = torch.tensor(DIFF), torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    got = importance_ratio(old, sampled, mask, mode, 0.5, 3.0)
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float32), atol=1e-6), got


def test_a_sequence_past_the_cap_is_truncated_or_masked_whole():
    old, sampled, mask = torch.tensor([[2.0, 2.0]]), torch.zeros(1, 2), torch.ones(1, 2)
    assert float(importance_ratio(old, sampled, mask, "sequence_truncate", None, 3.0)) == 3.0
    assert float(importance_ratio(old, sampled, mask, "sequence_mask", None, 3.0)) == 0.0


# ---------------------------------------------------------------- the loss against TRL's, on a real trainer
class BfloatCopy:
    """A trainer's sampling part as its loss sees it: a bfloat16 copy of the policy (grpokit.training.sampling's
    SamplerCopy). The tests' batches carry the sampler's log-probs themselves, so it answers no generate call."""

    def attach(self, trainer, log):
        self.sampler = SamplerCopy(trainer.model, torch.bfloat16)
        return self


def _trainer(model_dir, tokenizer, tmp_path, correction: str | None = None, **cfg):
    """A trainer with no sampler copy (`correction` None: the policy samples itself), or with one and the sampler
    correction `correction` as its loss step."""
    parts = Parts(sampling=BfloatCopy(), loss_steps=(SamplerCorrection(correction),)) if correction else Parts()
    return grpo_trainer(model_dir, tokenizer, tmp_path, parts, num_generations=2, per_device_train_batch_size=6,
                        max_completion_length=8, beta=0.0, **cfg)


def _inputs() -> dict:
    return trl_batch([0.5, -0.5, 1.0, -1.0, 0.3, -0.3], PAD)


def _loss(trainer, inputs):
    return trainer.compute_loss(trainer.model, inputs).detach()


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_a_sampler_equal_to_the_trainer_gives_ratio_one_and_todays_loss(tmp_path, tiny_model_dir, tokenizer,
                                                                        loss_type):
    inputs = _inputs()
    today = _loss(_trainer(tiny_model_dir, tokenizer, tmp_path, loss_type=loss_type), inputs)  # TRL's loss as it is
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, "bypass", loss_type=loss_type)
    same = dict(inputs, sampling_per_token_logps=internals.trainer_logps(trainer, trainer.model, inputs))
    assert torch.allclose(_loss(trainer, same), today, atol=1e-7)
    gap = internals.metric_values(trainer, "sampling/sampling_logp_difference/max")
    assert gap and gap[-1] < 1e-5 and internals.metric_values(trainer, "sampling/clipped_frac")[-1] == 0.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "cispo"])
def test_importance_sampling_gives_the_loss_trl_computes_on_its_vllm_path(tmp_path, tiny_model_dir, tokenizer,
                                                                         mode, loss_type):
    settings = {"loss_type": loss_type, "vllm_importance_sampling_mode": mode, "vllm_importance_sampling_clip_max": 1.05,
                "vllm_importance_sampling_clip_min": 0.97}
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, **settings)
    inputs = _inputs()
    old = internals.trainer_logps(trainer, trainer.model, inputs)
    noise = torch.randn(old.shape, generator=torch.Generator().manual_seed(1)) * 0.05
    sampled = old + noise * inputs["completion_mask"]  # a perturbed sampler, some tokens past the bounds
    mask = inputs["completion_mask"].float()
    ratio = importance_ratio(old, sampled, mask, mode, 0.97, 1.05)
    d = (old - sampled) * mask
    assert not torch.allclose(ratio, torch.exp(d.sum(-1, keepdim=True) if mode.startswith("sequence") else d))
    # TRL's own vLLM path: use_vllm with its correction, the batch carrying the ratio it would have computed
    trainer.use_vllm = trainer.vllm_importance_sampling_correction = True
    trl = _loss(trainer, dict(inputs, sampling_per_token_logps=sampled, old_per_token_logps=old,
                              importance_sampling_ratio=ratio))
    ours = _loss(_trainer(tiny_model_dir, tokenizer, tmp_path, "importance_sampling", **settings),
                 dict(inputs, sampling_per_token_logps=sampled))  # old log-probs from its own pass
    assert torch.allclose(ours, trl, rtol=1e-5, atol=1e-7), (ours, trl)


def test_bypass_makes_the_sampler_the_old_policy(tmp_path, tiny_model_dir, tokenizer):
    trainer = _trainer(tiny_model_dir, tokenizer, tmp_path, "bypass", loss_type="dapo")
    inputs = _inputs()
    old = internals.trainer_logps(trainer, trainer.model, inputs)
    sampled = old - 0.5 * inputs["completion_mask"]  # the sampler found every token less likely
    # TRL's loss with that old policy (a batch without the sampler's log-probs: the correction stands aside)
    expected = _loss(trainer, dict(inputs, old_per_token_logps=sampled))
    assert torch.allclose(_loss(trainer, dict(inputs, sampling_per_token_logps=sampled)), expected, atol=1e-7)
    assert internals.metric_values(trainer, "sampling/sampling_logp_difference/mean")[-1] == pytest.approx(0.5,
                                                                                                          abs=1e-4)
    assert internals.metric_values(trainer, "sampling/clipped_frac")[-1] == 1.0  # e^0.5 is past 1 + epsilon


def test_fold_into_advantages_broadcasts_per_token_and_per_sequence():
    adv = torch.tensor([1.0, -2.0])
    assert fold_into_advantages(adv, torch.tensor([[0.5], [2.0]])).tolist() == [[0.5], [-4.0]]
    assert fold_into_advantages(adv, torch.tensor([[1.0, 0.0], [0.5, 1.0]])).tolist() == [[1.0, 0.0], [-1.0, -2.0]]


# ---------------------------------------------------------------- the recorded log-probs
def test_recorded_logprobs_are_the_drawn_tokens_raw_logits_over_temperature(tiny_model_dir, tokenizer):
    from grpokit.generation import warpers

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    ids = tokenizer(["1 + 1 ="] * 2, return_tensors="pt")  # no padding: the forward below needs no position ids
    recorder = SampledLogprobs(0.7)
    torch.manual_seed(0)
    out = model.generate(**ids, do_sample=True, max_new_tokens=5, temperature=1.0, top_p=1.0, top_k=0,
                         logits_processor=[recorder, *warpers(0.7, None, 0.5, None)], pad_token_id=tokenizer.pad_token_id)
    got = recorder.finish(out)
    with torch.no_grad():  # the trainer's way: logits of the whole sequence / temperature, no top-p
        logits = model(out).logits
    p = ids["input_ids"].shape[1]
    want = torch.log_softmax(logits[:, p - 1:-1] / 0.7, dim=-1).gather(2, out[:, p:, None]).squeeze(2)
    assert got.shape == want.shape and torch.allclose(got, want, atol=1e-4)


# ---------------------------------------------------------------- the copy tracks the trained weights
def _recipe(tmp_path, model_dir, **train):
    path = addition_recipe(tmp_path, model_dir, rows=8, rewards=[{"name": "reward_fns:length_spread",
                                                                 "role": "shaping"}],
                           train={"max_steps": 2, "num_generations": 2, "per_device_train_batch_size": 2,
                                  "max_completion_length": 6, "logging_steps": 1, "save_steps": 1,
                                  "learning_rate": 1e-3, "skip_no_signal": False, **train})
    raw = yaml.safe_load(path.read_text())
    raw["generation"] = {"sampler_dtype": "bfloat16"}
    raw["output_dir"] = str(tmp_path / "run")
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def refreshes(monkeypatch):
    """After every refresh of a sampler copy: (step, weights copied from scratch?, max |copy - policy cast|)."""
    seen = []
    real = SamplerCopy.refresh

    def refresh(self, policy, step):
        fresh = self.synced_step is None
        real(self, policy, step)
        gap = max(float((mine.float() - theirs.detach().to(self.dtype).float()).abs().max())
                  for mine, theirs in zip(self.model.parameters(), policy.parameters()))
        seen.append((step, fresh, gap, all(p.dtype == self.dtype for p in self.model.parameters())))

    monkeypatch.setattr(SamplerCopy, "refresh", refresh)
    return seen


def test_the_copy_equals_the_policy_cast_before_every_step_and_after_resume(tmp_path, tiny_model_dir, refreshes,
                                                                            capsys):
    recipe = _recipe(tmp_path, tiny_model_dir)
    assert main(["train", str(recipe), "--skip-audit"]) == 0
    out = capsys.readouterr().out
    assert "sampling in bfloat16 (the trainer in float32), corrected by bypass" in out
    assert [(s, f) for s, f, _, _ in refreshes] == [(0, True), (1, False)]  # before each step's generation
    assert all(gap == 0.0 and bf16 for _, _, gap, bf16 in refreshes)
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all("sampling/sampling_logp_difference/mean" in m and 0 <= m["sampling/clipped_frac"] <= 1 for m in metrics)
    # The copy, not the policy, sampled: a bf16 copy's log-probs differ from the float32 trainer's (0.0 exactly when
    # the copy's forward still ran the policy's, the deep-copied TRL patch; test below).
    assert all(m["sampling/sampling_logp_difference/mean"] > 1e-4 for m in metrics), metrics

    refreshes.clear()  # resume to step 3: the new trainer's copy takes the checkpoint's weights whole
    assert main(["train", "--resume", str(tmp_path / "run"), "--set", "train.max_steps=3"]) == 0
    assert [(s, f) for s, f, _, _ in refreshes] == [(2, True)] and refreshes[0][2] == 0.0


def test_a_rollback_builds_a_fresh_copy_from_the_restored_weights(tmp_path, tiny_model_dir, refreshes):
    from grpokit.training import train

    recipe = load_recipe(_recipe(tmp_path, tiny_model_dir, max_steps=4), [
        "health.actions.truncation=rollback", "health.max_rollbacks=1", "health.warmup_steps=0"])
    summary = train(recipe, run_dir=tmp_path / "run").summary
    assert summary["rollbacks"], summary  # every completion is cut at 6 tokens: truncation, then a rollback
    fresh = [s for s, f, _, _ in refreshes if f]
    assert len(fresh) == 2 and all(gap == 0.0 for _, _, gap, _ in refreshes)  # one copy per trainer, both exact


# ---------------------------------------------------------------- the choice, and bad input
def test_auto_is_bf16_only_where_it_is_native(monkeypatch):
    g = GenerationConfig(sampler_dtype="auto")
    monkeypatch.setattr(machine, "native_bf16", lambda: (True, "CPU with avx512_bf16"))
    assert sampler_dtype_of(g, "float32")[0] == "bfloat16"
    monkeypatch.setattr(machine, "native_bf16", lambda: (False, "a CPU without AVX-512 BF16 or AMX"))
    dtype, why = sampler_dtype_of(g, "float32")
    assert dtype == "float32" and "emulated" in why
    assert sampler_dtype_of(GenerationConfig(), "bfloat16")[0] == "bfloat16"  # same: the policy's own


def test_a_run_says_its_sampling_precision_also_when_the_policy_samples_itself(tmp_path, tiny_model_dir):
    # The demo's first lines name the precision it sampled in, the default (same) included (issue: "say which
    # precision it chose and why").
    from types import SimpleNamespace

    from grpokit.training.sampling import sampler_for

    said = []
    recipe = load_recipe(_recipe(tmp_path, tiny_model_dir), ["generation.sampler_dtype=same"])
    assert sampler_for(SimpleNamespace(model=None), recipe.generation, "float32", said.append) is None
    assert said == ["sampling in float32: generation.sampler_dtype: same (the policy samples itself)"]


@pytest.mark.parametrize("flags,native", [("fpu avx2 avx512f avx512_bf16", True), ("fpu avx2 amx_bf16", True),
                                          ("fpu sse avx2 fma", False)])
def test_native_bf16_reads_the_cpu_flags(tmp_path, flags, native):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    if torch.cuda.is_available():
        pytest.skip("a GPU decides, not the CPU flags")
    assert machine.native_bf16(str(info))[0] is native


def test_explicit_bf16_where_it_is_emulated_is_allowed_with_a_note(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr(machine, "native_bf16", lambda: (False, "a CPU without AVX-512 BF16 or AMX"))
    recipe = load_recipe(_recipe(tmp_path, tiny_model_dir))
    assert any("torch emulates bf16 here" in n for n in recipe.notes), recipe.notes


def test_an_unknown_precision_is_refused_with_the_choices(tmp_path, tiny_model_dir, capsys):
    recipe = _recipe(tmp_path, tiny_model_dir)
    with pytest.raises(GrpokitError) as e:
        load_recipe(recipe, ["generation.sampler_dtype=bf8"])
    text = str(e.value)
    assert "generation.sampler_dtype" in text and all(c in text for c in ("same", "auto", "float32", "bfloat16"))


def test_a_sampler_copy_needs_the_hf_backend(tmp_path, tiny_model_dir):
    with pytest.raises(GrpokitError, match="option of the hf backend"):
        load_recipe(_recipe(tmp_path, tiny_model_dir), ["generation.backend=continuous"])


# ---------------------------------------------------------------- the memory plan counts the copy
@pytest.mark.parametrize("sampler_dtype,device,model_dtype,copy_bytes", [
    ("bfloat16", "cpu", "float32", 2),   # a bf16 copy beside float32 weights
    ("same", "cpu", "float32", 0),
    ("float32", "cpu", "float32", 0),    # the weights' own precision: no copy
    ("auto", "cuda", "auto", 0),         # a GPU's weights are bf16 already
    ("float32", "cuda", "bfloat16", 4),
])
def test_the_memory_plan_counts_the_sampler_copy(tmp_path, tiny_model_dir, sampler_dtype, device, model_dtype,
                                                 copy_bytes):
    from grpokit.preflight.memory import plan_recipe
    from grpokit.preflight.shape import model_shape

    recipe = load_recipe(_recipe(tmp_path, tiny_model_dir), [f"generation.sampler_dtype={sampler_dtype}",
                                                            f"model.dtype={model_dtype}"])
    shape, _ = model_shape(str(tiny_model_dir), None, model_dtype, device)
    p = plan_recipe(recipe, shape, "ddp", 1, device=device)
    assert p.sampler == shape.params * copy_bytes
    alone = load_recipe(_recipe(tmp_path, tiny_model_dir), ["generation.sampler_dtype=same", f"model.dtype={model_dtype}"])
    assert p.total == plan_recipe(alone, shape, "ddp", 1, device=device).total + p.sampler  # all else equal


def test_the_copy_samples_with_its_own_weights_not_through_trls_patched_forward(tiny_model_dir, tokenizer):
    # TRL's GRPOTrainer patches the policy's forward (its fused LM head) with a closure over the policy's bound
    # forward; a deep copy keeps that closure, so without drop_foreign_forwards the bf16 copy ran the float32 policy.
    from trl.trainer.utils import add_fused_lm_head

    policy = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    add_fused_lm_head(policy)
    ids = tokenizer("12 + 7 =", return_tensors="pt").input_ids
    with torch.no_grad():
        float_logits = policy(ids).logits
    copy = SamplerCopy(policy, torch.bfloat16)
    with torch.no_grad():
        logits = copy.model(ids).logits
    assert logits.dtype == torch.bfloat16 and not torch.equal(logits.float(), float_logits)
    with torch.no_grad():  # the copy's own bf16 forward, computed by hand from its weights
        expected = type(copy.model).forward(copy.model, ids).logits
    assert torch.equal(logits, expected)
    assert generation_internals.drop_foreign_forwards(copy.model) == []  # nothing foreign left; the policy keeps its patch
    assert "forward" in policy.__dict__


def test_after_training_the_model_generates_as_itself_not_through_the_sampler(tmp_path, tiny_model_dir, tokenizer):
    # The demo evaluates the trained model in process: it must not sample through the bf16 copy training used
    # (its first measured runs did, and printed "in float32" for a bf16 evaluation).
    from grpokit.training import train

    model = train(load_recipe(_recipe(tmp_path, tiny_model_dir))).model
    assert "generate" not in model.__dict__ and next(model.parameters()).dtype == torch.float32
    ids = tokenizer("12 + 7 =", return_tensors="pt").input_ids
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "checkpoints" / "checkpoint-2", dtype=torch.float32)
    with torch.no_grad():
        mine, theirs = (m.generate(ids, do_sample=False, max_new_tokens=6, pad_token_id=0) for m in (model, saved))
    assert torch.equal(mine, theirs)  # the trained weights in float32, as the checkpoint holds them


# ---------------------------------------------------------------- LoRA: a merged copy samples without adapter matmuls
def test_a_lora_policy_is_copied_merged_and_tracks_the_trained_adapter(tiny_model_dir, tokenizer):
    from peft import LoraConfig, get_peft_model

    from grpokit.training.sampling import merged_layers

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    policy = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    assert merged_layers(policy) and merged_layers(base) is None  # full fine-tuning is copied as it is
    copy = SamplerCopy(policy, torch.float32)
    assert copy.merged and not any("lora" in n for n, _ in copy.model.named_parameters())
    ids = tokenizer(["12 + 7 =", "3 - 1 ="], return_tensors="pt", padding=True)
    for step in range(2):
        with torch.no_grad():  # train the adapter a little: B is zero at first, so the delta starts at 0
            for n, p in policy.named_parameters():
                if p.requires_grad:
                    p.add_(0.05 * torch.randn_like(p))
        copy.refresh(policy, step)
        with torch.no_grad():
            want, got = policy(**ids).logits, copy.model(**ids).logits
        assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_lora_with_a_sampler_dtype_trains_from_the_merged_copy(tmp_path, tiny_model_dir, capsys):
    recipe = _recipe(tmp_path, tiny_model_dir)
    raw = yaml.safe_load(recipe.read_text())
    raw["generation"] = {"sampler_dtype": "float32"}
    raw["model"]["lora"] = {"r": 4, "alpha": 8, "target_modules": "all-linear"}
    recipe.write_text(yaml.safe_dump(raw))
    assert main(["train", str(recipe), "--skip-audit"]) == 0
    out = capsys.readouterr().out
    assert "sampling in float32 from a copy with the LoRA adapter merged in" in out, out
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["sampling/sampling_logp_difference/max"] < 1e-3 for m in metrics), metrics  # the same model
