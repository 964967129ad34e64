"""Asking the Hugging Face hub: whether it is reachable (one short probe a process), offline mode, and the
lookups that say whether a model or dataset id exists there.

Offline is detected, not waited for: `hub_reachable` opens one TCP connection to the hub (or the HTTPS proxy)
with a `HUB_PROBE_TIMEOUT_S` limit, once per process; when it fails, `go_offline` switches huggingface_hub,
transformers and datasets to their offline mode (HF_HUB_OFFLINE=1), so they read their caches at once instead
of retrying for most of a minute. HF_HUB_OFFLINE=1 set by the user is honoured without any probe. Loading a
model, and checking where it comes from, is grpokit.models.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
from urllib.parse import urlsplit


_TRUE = {"1", "ON", "YES", "TRUE"}
# A reachable hub accepts a TCP connection in tens of milliseconds, even across continents; a machine without
# network fails DNS at once or drops the packets (the connect would then wait for the OS timeout, minutes).
HUB_PROBE_TIMEOUT_S = 1.0
_HUB_STATE: dict[str, bool | str] = {}  # "reachable", "why": the probe's answer, once per process


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it (at import) or as the environment says now."""
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE:
        return True

    hub = sys.modules.get("huggingface_hub.constants")  # imported by someone already: its own reading
    return bool(hub is not None and hub.HF_HUB_OFFLINE)


def hub_address() -> tuple[str, int]:
    """(host, port) a hub request first connects to: the HTTPS proxy when one is set, else HF_ENDPOINT's host."""

    hub = sys.modules.get("huggingface_hub.constants")  # its ENDPOINT when imported (HF_ENDPOINT, read at import)
    endpoint = urlsplit(hub.ENDPOINT if hub is not None else os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    no_proxy = [h.strip().lstrip(".") for h in (os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or "").split(",")]
    proxy = next((os.environ[k] for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy") if os.environ.get(k)),
                 None)
    if proxy and not any(h and (host == h or host.endswith("." + h) or h == "*") for h in no_proxy):
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return p.hostname or host, p.port or 8080
    return host, endpoint.port or (443 if endpoint.scheme != "http" else 80)


def hub_reachable() -> bool:
    """Whether the hub can be reached from here: False at once under HF_HUB_OFFLINE, else one TCP connect
    (at most HUB_PROBE_TIMEOUT_S, answered once per process); an unreachable hub switches to offline mode."""
    if hub_offline():
        _HUB_STATE.setdefault("why", "HF_HUB_OFFLINE is set")
        return False
    if "reachable" not in _HUB_STATE:
        host, port = hub_address()
        found: dict[str, object] = {}

        def probe():
            try:
                socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S).close()
                found["ok"] = True
            except OSError as e:
                found["error"] = e

        worker = threading.Thread(target=probe, daemon=True)  # getaddrinfo has no timeout of its own
        worker.start()
        worker.join(HUB_PROBE_TIMEOUT_S)
        _HUB_STATE["reachable"] = bool(found.get("ok"))
        if not found.get("ok"):
            why = found.get("error") or f"no answer within {HUB_PROBE_TIMEOUT_S:g} s"
            _HUB_STATE["why"] = f"hub {host}:{port} unreachable: {why}"
            go_offline()
    return bool(_HUB_STATE["reachable"])


def offline_reason() -> str:
    """Why hub lookups are skipped: HF_HUB_OFFLINE, or what the probe found."""
    return str(_HUB_STATE.get("why") or ("HF_HUB_OFFLINE is set" if hub_offline() else "the hub is reachable"))


def go_offline() -> None:
    """Offline mode for huggingface_hub, transformers and datasets, as HF_HUB_OFFLINE=1 gives it: caches only."""

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    for name in ("huggingface_hub.constants", "datasets.config"):  # modules that read the variable at import
        module = sys.modules.get(name)
        if module is not None:
            module.HF_HUB_OFFLINE = True


def hub_model_problems(name: str) -> list[tuple[str, str]]:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(name, timeout=10)
    except GatedRepoError:
        return [(f"the hub model {name!r} is gated", "accept its licence on its hub page, then `hf auth login`")]
    except RepositoryNotFoundError:
        return [(f"no model {name!r} on the Hugging Face hub (or it is private and you are not logged in)",
                 "check the spelling (org/name), or `hf auth login` for a private model")]
    except Exception as e:  # noqa: BLE001 - any transport failure means the same thing to the user
        return [(f"cannot reach the Hugging Face hub to check {name!r}: {first_line(e)}",
                 "check the network; or set HF_HUB_OFFLINE=1 to skip this check (training then needs the model "
                 "in the local cache)")]
    return []


def hub_dataset_problem(dataset_id: str) -> tuple[tuple[str, str] | None, str | None]:
    """(problem, note) for a recipe's `hf:` dataset: one lookup when the hub is reachable, a note when not."""
    if not hub_reachable():
        return None, (f"not checked on the hub ({offline_reason()}); training reads it from the datasets cache "
                      "or fails")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().dataset_info(dataset_id, timeout=10)
    except GatedRepoError:
        return (f"the hub dataset {dataset_id!r} is gated", "accept its terms on its hub page, then `hf auth login`"), None
    except RepositoryNotFoundError:
        return (f"no dataset {dataset_id!r} on the Hugging Face hub (or it is private)",
                "check the spelling (hf:org/name), or `hf auth login` for a private dataset"), None
    except Exception as e:  # noqa: BLE001 - a transport failure after a good probe: not the recipe's fault
        return None, f"not checked on the hub ({first_line(e)})"
    return None, None


def first_line(e: BaseException) -> str:
    """The first line of an exception, at most 300 characters: what a one-line message can carry."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
