"""A recipe's own reward functions, written with TRL's reward signature.

    rewards:
      - {name: my_rewards:score, weight: 0.5}                  # a module on the import path (or my_rewards.score)
      - {path: rewards.py, function: score, role: penalty}     # a file, relative to the recipe

The function is called as TRL calls reward functions:

    score(prompts, completions, completion_ids=..., **columns) -> list[float | None]

with the plain completion texts, the dataset columns (one list per column),
and during training TRL's other keyword arguments (`trainer_state`,
`log_metric`, ...). `params` in the recipe are passed as extra keyword
arguments. It is wrapped like a built-in reward (`RewardFunction`), so its
errors are counted, it is logged as `rewards/<function name>/mean`, and
evaluation, preflight and the reward audit score with it.

Its role (registry.ROLES) comes from the recipe; without one it is
`correctness`: a reward a user writes for a task is usually the task's
verifier, and evaluation then reports its pass rate (the share of rows scoring
1.0). Give `role: shaping` or `role: penalty` to a reward that only nudges.
A module name is imported from the import path, then from the recipe's folder
and the current folder.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

from grpokit.errors import Problem
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
        raise OwnRewardError(Problem(where, f"importing {module!r} failed: {e}",
                                     f"install {e.name!r} or remove the import")) from None
    except Exception as e:  # noqa: BLE001 - any error at import time is the user's module's, reported as such
        raise OwnRewardError(Problem(where, f"importing {module!r} raised {type(e).__name__}: {e}",
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
        raise OwnRewardError(Problem(where, f"running {path} raised {type(e).__name__}: {e}",
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


def own_scorer(fn: Callable, params: dict[str, Any]) -> Callable:
    """The user's function as a registry scorer (rows re-scored one by one on error, as for built-ins)."""
    accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())
    accepted = set(inspect.signature(fn).parameters)

    def score(completions: list[str], prompts: list | None = None, completion_ids: list | None = None,
              trainer_state=None, log_metric=None, log_extra=None, environments=None, **columns):
        context = dict(trainer_state=trainer_state, log_metric=log_metric, log_extra=log_extra,
                       environments=environments, completion_ids=completion_ids)
        kwargs = {k: v for k, v in {**columns, **context}.items()
                  if v is not None and (accepts_all or k in accepted)}
        prompts = prompts if prompts is not None else [None] * len(completions)
        return list(fn(prompts=prompts, completions=completions, **kwargs, **params))

    return score


def build_own(rc, base_dir: Path | None, where: str) -> RewardFunction:
    """A RewardFunction for a recipe entry naming the user's own function (raises OwnRewardError)."""
    fn = load_function(rc.name if is_own(rc.name) else None, rc.path, rc.function, base_dir, where)
    label = reward_label(rc)
    doc = (inspect.getdoc(fn) or "the recipe's own reward function").splitlines()[0]
    spec = RewardSpec(label, lambda **_: own_scorer(fn, rc.params), doc, (), {}, rc.role or DEFAULT_ROLE)
    return RewardFunction(label, own_scorer(fn, rc.params), dict(rc.params), spec)


def reward_label(rc) -> str:
    """The name a reward is logged under: the built-in name, or the own function's name (as TRL logs it)."""
    if rc.path is not None:
        return rc.function or ""
    if is_own(rc.name):
        return (rc.name.partition(":")[2] if ":" in rc.name else rc.name.rpartition(".")[2])
    return rc.name
