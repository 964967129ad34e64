"""The Ollama TEMPLATE of a tool-calling run: tool definitions, tool calls and tool results as training rendered them.

    from grpokit.export.serving_tools import ollama_tool_template, ollama_values
    go = ollama_tool_template(tokenizer, template, tools)       # the Modelfile TEMPLATE of a run with env:
    data = ollama_values(messages, tools, system)               # what Ollama hands that TEMPLATE for /api/chat

Ollama renders a chat through the Modelfile's Go TEMPLATE with `.System`,
`.Messages` (Role, Content, ToolCalls[].Function.{Name, Arguments}) and
`.Tools` (Function.{Name, Description, Parameters}); a TEMPLATE that names
`.Tools` marks the model tool-capable, and Ollama finds the tool-call tag to
parse in the model's output from the first text inside `{{ if .ToolCalls }}`
(here `<tool_call>`). Training rendered tools with the tokenizer's chat
template: grpokit's fallback (`envs.chat.TOOL_CHATML`) or a model's own in
the same Hermes/ChatML layout (Qwen2.5/Qwen3). The Go template here writes
that layout; its literal pieces (system turn with and without a system
prompt, the text around the tool list, the generation prompt) are cut out of
the training template's own renders, and `export_checks.check_tool_prompts`
renders fixed tool conversations both ways and compares ids.

Where Ollama's data cannot carry what training rendered, the mapping is:
- a tool training exposed (same name and description) is written verbatim,
  exactly as training rendered it (with its `return` type and parameter
  order, which Ollama's API drops); any other tool is written in the same
  JSON layout from what Ollama has: parameters in name order, `type`,
  `items`, `description`, `enum`, and `required`;
- tool-call arguments are written `{"k": v, ...}` in key order (Ollama keeps
  them as a map); values with `<`, `>` or `&`, nested objects and floats with
  a zero fraction print as Go's JSON does (`\\u003c`, compact, `3` for 3.0).
Not covered: templates in another tool layout (Llama 3.1, Mistral): export
refuses their tools with a fix (serve with vLLM, whose chat template is the
training one).
"""
from __future__ import annotations

import json

from grpokit.envs import loads
from grpokit.errors import GrpokitError, Problem
from grpokit.export.gotemplate import PropertyType

_S, _U = "GRPOKITSYSTEMSENTINEL", "GRPOKITUSERSENTINEL"
_SENTINEL_TOOLS = [{"type": "function", "function": {
    "name": f"grpokit_tool_{i}", "description": f"GRPOKIT TOOL {i}",
    "parameters": {"type": "object", "properties": {"x": {"type": "string", "description": "x"}}, "required": ["x"]},
}} for i in (1, 2)]
_IM_START, _IM_END = "<|im_start|>", "<|im_end|>\n"


def _go_literal(text: str) -> str:
    return text.replace("{{", '{{ "{{" }}')


def _go_str(text: str) -> str:  # a Go double-quoted string literal: JSON's escapes are a subset of Go's
    return json.dumps(text, ensure_ascii=False)


def _tojson(value) -> str:  # transformers' chat-template `tojson`: json.dumps, ensure_ascii=False, default separators
    return json.dumps(value, ensure_ascii=False)


def _refuse(what: str) -> GrpokitError:
    return GrpokitError([Problem(
        "export --to ollama (tools)", f"the training chat template is not in the Hermes/ChatML tool layout grpokit "
        f"can write as an Ollama TEMPLATE: {what}",
        "serve this run with vLLM (the exported hf/chat_template.jinja renders tools as training did), or export "
        "--to gguf and write the Modelfile's TEMPLATE by hand")])


