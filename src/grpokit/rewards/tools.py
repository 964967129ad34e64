"""Rewards for tool-calling episodes, one per component (the Qwen3 GRPO article (4B/14B, TRL): score
"called the right tool", "arguments well-formed" and "final result achieved" separately).

    rewards: [{name: tool_choice, weight: 0.5}, {name: tool_args, weight: 0.25}, {name: task_success, weight: 1.0}]

Each is an ordinary TRL reward function, so TRL logs `rewards/<name>/mean`
per component. They read the episode as TRL 1.16 passes it: `completions[i]`
is the message list of rollout i (assistant messages with `tool_calls`, the
`tool` results, the final assistant answer), and `environments[i]` the
rollout's environment instance.

- `tool_choice`: Jaccard overlap of the tool names called and the row's
  `expected_calls` names (1.0: exactly the right tools; rightly calling none
  when `expected_calls` is `[]` is 1.0); None for rows without expected calls.
- `tool_args`: share of the calls whose arguments validate against the called
  tool's JSON schema in the row's `tools` (a call to an undefined tool, or
  with an argument the schema does not name, is invalid); None for an episode
  with no call (nothing to judge).
- `task_success`: the goal check. `final_answer`: the last assistant message's
  answer line against `answer`, by the math verifier the arithmetic task uses;
  `hidden_tests`: the environment's share of hidden tests passing.
- `tool_shaping` (dense, optional): `per_call` for each call that matches an
  expected call (name and arguments), up to the number expected; the sparse
  `task_success` stays the goal, this only makes early steps carry signal.

Rows of the reward table (rewards/registry.py BUILTIN) with their roles:
tool_choice and tool_args `format` (they judge the form of the calls),
task_success `correctness` (metric "task success"), tool_shaping `shaping`.
Their scorers set `takes_messages`, which makes the registry hand over the
message lists and each row's environment instead of flattened text.
"""
from __future__ import annotations

# envs.rows itself, not the envs package: a scorer stays free of the TRL tool-template code behind it
# (the import-linter contract on rule scorers)
from grpokit.envs.rows import loads, tools_by_name
from grpokit.rewards.math import score_math
from grpokit.rewards.registry import describe


def tool_calls(messages) -> list[tuple[str, object]]:
    """(name, arguments) of every tool call in an episode, in order."""
    if isinstance(messages, str):
        return []
    out = []
    for m in messages:
        if isinstance(m, dict) and m.get("role", "assistant") == "assistant":
            for c in m.get("tool_calls") or []:
                fn = c.get("function", c) if isinstance(c, dict) else {}
                out.append((fn.get("name"), fn.get("arguments")))
    return out


def final_text(messages) -> str:
    """The last assistant message's text (the episode's answer)."""
    if isinstance(messages, str):
        return messages
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role", "assistant") == "assistant":
            return m.get("content") or ""
    return ""


def args_valid(name, arguments, tools: dict[str, dict]) -> bool:
    from jsonschema import Draft202012Validator

    if name not in tools or not isinstance(arguments, dict):
        return False
    # An argument the schema does not name is an error to the Python tool (TypeError), so it is invalid here too,
    # unless the schema itself allows extra properties.
    schema = {"additionalProperties": False, **tools[name].get("parameters", {"type": "object"})}
    return Draft202012Validator(schema).is_valid(arguments)


def _messages_reward(fn):
    fn.takes_messages = True  # registry: pass the message lists and environments, not flattened text
    return fn


@describe(description="Called the right tool(s), or rightly none: Jaccard overlap of the tool names "
          "called and expected_calls.", columns=("expected_calls",))
