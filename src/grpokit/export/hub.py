"""Push an exported model to the Hugging Face Hub: `grpokit export RUN_DIR ... --push-to-hub USER/REPO [--private]`.

Uploads what `grpokit export` wrote, laid out the way the Hub and its users
expect: the merged HF model and tokenizer (with the serving chat template and
`grpokit.json`) at the repository root, so `from_pretrained("USER/REPO")` and
`vllm serve USER/REPO` work; the GGUF and Ollama Modelfile beside them when the
export made them (the Modelfile's `FROM ./model-<quant>.gguf` stays valid);
and a README.md model card saying how the model is prompted. Everything goes
in one commit through huggingface_hub (`HfApi.create_repo`, then
`upload_folder` of a staging folder of hard links, so nothing is copied).

The token is huggingface_hub's: `HF_TOKEN`, else the login cache written by
`hf auth login`. It is looked up, and the repository id checked, before the
export starts, so a missing token does not cost an export. Only an export
whose checks all passed is pushed (the CLI refuses otherwise).

Not covered: pushing checkpoints during training (TRL's `push_to_hub`
arguments do that), model-card metrics beyond the export checks.
"""
from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from grpokit.errors import GrpokitError, Problem

MANIFEST = "grpokit.json"  # written by export into out/ and out/hf/
TOP_LEVEL_FILES = ("Modelfile", "*.gguf")  # beside hf/ in an export folder


def hub_token() -> str:
    """The Hugging Face token (HF_TOKEN, else the login cache); a clear error when there is none."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise GrpokitError([Problem("--push-to-hub", "no Hugging Face token: HF_TOKEN is not set and there is no "
                                    "saved login", "set HF_TOKEN to a token with write access "
                                    "(huggingface.co/settings/tokens), or run `hf auth login` once")])
    return token


def check_repo_id(repo_id: str) -> str:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise GrpokitError([Problem(f"--push-to-hub {repo_id}", str(e).splitlines()[0],
                                    "give USER/NAME or ORG/NAME (letters, digits, '-', '_', '.')")]) from None
    return repo_id


def stage(out_dir: Path, staging: Path) -> list[str]:
    """Lay the export out for the Hub in `staging` (hard links, copies across file systems); returns the names."""
    out_dir = Path(out_dir)
    hf_dir = out_dir / "hf"
    if not (hf_dir / "config.json").is_file():
        raise GrpokitError([Problem(str(out_dir), "no exported model here (hf/config.json is missing)",
                                    "run grpokit export first; --push-to-hub uploads its output folder")])
    files = [p for p in sorted(hf_dir.rglob("*")) if p.is_file()]
    files += [p for pattern in TOP_LEVEL_FILES for p in sorted(out_dir.glob(pattern)) if p.is_file()]
    for src in files:
        dst = staging / (src.relative_to(hf_dir) if src.is_relative_to(hf_dir) else src.name)
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:  # another file system, or links not allowed: copy instead
            shutil.copy2(src, dst)
    manifest = json.loads((hf_dir / MANIFEST).read_text(encoding="utf-8")) if (hf_dir / MANIFEST).is_file() else {}
    (staging / "README.md").write_text(model_card(manifest, [f.name for f in files]), encoding="utf-8")
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file())


def model_card(manifest: dict, files: list[str]) -> str:
    """README.md for the Hub: metadata (base model, tags) and how the model is prompted, from grpokit.json."""
    base = manifest.get("base_model") or ""
    is_hub_id = base.count("/") == 1 and not Path(base).exists()  # a local folder is no use to a reader
    gguf = manifest.get("gguf")
    tags = ["grpokit", "grpo", "trl"] + (["gguf"] if gguf else [])
    front = ["---", "library_name: transformers", *([f"base_model: {base}"] if is_hub_id else []),
             "tags:", *[f"- {t}" for t in tags], "---"]
    checks = "\n".join(f"| {c['name']} | {'ok' if c['ok'] else 'FAILED'} | {c['detail']} |"
                       for c in manifest.get("checks", []))
    body = [f"# {'GRPO fine-tune of ' + base if base else 'GRPO fine-tune'}", "",
            "Trained with reinforcement learning (GRPO) and exported by grpokit.", "",
            "## How to prompt", "", manifest.get("how_to_prompt", "see grpokit.json"), ""]
    if manifest.get("system_prompt"):
        body += [f"System prompt used in training (the chat template sets it): `{manifest['system_prompt']}`", ""]
    if manifest.get("stop"):
        body += [f"Stop on: {', '.join(f'`{s}`' for s in manifest['stop'])}", ""]
    if gguf:
        body += [(f"`{gguf}` ({manifest.get('quant')}) and an Ollama `Modelfile` that reproduces the training prompt "
                  "are included: download both, then `ollama create NAME -f Modelfile`."), ""]
    if checks:
        body += ["## Export checks", "", "| check | result | detail |", "|---|---|---|", checks, ""]
    return "\n".join(front + [""] + body)


def _network_errors() -> tuple[type[BaseException], ...]:
    """Connection failures as huggingface_hub raises them: its HTTP library's (httpx2 in 2.x, httpx in 1.x)."""
    errors: list[type[BaseException]] = [OSError]
    for name in ("httpx2", "httpx"):
        try:
            errors.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(errors)


def push_to_hub(out_dir, repo_id: str, private: bool = False, token: str | None = None, log=print) -> str:
    """Create (or reuse) the model repository and upload the export in one commit; returns the repository URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    check_repo_id(repo_id)
    api = HfApi(token=token or hub_token())
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        with tempfile.TemporaryDirectory(prefix="grpokit-hub-") as tmp:
            names = stage(Path(out_dir), Path(tmp))
            log(f"uploading {len(names)} files to {repo_id}{' (private)' if private else ''}")
            api.upload_folder(repo_id=repo_id, folder_path=tmp, repo_type="model",
                              commit_message=f"grpokit export of {Path(out_dir).name}")
    except HfHubHTTPError as e:
        raise GrpokitError([Problem(f"--push-to-hub {repo_id}", str(e).splitlines()[0],
                                    "check that the token has write access to this namespace "
                                    "(a fine-grained token needs 'write' on it)")]) from None
    except _network_errors() as e:  # no route to the Hub: connection refused, DNS, timeouts
        raise GrpokitError([Problem(f"--push-to-hub {repo_id}", f"could not reach the Hub: {e}",
                                    "check the network (or HF_ENDPOINT); the export itself is done, "
                                    f"rerun with the same --out to push {out_dir}")]) from None
    return str(url)
