"""The loss's forward + backward in three layouts, on one GRPO micro-batch: TRL's rows, a cached prompt, the tree.

    python benchmarks/shared_prefix.py                                   # the demo's shape, the embedded model
    python benchmarks/shared_prefix.py --completion-lengths 10-48        # completions of mixed length
    python benchmarks/shared_prefix.py --checkpointing                   # with gradient checkpointing
    python benchmarks/shared_prefix.py --model-dir DIR --prompt-tokens 512 --prompts 1 --generations 64 \\
        --completion-lengths 256 --dtype bfloat16                         # the Qwen3-0.6B GPU shape

One micro-batch as TRL's `_compute_loss` receives it: `--prompts` prompts (the recipe's real ones, or random ids of
`--prompt-tokens`), `--generations` completions each (random ids; their content does not change the arithmetic) of
`--completion-lengths` tokens (N, or A-B drawn uniformly), prompts left-padded and completions right-padded. The
model gets TRL's fused LM head scoring only the completion positions, as in training. Layouts, each timed
`--repeats` times (forward, then backward of the summed log-probs), the first run not counted:

  trl     TRL's layout: one row per completion, the prompt before each, padded to the longest
  cached  the prompt once with use_cache, its cache repeated to the group (DynamicCache.batch_repeat_interleave),
          then the completions on top, still padded to the longest (issue 42's second candidate; not in grpokit;
          left out with --checkpointing: transformers turns the cache off under gradient checkpointing)
  tree    grpokit's: every distinct prefix once, completions to their own length (grpokit.generation.tree)

Prints one JSON line per layout: positions computed, forward and backward seconds (median), the ratio to trl's
time, and the largest |log-prob| difference and the relative gradient difference against trl.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "smollm2-arithmetic.yaml"


def batch(args, tokenizer, prompts_ids: list[list[int]]):
    """TRL's (prompt_ids, prompt_mask, completion_ids, completion_mask) for the prompts, rows of a group adjacent."""
    import torch

    g = torch.Generator().manual_seed(args.seed)
    low, _, high = args.completion_lengths.partition("-")
    low, high = int(low), int(high or low)
    rows = []
    for p in prompts_ids:
        for _ in range(args.generations):
            n = int(torch.randint(low, high + 1, (1,), generator=g))
            rows.append((p, torch.randint(100, min(40000, len(tokenizer)), (n,), generator=g).tolist()))
    P, C = max(len(p) for p, _ in rows), max(len(c) for _, c in rows)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(rows), P + C), pad)
    mask = torch.zeros(len(rows), P + C, dtype=torch.long)
    for i, (p, c) in enumerate(rows):
        ids[i, P - len(p):P], mask[i, P - len(p):P] = torch.tensor(p), 1
        ids[i, P:P + len(c)], mask[i, P:P + len(c)] = torch.tensor(c), 1
    return ids, mask, C


def trl_layout(model, ids, mask, C):
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-C] = -100
    return model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True).log_probs[:, -C:], ids.numel()


def cached_layout(model, ids, mask, C, generations: int):
    """The prompt of each group once (its first row), its KV cache repeated to the group, completions on top."""
    import torch
    from transformers import DynamicCache

    from grpokit import hf_internals

    P = ids.size(1) - C
    firsts = ids[::generations, :P - 1]  # the prompt but its last token, whose hidden state scores completion 1
    cache = DynamicCache()
    keyword = hf_internals.cache_keyword(model)
    model(input_ids=firsts, attention_mask=mask[::generations, :P - 1], use_cache=True, **{keyword: cache})
    cache.batch_repeat_interleave(generations)
    tail = ids[:, P - 1:]
    labels = torch.cat([torch.full((ids.size(0), 1), -100, device=ids.device),
                        ids[:, P:].masked_fill(mask[:, P:] == 0, -100)], dim=1)
    out = model(input_ids=tail, attention_mask=mask, labels=labels, fused_lm_head=True, use_cache=True,
                **{keyword: cache})
    return out.log_probs[:, -C:], firsts.numel() + tail.numel()


