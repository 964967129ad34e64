"""A recipe's own reward functions, written with TRL's reward signature.

    rewards:
      - {name: my_rewards:score, weight: 0.5}                  # a module on the import path (or my_rewards.score)
      - {path: rewards.py, function: score, role: penalty}     # a file, relative to the recipe

The function is called as TRL calls reward functions:

    score(prompts, completions, completion_ids=..., **columns) -> list[float | None]

with the plain completion texts, the dataset columns (one list per column),
and during training TRL's other keyword arguments (`trainer_state`,
`log_metric`, ...). A function with `**kwargs` gets all of them; one without
gets only the arguments it names (`def score(completions, answer)` works).
`params` in the recipe are passed as extra keyword arguments, and each must be
a named parameter of the function even when it takes `**kwargs`: `**kwargs`
would swallow a misspelt `limt: 150` without a word. It is wrapped like a
built-in reward (`RewardFunction`), so its errors are counted, it is logged as
`rewards/<function name>/mean`, and evaluation, preflight and the reward audit
score with it.

Checked before any model loads (`grpokit recipe check`, and so `train`):
`signature_problems` (params against the signature; required parameters that
are neither a column, a TRL argument nor a param; training-only TRL arguments
without a default), then `trial_problems`: one call with TRL's keyword
arguments on a few real rows, reporting an exception with its line, an exit, a
call past its limit, a return value that is not a list, a wrong length, a
non-number or a non-finite score (grpokit.recipe.own_reward_check then calls
it on every row of data.train, within a time budget). Every call, there and in
training, is contained by grpokit.rewards.guard: its own copies of the
columns, exits and endless iterators as errors, scores checked, an optional
deadline (the entry's `timeout_s`).
`reward_title` names it by module (or file) and function in `recipe check` and
the report.

Its role (registry.ROLES) comes from the recipe; without one it is
`correctness`: a reward a user writes for a task is usually the task's
verifier, and evaluation then reports its pass rate (the share of rows scoring
1.0). Give `role: shaping` or `role: penalty` to a reward that only nudges.
A module name is imported from the import path, then from the recipe's folder
and the current folder.
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

from grpokit.errors import Problem, text_of
from grpokit.rewards.guard import guarded_call, private_copy, scores_of
from grpokit.rewards.registry import BUILTIN, RewardFunction, RewardSpec

DEFAULT_ROLE = "correctness"


class OwnRewardError(Exception):
    """Loading failed; carries the Problem (where, what, fix)."""

    def __init__(self, problem: Problem):
        super().__init__(f"{problem.where}: {problem.message}")
        self.problem = problem


def is_own(name: str | None) -> bool:
    """Whether a reward `name` is an import path rather than a built-in name."""
    return bool(name) and name not in BUILTIN and (":" in name or "." in name)


def builtin_of(rc):
    """The reward table's row (registry.Builtin) of a recipe's reward entry; None for the recipe's own function."""
    return BUILTIN.get(rc.name) if rc.path is None and not is_own(rc.name) else None


def _import_module(module: str, search: list[Path], where: str):
    top = module.split(".")[0]
    added = [str(f) for f in search if str(f) not in sys.path]
    try:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != top:  # the module exists but something it imports does not
                raise
            sys.path[:0] = added  # then the recipe's folder and the current folder
            return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == top:
            raise OwnRewardError(Problem(where, f"no module named {top!r} (searched the import path and "
                                         f"{', '.join(str(f) for f in search)})", "use module:function of an "
                                         "importable module, or {path: file.py, function: name}")) from None
        raise OwnRewardError(Problem(where, f"importing {module!r} failed: {text_of(e)}",
                                     f"install {e.name!r} or remove the import")) from None
    except Exception as e:  # noqa: BLE001 - any error at import time is the user's module's, reported as such
        raise OwnRewardError(Problem(where, f"importing {module!r} raised {type(e).__name__}: {text_of(e)}",
                                     "fix the module so that it imports")) from None
    finally:
        for f in added:
            if f in sys.path:
                sys.path.remove(f)


def _load_file(path: Path, where: str):
    if not path.is_file():
        raise OwnRewardError(Problem(where, f"no file {path}", "give the path to a .py file, relative to the recipe"))
    name = f"grpokit_own_rewards_{abs(hash(str(path)))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's file: reported, never a traceback
        raise OwnRewardError(Problem(where, f"running {path} raised {type(e).__name__}: {text_of(e)}",
                                     "fix the file so that it imports")) from None
    sys.modules[name] = module
    return module


