"""Every token once (grpokit.generation.tree, grpokit.training.logps): the tree of shared prefixes gives TRL's
per-token log-probs, entropies and gradients, on real tiny models and a real GRPOTrainer.

TRL's layout is the reference: a trainer without the tree (grpokit.training.trainer.Parts() with no log-prob part)
runs TRL's own `_get_per_token_logps_and_entropies` over the padded rows, beside one with the tree (TreeLogps), both
on the same weights (and the same LoRA adapter), under the settings TRL's loss varies with: temperature, beta with a
reference model, several iterations with PPO's clip active, gradient accumulation, each loss type, LoRA. Batches are shaped as TRL hands them over (prompts
left-padded, completions right-padded, rows of a group shuffled among the others) and hold what the tree must get
right: groups whose prompts share a system prompt, completions of unequal length, completions that begin alike
(anchors) or are identical, a group of one, and a row whose completion is fully masked.
"""
from __future__ import annotations

import json

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

from conftest import REPO, grpo_trainer, make_recipe
from grpokit import hf_internals, internals
from grpokit.cli import main
from grpokit.generation.tree import Tree, TreeCost, pack, refusal
from grpokit.training.launch import expected_ratio
from grpokit.training.logps import TreeLogps, rows_of
from grpokit.training.trainer import Parts

PAD = 0


# ---------------------------------------------------------------- the tree itself
def test_a_shared_prefix_is_one_set_of_positions_and_each_extra_branch_one_anchor():
    tree = Tree()
    tree.add(0, [5, 6, 7, 8, 9], 3)  # prompt 5 6 7, completion 8 9
    tree.add(1, [5, 6, 7, 8, 4], 3)  # same prompt, completion 8 4: shares 8, branches after it
    tree.add(2, [5, 6, 7, 3], 3)  # same prompt, completion 3: 7 already scores 8 -> an anchor
    tree.add(3, [5, 6, 2], 2)  # another prompt sharing 5 6
    # positions: 5 6 7 8 9 | an anchor of 8 scoring 4, then 4 | an anchor of 7 scoring 3, then 3 | 2 (6 scores it)
    assert tree.tokens == [5, 6, 7, 8, 9, 8, 4, 7, 3, 2]
    assert [tree.tokens[p] for p in tree.paths[1]] == [5, 6, 7, 8, 4]
    for row, ids, start in ((0, [5, 6, 7, 8, 9], 3), (1, [5, 6, 7, 8, 4], 3), (2, [5, 6, 7, 3], 3), (3, [5, 6, 2], 2)):
        scorers = tree.scored[row]
        assert [tree.labels[p] for p in scorers] == ids[start:]  # each position scores the row's next token
        assert [tree.depths[p] for p in scorers] == list(range(start - 1, len(ids) - 1))
        assert [tree.tokens[p] for p in scorers] == ids[start - 1:-1]  # ... from the token before it
    seen = tree.ancestry()
    for row in range(4):  # every token sees exactly its own row's earlier tokens
        path = tree.paths[row]
        for i, p in enumerate(path):
            assert set(seen[p].nonzero().flatten().tolist()) == set(path[:i + 1])
    anchor = tree.scored[2][0]  # the anchor of 7: 7's ancestors and itself, not 7
    assert set(seen[anchor].nonzero().flatten().tolist()) == set(tree.paths[2][:2]) | {anchor}


def test_cost_to_add_counts_what_add_creates():
    rows = [([1, 2, 3, 4, 5], 3), ([1, 2, 3, 4, 6], 3), ([1, 2, 3, 7], 3), ([1, 2, 3, 7], 3), ([1, 9, 9], 1), ([8], 1)]
    tree = Tree()
    for r, (ids, start) in enumerate(rows):
        before, predicted = len(tree), tree.cost_to_add(ids, start)
        tree.add(r, ids, start)
        assert len(tree) - before == predicted, (r, ids)


def test_rows_split_into_trees_when_attention_over_one_would_cost_more():
    rows = [[1] * 10 + list(range(100 * r, 100 * r + 40)) for r in range(1, 20)]  # 19 rows sharing 10 tokens
    starts = [10] * len(rows)
    assert len(pack(rows, starts, None)) == 1
    cheap_attention = TreeCost(per_position=1e6, per_pair=1.0)
    assert len(pack(rows, starts, cheap_attention)) == 1  # sharing the prefix pays
    dear_attention = TreeCost(per_position=1.0, per_pair=1e3)
    trees = pack(rows, starts, dear_attention)
    assert len(trees) > 1 and sorted(r for t in trees for r in t.rows) == list(range(len(rows)))


