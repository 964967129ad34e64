"""Verifiable rewards. See `registry.py` for the interface and the table of built-in rewards (`BUILTIN`)."""
from grpokit.rewards.registry import BUILTIN, ROLES, RewardFunction, available, build_reward, completion_text, get_spec

__all__ = ["BUILTIN", "ROLES", "RewardFunction", "available", "build_reward", "completion_text", "get_spec"]
