"""A reward model learned from human rankings: candidates to rank, training with TRL's RewardTrainer, scoring.

    grpokit rm candidates RECIPE --prompts prompts.jsonl --n 4 --out rankings.jsonl
    grpokit rm train rankings.jsonl --base default --out runs/rm-style
    grpokit rm eval runs/rm-style rankings.jsonl

A reward model is a sequence-classification head (one output) on a causal
LM, trained on every better-than pair of the rankings (grpokit.rm.rankings)
with TRL's RewardTrainer (Bradley-Terry loss). Whole prompts are held out
(seeded) and the held-out pairwise accuracy (share of pairs where the better
answer scores higher) is printed and written to `OUT/rm.json`.

The text the model reads is one rule, `rm_input_ids` (grpokit.rewards.learned, beside the scorer the
`reward_model` reward uses), for training and for scoring, so the two cannot drift.

Not covered: LoRA reward models, multi-GPU training, margins from rating
gaps (all pairs count the same).
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path

from grpokit import hf_internals, models
from grpokit.data import read_file, resolve_data_path
from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation import sample
from grpokit.rewards import DEFAULT_MAX_LENGTH, RM_FILE, RewardModelScorer, read_rm_info, rm_input_ids
from grpokit.rm.rankings import pairs, read_rankings, split_prompts
from grpokit.run.ownership import refuse_unproven
from grpokit.run.reads import command, reading
from grpokit.run.locks import FolderLock
from grpokit.run.writer import check_target, make_folder, remove_made, staging_folder, write_file, write_rows
from grpokit.run.claims import install, refuse_claim
from grpokit.task import template_of


# ---------------------------------------------------------------- candidates
def read_prompts(path: str) -> list[str | list]:
    """Questions of a prompts file (any data format; `question` or `prompt` column; answers not needed)."""
    raw = read_file(path)
    problems = raw.file_errors + raw.row_errors
    out = []
    for where, obj in raw.rows:
        q = next((obj[k] for k in ("question", "prompt") if isinstance(obj, dict) and k in obj), None)
        if (isinstance(q, str) and q.strip()) or (isinstance(q, list) and q):
            out.append(q)
        else:
            problems.append(Problem(where, "no question", 'write one object per line: {"question": "..."}'))
    if problems or not out:
        raise GrpokitError(problems or [Problem(path, "no prompts", "add one prompt per line")],
                           title=f"{path}: not a usable prompts file")
    return out


@command()
def write_candidates(recipe, prompts_path: str, n: int, out: str, max_new_tokens: int | None = None,
                     seed: int = 0, model=None, tokenizer=None, overwrite: bool = False) -> dict:
    """n sampled answers per prompt (the recipe's model, template and temperature), unranked, into `out`."""
    if n < 2:
        raise GrpokitError([Problem("--n", f"need at least 2 candidates per prompt to rank, got {n}", "pass --n 4")])
    reading(prompts_path, recipe.source)
    check_target(out, replace=overwrite)  # before the model loads
    questions = read_prompts(prompts_path)
    tokenizer = tokenizer or models.load_recipe_tokenizer(recipe.model)
    model = model or models.load_recipe_model(recipe.model, on_device=True)
    groups = sample(model, tokenizer, template_of(recipe), questions, max_new_tokens or recipe.train.max_completion_length,
                    n, recipe.train.temperature, recipe.train.top_p, seed=seed)
    rows, dropped = [], 0
    for i, (q, texts) in enumerate(zip(questions, groups)):
        unique = list(dict.fromkeys(t.strip() for t in texts if t.strip()))  # identical answers cannot be ranked apart
        dropped += len(texts) - len(unique)
        rows.append({"id": f"p{i + 1}", "question": q,
                     "candidates": [{"id": f"c{j + 1}", "text": t, "rank": None} for j, t in enumerate(unique)]})
    write_rows(out, rows, replace=overwrite)
    return {"prompts": len(rows), "candidates": sum(len(r["candidates"]) for r in rows), "dropped_duplicates": dropped,
            "too_few": [r["id"] for r in rows if len(r["candidates"]) < 2], "path": out}


def pairwise_accuracy(scorer: RewardModelScorer, rankings: list[dict]) -> dict:
    """Share of better-than pairs whose better answer scores strictly higher, and the mean score margin."""
    ps = pairs(rankings)
    if not ps:
        return {"pairs": 0, "accuracy": None, "mean_margin": None}
    chosen = scorer.score([p.question for p in ps], [p.chosen for p in ps])
    rejected = scorer.score([p.question for p in ps], [p.rejected for p in ps])
    margins = [c - r for c, r in zip(chosen, rejected)]
    return {"pairs": len(ps), "accuracy": sum(m > 0 for m in margins) / len(ps),
            "mean_margin": sum(margins) / len(margins)}


# ---------------------------------------------------------------- training
_RM_FIX = "pass --out a new folder (or one an earlier `grpokit rm train` wrote: its model is replaced)"


def _pair_dataset(tokenizer, rankings: list[dict], max_length: int):
    from datasets import Dataset

    # Pre-tokenised (chosen_ids / rejected_ids): RewardTrainer then uses exactly the ids the scorer will see.
    return Dataset.from_list([{"chosen_ids": rm_input_ids(tokenizer, p.question, p.chosen, max_length),
                               "rejected_ids": rm_input_ids(tokenizer, p.question, p.rejected, max_length)}
                              for p in pairs(rankings)])


@command()
def train_reward_model(rankings_path: str, base: str, out: str, *, eval_fraction: float = 0.2, seed: int = 0,
                       epochs: float = 3.0, max_steps: int = -1, learning_rate: float = 2e-5, batch_size: int = 8,
                       max_length: int = DEFAULT_MAX_LENGTH, log=print) -> dict:
    """Train a reward model on a ranking file; returns (and writes to OUT/rm.json) its record."""
    rankings_path = resolve_data_path(rankings_path, Path.cwd())  # builtin:preference/rankings.jsonl works too
    reading(rankings_path, base)
    out_dir = Path(out)
    refuse_claim(out_dir, "rm", {RM_FILE: "file"}, _RM_FIX)  # a folder by its record only: an rm.json proves nothing
    created = not out_dir.exists()
    make_folder(out_dir)
    try:
        with FolderLock(out_dir, "rm train"):  # one rm train or rm eval at a time in a reward model's folder
            return _train(rankings_path, base, out_dir, eval_fraction, seed, epochs, max_steps, learning_rate,
                          batch_size, max_length, log)
    except BaseException:
        if created and not any(out_dir.iterdir()):
            remove_made(out_dir)
        raise


def _train(rankings_path, base: str, out_dir: Path, eval_fraction: float, seed: int, epochs: float, max_steps: int,
           learning_rate: float, batch_size: int, max_length: int, log) -> dict:
    import torch
    from transformers import AutoModelForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    from grpokit import models

    rankings = read_rankings(rankings_path)
    train_rows, held = split_prompts(rankings, eval_fraction, seed)
    base_path = models.resolve_model_path(base)
    tokenizer = models.load_tokenizer(base_path)
    try:
        torch.manual_seed(seed)  # the new score head is random: seeded, two runs agree
        model = AutoModelForSequenceClassification.from_pretrained(base_path, num_labels=1, dtype=torch.float32)
    except OSError as e:
        raise GrpokitError([Problem("--base", f"cannot load {base!r}: {str(e).splitlines()[0]}",
                                    "use 'default', a local model folder, or a hub id with network access")]) from None
    model.config.pad_token_id = tokenizer.pad_token_id
    on_gpu = torch.cuda.is_available()
    scratch = tempfile.TemporaryDirectory(prefix="grpokit-rm-")  # the trainer's folder: saves nothing, left nowhere
    args = RewardConfig(
        output_dir=scratch.name, num_train_epochs=epochs, max_steps=max_steps, learning_rate=learning_rate,
        per_device_train_batch_size=batch_size, logging_steps=1, save_strategy="no", report_to="none",
        disable_tqdm=True, seed=seed, use_cpu=not on_gpu, bf16=False, max_length=None, dataset_num_proc=None,
        lr_scheduler_type="linear",
        # TRL's default is on; a reward model here is small enough to need no memory saved, and recomputing its
        # activations cost a step several times over (docs/measurements.md "Reward model and preference GRPO")
        **hf_internals.checkpointing_kwargs(False),
    )
    n_train = len(pairs(train_rows))
    log(f"training a reward model on {base} from {n_train} pairs of {len(train_rows)} prompts "
        f"({len(pairs(held))} pairs of {len(held)} prompts held out)")
    t0 = time.time()
    trainer = RewardTrainer(model=model, args=args, train_dataset=_pair_dataset(tokenizer, train_rows, max_length),
                            processing_class=tokenizer)
    with scratch:
        trainer.train()
    train_acc = [x["accuracy"] for x in trainer.state.log_history if "accuracy" in x]
    trainer.model.config.pad_token_id = tokenizer.pad_token_id
    # beside --out, named by this process: a killed rm train's staging folder is swept by the next write there
    with staging_folder(out_dir) as staging:
        model_dir = Path(staging) / "model"
        trainer.model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        install(model_dir, out_dir, "rm", _RM_FIX, also={RM_FILE: "file", "eval": "dir"})  # each name claimed; an earlier model's files replaced
    info = {"base": base, "rankings": str(Path(rankings_path).resolve()), "max_length": max_length,
            "eval_fraction": eval_fraction, "seed": seed, "train_prompts": len(train_rows), "train_pairs": n_train,
            "heldout_prompts": [r["id"] for r in held], "heldout_pairs": len(pairs(held)),
            "steps": trainer.state.global_step, "seconds": round(time.time() - t0, 1),
            "train_accuracy_last_step": train_acc[-1] if train_acc else None}
    write_file(out_dir / RM_FILE, json.dumps(info, indent=2), within=out_dir)  # before scoring: max_length
    scorer = RewardModelScorer(out_dir, device="cuda" if on_gpu else "cpu")
    scorer.model, scorer.tokenizer, scorer.max_length = trainer.model.eval(), tokenizer, max_length
    info["heldout"] = pairwise_accuracy(scorer, held) if held else {"pairs": 0, "accuracy": None, "mean_margin": None}
    info["train"] = pairwise_accuracy(scorer, train_rows)
    write_file(out_dir / RM_FILE, json.dumps(info, indent=2), within=out_dir)
    return info


@command()
def evaluate_reward_model(rm_dir: str, rankings_path: str) -> dict:
    """Pairwise accuracy of a trained reward model on a ranking file; written to RM_DIR/eval/<stem>.json."""
    info = read_rm_info(rm_dir)
    refuse_unproven(rm_dir, ("rm",), "retrain it with `grpokit rm train RANKINGS --out NEW_FOLDER` (a reward model "
                    "folder from a grpokit before records has no record to prove it)")
    with FolderLock(Path(rm_dir), "rm eval"):  # not while an rm train replaces the model it would load
        return _evaluate(rm_dir, rankings_path, info)


def _evaluate(rm_dir: str, rankings_path: str, info: dict) -> dict:
    from grpokit.data import resolve_data_path

    rankings_path = resolve_data_path(rankings_path, Path.cwd())
    reading(rankings_path)
    rankings = read_rankings(rankings_path)
    scorer = RewardModelScorer(rm_dir)
    result = {"rankings": str(rankings_path), "prompts": len(rankings), **pairwise_accuracy(scorer, rankings)}
    held = set(info.get("heldout_prompts", []))
    if info.get("rankings") == str(Path(rankings_path).resolve()):  # the same file it trained on: only the held-out prompts measure generalisation
        result["heldout"] = pairwise_accuracy(scorer, [r for r in rankings if r["id"] in held])
    path = Path(rm_dir) / "eval" / f"{Path(rankings_path).stem}.json"
    write_file(path, json.dumps(result, indent=2), within=rm_dir)
    result["path"] = str(path)
    return result


def fmt_accuracy(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"