def test_rows_of_reads_trls_layout_and_refuses_any_other():
    ids = torch.tensor([[0, 5, 6, 7, 8, 0], [4, 5, 6, 9, 0, 0]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
    sequences, starts, lengths = rows_of(ids, mask, 3)
    assert sequences == [[5, 6, 7, 8], [4, 5, 6, 9]] and starts == [2, 3] and lengths == [2, 1]
    holes = mask.clone()
    holes[0, 4], holes[0, 5] = 0, 1  # a completion with a hole: not TRL's right padding
    assert rows_of(ids, holes, 3) is None


def test_expected_ratio_is_the_trees_positions_over_trls():
    # one step: 2 prompts of 80 tokens sharing 70, 8 completions of 48 each
    ratio = expected_ratio([[80, 80]], [70], 8, 48)
    assert ratio == pytest.approx((70 + 10 + 10 + 16 * 48 + 14) / (16 * (80 + 48)))


# ---------------------------------------------------------------- the same numbers as TRL's layout
def _trainers(model_dir, tokenizer, tmp_path, lora=False, checkpointing=False, bf16=False, eager=False, **cfg):
    """(TRL's layout, the tree): two trainers on the same weights and the same LoRA adapter, TRL's config alike."""
    from peft import LoraConfig

    # bf16 explicitly: TRL's GRPOConfig turns bf16 autocast on by default where the CPU supports it, and in bf16
    # any two layouts differ by bf16's rounding (~1e-3), not only these two.
    config = {"num_generations": 2, "per_device_train_batch_size": 8, "max_completion_length": 9, "beta": 0.0,
              "bf16": bf16, **hf_internals.checkpointing_kwargs(checkpointing), **cfg}
    peft = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM") if lora else None
    return tuple(grpo_trainer(model_dir, tokenizer, tmp_path / str(shared), parts, peft_config=peft, torch_seed=0,
                              attn_implementation="eager" if eager else None, **config)
                 for shared, parts in ((False, Parts()), (True, Parts(logps=TreeLogps(True)))))


def grouped_batch(seed: int = 0) -> dict:
    """Rows as TRL's _compute_loss gets them: 3 groups (2 + 5 + 1 rows), shuffled together; prompts of 6, 9 and 4
    tokens sharing a 3-token system prompt; completions of 1-9 tokens, two beginning alike, two identical, one
    fully masked (TRL's mask_truncated_completions)."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda n: torch.randint(10, 400, (n,), generator=g).tolist()
    system = rand(3)
    prompts = [system + rand(3), system + rand(6), system + rand(1)]
    rows = []
    for prompt, lengths in zip(prompts, ([5, 9], [3, 7, 7, 2, 6], [4])):
        for n in lengths:
            rows.append((prompt, rand(n)))
    rows[3] = (rows[3][0], rows[2][1][:3] + rand(4))  # begins like another completion of its group
    rows[5] = (rows[5][0], list(rows[4][1]))  # identical to another completion of its group
    order = torch.randperm(len(rows), generator=g).tolist()
    rows = [rows[i] for i in order]
    P, C = max(len(p) for p, _ in rows), max(len(c) for _, c in rows)
    prompt_ids, prompt_mask = torch.full((len(rows), P), PAD), torch.zeros(len(rows), P, dtype=torch.long)
    completion_ids, completion_mask = torch.full((len(rows), C), PAD), torch.zeros(len(rows), C, dtype=torch.long)
    for i, (p, c) in enumerate(rows):
        prompt_ids[i, P - len(p):], prompt_mask[i, P - len(p):] = torch.tensor(p), 1
        completion_ids[i, :len(c)], completion_mask[i, :len(c)] = torch.tensor(c), 1
    completion_mask[order.index(7)] = 0  # the group of one's completion was truncated and masked
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "num_items_in_batch": completion_mask.sum(),
            "advantages": torch.randn(len(rows), generator=g)}


def _logps(trainer, batch, model=None):
    """The policy's per-token log-probs and entropies of the batch's completions, or `model`'s log-probs (TRL's
    reference model: its fused head computes no entropy)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(
            model or trainer.model, ids, mask, batch["completion_ids"].size(1), compute_entropy=model is None)
    return logps, entropies


def _half(batch: dict, rows: slice) -> dict:
    """A micro-batch of some rows (gradient accumulation): its columns as TRL pads them, the whole generation
    batch's token count kept as the dapo normaliser."""
    out = {k: v[rows] for k, v in batch.items() if isinstance(v, torch.Tensor) and v.dim() >= 1}
    used = out["prompt_mask"].any(dim=0).nonzero()
    start = int(used.min()) if used.numel() else 0
    out["prompt_ids"], out["prompt_mask"] = out["prompt_ids"][:, start:], out["prompt_mask"][:, start:]
    out["num_items_in_batch"] = batch["num_items_in_batch"]
    return out


def _gradients(trainer, batch, accumulate: int = 1) -> torch.Tensor:
    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = accumulate  # what Trainer.train() sets for each optimizer step
    size = -(-batch["prompt_ids"].size(0) // accumulate)
    for i in range(accumulate):
        part = _half(batch, slice(i * size, (i + 1) * size)) if accumulate > 1 else batch
        trainer.compute_loss(trainer.model, part).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.requires_grad])


