"""`grpokit demo --task preference`: a reward model from the bundled rankings, then GRPO against it, judged on held-out
prompts neither ever saw, by the reward model and by a rule it did not produce.

    grpokit demo --task preference                          # runs/demo-preference, its reward model beside it
    grpokit demo --task preference --set train.seed=1 --output-dir runs/demo-preference-s1

The articles' preference family, in the order a user runs it by hand (docs/workflows.md "Preference tasks: a
reward model trained from human rankings"):

1. `grpokit rm train builtin:preference/rankings.jsonl` (grpokit.rm): SmolLM2-135M with a score head on the 240
   better-than pairs of 40 ranked prompts (a fifth of the prompts held out for its pairwise accuracy), into
   `OUTPUT_DIR-rm` (a folder of its own: a run directory holds only what training writes);
2. the base model answers the 32 held-out prompts of `builtin:preference/heldout.jsonl` (greedy, the recipe's
   template); `recipes/smollm2-preference.yaml` trains GRPO on the ranked prompts with the reward model's score;
3. the trained model answers them again, and the table compares: the reward model's mean score, the trained
   model's win rate against the base (the two answers to each prompt compared by the reward model, ties half:
   grpokit.evaluation.preference), the rule `direct_answer` (the rankings' preference written as a plain function,
   weight 0 in the recipe: logged, never trained on), the mean length and the cut-off share. A learned score that
   rises while the rule stays flat is reward hacking, and the demo says so.

Everything lands where the separate commands put it: demo.json, eval/results.json (steps 0 and the last, with the
win rate; `grpokit eval RUN_DIR` adds every checkpoint), the report, and the reward model's rm.json. Its
figures on the project's 2-core CPU: docs/measurements.md "Preference: a reward model, then GRPO against it".
`--output-dir` is claimed as for every demo (grpokit.demo.common.claim_run_dir); the reward model folder is
replaced only when it is a reward model folder (grpokit.rm.train).
"""
from __future__ import annotations

import time
from pathlib import Path

from grpokit.demo.common import RECIPES, claim_run_dir, finish, results_table, stopped
from grpokit.errors import GrpokitError, Problem
from grpokit.evaluation import pct
from grpokit.run import run_end

DEMO_RECIPE = RECIPES / "smollm2-preference.yaml"
RANKINGS = "builtin:preference/rankings.jsonl"
# The reward model's training (grpokit rm train's options). Measured on the 2-core CPU: docs/measurements.md
# "Preference: a reward model, then GRPO against it".
RM_OPTIONS = {"max_steps": 12, "learning_rate": 3e-5, "batch_size": 8, "eval_fraction": 0.2}


def rm_dir_of(output_dir: str | Path) -> Path:
    """Where the demo's reward model goes: beside the run directory, `runs/demo-preference-rm`."""
    path = Path(output_dir)
    return path.with_name(path.name + "-rm")


