"""Glue between a recipe's `env:` section and TRL's GRPOTrainer (used by training, evaluation and export).

`tool_setup(recipe, tokenizer, rows)` gives the trainer arguments that
turn on TRL's tool-calling rollouts: `environment_factory` (one instance per
rollout, pooled and reset by TRL). It also makes the tokenizer able to render
and parse tool calls (`envs.chat.ensure_tool_template`); the trainer saves
that tokenizer with every checkpoint, so eval and export read the same
template. `tool_rows(rows)` prepares the dataset rows.
"""
from __future__ import annotations

import inspect

from grpokit.envs.chat import ensure_tool_template
from grpokit.envs.registry import get_env
from grpokit.envs.rows import prepare_rows


def tool_setup(recipe, tokenizer, rows: list[dict]) -> tuple[list[dict], dict]:
    """(dataset rows, extra GRPOTrainer kwargs); rows unchanged and {} for a recipe without `env:`."""
    if recipe.env is None:
        return rows, {}
    ensure_tool_template(tokenizer)
    return prepare_rows(rows), {"environment_factory": get_env(recipe.env.name).factory(recipe.env.params)}


def max_tool_calling_iterations(recipe) -> int | None:
    return recipe.env.max_tool_calling_iterations if recipe.env is not None else None


def training_tools(recipe) -> list[dict] | None:
    """The tool schemas training rendered into every prompt, None for a recipe without `env:`.

    TRL exposes an environment instance's public methods (sorted by name, `inspect.getmembers`) and
    transformers turns each into a schema with `get_json_schema` (its `return` type included): export
    renders the same list so the served prompt can be compared with the training one.
    """
    if recipe.env is None:
        return None
    from transformers.utils import get_json_schema

    spec = get_env(recipe.env.name)
    instance = spec.factory(recipe.env.params)()  # construction only: reset() (temp dirs, files) is not called
    return [get_json_schema(getattr(instance, name)) for name in spec.tool_names()]


def tool_schemas(env_cls: type) -> list[dict]:
    """The JSON schemas TRL renders for an environment's tools (transformers' get_json_schema)."""
    from transformers.utils import get_json_schema

    inst_methods = [getattr(env_cls, n) for n in sorted(vars(env_cls)) if not n.startswith("_")
                    and n not in ("reset", "get_reward") and inspect.isfunction(getattr(env_cls, n))]
    out = []
    for m in inst_methods:
        schema = get_json_schema(m)
        schema["function"].pop("return", None)  # rows carry what the model needs: name, description, parameters
        out.append(schema)
    return out
