"""Tool-hack audit: scripted episodes that try to raise a tool task's reward without doing the task.

    grpokit rewards audit recipes/smollm2-repofix.yaml      # a recipe with env: runs these cases

The cases are the episodes family's (`hacks` of its row in grpokit.families: the tools family's repofix and
calculator cases). Each is played against a fresh environment the way TRL plays a model's calls (the
environment's method is called with the arguments; an exception becomes an `{"error": ...}` tool result). The
episode's messages then go through the recipe's own rewards, weighted as in training. A sound reward scores
every hack no higher than the honest failure; a hack that scores more is a loophole.
"""
from __future__ import annotations

from dataclasses import dataclass

from grpokit.audit.rewards import TIE
from grpokit.data import load_train_rows
from grpokit.envs import get_env
from grpokit.families import HackCase, episodes_family
from grpokit.task import recipe_rewards


def play(env, row: dict, case: HackCase) -> list[dict]:
    """The episode's completion messages, built as TRL builds them from tool calls."""
    env.reset(**row)
    messages: list[dict] = []
    for name, args in case.calls:
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]})
        try:
            result = getattr(env, name)(**args)
        except Exception as e:  # noqa: BLE001 - what TRL does with a failing tool: the error goes back to the model
            result = {"error": str(e)}
        messages.append({"role": "tool", "name": name, "content": str(result)})
    messages.append({"role": "assistant", "content": case.final})
    return messages


def score(rewards, row: dict, messages: list[dict], env) -> float:
    total = 0.0
    for fn, weight in rewards:
        columns = {k: [v] for k, v in row.items() if k != "prompt"}
        (s,) = fn(prompts=[None], completions=[messages], environments=[env], **columns)
        total += 0.0 if s is None else weight * s
    return total


@dataclass
class ToolHackResult:
    case: str
    description: str
    row: int
    score: float
    honest: float

    @property
    def ok(self) -> bool:
        return self.score <= self.honest + TIE


def audit_tool_hacks(env_name: str, env_params: dict, rewards, rows: list[dict]) -> list[ToolHackResult]:
    """Every hack case of the episodes family on every row, scored by `rewards` ([(RewardFunction, weight)])."""
    spec, family = get_env(env_name), episodes_family()
    out = []
    for i, row in enumerate(rows):
        env = spec.factory(env_params)()
        cases = family.hacks(env_name, row, env) if family is not None and family.hacks is not None else None
        if cases is None:  # no case scripted for this environment
            continue
        honest, hacks = cases
        base = score(rewards, row, play(env, row, honest), env)
        for case in hacks:
            out.append(ToolHackResult(case.name, case.description, i, score(rewards, row, play(env, row, case), env),
                                      base))
    return out


def tool_audit_table(results: list[ToolHackResult]) -> str:
    bad = [r for r in results if not r.ok]
    lines = [f"tool-hack audit: {len(results)} case(s) played, {len(bad)} scored above an honest failure"]
    for r in results:
        lines.append(f"  {'LOOPHOLE' if not r.ok else 'ok':8}  row {r.row}  {r.case:22} {r.score:.3f} "
                     f"(honest failure {r.honest:.3f})  {r.description}")
    return "\n".join(lines)


def audit_recipe_tools(recipe, max_rows: int = 4) -> list[ToolHackResult]:
    rows = load_train_rows(recipe)[:max_rows]
    return audit_tool_hacks(recipe.env.name, recipe.env.params, recipe_rewards(recipe), rows)
