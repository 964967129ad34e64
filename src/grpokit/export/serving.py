"""The training prompt as serving stacks apply it: a chat template for HF/vLLM, a Go TEMPLATE for Ollama.

grpokit.export writes these and then proves, on the files it wrote, that they give the ids training saw:
`render_go_template` renders the Go-template subset Ollama's prompt templates use (grpokit.export.gotemplate), so
that check runs without Ollama itself. A tool run's TEMPLATE (tools, tool calls, results) is serving_tools'.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run.writer import write_file
from grpokit.templates import PLAIN_TEMPLATES, PromptTemplate

_SYS, _USER = "GRPOKITSYSTEMSENTINEL", "GRPOKITUSERSENTINEL"  # plain words: survive trim/escape filters


def _jinja_str(s: str) -> str:
    # Jinja string literals take Python escapes; JSON's are a subset of them.
    return json.dumps(s, ensure_ascii=False)


def serving_chat_template(tokenizer, template: PromptTemplate) -> str:
    """A chat template that renders the training prompt for a plain user message (what vLLM / HF apply)."""
    if not template.is_chat:
        head, tail = PLAIN_TEMPLATES[template.name].split("{question}")
        return f"{{{{ {_jinja_str(head)} }}}}{{{{ messages[-1]['content'] }}}}{{{{ {_jinja_str(tail)} }}}}"
    original = tokenizer.chat_template
    if not original:
        raise GrpokitError([Problem("data.template: chat", "the tokenizer has no chat template",
                                    "train with a plain template, or a model that ships a chat template")])
    prefix = ""
    for key, value in template.chat_template_kwargs().items():  # e.g. enable_thinking=False, as in training
        prefix += f"{{% set {key} = {json.dumps(value)} %}}"
    if template.system_prompt:
        prefix += ("{% if not messages or messages[0]['role'] != 'system' %}{% set messages = "
                   f"[{{'role': 'system', 'content': {_jinja_str(template.system_prompt)}}}] + messages %}}{{% endif %}}")
    return prefix + original


def _go_literal(text: str) -> str:
    return text.replace("{{", '{{ "{{" }}')


def ollama_template(tokenizer, template: PromptTemplate) -> str:
    """Go-template TEMPLATE for the Modelfile; must render to exactly the training prompt (checked later)."""
    if not template.is_chat:
        head, tail = PLAIN_TEMPLATES[template.name].split("{question}")
        return _go_literal(head) + "{{ .Prompt }}" + _go_literal(tail)

    def render(messages):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **template.chat_template_kwargs())

    with_sys = render([{"role": "system", "content": _SYS}, {"role": "user", "content": _USER}])
    without = render([{"role": "user", "content": _USER}])
    if with_sys.count(_SYS) != 1 or with_sys.count(_USER) != 1 or without.count(_USER) != 1:
        raise GrpokitError([Problem("chat template", "cannot express this chat template as an Ollama TEMPLATE "
                                    "(it alters or repeats the system/user text)",
                                    "export --to gguf and write the TEMPLATE by hand, or serve with vLLM")])

    def go(text):
        return "{{ .System }}".join("{{ .Prompt }}".join(_go_literal(p) for p in part.split(_USER))
                                    for part in text.split(_SYS))

    return "{{ if .System }}" + go(with_sys) + "{{ else }}" + go(without) + "{{ end }}"


def render_go_template(text: str, variables: dict) -> str:
    """A Modelfile TEMPLATE rendered as Ollama would (grpokit.export.gotemplate: the Go-template subset it uses)."""
    from grpokit.export.gotemplate import render

    return render(text, variables)


def write_modelfile(path: Path, gguf_name: str, go_template: str, system: str | None, stops: list[str]) -> None:
    for name, text in (("TEMPLATE", go_template), ("SYSTEM", system or "")):
        if '"""' in text:
            raise GrpokitError([Problem(f"Modelfile {name}", 'contains """, which a Modelfile cannot quote',
                                        "change the system prompt / template")])
    lines = ["# written by grpokit export: TEMPLATE and SYSTEM reproduce the training prompt exactly",
             f"FROM ./{gguf_name}", f'TEMPLATE """{go_template}"""']
    if system:
        lines.append(f'SYSTEM """{system}"""')
    lines += [f"PARAMETER stop {json.dumps(s, ensure_ascii=False)}" for s in stops]
    write_file(path, "\n".join(lines) + "\n", within=path.parent)  # the export's folder (its record names it)


def read_modelfile(path: Path) -> dict:
    """TEMPLATE, SYSTEM and FROM from a Modelfile (the forms write_modelfile produces, plus one-line values)."""
    text = path.read_text(encoding="utf-8")
    out = {}
    for m in re.finditer(r'^(FROM|TEMPLATE|SYSTEM)\s+(?:"""(.*?)"""|(.*?))$', text, re.S | re.M):
        out[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3).strip()
    return out
