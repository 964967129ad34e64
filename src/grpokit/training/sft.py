"""Supervised fine-tuning (TRL's SFTTrainer) on a recipe's rows: the control run for GRPO, and a polish after it.

    grpokit sft recipes/smollm2-arithmetic-sft.yaml [--output-dir runs/sft] [--init-from RUN_DIR|EXPORT_DIR]
    grpokit eval runs/smollm2-arithmetic-sft           # the same evaluation as a GRPO run
    grpokit compare runs/smollm2-arithmetic runs/smollm2-arithmetic-sft

The control experiment the articles describe: the same rows, the same prompt
template (PromptTemplate, so the prompt ids match GRPO's exactly), trained
to imitate a reference solution instead of being rewarded. Loss is on the
completion only (TRL's prompt-completion format). The recipe's `train:`
section gives the optimiser settings (learning_rate, max_steps or
num_train_epochs, batch size, save_steps, seed); GRPO-only keys
(num_generations, beta, ...) are ignored.

A recipe with `env:` (a tool task) trains on demonstrations instead: each row's `expected_calls` played on the
recipe's environment, then the answer line with the last tool result, rendered as GRPO's multi-turn rollout
renders the episode, with the loss on the model's turns only (`demonstration_dataset`, grpokit.envs.demonstrations):
the warm start a model too small to write a tool call needs before GRPO (docs/tools.md "An SFT warm start, then
GRPO"); its checkpoints carry the tool template, so `grpokit train --init-from` and `grpokit eval` read it.

The reference completion of any other row, in order:
- a `solution` or `completion` column, used as written;
- the worked solution the recipe's task family writes for its rows (`reference` of its row in
  grpokit.families): for math, a GSM8K answer (`reasoning ... #### 72`) becomes the reasoning (calculator
  annotations `<<48/2=24>>` removed) then the answer line `Final answer: 72`, a generated arithmetic row
  (kind/a/b/op) `a op b = answer` then the line; for json, the gold object in a ```json fence;
- otherwise the answer line alone (a recipe whose format reward asks for a
  reasoning line will score such a model low on format: add a `solution`).
The answer line uses the recipe's first answer marker (`markers` of a
built-in reward that reads answer lines: math_correctness, format), else `最终答案：` for plain_zh, `Final answer:`.

The run directory has the GRPO layout (config.yaml, run.json with
`kind: sft`, metrics.jsonl, checkpoints/checkpoint-N with the COMPLETE
marker), so `grpokit eval`, `report`, `export` and `--init-from` work on it.
Rows that share a prefix (a system prompt, the tools recipes' tool block) compute it once (train.shared_prefix,
grpokit.training.trainer.GrpokitSFTTrainer). Not covered: packing, multi-turn conversations as targets other than tool
demonstrations, resume.
"""
from __future__ import annotations

import json
from pathlib import Path

from datasets import Dataset
from transformers import TrainerCallback

from grpokit.envs import get_env, loads, training_tools
from grpokit.envs.chat import ensure_tool_template
from grpokit.envs.demonstrations import play_expected_calls, render_episode
from grpokit.errors import GrpokitError, Problem
from grpokit.families import family_of
from grpokit.recipe import Recipe
from grpokit.rewards import names_reading
from grpokit.rewards.math import score_math
from grpokit.run import RunDir, jsonable
from grpokit.run.writer import append_file
from grpokit.task import template_of
from grpokit.training.callbacks import CheckpointMarker
from grpokit.training.factory import sft_trainer
from grpokit.training.lifecycle import RunLife, TrainResult

SOLUTION_FIELDS = ("solution", "completion")


def answer_marker(recipe: Recipe) -> str:
    for r in recipe.rewards:
        if r.name in names_reading("answer_line") and r.params.get("markers"):
            return str(r.params["markers"][0]).strip()
    return "最终答案：" if recipe.data.template == "plain_zh" else "Final answer:"


def reference_completion(row: dict, marker: str, family=None) -> str:
    """The text SFT teaches for one row (see the module docstring for the order of sources); `family`: the recipe's
    task family (grpokit.families.family_of), whose `reference` gives its rows' worked solution."""
    for key in SOLUTION_FIELDS:
        if isinstance(row.get(key), str) and row[key].strip():
            return row[key].strip()
    written = family.reference(row, marker) if family is not None and family.reference is not None else None
    if written is not None:
        return written
    sep = "" if marker.endswith("：") else " "  # a full-width colon takes no space after it
    return f"{marker}{sep}{str(row['answer']).strip()}"


