"""The reward audit: before training, try to game the recipe's rewards and report what scores too well.

    result = audit_recipe(recipe)       # the tricks that fit the task: answer lines, code, JSON, SQL
    audit_warnings(recipe)              # one line per loophole, for `grpokit train`

rewards (the audit of answer-line rewards), tricks (the answer-line tricks, built from each row), by_task (the
tricks of the task's family: code, JSON and SQL, declared in grpokit.families), tools (scripted tool hacks for
tool tasks). A stage of its own: the scorers in grpokit.rewards stay pure.
"""
from grpokit.audit.by_task import audit_progress
from grpokit.audit.recipe import audit_recipe, audit_warnings
from grpokit.audit.tools import audit_recipe_tools, tool_audit_table

__all__ = ["audit_progress", "audit_recipe", "audit_recipe_tools", "audit_warnings", "tool_audit_table"]
