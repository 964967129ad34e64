"""A recipe's own reward function, called so that its mistakes stay its own (grpokit.rewards.own uses this).

Training, the recipe check, evaluation and `grpokit rewards score` all call the user's function through
`guarded_call`, and read what it returned through `scores_of`:

- it gets its own copies of the columns and prompts (`private_copy`): a reward doing `answer[:] = ...` must
  not change the gold answers the next reward is handed;
- `sys.exit()` (SystemExit) and a `KeyboardInterrupt` raised in its code are errors that name the function,
  never a silent exit of `recipe check`, `train` or `rewards score`. A KeyboardInterrupt raised by grpokit's
  own signal handler (a second Ctrl-C in training: grpokit.training.callbacks.GracefulStop) still stops the run;
- a returned iterator is read to at most one item past the number of completions (an endless generator is a
  wrong length, not a hang);
- every score must be None or a finite number: a string, an int too large for a float (10**400), nan or inf
  is an error naming the function, its module and its line;
- the working directory is restored after every call (a reward's `os.chdir` must not move where the run
  folder and the data resolve), what it prints goes to stderr (never into `rewards score`'s JSON lines on
  stdout), and `os._exit()` called during it is an error naming the function, not a silent exit 0;
- a score times the reward's weight must stay within `WEIGHTED_LIMIT` (1e308 at weight 2 is finite but sums
  to inf, and float32, which TRL sums in, overflows long before);
- a call can have a deadline (`limit_s`): past it the call is stopped and `OwnRewardTimeout` names the function.
  In the main thread (where training, the check and `rewards score` call rewards) a timer thread sends the
  main thread SIGUSR2, whose handler raises inside the user's code: that also interrupts a `time.sleep` or a
  blocking read, and leaves SIGALRM to the user's code (math-verify's own timeout uses it). Elsewhere the call
  runs in a daemon thread that is abandoned at the deadline (nothing can stop a thread in Python). Inside
  `hard_deadlines()` (the trial calls of `recipe check` and `train`'s check, and `rewards score`: commands
  that score nothing else), a call that catches the interrupt and keeps running HARD_GRACE_S past its deadline
  ends the process with exit 2 and an error naming the function: nothing else can stop it.

Errors raised by the user's code itself keep their type (a KeyError stays a KeyError) and carry the user's
file and line (`where_of`), which the registry's error lines show.
"""
from __future__ import annotations

import contextlib
import copy
import itertools
import math
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable

from grpokit.errors import text_of

_ATOMS = (str, int, float, bool, bytes, type(None))
_GRPOKIT = str(Path(__file__).resolve().parents[1])  # the grpokit package: frames here are not the user's
_RESEND_S = 1.0  # a deadline signal the user's code swallowed (`except BaseException`) is sent again this often
# The largest |score x weight| an own reward may give: rewards live in [-10, 10]; past 1e12 the summed reward
# overflows float32 (TRL's dtype) or the advantages lose every digit, and training learns from inf.
WEIGHTED_LIMIT = 1e12
HARD_GRACE_S = 5.0  # past its deadline by this much, a call that swallowed every interrupt ends a trial command
_REAL_EXIT = os._exit  # the leash replaces os._exit while the user's code runs; grpokit's own exit is this one
_HARD = [0]  # open hard_deadlines() blocks


class OwnRewardCallError(Exception):
    """A call of an own reward that broke the reward contract (exited, ran past its deadline, returned something
    that is not one score per completion); the message names the function, `fix` says what to change."""

    whole_batch = False  # the registry re-scores row by row on errors, except for these (grpokit.rewards.registry)

    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.fix = fix


class OwnRewardTimeout(OwnRewardCallError):
    # Every row of the batch would wait out the deadline again: the whole batch fails at once.
    whole_batch = True


class _Deadline(BaseException):
    """Raised inside the user's code at its deadline; a BaseException so that `except Exception` lets it pass."""


class _Exited(BaseException):
    """Raised by `os._exit` while an own reward runs: the process is not ended by the user's code."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _short_leash():
    """Around one call of the user's code: the working directory put back, prints sent to stderr, os._exit caught
    (a reward that imported `_exit` itself still ends the process: not covered)."""
    cwd = os.getcwd()
    real_exit = os._exit

    def _exit(code=0):
        raise _Exited(code)

    os._exit = _exit
    try:
        with contextlib.redirect_stdout(sys.stderr), _stdout_to_stderr():
            yield
    finally:
        os._exit = real_exit
        if os.getcwd() != cwd:
            os.chdir(cwd)


@contextlib.contextmanager
def _stdout_to_stderr():
    """File descriptor 1 pointed at 2 while the user's code runs: `os.write(1, ...)`, a C library's printf and a
    subprocess it starts write to stderr, never into `rewards score`'s JSON lines."""
    try:
        sys.__stdout__ and sys.__stdout__.flush()  # what grpokit printed before goes where it was meant to
        saved = os.dup(1)
    except (OSError, ValueError):  # no file descriptor 1 (closed, or a daemon's): nothing to point elsewhere
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def hard_deadlines():
    """Calls inside this block that outlive their deadline by HARD_GRACE_S, catching every interrupt, end the
    process with exit 2 and an error naming the function (the trial calls of a check, `rewards score`)."""
    _HARD[0] += 1
    try:
        yield
    finally:
        _HARD[0] -= 1


