"""The large step's parts: the eager token step over the positioned static cache (grpokit.generation.steps, from
STATIC_ROWS rows), the inverse draw (`generation.draw: inverse`, grpokit.generation.sampling.inverse_draw), the
CPU kernel of TRL's fused LM head (grpokit.training.lm_head.CpuHead) and the large-step countdown recipe.

Each is checked against what it replaces: the same greedy tokens as transformers' growing cache, the same
distribution as torch.multinomial, TRL's own log-probs, entropies and gradients.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpokit import internals
from grpokit.generation import steps
from grpokit.generation.decode import Decoding, decode
from grpokit.generation.sampling import inverse_draw
from grpokit.training.lm_head import CpuHead

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["12 + 7 =", "A shelf holds 49 books. 12 books are taken away. How many are left?", "3 - 1 ="]


def _rows(tokenizer, group: int) -> list[list[int]]:
    return [tokenizer(p).input_ids for p in PROMPTS for _ in range(group)]


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
@pytest.mark.parametrize("stop_after", [None, 3], ids=["eos only", "rows that finish early"])
def test_the_static_eager_step_gives_the_growing_caches_greedy_tokens(peaked_models, tokenizer, monkeypatch, kind,
                                                                      stop_after):
    model, rows = peaked_models[kind], _rows(tokenizer, 3)
    base = Decoding(16, (tokenizer.eos_token_id,), tokenizer.pad_token_id, sample=False)
    monkeypatch.setattr(steps, "STATIC_ROWS", 10**9)  # transformers' DynamicCache
    if stop_after is not None:  # row 0's third token stops: rows finish early, the static batch is compacted
        first = decode(model, rows, base).ids[0]
        base = Decoding(16, (tokenizer.eos_token_id, first[stop_after - 1]), tokenizer.pad_token_id, sample=False)
    growing = decode(model, rows, base)
    monkeypatch.setattr(steps, "STATIC_ROWS", 1)
    static = decode(model, rows, base)
    assert static.ids == growing.ids and not static.compiled
    if stop_after is not None:
        assert min(map(len, static.ids)) <= stop_after < max(map(len, static.ids))


def test_from_static_rows_on_the_eager_step_is_the_static_one(peaked_models, tokenizer, monkeypatch):
    from grpokit.generation.decode import prefill

    model = peaked_models["llama"]
    layers, _, mask, _ = prefill(model, _rows(tokenizer, 2))
    monkeypatch.setattr(steps, "STATIC_ROWS", len(mask))
    step = steps.make_step(model, layers, mask, 4)
    assert isinstance(step, steps.CompiledStep) and not step.compiled
    step.close()
    monkeypatch.setattr(steps, "STATIC_ROWS", len(mask) + 1)
    assert isinstance(steps.make_step(model, layers, mask, 4), steps.EagerStep)


def test_a_model_that_refuses_the_static_cache_decodes_over_transformers_one_and_says_so(peaked_models, tokenizer,
                                                                                        monkeypatch, capsys):
    model, rows = peaked_models["llama"], _rows(tokenizer, 2)
    base = Decoding(6, (tokenizer.eos_token_id,), tokenizer.pad_token_id, sample=False)
    monkeypatch.setattr(steps, "STATIC_ROWS", 10**9)
    growing = decode(model, rows, base)

    def refuses(*args, **kwargs):
        raise RuntimeError("this model's attention takes no positioned cache")

    monkeypatch.setattr(steps, "STATIC_ROWS", 1)
    monkeypatch.setattr(steps, "_static_failed", {})
    monkeypatch.setattr(steps, "_said", set())
    monkeypatch.setattr(steps.CompiledStep, "__init__", refuses)
    assert decode(model, rows, base).ids == growing.ids
    assert "the static one failed (RuntimeError: this model's attention" in capsys.readouterr().out
    assert type(model) in steps._static_failed


def test_the_inverse_draw_has_the_softmax_distribution_and_never_draws_a_removed_token():
    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 1.0, 0.0, -float("inf"), 0.5], [0.0, 0.0, 0.0, 0.0, -float("inf")]])
    draws = 40_000
    scores = logits.repeat_interleave(draws, dim=0)
    tokens = inverse_draw(scores).view(2, draws)
    for row in range(2):
        seen = torch.bincount(tokens[row], minlength=5).float() / draws
        expected = torch.softmax(logits[row], dim=-1)
        # 40,000 draws: a share's standard error is at most 0.0025; 0.01 is four of them
        assert torch.allclose(seen, expected, atol=0.01), (row, seen, expected)
    assert not (tokens[0] == 3).any() and not (tokens[1] == 4).any()  # probability zero: never drawn


def test_the_inverse_draw_is_seeded_and_samples_in_the_decoding_loop(peaked_models, tokenizer):
    model, rows = peaked_models["llama"], _rows(tokenizer, 4)
    decoding = Decoding(8, (tokenizer.eos_token_id,), tokenizer.pad_token_id, temperature=1.0, draw="inverse")
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        runs.append(decode(model, rows, decoding).ids)
    assert runs[0] == runs[1]
    assert len({tuple(r) for r in runs[0]}) > 1  # sampled: the rows of a group differ
    assert "inverse transform" in decoding.applied()


def _head_inputs(n=70, h=16, v=300, bias=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, h, generator=g).requires_grad_()
    weight = (torch.randn(v, h, generator=g) * 0.7).requires_grad_()
    b = (torch.randn(v, generator=g) * 0.1).requires_grad_() if bias else None
    targets = torch.randint(0, v, (n,), generator=g)
    return hidden, weight, b, targets


@pytest.mark.parametrize("temperature,bias,entropy_in_loss", [(1.0, False, False), (0.7, True, False),
                                                               (1.0, False, True), (0.6, True, True)])
def test_the_cpu_head_gives_trls_log_probs_entropies_and_gradients(temperature, bias, entropy_in_loss, monkeypatch):
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    from grpokit.training import lm_head

    monkeypatch.setattr(lm_head, "TOKENS", 32)  # several chunks of tokens
    fields = ("log_probs", "entropy", "is_top1")
    results = []
    for kernel in (ChunkedLogProbFunction, CpuHead(ChunkedLogProbFunction)):
        hidden, weight, b, targets = _head_inputs(bias=bias)
        targets[:5] = (hidden[:5] @ weight.t()).argmax(dim=-1)  # some targets are the top-1
        lp, ent, _, _, top = kernel.apply(hidden, weight, b, targets, temperature, 128, None, 1.0, fields)
        loss = -lp.sum() + (0.3 * ent.sum() if entropy_in_loss else 0.0)
        loss.backward()
        results.append((lp.detach(), ent.detach(), top, hidden.grad, weight.grad, None if b is None else b.grad))
    trl, cpu = results
    for name, a, b_ in zip(("log_probs", "entropy", "is_top1", "grad hidden", "grad weight", "grad bias"), trl, cpu):
        if a is None:
            assert b_ is None
        elif a.dtype == torch.bool:
            assert torch.equal(a, b_) and int(a.sum()) >= 5, name
        else:
            assert torch.allclose(a, b_, rtol=1e-4, atol=1e-5), name


def test_the_cpu_head_leaves_a_softcap_and_other_fields_to_trl():
    calls = []

    class Original:
        @staticmethod
        def apply(*args):
            calls.append(args)
            return "trl"

    head = CpuHead(Original)
    hidden, weight, _, targets = _head_inputs()
    assert head.apply(hidden, weight, None, targets, 1.0, 128, 30.0, 1.0, ("log_probs",)) == "trl"
    assert head.apply(hidden, weight, None, targets, 1.0, 128, None, 1.0, ("log_probs", "mean_logits")) == "trl"
    assert len(calls) == 2
    assert head.apply(hidden, weight, None, targets, 1.0, 128, None, 1.0, ("log_probs",))[0].shape == (70,)


def test_the_fused_head_kernel_is_rebound_for_the_block_only():
    import trl.trainer.utils as trl_utils

    original = trl_utils._ChunkedLogProbFunction
    with internals.fused_head_kernel(CpuHead):
        assert isinstance(trl_utils._ChunkedLogProbFunction, CpuHead)
        assert trl_utils._ChunkedLogProbFunction.original is original
    assert trl_utils._ChunkedLogProbFunction is original
    with internals.fused_head_kernel(None):
        assert trl_utils._ChunkedLogProbFunction is original


def test_the_large_step_recipe_generates_256_completions_and_learns_from_micro_batches():
    from grpokit.recipe import load_recipe

    recipe = load_recipe(ROOT / "recipes" / "smollm2-countdown-large.yaml")
    t = recipe.train
    assert t.per_device_train_batch_size * t.gradient_accumulation_steps == 256
    assert t.per_device_train_batch_size % t.num_generations == 0
    assert recipe.generation.draw == "inverse"


def test_a_run_trains_with_the_inverse_draw_the_static_cache_and_the_cpu_head(tmp_path, tiny_model_dir, monkeypatch,
                                                                             capsys):
    """The large step's parts reached from the CLI: `grpokit train` with generation.draw: inverse says so, decodes
    over the static cache (STATIC_ROWS lowered to the tiny run's rows) and computes the loss's log-probs with
    CpuHead's kernel."""
    from conftest import CHARS, make_recipe

    from grpokit.cli import main
    from grpokit.training import lm_head

    built, kernel = [], []
    original_init = steps.CompiledStep.__init__

    def counted_init(self, *args, **kwargs):
        built.append(kwargs.get("compiled", True))
        original_init(self, *args, **kwargs)

    original_apply = lm_head.CpuLogProbs.apply

    def counted_apply(*args):
        kernel.append(1)
        return original_apply(*args)

    monkeypatch.setattr(steps, "STATIC_ROWS", 2)
    monkeypatch.setattr(steps.CompiledStep, "__init__", counted_init)
    monkeypatch.setattr(lm_head.CpuLogProbs, "apply", counted_apply)
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], {"generation": {"draw": "inverse"}}, max_steps=1,
                         skip_no_signal=False)  # the loss runs whatever the rewards
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    assert "the inverse draw" in capsys.readouterr().out
    assert built and not any(built)  # the eager step over the static cache, never compiled
    assert kernel  # the loss's log-probs through CpuHead