def get_tool_choice_reward():
    r"""The `tool_choice` scorer: the overlap of the tools an episode called with the row's expected ones.

    Example (an episode is TRL's message list of one rollout):

    >>> from grpokit.rewards.tools import get_tool_choice_reward
    >>> called_add = [{"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2}}}]},
    ...               {"role": "tool", "content": "5"}, {"role": "assistant", "content": "Final answer: 5"}]
    >>> answered = [{"role": "assistant", "content": "Final answer: 5"}]
    >>> get_tool_choice_reward()([called_add, answered], expected_calls=[[{"name": "add"}], [{"name": "add"}]])
    [1.0, 0.0]
    """
    @_messages_reward
    def score(completions, expected_calls=None, **_):
        out = []
        for i, msgs in enumerate(completions):
            expected = loads(expected_calls[i]) if expected_calls else None
            if expected is None:
                out.append(None)
                continue
            want = {c["name"] for c in expected}
            got = {n for n, _ in tool_calls(msgs)}
            out.append(1.0 if not want and not got else len(want & got) / len(want | got))
        return out
    return score


@describe(description="Share of tool calls whose arguments validate against the tool's JSON schema "
          "(row column tools); None when no tool was called.", columns=("tools",))
def get_tool_args_reward():
    r"""The `tool_args` scorer: the share of an episode's calls whose arguments fit the called tool's schema.

    Example:

    >>> from grpokit.rewards.tools import get_tool_args_reward
    >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    ...           "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}]
    >>> def calls(*arguments):
    ...     return [{"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": a}} for a in arguments]}]
    >>> get_tool_args_reward()([calls({"a": 1, "b": 2}), calls({"a": 1, "b": 2}, {"a": "one"})], tools=[tools] * 2)
    [1.0, 0.5]
    """
    @_messages_reward
    def score(completions, tools=None, **_):
        out = []
        for i, msgs in enumerate(completions):
            calls = tool_calls(msgs)
            defined = tools_by_name(tools[i]) if tools else {}
            out.append(sum(args_valid(n, a, defined) for n, a in calls) / len(calls) if calls else None)
        return out
    return score


@describe(description="The goal check on the episode's end: final_answer (answer line vs answer, "
          "math verifier) or hidden_tests (the environment's share of hidden tests passing).",
          columns=("goal", "answer"))
def get_task_success_reward():
    r"""The `task_success` scorer: the episode's goal check (by default its final answer line against `answer`).

    Example:

    >>> from grpokit.rewards.tools import get_task_success_reward
    >>> episodes = [[{"role": "assistant", "content": "Final answer: 5"}], [{"role": "assistant", "content": "Final answer: 6"}]]
    >>> get_task_success_reward()(episodes, answer=["5", "5"])
    [1.0, 0.0]
    """
    @_messages_reward
    def score(completions, goal=None, answer=None, environments=None, **_):
        out = []
        for i, msgs in enumerate(completions):
            g = (loads(goal[i]) if goal else None) or {"kind": "final_answer"}
            if g["kind"] == "hidden_tests":
                env = environments[i] if environments else None
                if env is None or not hasattr(env, "_goal_score"):
                    raise ValueError("a hidden_tests goal needs the repofix environment's state (env: repofix)")
                out.append(env._goal_score())
            else:
                out.append(score_math(final_text(msgs), answer[i]) if answer else None)
        return out
    return score


@describe(description="Dense shaping: per_call for each call matching an expected call (name and "
          "arguments), up to the number expected.", columns=("expected_calls",),
          params={"per_call": "reward per matching call (default 0.1)"})
def get_tool_shaping_reward(per_call: float = 0.1):
    r"""The `tool_shaping` scorer: `per_call` for each call matching an expected call, up to the number expected.

    Example:

    >>> from grpokit.rewards.tools import get_tool_shaping_reward
    >>> episode = [{"role": "assistant", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 2, "b": 3}}},
    ...                                                 {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]}]
    >>> get_tool_shaping_reward(per_call=0.1)([episode], expected_calls=[[{"name": "add", "arguments": {"a": 2, "b": 3}}]])
    [0.1]
    """
    @_messages_reward
    def score(completions, expected_calls=None, **_):
        out = []
        for i, msgs in enumerate(completions):
            expected = loads(expected_calls[i]) if expected_calls else None
            if not expected:
                out.append(None if expected is None else 0.0)
                continue
            pending = [(c["name"], c.get("arguments", {})) for c in expected]
            hits = 0
            for call in tool_calls(msgs):
                if call in pending:
                    pending.remove(call)
                    hits += 1
            out.append(per_call * hits)
        return out
    return score
