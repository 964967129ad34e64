"""The terminal grpokit's library code prints to: a rich Console that speaks on the main process only.

    from grpokit.console import console
    console.print("[yellow]note:[/] ...")

Light on purpose (rich and an environment variable, no torch): commands that load no model print through
it too (`grpokit compare`, `eval` tables). Errors are not printed here: they are raised, and every rank's
error reaches the CLI's stderr printer (grpokit.cli.output).
"""
from __future__ import annotations

from rich.console import Console

from grpokit.distributed import is_rank_zero


class MainConsole(Console):
    """A rich Console that prints on the main process only (grpokit.training.launch.is_rank_zero).

    With N processes every rank runs the same training code, so each status line (training ..., notes,
    completed at step ..., a signal's message) would otherwise appear N times. Errors are not printed here:
    they are raised, and every rank's error reaches the CLI's stderr printer (grpokit.cli.output), so a
    failure on any rank is still shown."""

    def print(self, *objects, **kwargs) -> None:
        if is_rank_zero():
            super().print(*objects, **kwargs)

    def log(self, *objects, **kwargs) -> None:
        if is_rank_zero():
            super().log(*objects, **kwargs)


console = MainConsole(highlight=False, soft_wrap=True)
