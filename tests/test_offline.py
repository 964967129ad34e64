"""Offline is detected, not waited for (issue 27, item 6).

With the network blocked (every DNS lookup and connect recorded and refused) and HF_HUB_OFFLINE unset, the
shipped Qwen3 recipes' `preflight --memory`, `recipe check`, `train --dry-run` and `serve-vllm --dry-run`
succeed with a note per unchecked model or `hf:` dataset, after one probe of the hub and nothing else;
with HF_HUB_OFFLINE=1 not even the probe. The check is what the command touches, not how long it takes.
"""
from __future__ import annotations

import socket
import threading

import pytest
from conftest import REPO

from grpokit.cli import main

QWEN3 = sorted(p.name for p in (REPO / "recipes").glob("qwen3-*.yaml"))


@pytest.fixture
def no_network(monkeypatch):
    """Refuse and record every name lookup and connection; the hub state as a fresh process has it."""
    from huggingface_hub import constants

    from grpokit import hub_access

    touched: list[str] = []

    def refuse(kind):
        def call(*args, **kwargs):
            touched.append(f"{kind} {args[0] if args else ''}")
            raise OSError(f"network blocked by the test ({kind})")
        return call

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: refuse("connect")(address))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_access, "_HUB_STATE", {})
    return touched


# (id, command line; RECIPE is the shipped recipe's path)
COMMANDS = [
    ("preflight --memory", ["preflight", "RECIPE", "--memory"]),
    ("recipe check", ["recipe", "check", "RECIPE"]),
    ("train --dry-run", ["train", "RECIPE", "--num-processes", "2", "--dry-run"]),
]


@pytest.mark.parametrize("name", QWEN3)
@pytest.mark.parametrize("argv", [c[1] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_qwen3_recipes_without_network_carry_on_after_one_probe(no_network, capsys, name, argv):
    recipe = str(REPO / "recipes" / name)
    assert main([recipe if a == "RECIPE" else a for a in argv]) == 0
    out = capsys.readouterr()
    if argv[0] == "preflight":  # the plan reads config.json from this machine only: no probe at all
        assert "not in this machine's Hugging Face cache; planned from grpokit's table" in out.err
        assert no_network == [] and "recommendation:" in out.out
        return
    assert "not checked on the hub (hub huggingface.co:443 unreachable" in out.err
    if "hf:" in (REPO / "recipes" / name).read_text():
        assert "data.train hf:openai/gsm8k: not checked on the hub" in out.err
    assert no_network == ["create_connection ('huggingface.co', 443)"]  # the probe, once; then nothing


def test_serve_vllm_dry_run_without_network(no_network, capsys):
    assert main(["serve-vllm", str(REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml"), "--dry-run"]) == 0
    assert "vllm serve Qwen/Qwen3-4B" in capsys.readouterr().out and len(no_network) == 1


def test_hf_hub_offline_is_honoured_without_a_probe(no_network, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["recipe", "check", str(REPO / "recipes" / "qwen3-14b-gsm8k-lora.yaml")]) == 0
    assert "not checked on the hub (HF_HUB_OFFLINE is set)" in capsys.readouterr().err
    assert no_network == []


def test_data_check_of_a_hub_dataset_offline_says_so_at_once(no_network, capsys):
    # the issue: 28 s of retries; now one probe, then the datasets cache only (here: not cached)
    assert main(["data", "check", "hf:openai/gsm8k", "--task", "math"]) == 1
    out = capsys.readouterr()
    assert "note: offline (hub huggingface.co:443 unreachable" in out.err and "datasets cache only" in out.err
    assert "cannot load hub dataset" in out.out and len(no_network) == 1


def test_a_probe_that_hangs_counts_as_offline(monkeypatch):
    # packets dropped: the connect would wait minutes; the probe gives up after HUB_PROBE_TIMEOUT_S
    from huggingface_hub import constants

    from grpokit import hub_access

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_access, "_HUB_STATE", {})
    monkeypatch.setattr(hub_access, "HUB_PROBE_TIMEOUT_S", 0.05)
    gate = threading.Event()

    def hangs(*args, **kwargs):
        gate.wait(5)
        raise OSError("timed out, much later")

    monkeypatch.setattr(socket, "create_connection", hangs)
    assert hub_access.hub_reachable() is False and "no answer within 0.05 s" in hub_access.offline_reason()
    gate.set()


@pytest.mark.parametrize("env, expected", [
    # (environment, where the probe connects)
    ({}, ("huggingface.co", 443)),
    ({"HTTPS_PROXY": "http://proxy.local:3128"}, ("proxy.local", 3128)),      # the hub is reached through it
    ({"HTTPS_PROXY": "proxy.local:3128", "NO_PROXY": "huggingface.co"}, ("huggingface.co", 443)),
])
def test_the_probe_goes_where_hub_requests_go(monkeypatch, env, expected):
    from huggingface_hub import constants

    from grpokit import hub_access

    monkeypatch.setattr(constants, "ENDPOINT", "https://huggingface.co")
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert hub_access.hub_address() == expected
