"""Nucleus sampling over the most likely candidates (grpokit.generation.sampling) keeps transformers' tokens.

The claim: the scores `TopPCandidates` returns equal `TopPLogitsWarper`'s on every row, so sampling from them
draws the same ids for the same seed: in a plain `generate`, in grpokit's evaluation backend and in TRL's own
generate call during training. And the draw over the nucleus only (NucleusDraw, generation.draw: nucleus): the
warpers' distribution (chi-square over many draws on a tiny model's real logits, seeded), a seed's run reproduced.
"""
from __future__ import annotations

import json

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM, TopPLogitsWarper

from grpokit.cli import main
from grpokit.families.math import generate as arithmetic
from grpokit.generation import CANDIDATES, SamplingParams, TopPCandidates, complete, warpers
from grpokit.generation.sampling import NEUTRAL

from conftest import write_jsonl


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a == b) | (torch.isinf(a) & torch.isinf(b))).all())


def _peaked(rows: int, vocab: int, spread: float, head: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(rows, vocab, generator=g)
    scores[:, :head] += spread * torch.rand(rows, head, generator=g) + spread  # a language model's peaked rows
    return scores[:, torch.randperm(vocab, generator=g)]


@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.95, 0.99, 1.0])
@pytest.mark.parametrize("spread, head", [
    (12.0, 5),    # a confident model: the nucleus is a handful of tokens (the fast path decides)
    (8.0, 40),    # tens of tokens
    (1.0, 10),    # nearly flat: the nucleus is thousands of tokens wide (rows go to transformers' warper)
])
def test_the_kept_scores_equal_transformers_warper(top_p, spread, head):
    scores = _peaked(64, 49152, spread, head, seed=int(top_p * 100) + head)
    fast = TopPCandidates(top_p)
    assert _same(fast(None, scores.clone()), TopPLogitsWarper(top_p)(None, scores.clone()))


def test_ties_and_boundaries_go_to_transformers_warper():
    scores = torch.full((2, 1000), -10.0)
    scores[0, :4] = 5.0  # four equal logits: the boundary of a 0.6 nucleus splits them
    scores[1, :2] = torch.tensor([2.0, 2.0]).log()  # probabilities 0.5 / 0.5: a mass exactly on top_p = 0.5
    fast = TopPCandidates(0.6)
    assert _same(fast(None, scores.clone()), TopPLogitsWarper(0.6)(None, scores.clone()))
    assert fast.fallback_rows >= 1


def test_the_fast_path_runs_on_peaked_rows():
    fast = TopPCandidates(0.9)
    fast(None, _peaked(32, 49152, 12.0, 5, seed=3))
    assert fast.fallback_rows == 0  # decided on the candidates alone: no vocabulary sort


def test_warpers_keep_transformers_order():
    names = [type(w).__name__ for w in warpers(0.7, 20, 0.9, 0.05)]
    assert names == ["TemperatureLogitsWarper", "TopKLogitsWarper", "TopPCandidates", "MinPLogitsWarper"]
    assert [type(w).__name__ for w in warpers(0.7, None, 0.9, candidates=0)] == ["TemperatureLogitsWarper",
                                                                                 "TopPLogitsWarper"]
    assert len(warpers(1.0, 0, 1.0)) == 0  # nothing to do: plain multinomial sampling
    with pytest.raises(ValueError, match="top_p"):
        TopPCandidates(0.0)


