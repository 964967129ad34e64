"""The generation backends, one row each: everything grpokit knows about a backend, read by both sides of it.

    BACKENDS["continuous"].engine           # the class that generates ("module:Class", imported when chosen)
    BACKENDS["continuous"].options(g, train)  # its settings for evaluation and preflight, from the recipe
    BACKENDS["continuous"].trl(g, on_gpu)   # the TRL GRPOConfig fields it sets for training
    BACKENDS["continuous"].owns             # generation: fields only it reads (another backend refuses them)
    BACKENDS["continuous"].checks(g, train) # what is wrong with its own settings, on any machine
    BACKENDS["continuous"].describe(g)      # its line in `grpokit train --dry-run`
    BACKENDS["vllm"].gpu_share(g)           # the share of each GPU it keeps beside training (preflight --memory)

`g` is the recipe's `generation:` section (grpokit.recipe.generation_section.GenerationConfig) and `train` its
`train:` section, read by attribute: generation sits below the recipe and imports none of it, and this module
imports no model library either, so the recipe schema can read the table while staying model-free. The runtime
(grpokit.generation.core: `make_backend`, `backend_of`) and the recipe (`generation.backend`'s choices and help,
`grpo_kwargs`, `check_generation`, the `trl:` keys the section owns) all read these rows; adding a backend is its
class (the `Backend` protocol of grpokit.generation.core) and a row here (docs/extending.md walks through one).

Not covered: what a machine lacks to run a backend (vLLM installed, CUDA: grpokit.recipe.machine) and the
transformers-side check of `continuous_config` (grpokit.recipe.checks, which may import transformers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

RecipeProblem = tuple[tuple, str, str]  # (location in the recipe, what is wrong, the fix), as the recipe checks return
# How grpokit's decoding loop (the hf backend) draws the next token, the recipe's generation.draw: nucleus: among
# the tokens the warpers keep only (grpokit.generation.sampling.NucleusDraw: the same distribution, another random
# stream); vocabulary: torch.multinomial over the whole vocabulary of every row, finished ones included, as
# `generate` draws (its samples for a seed); inverse: one uniform number a row against the cumulative probabilities
# of the warped scores (grpokit.generation.sampling.inverse_draw: the same distribution, another random stream, a
# fraction of multinomial's cost, which draws one exponential number per row and vocabulary entry). Here, not in
# the loop's module, so the recipe reads it model-free.
DRAWS = ("inverse", "nucleus", "vocabulary")
DRAW = "vocabulary"  # on three seeds of the arithmetic demo the nucleus draw did not learn more per minute (docs/
# measurements.md "Every token once"); every seeded figure of the measurement log was drawn from this stream


# transformers' continuous batching sizes its paged KV cache as a share of the device's free memory, at most
# `max_memory_percent`. TRL asks 0.5 for training (transformers' own 0.9 leaves nothing for the rest of the process).
# On a CPU "free" is the machine's RAM less this process's own (other processes are not counted) and training needs
# the rest: at 0.5 the tiny test model's cache took 11 GB and the kernel killed it beside another test worker
# (docs/measurements.md "Test suite runs"). Requests that do not fit wait for a slot, so a smaller cache
# is at worst slower, never wrong; 5% of 24 GB holds the embedded model's demo batch (16 x 256 tokens, 0.19 GB) about
# five times over, and at 5% that batch ran faster (45 against 34 tokens/s) with 2.2 GB peak against 12.3
# (docs/measurements.md "Generation choices on the CPU").
CACHE_SHARE_GPU, CACHE_SHARE_CPU = 0.5, 0.05


def continuous_batching(config: dict, on_gpu: bool) -> dict:
    """transformers' ContinuousBatchingConfig fields for `generation.continuous_config`: the recipe's, with the
    cache's share of free memory for the device unless the recipe sizes the cache itself (max_memory_percent or
    num_blocks). One rule for training (TRL's generate_batch) and grpokit's own calls (ContinuousBackend)."""
    if "max_memory_percent" in config or "num_blocks" in config:
        return dict(config)
    return {"max_memory_percent": CACHE_SHARE_GPU if on_gpu else CACHE_SHARE_CPU, **config}


def _nothing(*_args) -> dict:
    return {}


def _no_problems(_g, _train=None) -> list[RecipeProblem]:
    return []


@dataclass(frozen=True)
class Owned:
    """generation: fields one backend reads and the others refuse. `what` and `fix` name the first field set away
    from its default as {key} and the recipe's backend as {backend}."""

    fields: tuple[str, ...]
    what: str
    fix: str


@dataclass(frozen=True)
class BackendRow:
    engine: type | str  # the class (grpokit.generation.core.Backend), or "module:Class" imported only when chosen
    help: str  # what it is, for the recipe's `generation.backend` (the reference page shows it)
    options: Callable[[Any, Any], dict] = _nothing  # its constructor settings from generation: and train: (backend_of)
    trl: Callable[[Any, bool], dict] = _nothing  # the GRPOConfig fields training sets for it on a GPU or a CPU
    # (none: TRL's defaults)
    owns: tuple[Owned, ...] = ()
    checks: Callable[[Any, Any], list[RecipeProblem]] = _no_problems  # its own settings, before any model loads
    summary: Callable[[Any], str] | None = None  # its line in `grpokit train --dry-run` (default: its name)
    gpu_share: Callable[[Any], float] = lambda g: 0.0  # the share of each GPU it reserves beside training (memory plan)

    def describe(self, g) -> str:
        return self.summary(g) if self.summary else g.backend


def _hf_trl(g, _on_gpu: bool) -> dict:
    return {"cache_implementation": "static"} if g.cache == "static" else {}


def _continuous_trl(g, on_gpu: bool) -> dict:
    return {"use_transformers_continuous_batching": True,
            "transformers_continuous_batching_config": continuous_batching(g.continuous_config, on_gpu)}


def _vllm_trl(g, _on_gpu: bool) -> dict:
    return dict(use_vllm=True, vllm_mode=g.vllm_mode, vllm_gpu_memory_utilization=g.gpu_memory_utilization,
                vllm_tensor_parallel_size=g.tensor_parallel_size, vllm_server_base_url=g.server_url,
                vllm_server_host=g.server_host, vllm_server_port=g.server_port,
                vllm_server_timeout=g.server_timeout, vllm_max_model_length=g.max_model_len,
                vllm_enable_sleep_mode=g.enable_sleep_mode,
                vllm_importance_sampling_correction=g.importance_sampling_correction)


def _vllm_checks(g, train=None) -> list[RecipeProblem]:
    out = []
    if g.server_url is not None and not g.server_url.startswith(("http://", "https://")):
        out.append((("generation", "server_url"), f"not an http(s) URL: {g.server_url!r}",
                    "e.g. server_url: http://10.0.0.5:8000 (the host running `grpokit serve-vllm`)"))
    needed = None if train is None else (train.max_prompt_length or 0) + train.max_completion_length
    if needed is not None and g.max_model_len is not None and g.max_model_len < needed:
        out.append((("generation", "max_model_len"), f"{g.max_model_len} is shorter than max_prompt_length + "
                    f"max_completion_length = {needed}", "raise it, or leave it unset (the model config's length)"))
    return out


# The recipe's `generation.backend` offers them in this order (hf, its default, first).
BACKENDS: dict[str, BackendRow] = {
    "hf": BackendRow(
        "grpokit.generation.core:HFBackend",
        "in the training process: grpokit's decoding loop (each distinct prompt prefix prefilled once, finished rows "
        "out of the batch; train.shared_prefix) or transformers' model.generate",
        options=lambda g, train: {"top_p_candidates": g.top_p_candidates, "cache": g.cache, "compile": g.compile,
                                  "shared_prefix": train.shared_prefix, "draw": g.draw},
        trl=_hf_trl,
        summary=lambda g: "hf (grpokit's decoding loop or model.generate)",
        owns=(Owned(("cache", "compile"), "{key} is an option of the hf backend; {backend} manages its own cache",
                    "remove generation.{key}, or set generation.backend: hf"),
              Owned(("draw",), "{key} is how grpokit's decoding loop (the hf backend) draws; {backend} draws its own "
                    "way", "remove generation.{key}, or set generation.backend: hf"),
              Owned(("sampler_dtype",), "a sampler copy in another precision is an option of the hf backend; "
                    "{backend} samples in its own", "remove generation.sampler_dtype, or set generation.backend: hf"))),
    "continuous": BackendRow(
        "grpokit.generation.core:ContinuousBackend",
        "transformers' continuous batching with paged attention (TRL's use_transformers_continuous_batching: a "
        "finished row frees its slot)",
        options=lambda g, _train: {"continuous_config": dict(g.continuous_config)},
        summary=lambda g: "continuous (transformers' continuous batching)",
        trl=_continuous_trl,
        owns=(Owned(("continuous_config",), "continuous_config applies to the continuous backend, not {backend}",
                    "set generation.backend: continuous, or remove continuous_config"),)),
    "vllm": BackendRow(
        "grpokit.generation.vllm_backend:VLLMBackend",  # vLLM must not be imported by the other paths
        "TRL's vLLM integration (pip install vllm on the GPU machines)",
        options=lambda g, _train: dict(gpu_memory_utilization=g.gpu_memory_utilization,
                               tensor_parallel_size=g.tensor_parallel_size, max_model_len=g.max_model_len),
        trl=_vllm_trl,
        checks=_vllm_checks,
        summary=lambda g: f"vllm {g.vllm_mode}" + (f", gpu_memory_utilization {g.gpu_memory_utilization}"
                                                    if g.vllm_mode == "colocate" else f", server {g.server_url}"),
        gpu_share=lambda g: g.gpu_memory_utilization if g.vllm_mode == "colocate" else 0.0),
}


def foreign_options(g, defaults: dict[str, Any]) -> list[RecipeProblem]:
    """Fields another backend owns, set away from their `defaults` while `g.backend` is chosen."""
    out = []
    for name, row in BACKENDS.items():
        if name == g.backend:
            continue
        for owned in row.owns:
            key = next((f for f in owned.fields if getattr(g, f) != defaults[f]), None)
            if key is not None:
                out.append((("generation", key), owned.what.format(key=key, backend=g.backend),
                            owned.fix.format(key=key, backend=g.backend)))
    return out
