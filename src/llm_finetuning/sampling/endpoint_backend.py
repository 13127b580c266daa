"""Sampling through an OpenAI-compatible server (`trl vllm-serve`, `vllm serve`, or any
`/v1/chat/completions` endpoint), with the standard library only.

The server applies the model's chat template; the messages sent already carry `data.system_prompt`.
One request per prompt asks for `n=k` choices with `seed = seed + prompt index` (a server that returns
fewer choices is asked again for the rest). A choice whose `finish_reason` is `length` was cut at
max_completion_length. `$OPENAI_API_KEY`, when set, is sent as a bearer token.

Episodes (docs/sampling.md, Episodes) continue token ids instead: `generate_ids` sends each sequence to
`/v1/completions` with the ids as `prompt` and `return_token_ids: true` (vLLM's server then returns each
choice's `token_ids`, the request TRL 1.16's `VLLMClient.generate` sends). The brief's tokenizer, loaded
here, renders the prompts and parses the turns; a server that returns text only has its text tokenised
with that tokenizer, which can split it differently from the ids the model drew (the fallback).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING

from llm_finetuning.errors import UnusableInput
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.sampling.backend import ChatMessage, Completion, SamplingSettings
from llm_finetuning.sampling.progress import SamplingProgress

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

TIMEOUT_S = 600.0
CONCURRENCY = 8
START_FIX = ("start the server (e.g. `trl vllm-serve --model MODEL` or `vllm serve MODEL`) and pass its base URL, "
             "or drop --endpoint to sample locally")
COMPLETIONS_FIX = ("episodes need the server's `/v1/completions` with token-id prompts (`vllm serve MODEL` or "
                   "`trl vllm-serve --model MODEL` serve it); or sample episodes locally with `--backend transformers`")


def base_url(url: str) -> str:
    """`http://host:8000`, `http://host:8000/` and `http://host:8000/v1` all mean the same server."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3]
    if not url.startswith(("http://", "https://")):
        raise UnusableInput(f"--endpoint {url!r} is not an http(s) URL", "pass e.g. http://127.0.0.1:8000")
    return url