@pytest.fixture(scope="module")
def peaked_model_dir(tmp_path_factory, tiny_model_dir):
    """The tiny model with its output scaled up: confident rows whose nucleus is a few tokens, as a trained
    model's are (the random tiny model's rows are nearly flat, which would send every row to the fallback)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    out = tmp_path_factory.mktemp("peaked")
    model.save_pretrained(out)
    for f in tiny_model_dir.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            (out / f.name).write_bytes(f.read_bytes())
    return out


def test_generate_draws_the_same_ids_as_transformers_top_p(peaked_model_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(peaked_model_dir, dtype=torch.float32)
    ids = tokenizer(["1 + 1 =", "What is 7 - 3?", "Tom has 5 apples."], return_tensors="pt", padding=True,
                    padding_side="left")
    common = dict(**ids, max_new_tokens=12, do_sample=True, pad_token_id=tokenizer.pad_token_id,
                  num_return_sequences=4)
    torch.manual_seed(0)
    reference = model.generate(**common, temperature=0.7, top_p=0.9, top_k=0)
    processors = warpers(0.7, None, 0.9)
    torch.manual_seed(0)
    ours = model.generate(**common, **NEUTRAL, logits_processor=processors)
    assert torch.equal(reference, ours)
    assert processors[-1].fallback_rows < 12 * 12  # the candidates decided most rows


def test_grpokits_backend_samples_as_transformers_does(peaked_model_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(peaked_model_dir, dtype=torch.float32)
    prompts = [tokenizer(q)["input_ids"] for q in ("1 + 1 =", "What is 12 - 5?")]
    params = SamplingParams(max_tokens=10, n=4, temperature=0.7, top_p=0.9, seed=0)
    fast = complete(model, tokenizer, prompts, params, backend_options={"top_p_candidates": CANDIDATES})
    plain = complete(model, tokenizer, prompts, params, backend_options={"top_p_candidates": 0})
    assert [[c.ids for c in g] for g in fast] == [[c.ids for c in g] for g in plain]


def _train_samples(tmp_path, model_dir, candidates: int, shared_prefix: bool = True) -> list[str]:
    data = write_jsonl(tmp_path / "train.jsonl", arithmetic(24, seed=7))
    recipe = {"model": {"name": str(model_dir)},
              "data": {"train": str(data), "eval_fraction": 0.25, "template": "plain_en"},
              "rewards": [{"name": "format"}],
              # generate's own draw over the vocabulary: its completions for a seed, to compare
              "generation": {"top_p_candidates": candidates, "draw": "vocabulary"},
              "train": {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4,
                        "max_completion_length": 8, "max_steps": 2, "save_steps": 100, "temperature": 0.7,
                        "top_p": 0.9, "num_samples_logged": 4, "seed": 3, "shared_prefix": shared_prefix}}
    path = tmp_path / f"recipe-{candidates}-{shared_prefix}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run = tmp_path / f"run-{candidates}-{shared_prefix}"
    assert main(["train", str(path), "--output-dir", str(run), "--skip-audit"]) == 0
    return [json.loads(line)["completion"] for line in (run / "samples.jsonl").read_text().splitlines()]


def test_training_samples_the_same_completions_through_the_candidates(tmp_path, peaked_model_dir, monkeypatch):
    calls = []
    original = TopPCandidates.__call__
    monkeypatch.setattr(TopPCandidates, "__call__", lambda self, i, s: calls.append(1) or original(self, i, s))
    fast = _train_samples(tmp_path, peaked_model_dir, CANDIDATES)
    assert calls  # TRL's generate call went through the candidates
    calls.clear()
    plain = _train_samples(tmp_path, peaked_model_dir, 0)
    assert not calls and fast == plain  # transformers' own warper: the same completions, step by step


def test_transformers_generate_in_training_draws_through_grpokits_top_p_alone(tmp_path, peaked_model_dir,
                                                                              monkeypatch):
    # train.shared_prefix: false -> TRL's call answered by transformers' generate, with grpokit's exact top-p in
    # place of transformers' own warpers: those are off in the generation config TRL built from the
    # generation_kwargs the factory passed (Sampling.generation_kwargs), so top-p is applied once.
    calls = []
    original = TopPCandidates.__call__
    monkeypatch.setattr(TopPCandidates, "__call__", lambda self, i, s: calls.append(1) or original(self, i, s))
    fast = _train_samples(tmp_path, peaked_model_dir, CANDIDATES, shared_prefix=False)
    assert calls
    calls.clear()
    plain = _train_samples(tmp_path, peaked_model_dir, 0, shared_prefix=False)
    assert not calls and fast == plain


def test_sampling_asks_for_transformers_warpers_off_only_where_its_own_replace_them(tiny_model_dir, tokenizer,
                                                                                  tmp_path):
    from trl import GRPOConfig

    from grpokit.errors import GrpokitError
    from grpokit.recipe import Recipe
    from grpokit.training.sampling import Sampling
    from grpokit.training.trainer import Parts

    from conftest import grpo_trainer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)

    def kwargs(top_p: float, **train):
        recipe = Recipe.model_validate({"model": {"name": "x"}, "data": {"train": "t.jsonl"},
                                        "rewards": [{"name": "format"}], "train": {"top_p": top_p, **train}})
        args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", top_p=top_p,
                          generation_kwargs={"repetition_penalty": 1.1})
        return Sampling(recipe.generation, recipe.train), args

    sampling, args = kwargs(0.9, shared_prefix=False)  # transformers' generate through grpokit's exact top-p
    assert sampling.decided is None
    assert sampling.generation_kwargs(model, args) == {"repetition_penalty": 1.1, **NEUTRAL}
    assert sampling.decided == ("train.shared_prefix: false", True)  # decided once: attach carries it out
    for top_p, train in ((0.9, {}), (1.0, {"shared_prefix": False})):  # the loop; no top-p to replace
        sampling, args = kwargs(top_p, **train)
        assert sampling.generation_kwargs(model, args) == {"repetition_penalty": 1.1}
    # a trainer built without them would apply top-p twice: refused, saying how to build it
    sampling, _ = kwargs(0.9, shared_prefix=False)
    with pytest.raises(GrpokitError, match="generation_kwargs"):
        grpo_trainer(tiny_model_dir, tokenizer, tmp_path / "t", Parts(sampling=sampling), top_p=0.9,
                     num_generations=2, per_device_train_batch_size=2)


# ------------------------------------------------------------------ the draw over the nucleus only (NucleusDraw)
def _chi_square_p(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's chi-square goodness of fit of `counts` to `probs`: the p-value, tokens expected fewer than 5
    times pooled into one bin (the test's usual validity rule)."""
    expected = probs * counts.sum()
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    exp = torch.cat([expected[big], expected[~big].sum()[None]])
    keep = exp > 0
    stat = (((obs - exp) ** 2)[keep] / exp[keep]).sum()
    df = int(keep.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.float64), stat.double() / 2))


