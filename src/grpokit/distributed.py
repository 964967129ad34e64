"""Rank helpers for multi-process training (as TRL keeps them in trl/distributed.py): no-ops in one process.

    if is_main_process(): run.write_status(summary)     # only the main process writes the run directory
    stop = broadcast(decision)                          # the main process's decision reaches every rank
    barrier()                                           # every rank waits here

Training calls them unconditionally: with one process they cost nothing and import nothing heavy; with N
(grpokit.training.launch starts them through accelerate) the collective ones go through accelerate's
PartialState, set up with the arguments TrainingArguments(use_cpu=...) passes.
"""
from __future__ import annotations

import os


def processes() -> int:
    """How many processes train together (the launcher's WORLD_SIZE; 1 alone)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _distributed() -> bool:
    return processes() > 1


def _state():
    import torch
    from accelerate import PartialState

    # Same arguments as TrainingArguments(use_cpu=...) passes, so whichever comes first sets up the same group.
    return PartialState(cpu=not torch.cuda.is_available())


def is_main_process() -> bool:
    return not _distributed() or _state().is_main_process


def is_rank_zero() -> bool:
    """The main process by the launcher's RANK (the global rank: one over all machines), with no process group.

    For console output: torchrun / accelerate / DeepSpeed set RANK in every worker before it starts, so this
    never makes a print the first collective call (is_main_process would set the group up), and holds in a
    unit test. LOCAL_RANK is not used: it is 0 once per machine."""
    try:
        return int(os.environ.get("RANK") or 0) == 0
    except ValueError:  # a malformed RANK: printing twice beats printing nothing
        return True


def barrier() -> None:
    if _distributed():
        _state().wait_for_everyone()


def broadcast(obj):
    """The main process's `obj` on every rank (pickled through torch.distributed)."""
    if not _distributed():
        return obj
    from accelerate.utils import broadcast_object_list

    _state()
    return broadcast_object_list([obj], from_process=0)[0]


def shutdown(finished: bool) -> None:
    """End this worker's process group before the interpreter exits (no-op in one process or without a group).

    A gloo group left to the interpreter's teardown can abort the process ("terminate called without an active
    exception", SIGABRT) after training completed: torch's own advice is to destroy the group before exit.
    `finished`: every rank got here the same way, so they first wait for each other (no peer closes its end
    of a collective still running); after an exception the group is only destroyed, never waited on."""
    if not _distributed():
        return
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    if finished:
        barrier()
    _state().destroy_process_group()


def any_rank(flag: bool) -> bool:
    """True on every rank when it is true on at least one (e.g. a signal that reached only some ranks)."""
    if not _distributed():
        return flag
    import torch
    import torch.distributed as dist

    t = torch.tensor([1 if flag else 0], device=_state().device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())
