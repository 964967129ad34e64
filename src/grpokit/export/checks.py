"""The checks `grpokit export` runs before it reports success (see export.py's docstring for what each proves).

Each returns a `Check(name, ok, detail)`; they read the exported files back from disk, so a hand edit after
export is caught too. export.py builds the files.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from grpokit.export.quantize import MAX_REL_ERROR
from grpokit.export.serving import read_modelfile, render_go_template
from grpokit.generation import HFBackend, SamplingParams, run
from grpokit.run import nonfinite_weights
from grpokit.templates import PromptTemplate


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def gguf_metadata(gguf: Path) -> dict:
    stat = Path(gguf).stat()
    return _gguf_metadata(str(gguf), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)  # parsing the vocabulary arrays takes seconds; key includes mtime and size
def _gguf_metadata(path: str, _mtime: int, _size: int) -> dict:
    from gguf import GGUFReader

    fields = GGUFReader(path).fields

    def scalar(key):
        f = fields.get(key)
        return f.parts[-1][0].item() if f is not None else None

    arch = bytes(fields["general.architecture"].parts[-1]).decode()
    return {"arch": arch, "add_bos": bool(scalar("tokenizer.ggml.add_bos_token")),
            "bos_id": scalar("tokenizer.ggml.bos_token_id"), "key_length": scalar(f"{arch}.attention.key_length")}


# ---------------------------------------------------------------- checks
def _first_diff(a, b) -> str:
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at position {i}: {a[max(0, i - 12):i + 12]!r} vs {b[max(0, i - 12):i + 12]!r}"


def check_prompt_ids(out_dir: Path, template: PromptTemplate, train_tokenizer, questions: list[str]) -> list[Check]:
    """The prompt as vLLM (HF chat template) and Ollama (Modelfile TEMPLATE + GGUF tokenizer) build it = training ids.

    Reads the exported files back from disk, so a hand edit after export is caught too.
    """
    from transformers import AutoTokenizer

    out_dir = Path(out_dir)
    expected = [template.encode(train_tokenizer, template.build(q)) for q in questions]
    expected_text = [template.render(train_tokenizer, template.build(q)) for q in questions]
    checks = []
    hf_dir = out_dir / "hf"
    hf_tok = AutoTokenizer.from_pretrained(hf_dir)
    chat_template = (hf_dir / "chat_template.jinja").read_text(encoding="utf-8")
    problems = []
    for q, ids, text in zip(questions, expected, expected_text):
        msgs = q if isinstance(q, list) else [{"role": "user", "content": q}]  # a conversational row is sent as is
        got = hf_tok.apply_chat_template(msgs, chat_template=chat_template,
                                         add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        if list(got) != ids:
            got_text = hf_tok.apply_chat_template(msgs, chat_template=chat_template,
                                                  add_generation_prompt=True, tokenize=False)
            problems.append(f"{len(got)} ids vs {len(ids)} in training; {_first_diff(got_text, text)}")
    checks.append(Check("vllm prompt ids", not problems,
                        problems[0] if problems else f"{len(questions)} prompts give the training ids"))
    ollama = _ollama_files(out_dir)
    if ollama is not None:
        mf, meta, gguf_tok = ollama
        problems = []
        for q, ids, text in zip(questions, expected, expected_text):
            if not isinstance(q, str):
                continue  # a Modelfile renders one user prompt; conversations are checked through the HF template
            got, rendered = _ollama_ids(mf, meta, gguf_tok, [{"role": "user", "content": q}], None)
            if got != ids:
                problems.append(f"{len(got)} ids vs {len(ids)} in training; {_first_diff(rendered, text)}")
        checks.append(Check("ollama prompt ids", not problems,
                            problems[0] if problems else f"{len(questions)} prompts give the training ids"))
    return checks


def _ollama_files(out_dir: Path):
    """The export's Modelfile, its GGUF's metadata and the GGUF's own tokenizer; None without a Modelfile."""
    from transformers import AutoTokenizer

    modelfile = out_dir / "Modelfile"
    if not modelfile.is_file():
        return None
    mf = read_modelfile(modelfile)
    gguf = out_dir / mf["FROM"].removeprefix("./")
    return mf, gguf_metadata(gguf), AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def _ollama_ids(mf: dict, meta: dict, gguf_tok, messages: list[dict], tools) -> tuple[list[int], str]:
    """Ids (and text) of a chat as Ollama builds it from this Modelfile: TEMPLATE + SYSTEM, GGUF tokenizer."""
    from grpokit.export.gotemplate import render
    from grpokit.export.serving_tools import ollama_values

    template = mf.get("TEMPLATE", "{{ .Prompt }}")
    if ".Messages" in template:  # a chat template (tool runs): Ollama's /api/chat data
        rendered = render(template, ollama_values(messages, tools, mf.get("SYSTEM")))
    else:  # a prompt template: one user message as .Prompt
        rendered = render_go_template(template, {"System": mf.get("SYSTEM", ""), "Prompt": messages[-1]["content"],
                                                 "Response": ""})
    ids = ([meta["bos_id"]] if meta["add_bos"] else []) + list(gguf_tok(rendered, add_special_tokens=False)["input_ids"])
    return ids, rendered