# (id, the model, trainer settings): the settings TRL's log-probs and loss vary with, each against TRL's layout
EQUIVALENCE = [
    ("llama", "llama", {}),
    ("llama, LoRA", "llama", {"lora": True}),
    ("llama, activation checkpointing", "llama", {"checkpointing": True}),
    ("llama, LoRA and checkpointing", "llama", {"lora": True, "checkpointing": True}),
    ("qwen3", "qwen3", {}),
    ("qwen3, LoRA", "qwen3", {"lora": True}),
    ("temperature 0.7 (logits scaled in the fused head)", "llama", {"temperature": 0.7}),
    ("beta 0.04: the KL term against a reference model", "llama", {"beta": 0.04}),
    ("num_iterations 2, PPO's clip active", "llama", {"num_iterations": 2}),
    ("gradient accumulation 2", "llama", {"gradient_accumulation_steps": 2}),
    ("loss grpo", "llama", {"loss_type": "grpo"}),
    ("loss dr_grpo", "llama", {"loss_type": "dr_grpo"}),
    ("loss bnpo", "llama", {"loss_type": "bnpo"}),
    ("loss cispo", "llama", {"loss_type": "cispo"}),
]


@pytest.mark.parametrize("model,settings", [c[1:] for c in EQUIVALENCE], ids=[c[0] for c in EQUIVALENCE])
def test_the_tree_gives_trls_logprobs_entropies_and_gradients(tmp_path, tiny_model_dir, tiny_qwen3_dir, tokenizer,
                                                               model, settings):
    trl, tree = _trainers(tiny_model_dir if model == "llama" else tiny_qwen3_dir, tokenizer, tmp_path, **settings)
    batch = grouped_batch()
    trl_logps, trl_entropies = _logps(trl, batch)
    logps, entropies = _logps(tree, batch)
    scored = batch["completion_mask"].bool()
    assert torch.allclose(logps[scored], trl_logps[scored], atol=2e-5), (logps - trl_logps).abs().max()
    assert torch.allclose(entropies[scored], trl_entropies[scored], atol=2e-5)
    assert not logps[~scored].any() and not entropies[~scored].any()  # zeros where TRL's are zero
    batches = {id(trl): dict(batch), id(tree): dict(batch)}
    if settings.get("beta"):  # each trainer's own reference pass, the tree's through the tree as well
        for t in (trl, tree):
            assert t.ref_model is not None
            batches[id(t)]["ref_per_token_logps"] = _logps(t, batch, t.ref_model)[0]
        ref_trl, ref_tree = batches[id(trl)]["ref_per_token_logps"], batches[id(tree)]["ref_per_token_logps"]
        assert torch.allclose(ref_tree[scored], ref_trl[scored], atol=2e-5)
    if settings.get("num_iterations"):  # the old policy: every other token 0.5 nats less likely, past the clip
        drift = 0.5 * (torch.arange(scored.size(1)) % 2).expand_as(trl_logps) * scored
        for b in batches.values():
            b["old_per_token_logps"] = trl_logps - drift
    accumulate = settings.get("gradient_accumulation_steps", 1)
    trl_grad, grad = _gradients(trl, batches[id(trl)], accumulate), _gradients(tree, batches[id(tree)], accumulate)
    assert grad.abs().max() > 0
    assert float((grad - trl_grad).norm() / trl_grad.norm()) < 1e-4
    if settings.get("num_iterations"):  # the clip held tokens in both layouts alike
        clipped = [internals.metric_values(t, "clip_ratio/region_mean") for t in (trl, tree)]
        assert clipped[0] and clipped[0][-1] > 0 and clipped[1][-1] == pytest.approx(clipped[0][-1])


