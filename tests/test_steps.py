"""The compiled token step of grpokit's decoding loop (grpokit.generation.steps, `generation.compile: true`): the
same greedy tokens as the eager step, one graph for every prompt length and batch size of a model, finished rows
out, and the eager step with one line saying why where compiling cannot be.

torch.compile of the tiny models takes tens of seconds on a 2-core CPU (once per model in the process): the cases
share one model per kind and one compiled function.
"""
from __future__ import annotations

import pytest

from grpokit.generation import steps
from grpokit.generation.decode import Decoding, decode

PROMPTS = ["12 + 7 =", "A shelf holds 49 books. 12 books are taken away. How many are left?", "3 - 1 ="]


def _rows(tokenizer, prompts, group: int) -> list[list[int]]:
    return [tokenizer(p).input_ids for p in prompts for _ in range(group)]


CASES = [  # (what, prompts, completions per prompt, stop after this many greedy tokens of row 0 (None: eos only))
    ("three prompt lengths, a group of 2", PROMPTS, 2, None),
    # another batch size and other prompt lengths: the same graph (dynamic shapes)
    ("two prompts, a group of 3", PROMPTS[1:], 3, None),
    # row 0's third token as a stop id: rows finish early and leave the batch, which is compacted
    ("rows that finish early", PROMPTS, 2, 3),
]


_compiled_kinds: set[str] = set()  # the model kinds whose graph this module has compiled


@pytest.mark.parametrize("what,prompts,group,stop_after", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_the_compiled_step_gives_the_eager_steps_greedy_tokens(peaked_models, tokenizer, kind, what, prompts, group,
                                                               stop_after):
    from torch._dynamo.utils import counters

    model, rows = peaked_models[kind], _rows(tokenizer, prompts, group)
    base = Decoding(16, (tokenizer.eos_token_id,), tokenizer.pad_token_id, sample=False)
    if stop_after is not None:
        first = decode(model, rows, base).ids[0]
        base = Decoding(16, (tokenizer.eos_token_id, first[stop_after - 1]), tokenizer.pad_token_id, sample=False)
    eager = decode(model, rows, base)
    graphs = counters["stats"]["unique_graphs"]
    compiled = decode(model, rows, Decoding(**{**base.__dict__, "compile": True}))
    assert not eager.compiled and compiled.compiled, what
    assert compiled.ids == eager.ids, what
    if stop_after is not None:
        assert min(map(len, eager.ids)) <= stop_after < max(map(len, eager.ids)), what  # some rows left early
    # one graph per model, whatever the prompt lengths, batch size and stops: none new after the first call
    assert counters["stats"]["unique_graphs"] - graphs == (0 if kind in _compiled_kinds else 1), what
    _compiled_kinds.add(kind)


def test_without_a_cxx_compiler_the_eager_step_runs_and_says_why(peaked_models, tokenizer, monkeypatch, capsys):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", "")  # no g++, c++, gcc or clang++ to find
    monkeypatch.setattr(steps, "_said", set())  # this process may have said it before
    rows = _rows(tokenizer, PROMPTS[:1], 2)
    decoding = Decoding(4, (tokenizer.eos_token_id,), tokenizer.pad_token_id, sample=False, compile=True)
    done = decode(peaked_models["llama"], rows, decoding)
    assert not done.compiled and len(done.ids[0]) == 4
    out = capsys.readouterr().out
    assert "the eager decode step: no C++ compiler" in out and out.count("\n") == 1  # one line


def test_compile_off_is_the_eager_step_and_says_nothing(peaked_models, tokenizer, capsys):
    done = decode(peaked_models["llama"], _rows(tokenizer, PROMPTS[:1], 2),
                  Decoding(4, (tokenizer.eos_token_id,), tokenizer.pad_token_id, sample=False))
    assert not done.compiled and "decode step" not in capsys.readouterr().out


def test_training_samples_through_the_compiled_step(tmp_path, tiny_model_dir, capsys):
    # generation.compile: true in a recipe: TRL's generate calls go to the loop, whose token step is compiled
    # (a new graph for the trained model), and the run says so.
    from torch._dynamo.utils import counters

    from conftest import CHARS, make_recipe
    from grpokit.cli import main

    graphs = counters["stats"]["unique_graphs"]
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], {"generation": {"compile": True, "draw": "nucleus"}}, max_steps=1,
                         top_p=0.9)
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    out = capsys.readouterr().out
    assert "the draw over the nucleus only" in out and "the token step compiled" in out
    assert "the eager decode step" not in out  # no fallback
    assert counters["stats"]["unique_graphs"] > graphs


def test_a_checkpointed_run_compiles_its_token_step_once(tmp_path, tiny_model_dir, monkeypatch):
    # TRL switches activation checkpointing off and on around each step's generation, and each switch on left one
    # more hook on the input embedding, which torch.compile guards on: a new graph at every step (3 in 3 steps)
    # until grpokit.hf_internals.drop_stale_input_grad_hooks removed the stale ones
    import torch._dynamo.config
    from torch._dynamo.utils import counters

    # dynamo stops compiling a function after 8 graphs in a process (then runs it eagerly): the graphs other tests
    # of this worker compiled must not decide this count
    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 64)

    from conftest import CHARS, make_recipe
    from grpokit.cli import main

    graphs = counters["stats"]["unique_graphs"]
    recipe = make_recipe(tmp_path, tiny_model_dir, [CHARS], {
        "model": {"name": str(tiny_model_dir), "gradient_checkpointing": True},
        "generation": {"compile": True}, "health": {"probe_rows": 0}}, max_steps=3, save_steps=10)
    assert main(["train", str(recipe), "--output-dir", str(tmp_path / "run"), "--skip-audit"]) == 0
    assert counters["stats"]["unique_graphs"] - graphs == 1  # the run's model, once for its three steps
