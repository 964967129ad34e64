"""The token step of grpokit's decoding loop: the model's forward over the last drawn token of every decoding row,
eager over transformers' growing cache, or compiled over a static one (`generation.compile: true`).

    step = make_step(model, layers, mask, decoding.max_new_tokens, compile=True)
    logits = step(token, position)       # (rows, vocab) float32: the next token's scores of each decoding row
    step.keep(indices)                   # finished rows out: the rows still decoding, as indices into the last call's
    step.close()                         # the model as it was

**Eager** (`EagerStep`, the default below STATIC_ROWS rows): transformers' DynamicCache, which grows by one
position a step, with the 2-D mask grown alongside; finished rows leave it at once (`batch_select_indices`). Every
step runs the model's forward in Python: every layer's small operations, each dispatched on its own. From
STATIC_ROWS rows (a large step's generation) the eager forward runs over the compiled step's static cache instead
(`CompiledStep(compiled=False)`): the growing cache's copies at every step and every finished row cost more there
than reading finished rows until a compaction.

**Compiled** (`CompiledStep`): the same forward through `torch.compile` (inductor: each layer's small operations
fused into a few loops, no per-module Python), over a static KV cache allocated once for the call (prompt +
max_new_tokens positions): a tensor per layer that the step writes into at a position index (a tensor, so a new
position is no new graph), read through a 4-D mask built from each row's first prompt position. Its shapes are
marked dynamic (the batch and the cache length) instead of padded to length buckets: one graph serves every
prompt length, batch size and completion length of a model (one bucket, in the issue's words), compiled once per
process and model object (`torch._dynamo`'s guards: another model object, a checkpoint loaded for evaluation,
is another graph; tests/test_steps.py counts them), its kernels cached on disk
across runs (inductor's FX graph cache, under the grpokit cache unless TORCHINDUCTOR_CACHE_DIR says otherwise).
Attention reads the positions written so far, not the whole allocation. Finished rows stay in the batch (their
tokens are ignored) until at most `COMPACT` of it still decodes, then the batch is compacted, never below
`MIN_ROWS` rows (dynamo specialises a dimension of size 1: a batch of one would be another graph).

Where compiling is unavailable (no C++ compiler for inductor's CPU kernels, dropout active) or fails (any error of
dynamo or inductor on the first call), the eager step runs, with one line saying why, once per process
(`step_choice`, `say_once`). The two steps give the same logits up to float rounding (inductor's fused reductions
round differently), so greedy decoding gives the same tokens on the tiny test models (tests/test_steps.py) and the
samples of a seed can differ at a token whose draw falls within that rounding of a boundary. Off by default: the
first call for each model object pays the compile (tens of seconds on a small CPU), and the step it speeds up is a
third of a token step's time at most, so a training step at equal work was no shorter (the figures, by host:
docs/measurements.md "The roofline of a token step").

Not covered: models with dropout active in train mode (the compiled step runs the model in eval mode: eager
then), other cache layouts (sliding windows, linear attention: the loop itself refuses them, tree.refusal),
CUDA graphs (`mode="reduce-overhead"` needs fixed shapes: not measured).
"""
from __future__ import annotations

import os
import shutil

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from grpokit import hf_internals

# torch and transformers at the top: this module is imported by the decoding loop only, when a model is loaded.

COMPACT = 0.75  # compact when at most this share of the batch still decodes: a compaction copies the whole cache
MIN_ROWS = 2  # dynamo specialises size-1 dimensions: a batch of one would compile a second graph
DECODE_ATTENTION = "grpokit_decode"  # the name decode_attention is registered under in transformers

_said: set[str] = set()  # the notes said in this process (each once)
_failed: dict[type, str] = {}  # model classes whose compile failed in this process, and why
_compiled = None  # the compiled step function, built on first use
_registered = False  # DECODE_ATTENTION registered in transformers' attention registries
_static_failed: dict[type, str] = {}  # model classes whose forward refused the positioned static cache, and why
# From this many rows the eager step runs over the positioned static cache (CompiledStep, uncompiled) rather than
# transformers' growing one: a DynamicCache copies the whole cache at every step (a new position) and at every
# finished row (batch_select_indices), which at a large step's hundreds of rows costs more than the static one's
# reading finished rows until a compaction; at a few rows the copies are small and the static layout was slower
# (docs/measurements.md "The large step").
STATIC_ROWS = 128


