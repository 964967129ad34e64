"""One generation path for evaluation, preflight and export: prompt token ids in, completions out.

    from grpokit.generation import SamplingParams, complete
    ids = [template.encode(tokenizer, template.build(q)) for q in questions]    # the ids TRL trains on
    greedy = complete(model, tokenizer, ids, SamplingParams(max_tokens=256))
    groups = complete(model, tokenizer, ids, SamplingParams(max_tokens=256, n=8, temperature=0.9, seed=0))
    groups[i][j].ids, .text, .truncated, .length     # completion j of prompt i

What is decided here, once:
- which ids stop a completion and which id pads (`token_policy`): TRL's
  GRPOTrainer rule, so a completion ends where it ended in training;
- the completion's ids are TRL's `completion_ids` (up to and including the
  first stop id), decoded the way TRL decodes them (`batch_decode`,
  `skip_special_tokens=True`); `truncated` is TRL's `clipped_ratio` test (no
  stop id before the length limit);
- sampling is seeded per call (`SamplingParams.seed`) without disturbing the
  caller's random state;
- progress: a rich bar with ETA on stderr when it is a terminal, nothing otherwise.

The backend seam: a `Backend` turns prompt ids + `SamplingParams` into raw
completion ids. `HFBackend` batches, left-pads and calls transformers'
`generate` on the model's own device. `SamplingParams` has the fields and
conventions of `vllm.SamplingParams` (temperature 0 = greedy, `n`, `max_tokens`,
`seed`, `stop_token_ids`), so the vLLM backend (`grpokit.generation.vllm_backend`,
imported only when chosen) is `LLM.generate` on the prompt token ids with
`vllm.SamplingParams(**params.as_dict())`. Callers pick a backend by name, a row
of grpokit.generation.backends (its class, settings, TRL fields and checks);
`backend_of(recipe)` is the recipe's choice (its `generation:` section).

Not covered: beam search, stop strings, multimodal prompts.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import asdict, dataclass, replace
from typing import Callable, Protocol

from grpokit import hf_internals
from grpokit.errors import GrpokitError, Problem
from grpokit.generation.backends import BACKENDS, continuous_batching
from grpokit.generation.sampling import CANDIDATES, NEUTRAL, warpers

# Rows per `generate` call when the caller does not fix it: as many as fit a budget of prompt + new tokens (the
# KV cache holds that many positions), at most MAX_ROWS_PER_CALL, split into calls of equal size: more rows a call
# came almost free on the CPU, with identical completions, up to about a hundred (docs/measurements.md "Evaluation
# batching"); 65,536 positions keep a 4,096-token thinking recipe near the old fixed 16 rows a call.
TOKENS_PER_CALL = 65_536
MAX_ROWS_PER_CALL = 128
DEFAULT_BATCH_SIZE = None  # None: sized by rows_per_call


def rows_per_call(rows: int, width: int, max_tokens: int, budget: int = TOKENS_PER_CALL,
                  cap: int = MAX_ROWS_PER_CALL) -> int:
    """Sequences per generate call for `rows` sequences whose longest prompt has `width` tokens (equal calls)."""
    fit = max(1, min(cap, budget // max(1, width + max_tokens)))
    calls = -(-rows // fit)
    return max(1, -(-rows // max(1, calls)))


@dataclass(frozen=True)
class SamplingParams:
    """What to generate. Names and meanings follow `vllm.SamplingParams`, so a vLLM backend passes them through."""

    max_tokens: int
    n: int = 1  # completions per prompt
    temperature: float = 0.0  # 0 = greedy (vLLM's convention)
    top_p: float = 1.0
    top_k: int = 0  # 0 = off (TRL's GRPOConfig default); vLLM reads 0 as off too
    seed: int | None = None  # sampled runs with a seed give the same completions every time
    stop_token_ids: tuple[int, ...] = ()  # empty: `token_policy`'s stop ids, filled in by `complete`

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "stop_token_ids": list(self.stop_token_ids)}


@dataclass(frozen=True)
class TokenPolicy:
    pad_token_id: int
    stop_token_ids: tuple[int, ...]


def token_policy(model, tokenizer) -> TokenPolicy:
    """The ids that end a completion and the id that pads, as TRL's GRPOTrainer chooses them.

    Stop: every eos id of the model's generation config (e.g. an end-of-turn token), with the tokenizer's eos
    put first when the config lacks it. Pad: the tokenizer's pad token, else its eos (TRL sets
    `pad_token = eos_token` when a tokenizer has none), else the first stop id.
    """
    declared = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    stop = [] if declared is None else list(declared) if isinstance(declared, (list, tuple)) else [declared]
    eos = tokenizer.eos_token_id
    if eos is not None and eos not in stop:
        stop = [eos, *stop]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    if pad is None:
        pad = stop[0] if stop else None
    if pad is None:
        raise GrpokitError([Problem(getattr(tokenizer, "name_or_path", "tokenizer"),
                                    "the tokenizer has no pad and no eos token, and the model declares no eos id: "
                                    "completions could neither be padded nor stopped",
                                    "set eos_token (and pad_token) in the tokenizer's tokenizer_config.json")])
    return TokenPolicy(int(pad), tuple(int(i) for i in stop))


@dataclass(frozen=True)
class Completion:
    ids: tuple[int, ...]  # TRL's completion_ids: generated ids up to and including the first stop id
    text: str | None  # decoded as TRL decodes completions; None when no tokenizer was given
    truncated: bool  # no stop id within max_tokens: cut at the length limit (TRL's completions/clipped_ratio)

    @property
    def length(self) -> int:
        """Generated tokens before the stop id (the stop id itself is not text)."""
        return len(self.ids) - (0 if self.truncated else 1)


class Backend(Protocol):
    """Turns prompts into raw completion ids; `run` cuts, flags and decodes them.

    `generate` returns, per prompt, `params.n` id lists of the generated tokens (prompt not included); anything
    after the first id in `params.stop_token_ids` is ignored, so a backend that pads finished rows may keep the
    padding. `advance(k)` is called as k more completions are done (for the progress bar).
    """

    name: str

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams,
                 advance: Callable[[int], None]) -> list[list[list[int]]]: ...


class HFBackend:
    """Generation in this process, batches of whole prompts (n completions each): grpokit's decoding loop
    (grpokit.generation.decode: each distinct prompt prefix prefilled once, finished rows out of the batch, the
    tokens `generate` gives) where the model can take it, else transformers' `generate` on left-padded rows."""

    name = "hf"

    def __init__(self, model, pad_token_id: int, batch_size: int | None = DEFAULT_BATCH_SIZE,
                 top_p_candidates: int = CANDIDATES, cache: str = "dynamic", compile: bool = False,
                 shared_prefix: bool = True, draw: str = "vocabulary"):
        self.model, self.pad_token_id, self.batch_size = model, pad_token_id, batch_size
        self.top_p_candidates = top_p_candidates  # grpokit.generation.sampling: 0 = transformers' own top_p
        self.cache, self.compile = cache, compile  # the recipe's generation.cache / generation.compile
        self.shared_prefix = shared_prefix  # the recipe's train.shared_prefix
        self.draw = draw  # the recipe's generation.draw (the decoding loop's)

    def generate(self, prompt_ids, params, advance):
        import torch

        model = self.model
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        # no_grad rather than inference_mode: preflight hands the same model to training afterwards, and tensors
        # a module caches lazily under inference_mode could not be used by autograd later.
        seeded = torch.random.fork_rng(devices=[device] if device.type == "cuda" else []) \
            if params.seed is not None else contextlib.nullcontext()
        try:
            with torch.no_grad(), seeded:
                if params.seed is not None:
                    torch.manual_seed(params.seed)
                return self._generate(prompt_ids, params, advance, device)
        finally:
            if was_training:
                model.train()

    def decodes(self) -> str | None:
        """Why this backend uses transformers' `generate` rather than grpokit's decoding loop (None: the loop)."""
        from grpokit.generation.tree import refusal

        if not self.shared_prefix:
            return "train.shared_prefix: false"
        if self.cache != "dynamic":
            return "generation.cache: static asks for transformers' generate"
        return refusal(self.model)

    def _generate(self, prompt_ids, params, advance, device):
        if self.decodes() is None:
            return self._decode(prompt_ids, params, advance)
        return self._generate_hf(prompt_ids, params, advance, device)

    def _decode(self, prompt_ids, params, advance):
        from grpokit.generation.decode import Decoding, decode
        from grpokit.generation.tree import TreeCost

        n = params.n
        decoding = Decoding(max_new_tokens=params.max_tokens, stop_ids=tuple(params.stop_token_ids),
                            pad_id=self.pad_token_id, sample=not params.greedy, temperature=params.temperature,
                            top_k=params.top_k, top_p=params.top_p, top_p_candidates=self.top_p_candidates,
                            draw=self.draw, compile=self.compile)
        size = self.batch_size or rows_per_call(len(prompt_ids) * n, max(map(len, prompt_ids)), params.max_tokens)
        per_batch = max(1, size // n)
        cost, out = TreeCost.of(self.model), []
        for start in range(0, len(prompt_ids), per_batch):
            rows = [list(p) for p in prompt_ids[start:start + per_batch] for _ in range(n)]
            done = decode(self.model, rows, decoding, cost).ids
            out += [done[i:i + n] for i in range(0, len(done), n)]
            advance(len(done))
        return out

    def _generate_hf(self, prompt_ids, params, advance, device):
        import torch

        n, pad = params.n, self.pad_token_id
        if params.greedy:  # None silences the sampling settings a model's generation_config may carry
            how = dict(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:  # the warpers training samples through (grpokit.generation.sampling), transformers' own switched off
            how = dict(do_sample=True, **NEUTRAL, logits_processor=warpers(
                params.temperature, params.top_k, params.top_p, candidates=self.top_p_candidates))
        if self.cache == "static":
            how["cache_implementation"] = "static"
        if self.compile:  # where the loop cannot decode: transformers' own compiled step (with cache: static)
            how.update(disable_compile=False, compile_config=hf_internals.generation_compile_config(device.type))
        size = self.batch_size or rows_per_call(len(prompt_ids) * n, max(map(len, prompt_ids)), params.max_tokens)
        per_batch = max(1, size // n)  # whole prompts per call, so a group never straddles two calls
        out: list[list[list[int]]] = []
        for start in range(0, len(prompt_ids), per_batch):
            # Each prompt repeated n times in a row: the same tensor `num_return_sequences=n` would build.
            ids = [list(p) for p in prompt_ids[start:start + per_batch] for _ in range(n)]
            width = max(map(len, ids))
            input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=device)
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=device)
            gen = self.model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=params.max_tokens,
                                      pad_token_id=pad, eos_token_id=list(params.stop_token_ids) or None, **how)
            rows = gen[:, width:].tolist()
            out += [rows[i:i + n] for i in range(0, len(rows), n)]
            advance(len(rows))
        return out