def sft_dataset(rows: list[dict], recipe: Recipe, tokenizer=None, notes: list[str] | None = None):
    """TRL prompt-completion rows: the GRPO prompt (same template) and the reference completion; for a recipe with
    `env:`, the tool demonstrations instead (`demonstration_dataset`, which needs the tokenizer)."""
    if recipe.env is not None:
        return demonstration_dataset(rows, recipe, tokenizer, notes if notes is not None else [])
    template = template_of(recipe)
    marker, family = answer_marker(recipe), family_of(recipe.rewards)
    kwargs = template.chat_template_kwargs()
    out = []
    for row in rows:
        text = reference_completion(row, marker, family)
        prompt = template.build(row["question"])
        item = {"prompt": prompt,
                "completion": [{"role": "assistant", "content": text}] if template.is_chat else text}
        if kwargs:
            item["chat_template_kwargs"] = kwargs  # TRL's SFT tokenizer reads this per example (enable_thinking)
        out.append(item)
    return Dataset.from_list(out)


def demonstration_dataset(rows: list[dict], recipe: Recipe, tokenizer, notes: list[str]):
    """Pre-tokenised SFT rows of a tool recipe (input_ids, completion_mask): each row's expected calls played on the
    recipe's environment, then the answer line with the last tool result, rendered as GRPO's rollout renders the
    episode, loss on the model's turns only (grpokit.envs.demonstrations). The tokenizer gets the tool template
    GRPO uses (grpokit.envs.chat), so the checkpoints carry it. A demonstration GRPO could not produce within
    train.max_prompt_length / max_completion_length is left out and counted in `notes`; most of them is refused."""
    return Dataset.from_list(_within_grpos_limits(_demonstrations(rows, recipe, tokenizer), recipe.train, notes))


def _demonstrations(rows: list[dict], recipe: Recipe, tokenizer) -> list[dict]:
    """Every row's episode rendered (input_ids, completion_mask), or every row that cannot be demonstrated refused."""
    ensure_tool_template(tokenizer)
    template, tools, marker = template_of(recipe), training_tools(recipe), answer_marker(recipe)
    factory = get_env(recipe.env.name).factory(recipe.env.params)
    out, problems = [], []
    for row in rows:
        where = f"{recipe.data.train} row {str(row['question'])[:48]!r}"
        if loads(row.get("expected_calls")) is None:
            problems.append(Problem(where, "has no expected_calls, so there is no episode to demonstrate",
                                    "give every SFT row its expected_calls (grpokit data generate calculator "
                                    "writes them), or train this environment with GRPO only"))
            continue
        episode = play_expected_calls(row, factory, where)
        final = f"{marker} {episode[-1]['content'] if episode else str(row['answer']).strip()}"
        if score_math(final, row["answer"]) != 1.0:
            problems.append(Problem(where, f"the environment's last result ({episode[-1]['content']}) is not the "
                                    f"row's answer ({row['answer']})", "correct the answer or the expected calls"))
            continue
        ids, mask = render_episode(tokenizer, template.build(row["question"]),
                                   [*episode, {"role": "assistant", "content": final}], tools,
                                   template.chat_template_kwargs())
        out.append({"input_ids": ids, "completion_mask": mask})
    if problems:
        raise GrpokitError(problems, title="rows that cannot be demonstrated")
    return out