def _pieces(tokenizer, template) -> dict[str, str]:
    """The literal text of the training template's tool layout, cut out of its own renders (see module doc)."""
    kwargs = template.chat_template_kwargs()

    def render(messages, tools=None):
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
                                             **kwargs)

    sys_msg, user = {"role": "system", "content": _S}, {"role": "user", "content": _U}
    j1, j2 = (_tojson(t) for t in _SENTINEL_TOOLS)
    user_turn = f"{_IM_START}user\n{_U}{_IM_END}{_IM_START}assistant\n"
    with_tools, plain = render([sys_msg, user], _SENTINEL_TOOLS), render([sys_msg, user])
    start = f"{_IM_START}system\n{_S}"
    for text, what in ((with_tools, "with tools"), (plain, "without tools")):
        if not text.startswith(start) or user_turn not in text or text.count(_U) != 1:
            raise _refuse(f"a system + user prompt {what} does not render as ChatML turns")
    if not (j1 in with_tools and j2 in with_tools):
        raise _refuse("tool definitions are not rendered as their JSON (tool | tojson)")
    head, rest = with_tools[len(start):].split(j1)
    sep, rest = rest.split(j2)
    tail, gen = rest.split(user_turn)
    if plain[len(start):] != f"{_IM_END}{user_turn}{gen}":
        raise _refuse("the system turn without tools is not `<|im_start|>system\\n...<|im_end|>`")
    nosys_tools, nosys_plain = render([user], _SENTINEL_TOOLS), render([user])
    if j1 not in nosys_tools or not nosys_tools.endswith(f"{j1}{sep}{j2}{tail}{user_turn}{gen}"):
        raise _refuse("a user prompt with tools and no system prompt renders another layout")
    if not nosys_plain.endswith(f"{user_turn}{gen}"):
        raise _refuse("a user prompt without a system prompt renders another layout")
    call = {"type": "function", "function": {"name": "grpokit_tool_1", "arguments": {"x": "1"}}}
    results = render([user, {"role": "assistant", "content": "", "tool_calls": [call, call]},
                      {"role": "tool", "content": "R1"}, {"role": "tool", "content": "R2"}], _SENTINEL_TOOLS)
    grouped = "</tool_response>\n<tool_response>\nR2" in results
    return {"head": head, "sep": sep, "tail": tail, "gen": gen, "grouped": grouped,
            "nosys_tools_head": nosys_tools.split(j1)[0], "nosys_plain": nosys_plain[:-len(user_turn + gen)]}


def _tool_json_go(trained: list[dict]) -> str:
    """One `.Tools` element as JSON: trained tools verbatim, others in the same layout from Ollama's fields."""
    props = ('{{ $p := "" }}{{ range $k, $v := .Function.Parameters.Properties }}{{ $p }}{{ json $k }}: '
             '{{ "{" }}"type": {{ json $v.Type }}{{ if $v.Items }}, "items": {{ json $v.Items }}{{ end }}'
             '{{ if $v.Description }}, "description": {{ json $v.Description }}{{ end }}'
             '{{ if $v.Enum }}, "enum": {{ json $v.Enum }}{{ end }}{{ "}" }}{{ $p = ", " }}{{ end }}')
    required = '{{ range $i, $r := .Function.Parameters.Required }}{{ if $i }}, {{ end }}{{ json $r }}{{ end }}'
    generic = ('{"type": {{ json .Type }}, "function": {"name": {{ json .Function.Name }}, "description": '
               '{{ json .Function.Description }}, "parameters": {"type": {{ json .Function.Parameters.Type }}, '
               '"properties": {{ "{" }}' + props + '{{ "}" }}{{ if .Function.Parameters.Required }}, "required": ['
               + required + ']{{ end }}}}}')
    out = ""
    for t in trained:
        fn = t["function"]
        cond = f'and (eq .Function.Name {_go_str(fn["name"])}) (eq .Function.Description {_go_str(fn.get("description", ""))})'
        out += ("{{ if " if not out else "{{ else if ") + cond + " }}" + _go_literal(_tojson(t))
    return out + "{{ else }}" + generic + "{{ end }}" if out else generic


def ollama_tool_template(tokenizer, template, tools: list[dict]) -> str:
    """The Modelfile TEMPLATE for a tool run: `.System`, `.Tools`, `.Messages` in the training layout."""
    p = _pieces(tokenizer, template)
    tool_list = ("{{ range $i, $t := .Tools }}{{ if $i }}" + _go_literal(p["sep"]) + "{{ end }}"
                 + _tool_json_go(tools) + "{{ end }}")
    args = ('{{ "{" }}{{ $a := "" }}{{ range $k, $v := .Function.Arguments }}{{ $a }}{{ json $k }}: {{ json $v }}'
            '{{ $a = ", " }}{{ end }}{{ "}" }}')
    if p["grouped"]:  # Qwen3: consecutive tool results share one user turn, closed before the next message
        tool_turn = ('{{ if ne $prev "tool" }}' + _IM_START + "user{{ end }}\n<tool_response>\n{{ .Content }}\n"
                     "</tool_response>")
        close_prev = "{{ $prev = .Role }}"
        close_last = '{{ if eq $prev "tool" }}' + _IM_END + "{{ end }}"
        open_msg = '{{ if and (eq $prev "tool") (ne .Role "tool") }}' + _IM_END + "{{ end }}"
    else:
        tool_turn = _IM_START + "user\n<tool_response>\n{{ .Content }}\n</tool_response>" + _IM_END
        close_prev = close_last = open_msg = ""
    return (
        "{{ if .System }}" + _IM_START + "system\n{{ .System }}"
        + "{{ if .Tools }}" + _go_literal(p["head"]) + tool_list + _go_literal(p["tail"])
        + "{{ else }}" + _IM_END + "{{ end }}"
        + "{{ else if .Tools }}" + _go_literal(p["nosys_tools_head"]) + tool_list + _go_literal(p["tail"])
        + "{{ else }}" + _go_literal(p["nosys_plain"]) + "{{ end }}"
        + '{{ $prev := "" }}{{ range .Messages }}' + open_msg
        + '{{ if eq .Role "user" }}' + _IM_START + "user\n{{ .Content }}" + _IM_END
        + '{{ else if eq .Role "assistant" }}' + _IM_START + 'assistant\n{{ .Content }}{{ $sep := "" }}'
        + '{{ if .Content }}{{ $sep = "\\n" }}{{ end }}'
        # Ollama's tool-call parser takes its tag from the first text inside `if .ToolCalls`: keep <tool_call> first
        + '{{ if .ToolCalls }}{{ range .ToolCalls }}{{ $sep }}<tool_call>\n{"name": "{{ .Function.Name }}", '
        + '"arguments": ' + args + '}\n</tool_call>{{ $sep = "\\n" }}{{ end }}{{ end }}' + _IM_END
        + '{{ else if eq .Role "tool" }}' + tool_turn + "{{ end }}" + close_prev + "{{ end }}" + close_last
        + _IM_START + "assistant\n" + _go_literal(p["gen"])
    )


