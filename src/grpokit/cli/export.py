"""`grpokit export`: merge / convert a checkpoint for serving, checked against training."""
from __future__ import annotations

from grpokit.errors import GrpokitError, Problem
from grpokit.export import CHECK_PROMPTS, QUANTS, TARGETS, check_repo_id, export, hub_token, push_to_hub


def register(sub) -> None:
    p = sub.add_parser("export", help="merge / convert a checkpoint for serving (HF, GGUF, Ollama; vLLM command)")
    p.add_argument("run_dir", help="a run directory from grpokit train")
    p.add_argument("--checkpoint", default="auto", help="best (from grpokit eval), last, a step number, "
                                                        "or auto = best if recorded, else last (default)")
    p.add_argument("--to", choices=TARGETS, default="hf", help="hf; gguf = hf + GGUF; ollama = gguf + Modelfile")
    p.add_argument("--quant", choices=QUANTS, default="f16",
                   help="GGUF precision (default f16); q6_k/q5_k_m/q4_k_m/q4_0 need llama.cpp's quantize (docs/export.md, Quantisations)")
    p.add_argument("--out", help="output folder (default RUN_DIR/export/checkpoint-N)")
    p.add_argument("--prompts", type=int, default=CHECK_PROMPTS, help="held-out prompts used by the checks")
    p.add_argument("--push-to-hub", metavar="USER/REPO", help="upload the checked export to this Hugging Face model "
                                                               "repository (token: HF_TOKEN or `hf auth login`)")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository private")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    if args.private and not args.push_to_hub:
        raise GrpokitError([Problem("--private", "only applies to --push-to-hub", "add --push-to-hub USER/REPO")])
    token = hub_token() if args.push_to_hub and check_repo_id(args.push_to_hub) else None  # before exporting
    from grpokit.cli.output import require_run

    require_run(args.run_dir, "export")
    result = export(args.run_dir, args.checkpoint, args.to, args.quant, args.out, args.prompts)
    for c in result.checks:
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
    for s in result.smoke:
        print(f"smoke ({s['kind']}): {s['question']!r}\n  -> {s['completion'].strip()!r}\n"
              f"  answer line: {'yes' if s['answer_line'] else 'no'}; correct: {s['correct']}")
    if not result.ok:
        raise GrpokitError([Problem(c.name, c.detail, "the export in " + str(result.out_dir) + " does not reproduce "
                                    "training; do not serve it") for c in result.checks if not c.ok],
                           exit_code=1, title="export check failed")
    for what, cmd in result.commands.items():
        print(f"{what}: {cmd}")
    print(f"exported to {result.out_dir}")
    if args.push_to_hub:
        print(f"pushed to {push_to_hub(result.out_dir, args.push_to_hub, args.private, token)}")
    return 0
