"""Chat templates that carry tools: the tokenizer's own, or grpokit's documented fallback.

    from grpokit.envs.chat import ensure_tool_template
    tokenizer = ensure_tool_template(tokenizer)   # before GRPOTrainer(tools=/environment_factory=)

TRL 1.16 renders tool definitions into the prompt with the tokenizer's chat
template (`apply_chat_template(..., tools=...)`), parses the model's tool calls
with the tokenizer's `response_template`, and refuses a template that cannot
render a full `user -> assistant(tool_calls) -> tool` exchange
(`trl.chat_template_utils.supports_tool_calling`).

- A tokenizer whose template already carries tools (Qwen3, Qwen2.5, Llama 3.1,
  ...) is left as it is: TRL sets its response parser itself
  (`add_response_schema`) and, where the template is not prefix-preserving
  (Qwen3's drops old think blocks), swaps in its own training copy.
- A ChatML tokenizer without tool support (the embedded SmolLM2-135M-Instruct)
  gets `TOOL_CHATML`: ChatML plus the Hermes tool format that Qwen2.5/Qwen3 use
  (`<tools>` JSON signatures in the system turn, `<tool_call>{"name",
  "arguments"}</tool_call>` from the assistant, `<tool_response>` in a user
  turn), with SmolLM2's own default system line. The parser is TRL's Qwen3
  `response_template`, which reads exactly that format.

The template is set on the tokenizer object, and `save_pretrained` writes it
with the checkpoint (chat_template.jinja), so evaluation and export of a tool
run render tools the same way training did. Non-ChatML templates without tool
support are refused with a fix (no guessing at their turn markers).
"""
from __future__ import annotations

from grpokit.errors import GrpokitError, Problem

# ChatML + Hermes tool calls. Prefix-preserving (each message renders the same whatever follows), which TRL's
# multi-turn loop requires: it slices the tool-result tokens out of a longer rendering.
TOOL_CHATML = (
    "{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set system = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' %}"
    "{%- set rest = messages %}{%- endif %}"
    "{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call>' }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in rest %}"
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for tool_call in (message.tool_calls or []) %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{%- if not loop.first or message.content %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' + (tool_call.arguments | tojson)"
    " + '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _supports_tools(tokenizer) -> bool:
    from trl.chat_template_utils import supports_tool_calling

    return supports_tool_calling(tokenizer)


def ensure_tool_template(tokenizer):
    """The tokenizer, able to render and parse tool calls (see the module docstring); changed in place."""
    if _supports_tools(tokenizer):
        return tokenizer
    template = tokenizer.chat_template or ""
    if "<|im_start|>" not in template:
        raise GrpokitError([Problem(
            "model.name", "the tokenizer's chat template cannot render tool calls and is not ChatML, so grpokit's "
            "fallback tool template does not fit it",
            "use a model whose chat template carries tools (Qwen3, Qwen2.5, Llama 3.1), or set a tool-aware "
            "chat_template on the tokenizer before training")])
    from trl.chat_template_utils import qwen3_template

    tokenizer.chat_template = TOOL_CHATML
    tokenizer.response_template = qwen3_template  # TRL's parser for the Hermes <tool_call> JSON format
    return tokenizer
