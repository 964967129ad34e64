"""Which audit a recipe gets, and its findings as `grpokit train` prints them: the glue above the audits.

    result = audit_recipe(recipe)     # answer-line tricks (grpokit.audit.rewards) or the task's own (by_task)
    audit_warnings(recipe)            # one line per finding, for `grpokit train`'s pre-flight

`audit_recipe` picks the tricks that fit the task (grpokit.audit.by_task): the task family's own (code, schema
and query tricks for `code_tests`, `json_schema` and `sql_exec` recipes: grpokit.families), else answer-line
tricks; tool recipes get the tool hacks (grpokit.audit.tools). Not covered: the tricks themselves.
"""
from __future__ import annotations

from typing import Callable

from grpokit.audit.by_task import audit_family, audit_progress, audit_task, no_tricks
from grpokit.audit.rewards import DEFAULT_AUDIT_ROWS, NoTricks, answer_form, audit_rewards
from grpokit.audit.tools import audit_recipe_tools
from grpokit.families import ANSWER_LINES
from grpokit.rewards import LEARNED_REWARDS
from grpokit.task import Task, recipe_rewards


def audit_recipe(recipe, max_rows: int = DEFAULT_AUDIT_ROWS, log: Callable[[str], None] | None = None):
    """The audit whose tricks fit the task (grpokit.audit.by_task): answer-line tricks here, code, JSON and SQL
    tricks there. `log` gets a start line; a status line follows every 30 s where no terminal shows the work."""
    task = Task.of(recipe)
    family = audit_family(task)
    if family is not None:
        return audit_task(task, family, max_rows, log)
    rewards = recipe_rewards(task)
    form = task.family.audit if task.family is not None and task.family.audit is not None else ANSWER_LINES
    rows = task.rows()[0]
    form = answer_form(rows, form)  # a task with text answers gets the text-answer tricks (grpokit.audit.text)
    with audit_progress(f"{form.what} on up to {max_rows} row(s), scored by "
                        f"{', '.join(fn.name for fn, _ in rewards)}", log):
        return audit_rewards(rewards, rows, max_rows, prompt_of=task.prompt_of, form=form)


def audit_warnings(recipe, max_rows: int = DEFAULT_AUDIT_ROWS, log: Callable[[str], None] | None = None) -> list[str]:
    """One line per loophole, for `grpokit train`'s pre-flight; empty when the reward holds."""
    learned = [r.name for r in recipe.rewards if r.name in LEARNED_REWARDS]
    warn = [f"reward audit: {n} is a learned reward and can be gamed (the policy finds what the reward model "
            "over-rewards: length, flattery, a phrase); keep rule rewards alongside it, read samples.jsonl, and "
            "re-check with `grpokit rm eval` on fresh rankings" for n in learned]
    if learned:  # the tricks would be scored by the reward model: a forward pass per trick, and no fixed verdict
        return warn
    if getattr(recipe, "env", None) is not None:  # tool tasks: scripted tool hacks (audit/tools.py)
        return [f"tool-hack audit: {r.case!r} ({r.description}) scores {r.score:.2f}, an honest failure "
                f"{r.honest:.2f}; run `grpokit rewards audit`" for r in audit_recipe_tools(recipe) if not r.ok]
    task = Task.of(recipe)
    skipped = no_tricks(task)  # each task gets the tricks that fit it: answer lines, code, JSON, SQL
    if skipped:
        return [f"reward audit skipped: {skipped}"]
    try:
        result = audit_recipe(task, max_rows, log)
    except NoTricks as e:  # the same words `grpokit rewards audit` says, and what to check by hand
        return [f"reward audit: {e}", f"  {e.fix}"]
    except ValueError as e:
        return [f"reward audit skipped: {e}"]
    if result.blind:  # no trick fits a reward that pays no honest right answer: the audit's table says so
        return [f"reward audit: {line}" if not line.startswith(" ") else line
                for line in result.table().splitlines()[len(result.head()):]]
    # The same findings `grpokit rewards audit` prints: reward errors (counted, the first traceback), and per
    # flagged trick the reward that pays for it, by how much, and the fix.
    out = [f"reward audit: {line}" if not line.startswith(" ") else line
           for line in result.findings() + result.strict_notes()]
    if out:
        out.append("reward audit: `grpokit rewards audit RECIPE` prints the table")
    if result.right_not_preferred:
        out.append(
            f"reward audit: an honest right answer does not beat an honest wrong one on "
            f"{result.right_not_preferred}/{result.rows} rows; check the answer markers"
        )
    return out
