"""Verifiable rewards. See `registry.py` for the interface and `families.py` for the list."""
from grpokit.rewards.registry import REGISTRY, RewardFunction, available, build_reward, completion_text, get_spec

__all__ = ["REGISTRY", "RewardFunction", "available", "build_reward", "completion_text", "get_spec"]
