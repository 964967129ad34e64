"""What every command shares: the stderr console, the one error printer, the `--set` option."""
from __future__ import annotations

from rich.console import Console

from grpokit.errors import GrpokitError

err = Console(stderr=True, highlight=False, soft_wrap=True)


def print_error(e: GrpokitError) -> int:
    """Print `error: title`, then `- where: what` and `fix: ...` per problem; return the error's exit code."""
    err.print(f"[red]error:[/] {e.title or 'cannot continue'}", markup=True)
    for p in e.problems:
        # where/what/fix quote user input (file names, YAML values): printed as text, never as rich markup
        err.print(f"  - {p.where}: {p.message}", markup=False)
        if p.fix:
            err.print(f"      fix: {p.fix}", markup=False)
    return e.exit_code


def add_set_option(parser, help: str = "override a recipe value (repeatable), e.g. --set train.learning_rate=2e-5"):
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help=help)


def print_notes(recipe) -> None:
    """What validation could not check here (a hub id or `hf:` dataset while offline, vLLM/CUDA missing)."""
    for note in getattr(recipe, "notes", None) or []:
        err.print(f"[yellow]note:[/] {note}", highlight=False)
