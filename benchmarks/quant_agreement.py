"""How far each GGUF quantisation moves a model: weight error and agreement with the f32 model.

    python benchmarks/quant_agreement.py [--model default] [--prompts 6] [--tokens 32] [--work DIR]

Converts the model to f16 and q8_0 with llama.cpp's converter, quantises the
f16 file to q6_k, q5_k_m, q4_k_m and q4_0 with llama.cpp's quantize (the same
functions `grpokit export` uses), loads each GGUF back through transformers
and prints one JSON line per type: file size, quantise seconds, the worst and
median per-tensor relative weight error, and teacher-forced top-1 agreement
with the f32 model's greedy tokens on a few chat prompts. These numbers set
`quantize.MIN_AGREEMENT` and `quantize.MAX_REL_ERROR` (README, "Evaluation,
report and export"). Single thread, so it runs beside other work.

Not measured: task accuracy after quantisation (run `grpokit eval` on an
export for that).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

QUESTIONS = ["What is 17 + 25?", "Janet has 3 apples and buys 5 more. How many apples does she have?",
             "A train travels 60 km in 1 hour. How far in 3 hours?", "What is 12 times 11?",
             "Tom had 40 dollars and spent 15. How much is left?", "If a box holds 6 eggs, how many eggs are in 7 boxes?"]


def main() -> None:
    import torch

    from grpokit import models
    from grpokit.export import LLAMA_QUANTS, agreement, convert_gguf, greedy, load_gguf, quantize_gguf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default", help="default (the embedded model), a folder or a hub id")
    ap.add_argument("--prompts", type=int, default=6, help=f"chat prompts (at most {len(QUESTIONS)})")
    ap.add_argument("--tokens", type=int, default=32, help="greedy tokens per prompt from the f32 model")
    ap.add_argument("--work", help="folder for the GGUF files (default: a temporary one)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    src = models.resolve_model_path(args.model)
    ref, tok = models.load_model(src, "float32").eval(), models.load_tokenizer(src)
    eos = [tok.eos_token_id]
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                            tokenize=True, return_dict=True)["input_ids"])
               for q in QUESTIONS[:args.prompts]]
    refs = [greedy(ref, p, args.tokens, eos) for p in prompts]
    weights = ref.state_dict()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        f16 = convert_gguf(Path(src), work / "model-f16.gguf", "f16")
        for quant in ["q8_0", *LLAMA_QUANTS]:
            t0 = time.time()
            path = (convert_gguf(Path(src), work / "model-q8_0.gguf", "q8_0") if quant == "q8_0"
                    else quantize_gguf(f16, work / f"model-{quant}.gguf", quant))
            seconds = time.time() - t0
            model = load_gguf(path)
            got = model.state_dict()
            errs = sorted(float((got[k].float() - w).norm() / w.norm().clamp_min(1e-12)) for k, w in weights.items())
            hits = total = 0
            for p, r in zip(prompts, refs):
                h, n = agreement(model, p, r)
                hits, total = hits + h, total + n
            print(json.dumps({"quant": quant, "MiB": round(path.stat().st_size / 2**20, 1), "secs": round(seconds, 1),
                              "worst_rel": round(errs[-1], 4), "median_rel": round(errs[len(errs) // 2], 4),
                              "agree": round(hits / max(1, total), 4), "tokens": total}), flush=True)


if __name__ == "__main__":
    main()
