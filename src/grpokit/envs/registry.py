"""Tool-calling environments for GRPO on TRL 1.16's own multi-turn rollouts.

A recipe with an `env:` section trains through `GRPOTrainer(environment_factory=...)`:
TRL makes one environment instance per rollout, calls `reset(**row)`, exposes
the instance's public methods as tools (their type hints and Google-style
docstrings become the JSON schemas rendered into the prompt), runs the
model's tool calls, masks tool-result tokens out of the loss and logs
`tools/call_frequency` and `tools/failure_frequency`. grpokit adds the
environments, the tool rows (`envs.rows`), the rewards with roles
(`rewards.tools`), a tool chat template for models without one
(`envs.chat`), the tool-hack audit (`rewards.audit_tools`) and evaluation
(`envs.evaluate`). There is no rollout loop in grpokit.

This module holds `ENVIRONMENTS`, the one table of shipped environments.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from functools import partial
from typing import Callable


@dataclass(frozen=True)
class EnvSpec:
    name: str
    cls_path: str  # "module:Class", imported on use so `grpokit data check` stays light
    description: str
    dataset: str  # builtin:<path> of the bundled rows

    def cls(self) -> type:
        module, name = self.cls_path.split(":")
        return getattr(importlib.import_module(module), name)

    def tool_names(self) -> list[str]:
        """The tools an instance exposes to TRL: public methods other than reset/get_reward (TRL's rule)."""
        return sorted(n for n, _ in inspect.getmembers(self.cls(), predicate=inspect.isfunction)
                      if n not in ("reset", "get_reward") and not n.startswith("_"))

    def factory(self, params: dict | None = None) -> Callable:
        return partial(self.cls(), **(params or {}))


ENVIRONMENTS: dict[str, EnvSpec] = {
    "calculator": EnvSpec("calculator", "grpokit.envs.calculator:CalculatorEnv",
                          "add/subtract/multiply/divide for arithmetic word problems; answer line `Final answer: N`",
                          "builtin:tools/calculator.jsonl"),
    "repofix": EnvSpec("repofix", "grpokit.envs.repofix:RepoFixEnv",
                       "a small Python project in a fresh temp dir per episode; list_files, read_file, write_file, "
                       "run_tests; reward = share of the hidden tests passing (sandboxed)",
                       "builtin:tools/repofix.jsonl"),
}
ENV_NAMES = tuple(ENVIRONMENTS)


def get_env(name: str) -> EnvSpec:
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; valid: {', '.join(ENV_NAMES)}") from None
