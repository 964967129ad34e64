"""Generation: one path for evaluation, preflight and export, with a backend seam (HF generate, transformers'
continuous batching, vLLM).

    completions = complete(model, tokenizer, prompt_ids, SamplingParams(max_tokens=256))

core (HF and continuous-batching backends, batching, sampling params), backends (BACKENDS: one row per backend,
read by the recipe too), sampling (exact fast top-p, the drawn tokens' log-probs), vllm_backend (grpokit's vLLM engine and the `vllm serve` command TRL documents).
"""
from grpokit.generation.core import HFBackend, SamplingParams, backend_of, complete, rows_per_call, run, token_policy
from grpokit.generation.sampling import CANDIDATES, SampledLogprobs, TopPCandidates, warpers
from grpokit.generation.vllm_backend import (dtype_name, greedy_agreement, render_command, run_server, serve_command,
                                             training_settings)

__all__ = ["CANDIDATES", "HFBackend", "SampledLogprobs", "SamplingParams", "TopPCandidates", "backend_of", "complete", "dtype_name",
           "greedy_agreement", "render_command", "rows_per_call", "run", "run_server", "serve_command",
           "token_policy", "training_settings", "warpers"]
