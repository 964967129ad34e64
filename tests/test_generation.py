"""The one generation path: same ids as transformers' generate, TRL's pad/EOS rule and decoding, seeded sampling."""
from __future__ import annotations

import io
import os
import select
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from grpokit.errors import GrpokitError
from grpokit.generation.backends import BACKENDS, BackendRow
from grpokit.generation.core import (HFBackend, SamplingParams, complete, finish, make_backend, progress_bar,
                                     run, token_policy)
from grpokit.templates import PromptTemplate

EOS = 2  # the embedded SmolLM2 tokenizer's <|im_end|>: eos and pad
QUESTIONS = [f"What is {i} + {7 * i}?" + " Think." * (i % 4) for i in range(10)]  # prompts of different lengths
MAX = 12


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    """The tiny model with <|im_end|> made likely: some greedy completions stop, some run to the limit."""
    m = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        m.lm_head.weight[EOS] += 0.55 * m.lm_head.weight.norm(dim=1).mean()
    return m


@pytest.fixture(scope="module")
def prompt_ids(tokenizer):
    template = PromptTemplate("plain_en")
    return [template.encode(tokenizer, template.build(q)) for q in QUESTIONS]


def _direct_generate(model, tokenizer, prompt_ids, max_new):
    """transformers' generate on the tokenizer's own left-padded batch, EOS and padding cut by hand."""
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": prompt_ids}, return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None, top_k=None,
                         pad_token_id=tokenizer.pad_token_id)
    rows = out[:, batch["input_ids"].shape[1]:].tolist()
    return [r[:r.index(EOS) + 1] if EOS in r else r for r in rows]


def test_greedy_ids_equal_transformers_generate(model, tokenizer, prompt_ids):
    from grpokit.evaluation.evaluate import generate as eval_generate

    direct = _direct_generate(model, tokenizer, prompt_ids, MAX)
    assert any(EOS in d for d in direct) and any(EOS not in d for d in direct)  # both endings are exercised
    # batch_size None (sized by the token budget: one call here, like the direct one), 16 and 3 (other padding
    # widths): greedy ids do not change
    for batch_size in (None, 16, 3):
        got = complete(model, tokenizer, prompt_ids, SamplingParams(max_tokens=MAX), batch_size=batch_size)
        assert [list(g[0].ids) for g in got] == direct
    # evaluate's greedy path: the texts TRL would decode and the lengths without EOS
    texts, lengths = eval_generate(model, tokenizer, PromptTemplate("plain_en"), QUESTIONS, MAX)
    assert texts == tokenizer.batch_decode(direct, skip_special_tokens=True)
    assert lengths == [len(d) - (d[-1] == EOS) for d in direct]


def test_completion_fields_and_truncated_flag(model, tokenizer, prompt_ids):
    got = [g[0] for g in complete(model, tokenizer, prompt_ids, SamplingParams(max_tokens=MAX))]
    for c in got:
        if c.truncated:  # ran to the limit: no stop id, every token is text
            assert EOS not in c.ids and len(c.ids) == MAX and c.length == MAX
        else:  # stopped: the stop id ends the ids (TRL's completion_ids) and is not counted as text
            assert c.ids[-1] == EOS and EOS not in c.ids[:-1] and c.length == len(c.ids) - 1
        assert c.text == tokenizer.batch_decode([list(c.ids)], skip_special_tokens=True)[0]  # TRL's decoding
    assert {c.truncated for c in got} == {True, False}


@pytest.mark.parametrize("raw, stops, truncated, kept", [
    ([5, 6, 7], (EOS,), True, (5, 6, 7)),          # no stop id: cut at the length limit
    ([5, EOS, EOS, EOS], (EOS,), False, (5, EOS)),  # stop id, then the padding of a finished row: dropped
    ([EOS], (EOS,), False, (EOS,)),                 # stopped at once: empty text, length 0
    ([5, 9, EOS], (EOS, 9), False, (5, 9)),         # a second stop id (end of turn) ends it too
    ([5, 9, 9], (EOS,), True, (5, 9, 9)),           # ... but only when it is one of the stop ids
])
def test_finish_cuts_at_the_first_stop_id(tokenizer, raw, stops, truncated, kept):
    c = finish(raw, SamplingParams(max_tokens=4, stop_token_ids=stops), tokenizer)
    assert (c.ids, c.truncated) == (kept, truncated)
    assert c.length == len(kept) - (0 if truncated else 1)


def test_sampling_is_seeded_and_leaves_the_callers_random_state(model, tokenizer, prompt_ids):
    params = SamplingParams(max_tokens=6, n=2, temperature=1.0, seed=7)
    state = torch.random.get_rng_state()
    a = complete(model, tokenizer, prompt_ids[:2], params)
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's (e.g. training's) stream is untouched
    ids = lambda groups: [[x.ids for x in g] for g in groups]  # noqa: E731
    assert ids(a) == ids(complete(model, tokenizer, prompt_ids[:2], params))  # same seed, same completions
    assert ids(a) != ids(complete(model, tokenizer, prompt_ids[:2], SamplingParams(**{**params.as_dict(), "seed": 8,
                                                                                      "stop_token_ids": ()})))


