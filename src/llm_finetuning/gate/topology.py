"""How many training processes a brief's hardware section gives (shared by the batch and hardware checks)."""

from __future__ import annotations

from typing import Any


def training_processes(hw: dict[str, Any]) -> int:
    """Processes that train: GPUs x nodes, minus the vLLM server's GPUs in vllm-server mode; 1 on CPU."""
    gpus, nodes = int(hw.get("gpus", 1)), int(hw.get("nodes", 1))
    if gpus == 0:
        return 1
    server = int(hw.get("vllm_server_gpus", 1)) if hw.get("generation") == "vllm-server" else 0
    return gpus * nodes - server
