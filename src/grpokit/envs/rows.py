"""Tool task rows: what a row carries and the rules `grpokit data check` applies to it.

A tool row is an ordinary row (question, answer) plus:

- `tools`: the tool definitions, in the format chat templates take as `tools=`
  (`{"type": "function", "function": {"name", "description", "parameters"}}`,
  `parameters` a JSON schema of type object). Every row carries them (the
  Qwen3 GRPO article (4B/14B, TRL): the full tool list in every row);
- `expected_calls` (optional): `[{"name", "arguments"}]`, the calls a right
  episode makes (`[]`: rightly calls no tool); read by `tool_choice` and the
  dense shaping reward;
- `goal`: the checkable goal, `{"kind": "final_answer"}` (the answer line
  matches `answer`, checked by the math verifier) or `{"kind": "hidden_tests",
  "repo": NAME}` (the share of the hidden tests of a bundled repository that
  pass after the episode);
- `env` (optional): the environment the row is written for; its tools must
  then be exactly the environment's tools.

Rules: schemas valid (jsonschema's meta-schema check), tool names unique and
identifiers, expected calls name a defined tool and their arguments validate
against its schema, goal kind known, a hidden_tests repo bundled.
`prepare_rows` turns the nested columns into JSON strings for the training
dataset (Arrow would merge differently shaped schemas into one struct type).
"""
from __future__ import annotations

import json

from grpokit.datasets import BUILTIN_DATA
from grpokit.errors import Problem

TOOL_COLUMNS = ("tools", "expected_calls", "goal")
GOAL_KINDS = ("final_answer", "hidden_tests")
REPOS_DIR = BUILTIN_DATA / "tools" / "repos"


def is_tool_row(obj) -> bool:
    return isinstance(obj, dict) and "tools" in obj


def loads(value):
    """A tool column as a Python value (the training dataset stores them as JSON strings)."""
    return json.loads(value) if isinstance(value, str) else value


def tools_by_name(tools) -> dict[str, dict]:
    return {t["function"]["name"]: t["function"] for t in loads(tools) or []
            if isinstance(t, dict) and isinstance(t.get("function"), dict) and "name" in t["function"]}


def _tool_problems(tools, where: str) -> list[Problem]:
    from jsonschema import Draft202012Validator, SchemaError

    if not isinstance(tools, list):
        return [Problem(f"{where} tools", f"tools must be a list of tool definitions, got {type(tools).__name__}",
                        'write [{"type": "function", "function": {"name": ..., "parameters": {...}}}]')]
    out, seen = [], set()
    for i, t in enumerate(tools):
        w = f"{where} tools[{i}]"
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            out.append(Problem(w, "not a function tool definition",
                               'write {"type": "function", "function": {"name", "description", "parameters"}}'))
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            out.append(Problem(w, f"tool name {name!r} is not an identifier", "name the tool like a Python function"))
        elif name in seen:
            out.append(Problem(w, f"tool {name!r} defined twice", "keep one definition per tool"))
        seen.add(name)
        params = fn.get("parameters", {"type": "object", "properties": {}})
        try:
            Draft202012Validator.check_schema(params)
        except SchemaError as e:
            out.append(Problem(f"{w} parameters", f"not a valid JSON schema: {e.message}",
                               "fix the schema (https://json-schema.org); an object with properties"))
            continue
        if params.get("type") != "object":
            out.append(Problem(f"{w} parameters", "parameters must be a JSON schema of type object",
                               'set "type": "object" with the arguments under "properties"'))
    return out


def _call_problems(calls, tools: dict[str, dict], where: str) -> list[Problem]:
    from jsonschema import Draft202012Validator

    if not isinstance(calls, list):
        return [Problem(f"{where} expected_calls", "expected_calls must be a list of {name, arguments}",
                        'write [{"name": "add", "arguments": {"a": 1, "b": 2}}], or [] for no call')]
    out = []
    for i, c in enumerate(calls):
        w = f"{where} expected_calls[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            out.append(Problem(w, "a call needs a name", 'write {"name": ..., "arguments": {...}}'))
            continue
        if c["name"] not in tools:
            out.append(Problem(w, f"calls {c['name']!r}, which the row's tools do not define",
                               f"use one of: {', '.join(sorted(tools)) or '(no tools)'}"))
            continue
        schema = tools[c["name"]].get("parameters", {"type": "object"})
        errors = sorted(Draft202012Validator(schema).iter_errors(c.get("arguments", {})), key=str)
        if errors:
            out.append(Problem(f"{w} arguments", f"not valid for {c['name']}: {errors[0].message}",
                               "make the arguments match the tool's parameters schema"))
    return out


def _goal_problems(goal, where: str) -> list[Problem]:
    if not isinstance(goal, dict) or goal.get("kind") not in GOAL_KINDS:
        return [Problem(f"{where} goal", f"goal must be an object with kind one of {', '.join(GOAL_KINDS)}",
                        'write {"kind": "final_answer"} or {"kind": "hidden_tests", "repo": NAME}')]
    if goal["kind"] == "hidden_tests":
        repo = goal.get("repo")
        if not isinstance(repo, str) or not (REPOS_DIR / repo / "hidden.json").is_file():
            have = sorted(p.name for p in REPOS_DIR.iterdir()) if REPOS_DIR.is_dir() else []
            return [Problem(f"{where} goal repo", f"no bundled repository {repo!r}", f"use one of: {', '.join(have)}")]
    return []


def check_tool_row(obj: dict, where: str) -> list[Problem]:
    """Every problem of one tool row (empty list: usable)."""
    tools = obj.get("tools")
    out = _tool_problems(tools, where)
    if out:
        return out
    defined = tools_by_name(tools)
    if "expected_calls" in obj and obj["expected_calls"] is not None:
        out += _call_problems(obj["expected_calls"], defined, where)
    out += _goal_problems(obj.get("goal"), where)
    env = obj.get("env")
    if env is not None:
        from grpokit.envs.registry import ENVIRONMENTS

        if env not in ENVIRONMENTS:
            out.append(Problem(f"{where} env", f"unknown environment {env!r}", f"use one of: {', '.join(ENVIRONMENTS)}"))
        else:
            want = ENVIRONMENTS[env].tool_names()
            if sorted(defined) != want:
                out.append(Problem(f"{where} tools", f"the row defines {sorted(defined)}, environment {env!r} "
                                   f"has {want}", "copy the tool definitions of the environment (see the "
                                   "bundled rows)"))
    return out


def prepare_rows(rows: list[dict]) -> list[dict]:
    """Rows for the training dataset: tool columns as JSON strings (see the module docstring)."""
    return [{**r, **{k: json.dumps(r[k]) for k in TOOL_COLUMNS if k in r and not isinstance(r[k], str)}}
            for r in rows]
