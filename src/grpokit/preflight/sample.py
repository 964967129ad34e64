"""Preflight: sample the initial model before training and say what to change.

    grpokit preflight recipes/smollm2-arithmetic.yaml --prompts 16 --generations 8
    grpokit preflight RECIPE.yaml --write-filtered data/train.filtered.jsonl

Samples N training prompts x G completions with the recipe's template and
sampling settings (temperature, top_p, max_completion_length), scores them
with the recipe's own rewards (the same functions training calls), and
reports: reward mean and spread per component and in total; the share of
prompts whose group scores the same everywhere (zero variance: no learning
signal), all-correct and all-wrong; the format rate; completions that hit
max_completion_length; completion length quantiles (p50, p90, p99 in
tokens). From these it recommends settings, each with its reason (the 0.6B
article's advice: a max_completion_length that covers the p99, more
generations or more format weight when too few groups carry signal), and
lists the prompts always or never solved. `--write-filtered` writes only
the judged prompts that showed a reward spread, easy and hard alternating
(the article's difficulty mixing); train on them in that order with
`train.shuffle_dataset: false` (TRL shuffles otherwise). Writes preflight.json.

`grpokit train` runs a short one first when the recipe sets
`preflight.prompts` > 0, and prints its recommendations.

Not covered: prompts it did not sample are not judged (pass --prompts with
the dataset size to judge them all); sampling uses transformers' generate,
not vLLM, so it is meant for tens of prompts, not thousands.
"""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from statistics import mean, pstdev

import torch

from grpokit import models
from grpokit.data import load_datasets
from grpokit.generation import SamplingParams, backend_of, complete, dtype_name
from grpokit.run.layout import PREFLIGHT_FILE
from grpokit.run.writer import write_file, write_rows
from grpokit.task import Task
from grpokit.templates import PromptTemplate

LOW_SIGNAL_SHARE = 0.5  # zero-variance groups above this share: too little to learn from (Qwen3-0.6B-Base article)
TRUNCATION_SHARE = 0.05  # more completions than this cut at the limit: answers lose their final line
FILTER_SHARE = 0.25  # no-signal prompts above this share are worth filtering out of the data
FORMAT_WEIGHT_TARGET = 0.4  # the Qwen3-0.6B-Base article raises the format share from 0.2 to 0.4-0.5 when format is weak
_EPS = 1e-9


def sample(model, tokenizer, template: PromptTemplate, questions: list[str], generations: int, max_new_tokens: int,
           temperature: float, top_p: float, seed: int,
           backend: tuple[str, dict] = ("hf", {})) -> list[list[tuple[str, int, bool]]]:
    """G sampled completions per question: (text, tokens up to EOS, truncated at the limit)."""
    params = SamplingParams(max_tokens=max_new_tokens, n=generations, temperature=temperature, top_p=top_p, seed=seed)
    groups = complete(model, tokenizer, [template.encode(tokenizer, template.build(q)) for q in questions], params,
                      backend=backend[0], backend_options=backend[1], label="preflight")
    return [[(c.text, c.length, c.truncated) for c in g] for g in groups]


def quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return 0.0
    k = (len(xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def interleave_easy_hard(items: list[dict], key: str = "mean_reward") -> list[dict]:
    """Easiest, hardest, second easiest, second hardest, ...: no long run of hard prompts (Qwen3-0.6B-Base article)."""
    ordered = sorted(items, key=lambda x: -x[key])
    out, lo, hi = [], 0, len(ordered) - 1
    while lo <= hi:
        out.append(ordered[lo])
        if lo != hi:
            out.append(ordered[hi])
        lo, hi = lo + 1, hi - 1
    return out


def _round_up(x: float, to: int = 64) -> int:
    return int(math.ceil(x / to) * to)


def _nanmean(xs):
    v = [x for x in xs if x is not None]
    return mean(v) if v else None


def run_preflight(recipe, model, tokenizer, rows: list[dict], *, prompts: int = 16, generations: int | None = None,
                  out_dir: Path | None = None, out_file: Path | None = None, overwrite: bool = False) -> dict:
    """Sample, score, measure, recommend; writes preflight.json to out_file or out_dir. Returns the report.

    `recipe` may be a `grpokit.task.Task` (a recipe is turned into one)."""
    task = Task.of(recipe)
    recipe = task.recipe
    t0 = time.time()
    t = recipe.train
    g = generations or t.num_generations
    rng = random.Random(t.seed)
    chosen = rng.sample(range(len(rows)), min(prompts, len(rows)))
    picked = [rows[i] for i in chosen]
    groups = sample(model, tokenizer, task.template, [r["question"] for r in picked], g,
                    t.max_completion_length, t.temperature, t.top_p, t.seed, backend=backend_of(recipe))

    texts = [c[0] for grp in groups for c in grp]
    per_reward, errors = task.score(texts, [r for r in picked for _ in range(g)])
    weights = {r.name: r.weight for r in task.rewards}
    total = [sum(weights[n] * s[i] for n, s in per_reward.items() if s[i] is not None) for i in range(len(texts))]

    correctness = task.correctness.name if task.correctness else None
    formats = [r.name for r in task.by_role("format")]
    per_prompt = []
    for j, row in enumerate(picked):
        sl = slice(j * g, (j + 1) * g)
        tot = total[sl]
        corr = per_reward[correctness][sl] if correctness else None
        cvals = [c for c in corr if c is not None] if corr else []
        per_prompt.append({
            "question": row["question"], "index": chosen[j], "mean_reward": mean(tot), "std_reward": pstdev(tot),
            "zero_variance": pstdev(tot) < _EPS,
            "correct_rate": mean(cvals) if cvals else None,
            "all_correct": bool(cvals) and min(cvals) >= 1 - _EPS, "all_wrong": bool(cvals) and max(cvals) <= _EPS,
        })
    lengths = [c[1] for grp in groups for c in grp]
    truncated = sum(c[2] for grp in groups for c in grp)
    n_prompts = max(1, len(per_prompt))
    report = {
        "recipe": recipe.source, "model": recipe.model.name, "prompts": len(picked), "generations": g,
        "sampling": {"temperature": t.temperature, "top_p": t.top_p, "max_completion_length": t.max_completion_length,
                     "precision": dtype_name(model)},
        "rewards": {n: {"weight": weights[n], "role": task.roles[n], "mean": _nanmean(s),
                        "std": pstdev([x for x in s if x is not None]) if any(x is not None for x in s) else None,
                        "errors": errors[n]} for n, s in per_reward.items()},
        "total_reward": {"mean": mean(total) if total else None, "std": pstdev(total) if total else None},
        "zero_variance_share": sum(p["zero_variance"] for p in per_prompt) / n_prompts,
        "all_correct_share": sum(p["all_correct"] for p in per_prompt) / n_prompts if correctness else None,
        "all_wrong_share": sum(p["all_wrong"] for p in per_prompt) / n_prompts if correctness else None,
        "correctness_reward": correctness,
        "format_rate": _nanmean([x for n in formats for x in per_reward[n]]) if formats else None,
        "truncated": truncated, "truncated_share": truncated / max(1, len(lengths)),
        "length_quantiles": {"p50": quantile(lengths, 0.5), "p90": quantile(lengths, 0.9), "p99": quantile(lengths, 0.99)},
        "always_solved": [p["question"] for p in per_prompt if p["all_correct"]],
        "never_solved": [p["question"] for p in per_prompt if p["all_wrong"]],
        "per_prompt": per_prompt,
        "examples": [{"question": picked[j]["question"], "completion": groups[j][0][0]} for j in range(min(3, len(picked)))],
    }
    report["recommendations"] = recommend(task, report)
    report["seconds"] = round(time.time() - t0, 1)
    target = out_file or (Path(out_dir) / PREFLIGHT_FILE if out_dir else None)
    if target is not None:  # a run's folder (out_dir: grpokit's), or a file the user named (--output, --overwrite)
        write_file(target, json.dumps(report, indent=2, ensure_ascii=False), replace=overwrite,
                   within=None if out_file else out_dir)
        report["path"] = str(target)
    return report


def recommend(recipe, r: dict) -> list[dict]:
    """Settings to change, each with the measurement that motivates it."""
    task = Task.of(recipe)
    t = task.recipe.train
    out = []

    def add(setting, value, reason):
        out.append({"setting": setting, "value": value, "reason": reason})

    p99 = r["length_quantiles"]["p99"]
    if r["truncated_share"] > TRUNCATION_SHARE:
        value = _round_up(max(2 * t.max_completion_length, p99 * 1.25))
        add("train.max_completion_length", value,
            f"{r['truncated_share']:.0%} of completions hit the limit of {t.max_completion_length} tokens, so their "
            "final answer line is lost and they score as wrong; raise it (the Qwen3-0.6B-Base article: 512 for math, 1024 for "
            "logic) and run preflight again to see the p99")
    elif p99 * 2 < t.max_completion_length and t.max_completion_length > 64:
        add("train.max_completion_length", max(64, _round_up(p99 * 1.5)),
            f"the p99 completion is {p99:.0f} tokens: a limit about 1.5x that covers it and saves generation time")
    zv = r["zero_variance_share"]
    if zv >= LOW_SIGNAL_SHARE:
        add("train.num_generations", max(t.num_generations + 4, int(t.num_generations * 1.5)),
            f"{zv:.0%} of prompts scored every completion the same (no learning signal): more samples per prompt "
            "make a differing answer likelier (Qwen3-0.6B-Base article: 8 -> 12)")
        fmt = task.by_role("format")
        total_w = sum(abs(rc.weight) for rc in task.rewards) or 1.0
        if not fmt:
            add("rewards", "add {name: format, weight: 0.2}",
                "a format reward gives all-wrong groups a difference to learn from (Qwen3-0.6B-Base article: 0.8 correctness "
                "+ 0.2 format)")
        elif fmt[0].weight / total_w < FORMAT_WEIGHT_TARGET and (r["format_rate"] or 0) < 0.5:
            add(f"rewards.{fmt[0].name}.weight", round(FORMAT_WEIGHT_TARGET / (1 - FORMAT_WEIGHT_TARGET) *
                                                       (total_w - fmt[0].weight), 3),
                f"the format rate is {r['format_rate'] or 0:.0%}: the Qwen3-0.6B-Base article raises the format share to 0.4-0.5 "
                "while the model cannot hold the format, then lowers it back to 0.1-0.2")
    flat = round(zv * r["prompts"])
    if zv >= FILTER_SHARE:
        add("data", "grpokit preflight --write-filtered OUT.jsonl",
            f"{flat} of {r['prompts']} prompts scored every completion the same ({len(r['always_solved'])} always "
            f"solved, {len(r['never_solved'])} never solved in all): they give zero advantage; drop them and "
            "alternate easy with hard prompts (Qwen3-0.6B-Base article), or let training prefer prompts with signal "
            "as it goes (selection.enabled: true, selection.refill: true)")
    if r["all_wrong_share"] is not None and r["all_wrong_share"] >= 0.9:
        add("data", "easier prompts first",
            f"{r['all_wrong_share']:.0%} of prompts were never solved: the Qwen3-0.6B-Base article adds very easy problems so "
            "some answers are right and the reward leaves zero")
    if t.temperature < 0.9 and zv >= LOW_SIGNAL_SHARE:
        add("train.temperature", 0.9, f"temperature {t.temperature} samples near-identical completions; both "
            "articles use 0.9 or more")
    return out


def write_filtered(report: dict, rows: list[dict], path: Path, overwrite: bool = False) -> tuple[int, int, int]:
    """The judged prompts with a reward spread, easy/hard alternating; no-signal and unjudged rows left out.

    Returns (written, dropped: judged without signal, unjudged: not sampled, so not written)."""
    judged = {p["index"]: p for p in report["per_prompt"]}
    keep = interleave_easy_hard([p for p in judged.values() if not p["zero_variance"]])
    out = [rows[p["index"]] for p in keep]
    write_rows(path, out, replace=overwrite)
    return len(out), len(judged) - len(keep), len(rows) - len(judged)


def preflight_recipe(recipe, *, prompts: int = 16, generations: int | None = None,
                     out_file: Path | None = None, overwrite: bool = False) -> tuple[dict, list[dict]]:
    """Load the recipe's training rows and initial model, then `run_preflight`. Returns the report and the rows."""
    if recipe.train.torch_threads:
        torch.set_num_threads(recipe.train.torch_threads)
    rows = load_datasets(recipe)[0]
    tokenizer, model = models.load_recipe_tokenizer(recipe.model), models.load_recipe_model(recipe.model, on_device=True)
    return run_preflight(recipe, model, tokenizer, rows, prompts=prompts, generations=generations,
                         out_file=out_file, overwrite=overwrite), rows


def render_preflight(r: dict) -> str:
    def f(x, pct=False):
        return "-" if x is None else (f"{x:.0%}" if pct else f"{x:.3f}")

    lines = [f"preflight: {r['prompts']} prompts x {r['generations']} completions "
             f"(temperature {r['sampling']['temperature']}, top_p {r['sampling']['top_p']}, "
             f"max {r['sampling']['max_completion_length']} tokens"
             + (f", in {r['sampling']['precision']}" if r['sampling'].get('precision') else "")
             + f") in {r['seconds']}s"]
    for n, s in r["rewards"].items():
        lines.append(f"  reward {n:<18} weight {s['weight']:<5} mean {f(s['mean'])}  std {f(s['std'])}"
                     + (f"  errors {s['errors']}" if s["errors"] else ""))
    lines.append(f"  total reward             mean {f(r['total_reward']['mean'])}  std {f(r['total_reward']['std'])}")
    lines.append(f"  zero-variance groups {f(r['zero_variance_share'], True)}  all correct "
                 f"{f(r['all_correct_share'], True)}  all wrong {f(r['all_wrong_share'], True)}  format rate "
                 f"{f(r['format_rate'], True)}")
    q = r["length_quantiles"]
    lines.append(f"  length p50 {q['p50']:.0f}  p90 {q['p90']:.0f}  p99 {q['p99']:.0f} tokens; {r['truncated']} "
                 f"completion(s) ({f(r['truncated_share'], True)}) hit max_completion_length")
    for name, key in (("always solved", "always_solved"), ("never solved", "never_solved")):
        if r[key]:
            lines.append(f"  {name} ({len(r[key])}): " + "; ".join(q[:50] for q in r[key][:3])
                         + (" ..." if len(r[key]) > 3 else ""))
    lines.append("recommendations:" if r["recommendations"] else "recommendations: none, the settings look right")
    for rec in r["recommendations"]:
        lines.append(f"  - {rec['setting']} -> {rec['value']}: {rec['reason']}")
    if r.get("path"):
        lines.append(f"report: {r['path']}")
    return "\n".join(lines)
