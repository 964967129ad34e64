"""Slow tier: every token once on the real embedded SmolLM2-135M (grpokit.generation.tree, .decode,
grpokit.training.logps): the demo's prompts, the demo's group size, TRL's layout as the reference."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recipes" / "smollm2-arithmetic.yaml"


def _demo_prompts(tokenizer, n: int) -> tuple[list[list[int]], list[dict]]:
    from grpokit.data import load_datasets
    from grpokit.recipe import load_recipe
    from grpokit.task import template_of

    recipe = load_recipe(DEMO)
    template = template_of(recipe)
    _, eval_rows, _ = load_datasets(recipe)
    rows = eval_rows[:n]
    return [template.encode(tokenizer, template.build(r["question"])) for r in rows], rows


def test_the_tree_gives_trls_logprobs_and_gradients_on_the_embedded_model(tmp_path, embedded_model_dir, tokenizer):
    from conftest import grpo_trainer
    from grpokit.training.logps import TreeLogps
    from grpokit.training.trainer import Parts

    # Before the trainers: loading a recipe builds a GRPOConfig to check it, and transformers' TrainingArguments
    # resets accelerate's shared state, which a trainer's Accelerator set up.
    prompts, _ = _demo_prompts(tokenizer, 2)
    # TRL's layout and the tree, on the same weights; each trainer's fused head scores the labelled positions only
    # inside its log-prob calls, as in training.
    trainers = {shared: grpo_trainer(embedded_model_dir, tokenizer, tmp_path / str(shared),
                                     Parts(logps=TreeLogps(True)) if shared else Parts(), num_generations=8,
                                     per_device_train_batch_size=16, max_completion_length=48, beta=0.0, bf16=False)
                for shared in (False, True)}
    g = torch.Generator().manual_seed(0)
    rows = [(p, torch.randint(100, 40000, (int(torch.randint(5, 49, (1,), generator=g)),), generator=g).tolist())
            for p in prompts for _ in range(8)]
    P, C = max(len(p) for p, _ in rows), max(len(c) for _, c in rows)
    pad = tokenizer.pad_token_id
    batch = {"prompt_ids": torch.full((16, P), pad), "prompt_mask": torch.zeros(16, P, dtype=torch.long),
             "completion_ids": torch.full((16, C), pad), "completion_mask": torch.zeros(16, C, dtype=torch.long),
             "advantages": torch.randn(16, generator=g)}
    for i, (p, c) in enumerate(rows):
        batch["prompt_ids"][i, P - len(p):], batch["prompt_mask"][i, P - len(p):] = torch.tensor(p), 1
        batch["completion_ids"][i, :len(c)], batch["completion_mask"][i, :len(c)] = torch.tensor(c), 1
    batch["num_items_in_batch"] = batch["completion_mask"].sum()
    out = {}
    for shared, trainer in trainers.items():
        trainer.model.zero_grad()
        loss, seen = trainer.logps_seen(lambda b: trainer.compute_loss(trainer.model, b), batch)
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
        out[shared] = (seen, grads)
    scored = batch["completion_mask"].bool()
    assert float((out[True][0] - out[False][0])[scored].abs().max()) < 1e-4
    assert float((out[True][1] - out[False][1]).norm() / out[False][1].norm()) < 1e-5


def test_greedy_evaluation_gives_the_same_completions_on_the_held_out_rows(embedded_model_dir, tokenizer):
    from grpokit import models
    from grpokit.generation import SamplingParams
    from grpokit.generation.core import HFBackend, run, token_policy

    model = models.load_model(str(embedded_model_dir), "float32")
    prompts, _ = _demo_prompts(tokenizer, 100)
    policy = token_policy(model, tokenizer)
    params = SamplingParams(max_tokens=48, stop_token_ids=policy.stop_token_ids)
    loop = run(HFBackend(model, policy.pad_token_id), prompts, params, tokenizer, progress=False)
    generate = run(HFBackend(model, policy.pad_token_id, shared_prefix=False), prompts, params, tokenizer,
                   progress=False)
    assert loop == generate
