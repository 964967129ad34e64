"""`grpokit export --push-to-hub`: the upload through huggingface_hub against a local fake Hub (no network).

The export folder here is written by hand (what grpokit export writes: hf/, a GGUF, a Modelfile, grpokit.json); the
round trip from a trained run through export and push is in test_export.py.
"""
from __future__ import annotations

import json

import pytest

from grpokit.cli import main
from grpokit.errors import GrpokitError
from grpokit.export.hub import check_repo_id, hub_token, model_card, push_to_hub

MANIFEST = {"base_model": "Qwen/Qwen3-0.6B-Base", "how_to_prompt": "send the question as the only user message",
            "system_prompt": "Think briefly.", "stop": ["<|im_end|>"], "gguf": "model-q8_0.gguf", "quant": "q8_0",
            "checks": [{"name": "vllm prompt ids", "ok": True, "detail": "3 prompts give the training ids"}]}


@pytest.fixture
def export_dir(tmp_path):
    out = tmp_path / "export" / "checkpoint-2"
    (out / "hf").mkdir(parents=True)
    (out / "hf" / "config.json").write_text('{"model_type": "qwen3"}')
    (out / "hf" / "model.safetensors").write_bytes(bytes(range(256)) * 1000)
    (out / "hf" / "chat_template.jinja").write_text("{{ messages[0].content }}")
    for where in (out, out / "hf"):
        (where / "grpokit.json").write_text(json.dumps(MANIFEST))
    (out / "model-q8_0.gguf").write_bytes(b"GGUF" + bytes(100))
    (out / "Modelfile").write_text("FROM ./model-q8_0.gguf\n")
    return out


def test_push_uploads_the_export_in_one_commit(fake_hub, export_dir):
    url = push_to_hub(export_dir, "me/smollm2-gsm8k", private=True, log=lambda *_: None)
    assert url == f"{fake_hub.url}/me/smollm2-gsm8k"
    assert fake_hub.repos["me/smollm2-gsm8k"]["visibility"] == "private"
    # the HF model at the root (from_pretrained / vllm serve REPO), GGUF + Modelfile beside it, a model card
    assert sorted(fake_hub.files) == ["Modelfile", "README.md", "chat_template.jinja", "config.json", "grpokit.json",
                                      "model-q8_0.gguf", "model.safetensors"]
    assert fake_hub.files["model.safetensors"] == (export_dir / "hf" / "model.safetensors").read_bytes()
    assert fake_hub.files["Modelfile"] == b"FROM ./model-q8_0.gguf\n"  # its relative FROM still finds the GGUF
    assert len(fake_hub.commits) == 1 and "checkpoint-2" in fake_hub.commits[0]
    assert {auth for _, auth in fake_hub.requests} == {"Bearer hf_fake_write_token"}  # HF_TOKEN was used


def test_public_is_the_default(fake_hub, export_dir):
    push_to_hub(export_dir, "me/m", log=lambda *_: None)
    assert fake_hub.repos["me/m"]["visibility"] == "public"


def test_model_card_says_how_to_prompt():
    card = model_card(MANIFEST, [])
    assert card.startswith("---\nlibrary_name: transformers\nbase_model: Qwen/Qwen3-0.6B-Base\ntags:\n")
    assert "- gguf" in card and "send the question as the only user message" in card and "`Think briefly.`" in card
    assert "| vllm prompt ids | ok | 3 prompts give the training ids |" in card
    # a base model given as a local folder or the embedded default is not a Hub id: no base_model line
    assert "base_model" not in model_card({**MANIFEST, "base_model": "default"}, [])


def test_no_token_is_a_clear_error(monkeypatch, tmp_path):
    import huggingface_hub.constants

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-login-here"))
    with pytest.raises(GrpokitError) as e:
        hub_token()
    assert "HF_TOKEN" in str(e.value) and "hf auth login" in str(e.value)
    (tmp_path / "no-login-here").write_text("hf_from_the_login_cache\n")  # `hf auth login` writes this file
    assert hub_token() == "hf_from_the_login_cache"


@pytest.mark.parametrize("repo_id, ok", [
    ("me/model", True),
    ("my-org/Qwen3-0.6B-gsm8k.v2", True),
    ("model", True),                 # the token owner's namespace
    ("me/model/extra", False),       # a path, not a repository
    ("me/bad name", False),          # spaces
    ("me/--model", False),           # '--' is reserved
])
def test_repo_ids_are_checked(repo_id, ok):
    if ok:
        assert check_repo_id(repo_id) == repo_id
    else:
        with pytest.raises(GrpokitError, match="USER/NAME"):
            check_repo_id(repo_id)


def test_a_token_without_write_access_is_explained(fake_hub, export_dir):
    fake_hub.fail_with = 403
    with pytest.raises(GrpokitError) as e:
        push_to_hub(export_dir, "someone-else/model", log=lambda *_: None)
    assert "403" in str(e.value) and "write access" in str(e.value)


def test_an_unreachable_hub_is_explained(monkeypatch, export_dir):
    import socket

    import huggingface_hub.constants

    with socket.socket() as s:  # a local port with nothing listening: connection refused, no network needed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(GrpokitError) as e:
        push_to_hub(export_dir, "me/model", token="hf_x", log=lambda *_: None)
    assert "could not reach the Hub" in str(e.value)


def test_push_needs_an_export(fake_hub, tmp_path):
    with pytest.raises(GrpokitError, match="run grpokit export first"):
        push_to_hub(tmp_path, "me/model", log=lambda *_: None)


@pytest.mark.parametrize("args, says", [
    (["--push-to-hub", "me/model"], "HF_TOKEN"),           # no token: said before the export starts
    (["--push-to-hub", "me/bad name"], "USER/NAME"),       # a bad id too
    (["--private"], "--push-to-hub"),                      # --private alone means nothing
])
def test_cli_refuses_before_exporting(monkeypatch, tmp_path, capsys, args, says):
    import huggingface_hub.constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "none"))
    assert main(["export", str(tmp_path / "run"), "--out", str(tmp_path / "out"), *args]) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "out").exists()