def check_tool_prompts(out_dir: Path, template: PromptTemplate, train_tokenizer, tools: list[dict],
                       conversations: list[list[dict]]) -> list[Check]:
    """Tool chats (definitions, calls, results) as vLLM and Ollama build them from the export = as training renders.

    `conversations` hold no system turn: the exported chat template / Modelfile SYSTEM supply the training one.
    """
    from transformers import AutoTokenizer

    out_dir = Path(out_dir)
    kwargs = template.chat_template_kwargs()
    expected = [train_tokenizer.apply_chat_template(template.build(c), tools=tools, tokenize=False,
                                                    add_generation_prompt=True, **kwargs) for c in conversations]
    expected_ids = [list(train_tokenizer.apply_chat_template(template.build(c), tools=tools, tokenize=True,
                                                             return_dict=True, add_generation_prompt=True,
                                                             **kwargs)["input_ids"]) for c in conversations]
    what = f"{len(conversations)} tool chats ({sum(len(c) for c in conversations)} messages) give the training ids"
    hf_dir = out_dir / "hf"
    hf_tok = AutoTokenizer.from_pretrained(hf_dir)
    chat_template = (hf_dir / "chat_template.jinja").read_text(encoding="utf-8")
    problems = []
    for conv, ids, text in zip(conversations, expected_ids, expected):
        got = hf_tok.apply_chat_template(conv, tools=tools, chat_template=chat_template, tokenize=True,
                                         return_dict=True, add_generation_prompt=True)["input_ids"]
        if list(got) != ids:
            got_text = hf_tok.apply_chat_template(conv, tools=tools, chat_template=chat_template, tokenize=False,
                                                  add_generation_prompt=True)
            problems.append(f"{len(got)} ids vs {len(ids)} in training; {_first_diff(got_text, text)}")
    checks = [Check("vllm tool prompt ids", not problems, problems[0] if problems else what)]
    ollama = _ollama_files(out_dir)
    if ollama is not None:
        mf, meta, gguf_tok = ollama
        problems = []
        for conv, ids, text in zip(conversations, expected_ids, expected):
            got, rendered = _ollama_ids(mf, meta, gguf_tok, conv, tools)
            if got != ids:
                problems.append(f"{len(got)} ids vs {len(ids)} in training; {_first_diff(rendered, text)}")
        checks.append(Check("ollama tool prompt ids", not problems, problems[0] if problems else what))
    return checks


