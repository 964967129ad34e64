"""Verifiable rewards: pure scorers, looked up by name from one table (registry.BUILTIN).

    fn = build_reward("math_correctness", {"markers": ["Final answer:"]})

registry (the table, the TRL wrapper), parsing (answer lines, fences), one module per scorer (math, format,
length, code, json_schema, sql_exec, tools, learned, direct_answer), own (a recipe's own functions), worker (the killable
process that bounds what C code can stall: SQLite queries, regex-bearing schemas; sqlite_ro runs in it). Only the registry is
imported with the package: `grpokit rewards list` and recipe checks read the table without importing any
scorer (verl's lazy dispatch); the other names below load their module on first use (PEP 562).
"""
import importlib

from grpokit.rewards.registry import (
    BUILTIN,
    DEFAULT_REWARDS,
    LEARNED_REWARDS,
    ROLES,
    RewardFunction,
    RewardSpec,
    available,
    build_reward,
    completion_text,
    get_spec,
    names_reading,
    names_with_role,
)

# name -> the module that defines it, imported on first use
_LAZY = {
    "DEFAULT_MAX_LENGTH": "grpokit.rewards.learned",
    "read_rm_info": "grpokit.rewards.learned",
    "RewardModelScorer": "grpokit.rewards.learned",
    "RM_FILE": "grpokit.rewards.learned",
    "rm_input_ids": "grpokit.rewards.learned",
    "extract_final_answer": "grpokit.rewards.math",
    "parse_gold": "grpokit.rewards.math",
    "is_numeric_answer": "grpokit.rewards.math",
    "parse_number": "grpokit.rewards.math",
    "build_own": "grpokit.rewards.own",
    "builtin_of": "grpokit.rewards.own",
    "DEFAULT_ROLE": "grpokit.rewards.own",
    "is_own": "grpokit.rewards.own",
    "OwnRewardError": "grpokit.rewards.own",
    "reward_label": "grpokit.rewards.own",
    "schema_problem": "grpokit.rewards.json_schema",
    "reward_title": "grpokit.rewards.own",
    "required_columns": "grpokit.rewards.own",
    "signature_problems": "grpokit.rewards.own",
    "trial_problems": "grpokit.rewards.own",
    "TRL_ARGUMENTS": "grpokit.rewards.own",
    "check_math": "grpokit.rewards.math",
    "DEFAULT_MARKERS": "grpokit.rewards.parsing",
    "worked_example": "grpokit.rewards.parsing",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'grpokit.rewards' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = ["BUILTIN", "DEFAULT_MARKERS", "DEFAULT_MAX_LENGTH", "DEFAULT_REWARDS", "DEFAULT_ROLE", "LEARNED_REWARDS", "RM_FILE", "ROLES",
           "TRL_ARGUMENTS", "OwnRewardError", "RewardFunction", "RewardModelScorer", "RewardSpec", "available",
           "build_own", "build_reward", "builtin_of", "check_math", "completion_text", "extract_final_answer", "get_spec", "is_numeric_answer", "is_own",
           "names_reading", "names_with_role", "parse_gold", "parse_number", "read_rm_info", "required_columns",
           "reward_label", "reward_title", "rm_input_ids", "schema_problem", "signature_problems", "trial_problems",
           "worked_example"]
