"""How many training processes a brief's hardware section gives (shared by the batch and hardware checks)."""

from __future__ import annotations

from llm_finetuning.brief import HardwareSpec


def training_processes(hw: HardwareSpec) -> int:
    """Processes that train, laid out as the renderer lays them out (render.plan.topology): on one node,
    the GPUs not given to the vLLM server; on several nodes in vllm-server mode, the first node serves
    and the others train (accelerate needs the same process count on every node); 1 on CPU."""
    gpus, nodes = hw.gpus, hw.nodes
    if gpus == 0:
        return 1
    if hw.generation != "vllm-server":
        return gpus * nodes
    if nodes == 1:
        return gpus - hw.vllm_server_gpus
    return (nodes - 1) * gpus
