"""Evaluate a model on held-out rows with the training template and the training verifiers.

Greedy decoding, prompts encoded by `PromptTemplate.encode` (the ids TRL
trained on), completions decoded the way TRL decodes them, then scored by the
very reward functions the recipe trains with (`math_correctness`, `format`
with the recipe's params), so evaluation and training cannot disagree about
what counts as right.

Metrics: accuracy (share of rows whose final answer is right), format rate
(share passing the format reward), mean completion length in tokens, and
the share of completions cut off at the length limit.

Not covered yet: pass@k, every-checkpoint evaluation, perturbed sets (the
evaluation issue builds on `generate` and `score` here).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from grpokit.rewards import build_reward
from grpokit.templates import PromptTemplate

EVAL_BATCH_SIZE = 16  # 135M model on CPU: larger batches pad more and gain little


@dataclass
class EvalResult:
    rows: int
    accuracy: float | None
    format_rate: float | None
    mean_length: float
    truncated_rate: float
    samples: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def generate(model, tokenizer, template: PromptTemplate, questions: list[str], max_new_tokens: int,
             batch_size: int = EVAL_BATCH_SIZE) -> tuple[list[str], list[int]]:
    """Greedy completions and their token lengths (up to and excluding EOS)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id
    eos = set(_as_list(model.generation_config.eos_token_id) or [tokenizer.eos_token_id])
    texts, lengths = [], []
    for start in range(0, len(questions), batch_size):
        ids = [template.encode(tokenizer, template.build(q)) for q in questions[start:start + batch_size]]
        width = max(map(len, ids))
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=device)
        out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=max_new_tokens,
                             do_sample=False, pad_token_id=pad, temperature=None, top_p=None, top_k=None)
        for row in out[:, width:].tolist():
            n = next((i for i, t in enumerate(row) if t in eos), len(row))
            lengths.append(n)
            texts.append(tokenizer.decode(row[:n], skip_special_tokens=True))
    if was_training:
        model.train()
    return texts, lengths


def _as_list(x):
    return x if isinstance(x, list) else ([] if x is None else [x])


def _mean(xs: list) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def score(recipe, rows: list[dict], texts: list[str]) -> tuple[list, list]:
    """Per-row correctness and format scores with the recipe's own reward settings."""
    params = {r.name: r.params for r in recipe.rewards}
    columns = {k: [r.get(k) for r in rows] for k in rows[0]} if rows else {}
    correct = build_reward("math_correctness", params.get("math_correctness", {}))(completions=texts, **columns)
    fmt = build_reward("format", params.get("format", {}))(completions=texts, **columns)
    return correct, fmt


def evaluate(model, tokenizer, recipe, rows: list[dict], max_new_tokens: int | None = None,
             n_samples: int = 3) -> EvalResult:
    from grpokit.train import template_of

    max_new = max_new_tokens or recipe.train.max_completion_length
    texts, lengths = generate(model, tokenizer, template_of(recipe), [r["question"] for r in rows], max_new)
    correct, fmt = score(recipe, rows, texts)
    samples = [{"question": r["question"], "answer": r["answer"], "completion": t, "correct": c, "format": f}
               for r, t, c, f in list(zip(rows, texts, correct, fmt))[:n_samples]]
    return EvalResult(
        rows=len(rows), accuracy=_mean(correct), format_rate=_mean(fmt),
        mean_length=sum(lengths) / max(1, len(lengths)),
        truncated_rate=sum(n >= max_new for n in lengths) / max(1, len(lengths)), samples=samples,
    )
