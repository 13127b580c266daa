"""Generation mode matches the hardware: vllm-colocate runs on each training GPU; vllm-server needs GPUs
of its own on node 1; transformers generation runs anywhere and is the only choice on CPU."""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "generation_hardware"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    hw = brief.hardware
    mode, gpus, server = hw.generation, hw.gpus, hw.vllm_server_gpus
    if gpus == 0 and mode != "transformers":
        return [CheckResult(ID, FAIL, "hardware.generation", f"{mode} needs a GPU and hardware.gpus is 0",
                            "set `hardware.generation: transformers` for a CPU run")]
    if mode == "vllm-server" and gpus <= server:
        return [CheckResult(
            ID, FAIL, "hardware.vllm_server_gpus",
            f"vllm-server takes {server} of the {gpus} GPU(s) on node 1, leaving none to train",
            f"set `hardware.gpus: {server + 1}` or more, or `hardware.generation: vllm-colocate` on one GPU")]
    if mode != "vllm-server" and brief.states("hardware.vllm_server_gpus"):
        return [CheckResult(ID, WARN, "hardware.vllm_server_gpus", f"is set but generation is {mode}; it is ignored",
                            "remove it, or set `hardware.generation: vllm-server`")]
    detail = {"vllm-colocate": "vLLM shares each training GPU",
              "vllm-server": f"{server} GPU(s) serve vLLM, {gpus - server} train on node 1",
              "transformers": "plain transformers generation"}[mode]
    return [CheckResult(ID, PASS, "hardware.generation", f"{mode}: {detail}")]