def test_in_bf16_autocast_the_tree_agrees_with_trls_layout_to_bf16_rounding(tmp_path, tiny_model_dir, tokenizer):
    trl, tree = _trainers(tiny_model_dir, tokenizer, tmp_path, bf16=True)
    batch = grouped_batch()
    (trl_logps, _), (logps, _) = _logps(trl, batch), _logps(tree, batch)
    scored = batch["completion_mask"].bool()
    assert float((logps - trl_logps)[scored].abs().max()) < 0.02


def test_a_tool_episode_with_masked_tool_results_gives_trls_loss(tmp_path, tiny_model_dir, tokenizer):
    # A multi-turn episode is a completion holding the tool's result; tool_mask keeps those tokens out of the loss
    # (TRL's layout and the tree alike compute them, as context).
    trl, tree = _trainers(tiny_model_dir, tokenizer, tmp_path)
    batch = grouped_batch(seed=1)
    tool_mask = torch.ones_like(batch["completion_mask"])
    tool_mask[:, 2:4] = 0  # tokens 2-3 of every completion came from the tool
    batch["tool_mask"] = tool_mask
    trl_grad, grad = _gradients(trl, batch), _gradients(tree, batch)
    assert float((grad - trl_grad).norm() / trl_grad.norm()) < 1e-4


def test_the_loss_pass_records_its_positions_and_trls(tmp_path, tiny_model_dir, tokenizer):
    from grpokit.run import POSITIONS_COMPUTED, POSITIONS_TRL

    _, trainer = _trainers(tiny_model_dir, tokenizer, tmp_path)
    batch = grouped_batch()
    _gradients(trainer, batch)
    computed = internals.metric_values(trainer, POSITIONS_COMPUTED)[-1]
    trl = internals.metric_values(trainer, POSITIONS_TRL)[-1]
    assert trl == batch["prompt_ids"].numel() + batch["completion_ids"].numel()
    assert 0 < computed < trl / 2  # 3 prompts once, each completion to its own length


# ---------------------------------------------------------------- which models take it
def _gpt2(tmp_path, tokenizer):
    from transformers import GPT2Config

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=256,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    path = tmp_path / "tiny-gpt2"
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_which_models_take_the_tree(tmp_path, tiny_model_dir, tokenizer):
    llama = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert refusal(llama) is None
    eager = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="eager")
    assert refusal(eager) is None
    gpt2 = AutoModelForCausalLM.from_pretrained(_gpt2(tmp_path, tokenizer))
    assert "rotary" in refusal(gpt2)
    from transformers import MistralConfig

    windowed = AutoModelForCausalLM.from_config(MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                                              num_hidden_layers=1, num_attention_heads=2,
                                                              num_key_value_heads=1, sliding_window=16))
    assert refusal(windowed, longest=12) is None and "sliding" in refusal(windowed, longest=40)


def test_eager_attention_gives_the_same_numbers_through_its_additive_mask(tmp_path, tiny_model_dir, tokenizer):
    trl, tree = _trainers(tiny_model_dir, tokenizer, tmp_path, eager=True)
    assert hf_internals.attention_implementation(tree.model) == "eager"
    batch = grouped_batch(seed=2)
    (a, _), (b, _) = _logps(trl, batch), _logps(tree, batch)
    assert torch.allclose(a, b, atol=2e-5)


# ---------------------------------------------------------------- from the command line
def _metrics(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_cli_run_records_the_positions_it_computed(tmp_path, tiny_model_dir, capsys):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:length_spread", "role": "shaping"}],
                         skip_no_signal=False)
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    out = capsys.readouterr()
    assert "log-probs: each distinct prefix computed once" in out.out + out.err
    assert "sampling: grpokit's decoding loop" in out.out + out.err
    for m in _metrics(tmp_path / "run"):
        assert 0 < m["grpokit/positions/computed"] < m["grpokit/positions/trl_layout"], m


