"""One model's answers on some rows, scored by the task's own rewards: what every evaluation is made of.

    result = evaluate(model, tokenizer, task, rows, k_samples=8)    # EvalResult: accuracy, metrics, pass@k, ...

Prompts are encoded by `PromptTemplate.encode` (the ids TRL trained on),
completions are decoded the way TRL decodes them and scored by the task's own
rewards (`grpokit.task`: the recipe's rewards with their params), so
evaluation and training cannot disagree about what counts as right. What the
metrics are, and evaluating a run's checkpoints or a model with no run:
grpokit.evaluation.runs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Pure functions over scores and results (pass@k, sampled pass@k, gaps, best choice, the table): metrics.py.
from grpokit.evaluation.metrics import pass_at_k_of, sampled_hits
from grpokit.generation import SamplingParams, backend_of, complete, dtype_name
from grpokit.task import Task
from grpokit.templates import PromptTemplate

SAMPLE_SEED = 0  # pass@k sampling is seeded so two evaluations of one checkpoint agree


@dataclass
class EvalResult:
    rows: int
    accuracy: float | None
    format_rate: float | None
    mean_length: float
    truncated_rate: float
    samples: list[dict] = field(default_factory=list)
    refusal_rate: float | None = None
    pass_at_k: dict[str, float] = field(default_factory=dict)  # {"1": ..., "4": ...}, from `samples_per_problem`
    samples_per_problem: int = 0
    sample_hits: list[int] = field(default_factory=list)  # per row, how many of its samples passed (pass@k's input)
    metric: str | None = None  # what `accuracy` is: the task's primary metric (accuracy, pass@1, valid rate, ...)
    metrics: dict[str, float | None] = field(default_factory=dict)  # every correctness reward's metric, primary first
    reward_means: dict[str, float | None] = field(default_factory=dict)  # greedy mean of every reward
    # Per row, the score of each learned (preference-role) reward: two models on the same rows are compared pair by
    # pair, the win rate against the base (grpokit.evaluation.preference).
    preference_scores: dict[str, list[float | None]] = field(default_factory=dict)
    failed: list[dict] = field(default_factory=list)  # rows not answered right, with the verdict (data mine-failures)
    # Per row, in the rows' order, the primary metric's score (None: not judged): two models evaluated on the same
    # rows are compared row by row, with the paired error (grpokit.demo.sft_vs_grpo).
    scores: list[float | None] = field(default_factory=list)
    precision: str | None = None  # the dtype the completions were generated in (the model's weights')

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- generation (grpokit.generation)
def _prompt_ids(tokenizer, template: PromptTemplate, questions: list[str]) -> list[list[int]]:
    return [template.encode(tokenizer, template.build(q)) for q in questions]


def generate(model, tokenizer, template: PromptTemplate, questions: list[str], max_new_tokens: int,
             batch_size: int | None = None, backend: tuple[str, dict] = ("hf", {})) -> tuple[list[str], list[int]]:
    """Greedy completions and their token lengths (up to and excluding EOS); `backend`: generation.backend_of.

    batch_size None: rows per generate call sized by `grpokit.generation.rows_per_call`."""
    done = [g[0] for g in complete(model, tokenizer, _prompt_ids(tokenizer, template, questions),
                                   SamplingParams(max_tokens=max_new_tokens), batch_size=batch_size,
                                   backend=backend[0], backend_options=backend[1], label="eval (greedy)")]
    return [c.text for c in done], [c.length for c in done]


def sample(model, tokenizer, template: PromptTemplate, questions: list[str], max_new_tokens: int, k: int,
           temperature: float = 1.0, top_p: float = 1.0, seed: int = SAMPLE_SEED,
           backend: tuple[str, dict] = ("hf", {})) -> list[list[str]]:
    """k sampled completions per question (seeded), as during training."""
    params = SamplingParams(max_tokens=max_new_tokens, n=k, temperature=temperature, top_p=top_p, seed=seed)
    groups = complete(model, tokenizer, _prompt_ids(tokenizer, template, questions), params,
                      backend=backend[0], backend_options=backend[1],
                      label=f"eval (pass@{k} samples)")
    return [[c.text for c in g] for g in groups]


def _mean(xs: list) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


# ---------------------------------------------------------------- scoring (the task's rewards)
def score(task, rows: list[dict], texts: list[str]) -> tuple[list, list]:
    """Per-row primary (correctness reward: 1.0 pass / 0.0, a graded one's score; None where it does not apply)
    and format scores."""
    task = Task.of(task)
    scores, _ = task.score(texts, rows)
    c, f = task.correctness, task.format
    passed = [None] * len(texts) if c is None else c.metric_values(scores[c.name])
    return passed, ([None] * len(texts) if f is None else scores[f.name])


def evaluate(model, tokenizer, task, rows: list[dict], max_new_tokens: int | None = None,
             n_samples: int = 3, k_samples: int = 0) -> EvalResult:
    """Greedy metrics on `rows`; with k_samples > 0 also pass@k from k_samples sampled completions each.

    `task` is a `grpokit.task.Task` (a recipe is turned into one)."""
    task = Task.of(task)
    max_new = max_new_tokens or task.generation.max_new_tokens
    questions = [r["question"] for r in rows]
    backend = backend_of(task.recipe)  # hf or the recipe's vLLM engine, for greedy and sampled completions alike
    texts, lengths = generate(model, tokenizer, task.template, questions, max_new, backend=backend)
    scores, _ = task.score(texts, rows)
    c, f = task.correctness, task.format
    values = task.metric_values(scores)
    correct = [None] * len(texts) if c is None else values[task.primary_metric]
    values.update(_family_columns(task, texts, rows))
    fmt = [None] * len(texts) if f is None else scores[f.name]
    refusals = task.refusals(texts, rows)
    samples = [{"question": r["question"], "answer": r.get("answer"), "completion": t, "correct": ok, "format": fm,
                "rewards": {n: s[i] for n, s in scores.items()}}
               for i, (r, t, ok, fm) in enumerate(list(zip(rows, texts, correct, fmt))[:n_samples])]
    hits: list[int] = []
    if k_samples > 0 and rows and c is not None:
        groups = sample(model, tokenizer, task.template, questions, max_new, k_samples,
                        task.generation.temperature, task.generation.top_p, backend=backend)
        hits = sampled_hits(task, rows, groups)
    return EvalResult(
        rows=len(rows), accuracy=_mean(correct), format_rate=_mean(fmt),
        mean_length=sum(lengths) / max(1, len(lengths)),
        truncated_rate=sum(n >= max_new for n in lengths) / max(1, len(lengths)), samples=samples,
        refusal_rate=None if refusals is None else sum(refusals) / max(1, len(refusals)),
        pass_at_k=pass_at_k_of(hits, k_samples), sample_hits=hits, samples_per_problem=k_samples if c is not None else 0, metric=task.primary_metric,
        metrics={m: _mean(v) for m, v in values.items()},
        reward_means={n: _mean(s) for n, s in scores.items()},
        preference_scores={r.name: scores[r.name] for r in task.by_role("preference")},
        failed=[{**r, "verdict": "refusal" if refusals and refusals[i] else "wrong"}
                for i, (r, ok) in enumerate(zip(rows, correct)) if ok is not None and ok != 1.0],
        scores=[None if ok is None else float(ok) for ok in correct] if c is not None else [],
        precision=dtype_name(model),
    )


def _family_columns(task, texts: list[str], rows: list[dict]) -> dict[str, list[float | None]]:
    """{title: per-row values} of the task family's columns measured on each completion (`Column.per_row`)."""
    family = task.family
    columns = [c for c in family.columns if c.per_row is not None] if family is not None else []
    return {c.title: [c.per_row(t, r) for t, r in zip(texts, rows)] for c in columns}
