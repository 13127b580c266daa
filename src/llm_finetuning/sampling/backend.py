"""What every sampling backend takes and returns, and which backend runs.

Backends: `vllm` (offline `vllm.LLM`, on a CUDA GPU, when vLLM is installed), `endpoint` (an
OpenAI-compatible server: `trl vllm-serve`, `vllm serve`, ...), and `transformers` (batched
`generate`, on the GPU when one is visible, else the CPU). `auto` picks vLLM where it can run and
transformers otherwise; `--endpoint URL` always means the endpoint backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from llm_finetuning.errors import UnusableInput
from llm_finetuning.sampling.progress import SamplingProgress
from llm_finetuning.vllm_support import VLLM_INSTALL, installed_vllm_version, vllm_problem

BACKENDS = ("auto", "vllm", "transformers", "endpoint")

Message = dict[str, str]


@dataclass(frozen=True)
class SamplingSettings:
    """Generation settings, mirroring what GRPO training uses (top_p 1, no top-k).

    `greedy` decodes without sampling (transformers `do_sample=False`, temperature 0 for vLLM and an
    endpoint), one completion per prompt: `temperature` is then 0 and `top_p` is not used.
    """

    k: int
    temperature: float
    max_completion_length: int
    max_prompt_length: int | None = None
    seed: int = 0
    top_p: float = 1.0
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # data.chat_template_kwargs
    greedy: bool = False


@dataclass
class Completion:
    """One sampled completion. `truncated` is True when it hit max_completion_length without EOS."""

    prompt_index: int  # position in the list of prompts given to the backend
    sample_index: int  # 0..k-1 within its group
    text: str
    truncated: bool
    num_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"prompt_index": self.prompt_index, "sample_index": self.sample_index, "text": self.text,
                "truncated": self.truncated, "num_tokens": self.num_tokens}


class Backend(Protocol):
    name: str

    def describe(self) -> dict[str, Any]:
        """What ran (backend, device, served model ...), recorded next to the results."""
        ...

    def generate(self, conversations: list[list[Message]], settings: SamplingSettings,
                 progress: SamplingProgress) -> list[list[Completion]]:
        """k completions for every conversation, in order."""
        ...


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


def make_backend(name: str, resolved: Any, dtype: str, endpoint: str | None = None,
                 endpoint_model: str | None = None) -> Backend:
    """Instantiate the chosen backend (this loads the model, except for the endpoint backend)."""
    if name == "endpoint":
        from llm_finetuning.sampling.endpoint_backend import EndpointBackend

        assert endpoint is not None
        return EndpointBackend(endpoint, model=endpoint_model)
    if name == "vllm":
        problem = vllm_problem("sampling with vLLM")
        if problem is not None:
            raise UnusableInput(problem.message, f"{problem.fix}, or use --backend transformers")
        from llm_finetuning.sampling.vllm_backend import VllmBackend

        return VllmBackend(resolved, dtype)
    from llm_finetuning.sampling.transformers_backend import TransformersBackend

    return TransformersBackend(resolved, dtype)