def test_rows_per_call_fits_the_token_budget_in_equal_calls():
    from grpokit.generation.core import MAX_ROWS_PER_CALL, rows_per_call

    assert rows_per_call(100, 80, 48) == 100  # the demo's held-out set: one call
    assert rows_per_call(200, 80, 48) == 100  # over the cap: two equal calls, not 128 + 72
    assert rows_per_call(1000, 10, 10) <= MAX_ROWS_PER_CALL
    assert rows_per_call(40, 300, 4096, budget=65_536) == 14  # 15 fit; 3 calls of 14, 14, 12
    assert rows_per_call(5, 100_000, 4096) == 1  # a prompt longer than the budget still gets its call
    assert rows_per_call(3, 80, 48) == 3


def test_n_completions_per_prompt_grouped_in_prompt_order(model, tokenizer, prompt_ids):
    sampled = complete(model, tokenizer, prompt_ids[:3], SamplingParams(max_tokens=4, n=3, temperature=1.0, seed=0),
                       batch_size=4)  # one prompt (3 completions) per call: a group never straddles two calls
    assert [len(g) for g in sampled] == [3, 3, 3]
    assert all(len({c.ids for c in g}) > 1 for g in sampled)  # sampled: the group differs
    greedy = complete(model, tokenizer, prompt_ids[:3], SamplingParams(max_tokens=MAX, n=2))
    direct = _direct_generate(model, tokenizer, prompt_ids[:3], MAX)
    assert [[list(c.ids) for c in g] for g in greedy] == [[d, d] for d in direct]  # greedy: n equal copies


def _tok(embedded_model_dir, pad="keep", eos="keep"):
    tok = AutoTokenizer.from_pretrained(str(embedded_model_dir))
    if pad != "keep":
        tok.pad_token = pad
    if eos != "keep":
        tok.eos_token = eos
    return tok


@pytest.mark.parametrize("pad, eos, declared, want_pad, want_stop", [
    ("keep", "keep", EOS, EOS, (EOS,)),          # SmolLM2: pad = eos = <|im_end|>
    (None, "keep", EOS, EOS, (EOS,)),            # no pad token: pad with eos (TRL sets pad_token = eos_token)
    ("<|endoftext|>", "keep", EOS, 0, (EOS,)),   # its own pad token
    ("keep", "keep", [EOS, 5], EOS, (EOS, 5)),   # every eos id the model declares stops (an end-of-turn token)
    ("keep", "keep", 5, EOS, (EOS, 5)),          # the tokenizer's eos is added first when the model lacks it
    ("keep", "keep", None, EOS, (EOS,)),         # the model declares none: the tokenizer's eos
    (None, None, 5, 5, (5,)),                    # neither pad nor eos in the tokenizer: the model's eos pads
])
def test_token_policy(embedded_model_dir, pad, eos, declared, want_pad, want_stop):
    model = SimpleNamespace(generation_config=GenerationConfig(eos_token_id=declared))
    policy = token_policy(model, _tok(embedded_model_dir, pad, eos))
    assert (policy.pad_token_id, policy.stop_token_ids) == (want_pad, want_stop)


def test_token_policy_without_any_stop_or_pad_says_the_fix(embedded_model_dir):
    model = SimpleNamespace(generation_config=GenerationConfig(eos_token_id=None))
    with pytest.raises(GrpokitError, match="no pad and no eos") as e:
        token_policy(model, _tok(embedded_model_dir, None, None))
    assert "eos_token" in e.value.problems[0].fix


def test_a_tokenizer_without_pad_generates_the_same_batch(model, tokenizer, embedded_model_dir, prompt_ids):
    padless = _tok(embedded_model_dir, pad=None)
    assert padless.pad_token_id is None
    params = SamplingParams(max_tokens=MAX)
    assert complete(model, padless, prompt_ids, params) == complete(model, tokenizer, prompt_ids, params)


def test_backends_are_chosen_by_name(model, tokenizer, monkeypatch, prompt_ids):
    assert isinstance(make_backend("hf", model, tokenizer), HFBackend)
    with pytest.raises(GrpokitError, match="unknown backend") as e:
        make_backend("vllm-typo", model, tokenizer)
    assert "hf" in e.value.problems[0].fix

    class Echo:  # a second engine plugs in by name; run() cuts, flags and decodes what it returns
        name = "echo"

        def __init__(self, model, pad_token_id, batch_size):
            pass

        def generate(self, prompt_ids, params, advance):
            advance(len(prompt_ids) * params.n)
            return [[p[-2:] + [EOS, 7]] * params.n for p in prompt_ids]

    monkeypatch.setitem(BACKENDS, "echo", BackendRow(Echo, "the prompt's last two ids back"))
    got = complete(model, tokenizer, prompt_ids[:2], SamplingParams(max_tokens=4, n=2), backend="echo")
    assert [[c.ids for c in g] for g in got] == [[(*p[-2:], EOS)] * 2 for p in prompt_ids[:2]]


def test_bad_params_are_refused(model, tokenizer, prompt_ids):
    with pytest.raises(GrpokitError, match="at least 1"):
        run(HFBackend(model, EOS), prompt_ids, SamplingParams(max_tokens=0, stop_token_ids=(EOS,)))


def test_progress_bar_only_on_a_terminal():
    buf = io.StringIO()  # not a terminal (CI logs, pipes): nothing written
    with progress_bar(10, "eval", stream=buf) as advance:
        advance(10)
    assert buf.getvalue() == ""
    master, slave = os.openpty()  # a real terminal: the bar with its label
    with open(slave, "w") as tty:
        with progress_bar(10, "eval (greedy)", stream=tty) as advance:
            advance(5)
        tty.flush()
        shown = b""
        while select.select([master], [], [], 0.5)[0]:
            shown += os.read(master, 65536)
    os.close(master)
    assert b"eval (greedy)" in shown and b"5/10" in shown