def run(output_dir: str, overrides: list[str] | None = None, recipe_path: Path | None = None,
        callbacks: list | None = None, rm_base: str = "default", rankings: str = RANKINGS,
        rm_options: dict | None = None) -> dict:
    """The demo (module docstring). `callbacks`: further TrainerCallbacks for its training; `rm_base`, `rankings`,
    `rm_options`: the reward model's base, ranking file and `train_reward_model` options (tests use tiny ones)."""
    from grpokit import models
    from grpokit.console import console, print_table
    from grpokit.data import load_datasets, resolve_data_path
    from grpokit.evaluation import evaluate
    from grpokit.recipe import load_recipe
    from grpokit.rm import fmt_accuracy, train_reward_model
    from grpokit.task import Task
    from grpokit.training import train

    path = Path(recipe_path or DEMO_RECIPE)
    if not path.is_file():
        raise GrpokitError([Problem(str(path), "the demo recipe is missing",
                                    "reinstall grpokit (its package carries the recipes: grpokit/recipes/)")])
    # The schema and --set first, before minutes of reward model training; what training builds (the reward
    # model reward reads its folder) is checked once that folder exists.
    plan = load_recipe(path, overrides, use="plan")
    slot = _reward_model_slot(plan, path)
    run_dir = claim_run_dir(output_dir, keep=[str(path), *_data_files(plan), resolve_data_path(rankings, Path.cwd())])
    rm_dir = rm_dir_of(run_dir).resolve()
    t0 = time.time()
    console.print(f"training the reward model on the rankings of {rankings} into {rm_dir} ...")
    rm = train_reward_model(rankings, rm_base, str(rm_dir), seed=plan.train.seed, log=console.print,
                            **{**RM_OPTIONS, **(rm_options or {})})
    console.print(f"reward model: held-out pairwise accuracy {fmt_accuracy(rm['heldout']['accuracy'])} on "
                  f"{rm['heldout']['pairs']} pairs of {len(rm['heldout_prompts'])} prompts (chance 50%), "
                  f"{rm['seconds']:.0f}s")
    recipe = load_recipe(path, [*(overrides or []), f"rewards.{slot}.params.path={rm_dir}"])
    task = Task.from_recipe(recipe)  # one scorer for both evaluations: an unchanged answer scores the same
    tokenizer, model = models.load_recipe_tokenizer(recipe.model), models.load_recipe_model(recipe.model)
    _, eval_rows, _ = load_datasets(recipe)
    console.print(f"evaluating the base model on {len(eval_rows)} held-out prompts ...")
    before = evaluate(model, tokenizer, task, eval_rows, n_samples=len(eval_rows))  # every answer into demo.json
    grpo = train(recipe, run_dir=run_dir, overwrite=True, model=model, tokenizer=tokenizer, callbacks=callbacks,
                 kind="demo")
    summary, trained = grpo.summary, grpo.model
    end = run_end(summary, recipe.train.max_steps)
    result = {"reward_model": {"path": str(rm_dir), **rm}, "before": before.as_dict(), "after": None,
              "train": summary, "run_end": end}
    if summary.get("status") == "interrupted":  # Ctrl-C / SIGTERM: the user asked to stop, not to evaluate
        return stopped(run_dir, result, end, t0)
    if end["note"]:
        console.print(f"[yellow]note:[/] {end['note']}")
    console.print("evaluating the trained model ...")
    after = evaluate(trained, tokenizer, task, eval_rows, n_samples=len(eval_rows))
    judged = judge(task, before, after)
    print_table(results_table(table_rows(task, before, after, judged["win_rates"]), end=end))
    console.print(judged["verdict"])
    for b, a in list(zip(before.samples, after.samples))[:2]:
        console.print(f"[dim]Q:[/] {b['question']}\n  [dim]base:[/]    {b['completion']!r}\n"
                      f"  [dim]trained:[/] {a['completion']!r}")
    result.update(after=after.as_dict(), **judged)
    return finish(run_dir, result, recipe, eval_rows, before, after, t0, also=f"; reward model: {rm_dir}")


def _reward_model_slot(recipe, path: Path) -> int:
    slots = [i for i, r in enumerate(recipe.rewards) if r.name == "reward_model"]
    if not slots:
        raise GrpokitError([Problem(f"{path} rewards", "the preference demo needs a reward_model reward",
                                    "add {name: reward_model, params: {path: runs/rm-style}} (the demo sets the path)")])
    return slots[0]


def _data_files(recipe) -> list[str]:
    return [recipe.resolve_data_path(p) for p in (recipe.data.train, recipe.data.eval) if p]


def judge(task, before, after) -> dict:
    """The win rate of `after` against `before` by each learned reward, and whether the rule (the task's format
    reward, direct_answer) moved the same way: {"win_rates", "rule_agrees", "verdict"}."""
    from grpokit.evaluation.preference import win_rate

    wins = {n: win_rate(after.preference_scores[n], before.preference_scores[n]) for n in after.preference_scores}
    rule = task.format
    won = [w["win_rate"] for w in wins.values() if w]
    if rule is None or not won or before.format_rate is None or after.format_rate is None:
        return {"win_rates": wins, "rule_agrees": None,
                "verdict": "no rule reward (format role) to check the learned score against"}
    up, rule_up = min(won) > 0.5, after.format_rate > before.format_rate
    moved = f"{rule.name} {pct(before.format_rate)} -> {pct(after.format_rate)}"
    if up and rule_up:
        verdict = f"[green]the rule moved the same way as the learned score[/] ({moved})"
    elif up:
        verdict = (f"[yellow]the learned score rose but the rule did not ({moved}): the policy may be gaming the "
                   "reward model; read the samples (samples.jsonl) and rank their answers into the rankings[/]")
    else:
        verdict = f"the trained model does not beat the base by the reward model ({moved})"
    return {"win_rates": wins, "rule_agrees": up == rule_up, "verdict": verdict}


def table_rows(task, before, after, wins: dict) -> list[tuple[str, str, str]]:
    """The demo's table rows: per learned reward its mean score and win rate, the rule's pass rate, length."""
    rows = []
    for n, w in wins.items():
        rows.append((f"{n} score (mean)", _num(before.reward_means.get(n)), _num(after.reward_means.get(n))))
        rows.append((f"win rate against the base ({n})", "-",
                     "-" if not w else f"{pct(w['win_rate'])} ({w['wins']}/{w['ties']}/{w['losses']})"))
    if task.format is not None:
        rows.append((f"rule: {task.format.name} pass rate", pct(before.format_rate), pct(after.format_rate)))
    return rows + [("mean completion length (tokens)", f"{before.mean_length:.1f}", f"{after.mean_length:.1f}"),
                   ("cut off at max length", pct(before.truncated_rate), pct(after.truncated_rate))]


def _num(x) -> str:
    return "-" if x is None else f"{x:.3f}"