def function_title(fn: Callable) -> str:
    """'my_rewards:score (my_rewards.py:12)': module (or file) and function, and the line it is defined on."""
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    module = getattr(fn, "__module__", None) or "?"
    if code is None:
        return f"{module}:{name}"
    file = Path(code.co_filename).name
    if module.startswith("grpokit_own_rewards_"):  # loaded from a file (rewards: {path: ..., function: ...})
        module = file
    return f"{module}:{name} ({file}:{code.co_firstlineno})"


def user_line(e: BaseException, fn: Callable) -> str:
    """' (file.py:12, in score)': the deepest frame of the traceback inside the function's own file (else the
    deepest frame outside grpokit); '' when there is none."""
    frames = traceback.extract_tb(e.__traceback__)
    target = getattr(getattr(fn, "__code__", None), "co_filename", None)
    own = [f for f in frames if f.filename == target] or [f for f in frames if not _in_grpokit(f.filename)]
    if not own:
        return ""
    f = own[-1]
    return f" ({Path(f.filename).name}:{f.lineno}, in {f.name})"


def where_of(e: BaseException) -> str:
    """The user's file and line an error was tagged with by guarded_call ('' for any other error)."""
    return getattr(e, "_grpokit_where", "")


def _in_grpokit(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_GRPOKIT)


def private_copy(value: Any) -> Any:
    """A copy the user's function may change at will: a list of plain values is copied flat (cheap: a batch's
    columns are lists of strings and numbers), token-id lists one level deeper, anything else deeply."""
    if value is None:
        return None
    if isinstance(value, list):
        if all(type(x) in _ATOMS for x in value):
            return list(value)
        # Token ids: lists of ints, copied one level down (judged by each list's first item, which keeps this
        # linear in rows, not tokens); chat prompts (lists of message dicts) are copied deeply below.
        if all(isinstance(x, list) and (not x or type(x[0]) in _ATOMS) for x in value):
            return [list(x) for x in value]
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object that cannot be copied is passed as it is
        return value


def guarded_call(fn: Callable, call: Callable[[], Any], n: int, limit_s: float | None) -> tuple[Any, list | None]:
    """(what `call()` returned, its items read with the bound of n + 1; None when it is not a sequence of
    scores: a number, a string, a dict); raises OwnRewardCallError for an exit or a timeout, and the user's own
    exception (tagged with its file and line) when the function raised."""
    def run() -> tuple[Any, list | None]:
        out = call()
        if isinstance(out, (str, bytes, dict)) or not hasattr(out, "__iter__"):
            return out, None
        return out, list(itertools.islice(iter(out), n + 1))  # a generator runs here, inside the deadline

    title = function_title(fn)
    try:
        with _short_leash():
            return _with_deadline(run, limit_s, title)
    except _Deadline:
        raise OwnRewardTimeout(f"{title} ran past its time limit of {limit_s:g} s on {n} completion(s) and was "
                               "stopped", "make it faster (or find where it hangs: a network call, a loop that "
                               "never ends), or raise timeout_s on its rewards: entry") from None
    except _Exited as e:
        raise OwnRewardCallError(f"{title} called os._exit({text_of(e.code, repr)}){user_line(e, fn)} instead of returning "
                                 "scores: that would end training (or the check) without a word",
                                 "return one score (or None) per completion; raise an exception for a real error, "
                                 "never end the process") from None
    except SystemExit as e:
        raise OwnRewardCallError(f"{title} called sys.exit({text_of(e.code, repr)}){user_line(e, fn)} instead of returning "
                                 "scores", "return one score (or None) per completion; raise an exception "
                                 "for a real error, never exit") from e
    except KeyboardInterrupt as e:
        frames = traceback.extract_tb(e.__traceback__)
        if frames and _in_grpokit(frames[-1].filename):  # grpokit's own Ctrl-C handler: the user stops the run
            raise
        raise OwnRewardCallError(f"{title} raised KeyboardInterrupt{user_line(e, fn)} (or Ctrl-C was pressed "
                                 "while it ran)", "do not raise KeyboardInterrupt from a reward; raise an "
                                 "exception for a real error") from e
    except Exception as e:
        try:
            e._grpokit_where = user_line(e, fn)
        except Exception:  # noqa: BLE001 - an exception object that takes no attributes: shown without its line
            pass
        raise