# ---------------------------------------------------------------- Ollama's side of a chat request
def _go_number(v):
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v  # Ollama parses JSON numbers as float64


def _args(arguments) -> dict:
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    return {k: _go_number(v) for k, v in args.items()}


def _tool(t: dict) -> dict:
    fn, params = t["function"], t["function"].get("parameters") or {}
    props = {k: {"Type": PropertyType([v["type"]] if isinstance(v.get("type"), str) else v.get("type") or []),
                 "Items": v.get("items"), "Description": v.get("description", ""), "Enum": v.get("enum")}
             for k, v in (params.get("properties") or {}).items()}
    return {"Type": t.get("type", "function"), "Items": None, "Function": {
        "Name": fn["name"], "Description": fn.get("description", ""),
        "Parameters": {"Type": params.get("type", "object"), "Required": params.get("required"), "Properties": props}}}


def ollama_values(messages: list[dict], tools: list[dict] | None, system: str | None) -> dict:
    """The data Ollama's /api/chat hands the TEMPLATE (server/routes.go + template.Execute): the Modelfile SYSTEM
    first when the request has none; system messages joined into `.System`; consecutive same-role messages
    (except tool results) merged with a blank line; a tool's `return` and unknown fields dropped."""
    msgs = [dict(m) for m in messages]
    if system and (not msgs or msgs[0]["role"] != "system"):
        msgs.insert(0, {"role": "system", "content": system})
    collated: list[dict] = []
    for m in msgs:
        if collated and collated[-1]["role"] == m["role"] and m["role"] != "tool":
            collated[-1]["content"] = collated[-1].get("content", "") + "\n\n" + (m.get("content") or "")
        else:
            collated.append(m)
    out = [{"Role": m["role"], "Content": m.get("content") or "", "Thinking": "", "ToolName": m.get("name", ""),
            "ToolCalls": [{"ID": "", "Function": {"Index": i, "Name": c["function"]["name"],
                                                  "Arguments": _args(c["function"].get("arguments"))}}
                          for i, c in enumerate(m.get("tool_calls") or [])] or None}
           for m in collated]
    return {"System": "\n\n".join(m.get("content", "") for m in msgs if m["role"] == "system"), "Messages": out,
            "Tools": [_tool(t) for t in tools or []] or None, "Response": ""}


def tool_conversations(rows: list[dict], tools: list[dict]) -> list[list[dict]]:
    """Fixed conversations that exercise every part of the tool layout, for the export's prompt checks:
    the first row's question, its expected calls (or a call of the first tool) made twice in one turn, two
    tool results, a final answer and a follow-up question. Without the system turn (the Modelfile's)."""
    row = rows[0]
    expected = [c for r in rows for c in (loads(r.get("expected_calls")) or [])][:1]
    call = expected[0] if expected else {"name": tools[0]["function"]["name"], "arguments": {}}
    calls = [{"type": "function", "function": {"name": call["name"], "arguments": call.get("arguments") or {}}}] * 2
    return [[{"role": "user", "content": row["question"]},
             {"role": "assistant", "content": "", "tool_calls": calls},
             {"role": "tool", "name": call["name"], "content": "42"},
             {"role": "tool", "name": call["name"], "content": "error: try again"},
             {"role": "assistant", "content": f"Final answer: {row.get('answer', '42')}"},
             {"role": "user", "content": "Thanks. Check it once more with the tools."}]]
