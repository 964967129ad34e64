"""The recipe's `generation:` section: Hugging Face generate, or vLLM through TRL's colocate / server modes.

    generation: {backend: vllm, vllm_mode: colocate, gpu_memory_utilization: 0.3}
    generation: {backend: vllm, vllm_mode: server, server_url: http://10.0.0.5:8000}

grpokit runs no inference engine of its own: `GenerationConfig.grpo_kwargs()`
maps the section onto TRL 1.16's GRPOConfig fields (`use_vllm`, `vllm_mode`,
`vllm_gpu_memory_utilization`, ...), and the server is `trl vllm-serve`.
`check_generation` reports, before any model loads, what is wrong with the section itself on every
machine (a URL without scheme, a context window shorter than prompt + completion). What the machine that
runs it lacks (vLLM, CUDA) is grpokit.recipe.machine.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from grpokit.recipe.section import Section


class GenerationConfig(Section):
    """How training samples completions: Hugging Face `generate` (default) or vLLM through TRL's own colocate and
    server modes (`trl vllm-serve` is the server). Mapped onto TRL's GRPOConfig `use_vllm`/`vllm_*` fields."""

    backend: Literal["hf", "vllm"] = Field("hf", description="hf: model.generate in the training process; vllm: TRL's "
                                           "vLLM integration (pip install vllm on the GPU machines).")
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate", description="colocate: a vLLM engine inside each training process, sharing its GPU; server: a "
        "separate `trl vllm-serve` process/node generates and receives the new weights after each step.")
    gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1, description="colocate: share of each GPU vLLM reserves for its weights and KV cache (TRL's "
        "default 0.3 leaves the rest to training). Server mode: pass it to `trl vllm-serve` instead.")
    tensor_parallel_size: int = Field(1, ge=1, description="colocate: GPUs one vLLM engine spans (must divide the "
                                      "number of processes). Server mode: pass it to `trl vllm-serve` instead.")
    server_url: str | None = Field(None, description="server: base URL of `trl vllm-serve`, e.g. http://10.0.0.5:8000 "
                                   "(overrides server_host/server_port).")
    server_host: str = Field("0.0.0.0", description="server: host of `trl vllm-serve` when server_url is unset.")
    server_port: int = Field(8000, ge=1, le=65535, description="server: port of `trl vllm-serve` when server_url is unset.")
    server_timeout: float = Field(240.0, gt=0, description="server: seconds to wait for the server to come up.")
    max_model_len: int | None = Field(None, ge=1, description="vLLM context window; at least max_prompt_length + "
                                      "max_completion_length (default: from the model config).")
    enable_sleep_mode: bool = Field(False, description="colocate: offload vLLM's weights/cache during the optimizer "
                                    "step (less memory, some wake-up time).")
    importance_sampling_correction: bool = Field(
        True, description="Correct for the gap between vLLM's sampling log-probs and the trainer's (TRL's default).")

    def grpo_kwargs(self) -> dict:
        """The GRPOConfig fields this section sets (none for the hf backend: TRL's defaults)."""
        if self.backend == "hf":
            return {}
        return dict(use_vllm=True, vllm_mode=self.vllm_mode, vllm_gpu_memory_utilization=self.gpu_memory_utilization,
                    vllm_tensor_parallel_size=self.tensor_parallel_size, vllm_server_base_url=self.server_url,
                    vllm_server_host=self.server_host, vllm_server_port=self.server_port,
                    vllm_server_timeout=self.server_timeout, vllm_max_model_length=self.max_model_len,
                    vllm_enable_sleep_mode=self.enable_sleep_mode,
                    vllm_importance_sampling_correction=self.importance_sampling_correction)


def check_generation(g: GenerationConfig, t=None) -> list[tuple[tuple, str, str]]:
    """backend vllm: what is wrong with the section itself, on any machine (an error wherever the recipe is read)."""
    out = []
    if g.backend != "vllm":
        return out
    if g.server_url is not None and not g.server_url.startswith(("http://", "https://")):
        out.append((("generation", "server_url"), f"not an http(s) URL: {g.server_url!r}",
                    "e.g. server_url: http://10.0.0.5:8000 (the host running `trl vllm-serve`)"))
    if t is not None and g.max_model_len is not None and g.max_model_len < (t.max_prompt_length or 0) + t.max_completion_length:
        out.append((("generation", "max_model_len"), f"{g.max_model_len} is shorter than max_prompt_length + "
                    f"max_completion_length = {(t.max_prompt_length or 0) + t.max_completion_length}",
                    "raise it, or leave it unset (the model config's length)"))
    return out
