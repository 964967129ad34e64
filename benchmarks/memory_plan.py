"""The memory planner (`grpokit preflight --memory`) against a measured peak: train a few steps, compare.

    python benchmarks/memory_plan.py                              # demo recipe: full, LoRA, LoRA without checkpointing
    python benchmarks/memory_plan.py --variants full --steps 2 --set train.per_device_train_batch_size=8
    python benchmarks/memory_plan.py --out benchmarks/results/memory_cpu.json   # the file tests/test_memory.py reads

Each variant trains in a fresh process (grpokit's own training, the recipe's settings) with what makes a step's
memory the recipe's full batch: `train.skip_no_signal: false` (no rows dropped), selection and refill off,
no checkpoint saved, health off. On the CPU the measurement is the process's resident memory: its peak
(`ru_maxrss`) minus its size just before the model loads (torch, transformers, TRL and the data already in).
On a GPU it is `torch.cuda.max_memory_allocated()`. The plan is `grpokit.preflight.memory.plan` for the same
model, dtype, batch and lengths, the prompt length being the longest prompt actually trained on rather than
the recipe's `max_prompt_length` bound. Prints, per variant: measured, planned, planned / measured, and the
plan's parts; writes them as JSON with `--out`.

The CPU child runs with glibc's mmap threshold fixed at 64 KiB (MEASURE_ENV), so freed tensors leave the resident
set at once and its peak is the peak of live memory; with glibc's default the same run peaked 15% (full
fine-tune) to 75% (LoRA) higher on memory no tensor held any more.
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

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "smollm2-arithmetic.yaml"
FULL_BATCH = ["train.skip_no_signal=false", "selection.enabled=false", "selection.refill=false",
              "health.enabled=false", "preflight.prompts=0", "train.save_steps=100000"]
VARIANTS = {"full": [], "lora": ["model.lora={r: 16, alpha: 32}"],
            "lora-nockpt": ["model.lora={r: 16, alpha: 32}", "model.gradient_checkpointing=false"]}
# glibc keeps freed memory of large allocations mapped (its mmap threshold grows with them), so the process's
# peak would count memory no tensor holds: a fixed threshold returns every freed tensor of 64 KiB or more to
# the system at once, and the resident peak becomes the peak of what was alive. Set for the measured child only.
MEASURE_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
GIB = 1024 ** 3


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(recipe_path: str, overrides: list[str], out: Path) -> dict:
    """In this process: train and return the measured peak (bytes) and what the plan needs to know."""
    import torch
    import trl  # noqa: F401 - imported before the baseline, as training imports it

    from grpokit.recipe import load_recipe
    from grpokit.task import template_of
    from grpokit.training import train

    recipe = load_recipe(recipe_path, overrides)
    cuda = torch.cuda.is_available()
    baseline = _rss_bytes()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    result = train(recipe, run_dir=out)
    summary, trainer = result.summary, result.trainer
    template = template_of(recipe)
    prompt_tokens = [len(template.encode(trainer.processing_class, p)) for p in trainer.train_dataset["prompt"]]
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"device": "cuda" if cuda else "cpu", "baseline_bytes": baseline if not cuda else 0,
            "peak_bytes": peak, "measured_bytes": peak - (baseline if not cuda else 0),
            "seconds": round(time.time() - t0, 1), "steps": summary["step"],
            "max_prompt_tokens": max(prompt_tokens), "mean_prompt_tokens": sum(prompt_tokens) / len(prompt_tokens),
            "dtype": str(next(trainer.model.parameters()).dtype).replace("torch.", "")}


def planned(recipe_path: str, overrides: list[str], m: dict) -> dict:
    from grpokit.preflight.memory import plan
    from grpokit.preflight.shape import load_config, shape_from_config
    from grpokit.recipe import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    t = recipe.train
    device = m["device"]
    shape = shape_from_config(load_config(recipe.model.name), recipe.model.lora, m["dtype"], device)
    p = plan(shape, strategy="ddp", num_gpus=1, dtype=m["dtype"], beta=t.beta, device=device,
             micro_batch=t.per_device_train_batch_size,
             generation_batch=t.per_device_train_batch_size * t.gradient_accumulation_steps,
             prompt_len=m["max_prompt_tokens"], completion_len=t.max_completion_length,
             gradient_checkpointing=recipe.model.gradient_checkpointing)
    settings = {"model": recipe.model.name, "dtype": m["dtype"], "lora_r": recipe.model.lora.r if recipe.model.lora
                else None, "beta": t.beta, "micro_batch": t.per_device_train_batch_size,
                "generation_batch": t.per_device_train_batch_size * t.gradient_accumulation_steps,
                "prompt_len": m["max_prompt_tokens"], "completion_len": t.max_completion_length,
                "gradient_checkpointing": recipe.model.gradient_checkpointing}
    shape_d = {k: getattr(shape, k) for k in ("params", "lora_params", "hidden", "layers", "kv_heads", "head_dim",
                                              "vocab", "act_per_token", "act_per_token_sq", "act_dtype_bytes")}
    parts = {k: getattr(p, k) for k in ("weights", "optimizer", "reference", "gradients", "activations", "lm_head",
                                        "kv_cache")}
    settings["device"] = device
    return {"settings": settings, "shape": shape_d, "plan_parts": parts, "planned_bytes": p.total}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("recipe", nargs="?", default=str(RECIPE))
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated: {', '.join(VARIANTS)}")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # one variant, in this fresh process
        overrides = json.loads(args.child)
        with tempfile.TemporaryDirectory() as tmp:
            print("RESULT " + json.dumps(measure(args.recipe, overrides, Path(tmp) / "run")))
        return 0
    results = []
    for name in args.variants.split(","):
        overrides = [*FULL_BATCH, f"train.max_steps={args.steps}", *VARIANTS[name], *args.overrides]
        proc = subprocess.run([sys.executable, __file__, args.recipe, "--child", json.dumps(overrides)],
                              capture_output=True, text=True,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false", **MEASURE_ENV})
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode != 0 or line is None:
            print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
            return 1
        m = json.loads(line[len("RESULT "):])
        r = {"variant": name, **m, **planned(args.recipe, overrides, m)}
        r["planned_over_measured"] = round(r["planned_bytes"] / r["measured_bytes"], 3)
        results.append(r)
        parts = ", ".join(f"{k} {v / GIB:.2f}" for k, v in r["plan_parts"].items())
        print(f"{name:5} {m['device']}: measured {m['measured_bytes'] / GIB:.2f} GiB (peak {m['peak_bytes'] / GIB:.2f}, "
              f"baseline {m['baseline_bytes'] / GIB:.2f}), planned {r['planned_bytes'] / GIB:.2f} GiB "
              f"-> planned/measured {r['planned_over_measured']:.2f}   [{parts}]  ({m['steps']} steps, "
              f"{m['seconds']:.0f} s, prompts up to {m['max_prompt_tokens']} tokens)")
    if args.out:
        out = {"date": time.strftime("%Y-%m-%d"), "machine": _machine(), "results": results}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def _machine() -> str:
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        model = "unknown CPU"
    return f"{os.cpu_count()} cores, {model}"


if __name__ == "__main__":
    sys.exit(main())
