"""Where a training step's time goes: generation, rewards, log-prob passes, the loss forward, backward, optimizer.

    python benchmarks/step_breakdown.py recipes/smollm2-arithmetic.yaml            # 3 steps
    python benchmarks/step_breakdown.py RECIPE --steps 5 --set train.max_completion_length=24

Trains N steps of the recipe with grpokit's own training code (`grpokit.training.train`,
run directory in a temporary folder, deleted afterwards) and times each phase of
every step. TRL's `profiling_context` only reports to wandb/mlflow/trackio, so the
phases are timed by wrapping methods of grpokit's trainer class and accelerate's Accelerator for this
process (this script only; grpokit itself is unchanged; TRL's private method names come from grpokit.internals):

  generation      GRPOTrainer._generate_single_turn (prefill + sampling, KV cache)
  rewards         GRPOTrainer._calculate_rewards (every reward function)
  old/ref logps   _get_per_token_logps_and_entropies called without grad (old-policy
                  and reference passes; none when beta=0 and training is on-policy)
  loss forward    _get_per_token_logps_and_entropies with grad (inside compute_loss)
  backward        accelerator.backward
  optimizer       grad clipping + optimizer.step (on_step_begin..end minus the rest
                  is "other": scheduler, logging, callbacks, padding, decoding)

Also: generated tokens per second, peak resident memory (getrusage ru_maxrss,
the whole process), and fp32 torch.matmul throughput measured in the same
process with the same thread count, so each phase is stated as a fraction of
what this machine's matmul reaches; last, the roofline of a generation token step
at the step's rows and cached positions (benchmarks/roofline.py: bytes read, FLOPs,
the bound at the measured bandwidth and matmul rate, and the measured step against it). FLOPs are estimated as 2*params*tokens for a
forward pass (padded tokens counted: the hardware computes them) and twice that
for backward; attention's quadratic term is ignored (short sequences here).
The table averages steps 2..N (step 1 carries one-off warm-up costs); every step is listed too.
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from roofline import bandwidth_gb_s, matmul_gflops, print_roofline

PHASES = ["generation", "rewards", "old/ref logps", "loss forward", "backward", "optimizer", "other"]


class Recorder:
    """Per-step phase times and token counts, filled by the wrappers installed on the trainer instance."""

    def __init__(self):
        self.steps: list[dict] = []
        self.cur: dict = defaultdict(float)
        self.t_step = 0.0

    def add(self, key: str, value: float) -> None:
        self.cur[key] += value


def instrument(rec: Recorder):
    """Time each phase: grpokit's trainer class and accelerate's backward wrapped for this process (the wrappers
    get `self` first); returns the callback that closes each step."""
    from accelerate import Accelerator
    from transformers import TrainerCallback

    from grpokit import internals
    from grpokit.training.trainer import GrpokitTrainer

    def timed(name, fn, phase_of=None, after=None):
        def wrapper(owner, *args, **kwargs):
            t = time.perf_counter()
            result = fn(owner, *args, **kwargs)
            phase = phase_of(args, kwargs) if phase_of else name
            rec.add(phase, time.perf_counter() - t)
            if after:
                after(args, kwargs, result)
            return result
        return wrapper

    def gen_tokens(args, kwargs, result):
        prompt_ids, completion_ids = internals.generation_io(args, result)
        lengths = [len(c) for c in completion_ids]
        rec.add("gen_tokens", sum(lengths))
        # generate() runs every row until the longest is done: compute is rows x (prompt + longest).
        longest_prompt = max(len(p) for p in prompt_ids)
        rec.add("gen_padded_tokens", len(lengths) * (longest_prompt + max(lengths, default=0)))
        # for the roofline: token steps run (the longest completion's), rows, and each row's mean cached positions
        rec.add("gen_steps", max(lengths, default=0))
        rec.add("gen_rows", len(lengths))
        rec.add("gen_context", sum(len(p) + len(c) / 2 for p, c in zip(prompt_ids, completion_ids)))
        rec.add("gen_calls", 1)

    def logp_phase(args, kwargs):
        return "loss forward" if torch.is_grad_enabled() else "old/ref logps"

    def logp_tokens(args, kwargs, result):
        input_ids = internals.logps_input_ids(args, kwargs)
        key = "fwd_tokens" if torch.is_grad_enabled() else "nograd_tokens"
        rec.add(key, input_ids.numel())

    # TRL's private methods are named in grpokit.internals only (checked against the installed TRL there).
    internals.wrap_method(GrpokitTrainer, "generation", lambda fn: timed("generation", fn, after=gen_tokens))
    internals.wrap_method(GrpokitTrainer, "rewards", lambda fn: timed("rewards", fn))
    internals.wrap_method(GrpokitTrainer, "logps", lambda fn: timed("logps", fn, phase_of=logp_phase,
                                                                    after=logp_tokens))
    Accelerator.backward = timed("backward", Accelerator.backward)

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            rec.cur = defaultdict(float)
            rec.t_step = time.perf_counter()

        def on_pre_optimizer_step(self, args, state, control, **kw):
            rec.t_opt = time.perf_counter()

        def on_optimizer_step(self, args, state, control, **kw):
            rec.add("optimizer", time.perf_counter() - rec.t_opt)

        def on_step_end(self, args, state, control, **kw):
            rec.cur["total"] = time.perf_counter() - rec.t_step
            rec.steps.append(dict(rec.cur))

    return StepClock()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()

    from grpokit.recipe import load_recipe
    from grpokit.training import train

    recipe = load_recipe(args.recipe, args.overrides + [f"train.max_steps={args.steps}",
                                                        "train.save_steps=100000", "preflight.prompts=0"])
    if recipe.train.torch_threads:
        torch.set_num_threads(recipe.train.torch_threads)
    threads = torch.get_num_threads()
    peak = matmul_gflops()
    peak_gflops = max(peak.values())

    rec = Recorder()
    clock = instrument(rec)
    with tempfile.TemporaryDirectory(prefix="grpokit-bench-") as tmp:
        result = train(recipe, run_dir=Path(tmp) / "run", callbacks=[clock])
    summary, model = result.summary, result.model
    n_params = sum(p.numel() for p in model.parameters())
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    all_steps = rec.steps
    # Step 1 carries one-off costs (allocator growth, lazy init: ~2x a later step here); the table is
    # the mean of the later steps when there are any. Every step is listed below the table.
    steps = all_steps[1:] if len(all_steps) > 1 else all_steps
    n = len(steps)
    mean = {k: sum(s.get(k, 0.0) for s in steps) / n for k in set().union(*steps)}
    accounted = sum(mean.get(p, 0.0) for p in PHASES if p != "other")
    mean["other"] = mean["total"] - accounted
    # Estimated FLOPs per phase (per step): forward 2*N*tokens, backward 4*N*tokens (trainable params only
    # for weight grads; activations grads still go through every layer, so N is used for both: an estimate).
    flops = {
        "generation": 2 * n_params * mean.get("gen_padded_tokens", 0),
        "old/ref logps": 2 * n_params * mean.get("nograd_tokens", 0),
        "loss forward": 2 * n_params * mean.get("fwd_tokens", 0),
        "backward": 4 * n_params * mean.get("fwd_tokens", 0),
    }

    print(f"\nrecipe {args.recipe}  overrides {args.overrides or '-'}  steps {len(all_steps)} "
          f"(status: {summary['status']}); table = mean of steps {'2' if len(all_steps) > 1 else '1'}..{len(all_steps)}")
    print(f"model params {n_params / 1e6:.1f}M (trainable {n_train / 1e6:.1f}M), torch threads {threads}")
    print("fp32 matmul GFLOP/s: " + ", ".join(f"{k}x{k} {v:.1f}" for k, v in peak.items())
          + f"  -> peak used below: {peak_gflops:.1f}")
    print(f"\n{'phase':<15}{'s/step':>9}{'share':>8}{'est GFLOP':>11}{'GFLOP/s':>9}{'% of peak':>11}")
    for p in PHASES:
        t = mean.get(p, 0.0)
        f = flops.get(p)
        rate = f / t / 1e9 if f and t > 0 else None
        print(f"{p:<15}{t:>9.2f}{100 * t / mean['total']:>7.1f}%"
              + (f"{f / 1e9:>11.1f}{rate:>9.1f}{100 * rate / peak_gflops:>10.1f}%" if rate else f"{'':>11}{'':>9}{'':>11}"))
    print(f"{'total':<15}{mean['total']:>9.2f}{100.0:>7.1f}%")
    print("\nper step (s): " + "; ".join(
        f"#{i + 1} total {s['total']:.1f} gen {s.get('generation', 0):.1f} bwd {s.get('backward', 0):.1f}"
        for i, s in enumerate(all_steps)))
    gen_t = sum(s.get("generation", 0.0) for s in steps)
    gen_tok = sum(s.get("gen_tokens", 0.0) for s in steps)
    print(f"generated tokens: {gen_tok / n:.0f}/step (padded work {mean.get('gen_padded_tokens', 0):.0f}), "
          f"{gen_tok / gen_t:.1f} tokens/s during generation, {gen_tok / sum(s['total'] for s in steps):.1f} "
          "tokens/s over whole steps")
    print(f"loss forward tokens/step (padded prompt+completion): {mean.get('fwd_tokens', 0):.0f}; "
          f"no-grad log-prob tokens/step: {mean.get('nograd_tokens', 0):.0f}")
    print(f"peak resident memory (ru_maxrss of the process: model load, training, checkpoint save, "
          f"matmul test): {rss_gib:.2f} GiB")
    if mean.get("gen_steps"):  # the measured seconds a token step took (the prefill included) against its bound
        print_roofline(model, round(mean["gen_rows"] / mean["gen_calls"]), mean["gen_context"] / mean["gen_rows"],
                       mean["generation"] / mean["gen_steps"], dict(gb_s=bandwidth_gb_s(), gflop_s=peak_gflops))


if __name__ == "__main__":
    main()
