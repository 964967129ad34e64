"""How far the sampler's log-probs are from the trainer's, per precision: the gap a precision choice adds.

    python benchmarks/logprob_gap.py recipes/smollm2-arithmetic.yaml [--calls 2]

GRPO's loss takes the trainer's per-token log-probs of the sampled completions; TRL's vLLM path corrects for the
sampler computing them differently (`vllm_importance_sampling_correction`), the HF path does not need to when the
sampler *is* the trainer's model. This measures that gap for the ways grpokit can run a CPU step:

  fp32               sampling and training forward in float32 (today's CPU default)
  bf16-autocast      both under torch.autocast(cpu, bfloat16), as TRL runs a step with bf16=True (accelerate
                     wraps the model's forward, so generation and the loss forward both run in it)
  bf16-weights/fp32  sampling on a bfloat16 copy of the weights, training forward in float32 (a faster sampler
                     alone: what TRL would have to correct)

For each: the recipe's step (prompts x num_generations, its temperature and top_p) sampled by transformers'
`generate` with `output_logits`, the sampler's log-prob of each sampled token = log_softmax(logits / T) (TRL's
rule), then one training forward over prompt + completion; per completion token the difference. Printed: mean
and 99th percentile of |gap|, and the mean |1 - exp(gap)| (how far the importance ratio sits from 1).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit


def gaps(sampler, trainer, sample_ctx, train_ctx, tokenizer, prompts, t, seed):
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])  # left padding, as TRL pads
    torch.manual_seed(seed)
    with torch.no_grad(), sample_ctx():
        out = sampler.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=t.temperature,
                               top_p=t.top_p, top_k=0, max_new_tokens=t.max_completion_length,
                               num_return_sequences=t.num_generations, output_logits=True,
                               return_dict_in_generate=True, pad_token_id=pad)
    completion = out.sequences[:, width:]
    logits = torch.stack(out.logits, 1).float() / t.temperature
    sample_lp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    full_mask = torch.cat([mask.repeat_interleave(t.num_generations, 0), torch.ones_like(completion)], 1)
    with torch.no_grad(), train_ctx():
        train_logits = trainer(input_ids=out.sequences, attention_mask=full_mask).logits[:, width - 1:-1].float()
    train_lp = torch.log_softmax(train_logits / t.temperature, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
    eos = tokenizer.eos_token_id
    done = torch.cumsum((completion == eos).long(), 1)
    real = (done == 0) | ((done == 1) & (completion == eos))  # tokens up to and including the first EOS
    return (sample_lp - train_lp)[real]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recipe")
    p.add_argument("--calls", type=int, default=2, help="steps' worth of prompts to sample")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    import torch

    from grpokit import models
    from grpokit.data import load_datasets
    from grpokit.recipe import load_recipe
    from grpokit.task import template_of

    recipe = load_recipe(args.recipe, args.overrides)
    t = recipe.train
    path = models.resolve_model_path(recipe.model.name)
    tokenizer, model = models.load_tokenizer(path), models.load_model(path, recipe.model.dtype)
    model.eval()
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    template = template_of(recipe)
    per_call = max(1, t.per_device_train_batch_size // t.num_generations)
    rows = load_datasets(recipe)[0][:per_call * args.calls]
    prompts = [template.encode(tokenizer, template.build(r["question"])) for r in rows]
    fp32 = contextlib.nullcontext
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    variants = {"fp32": (model, model, fp32, fp32), "bf16-autocast": (model, model, autocast, autocast),
                "bf16-weights/fp32": (bf16, model, fp32, fp32)}
    print(json.dumps(dict(recipe=args.recipe, model=path, completions=len(prompts) * t.num_generations,
                          temperature=t.temperature, top_p=t.top_p)))
    for name, (sampler, trainer, s_ctx, t_ctx) in variants.items():
        g = torch.cat([gaps(sampler, trainer, s_ctx, t_ctx, tokenizer, prompts[i:i + per_call], t, t.seed + i)
                       for i in range(0, len(prompts), per_call)])
        a = g.abs()
        print(json.dumps(dict(variant=name, tokens=int(g.numel()), mean_abs_gap=round(a.mean().item(), 5),
                              p99_abs_gap=round(a.quantile(0.99).item(), 5), max_abs_gap=round(a.max().item(), 4),
                              mean_abs_ratio_minus_1=round((1 - g.exp()).abs().mean().item(), 5))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
