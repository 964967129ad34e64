"""The `grpokit` command line: one sub-command per stage, each a thin call into its library module.

    grpokit demo                               # the main job on the embedded model
    grpokit train RECIPE.yaml [--set k=v ...] [--output-dir DIR] [--overwrite]
    grpokit train --resume RUN_DIR
    grpokit recipe check RECIPE.yaml [--set k=v ...]
    grpokit data check | generate | perturb | rewrite | import
    grpokit rewards list | score | audit
    grpokit preflight | eval | report | doctor | export | sandbox check
    grpokit rm candidates | export-csv | import-csv | train | eval   # reward model from rankings
    grpokit sft RECIPE.yaml | compare RUN_A RUN_B [--data FILE]     # SFT baseline, SFT vs GRPO
    grpokit serve-vllm RECIPE.yaml [--port P] [--dry-run]   # vLLM's server (`vllm serve`) for the recipe's model
    grpokit --version                          # also: python -m grpokit ...

One module per command group (`train` also holds `demo`); each has
`register(subparsers)` and its handlers, which parse arguments, call the
library and print. Handlers import the library inside the function, so a
command that needs no model (`rewards list`, `data check`, `recipe check`,
`doctor`) never imports torch, transformers or TRL and starts in well under a
second. Input problems (`GrpokitError`) are printed by `output.print_error`
as `where: what` / `fix:` lines with the error's exit code (2 for bad input,
1 for unusable data or a failed check), never as a traceback.
"""
from __future__ import annotations

import argparse
import errno
import os
import platform
import sys
import warnings
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version

from grpokit import __version__
from grpokit.cli import (
    compare,
    data,
    doctor,
    eval,
    export,
    preflight,
    recipe,
    report,
    rewards,
    rm,
    sandbox,
    serve,
    sft,
    train,
)
from grpokit.cli.output import err, os_error, print_error
from grpokit.errors import GrpokitError
from grpokit.run.reads import command

# The order of `grpokit --help`: the training loop first, then the tools around it.
COMMAND_GROUPS = (train, sft, recipe, data, rewards, rm, preflight, eval, compare, report, doctor, export, sandbox, serve)


def version() -> str:
    """The installed distribution's version; the package's own when run from a source tree without install."""
    try:
        return dist_version("grpokit")
    except PackageNotFoundError:
        return __version__


# What a bug report needs besides grpokit's own version (`trl env` prints the same for TRL): the libraries
# grpokit drives, and vLLM, which is optional.
REPORTED_PACKAGES = ("transformers", "trl", "peft", "accelerate", "datasets", "vllm")


def version_report() -> str:
    """`grpokit --version`: grpokit, Python, torch with its CUDA/MPS and devices, the libraries grpokit drives."""
    lines = [f"grpokit {version()}", f"python {platform.python_version()} ({platform.system().lower()} "
                                     f"{platform.machine()})"]
    try:
        import torch
    except ImportError:
        lines.append("torch: not installed (bash scripts/install.sh installs it)")
    else:
        lines.append(f"torch {torch.__version__}: {_devices(torch)}")
    for name in REPORTED_PACKAGES:
        try:
            lines.append(f"{name} {dist_version(name)}")
        except PackageNotFoundError:
            lines.append(f"{name}: not installed" + (" (optional: generation.backend vllm)" if name == "vllm" else ""))
    return "\n".join(lines)


def _devices(torch) -> str:
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        gib = torch.cuda.get_device_properties(0).total_memory / 1024 ** 3
        runtime = f"CUDA {torch.version.cuda}" if torch.version.cuda else f"ROCm {torch.version.hip}"
        return f"{runtime}, {len(names)} x {names[0]} ({gib:.0f} GiB)" + (
            f" and others ({', '.join(sorted(set(names[1:])))})" if len(set(names)) > 1 else "")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "MPS (Apple GPU), no CUDA"
    built = f"built with CUDA {torch.version.cuda} but no GPU visible" if torch.version.cuda else "CPU build"
    return f"no GPU: {built}"


class _VersionAction(argparse.Action):
    """--version: the report is built only when asked (it imports torch, which other commands must not pay for)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_report())
        parser.exit()


def _quiet_libraries() -> None:
    # transformers/TRL warnings about generation flags and experimental features are noise for a user.
    # Environment defaults rather than importing transformers here: that import pulls in torch (~2 s),
    # which commands without a model must not pay. transformers and huggingface_hub read them on import.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    if "transformers" in sys.modules:  # already imported (main() called in-process): set it directly
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpokit", description="GRPO fine-tuning with verifiable rewards, around TRL.")
    p.add_argument("--version", action=_VersionAction, help="print grpokit's version, Python, torch with its CUDA and "
                   "devices, and the versions of transformers, TRL, peft, accelerate, datasets and vLLM")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(sub)
    return p


# Arguments that name a file or folder: `~` is expanded in each, as the shell does for an unquoted word (a quoted
# "~/x" or --out=~/x arrives as it is, and made a folder named `~`). A hub id or a reward name never starts with ~.
PATH_ARGS = frozenset({"output_dir", "out", "input", "data", "resume", "recipe", "run_dir", "file", "target",
                       "results", "from_file", "rankings", "rm_dir", "prompts", "output", "write_filtered", "exclude",
                       "run_a", "run_b", "init_from", "reward", "base"})


def _expand_home(args) -> None:
    for name in PATH_ARGS & vars(args).keys():
        value = getattr(args, name)
        if isinstance(value, str):
            setattr(args, name, os.path.expanduser(value))
        elif isinstance(value, list):
            setattr(args, name, [os.path.expanduser(v) if isinstance(v, str) else v for v in value])


def main(argv: list[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    args = parser.parse_args(argv)
    _expand_home(args)
    try:
        with command():  # the files this command reads: no output of it is written over them (grpokit.run.writer)
            return int(args.func(args) or 0)
    except GrpokitError as e:
        return print_error(e)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except OSError as e:  # the disk's refusal (full, an I/O error), not a bug: said with the command to run again
        return print_error(os_error(e, sys.argv[1:] if argv is None else list(argv)))
    except Exception as e:
        from grpokit.run.safety import is_disk_full

        if not is_disk_full(e):  # a bug: its traceback
            raise
        # a library's writer that keeps no errno (safetensors, torch's zip writer) on a full disk
        full = OSError(errno.ENOSPC, str(e).strip().splitlines()[0][:300] if str(e).strip() else "no space left")
        return print_error(os_error(full, sys.argv[1:] if argv is None else list(argv)))


__all__ = ["build_parser", "main", "version", "version_report"]
