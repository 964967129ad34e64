"""The recipe's `generation:` section: how completions are sampled, in training and in evaluation and preflight.

    generation: {backend: hf}                                   # grpokit's decoding loop (default)
    generation: {backend: hf, compile: true}                    # the loop's token step compiled
    generation: {backend: hf, cache: static, compile: true}     # transformers' generate, its decode step compiled
    generation: {backend: continuous}                           # transformers' continuous batching
    generation: {backend: vllm, vllm_mode: colocate, gpu_memory_utilization: 0.3}
    generation: {backend: vllm, vllm_mode: server, server_url: http://10.0.0.5:8000}

grpokit runs no inference engine of its own: each backend is a row of grpokit.generation.backends (its help,
its settings, the TRL fields it implies, its checks), which this section reads. `GenerationConfig.grpo_kwargs()`
maps the section onto TRL 1.16's GRPOConfig fields (`cache_implementation`, `use_transformers_continuous_batching` and its config,
`use_vllm`, `vllm_mode`, `vllm_gpu_memory_utilization`, ...), and evaluation and preflight take the same
choice through grpokit.generation (`backend_of`). Which of them is fastest where: docs/measurements.md "Generation choices on the CPU"
(and "Generation throughput: hf and vLLM").
`check_generation` reports, before any model loads, what is wrong with the section itself on every
machine (a URL without scheme, a context window shorter than prompt + completion). What the machine that
runs it lacks (vLLM, CUDA) is grpokit.recipe.machine.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from grpokit.generation.backends import BACKENDS, DRAW, DRAWS, foreign_options
from grpokit.recipe.section import Section


class GenerationConfig(Section):
    """How training samples completions: transformers' `generate` (default), its continuous batching, or vLLM
    through TRL's own colocate and server modes (`grpokit serve-vllm` starts the server). Mapped onto TRL's
    GRPOConfig fields."""

    # The choices, their help, options, TRL fields and checks: one row per backend (grpokit.generation.backends).
    backend: Literal[tuple(BACKENDS)] = Field(  # type: ignore[valid-type]
        "hf", description="; ".join(f"{name}: {row.help}" for name, row in BACKENDS.items()) + ".")
    cache: Literal["dynamic", "static"] = Field(
        "dynamic", description="hf backend: the KV cache. dynamic grows with each token (grpokit's decoding loop); "
        "static is allocated once for prompt + completion by transformers' generate (TRL's cache_implementation), "
        "which then decodes instead of the loop.")
    compile: bool = Field(False, description="hf backend: torch.compile the token step. With cache: dynamic, "
                          "grpokit's decoding loop compiles its own step over a static cache of its own, one graph "
                          "for every prompt length and batch (grpokit.generation.steps; the first call in a process "
                          "pays the compile; where compiling cannot be, the eager step and one line saying why); "
                          "with cache: static, transformers' generate compiles its own step.")
    continuous_config: dict[str, Any] = Field(
        default_factory=dict, description="continuous backend: transformers' ContinuousBatchingConfig fields, e.g. "
        "{max_batch_tokens: 4096} (TRL's transformers_continuous_batching_config). Unless it sets "
        "max_memory_percent or num_blocks, the KV cache takes at most 0.5 of free memory on a GPU (TRL's default) "
        "and 0.05 on a CPU, where free is the RAM less this process's own and training needs the rest "
        "(grpokit.generation.backends.continuous_batching).")
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate", description="colocate: a vLLM engine inside each training process, sharing its GPU; server: a "
        "separate vLLM server (`grpokit serve-vllm`) generates and receives the new weights after each step.")
    gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1, description="colocate: share of each GPU vLLM reserves for its weights and KV cache (TRL's "
        "default 0.3 leaves the rest to training). Server mode: the server's own setting.")
    tensor_parallel_size: int = Field(1, ge=1, description="colocate: GPUs one vLLM engine spans (must divide the "
                                      "number of processes). Server mode: the server's own setting.")
    server_url: str | None = Field(None, description="server: base URL of the vLLM server (`grpokit serve-vllm`), "
                                   "e.g. http://10.0.0.5:8000 (overrides server_host/server_port).")
    server_host: str = Field("0.0.0.0", description="server: host of the vLLM server when server_url is unset.")
    server_port: int = Field(8000, ge=1, le=65535, description="server: port of the vLLM server when server_url is "
                             "unset.")
    server_timeout: float = Field(240.0, gt=0, description="server: seconds to wait for the server to come up.")
    max_model_len: int | None = Field(None, ge=1, description="vLLM context window; at least max_prompt_length + "
                                      "max_completion_length (default: from the model config).")
    enable_sleep_mode: bool = Field(False, description="colocate: offload vLLM's weights/cache during the optimizer "
                                    "step (less memory, some wake-up time).")
    top_p_candidates: int = Field(
        256, ge=0, description="hf backend, when train.top_p < 1: nucleus sampling over this many most likely "
        "tokens instead of sorting the whole vocabulary at every token (transformers' top_p warper), with the "
        "same kept tokens and so the same samples for a seed; a row whose nucleus is wider, or whose boundary is "
        "too close to call, goes through transformers' warper. 0: transformers' warper always. Training, "
        "evaluation and preflight all sample through it (grpokit.generation.sampling).")
    draw: Literal[DRAWS] = Field(  # type: ignore[valid-type]
        DRAW, description="hf backend, grpokit's decoding loop, sampling: how the next token is drawn. inverse: one "
        "uniform number a row against the cumulative probabilities of the warped scores (inverse transform "
        "sampling: the same distribution as transformers' warpers, another random stream; a fraction of "
        "vocabulary's cost at many rows, whose torch.multinomial draws one exponential number per row and "
        "vocabulary entry; any temperature, top_p, top_k, min_p; the large-step recipes' choice). nucleus, with "
        "top_p < 1 or a top_k: among the tokens the top_p / top_k warpers keep, and only among them (the same "
        "distribution as transformers' warpers, from another random stream: a seed gives other completions than "
        "transformers' generate, the same ones on every run; runs before this option drew from the vocabulary "
        "stream); vocabulary: over the whole vocabulary as generate draws (generate's completions for a seed, "
        "those of older runs; the default: on three seeds of the arithmetic demo the nucleus draw did not learn more "
        'per minute, docs/measurements.md "Every token once"). grpokit.generation.sampling.NucleusDraw, inverse_draw.')
    importance_sampling_correction: bool = Field(
        True, description="Correct for the gap between vLLM's sampling log-probs and the trainer's (TRL's default).")
    sampler_dtype: Literal["same", "auto", "float32", "bfloat16"] = Field(
        "same", description="hf backend: the precision completions are sampled in. same: the policy samples itself "
        "(no copy). bfloat16 / float32: a copy of the policy in that precision samples (refreshed from the "
        "trained weights before each step's generation; one more copy of the weights in memory) when it "
        "differs from the policy's. auto: bfloat16 where the device computes it natively (a CUDA GPU with bf16, "
        "a CPU with AVX-512 BF16 or AMX), else same (on an AVX2-only CPU bf16 is emulated and slower). The "
        "gap between the sampler's log-probs and the trainer's is corrected (sampler_correction) and logged.")
    sampler_correction: Literal["bypass", "importance_sampling", "none"] = Field(
        "bypass", description="When the sampler is a copy in another precision: bypass: the sampler's own "
        "log-probs (raw logits / temperature) are the old policy of PPO's clipped ratio, which corrects each "
        "token at no extra cost (verl's rollout-correction 'bypass'); importance_sampling: one more forward pass "
        "gives the trainer's old log-probs, and TRL's truncated importance sampling weights the loss with TRL's "
        "own fields (trl: {vllm_importance_sampling_mode: token_truncate|token_mask|sequence_truncate|"
        "sequence_mask, vllm_importance_sampling_clip_max: 3.0, vllm_importance_sampling_clip_min}); none: "
        "uncorrected (the mismatch is still logged).")

    def grpo_kwargs(self, on_gpu: bool) -> dict:
        """The GRPOConfig fields this section sets for training on a GPU or on the CPU (its backend's row; none for
        the default hf: TRL's defaults)."""
        return BACKENDS[self.backend].trl(self, on_gpu)


def check_generation(g: GenerationConfig, t=None) -> list[tuple[tuple, str, str]]:
    """What is wrong with the section itself, on any machine (an error wherever the recipe is read): options of
    another backend than the chosen one, then the chosen backend's own checks (grpokit.generation.backends)."""
    defaults = {k: f.get_default(call_default_factory=True) for k, f in GenerationConfig.model_fields.items()}
    return foreign_options(g, defaults) + BACKENDS[g.backend].checks(g, t)
