"""Tool-calling environments and tool rows for TRL's multi-turn rollouts (see envs.registry).
"""
from grpokit.envs.registry import ENV_NAMES, ENVIRONMENTS, get_env
from grpokit.envs.repofix import load_repo
from grpokit.envs.rows import check_tool_row, is_tool_row, loads, tools_by_name
from grpokit.envs.training import max_tool_calling_iterations, tool_schemas, tool_setup, training_tools

__all__ = ["ENV_NAMES", "ENVIRONMENTS", "check_tool_row", "get_env", "is_tool_row", "load_repo", "loads",
           "max_tool_calling_iterations", "tool_schemas", "tool_setup", "tools_by_name", "training_tools"]