def say_once(line: str) -> None:
    """A note on the main process's console, once per process."""
    if line in _said:
        return
    _said.add(line)
    from grpokit.console import console

    console.print(f"[yellow]note:[/] {line}")


def step_choice(model, compile: bool) -> str | None:
    """Why this model's decoding runs the eager step (None: the compiled one), `compile` being the recipe's
    generation.compile."""
    if not compile:
        return "generation.compile: false"
    if type(model) in _failed:
        return f"compiling failed earlier in this process ({_failed[type(model)]})"
    if model.training and _dropout_active(model):
        return "dropout is active (train mode): the compiled step runs the model in eval mode"
    if next(model.parameters()).device.type == "cpu" and not _cxx_compiler():
        return "no C++ compiler for torch.compile's CPU kernels (install gcc or g++)"
    return None


def make_step(model, layers, mask, max_new_tokens: int, compile: bool = False):
    """The step for this call: compiled when `step_choice` allows; where compiling was asked for and cannot be,
    the eager step and one line saying why."""
    why = step_choice(model, compile)
    if why is not None:
        if compile:
            say_once(f"generation: the eager decode step: {why}")
        if len(mask) >= STATIC_ROWS and type(model) not in _static_failed:
            try:
                return CompiledStep(model, layers, mask, max_new_tokens, compiled=False)
            except Exception as e:  # noqa: BLE001  (transformers' attention registry or the model refusing it)
                why = _static_failed[type(model)] = _one_line(e)
                say_once(f"generation: the decode step over transformers' cache: the static one failed ({why})")
        return EagerStep(model, layers, mask)
    try:
        return CompiledStep(model, layers, mask, max_new_tokens)
    except Exception as e:  # noqa: BLE001  (transformers' attention registry or the model refusing it: not here)
        why = _failed[type(model)] = _one_line(e)
        say_once(f"generation: the eager decode step: preparing the compiled one failed ({why})")
        return EagerStep(model, layers, mask)


class EagerStep:
    """transformers' forward over its DynamicCache (the module docstring)."""

    compiled, eager = False, None

    def __init__(self, model, layers, mask):
        self.model, self.mask = model, mask
        self.cache = hf_internals.cache_of(layers)
        self.keyword = hf_internals.cache_keyword(model)

    def __call__(self, token, position):
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(token), 1)], dim=1)
        out = self.model(input_ids=token[:, None], attention_mask=self.mask, position_ids=position[:, None],
                         **{self.keyword: self.cache}, use_cache=True)
        return out.logits[:, -1].float()

    def close(self) -> None:
        """Nothing to restore."""

    def keep(self, indices) -> None:
        self.cache.batch_select_indices(indices)
        self.mask = self.mask[indices]


