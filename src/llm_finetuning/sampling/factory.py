"""Which sampling backend runs, and building it.

Backends: `vllm` (offline `vllm.LLM`, on a CUDA GPU, when vLLM is installed), `endpoint` (an
OpenAI-compatible server: `trl vllm-serve`, `vllm serve`, ...), and `transformers` (batched
`generate`, on the GPU when one is visible, else the CPU). `auto` picks vLLM where it can run and
transformers otherwise; `--endpoint URL` always means the endpoint backend. Each backend's module is
imported by the function that builds it, so choosing one loads none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_finetuning.errors import UnusableInput
from llm_finetuning.sampling.backend import Backend
from llm_finetuning.vllm_support import VLLM_INSTALL, installed_vllm_version, vllm_problem

if TYPE_CHECKING:
    from llm_finetuning.models import ResolvedModel

BACKENDS = ("auto", "vllm", "transformers", "endpoint")


def vllm_installed() -> bool:
    return installed_vllm_version() is not None


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def choose_backend(requested: str, endpoint: str | None, has_vllm: bool, has_cuda: bool) -> str:
    """The backend to run, or UnusableInput saying why the requested one cannot run here."""
    if requested not in BACKENDS:
        raise UnusableInput(f"--backend {requested!r} is not one of {', '.join(BACKENDS)}", "use --backend auto")
    if endpoint:
        if requested not in ("auto", "endpoint"):
            raise UnusableInput(f"--endpoint and --backend {requested} both given",
                                "drop --backend (an endpoint is sampled through its HTTP API), or drop --endpoint")
        return "endpoint"
    if requested == "endpoint":
        raise UnusableInput("--backend endpoint needs --endpoint URL",
                            "pass --endpoint http://127.0.0.1:8000 (a `trl vllm-serve` or `vllm serve` server)")
    if requested == "vllm":
        if not has_vllm:
            raise UnusableInput("--backend vllm, but vLLM is not installed",
                                f"{VLLM_INSTALL} on a CUDA machine, or use --backend transformers")
        if not has_cuda:
            raise UnusableInput("--backend vllm, but no CUDA GPU is visible (vLLM's offline engine needs one)",
                                "run on a GPU machine, or use --backend transformers")
        return "vllm"
    if requested == "auto":
        return "vllm" if has_vllm and has_cuda else "transformers"
    return "transformers"


def make_backend(name: str, resolved: ResolvedModel | None, dtype: str, endpoint: str | None = None,
                 endpoint_model: str | None = None) -> Backend:
    """Instantiate the chosen backend (this loads the model, except for the endpoint backend, which loads
    only the tokenizer of `resolved` when one is given: episodes render and parse turns here)."""
    if name == "endpoint":
        from llm_finetuning.sampling.endpoint_backend import EndpointBackend

        assert endpoint is not None
        tokenizer = None
        if resolved is not None:
            from llm_finetuning.models import load_tokenizer

            tokenizer = load_tokenizer(resolved)
        return EndpointBackend(endpoint, model=endpoint_model, tokenizer=tokenizer)
    if name == "vllm":
        problem = vllm_problem("sampling with vLLM")
        if problem is not None:
            raise UnusableInput(problem.message, f"{problem.fix}, or use --backend transformers")
        from llm_finetuning.sampling.vllm_backend import VllmBackend

        assert resolved is not None  # only the endpoint samples without a local model
        return VllmBackend(resolved, dtype)
    from llm_finetuning.sampling.transformers_backend import TransformersBackend

    assert resolved is not None
    return TransformersBackend(resolved, dtype)
