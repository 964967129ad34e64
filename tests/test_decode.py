"""grpokit's decoding loop (grpokit.generation.decode): the tokens transformers' `generate` gives for the same seed,
each prompt prefilled once, finished rows out of the batch; in evaluation (HFBackend) and in training (TRL's
generate call, grpokit.training.sampling).
"""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, GenerationConfig

from conftest import make_recipe
from grpokit.cli import main
from grpokit.generation import SamplingParams, complete
from grpokit.generation.decode import Decoding, decode
from grpokit.generation.sampling import NEUTRAL, warpers

PROMPTS = ["12 + 7 =", "A shelf holds 49 books. 12 books are taken away. How many are left?", "3 - 1 ="]


def _model(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def _rows(tokenizer, group: int) -> list[list[int]]:
    return [tokenizer(p).input_ids for p in PROMPTS for _ in range(group)]


def _generate(model, rows, pad, stops, seed, **how) -> list[list[int]]:
    """transformers' generate on the rows left-padded, cut after the first stop id (what TRL keeps)."""
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = (ids != -1).long()
    for i, r in enumerate(rows):
        mask[i, :width - len(r)] = 0
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, pad_token_id=pad, eos_token_id=list(stops), **how)
    cut = []
    for row in out[:, width:].tolist():
        end = next((i for i, t in enumerate(row) if t in stops), None)
        cut.append(row if end is None else row[:end + 1])
    return cut


CASES = [  # (what, Decoding fields, transformers' generate keywords)
    ("sampled, fast top-p", dict(temperature=0.7, top_p=0.9),
     dict(do_sample=True, **NEUTRAL, logits_processor=warpers(0.7, 0, 0.9))),
    ("sampled, transformers' own warpers", dict(temperature=1.3, top_k=20, top_p=0.8, top_p_candidates=0),
     dict(do_sample=True, temperature=1.3, top_k=20, top_p=0.8)),
    ("greedy", dict(sample=False), dict(do_sample=False, temperature=None, top_p=None, top_k=None)),
    ("min_new_tokens and a repetition penalty", dict(temperature=0.9, min_new_tokens=12, repetition_penalty=1.3),
     dict(do_sample=True, temperature=0.9, top_k=0, top_p=1.0, min_new_tokens=12, repetition_penalty=1.3)),
    # each of TRL's other sampling settings alone (issue 51): transformers' warper for it, nothing else
    ("min_p alone", dict(min_p=0.1), dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, min_p=0.1)),
    ("top_k alone", dict(top_k=5), dict(do_sample=True, temperature=1.0, top_k=5, top_p=1.0)),
]


