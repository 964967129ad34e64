"""GPU check: what each generation choice of a recipe costs in a GRPO step, and the memory plan against a peak.

    python benchmarks/gpu_check.py --tokenizer-dir DIR --out benchmarks/results/gpu_check_h200.json
    python benchmarks/gpu_check.py --tokenizer-dir DIR --device cpu --tiny --out /tmp/g.json   # the suite's mode

DIR holds a tokenizer (and may hold nothing else: weights are never read); the embedded model's converted
folder works (`~/.cache/grpokit/models/smollm2-135m-instruct`), or its config and tokenizer files alone, which
is what travels to a GPU machine. Runs offline, one CUDA GPU, in under 8 minutes (`--budget-s`, default 450).

Models, random weights (seed 0) built from a config, with DIR's tokenizer (49,152 tokens):
  embedded      SmolLM2-135M-Instruct's shape (30 layers, hidden 576)
  qwen3-0.6b    Qwen3-0.6B's shape (28 layers, hidden 1024, GQA 16/8, head 128, tied embeddings): 490.8M parameters
  tiny          2 layers, hidden 64 (`--tiny`, for the CPU mode the test suite runs)

For each model, each generation variant trains `--steps` steps (default 3) of `--completions` completions
(default 64 = 8 prompts x 8) x `--max-tokens` new tokens (default 256) in its own process, through grpokit's
recipe translation (grpokit.recipe.grpo_args: the recipe's generation: section mapped onto TRL's fields) and
grpokit's trainer as `grpokit train` builds it (grpokit.training.factory), bfloat16 on CUDA (float32 on the CPU):
  hf               the default: grpokit's decoding loop (each prompt prefilled once, finished rows out of the batch)
                   and the loss over the tree of shared prefixes (train.shared_prefix)
  trl-layout       train.shared_prefix: false: transformers' generate and TRL's padded rows in the loss (the
                   step TRL itself takes; hf's step time over this one is the tree's ratio)
  continuous       generation.backend: continuous (transformers' continuous batching, paged attention)
  static           generation.cache: static
  static-compile   generation.cache: static + generation.compile (torch.compile of the decode step)
Per run: mean step time and generation time over steps 2..N (step 1 carries warm-up and compilation), the
generation's share of the step, generated tokens/s, peak memory (torch.cuda.max_memory_allocated; on the CPU
the process's peak resident memory minus its size before the model loaded). Then, per model, the peak of a
full fine-tune and of a LoRA run (hf variant) against grpokit.preflight.memory's plan for the same settings:
planned / measured. One JSON file (`--out`) holds everything and the machine it ran on.

The targets it checks (one H200, Qwen3-0.6B shape, 64 x 256): the best non-vLLM variant >= 5x hf's generated
tokens/s, generation <= 50% of the step, the memory plan within +-25% of the measured peaks. Not covered: vLLM
(the H200 this project can use has none; benchmarks/generation_throughput.py measures grpokit's vLLM backend).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit, installed or not

SHAPES = {
    "embedded": dict(model_type="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                     num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=True, rope_theta=100000.0,
                     rms_norm_eps=1e-5, max_position_embeddings=8192),
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                       rope_theta=1_000_000.0, rms_norm_eps=1e-6, max_position_embeddings=4096),
    "tiny": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=512),
}
VARIANTS = {"hf": {}, "trl-layout": {"train": {"shared_prefix": False}}, "continuous": {"backend": "continuous"},
            "static": {"cache": "static"}, "static-compile": {"cache": "static", "compile": True}}
MEMORY_RUNS = {"full": None, "lora": {"r": 16, "alpha": 32}}
PROMPT = "Add {a} and {b}, then multiply the result by {c}. Explain each step before the final answer."
GIB = 1024 ** 3


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer-dir", required=True, type=Path, help="a folder with tokenizer files")
    p.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="the JSON summary")
    p.add_argument("--models", default="embedded,qwen3-0.6b", help=f"comma-separated: {', '.join(SHAPES)}")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated: {', '.join(VARIANTS)}")
    p.add_argument("--memory", default=",".join(MEMORY_RUNS), help="memory-plan runs: full,lora (empty: none)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--tiny", action="store_true", help="the tiny model and small sizes (the test suite's mode)")
    p.add_argument("--steps", type=int, default=3, help="training steps per run (>= 2: step 1 is warm-up)")
    p.add_argument("--completions", type=int, default=64, help="completions per step")
    p.add_argument("--generations", type=int, default=8, help="completions per prompt (the GRPO group)")
    p.add_argument("--max-tokens", type=int, default=256, help="new tokens per completion")
    p.add_argument("--budget-s", type=float, default=450, help="start no run after this many seconds")
    p.add_argument("--child", help=argparse.SUPPRESS)  # a child process's job, as JSON
    args = p.parse_args(argv)
    if args.tiny:
        args.models, args.completions, args.generations, args.max_tokens = "tiny", 8, 4, 8
    return args


def refusal(args) -> str | None:
    """Why this machine or these arguments cannot run the check (None: they can)."""
    if not (args.tokenizer_dir / "tokenizer.json").is_file() and not (args.tokenizer_dir / "tokenizer_config.json").is_file():
        return f"{args.tokenizer_dir}: no tokenizer files (tokenizer.json or tokenizer_config.json)"
    for flag, value, known in (("--models", args.models, SHAPES), ("--variants", args.variants, VARIANTS),
                               ("--memory", args.memory, MEMORY_RUNS)):
        unknown = {x for x in value.split(",") if x} - set(known)
        if unknown:
            return f"{flag}: unknown {', '.join(sorted(unknown))} (choose from {', '.join(known)})"
    if args.steps < 2 or args.completions < args.generations or args.completions % args.generations:
        return "--steps must be >= 2, and --completions a multiple of --generations"
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        return "no CUDA device here (use --device cpu for the CPU mode)"
    return None


# ---------------------------------------------------------------- a child process: one training run
def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def build_model(shape: str, tokenizer_dir: Path, into: Path, dtype) -> Path:
    """`shape`'s architecture with random weights (seed 0) and `tokenizer_dir`'s tokenizer, saved to `into`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    spec = dict(SHAPES[shape])
    config = AutoConfig.for_model(spec.pop("model_type"), vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **spec)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=dtype).save_pretrained(into)
    tokenizer.save_pretrained(into)
    return into


