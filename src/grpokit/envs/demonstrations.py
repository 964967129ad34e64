"""Tool-call demonstrations for an SFT warm start: an episode played on the environment, rendered as GRPO renders it.

    episode = play_expected_calls(row, env_factory)     # [assistant(tool_call), tool(result)] per expected call
    ids, mask = render_episode(tokenizer, prompt, episode + [final], tools)

Why: a model as small as the embedded 135M never writes a `<tool_call>` on its own, so every GRPO group ties and
nothing is learned (docs/measurements.md "Tool calling: calculator task"). A few steps of SFT on demonstrations teach
the format; GRPO then trains the task from there (`grpokit train --init-from`).

The episode: for each of the row's `expected_calls`, an assistant turn that makes the call (no text), then the
tool's result as TRL's rollout passes it (`{"role": "tool", "name": ..., "content": str(result)}`), computed by a
fresh instance of the recipe's environment (reset with the row), so the results are the environment's own. The
caller adds the final answer turn (grpokit.training.sft knows the recipe's answer line).

The rendering: TRL's multi-turn rollout trains on `prompt_ids + turn 1 + tool suffix + turn 2 ...`, where the prompt
is the chat template with the tools and the generation prompt, each model turn ends at its EOS, and the tool suffix
(the template's text after that EOS: the tool turn and the next generation prompt) is masked out of the loss.
`render_episode` gives the same ids and mask from the chat template alone: a model turn is what the template adds
between the conversation up to it (with the generation prompt) and the conversation through it, cut after its EOS;
everything else is context. tests/test_tool_demonstrations.py plays the same episode through GRPOTrainer's own
rollout and compares the two token for token.

Not covered: demonstrations with text beside the calls, or rows without `expected_calls` (repofix: nothing to
play; those rows are refused by the caller with a fix).
"""
from __future__ import annotations

from grpokit.envs.rows import loads
from grpokit.errors import GrpokitError, Problem


def play_expected_calls(row: dict, env_factory, where: str) -> list[dict]:
    """The call/result turns of the row's expected calls, each result from the environment (see the docstring)."""
    env = env_factory()
    env.reset(**row)
    messages = []
    for call in loads(row.get("expected_calls")) or []:
        name, arguments = call["name"], dict(call.get("arguments") or {})
        tool = getattr(env, name, None)
        if name.startswith("_") or not callable(tool):
            raise GrpokitError([Problem(f"{where} expected_calls", f"the environment has no tool {name!r}",
                                        "name one of the environment's tools (grpokit data check lists them)")])
        try:
            result = tool(**arguments)
        except Exception as e:  # noqa: BLE001 - any failure of the tool makes the row unusable as a demonstration
            raise GrpokitError([Problem(f"{where} expected_calls", f"{name}({arguments}) failed in the environment: "
                                        f"{e}", "fix the call's arguments: a demonstration shows a call that works")])
        messages.append({"role": "assistant", "content": "",
                         "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]})
        messages.append({"role": "tool", "name": name, "content": str(result)})  # TRL's rollout: str(result)
    return messages


def _ids(tokenizer, messages: list[dict], tools, generation_prompt: bool, template_kwargs: dict) -> list[int]:
    out = tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=generation_prompt,
                                        tokenize=True, return_dict=True, **template_kwargs)
    ids = out["input_ids"]
    return list(ids[0] if ids and isinstance(ids[0], list) else ids)


def render_episode(tokenizer, prompt: list[dict], episode: list[dict], tools: list | None,
                   template_kwargs: dict | None = None) -> tuple[list[int], list[int]]:
    """(input_ids, completion_mask) of prompt + episode as TRL's rollout tokenises it: 1 on the model's own turns
    (through their EOS), 0 on the prompt, tool results and generation prompts (see the module docstring)."""
    kwargs = template_kwargs or {}
    conversation = list(prompt)
    ids = _ids(tokenizer, conversation, tools, True, kwargs)
    mask = [0] * len(ids)
    for message in episode:
        if message["role"] == "assistant":
            before = _ids(tokenizer, conversation, tools, True, kwargs)
            through = _ids(tokenizer, conversation + [message], tools, False, kwargs)
            if before[:len(ids)] != ids or through[:len(before)] != before:
                raise GrpokitError([Problem("the chat template", "renders a conversation differently once a turn "
                                            "is added (not prefix-preserving), so a demonstration cannot be the "
                                            "tokens GRPO's rollout trains on", "use a prefix-preserving tool "
                                            "template (grpokit.envs.chat.TOOL_CHATML, or TRL's training copy)")])
            turn = through[len(before):]
            if tokenizer.eos_token_id in turn:  # the model stops at EOS; what the template writes after it is context
                turn = turn[:turn.index(tokenizer.eos_token_id) + 1]
            gap = before[len(ids):]
            ids, mask = ids + gap + turn, mask + [0] * len(gap) + [1] * len(turn)
        conversation.append(message)
    return ids, mask
