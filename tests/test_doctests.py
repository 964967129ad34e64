"""The runnable examples (`>>>`) in the docstrings of the public reward factories and of `grpokit.training.train`,
run by doctest: an example that no longer holds fails here (TRL's reward function docstrings are the model).

The reward examples load no model (a fraction of a second); `train`'s builds a tiny model from a config and
trains it one step (seconds).
"""
from __future__ import annotations

import doctest
import importlib

import pytest

from grpokit.rewards import BUILTIN
from grpokit.sandbox.isolation import detect_isolation

# Every module that defines a built-in reward's factory, and the registry (build_reward).
REWARD_MODULES = sorted({"grpokit.rewards.registry", *(b.factory.partition(":")[0] for b in BUILTIN.values())})


def run_examples(obj, name: str) -> int:
    """Run the examples of `obj`'s docstrings (and, for a module, its functions'); the number run. Fails with
    doctest's report of every example that did not give what it shows."""
    runner, report = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS), []
    for test in doctest.DocTestFinder().find(obj, name):
        runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
    return runner.tries


@pytest.mark.parametrize("module", REWARD_MODULES)
def test_reward_examples_run(module):
    if module == "grpokit.rewards.code" and detect_isolation().kind != "bwrap":
        pytest.skip("code_tests runs completions in bubblewrap, which cannot run here")
    assert run_examples(importlib.import_module(module), module) > 0  # every factory shows one


def test_every_reward_factory_has_an_example():
    for name, entry in BUILTIN.items():
        module, _, attr = entry.factory.partition(":")
        assert ">>>" in (getattr(importlib.import_module(module), attr).__doc__ or ""), name


def test_train_example_runs():
    from grpokit.training import grpo

    assert run_examples(grpo.train, "grpokit.training.train") > 0
