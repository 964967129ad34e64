"""`grpokit serve-vllm`: start vLLM's server for a recipe's model, as TRL 1.16 documents it for server-mode
training (`VLLM_SERVER_DEV_MODE=1 vllm serve ...`, TRL's own command builder), and print the training side's
settings."""
from __future__ import annotations

from grpokit.cli.output import add_set_option, err, print_notes
from grpokit.errors import GrpokitError, Problem
from grpokit.generation import render_command, run_server, serve_command, training_settings
from grpokit.recipe import load_recipe


def register(sub) -> None:
    p = sub.add_parser("serve-vllm", help="start vLLM's server (`vllm serve`, as TRL 1.16 builds it) with a recipe's "
                       "model (vLLM server mode)")
    p.add_argument("recipe", help="recipe YAML file")
    p.add_argument("--port", type=int, help="default: generation.server_port in server mode, else 8000")
    p.add_argument("--host", help="address to listen on (default: generation.server_host in server mode, else 0.0.0.0)")
    p.add_argument("--tensor-parallel-size", type=int, metavar="N", help="GPUs per engine "
                   "(default: generation.tensor_parallel_size)")
    p.add_argument("--gpu-memory-utilization", type=float, metavar="F", help="share of each server GPU for vLLM "
                   "(default: generation.gpu_memory_utilization in server mode, else TRL's 0.9)")
    p.add_argument("--max-model-len", type=int, metavar="N", help="default: generation.max_model_len, else "
                   "max_prompt_length + max_completion_length when the prompt length is capped")
    p.add_argument("--dry-run", action="store_true", help="print the command and the training settings, start nothing")
    add_set_option(p)
    p.set_defaults(func=cmd_serve_vllm)


def cmd_serve_vllm(args) -> int:
    bad = [(flag, value, rule) for flag, value, ok, rule in (
        ("--port", args.port, lambda v: 1 <= v <= 65535, "between 1 and 65535"),
        ("--tensor-parallel-size", args.tensor_parallel_size, lambda v: v >= 1, "at least 1"),
        ("--max-model-len", args.max_model_len, lambda v: v >= 1, "at least 1"),
        ("--gpu-memory-utilization", args.gpu_memory_utilization, lambda v: 0 < v <= 1, "above 0, at most 1"),
    ) if value is not None and not ok(value)]
    if bad:
        raise GrpokitError([Problem(flag, f"out of range: {value}", f"pass a value {rule}") for flag, value, rule in bad])
    recipe = load_recipe(args.recipe, args.set)
    print_notes(recipe)
    cmd = serve_command(recipe, port=args.port, host=args.host, gpu_memory_utilization=args.gpu_memory_utilization,
                        tensor_parallel_size=args.tensor_parallel_size, max_model_len=args.max_model_len)
    print(render_command(cmd))
    err.print("training side (recipe):", markup=False)
    err.print(training_settings(cmd), end="", markup=False)
    if args.dry_run:
        return 0
    return run_server(cmd)