class CompiledStep:
    """The forward over a static cache, compiled, or eager with `compiled=False` (the module docstring). The caller
    runs it under no_grad, compiled with the model in eval mode (`step_choice` refused a model whose dropout would
    then differ), and calls `close()` at the end (the model's attention implementation is the decode one while it
    runs)."""

    def __init__(self, model, layers, mask, max_new_tokens: int, compiled: bool = True):
        rows, width = mask.shape
        self.compiled = compiled
        size = max(rows, MIN_ROWS)
        self.model, self.written = model, width  # positions of the cache written so far
        self.keyword = hf_internals.cache_keyword(model)
        self.eager: EagerStep | None = None  # where compiling failed: the eager step from then on
        length = width + max_new_tokens
        self.keys, self.values = [], []
        # Empty, not zeros: attention reads positions [0, written) only, the prompt's (the prefill's, padding
        # included) and the steps' own, all written before they are read; a row past `rows` (MIN_ROWS) is zeros.
        allocate = torch.zeros if size > rows else torch.empty
        for k, v in layers:
            keys = allocate(size, k.size(1), length, k.size(3), dtype=k.dtype, device=k.device)
            values = allocate(size, v.size(1), length, v.size(3), dtype=v.dtype, device=v.device)
            keys[:rows, :, :width], values[:rows, :, :width] = k, v
            self.keys.append(keys)
            self.values.append(values)
        start = width - mask.sum(dim=1)  # each row's first prompt position (its left padding before it)
        self.start = torch.cat([start, start.new_zeros(size - rows)])
        self.slots = torch.arange(rows, device=mask.device)  # the batch row of each row still decoding
        self.at = torch.zeros(1, dtype=torch.long, device=mask.device)
        self.token = torch.zeros(size, dtype=torch.long, device=mask.device)
        self.position = torch.zeros(size, dtype=torch.long, device=mask.device)
        self.forward = compiled_forward() if compiled else eager_forward()  # both register DECODE_ATTENTION
        self.attention = hf_internals.attention_implementation(model)
        model.set_attn_implementation(DECODE_ATTENTION)

    def close(self) -> None:
        """The model's own attention implementation back."""
        self.model.set_attn_implementation(self.attention)

    def __call__(self, token, position):
        if self.eager is not None:
            return self.eager(token, position)
        self.at.fill_(self.written)
        self.token[self.slots], self.position[self.slots] = token, position
        n = self.written + 1  # the positions this step's attention reads: the written ones and its own
        try:
            logits = self.forward(self.model, self.keyword, self.token, self.position, self.at, self.start,
                                  [k[:, :, :n] for k in self.keys], [v[:, :, :n] for v in self.values])
        except Exception as e:  # noqa: BLE001  (inductor's and dynamo's many error types: any means not here)
            why = _one_line(e)
            if self.compiled:
                _failed[type(self.model)] = why
                say_once(f"generation: the eager decode step: compiling it failed ({why})")
            else:  # the model's forward refused the positioned cache: transformers' own cache from now on
                _static_failed[type(self.model)] = why
                say_once(f"generation: the decode step over transformers' cache: the static one failed ({why})")
            self.close()
            self.eager = self._as_eager()
            return self.eager(token, position)
        self.written = n
        return logits[self.slots] if len(self.slots) < len(self.token) else logits

    def _as_eager(self) -> EagerStep:
        """The eager step holding this one's cache so far (its rows still decoding, the positions written)."""
        rows, written = self.slots, self.written
        layers = [(k[rows, :, :written], v[rows, :, :written]) for k, v in zip(self.keys, self.values)]
        mask = (torch.arange(written, device=rows.device)[None] >= self.start[rows][:, None]).long()
        return EagerStep(self.model, layers, mask)

    def keep(self, indices) -> None:
        if self.eager is not None:
            return self.eager.keep(indices)
        self.slots = self.slots[indices]
        size = len(self.token)
        if size <= MIN_ROWS or len(self.slots) > COMPACT * size:
            return
        rows = self.slots
        if len(rows) < MIN_ROWS:  # a finished row stays as the second: never a batch of one
            rows = torch.cat([rows, next(i for i in range(size) if i not in set(rows.tolist())) * rows.new_ones(1)])
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]
        self.start, self.token, self.position = self.start[rows], self.token[rows], self.position[rows]
        self.slots = torch.arange(len(self.slots), device=rows.device)