class ContinuousBackend:
    """transformers' continuous batching (`model.generate_batch`, paged attention): each of the n completions of
    every prompt is a request, and a finished one frees its slot for the next; TRL's generate_batch call."""

    name = "continuous"

    def __init__(self, model, pad_token_id: int, batch_size: int | None = DEFAULT_BATCH_SIZE,
                 continuous_config: dict | None = None, **_hf_only):
        self.model, self.pad_token_id, self.config = model, pad_token_id, dict(continuous_config or {})

    def generate(self, prompt_ids, params, advance):
        import torch
        from transformers import GenerationConfig
        from transformers.generation import ContinuousBatchingConfig

        sampling = {} if params.greedy else dict(temperature=params.temperature, top_p=params.top_p,
                                                 top_k=params.top_k or None)
        config = GenerationConfig(max_new_tokens=params.max_tokens, do_sample=not params.greedy, **sampling,
                                  pad_token_id=self.pad_token_id, eos_token_id=list(params.stop_token_ids) or None)
        on_gpu = self.model.device.type != "cpu"
        batching = ContinuousBatchingConfig(**{"seed": params.seed, **continuous_batching(self.config, on_gpu)})
        requests = [list(p) for p in prompt_ids for _ in range(params.n)]
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                done = self.model.generate_batch(requests, generation_config=config,
                                                 continuous_batching_config=batching, progress_bar=False)
        finally:
            if was_training:
                self.model.train()
        rows = [list(done[f"req_{i}"].generated_tokens) for i in range(len(requests))]  # request ids in input order
        advance(len(rows))
        return [rows[i:i + params.n] for i in range(0, len(rows), params.n)]