class EndpointBackend:
    name = "endpoint"

    def __init__(self, url: str, model: str | None = None, timeout_s: float = TIMEOUT_S,
                 tokenizer: PreTrainedTokenizerBase | None = None) -> None:
        self.url = base_url(url)
        self.timeout_s = timeout_s
        self.model = model or self._served_model()
        # The brief's tokenizer, for episodes only: chat completions leave the template to the server.
        self.tokenizer = tokenizer

    def describe(self) -> dict[str, JsonValue]:
        return {"backend": self.name, "endpoint": self.url, "served_model": self.model}

    def _request(self, method: str, path: str, payload: Mapping[str, object] | None = None,
                 missing_fix: str | None = None) -> JsonValue:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get("OPENAI_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - user-given URL
                answer: JsonValue = json.loads(resp.read().decode("utf-8"))
                return answer
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")[:300]
            if missing_fix and exc.code in (404, 405, 501):
                raise UnusableInput(f"endpoint {self.url} does not serve {path} (HTTP {exc.code}: {body})",
                                    missing_fix, "--endpoint") from None
            raise UnusableInput(f"endpoint {self.url}{path} answered HTTP {exc.code}: {body}",
                                "check that the server serves the brief's model and accepts these settings",
                                "--endpoint") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UnusableInput(f"endpoint {self.url} cannot be reached: {reason}", START_FIX, "--endpoint") from None

    def _served_model(self) -> str:
        listing = self._request("GET", "/v1/models")
        data = listing.get("data") if isinstance(listing, dict) else None
        first = data[0] if isinstance(data, list) and data else None
        if not isinstance(first, dict) or "id" not in first:
            raise UnusableInput(f"endpoint {self.url}/v1/models lists no model", START_FIX, "--endpoint")
        return str(first["id"])

    def _sample_one(self, index: int, messages: list[ChatMessage], settings: SamplingSettings) -> list[Completion]:
        group: list[Completion] = []
        attempt = 0
        while len(group) < settings.k:
            payload: dict[str, object] = {
                "model": self.model, "messages": messages, "n": settings.k - len(group),
                **settings.sampling_fields(),  # temperature 0 is greedy on vLLM, SGLang and OpenAI
                "max_tokens": settings.max_completion_length, "seed": settings.seed + index + attempt * 1_000_003,
            }
            if settings.chat_template_kwargs:  # vLLM's and SGLang's servers pass these to the chat template
                payload["chat_template_kwargs"] = settings.chat_template_kwargs
            answer = self._request("POST", "/v1/chat/completions", payload)
            choices = sorted(_choices(answer), key=_choice_index)
            if not choices:
                raise UnusableInput(f"endpoint {self.url} returned no choices for prompt {index}",
                                    "check the server's log", "--endpoint")
            for choice in choices[: settings.k - len(group)]:
                message = choice.get("message")
                content = (message.get("content") if isinstance(message, dict) else None) or ""
                group.append(Completion(prompt_index=index, sample_index=len(group), text=str(content),
                                        truncated=choice.get("finish_reason") == "length"))
            attempt += 1
        return group

    def generate(self, conversations: list[list[ChatMessage]], settings: SamplingSettings,
                 progress: SamplingProgress) -> list[list[Completion]]:
        results: list[list[Completion]] = [[] for _ in conversations]
        with ThreadPoolExecutor(max_workers=min(CONCURRENCY, max(1, len(conversations)))) as pool:
            futures = {pool.submit(self._sample_one, i, m, settings): i for i, m in enumerate(conversations)}
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                progress.advance(1, settings.k)
        return results

    def _continue_one(self, ids: list[int], max_new_tokens: int, settings: SamplingSettings,
                      seed: int) -> tuple[list[int], bool]:
        payload: dict[str, object] = {
            "model": self.model, "prompt": ids, "n": 1, "max_tokens": max_new_tokens,
            **settings.sampling_fields(), "seed": seed,
            "return_token_ids": True,  # vLLM's server: each choice then carries `token_ids`
        }
        answer = self._request("POST", "/v1/completions", payload, missing_fix=COMPLETIONS_FIX)
        choices = _choices(answer)
        if not choices:
            raise UnusableInput(f"endpoint {self.url}/v1/completions returned no choices for a token-id prompt",
                                "check the server's log; it must accept a list of token ids as `prompt`",
                                "--endpoint")
        return continuation_of(choices[0], self.tokenizer, max_new_tokens)

    def generate_ids(self, batch: list[list[int]], max_new_tokens: int, settings: SamplingSettings,
                     seed: int) -> list[tuple[list[int], bool]]:
        """One continuation of each token-id sequence (an episode's next turn), `seed + position` each,
        concurrent requests: (new ids up to and including EOS, whether it ended on EOS or a stop)."""
        out: list[tuple[list[int], bool]] = [([], False)] * len(batch)
        with ThreadPoolExecutor(max_workers=min(CONCURRENCY, max(1, len(batch)))) as pool:
            futures = {pool.submit(self._continue_one, ids, max_new_tokens, settings, seed + i): i
                       for i, ids in enumerate(batch)}
            for future in as_completed(futures):
                out[futures[future]] = future.result()
        return out


def _choices(answer: JsonValue) -> list[JsonObject]:
    """The choices of a server's answer (those that are objects)."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    return [c for c in choices if isinstance(c, dict)] if isinstance(choices, list) else []


def _choice_index(choice: JsonObject) -> int:
    index = choice.get("index", 0)
    return index if isinstance(index, int) else 0


def _token_id(value: JsonValue) -> int:
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"a token id is {type(value).__name__}, not a number")


def continuation_of(choice: JsonObject, tokenizer: PreTrainedTokenizerBase | None,
                    max_new_tokens: int) -> tuple[list[int], bool]:
    """(new token ids, ended on EOS or a stop) from one `/v1/completions` choice.

    `token_ids` (vLLM's `return_token_ids`) are the ids the model drew, EOS included when it stopped on
    one. Without them the text is tokenised with the brief's tokenizer (`add_special_tokens=False`), the
    tokenizer's EOS appended when `finish_reason` is `stop`, and the whole cut at `max_new_tokens`: the
    fallback, which differs from the drawn ids wherever the text tokenises another way.
    """
    ended = choice.get("finish_reason") == "stop"
    token_ids = choice.get("token_ids")
    if isinstance(token_ids, list):
        return [_token_id(t) for t in token_ids], ended
    if tokenizer is None:
        raise UnusableInput("the endpoint returned text without token ids, and no tokenizer is loaded to tokenise it",
                            COMPLETIONS_FIX, "--endpoint")
    ids = list(tokenizer(str(choice.get("text") or ""), add_special_tokens=False)["input_ids"])
    eos = tokenizer.eos_token_id
    if ended and eos is not None and (not ids or ids[-1] != eos):
        ids.append(int(eos))
    return ids[:max_new_tokens], ended and len(ids) <= max_new_tokens