def recipe_for(job: dict, model_dir: Path, data: Path):
    from grpokit.recipe import validate_raw

    raw = {"model": {"name": str(model_dir), "dtype": "bfloat16" if job["device"] == "cuda" else "float32",
                     **({"lora": job["lora"]} if job.get("lora") else {})},
           "data": {"train": str(data), "eval_fraction": 0.0, "template": "chat"},
           "rewards": [{"name": "length", "params": {"min_chars": 1}}],
           "generation": {k: v for k, v in job["generation"].items() if k != "train"},
           "train": {**job["generation"].get("train", {}), "learning_rate": 1e-6, "num_generations": job["generations"], "temperature": 1.0, "top_p": 1.0,
                     "per_device_train_batch_size": job["completions"], "max_completion_length": job["max_tokens"],
                     "max_steps": job["steps"], "save_steps": 100000, "logging_steps": 1, "seed": 0,
                     "skip_no_signal": False},
           "health": {"enabled": False}, "selection": {"enabled": False}}
    return validate_raw(raw, use="train")


def train_run(job: dict) -> dict:
    """GRPO steps with grpokit's trainer (grpokit.training.factory) on the recipe: times, generated tokens, peak memory."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback

    from grpokit import internals
    from grpokit.models import load_model, load_tokenizer
    from grpokit.run import RunDir
    from grpokit.task import template_of
    from grpokit.training.factory import grpo_trainer

    cuda = job["device"] == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    model_dir = build_model(job["model"], Path(job["tokenizer_dir"]), work / "model",
                            torch.bfloat16 if cuda else torch.float32)
    prompts = job["completions"] // job["generations"] * job["steps"]
    data = work / "train.jsonl"
    data.write_text("".join(json.dumps({"question": PROMPT.format(a=3 * i + 17, b=i * i + 5, c=i % 9 + 2),
                                        "answer": "0"}) + "\n" for i in range(prompts)))
    recipe = recipe_for(job, model_dir, data)
    tokenizer = load_tokenizer(str(model_dir))
    template = template_of(recipe)
    dataset = Dataset.from_list([{"prompt": template.build(json.loads(line)["question"])}
                                 for line in data.read_text().splitlines()])
    baseline = 0 if cuda else _rss()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    model = load_model(str(model_dir), recipe.model.dtype)
    if cuda:
        model = model.cuda()
    gen_times, gen_tokens, step_times = [], [], []

    def reward(completions, **_):  # varied: every group has signal, so each step runs its full backward
        return [float(len(str(c)) % 5) for c in completions]

    class Steps(TrainerCallback):
        def on_step_begin(self, *a, **k):
            sync()
            self.t = time.perf_counter()

        def on_step_end(self, *a, **k):
            sync()
            step_times.append(time.perf_counter() - self.t)

    # grpokit's trainer as `grpokit train` builds it (its sampling, the loss over the tree, the loss steps): TRL's
    # bare GRPOTrainer would measure neither grpokit's decoding loop nor the tree the variants name.
    run = RunDir(work / "run")
    run.path.mkdir(parents=True, exist_ok=True)  # samples.jsonl is appended at the first logging step
    trainer = grpo_trainer(recipe, model, tokenizer, dataset, [reward], run=run, callbacks=[Steps()],
                           log=lambda line: None)

    def timed(method):
        def wrapper(*a, **k):
            sync()
            t = time.perf_counter()
            result = method(*a, **k)
            sync()
            gen_times.append(time.perf_counter() - t)
            gen_tokens.append(sum(len(c) for c in internals.generation_io(a, result)[1]))
            return result
        return wrapper

    internals.wrap_method(trainer, "generation", timed)
    trainer.train()
    later = slice(1, None)  # step 1 carries warm-up (allocator, compilation, CUDA graphs)
    step, gen, toks = (sum(x[later]) / len(x[later]) for x in (step_times, gen_times, gen_tokens))
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    prompt_tokens = max(len(template.encode(tokenizer, p)) for p in dataset["prompt"])
    return dict(step_s=step_times, generation_s=gen_times, generated_tokens=gen_tokens, mean_step_s=step,
                mean_generation_s=gen, generation_share=gen / step, generated_tokens_per_s=toks / gen,
                peak_bytes=peak - baseline, max_prompt_tokens=prompt_tokens)


def planned_bytes(job: dict, result: dict) -> int:
    """grpokit's memory plan for the run's own settings (the longest prompt it trained on)."""
    from transformers import AutoConfig

    from grpokit.preflight.memory import plan
    from grpokit.preflight.shape import shape_from_config
    from grpokit.recipe import LoraConfig

    spec = dict(SHAPES[job["model"]])
    config = AutoConfig.for_model(spec.pop("model_type"), vocab_size=job["vocab"], **spec)
    dtype = "bfloat16" if job["device"] == "cuda" else "float32"
    lora = LoraConfig(**job["lora"]) if job.get("lora") else None
    shape = shape_from_config(config, lora, dtype, job["device"])
    p = plan(shape, strategy="ddp", num_gpus=1, dtype=dtype, beta=0.0, micro_batch=job["completions"],
             generation_batch=job["completions"], prompt_len=result["max_prompt_tokens"],
             completion_len=job["max_tokens"], gradient_checkpointing=False, device=job["device"])
    return p.total


# ---------------------------------------------------------------- the parent: runs, summary
def child(job: dict, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, __file__, "--tokenizer-dir", job["tokenizer_dir"], "--out", f.name,
               "--child", json.dumps(job)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        if job["device"] == "cpu":  # freed tensors leave the resident set at once (benchmarks/memory_plan.py)
            env.update(MALLOC_MMAP_THRESHOLD_="65536", MALLOC_TRIM_THRESHOLD_="0")
        t = time.perf_counter()
        try:
            done = subprocess.run(cmd, env=env, timeout=max(1.0, timeout), capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return dict(error=f"timed out after {timeout:.0f} s", wall_s=time.perf_counter() - t)
        wall = time.perf_counter() - t
        if done.returncode != 0:
            return dict(error=f"exit {done.returncode}", stderr_tail=done.stderr[-3000:], wall_s=wall)
        return {**json.loads(Path(f.name).read_text()), "wall_s": wall}


def environment(device: str) -> dict:
    import importlib.metadata as md

    import torch

    versions = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    if device == "cuda":
        where = dict(gpu=torch.cuda.get_device_name(0),
                     gpu_memory_gib=torch.cuda.get_device_properties(0).total_memory / GIB)
    else:
        where = dict(cpu=next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                               if line.startswith("model name")), "unknown"), cores=os.cpu_count())
    return dict(date=time.strftime("%Y-%m-%d"), **where, versions=versions)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:  # one run, its JSON to --out
        job = json.loads(args.child)
        args.out.write_text(json.dumps(train_run(job)))
        return 0
    why = refusal(args)
    if why:
        print(f"gpu_check: {why}", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(args.tokenizer_dir))
    start = time.perf_counter()
    left = lambda: args.budget_s - (time.perf_counter() - start)
    base = dict(tokenizer_dir=str(args.tokenizer_dir), device=args.device, steps=args.steps, vocab=vocab,
                completions=args.completions, generations=args.generations, max_tokens=args.max_tokens)
    summary: dict = dict(environment=environment(args.device), settings={k: v for k, v in base.items()
                                                                          if k != "tokenizer_dir"}, models={})
    for name in args.models.split(","):
        runs, memory = {}, {}
        for variant in args.variants.split(","):
            generation = VARIANTS[variant]
            job = {**base, "model": name, "generation": generation}
            runs[variant] = child(job, left()) if left() > 20 else dict(error="no time left")
            print(f"gpu_check: {name} {variant}: {json.dumps(runs[variant])[:300]}", file=sys.stderr)
        hf = runs.get("hf", {})
        for variant, r in runs.items():
            if variant != "hf" and "error" not in r and "error" not in hf:
                r["tokens_per_s_vs_hf"] = r["generated_tokens_per_s"] / hf["generated_tokens_per_s"]
                r["hf_step_over_this"] = hf["mean_step_s"] / r["mean_step_s"] if r.get("mean_step_s") else None
        for kind in [m for m in args.memory.split(",") if m]:
            job = {**base, "model": name, "generation": {}, "lora": MEMORY_RUNS[kind]}
            r = (runs["hf"] if kind == "full" and "error" not in runs.get("hf", {"error": 1}) else
                 child(job, left()) if left() > 20 else dict(error="no time left"))
            if "error" not in r:
                planned = planned_bytes(job, r)
                r = dict(measured_gib=r["peak_bytes"] / GIB, planned_gib=planned / GIB,
                         planned_over_measured=planned / r["peak_bytes"])
            memory[kind] = r
            print(f"gpu_check: {name} memory {kind}: {json.dumps(r)[:300]}", file=sys.stderr)
        summary["models"][name] = dict(runs=runs, memory=memory)
    summary["wall_s"] = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2))
    print(f"gpu_check: wrote {args.out} in {summary['wall_s']:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