def _within_grpos_limits(demos: list[dict], t, notes: list[str]) -> list[dict]:
    """The demonstrations GRPO could produce within t.max_prompt_length / max_completion_length (a tool episode's
    completion is the call, the tool's result and the answer). A longer one is cut before its answer line in GRPO
    and in evaluation alike: training on the few that fit taught a 64-token calculator recipe the call and not the
    answer (0% task success; docs/measurements.md "Tool calling: calculator task"), so most left out is refused."""
    lengths = [(d["completion_mask"].index(1), len(d["input_ids"]) - d["completion_mask"].index(1)) for d in demos]
    kept = [d for d, (p, c) in zip(demos, lengths)
            if not (t.max_prompt_length and p > t.max_prompt_length) and c <= t.max_completion_length]
    too_long = len(demos) - len(kept)
    if not too_long:
        return kept
    longest = (max(p for p, _ in lengths), max(c for _, c in lengths))
    need = f"train.max_completion_length >= {longest[1]}" + (
        f" and train.max_prompt_length >= {longest[0]}" if t.max_prompt_length and longest[0] > t.max_prompt_length
        else "")
    said = (f"{too_long} of {len(demos)} demonstration(s) are longer than GRPO's limits (train.max_prompt_length="
            f"{t.max_prompt_length}, max_completion_length={t.max_completion_length}; a tool episode's completion "
            "counts the call, the tool's result and the answer)")
    if 2 * too_long > len(demos):
        raise GrpokitError([Problem("train.max_completion_length", said, f"set {need} in the SFT recipe and the "
                                    "GRPO recipe it warms up (the longest demonstration)")])
    notes.append(f"left out {said}; {need} keeps them all")
    return kept


class SftLogger(TrainerCallback):
    """metrics.jsonl (the GRPO run's file and key names) and a progress line with the loss."""

    def __init__(self, run_dir: Path, print_line):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.print_line = print_line

    def on_log(self, args, state, control, logs=None, **kwargs):

        if not logs or "train_runtime" in logs:
            return

        with append_file(self.path) as f:  # never through a link
            f.write(json.dumps({"step": state.global_step, **{k: jsonable(v) for k, v in logs.items()}}) + "\n")
        acc = logs.get("mean_token_accuracy")
        self.print_line(f"step {state.global_step}/{state.max_steps} | loss {logs.get('loss', float('nan')):.4f}"
                        + (f" | token accuracy {acc:.3f}" if acc is not None else ""))


def train_sft(recipe: Recipe, *, run_dir: str | Path | None = None, overwrite: bool = False,
              init_from: dict | None = None, model=None, tokenizer=None, log=print, kind: str = "run") -> TrainResult:
    """SFT for a recipe into a run directory; returns a TrainResult (the summary written to run.json, the trained
    model, the run's folder). `kind`: what the folder's record says it is ("demo" for grpokit demo, as GRPO's train
    takes it).

    The run's life is GRPO's (grpokit.training.lifecycle): a taken folder is refused before anything loads, the
    folder is created once data and model have loaded, one writer holds the lock, a failure is recorded.
    """
    # ---------------------------------------------------------------- prepare: refused before anything loads
    with RunLife(recipe, run_dir, kind, overwrite=overwrite) as life:
        # ---------------------------------------------------------------- load: data, model, the SFT rows
        inputs = life.load(model, tokenizer)
        dataset = sft_dataset(inputs.train_rows, life.recipe, inputs.tokenizer, inputs.notes)

        # ---------------------------------------------------------------- open the run
        life.open(inputs, say=lambda n: log(f"note: {n}"))
        summary = {"kind": "sft", "run_dir": str(life.run.path), "model": life.recipe.model.name,
                   "train_rows": len(dataset), "eval_rows": len(inputs.eval_rows), "notes": inputs.notes,
                   "status": "running", "init_from": init_from}
        with life.record(summary) as record:
            trainer = sft_trainer(inputs.recipe, life.run, inputs.model, inputs.tokenizer, dataset,
                                  [SftLogger(life.run.path, log), CheckpointMarker(life.run)], log)
            record.begin(trainer)
            log(f"SFT of {life.recipe.model.name} on {len(dataset)} rows -> {life.run.path}")

            # ---------------------------------------------------------------- train
            trainer.train()
            _save_final(trainer, life.run)

        # ---------------------------------------------------------------- finish
        summary = record.end("completed")
    log(f"completed at step {summary['step']} in {summary['seconds']:.0f}s; last checkpoint: "
        f"{summary['last_checkpoint']}")
    log(f"next: grpokit eval {life.run.path}")
    return life.result(summary, trainer)


def _save_final(trainer, run: RunDir) -> None:
    """The final weights are a checkpoint too, whatever save_steps says."""
    step = trainer.state.global_step
    if step not in run.by_step():
        trainer.save_model(str(run.checkpoint_path(step)))
        run.mark_complete(step)