def _row_logits(model_dir, tokenizer) -> torch.Tensor:
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = tokenizer(["1 + 1 =", "Tom has 5 apples and"], return_tensors="pt", padding=True, padding_side="left")
    with torch.no_grad():
        return model(**ids).logits[:, -1].float()


# The random tiny model's rows are nearly flat (logits' spread ~0.16): low temperatures give nuclei of a few to a
# few dozen tokens, as a trained model's are at temperature 1. The fallback sorts the whole vocabulary of every
# draw (transformers' warper): fewer draws there.
DRAWS = [  # (what, temperature, top_k, top_p, candidates, draws, the rows' path)
    ("top_p on the candidates: ~50 tokens", 0.03, None, 0.9, CANDIDATES, 4000, "fast"),
    ("top_k then top_p: ~20 tokens", 0.04, 30, 0.9, CANDIDATES, 4000, "fast"),
    ("top_k alone: 10 tokens", 0.03, 10, 1.0, CANDIDATES, 4000, "fast"),
    ("a nucleus wider than the candidates: transformers' warper", 0.03, None, 0.9, 8, 1000, "fallback"),
]


@pytest.mark.parametrize("what,temperature,top_k,top_p,candidates,draws,path", DRAWS, ids=[d[0] for d in DRAWS])
def test_the_nucleus_draw_has_the_warpers_distribution(tiny_model_dir, tokenizer, what, temperature, top_k, top_p,
                                                        candidates, draws, path):
    from grpokit.generation.sampling import NucleusDraw

    logits = _row_logits(tiny_model_dir, tokenizer)
    chain = warpers(temperature, top_k, top_p, candidates=0)  # transformers' own warpers: the reference
    for row in logits:
        want = torch.softmax(chain(None, row[None].clone()), dim=-1)[0]
        assert int((want > 0).sum()) > 2, what  # a nucleus with a choice in it
        draw, counts = NucleusDraw(temperature, top_k, top_p, candidates), torch.zeros_like(want)
        torch.manual_seed(1)  # a fixed stream: the verdict is the same on every run
        for _ in range(draws // 500):
            counts += torch.bincount(draw(row.repeat(500, 1)), minlength=len(want)).float()
        assert counts[want == 0].sum() == 0, what  # never a token the warpers removed
        assert _chi_square_p(counts, want) > 1e-3, what
        # the same counts are far from a neighbouring distribution: the test can fail
        other = torch.softmax(warpers(temperature * 1.3, top_k, top_p, candidates=0)(None, row[None].clone()), -1)[0]
        assert _chi_square_p(counts, other) < 1e-6, what
        assert (draw.fallback_rows == 0) == (path == "fast"), what


def test_a_seeds_nucleus_draws_reproduce_and_differ_from_another_seeds(peaked_model_dir, tokenizer):
    from grpokit.generation.decode import Decoding, decode

    model = AutoModelForCausalLM.from_pretrained(peaked_model_dir, dtype=torch.float32).eval()
    rows = [tokenizer(p).input_ids for p in ("1 + 1 =", "What is 12 - 5?") for _ in range(4)]
    decoding = Decoding(12, (tokenizer.eos_token_id,), tokenizer.pad_token_id, temperature=0.9, top_p=0.9,
                        draw="nucleus")

    def run(seed):
        torch.manual_seed(seed)
        return decode(model, rows, decoding).ids

    first = run(0)
    assert run(0) == first  # the same seed: the same completions
    assert run(1) != first  # another seed: others
    assert len({tuple(r) for r in first}) > 1  # the rows of a group differ among themselves
    # and the loop names the draw where it says what it applies (grpokit.generation.decode.Decoding.applied)
    assert decoding.applied() == "temperature 0.9, top_p 0.9, sampled over the nucleus only"
    assert Decoding(12, (2,), 2, temperature=0.9, top_p=0.9).applied() == "temperature 0.9, top_p 0.9, sampled"