def scores_of(fn: Callable, out: Any, items: list | None, texts: list[str], weight: float = 1.0
              ) -> list[float | None]:
    """The scores in what the function returned (see guarded_call), or OwnRewardCallError saying what is wrong;
    `weight`: the reward's weight in the recipe (a score times it must stay within WEIGHTED_LIMIT)."""
    name, title, n = getattr(fn, "__name__", "the function"), function_title(fn), len(texts)
    at = f" [{title}]"
    if items is None:
        raise OwnRewardCallError(f"{name}() returned {type(out).__name__} {_short(out)}, not a list with one score "
                                 f"per completion{at}", f"return a list: [score(c) for c in completions] ({n} "
                                 "completions were passed)")
    if len(items) != n:
        got = f"more than {n} score(s) (an endless iterator?)" if len(items) > n else f"{len(items)} score(s)"
        raise OwnRewardCallError(f"{name}() returned {got} for {n} completions{at}",
                                 "return exactly one score per completion, in order (TRL refuses any other length)")
    scores: list[float | None] = []
    for i, value in enumerate(items):
        if value is None:
            scores.append(None)
            continue
        number, why = _number(value)
        if number is None:
            raise OwnRewardCallError(f"{name}() returned {type(value).__name__} {_short(value)} for completion "
                                     f"{i}, {why}{at}", "return a float (or None where the reward does not apply) "
                                     "for every completion")
        if not math.isfinite(number):
            raise OwnRewardCallError(f"{name}() returned {number} for completion {i} ({_short(texts[i])}){at}",
                                     "return a finite number, or None where the reward does not apply (TRL then "
                                     "averages over the other rewards): inf/nan would poison the summed reward and "
                                     "the advantages")
        if abs(number * weight) > WEIGHTED_LIMIT:
            raise OwnRewardCallError(f"{name}() returned {number:g} for completion {i}, which at weight {weight:g} "
                                     f"is past ±{WEIGHTED_LIMIT:g}: the summed reward would overflow (inf) or the "
                                     f"advantages lose every digit{at}",
                                     "return scores on a small scale (rewards are usually 0 to 1) and set the "
                                     "reward's share with weight")
        scores.append(number)
    return scores


def _number(value: Any) -> tuple[float | None, str]:
    if isinstance(value, (str, bytes)):
        return None, "not a number"
    try:
        return float(value), ""
    except OverflowError:
        return None, "a number too large for a float"
    except Exception:  # noqa: BLE001 - whatever float() refuses (a list, a tensor of many values) is no score
        return None, "not a number"


def _short(value: object, limit: int = 40) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"of about {int(value.bit_length() * 0.30103)} digits"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a repr that raises is still a value to name
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------- deadlines
def _with_deadline(run: Callable[[], Any], limit_s: float | None, title: str = "") -> Any:
    if not limit_s:
        return run()
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_kill"):
        return _in_main_thread(run, limit_s, title)
    return _in_daemon_thread(run, limit_s)


def _end_the_process(title: str, limit_s: float) -> None:
    """A trial call that caught every interrupt past its deadline: said with where/what/fix, then exit 2."""
    sys.__stderr__.write(f"error: own reward stopped\n  - {title}: ran {HARD_GRACE_S:g} s past its time limit of "
                         f"{limit_s:g} s and caught every interrupt sent to stop it (an `except BaseException` that "
                         "retries?)\n      fix: let KeyboardInterrupt and other BaseExceptions pass (catch Exception), "
                         "and make the function return within its timeout_s\n")
    sys.__stderr__.flush()
    _REAL_EXIT(2)


def _in_main_thread(run: Callable[[], Any], limit_s: float, title: str = "") -> Any:
    state = {"inside": True}
    done = threading.Event()
    main = threading.main_thread().ident

    def handler(signum, frame):
        if state["inside"]:
            raise _Deadline()

    hard = _HARD[0] > 0

    def watch():
        if done.wait(limit_s):
            return
        waited = 0.0
        while not done.is_set():
            if hard and waited >= HARD_GRACE_S:
                _end_the_process(title, limit_s)
            signal.pthread_kill(main, signal.SIGUSR2)
            done.wait(_RESEND_S)
            waited += _RESEND_S

    previous = signal.signal(signal.SIGUSR2, handler)
    watcher = threading.Thread(target=watch, name="grpokit-reward-deadline", daemon=True)
    watcher.start()
    try:
        try:
            return run()
        finally:
            state["inside"] = False  # a signal from here on is ignored; one in this very line still counts
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGUSR2, previous)


def _in_daemon_thread(run: Callable[[], Any], limit_s: float) -> Any:
    box: dict[str, Any] = {}

    def target():
        try:
            box["out"] = run()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread below
            box["error"] = e

    thread = threading.Thread(target=target, name="grpokit-reward-call", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        raise _Deadline()
    if "error" in box:
        raise box["error"]
    return box["out"]
