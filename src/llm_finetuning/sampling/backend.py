"""What every sampling backend takes and returns: the settings, the completions and the `Backend` protocol.

The concrete backends (`vllm_backend`, `endpoint_backend`, `transformers_backend`) import this module, and it
imports none of them: `sampling.factory` chooses and builds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict

from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.sampling.progress import SamplingProgress

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class _Turn(TypedDict):
    role: str
    content: str


class ChatMessage(_Turn, total=False):
    """One message of a prompt as training feeds it: role and content, and where a worked episode is part of the
    prompt, an assistant turn's `tool_calls` or a tool message's `name`."""

    tool_calls: JsonValue
    name: JsonValue



class EpisodeEnvironment(TypedDict):
    """An episode's environment: its class name and what its `get_reward()` returned (None: nothing)."""

    name: str
    reward: float | None


class _EpisodeFigures(TypedDict):
    messages: list[JsonObject]
    turns: int
    tool_calls: int
    tool_failures: int
    cut_at_limit: bool
    model_tokens: int
    tool_tokens: int


class EpisodeRecord(_EpisodeFigures, total=False):
    """An episode as records keep it (`sampling.episode.Episode.to_json`): the messages after the prompt (TRL's
    `completions`), its figures, and its environment when it has one."""

    environment: EpisodeEnvironment


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
    chat_template_kwargs: dict[str, JsonValue] = field(default_factory=dict)  # data.chat_template_kwargs
    greedy: bool = False

    def sampling_fields(self) -> dict[str, float]:
        """`temperature` and `top_p` as vLLM's and OpenAI-compatible servers take them: greedy decoding is
        temperature 0 there (top_p then 1)."""
        return {"temperature": 0.0 if self.greedy else self.temperature, "top_p": 1.0 if self.greedy else self.top_p}


@dataclass
class Completion:
    """One sampled completion. `truncated` is True when it hit max_completion_length without EOS."""

    prompt_index: int  # position in the list of prompts given to the backend
    sample_index: int  # 0..k-1 within its group
    text: str
    truncated: bool
    num_tokens: int | None = None
    # An episode of a tool-use brief (`sampling.episode.Episode.to_json`): its messages, tool calls and
    # figures; `text` is then its final answer and `num_tokens` the model's own tokens.
    episode: EpisodeRecord | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"prompt_index": self.prompt_index, "sample_index": self.sample_index, "text": self.text,
               "truncated": self.truncated, "num_tokens": self.num_tokens}
        return out if self.episode is None else {**out, "episode": self.episode}


class Backend(Protocol):
    name: str

    def describe(self) -> dict[str, JsonValue]:
        """What ran (backend, device, served model ...), recorded next to the results."""
        ...

    def generate(self, conversations: list[list[ChatMessage]], settings: SamplingSettings,
                 progress: SamplingProgress) -> list[list[Completion]]:
        """k completions for every conversation, in order."""
        ...

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase | None:
        """The tokenizer that renders prompts and parses turns here (None: the endpoint's server applies its own)."""
        ...

    def generate_ids(self, batch: list[list[int]], max_new_tokens: int, settings: SamplingSettings,
                     seed: int) -> list[tuple[list[int], bool]]:
        """One continuation of each token-id sequence (an episode's next turn): (new ids up to and including
        EOS, whether it ended on EOS)."""
        ...
