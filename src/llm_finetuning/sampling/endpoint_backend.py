"""Sampling through an OpenAI-compatible server (`trl vllm-serve`, `vllm serve`, or any
`/v1/chat/completions` endpoint), with the standard library only.

The server applies the model's chat template; the messages sent already carry `data.system_prompt`.
One request per prompt asks for `n=k` choices with `seed = seed + prompt index` (a server that returns
fewer choices is asked again for the rest). A choice whose `finish_reason` is `length` was cut at
max_completion_length. `$OPENAI_API_KEY`, when set, is sent as a bearer token.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from llm_finetuning.errors import UnusableInput
from llm_finetuning.sampling.backend import Completion, Message, SamplingSettings
from llm_finetuning.sampling.progress import SamplingProgress

TIMEOUT_S = 600.0
CONCURRENCY = 8
START_FIX = ("start the server (e.g. `trl vllm-serve --model MODEL` or `vllm serve MODEL`) and pass its base URL, "
             "or drop --endpoint to sample locally")


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

    def __init__(self, url: str, model: str | None = None, timeout_s: float = TIMEOUT_S) -> None:
        self.url = base_url(url)
        self.timeout_s = timeout_s
        self.model = model or self._served_model()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "endpoint": self.url, "served_model": self.model}

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get("OPENAI_API_KEY")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - user-given URL
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            body = exc.read().decode("utf-8", "replace")[:300]
            raise UnusableInput(f"endpoint {self.url}{path} answered HTTP {exc.code}: {body}",
                                "check that the server serves the brief's model and accepts these settings",
                                "--endpoint") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UnusableInput(f"endpoint {self.url} cannot be reached: {reason}", START_FIX, "--endpoint") from None

    def _served_model(self) -> str:
        listing = self._request("GET", "/v1/models")
        try:
            return str(listing["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise UnusableInput(f"endpoint {self.url}/v1/models lists no model", START_FIX, "--endpoint") from None

    def _sample_one(self, index: int, messages: list[Message], settings: SamplingSettings) -> list[Completion]:
        group: list[Completion] = []
        attempt = 0
        while len(group) < settings.k:
            payload = {
                "model": self.model, "messages": messages, "n": settings.k - len(group),
                # temperature 0 is greedy decoding on OpenAI-compatible servers (vLLM, SGLang, OpenAI)
                "temperature": 0.0 if settings.greedy else settings.temperature,
                "top_p": 1.0 if settings.greedy else settings.top_p,
                "max_tokens": settings.max_completion_length, "seed": settings.seed + index + attempt * 1_000_003,
            }
            if settings.chat_template_kwargs:  # vLLM's and SGLang's servers pass these to the chat template
                payload["chat_template_kwargs"] = settings.chat_template_kwargs
            answer = self._request("POST", "/v1/chat/completions", payload)
            choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
            if not choices:
                raise UnusableInput(f"endpoint {self.url} returned no choices for prompt {index}",
                                    "check the server's log", "--endpoint")
            for choice in choices[: settings.k - len(group)]:
                content = (choice.get("message") or {}).get("content") or ""
                group.append(Completion(prompt_index=index, sample_index=len(group), text=str(content),
                                        truncated=choice.get("finish_reason") == "length"))
            attempt += 1
        return group

    def generate(self, conversations: list[list[Message]], settings: SamplingSettings,
                 progress: SamplingProgress) -> list[list[Completion]]:
        results: list[list[Completion]] = [[] for _ in conversations]
        with ThreadPoolExecutor(max_workers=min(CONCURRENCY, max(1, len(conversations)))) as pool:
            futures = {pool.submit(self._sample_one, i, m, settings): i for i, m in enumerate(conversations)}
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                progress.advance(1, settings.k)
        return results