def make_backend(name: str, model, tokenizer, batch_size: int | None = DEFAULT_BATCH_SIZE, **options) -> Backend:
    """The backend `name` (a row of grpokit.generation.backends.BACKENDS) on `model`; `options`: its own settings
    (`backend_of`; vllm: gpu_memory_utilization, tensor_parallel_size, max_model_len)."""
    if name not in BACKENDS:
        raise GrpokitError([Problem(f"generation backend {name!r}", "unknown backend",
                                    f"use one of: {', '.join(sorted(BACKENDS))}")])
    cls = BACKENDS[name].engine
    if isinstance(cls, str):
        import importlib

        module, _, attr = cls.partition(":")
        cls = getattr(importlib.import_module(module), attr)
    return cls(model, token_policy(model, tokenizer).pad_token_id, batch_size, **options)


def backend_of(recipe) -> tuple[str, dict]:
    """The backend eval and preflight use for `recipe`: its name and its row's settings from the recipe's
    `generation:` section (whose vllm_mode is training's, TRL's, not eval's)."""
    g = recipe.generation
    return g.backend, BACKENDS[g.backend].options(g, recipe.train)


def finish(raw: list[int], params: SamplingParams, tokenizer=None) -> Completion:
    """Raw generated ids -> the completion: cut after the first stop id, flagged, decoded like TRL."""
    stops = set(params.stop_token_ids)
    end = next((i for i, t in enumerate(raw) if t in stops), None)
    ids = tuple(raw if end is None else raw[:end + 1])
    text = tokenizer.decode(list(ids), skip_special_tokens=True) if tokenizer is not None else None
    return Completion(ids, text, end is None)