def load_function(name: str | None, path: str | None, function: str | None, base_dir: Path | None,
                  where: str) -> Callable:
    """The user's reward function from `module:function` / `module.function`, or from a file + function name."""
    search = [p for p in (base_dir, Path.cwd()) if p is not None]
    if path is not None:
        file = Path(path)
        module = _load_file(file if file.is_absolute() else (base_dir or Path.cwd()) / file, where)
        attr = function
    else:
        module_name, sep, attr = name.partition(":") if ":" in name else name.rpartition(".")
        if not module_name or not attr:
            raise OwnRewardError(Problem(where, f"{name!r} is not module:function",
                                         "write it as my_module:score (or my_module.score)"))
        module = _import_module(module_name, search, where)
    fn = getattr(module, attr or "", None)
    if fn is None:
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise OwnRewardError(Problem(where, f"{module.__name__ if path is None else path} has no function {attr!r}",
                                     f"functions defined there: {', '.join(found) or 'none'}"))
    if not callable(fn):
        raise OwnRewardError(Problem(where, f"{attr!r} is not a function", "point at a function"))
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    takes_completions = "completions" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if not takes_completions:
        raise OwnRewardError(Problem(where, f"{attr}() does not take `completions`",
                                     "use TRL's reward signature: def score(prompts, completions, **kwargs)"))
    return fn


# The keyword arguments TRL's GRPOTrainer passes every reward function (trl 1.16 `_calculate_rewards`), besides
# one list per dataset column. The last four are training-only: evaluation, preflight, the audit and
# `grpokit rewards score` pass none of them, so a function must not require them.
TRL_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments")
TRAINING_ONLY = ("trainer_state", "log_extra", "log_metric", "environments")
_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _parameters(fn: Callable) -> dict[str, inspect.Parameter] | None:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin or C function: nothing to match against
        return None


def _takes_kwargs(params: dict[str, inspect.Parameter] | None) -> bool:
    return params is None or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def own_scorer(fn: Callable, params: dict[str, Any], timeout_s: float | None = None, weight: float = 1.0) -> Callable:
    """The user's function as a registry scorer (rows re-scored one by one on error, as for built-ins).

    A function with `**kwargs` gets every argument TRL passes; one without gets only those it names, so
    `def score(completions, answer)` works as written. The user's code is contained (grpokit.rewards.guard):
    each call gets its own copies of the columns and prompts, a returned iterator is read to at most one item
    past the number of completions, `sys.exit()` and a `KeyboardInterrupt` it raises become errors naming the
    function, `timeout_s` (the recipe entry's, None: no deadline) bounds each call, and every score must be a
    finite number or None. `score.collect(...)` returns (what the function returned, its items read with that
    bound) for the recipe check, which inspects the type and length before `list()` hides them."""
    signature = _parameters(fn)
    accepts_all = _takes_kwargs(signature)
    accepted = {n for n, p in (signature or {}).items() if p.kind in _NAMED}

    def collect(completions: list[str], prompts: list | None = None, completion_ids: list | None = None,
                trainer_state=None, log_metric=None, log_extra=None, environments=None, limit_s=None, **columns):
        rows = {**{k: private_copy(v) for k, v in columns.items()},
                "prompts": private_copy(prompts) if prompts is not None else [None] * len(completions),
                "completion_ids": private_copy(completion_ids)}
        given = dict(rows, trainer_state=trainer_state, log_metric=log_metric, log_extra=log_extra,
                     environments=environments)
        kwargs = {k: v for k, v in given.items() if v is not None and (accepts_all or k in accepted)}
        texts = list(completions)
        return guarded_call(fn, lambda: fn(completions=texts, **kwargs, **params), len(texts),
                            timeout_s if limit_s is None else limit_s)

    def score(completions: list[str], prompts: list | None = None, completion_ids: list | None = None,
              trainer_state=None, log_metric=None, log_extra=None, environments=None, **columns):
        out, items = collect(completions, prompts, completion_ids, trainer_state, log_metric, log_extra,
                             environments, **columns)
        return scores_of(fn, out, items, list(completions), weight)

    score.collect = collect
    score.weight = weight
    return score


def signature_problems(fn: Callable, params: dict[str, Any], columns: list[str] | None
                       ) -> list[tuple[tuple, str, str]]:
    """What in the function's signature would fail once training calls it: (location suffix, what, fix).

    `params` (the recipe's) must each be a named parameter, even when the function takes `**kwargs` (which
    would swallow a misspelt one without a word); `columns` (the dataset's, None when unknown) must cover every
    required parameter that TRL does not pass itself."""
    name = getattr(fn, "__name__", "the function")
    sig = _parameters(fn)
    if sig is None:
        return []
    out: list[tuple[tuple, str, str]] = []
    named = [n for n, p in sig.items() if p.kind in _NAMED]
    for n, p in sig.items():
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is inspect.Parameter.empty:
            out.append(((), f"{name}() takes `{n}` positionally only, and TRL passes every argument by keyword",
                        f"remove the `/` from the signature: def {name}(prompts, completions, **kwargs)"))
    for p, value in params.items():
        if p in named:
            if p in TRL_ARGUMENTS or (columns and p in columns):
                what = "a TRL argument" if p in TRL_ARGUMENTS else "a dataset column"
                out.append((("params", p), f"param {p!r} would replace {what} of the same name",
                            f"rename the parameter in {name}() and in params"))
            continue
        close = difflib.get_close_matches(p, [n for n in named if n not in TRL_ARGUMENTS], n=1)
        swallowed = " (it takes **kwargs, but a param must be named in the signature: **kwargs would swallow a " \
                    "misspelt one)" if _takes_kwargs(sig) else ""
        fix = (f"did you mean {close[0]!r}? rename it in params" if close else
               f"name it in the signature (def {name}(prompts, completions, {p}=..., **kwargs)) or remove it from params")
        out.append((("params", p), f"{name}() has no parameter {p!r}{swallowed}", fix))
    for n in named:
        p = sig[n]
        if p.default is not inspect.Parameter.empty or n in params or n in ("prompts", "completions", "completion_ids"):
            continue
        if n in TRAINING_ONLY:
            out.append(((), f"{name}() requires `{n}`, which TRL passes in training only (evaluation, preflight, "
                        "the audit and `grpokit rewards score` do not)", f"give it a default: {n}=None"))
        elif columns is not None and n not in columns:
            out.append(((), f"{name}() requires `{n}`, which is neither a dataset column (the rows have: "
                        f"{', '.join(columns)}), a TRL argument nor a param",
                        "rename it to a column the rows have, give it a default, or set it in params"))
    return out


