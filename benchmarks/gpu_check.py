"""GPU check: GRPO step time and generated tokens/s with HF generate vs vLLM colocate, in one JSON summary.

    python benchmarks/gpu_check.py --model-dir ~/.cache/grpokit/models/smollm2-135m-instruct --out gpu_check.json

Runs offline (no network) on one CUDA GPU in under 8 minutes (`--budget-s`, default 450 s). The
one input is a model folder (config, safetensors, tokenizer): the converted embedded model. Two models:

  embedded             the folder itself (SmolLM2-135M-Instruct for grpokit's `default`)
  qwen3-0.6b-shaped    Qwen3-0.6B's architecture (28 layers, hidden 1024, GQA 16/8, head 128, tied
                       embeddings) with random weights and the folder's tokenizer: 490.8M parameters
                       with the embedded 49,152-token vocabulary, built here and saved to a temporary folder

For each model, TRL's GRPOTrainer trains `--steps` steps (default 3) of `--completions` completions
(default 64 = 8 prompts x 8) x `--max-tokens` new tokens (default 256, sampled at temperature 1) twice:
with transformers' generate and with `use_vllm=True, vllm_mode="colocate"` (TRL's own integration,
`--gpu-memory-utilization` 0.3, TRL's default). Each run is its own process, so one engine's memory
never counts against the next. Per run: step time, generation time per step (TRL's
`_generate_single_turn`, timed as benchmarks/step_breakdown.py does), generated tokens/s (completion
tokens / generation time), generation's share of the step (means over steps 2..N: step 1 carries
warm-up), and peak GPU memory (torch's peak allocation in the process, and the device's peak used
memory sampled after each step, which includes vLLM's KV-cache pool). Last, when time is left, greedy
agreement of grpokit's own vLLM backend with HF generate on the embedded model (8 prompts x 64 tokens).

The targets this measures (one H200, Qwen3-0.6B-shaped, 64 x 256): vLLM generation >= 10x HF
generate tokens/s, and generation <= 50% of the step. Without CUDA it refuses (exit 2).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit, installed or not

QWEN3_06B_SHAPE = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, tie_word_embeddings=True, rope_theta=1_000_000.0,
                       rms_norm_eps=1e-6, max_position_embeddings=4096)
MODELS = ("embedded", "qwen3-0.6b-shaped")
PROMPT = "Add {a} and {b}, then multiply the result by {c}. Explain each step before the final answer."


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True, type=Path, help="model folder: config.json, safetensors, tokenizer")
    p.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="the JSON summary (default ./gpu_check.json)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {', '.join(MODELS)}")
    p.add_argument("--steps", type=int, default=3, help="training steps per run (>= 2: step 1 is warm-up)")
    p.add_argument("--completions", type=int, default=64, help="completions per step")
    p.add_argument("--generations", type=int, default=8, help="completions per prompt (the GRPO group)")
    p.add_argument("--max-tokens", type=int, default=256, help="new tokens per completion")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3, help="colocated vLLM's share of the GPU")
    p.add_argument("--budget-s", type=float, default=450, help="stop starting runs after this many seconds")
    p.add_argument("--phase", choices=["train", "agreement"], help=argparse.SUPPRESS)  # a child process's job
    p.add_argument("--backend", choices=["hf", "vllm"], help=argparse.SUPPRESS)
    p.add_argument("--model-path", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def refusal(args) -> str | None:
    """Why this machine or these arguments cannot run the check (None: they can)."""
    if not (args.model_dir / "config.json").is_file() or not any(args.model_dir.glob("*.safetensors")):
        return f"{args.model_dir}: not a model folder (config.json and *.safetensors expected)"
    if not (args.model_dir / "tokenizer.json").is_file() and not (args.model_dir / "tokenizer_config.json").is_file():
        return f"{args.model_dir}: no tokenizer files (the Qwen3-shaped model borrows this folder's tokenizer)"
    unknown = set(args.models.split(",")) - set(MODELS)
    if unknown:
        return f"--models: unknown {', '.join(sorted(unknown))} (choose from {', '.join(MODELS)})"
    if args.steps < 2 or args.completions < args.generations or args.completions % args.generations:
        return "--steps must be >= 2, and --completions a multiple of --generations"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device here: this check measures GPU generation (run it on a CUDA machine)"
    return None


# ---------------------------------------------------------------- child processes
def _gpu_used() -> int:
    import torch

    free, total = torch.cuda.mem_get_info()
    return total - free


def train_run(args) -> dict:
    """GRPO steps with TRL on one backend: step/generation times, generated tokens, peak memory."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpokit.internals import generation_io, wrap_method

    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    tokenizer = AutoTokenizer.from_pretrained(args.model_path)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model_path, dtype=torch.bfloat16).cuda()
    prompts = args.completions // args.generations * args.steps
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": PROMPT.format(a=3 * i + 17, b=i * i + 5, c=i % 9 + 2)}]}
                            for i in range(prompts)])
    gen_times, gen_tokens, step_times, used = [], [], [], [_gpu_used()]

    def reward(completions, **_):  # varied rewards: every group has signal, so each step does its full backward
        return [float(len(str(c)) % 5) for c in completions]

    class Steps(TrainerCallback):
        def on_step_begin(self, *a, **k):
            torch.cuda.synchronize()
            self.t = time.perf_counter()

        def on_step_end(self, *a, **k):
            torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.t)
            used.append(_gpu_used())

    out = tempfile.mkdtemp(prefix="gpu-check-")
    cfg = GRPOConfig(output_dir=out, per_device_train_batch_size=args.completions, num_generations=args.generations,
                     max_completion_length=args.max_tokens, max_steps=args.steps, learning_rate=1e-6, bf16=True,
                     temperature=1.0, logging_steps=1, report_to="none", save_strategy="no", seed=0,
                     use_vllm=args.backend == "vllm", vllm_mode="colocate",
                     vllm_gpu_memory_utilization=args.gpu_memory_utilization, vllm_max_model_length=args.max_tokens + 256)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=cfg, train_dataset=ds, processing_class=tokenizer,
                          callbacks=[Steps()])

    def timed(method):
        def wrapper(*a, **k):
            torch.cuda.synchronize()
            t = time.perf_counter()
            result = method(*a, **k)
            torch.cuda.synchronize()
            gen_times.append(time.perf_counter() - t)
            gen_tokens.append(sum(len(c) for c in generation_io(a, result)[1]))
            return result
        return wrapper

    wrap_method(trainer, "generation", timed)
    trainer.train()
    later = slice(1, None)  # step 1 carries warm-up (CUDA graphs, allocator, vLLM's first weight sync)
    step, gen, toks = (sum(x[later]) / len(x[later]) for x in (step_times, gen_times, gen_tokens))
    return dict(backend=args.backend, steps=len(step_times), step_s=step_times, generation_s=gen_times,
                generated_tokens=gen_tokens, mean_step_s=step, mean_generation_s=gen, generation_share=gen / step,
                generated_tokens_per_s=toks / gen, peak_allocated_gib=torch.cuda.max_memory_allocated() / 2**30,
                peak_device_used_gib=max(used) / 2**30)