def tree_layout(model, ids, mask, C):
    from grpokit.generation.tree import TreeCost, mask_form
    from grpokit.training.logps import rows_of, tree_outputs

    sequences, starts, lengths = rows_of(ids, mask, C)
    out, positions = tree_outputs(model, sequences, starts, [range(n) for n in lengths], (ids.size(0), C),
                                  ("log_probs",), TreeCost.of(model), mask_form(model))
    return out["log_probs"], positions


def timed(model, run, repeats: int):
    import torch

    forward, backward = [], []
    for _ in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        logps, positions = run()
        t1 = time.perf_counter()
        logps.sum().backward()
        t2 = time.perf_counter()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
    grads = torch.cat([p.grad.flatten().float() for p in model.parameters() if p.grad is not None])
    return logps.detach().float(), grads, positions, statistics.median(forward[1:]), statistics.median(backward[1:])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", help="a model folder (default: the embedded model)")
    p.add_argument("--recipe", default=str(RECIPE), help="whose prompts to use (when --prompt-tokens is not given)")
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, help="random prompts of this many tokens instead of the recipe's")
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--completion-lengths", default="48", help="N, or A-B (uniform)")
    p.add_argument("--layouts", default="trl,cached,tree")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--checkpointing", action="store_true", help="gradient checkpointing, as the demo recipe trains")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    import torch
    from trl.trainer.utils import add_fused_lm_head

    from grpokit import internals, models

    path = args.model_dir or str(models.default_model_dir())
    tokenizer = models.load_tokenizer(path)
    model = models.load_model(path, args.dtype)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    add_fused_lm_head(model)
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    if args.prompt_tokens:
        g = torch.Generator().manual_seed(args.seed + 1)
        prompts = [torch.randint(100, 40000, (args.prompt_tokens,), generator=g).tolist() for _ in range(args.prompts)]
    else:
        from grpokit.data import load_datasets
        from grpokit.recipe import load_recipe
        from grpokit.task import template_of

        recipe = load_recipe(args.recipe)
        template = template_of(recipe)
        prompts = [template.encode(tokenizer, template.build(r["question"]))
                   for r in load_datasets(recipe)[0][:args.prompts]]
    ids, mask, C = batch(args, tokenizer, prompts)
    ids, mask = ids.to(device), mask.to(device)
    runs = {"trl": lambda: trl_layout(model, ids, mask, C),
            "cached": lambda: cached_layout(model, ids, mask, C, args.generations),
            "tree": lambda: tree_layout(model, ids, mask, C)}
    scored = mask[:, -C:].bool()
    print(json.dumps({"model": path, "dtype": args.dtype, "device": device, "threads": torch.get_num_threads(),
                      "prompts": [len(x) for x in prompts], "generations": args.generations,
                      "completion_tokens": int(scored.sum()), "checkpointing": args.checkpointing}), flush=True)
    reference = None
    for name in args.layouts.split(","):
        if name == "cached" and args.checkpointing:
            print(json.dumps({"layout": name, "skipped": "no KV cache under gradient checkpointing"}), flush=True)
            continue
        with internals.labelled_positions_only():  # as a GrpokitTrainer's log-prob calls are
            logps, grads, positions, fwd, bwd = timed(model, runs[name], args.repeats)
        row = {"layout": name, "positions": positions, "forward_s": round(fwd, 3), "backward_s": round(bwd, 3)}
        if reference is None:
            reference = (logps, grads, fwd + bwd)
        row["time_vs_first"] = round((fwd + bwd) / reference[2], 3)
        row["max_abs_logp_diff"] = float((logps - reference[0])[scored].abs().max())
        row["grad_rel_diff"] = float((grads - reference[1]).norm() / reference[1].norm())
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
