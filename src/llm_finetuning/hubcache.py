"""Whether a hub model can be loaded here: in the local Hugging Face cache, or the hub reachable.

`finetune check` says at once when a brief's hub model is neither (a note: the brief itself is valid), and
the verbs that load a model (baseline, inspect, eval, launch) stop with the same Problem before
huggingface_hub spends about a minute retrying a connection that cannot succeed.

Online, decided honestly and cheaply: offline when `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is set to a
true value, which is huggingface_hub's own switch; otherwise, when no proxy is configured
(`HTTPS_PROXY`/`ALL_PROXY`), one TCP connection to the hub's host (`HF_ENDPOINT`, else huggingface.co, port
443) with a 3-second limit. With a proxy the host is not probed and the hub counts as reachable: the proxy,
not this machine, decides. The cache is read without importing huggingface_hub: `HF_HUB_CACHE`, else
`HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub` (`~/.cache/huggingface/hub`), folder
`models--ORG--NAME`, a snapshot holding config.json (or the brief's GGUF file). Standard library only.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from llm_finetuning.errors import Problem

TRUE = ("1", "on", "yes", "true")
PROBE_TIMEOUT_S = 3.0


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloaded models."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "huggingface" / "hub"


def is_cached(model_id: str, gguf_file: str | None = None) -> bool:
    """A snapshot of `model_id` in the cache holds config.json (or `gguf_file`)."""
    snapshots = hub_cache_dir() / f"models--{model_id.replace('/', '--')}" / "snapshots"
    wanted = gguf_file or "config.json"
    return snapshots.is_dir() and any((snap / wanted).is_file() for snap in snapshots.iterdir())


def offline_reason() -> str | None:
    """Why the hub cannot be reached from here (None: it can, or a proxy decides)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in TRUE:
            return f"{name}={os.environ[name]}"
    if any(os.environ.get(p) for p in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"no connection to {host}:{port} ({exc.strerror or type(exc).__name__})"
    return None


def unreachable_model(model_id: str, gguf_file: str | None = None) -> Problem | None:
    """The Problem `model_not_cached` when the hub model `model_id` is not cached and the hub cannot be reached;
    None when it is cached or the hub can be reached."""
    if is_cached(model_id, gguf_file):
        return None
    why = offline_reason()
    if why is None:
        return None
    return Problem("model_not_cached", "model.id",
                   f"the hub model {model_id!r} is not in the local Hugging Face cache ({hub_cache_dir()}) and the "
                   f"hub cannot be reached ({why})",
                   f"download it where the hub is reachable (`hf download {model_id}`) and copy the cache here, "
                   "or point model.id at a local model folder")