def build_own(rc, base_dir: Path | None, where: str) -> RewardFunction:
    """A RewardFunction for a recipe entry naming the user's own function (raises OwnRewardError)."""
    fn = load_function(rc.name if is_own(rc.name) else None, rc.path, rc.function, base_dir, where)
    label = reward_label(rc)
    doc = (inspect.getdoc(fn) or "the recipe's own reward function").splitlines()[0]
    timeout_s = getattr(rc, "timeout_s", None)
    weight = getattr(rc, "weight", 1.0)
    spec = RewardSpec(label, lambda **_: own_scorer(fn, rc.params, timeout_s, weight), doc,
                      required_columns(fn, rc.params), {}, rc.role or DEFAULT_ROLE)
    built = RewardFunction(label, own_scorer(fn, rc.params, timeout_s, weight), dict(rc.params), spec)
    built.function = fn  # the user's own function, for the recipe check's signature and trial call
    return built


def required_columns(fn: Callable, params: dict[str, Any]) -> tuple[str, ...]:
    """The dataset columns a function needs: its required parameters that neither TRL nor the params fill."""
    sig = _parameters(fn) or {}
    return tuple(n for n, p in sig.items() if p.kind in _NAMED and p.default is inspect.Parameter.empty
                 and n not in TRL_ARGUMENTS and n not in params)


def trial_problems(rf: RewardFunction, texts: list[str], columns: dict[str, list], prompts: list,
                   completion_ids: list[list[int]], context: dict, limit_s: float | None = None
                   ) -> list[tuple[str, str]]:
    """Call an own reward once, with TRL's keyword arguments, and say what training would trip over: (what, fix).

    An exception (with the line of the user's file it came from), an exit, a call past `limit_s`, a return value
    that is not one number (or None) per completion, a wrong length, and a non-finite score are each one problem."""
    from grpokit.rewards.guard import OwnRewardCallError, hard_deadlines, scores_of, user_line

    fn = getattr(rf, "function", rf.scorer)
    name = getattr(fn, "__name__", rf.name)
    n = len(texts)
    try:
        with hard_deadlines():  # a trial call that swallows its interrupts ends the check, naming it
            out, items = rf.scorer.collect(texts, prompts=prompts, completion_ids=completion_ids, limit_s=limit_s,
                                           **context, **columns)
        scores_of(fn, out, items, texts, getattr(rf.scorer, "weight", 1.0))
    except OwnRewardCallError as e:
        return [(str(e), e.fix)]
    except Exception as e:  # noqa: BLE001 - the user's code: reported with its own line, never a traceback
        return [(f"{name}() raised {type(e).__name__}: {_first_line(e)}{user_line(e, fn)}, called as TRL calls it "
                 f"on {n} completion(s) of real rows (answer-like and empty ones; columns: {', '.join(columns)})",
                 "fix the function; it must return one float (or None) per completion for any completion text, "
                 "the empty one included")]
    return []


def _first_line(e: BaseException) -> str:
    return (text_of(e).strip().splitlines() or [""])[0][:200]


def reward_title(entry) -> str:
    """A reward as a reader names it: the built-in name, `module:function`, or `file.py:function`.

    `entry` is a RewardConfig or a plain mapping (a run's config.yaml, read without validation)."""
    get = entry.get if isinstance(entry, dict) else (lambda k, d=None: getattr(entry, k, d))
    name, path, function = get("name"), get("path"), get("function")
    if path:
        return f"{Path(str(path)).name}:{function or '?'}"
    if name and is_own(name) and ":" not in name:
        module, _, attr = name.rpartition(".")
        return f"{module}:{attr}"
    return str(name) if name else "?"


def reward_label(rc) -> str:
    """The name a reward is logged under: the built-in name, or the own function's name (as TRL logs it)."""
    if rc.path is not None:
        return rc.function or ""
    if is_own(rc.name):
        return (rc.name.partition(":")[2] if ":" in rc.name else rc.name.rpartition(".")[2])
    return rc.name