def agreement_run(args) -> dict:
    """grpokit's own vLLM backend vs HF generate, greedy, on the embedded model (bfloat16 on both sides)."""
    import torch
    from transformers import AutoModelForCausalLM

    from grpokit.generation import greedy_agreement
    from grpokit.models import load_tokenizer

    tokenizer = load_tokenizer(str(args.model_path))
    model = AutoModelForCausalLM.from_pretrained(args.model_path, dtype=torch.bfloat16).cuda()
    ids = [tokenizer.apply_chat_template([{"role": "user", "content": PROMPT.format(a=i, b=2 * i, c=3)}],
                                         add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
           for i in range(8)]
    a = greedy_agreement(model, tokenizer, ids, 64, gpu_memory_utilization=args.gpu_memory_utilization)
    return dict(identical=a.identical, total=a.total, first_difference=list(a.first_difference), summary=a.render())


# ---------------------------------------------------------------- the parent: models, runs, summary
def qwen3_shaped(tokenizer_dir: Path, into: Path) -> Path:
    """Qwen3-0.6B's architecture with random weights (seed 0) and `tokenizer_dir`'s tokenizer, saved to `into`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **QWEN3_06B_SHAPE)
    AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(into)
    tokenizer.save_pretrained(into)
    return into


def child(args, phase: str, model_path: Path, backend: str | None, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, __file__, "--phase", phase, "--model-dir", str(args.model_dir), "--out", f.name,
               "--model-path", str(model_path), "--steps", str(args.steps), "--completions", str(args.completions),
               "--generations", str(args.generations), "--max-tokens", str(args.max_tokens),
               "--gpu-memory-utilization", str(args.gpu_memory_utilization), *(["--backend", backend] if backend else [])]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        t = time.perf_counter()
        try:
            done = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return dict(error=f"timed out after {timeout:.0f} s", wall_s=time.perf_counter() - t)
        wall = time.perf_counter() - t
        if done.returncode != 0:
            return dict(error=f"exit {done.returncode}", stderr_tail=done.stderr[-3000:], wall_s=wall)
        return {**json.loads(Path(f.name).read_text()), "wall_s": wall}


def environment() -> dict:
    import importlib.metadata as md

    import torch

    versions = {}
    for name in ("torch", "transformers", "trl", "vllm", "accelerate"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return dict(gpu=torch.cuda.get_device_name(0), gpu_memory_gib=torch.cuda.get_device_properties(0).total_memory / 2**30,
                versions=versions)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.phase:  # a child: one run, its JSON to --out
        result = train_run(args) if args.phase == "train" else agreement_run(args)
        args.out.write_text(json.dumps(result))
        return 0
    why = refusal(args)
    if why:
        print(f"gpu_check: {why}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - start)
    summary: dict = dict(environment=environment(), settings=dict(steps=args.steps, completions=args.completions,
                         generations=args.generations, max_tokens=args.max_tokens,
                         vllm_gpu_memory_utilization=args.gpu_memory_utilization), models={})
    with tempfile.TemporaryDirectory(prefix="gpu-check-models-") as tmp:
        for name in args.models.split(","):
            path = args.model_dir if name == "embedded" else qwen3_shaped(args.model_dir, Path(tmp) / name)
            runs = {}
            for backend in ("hf", "vllm"):
                runs[backend] = child(args, "train", path, backend, left()) if left() > 30 else dict(error="no time left")
                print(f"gpu_check: {name} {backend}: {json.dumps(runs[backend])[:300]}", file=sys.stderr)
            hf, vl = runs["hf"], runs["vllm"]
            if "error" not in hf and "error" not in vl:
                runs["vllm_vs_hf_generated_tokens_per_s"] = vl["generated_tokens_per_s"] / hf["generated_tokens_per_s"]
                runs["vllm_vs_hf_step_time"] = vl["mean_step_s"] / hf["mean_step_s"]
            summary["models"][name] = runs
        summary["greedy_agreement"] = child(args, "agreement", args.model_dir, None, left()) if left() > 90 \
            else dict(error="skipped: under 90 s of the budget left")
    summary["wall_s"] = time.perf_counter() - start
    args.out.write_text(json.dumps(summary, indent=2))
    print(f"gpu_check: wrote {args.out} in {summary['wall_s']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
