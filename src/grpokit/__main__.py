"""`python -m grpokit ...`: the same as the `grpokit` command.

A worker process that `grpokit train --num-processes N` launched (grpokit.training.launch runs `-m grpokit train`
in each) ends with os._exit once its command has returned and its output is flushed: torch.distributed's C++
threads (gloo's, the rendezvous store's) can abort a finishing process in their teardown ("terminate called without
an active exception", SIGABRT) after training completed and every file was written, and torchrun then reports the
run as failed. The process group is destroyed first (grpokit.distributed.shutdown) and the Python exit handlers run
(the reward worker's among them); only the interpreter's own teardown is skipped.
"""
import atexit
import os
import sys

from grpokit.cli import main
from grpokit.distributed import processes

code = main()
if processes() > 1:
    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()  # CPython's runner of the atexit handlers, which os._exit would skip
    os._exit(code)
sys.exit(code)