@pytest.mark.parametrize("what,ours,theirs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_the_loop_draws_what_generate_draws(tiny_model_dir, tiny_qwen3_dir, tokenizer, what, ours, theirs, kind):
    model = _model(tiny_model_dir if kind == "llama" else tiny_qwen3_dir)
    pad, stops = tokenizer.pad_token_id, (tokenizer.eos_token_id, 13)  # 13: a second stop id, common in samples
    rows = _rows(tokenizer, 4)
    for seed in range(3):
        expected = _generate(model, rows, pad, stops, seed, max_new_tokens=20, **theirs)
        torch.manual_seed(seed)
        done = decode(model, rows, Decoding(20, stops, pad, **ours))
        assert done.ids == expected, (what, seed)
    assert done.prefill_positions < done.padded_prefill_positions / 3  # 3 prompts once, not 12 rows padded


def test_finished_rows_leave_the_batch(tiny_model_dir, tokenizer):
    model = _model(tiny_model_dir)
    rows = _rows(tokenizer, 4)
    stops = tuple(range(0, 2000))  # most tokens stop a row: rows finish at different steps
    torch.manual_seed(0)
    done = decode(model, rows, Decoding(16, stops, tokenizer.pad_token_id, temperature=1.0))
    lengths = [len(r) for r in done.ids]
    assert len(set(lengths)) > 1
    assert done.row_steps == sum(lengths) < len(rows) * done.steps  # each row decoded only until it stopped


def test_recorded_logprobs_are_the_drawn_tokens_under_raw_logits_over_temperature(tiny_model_dir, tokenizer):
    model = _model(tiny_model_dir)
    rows = _rows(tokenizer, 2)
    torch.manual_seed(0)
    done = decode(model, rows, Decoding(6, (tokenizer.eos_token_id,), tokenizer.pad_token_id, temperature=0.7,
                                        top_p=0.5, record_logprobs=True))
    for prompt, ids, logprobs in zip(rows, done.ids, done.logprobs):
        with torch.no_grad():  # the trainer's way: the whole sequence's logits / temperature, no top-p
            logits = model(torch.tensor([prompt + ids])).logits[0]
        want = torch.log_softmax(logits[len(prompt) - 1:-1] / 0.7, dim=-1).gather(1, torch.tensor(ids)[:, None])
        assert torch.allclose(torch.tensor(logprobs), want.squeeze(1), atol=1e-4)


def test_settings_the_loop_does_not_read_are_named():
    config = GenerationConfig(max_new_tokens=8, do_sample=True, no_repeat_ngram_size=3, eos_token_id=2,
                              pad_token_id=2)
    why = Decoding.from_generation_config(config)
    assert isinstance(why, str) and "no_repeat_ngram_size" in why
    assert "num_beams" in Decoding.from_generation_config(GenerationConfig(max_new_tokens=8, num_beams=2,
                                                                           eos_token_id=2))
    trl_like = GenerationConfig(max_new_tokens=8, do_sample=True, pad_token_id=2, bos_token_id=1, eos_token_id=[2],
                                temperature=0.7, top_p=0.9, top_k=0, min_p=None, repetition_penalty=1.0,
                                cache_implementation=None, disable_compile=True)
    decoding = Decoding.from_generation_config(trl_like)
    assert isinstance(decoding, Decoding) and decoding.temperature == 0.7 and decoding.stop_ids == (2,)


@pytest.mark.parametrize("sampled", [False, True])
def test_evaluation_gives_the_same_completions_with_and_without_the_loop(tiny_model_dir, tokenizer, sampled):
    from grpokit.generation.core import HFBackend, run, token_policy

    model = _model(tiny_model_dir)
    ids = [tokenizer(p).input_ids for p in PROMPTS]
    params = SamplingParams(max_tokens=12, n=3 if sampled else 1, temperature=0.8 if sampled else 0.0, top_p=0.9,
                            seed=4, stop_token_ids=token_policy(model, tokenizer).stop_token_ids)
    pad = token_policy(model, tokenizer).pad_token_id
    loop, hf = HFBackend(model, pad), HFBackend(model, pad, shared_prefix=False)
    assert loop.decodes() is None and hf.decodes() == "train.shared_prefix: false"
    assert run(loop, ids, params, tokenizer) == run(hf, ids, params, tokenizer)
    assert complete(model, tokenizer, ids, params) == run(hf, ids, params, tokenizer)


def test_training_samples_what_trls_generate_samples(tmp_path, tiny_model_dir):
    # The same seed with the loop and without (train.shared_prefix: false), the loop drawing as generate draws
    # (generation.draw: vocabulary): the same completions at step 1, whose weights are the same on both sides (what each step trains on afterwards differs only by float rounding).
    import json

    rewards = [{"name": "reward_fns:length_spread", "role": "shaping"}]
    samples = {}
    for shared in (True, False):
        folder = tmp_path / str(shared)
        folder.mkdir()
        recipe = make_recipe(folder, tiny_model_dir, rewards, {"generation": {"draw": "vocabulary"}},
                             shared_prefix=shared, max_steps=1, top_p=0.9, num_samples_logged=4, temperature=0.8)
        assert main(["train", str(recipe), "--output-dir", str(folder / "run"), "--skip-audit"]) == 0
        samples[shared] = [json.loads(line)["completion"] for line in (folder / "run" / "samples.jsonl").open()]
    assert samples[True] == samples[False] and samples[True]


def test_an_int_penalty_is_applied_on_both_paths_and_the_loop_says_so(tmp_path, tiny_model_dir, capsys):
    # trl.repetition_penalty: 3 (an int): transformers' generate refused it at step 0 (RepetitionPenaltyLogitsProcessor
    # takes a float only) while the loop applied it; read as 3.0, both paths sample the same, and the loop names it.
    import json

    rewards = [{"name": "reward_fns:length_spread", "role": "shaping"}]
    samples = {}
    for shared in (True, False):
        folder = tmp_path / str(shared)
        folder.mkdir()
        recipe = make_recipe(folder, tiny_model_dir, rewards, {"trl": {"repetition_penalty": 3}},
                             shared_prefix=shared, max_steps=1, num_samples_logged=4)
        assert main(["train", str(recipe), "--output-dir", str(folder / "run"), "--skip-audit"]) == 0
        samples[shared] = [json.loads(line)["completion"] for line in (folder / "run" / "samples.jsonl").open()]
        said = capsys.readouterr().out
        assert ("grpokit's decoding loop applies: repetition penalty 3, temperature 1, sampled" in said) == shared
    assert samples[True] == samples[False] and samples[True]
    assert Decoding(8, (2,), 2, sample=False, repetition_penalty=1.2).applied() == "repetition penalty 1.2, greedy"


@pytest.mark.parametrize("samples", [1, 2])
def test_tool_evaluation_plays_the_same_episodes_through_the_loop(tiny_tool_model_dir, tmp_path, samples):
    # grpokit eval on a tool recipe plays episodes through TRL's evaluate(); its generate calls (one per turn,
    # each re-prefilling the episode so far) go to the decoding loop, drawing as generate draws
    # (generation.draw: vocabulary): the same episodes as through generate.
    import json

    from conftest import REPO

    import yaml

    episodes = {}
    for shared in (True, False):
        raw = yaml.safe_load((REPO / "recipes" / "smollm2-calculator-tools.yaml").read_text())
        raw["train"].update(max_completion_length=24, shared_prefix=shared)
        raw.setdefault("generation", {})["draw"] = "vocabulary"
        recipe, out = tmp_path / f"calc-{shared}.yaml", tmp_path / str(shared)
        recipe.write_text(yaml.safe_dump(raw))
        assert main(["eval", str(tiny_tool_model_dir), "--recipe", str(recipe), "--max-rows", "2",
                     "--samples", str(samples), "--output-dir", str(out)]) == 0
        doc = json.loads((out / "eval" / "results-tools.json").read_text())
        episodes[shared] = [(s["question"], s["messages"]) for s in doc["checkpoints"][0]["samples"]]
    assert episodes[True] == episodes[False] and episodes[True]
