"""Episodes: multi-turn tool use, sampled the way TRL 1.16's GRPOTrainer runs it in training.

TRL's loop (`GRPOTrainer._tool_call_loop`, private) is followed step for step, with TRL's public pieces
where it has them (`trl.chat_template_utils.parse_response`, `supports_tool_calling`,
`add_response_schema`):

1. the prompt is rendered with the tools' JSON schemas (`apply_chat_template(tools=...)`) and each of
   its k samples is one episode (one environment instance each, `reset(**row)` first, its observation
   appended to the last prompt message);
2. a generated turn is parsed with `parse_response`; while it holds tool calls and fewer than
   `episode.max_turns` rounds ran, every call is made and its result (or `{"error": ...}` when the tool
   raised, is unknown, or passed `episode.tool_timeout_s`) becomes a `tool` message;
3. the next turn is generated from the token ids prompt + episode so far + the template's tool-result
   suffix (no re-tokenisation), and the whole episode, tool results included, shares
   `grpo.max_completion_length`: a tool result that would pass it ends the episode as it stood.

`tool_mask` marks the model's own tokens (1) against the tool results' (0), as TRL's does; the loss in
training covers only the 1s. The loop is backend-free: it takes a `generate(ids_batch, max_new_tokens)`
function, which every backend's `generate_ids` provides (transformers, vLLM, an endpoint's
`/v1/completions`). Heavy imports stay inside functions.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from llm_finetuning.brief.episode import EpisodeSpec, template_path
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.sampling.backend import ChatMessage, EpisodeRecord
from llm_finetuning.sampling.chat import chat_template_call

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from llm_finetuning.rewards.code import VerifiedCode

# A tool as the model calls it: keyword arguments from the model's JSON, any result (shown to it through str()).
Tool = Callable[..., object]


class Environment(Protocol):
    """An episode's environment instance: `reset(**row)` first (its observation, a string, is appended to the
    prompt); its other public methods are tools, and an optional `get_reward()` scores the episode."""

    def reset(self, **row: object) -> object: ...


# One generated turn: (new token ids up to and including EOS, whether it ended on EOS).
Generate = Callable[[list[list[int]], int], list[tuple[list[int], bool]]]


@dataclass
class HungCalls:
    """The tool calls of one sampling run that passed their time limit, by tool: each left its thread
    running (a Python thread cannot be stopped), which `warning` reports once the run is done."""

    timeout_s: float
    threads: dict[str, list[threading.Thread]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, tool: str, thread: threading.Thread) -> None:
        with self._lock:
            self.threads.setdefault(tool, []).append(thread)

    def warning(self) -> str | None:
        """One line naming every tool that hung, how many of its calls did and how many still run."""
        if not self.threads:
            return None
        counts = ", ".join(f"{tool} {len(ts)} call(s), {sum(t.is_alive() for t in ts)} still running"
                           for tool, ts in sorted(self.threads.items()))
        return (f"warning: tool calls passed episode.tool_timeout_s ({self.timeout_s:g} s) and were left "
                f"running in the background: {counts}; make the tool return in time (or raise)")


def timed(func: Tool, timeout_s: float, hung: HungCalls | None = None) -> Tool:
    """`func` with a wall-clock limit: past it the call raises TimeoutError, which TRL's loop (and ours)
    hands to the model as the tool's `{"error": ...}` result. The name, signature and docstring stay, so
    `get_json_schema` reads the tool as before. A call that never returns leaves its daemon thread
    behind, counted in `hung`; the episode goes on."""

    @functools.wraps(func)
    def call(*args: object, **kwargs: object) -> object:
        value: list[object] = []
        error: list[BaseException] = []

        def run() -> None:
            try:
                value.append(func(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - the tool's failure is the model's result
                error.append(exc)

        worker = threading.Thread(target=run, daemon=True, name=f"tool-{func.__name__}")
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            if hung is not None:
                hung.add(func.__name__, worker)
            raise TimeoutError(f"{func.__name__} did not return within {timeout_s:g} s")
        if error:
            raise error[0]
        return value[0]

    return call


def environment_tools(instance: object) -> list[Tool]:
    """An environment's tools as TRL reads them: its public methods other than reset and get_reward."""
    return [getattr(instance, name) for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def timed_environment(cls: type, timeout_s: float, hung: HungCalls | None = None) -> type:
    """A subclass of `cls`, same name, whose tool methods carry the time limit (`timed`)."""
    methods = {name: timed(f, timeout_s, hung) for name, f in inspect.getmembers(cls, predicate=inspect.isfunction)
               if name not in ("reset", "get_reward") and not name.startswith("_")}
    return type(cls.__name__, (cls,), {**methods, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                       "__doc__": cls.__doc__})


@dataclass
class Toolbox:
    """What an episode may call: standalone tools, or an environment class (one instance per episode)."""

    tools: list[Tool]
    environment: Callable[[], Environment] | None = None  # a class
    hung: HungCalls | None = None  # the calls that passed the time limit, when the tools are `timed` with it

    def open(self) -> tuple[Environment | None, list[Tool]]:
        """(a fresh environment instance or None, the tools of an episode)."""
        if self.environment is None:
            return None, list(self.tools)
        instance = self.environment()
        return instance, list(self.tools) + environment_tools(instance)

    def schema_tools(self) -> list[Tool]:
        """The tools a prompt is rendered with (an environment's read from a probe instance)."""
        return self.open()[1]


def load_toolbox(spec: EpisodeSpec, folder: Path, code: VerifiedCode | None = None) -> Toolbox:
    """The brief's tools or environment, run in the process's confined child (`sandbox.project_code`) from the
    source bytes read here (with `code`, those a run's verification read), each call under
    `episode.tool_timeout_s`; the calls that pass it are counted in the toolbox's `hung`."""
    from llm_finetuning.rewards.code import module_sources
    from llm_finetuning.sandbox.project_code import confined_environment, confined_tool

    hung = HungCalls(spec.tool_timeout_s)
    tools = [timed(confined_tool(ref, code.modules(ref, folder) if code is not None else module_sources(ref, folder)),
                   spec.tool_timeout_s, hung) for ref in spec.tools]
    env = None
    if spec.environment:
        ref = spec.environment
        env = timed_environment(confined_environment(ref, code.modules(ref, folder) if code is not None
                                                     else module_sources(ref, folder)), spec.tool_timeout_s, hung)
    return Toolbox(tools, env, hung)


def tool_schema_problems(spec: EpisodeSpec, folder: Path) -> list[Problem]:
    """Every tool that does not import or yields no JSON schema (transformers' `get_json_schema`), each loaded
    in the confined child as training loads it."""
    from llm_finetuning.rewards.code import CodeNotFound, module_sources
    from llm_finetuning.sandbox.project_code import (
        ConfinementUnavailable,
        ProjectCodeError,
        ShapeError,
        confined_environment,
        confined_tool,
    )

    problems: list[Problem] = []
    for path, ref in spec.code_refs():
        try:
            if path == "episode.environment":
                confined_environment(ref, module_sources(ref, folder))
            else:
                confined_tool(ref, module_sources(ref, folder))
        except ConfinementUnavailable as exc:
            return problems + exc.problems
        except CodeNotFound as exc:
            problems.append(Problem("tool_import", path, f"{ref} does not import: {exc.problems[0].message}",
                                    "put the module next to the brief and check the names"))
        except ShapeError as exc:
            problems.append(Problem("tool_schema", path, str(exc),
                                    "type every argument and document it in a Google-style `Args:` section; an "
                                    "environment is `class Env:` with `def reset(self, **row)` and tool methods"))
        except ProjectCodeError as exc:
            problems.append(Problem("tool_import", path, f"{ref} does not import: {exc.kind}: {exc}",
                                    "run `python -c 'import MODULE'` next to the brief and fix what it says"))
    return problems


def template_problems(tokenizer: PreTrainedTokenizerBase, spec: EpisodeSpec, folder: Path) -> list[Problem]:
    """Give `tokenizer` the brief's chat template and a response parser, in place, and say what is missing:
    a template that cannot render a tool-calling conversation, or one TRL has no parser for."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    path = template_path(spec, folder)
    if path is not None:
        tokenizer.chat_template = path.read_text(encoding="utf-8")
    where = "episode.chat_template"
    if not supports_tool_calling(tokenizer):
        return [Problem("chat_template_tools", where, "the chat template cannot render a tool-calling conversation "
                        "(user, assistant with tool_calls, tool): TRL's supports_tool_calling is False",
                        "name a template that renders tool calls, e.g. Qwen2.5's (see examples/calculator-tools)")]
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(tokenizer)
        except ValueError:
            return [Problem("response_parser", where, "TRL has no response parser for this chat template "
                            "(add_response_schema knows Qwen2.5/3/3.5, Llama 3.1/3.2, GPT-OSS, GLM-4-MoE, "
                            "Nemotron 3, LFM2, Gemma 4, DeepSeek-R1-distill templates)",
                            "use one of those templates byte for byte, e.g. Qwen2.5's for a ChatML model")]
    return []


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase, spec: EpisodeSpec, folder: Path) -> None:
    """`template_problems`, raised as UnusableInput (sampling and launch stop before any generation)."""
    problems = template_problems(tokenizer, spec, folder)
    if problems:
        raise UnusableInput(problems[0].message, problems[0].fix, problems[0].path)


@dataclass
class Episode:
    """One sampled episode: the messages after the prompt (as TRL's `completions`), and its figures."""

    messages: list[JsonObject]
    completion_ids: list[int]
    tool_mask: list[int]  # 1: the model's token, 0: a tool result's
    tool_calls: int = 0
    tool_failures: int = 0
    turns: int = 1  # generated turns
    cut_at_limit: bool = False  # still calling tools when max_turns ran out
    truncated: bool = False  # a turn hit max_completion_length without EOS
    environment: str | None = None
    environment_reward: float | None = None
    _prompt_ids: list[int] = field(default_factory=list, repr=False)

    @property
    def final_answer(self) -> str:
        assistant = [m for m in self.messages if m.get("role") == "assistant"]
        return str(assistant[-1].get("content") or "") if assistant else ""

    @property
    def model_tokens(self) -> int:
        return sum(self.tool_mask)

    def to_json(self) -> EpisodeRecord:
        out: EpisodeRecord = {"messages": self.messages, "turns": self.turns, "tool_calls": self.tool_calls,
                              "tool_failures": self.tool_failures, "cut_at_limit": self.cut_at_limit,
                              "model_tokens": self.model_tokens,
                              "tool_tokens": len(self.tool_mask) - self.model_tokens}
        if self.environment is not None:
            out["environment"] = {"name": self.environment, "reward": self.environment_reward}
        return out


def _result_text(result: object) -> JsonValue:
    """A tool's result as the tool message's content, exactly as TRL writes it: a list (content blocks)
    as it is, anything else through str() (so an error reads `{'error': '...'}`)."""
    return result if isinstance(result, list) else str(result)


def call_tools(calls: JsonValue, tools: Mapping[str, Tool]) -> tuple[list[JsonObject], int]:
    """The tool messages for one assistant turn's calls (`tool_calls` as TRL parses them), and how many failed
    (TRL's counting)."""
    messages: list[JsonObject] = []
    failures = 0
    for call in calls if isinstance(calls, list) else []:
        call = call if isinstance(call, dict) else {}
        result: object
        if call.get("type", "function") != "function":
            failures += 1
            name, result = str(call.get("name", "unknown")), {"error": f"Unsupported tool call type: {call['type']}"}
        else:
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else {}
            name = str(fn.get("name"))
            try:
                if name not in tools:
                    raise ValueError(f"Tool {name} not found.")
                arguments = fn.get("arguments") or {}
                if not isinstance(arguments, dict):
                    raise TypeError(f"{name}() argument after ** must be a mapping, not {type(arguments).__name__}")
                result = tools[name](**arguments)
            except Exception as exc:  # noqa: BLE001 - TRL returns every failure to the model
                failures += 1
                result = {"error": str(exc)}
        messages.append({"role": "tool", "name": name, "content": _result_text(result)})
    return messages, failures


def _template_ids(tokenizer: PreTrainedTokenizerBase, messages: Sequence[Mapping[str, object]],
                  kwargs: Mapping[str, JsonValue], **more: object) -> list[int]:
    out = chat_template_call(tokenizer)(list(messages), tokenize=True, return_dict=False, **more, **kwargs)
    ids = out["input_ids"] if isinstance(out, dict) else out
    if not isinstance(ids, list):
        raise TypeError(f"apply_chat_template(tokenize=True) returned {type(ids).__name__}, not token ids")
    return [int(i) for i in ids]


def tool_suffix_ids(tokenizer: PreTrainedTokenizerBase, tool_messages: list[JsonObject],
                    kwargs: Mapping[str, JsonValue]) -> list[int]:
    """The token ids the template puts between the model's turn and its next one for these tool results,
    computed as TRL's `_get_tool_suffix_ids` does (a dummy conversation with and without them)."""
    dummy: list[JsonObject] = [
        {"role": "user", "content": "dummy"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]}]
    prefix = _template_ids(tokenizer, dummy, kwargs, add_generation_prompt=False)
    full = _template_ids(tokenizer, dummy + tool_messages, kwargs, add_generation_prompt=True)
    eos = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[: eos[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise UnusableInput("the chat template does not preserve prefixes around tool results",
                            "use a prefix-preserving template (TRL's training templates are)", "episode.chat_template")
    return full[len(prefix):]


def _parse(tokenizer: PreTrainedTokenizerBase, ids: list[int], prefix: list[int], tools: list[Tool]) -> JsonObject:
    from trl.chat_template_utils import parse_response

    return dict(parse_response(tokenizer, ids, prefix=prefix, tools=[*tools]))


# An episode under way: its record, its environment instance (None for standalone tools), the tools it may call.
LiveEpisode = tuple[Episode, Environment | None, list[Tool]]


def run_episodes(tokenizer: PreTrainedTokenizerBase, generate: Generate, prompts: Sequence[Sequence[ChatMessage]],
                 rows: Sequence[Mapping[str, object]], toolbox: Toolbox, *, k: int, max_turns: int,
                 max_completion_length: int,
                 chat_template_kwargs: Mapping[str, JsonValue] | None = None) -> list[list[Episode]]:
    """k episodes per prompt, in order (see the module docstring for the loop)."""
    kwargs = dict(chat_template_kwargs or {})
    live: list[LiveEpisode] = []
    prompt_ids: list[list[int]] = []
    for messages, row in zip(prompts, rows, strict=True):
        for _ in range(k):
            env, tools = toolbox.open()
            msgs = [m.copy() for m in messages]
            if env is not None:
                observation = env.reset(**{**row, "prompt": msgs})
                if isinstance(observation, str) and observation:
                    last = msgs[-1].copy()
                    last["content"] = str(last["content"]) + observation
                    msgs[-1] = last
            ids = _template_ids(tokenizer, msgs, kwargs, tools=tools or None, add_generation_prompt=True)
            episode = Episode([], [], [], environment=type(env).__name__ if env is not None else None)
            episode._prompt_ids = ids
            live.append((episode, env, tools))
            prompt_ids.append(ids)
    first = generate(prompt_ids, max_completion_length)
    pending: list[LiveEpisode] = []
    for (episode, env, tools), (ids, ended) in zip(live, first, strict=True):
        episode.completion_ids, episode.tool_mask, episode.truncated = list(ids), [1] * len(ids), not ended
        parsed: JsonObject = (_parse(tokenizer, ids, episode._prompt_ids, tools) if ids
                              else {"role": "assistant", "content": ""})
        episode.messages.append(parsed)
        if parsed.get("tool_calls"):
            pending.append((episode, env, tools))
    rounds = 0
    while pending and rounds < max_turns:
        batch: list[LiveEpisode] = []
        batch_ids: list[list[int]] = []
        for episode, env, tools in pending:
            results, failures = call_tools(episode.messages[-1].get("tool_calls"), {t.__name__: t for t in tools})
            episode.tool_calls += len(results)
            episode.tool_failures += failures
            suffix = tool_suffix_ids(tokenizer, results, kwargs)
            if len(episode.completion_ids) + len(suffix) > max_completion_length:
                continue  # TRL rolls the results back: the episode ends as it stood
            episode.messages.extend(results)
            episode.completion_ids += suffix
            episode.tool_mask += [0] * len(suffix)
            batch.append((episode, env, tools))
            batch_ids.append(episode._prompt_ids + episode.completion_ids)
        if not batch:
            break
        room = max(1, max_completion_length - min(len(e.completion_ids) for e, _, _ in batch))
        outs = generate(batch_ids, room)
        pending = []
        for (episode, env, tools), (ids, ended), context in zip(batch, outs, batch_ids, strict=True):
            ids = list(ids[: max(0, max_completion_length - len(episode.completion_ids))])
            episode.truncated = episode.truncated or not ended
            episode.completion_ids += ids
            episode.tool_mask += [1] * len(ids)
            episode.turns += 1
            if not ids:
                continue
            parsed = _parse(tokenizer, ids, context, tools)
            episode.messages.append(parsed)
            if parsed.get("tool_calls"):
                pending.append((episode, env, tools))
        rounds += 1
    for episode, _, _ in pending:
        episode.cut_at_limit = True
    for episode, env, _ in live:
        get_reward = getattr(env, "get_reward", None)  # optional on an environment
        if env is not None and callable(get_reward):
            try:
                value = get_reward()
                episode.environment_reward = None if value is None else float(value)
            except Exception as exc:  # noqa: BLE001 - a failing reward scores nothing, loudly
                print(f"warning: {type(env).__name__}.get_reward() raised {exc!r}; no reward", file=sys.stderr)
    return [[e for e, _, _ in live[i * k:(i + 1) * k]] for i in range(len(prompts))]