def check_loadable(hf_dir: Path, model) -> list[Check]:
    """"all weights finite" (a NaN checkpoint exports "identically") and "tokenizer loads", from the export."""
    from transformers import AutoTokenizer

    bad = nonfinite_weights(model)
    checks = [Check("all weights finite", not bad, f"NaN/inf in {', '.join(bad[:3])}" if bad else
                    f"{sum(1 for _ in model.parameters())} tensors, all finite")]
    try:
        AutoTokenizer.from_pretrained(hf_dir)
        checks.append(Check("tokenizer loads", True, f"AutoTokenizer.from_pretrained({Path(hf_dir).name}) works"))
    except Exception as e:  # any failure here is what a serving stack would hit
        checks.append(Check("tokenizer loads", False, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"))
    return checks


def greedy(model, ids: list[int], max_new_tokens: int, eos: list[int]) -> list[int]:
    """Greedy ids up to and including the stop id (stopping must agree too), through grpokit.generation.

    One prompt per call, unpadded: the exact-equality checks were calibrated on unpadded prompts, and
    left padding changes float rounding enough to flip a near tie.
    """
    params = SamplingParams(max_tokens=max_new_tokens, stop_token_ids=tuple(eos))
    return list(run(HFBackend(model, pad_token_id=eos[0], batch_size=1), [ids], params, progress=False)[0][0].ids)


def agreement(model, ids: list[int], reference: list[int]) -> tuple[int, int]:
    """Positions where `model`, fed the reference continuation, predicts the reference's next token."""
    import torch  # lazy, as in load_gguf

    if not reference:
        return 0, 0
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids + reference[:-1]])).logits[0, len(ids) - 1:]
    return int((logits.argmax(-1) == torch.tensor(reference)).sum()), len(reference)


def check_weights(hf_model, gguf_model, quant: str) -> Check:
    import torch  # lazy, as in load_gguf

    ref, got = hf_model.state_dict(), gguf_model.state_dict()
    missing = [k for k in ref if k not in got]
    if missing:
        return Check("gguf weights", False, f"{len(missing)} tensors missing after loading the GGUF, e.g. {missing[0]}")
    worst, worst_name = 0.0, ""
    for k, r in ref.items():
        g = got[k].to(r.dtype)
        if g.shape != r.shape:
            return Check("gguf weights", False, f"{k}: shape {tuple(g.shape)} vs {tuple(r.shape)}")
        if quant == "f32" or torch.equal(g, r):
            err = 0.0 if torch.equal(g, r) else float("inf")
        elif quant == "f16":
            err = 0.0 if torch.equal(g, r.half().to(r.dtype)) else float("inf")
        else:
            err = float((g - r).norm() / r.norm().clamp_min(1e-12))
        if err > worst:
            worst, worst_name = err, k
    limit = MAX_REL_ERROR.get(quant, 0.0)
    what = {"f32": "equal to the HF export", "f16": "equal to the HF export rounded to f16"}.get(
        quant, f"within {limit:.0%} relative error of the HF export")
    ok = worst <= limit
    detail = f"{len(ref)} tensors {what}" + (f" (worst {worst_name}: {worst:.4f})" if quant in MAX_REL_ERROR else "")
    return Check("gguf weights", ok, detail if ok else f"{worst_name} is not {what} (error {worst:.4g})")


def check_gguf_config(hf_model, gguf_model, prompts: list[list[int]], eos: list[int], max_new_tokens: int) -> Check:
    """The GGUF's metadata (heads, rope, norm eps, tied embeddings) rebuilds the same network as the HF config.

    The GGUF's own weights go into the HF-config model (`hf_model` is overwritten: call this last), so any
    difference in greedy output comes from the architecture read back from GGUF metadata, not from precision.
    """
    hf_model.load_state_dict(gguf_model.state_dict())
    same = sum(greedy(hf_model, ids, max_new_tokens, eos) == greedy(gguf_model, ids, max_new_tokens, eos)
               for ids in prompts)
    return Check("gguf config", same == len(prompts),
                 f"{same}/{len(prompts)} greedy generations identical with the GGUF's weights in the HF architecture")


def check_generations(name: str, model, prompts: list[list[int]], reference: list[list[int]], eos: list[int],
                      max_new_tokens: int, min_agreement: float) -> Check:
    outs = [greedy(model, ids, max_new_tokens, eos) for ids in prompts]
    exact = sum(o == r for o, r in zip(outs, reference))
    hits = total = 0
    for ids, ref in zip(prompts, reference):
        h, t = agreement(model, ids, ref)
        hits, total = hits + h, total + t
    rate = hits / max(1, total)
    ok = exact == len(prompts) if min_agreement >= 1.0 else rate >= min_agreement
    need = "exact" if min_agreement >= 1.0 else f">= {min_agreement:.0%} token agreement"
    return Check(name, ok, f"{exact}/{len(prompts)} greedy generations identical to the checkpoint, "
                           f"{rate:.1%} of {total} tokens agree (needs {need})")