class PositionedLayer(CacheLayerMixin):
    """A static cache layer written at the caller's position: transformers' cache-layer protocol over a
    preallocated (batch, kv_heads, positions, head_dim) tensor pair, which each forward writes at `at` (a
    1-element long tensor, the same position for every row) and returns whole, for the attention to read under
    the caller's 4-D mask.

    Maintenance note: relies on transformers 5's `CacheLayerMixin` protocol (`update(keys, values, ...)` returns
    the layer's whole keys and values; `get_seq_length`, `get_mask_sizes`, `get_max_length`) and on
    `Cache(layers=[...])`. transformers' own StaticLayer counts its positions itself and marks its tensors'
    addresses static for CUDA graphs, which fixes the batch (no finished rows out): hence this one. If the protocol
    changes, the compiled step fails on its first call and the eager step takes over with a note;
    tests/test_steps.py compares the two steps' logits."""

    is_compileable = True

    def __init__(self, keys, values, at):
        super().__init__()
        self.keys, self.values, self.at, self.is_initialized = keys, values, at, True

    def lazy_initialization(self, key_states, value_states):  # allocated by its caller, never lazily
        raise RuntimeError("a positioned cache layer is allocated by its caller")

    def update(self, key_states, value_states, *args, **kwargs):
        self.keys.index_copy_(2, self.at, key_states)
        self.values.index_copy_(2, self.at, value_states)
        return self.keys, self.values

    def get_mask_sizes(self, query_length):
        return self.keys.size(2), 0

    def get_seq_length(self):
        return self.at

    def get_max_length(self):
        return self.keys.size(2)


def _step(model, keyword: str, token, position, at, start, keys, values):
    """One token step over the static cache: what `torch.compile` compiles (CompiledStep)."""
    cache = Cache(layers=[PositionedLayer(k, v, at) for k, v in zip(keys, values)])
    where = torch.arange(keys[0].size(2), device=token.device)[None]
    mask = where >= start[:, None]  # the row's prompt and what it generated (the keys end at this token)
    out = model(input_ids=token[:, None], attention_mask=mask[:, None, None, :], position_ids=position[:, None],
                **{keyword: cache}, use_cache=True)
    return out.logits[:, -1].float()


def decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                     is_causal=None, **kwargs):
    """transformers' SDPA attention (`sdpa_attention_forward`) for a token step: one query position per row, the
    query heads that share a key/value head read its keys and values as one group of queries.

    transformers' own SDPA path does that grouping only outside torch.compile (`pack_gqa`, skipped under dynamo);
    compiled, it repeats every key/value head for each of its query heads (`repeat_kv`), which writes and reads the
    whole cache three times over for SmolLM2's 9 query heads on 3 key/value heads, at every layer of every step.
    Here the 4-D mask (rows, 1, 1, positions) is the same for every head and query of a row, so it broadcasts
    over the groups. Any other call (the prefill's, several query positions) is transformers' own."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rows, heads, queries, dim = query.shape
    groups = heads // key.shape[1]
    if queries != 1 or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query.view(rows, key.shape[1], groups, dim), key, value,
                                                           attn_mask=attention_mask, dropout_p=dropout, scale=scaling)
    return out.reshape(rows, heads, 1, dim).transpose(1, 2).contiguous(), None


def _register_decode_attention() -> None:
    """`decode_attention` under DECODE_ATTENTION in transformers' registries (its masks are SDPA's)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(DECODE_ATTENTION, decode_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(DECODE_ATTENTION, sdpa_mask)


def eager_forward():
    """`_step` itself, uncompiled, with DECODE_ATTENTION registered: the static cache without torch.compile."""
    global _registered
    if not _registered:
        _register_decode_attention()
        _registered = True
    return _step


def compiled_forward():
    """`_step` through torch.compile, built once per process (dynamic shapes: one graph per model)."""
    global _compiled
    if _compiled is None:
        from grpokit import models

        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(models.cache_dir() / "torchinductor"))
        eager_forward()
        _compiled = torch.compile(_step, dynamic=True)
    return _compiled


def _one_line(e: Exception) -> str:
    """An error as one short line: its type and the first line of its message."""
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}" if str(e) else type(e).__name__


def _dropout_active(model) -> bool:
    return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()) or \
        bool(getattr(model.config, "attention_dropout", 0.0))


def _cxx_compiler() -> bool:
    """Whether inductor finds a C++ compiler for its CPU kernels (CXX, else g++ / c++ / gcc / clang++ on PATH)."""
    return any(shutil.which(c) for c in (os.environ.get("CXX") or "g++", "c++", "gcc", "clang++"))