def test_a_model_that_cannot_take_the_tree_trains_in_trls_layout_and_says_why(tmp_path, tokenizer, capsys):
    recipe = make_recipe(tmp_path, _gpt2(tmp_path, tokenizer), [{"name": "reward_fns:length_spread",
                                                                 "role": "shaping"}], skip_no_signal=False)
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    said = capsys.readouterr()
    said = said.out + said.err
    assert "log-probs: TRL's layout, one row per completion: no rotary position embeddings" in said
    assert "sampling: transformers' generate: no rotary position embeddings" in said
    for m in _metrics(tmp_path / "run"):
        assert m["grpokit/positions/computed"] == m["grpokit/positions/trl_layout"], m


def test_shared_prefix_false_is_trls_layout_everywhere(tmp_path, tiny_model_dir, capsys):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:length_spread", "role": "shaping"}],
                         skip_no_signal=False, shared_prefix=False)
    raw = yaml.safe_load(recipe.read_text())
    assert raw["train"]["shared_prefix"] is False
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    said = capsys.readouterr()
    assert "log-probs: TRL's layout (train.shared_prefix: false)" in said.out + said.err
    for m in _metrics(tmp_path / "run"):
        assert m["grpokit/positions/computed"] == m["grpokit/positions/trl_layout"]


def test_sft_on_tool_demonstrations_shares_the_tool_block_and_learns_the_same(tmp_path, tiny_tool_model_dir, capsys):
    # The calculator demonstrations share their ~570-token prompt of tool schemas: the tree computes it once a
    # micro-batch, and the losses of two SFT steps are TRL's layout's (to float rounding: the first step's weights
    # are the same, the second's differ by it).
    losses, positions = {}, {}
    for shared in (True, False):
        run = tmp_path / f"sft-{shared}"
        assert main(["sft", str(REPO / "recipes" / "smollm2-calculator-sft.yaml"), "--output-dir", str(run),
                     "--set", f"model.name={tiny_tool_model_dir}", "--set", "model.gradient_checkpointing=false",
                     "--set", "train.max_steps=2", "--set", "train.logging_steps=1", "--set",
                     "train.per_device_train_batch_size=4", "--set", "train.num_generations=2", "--set", f"train.shared_prefix={str(shared).lower()}",
                     "--set", "train.save_steps=2"]) == 0
        metrics = _metrics(run)
        losses[shared] = [m["loss"] for m in metrics if "loss" in m]
        positions[shared] = [(m["grpokit/positions/computed"], m["grpokit/positions/trl_layout"]) for m in metrics
                             if "grpokit/positions/computed" in m]
    said = capsys.readouterr()
    assert "SFT loss: each distinct prefix computed once" in said.out + said.err
    assert len(losses[True]) == 2 and losses[True] == pytest.approx(losses[False], rel=1e-4)
    assert positions[True] and all(c < t / 2 for c, t in positions[True])  # 4 episodes share the tool block
    assert not positions[False]


def test_a_long_group_splits_into_trees_each_with_its_prompt_and_groups_join_only_when_sharing_pays():
    # GPU-sized: 64 completions of 256 tokens on one 512-token prompt, Qwen3-0.6B's costs. One tree of ~17k
    # positions would spend most of its time on attention over the dense mask: the group splits.
    qwen = TreeCost(per_position=4.4e8, per_pair=2 * 28 * 16 * 128 / 0.74)
    prompt = list(range(1000, 1512))
    rows = [prompt + [r] * 256 for r in range(64)]
    trees = pack(rows, [512] * 64, qwen)
    assert 4 <= len(trees) <= 32 and all(t.tokens[:512] == prompt for t in trees)
    assert sorted(r for t in trees for r in t.rows) == list(range(64))
    # Two groups of the demo's shape sharing a short system prompt: apart (attention over one tree of both would
    # cost more than the 50 shared positions save); sharing a long tool block: together.
    demo = TreeCost(per_position=1.06e8, per_pair=2 * 30 * 9 * 64 / 0.74)
    for shared, together in ((50, False), (550, True)):
        head = list(range(2000, 2000 + shared))
        rows = [head + [g] * 18 + [g * 100 + r] * 48 for g in (1, 2) for r in range(8)]
        starts = [shared + 18] * 16
        assert (len(pack(rows, starts, demo)) == 1) is together, shared