def run(backend: Backend, prompt_ids: list[list[int]], params: SamplingParams, tokenizer=None,
        label: str = "generating", progress: bool = True) -> list[list[Completion]]:
    """`params.n` completions per prompt, grouped per prompt in prompt order."""
    if params.max_tokens < 1 or params.n < 1:
        raise GrpokitError([Problem("generation", f"max_tokens={params.max_tokens}, n={params.n}",
                                    "both must be at least 1")])
    if not prompt_ids:
        return []
    with progress_bar(len(prompt_ids) * params.n, label, enabled=progress) as advance:
        groups = backend.generate(prompt_ids, params, advance)
    return [[finish(list(r), params, tokenizer) for r in group] for group in groups]


def complete(model, tokenizer, prompt_ids: list[list[int]], params: SamplingParams, *, backend: str = "hf",
             backend_options: dict | None = None, batch_size: int | None = DEFAULT_BATCH_SIZE, label: str = "generating",
             progress: bool = True) -> list[list[Completion]]:
    """Completions from `model` with `token_policy`'s stop ids (unless `params` names its own)."""
    if not params.stop_token_ids:
        params = replace(params, stop_token_ids=token_policy(model, tokenizer).stop_token_ids)
    chosen = make_backend(backend, model, tokenizer, batch_size, **(backend_options or {}))
    return run(chosen, prompt_ids, params, tokenizer, label, progress)


@contextlib.contextmanager
def progress_bar(total: int, label: str, enabled: bool = True, stream=None, every: float | None = None, clock=None):
    """Yields `advance(k)`, called as k more completions are done (each generate call, grpokit.generation's
    batches). On a terminal (`stream`, default stderr) a transient rich bar with the rows done, elapsed time,
    s/row and ETA; elsewhere (a log file, CI, nohup) a plain status line at least every `every` seconds
    (grpokit.console.Heartbeat, 30 s) with the same figures, and one when the work is done. Before the first
    batch is back, both say how long it has been running: there is no ETA to give yet."""
    import threading  # here, not at the top: only the progress display uses them
    import time

    from grpokit.console import Heartbeat, hms

    stream = sys.stderr if stream is None else stream
    if not enabled or total <= 1:
        yield lambda k: None
        return
    tick = clock or time.monotonic
    t0, done = tick(), [0]

    def pace() -> str:
        elapsed = tick() - t0
        if not done[0]:
            return f"{hms(elapsed)} elapsed, first batch running"
        per = elapsed / done[0]
        return f"{hms(elapsed)} elapsed, {per:.2f} s/row, eta {hms(per * (total - done[0]))}"

    if not stream.isatty():
        beat = Heartbeat(lambda: f"{label}: {done[0]}/{total} rows, {pace()}",
                         lambda line: print(line, file=stream, flush=True), every, tick)

        def advance_plain(k: int) -> None:
            done[0] += k

        with beat:
            yield advance_plain
        if tick() - t0 >= beat.every:  # a long call ends with its total, as the bar's last frame would
            print(f"{label}: {done[0]}/{total} rows in {hms(tick() - t0)}", file=stream, flush=True)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[pace]}"))
    with Progress(*columns, console=Console(file=stream), transient=True, refresh_per_second=2) as bar:
        task = bar.add_task(label, total=total, pace=pace())
        stop = threading.Event()

        def refresh():  # the elapsed time moves while the first (often the only) batch runs
            while not stop.wait(0.5):
                bar.update(task, pace=pace())

        ticker = threading.Thread(target=refresh, daemon=True)
        ticker.start()

        def advance(k: int) -> None:
            done[0] += k
            bar.update(task, advance=k, pace=pace())

        try:
            yield advance
        finally:
            stop.set()
            ticker.join(timeout=1.0)
