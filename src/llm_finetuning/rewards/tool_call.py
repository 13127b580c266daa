"""`tool_call`: the expected tool calls an episode made, with arguments that validate, and no others.

An episode (docs/sampling.md, Episodes) is the list of messages the model and its tools wrote: assistant
messages carry `tool_calls` (`{"type": "function", "function": {"name", "arguments"}}`, as TRL's
`parse_response` returns them) and `tool` messages the results. A plain-text completion is read for
`<tool_call>{json}</tool_call>` blocks instead, so `finetune score` works on rows written by hand.

The expected calls come from the brief (`expected`) or a dataset column (`expected_field`): a list whose
items are a tool name, or `{"name": ..., "arguments": <JSON Schema of the arguments object>}`. Expected
calls and made calls are paired in any order, as many pairs as possible (a maximum matching: a call
serves one expected item, and one call's being valid for two items never costs a match). The value is
matched / the larger of expected and made (`extra_calls: penalise`, the default: a repeated or extra
call lowers it) or matched / expected (`extra_calls: ignore`). A row that expects nothing gets None, and
so does a row whose expected calls are not a list of that shape or hold a schema that does not compile.

No completion makes it raise: a call that cannot be read (JSON that does not parse or is nested too
deeply, a `function` that is not an object, `tool_calls` that is not a list) is a call made that matches
nothing, and the explanation says what was wrong with it.
"""

from __future__ import annotations

import json
import marshal
import re
from collections.abc import Iterator, Mapping
from typing import NamedTuple, TypedDict

from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.reward_registry import arg_default
from llm_finetuning.rewards._text import Completion, Message, Prompt, column_values
from llm_finetuning.rewards.call_schema import Check, Options, SchemaProblem, compile_schema

_FN = "tool_call"


class ToolCallDefaults(TypedDict):
    """The defaults of tool_call's args, as the registry's schema holds them (the one source of them)."""

    extra_calls: str
    strings: str
    integers: str
    empty_is_omitted: bool


_DEFAULTS = ToolCallDefaults(
    extra_calls=arg_default(_FN, "extra_calls", str),
    strings=arg_default(_FN, "strings", str),
    integers=arg_default(_FN, "integers", str),
    empty_is_omitted=arg_default(_FN, "empty_is_omitted", bool),
)
_TEXT_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_CACHE_SIZE = 4096


class Call(NamedTuple):
    """One call an episode made: its name and arguments, or why it could not be read (`problem`)."""

    name: str
    arguments: object  # the parsed arguments, or what was found where they could not be read
    problem: str = ""


def _loads(text: str) -> tuple[JsonValue, str]:
    """(the JSON value, "") or (None, why it is not one)."""
    try:
        value: JsonValue = json.loads(text)
        return value, ""
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError:
        return None, "not JSON"


def _call(name: object, arguments: object) -> Call:
    if not isinstance(name, str) or not name:
        return Call("<unnamed>", arguments, "no name")
    if isinstance(arguments, str):
        parsed, problem = _loads(arguments)
        if problem:
            return Call(name, arguments, f"arguments are {problem}")
        arguments = parsed
    return Call(name, {} if arguments is None else arguments)


def _text_calls(text: str) -> Iterator[Call]:
    for block in _TEXT_CALL.findall(text):
        obj, problem = _loads(block)
        if problem:
            yield Call("<unparsed>", block, f"the <tool_call> block is {problem}")
        elif not isinstance(obj, dict):
            yield Call("<unparsed>", obj, "the <tool_call> block is not a JSON object")
        else:
            yield _call(obj.get("name"), obj.get("arguments"))


def _message_calls(messages: list[Message]) -> Iterator[Call]:
    for m in messages:
        if not isinstance(m, dict) or m.get("role", "assistant") != "assistant":
            continue
        calls = m.get("tool_calls")
        if calls is None:
            continue
        if not isinstance(calls, list):
            yield Call("<malformed>", calls, f"tool_calls is {type(calls).__name__}, not a list")
            continue
        for call in calls:
            fn = call.get("function", call) if isinstance(call, dict) else call
            if not isinstance(fn, dict):
                yield Call("<malformed>", fn, f"a call's function is {type(fn).__name__}, not an object")
            else:
                yield _call(fn.get("name"), fn.get("arguments"))


def made_calls(completion: Completion | Message) -> list[Call]:
    """Every call an episode (messages) or a text completion made, in order."""
    if isinstance(completion, str):
        return list(_text_calls(completion))
    if isinstance(completion, dict):
        return list(_message_calls([completion]))
    return list(_message_calls(completion)) if isinstance(completion, list) else []


def episode_calls(completion: Completion | Message) -> list[tuple[str, object]]:
    """(tool name, arguments) of every call an episode made, in order."""
    return [(c.name, c.arguments) for c in made_calls(completion)]


Expected = list[tuple[str, Check | None]]


def _short(value: object, limit: int = 80) -> str:
    try:
        text = json.dumps(value, default=str)
    except (RecursionError, ValueError):
        return "<nested too deeply>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fingerprint(value: object) -> bytes | str:
    """A cache key for a row's expected calls: marshal's bytes (3x quicker than repr, and like repr it
    tells true, 1 and 1.0 apart); repr for what marshal refuses. Equal values may get two keys (marshal
    records shared objects), which costs a compile, never a wrong hit."""
    if not isinstance(value, (list, dict, tuple, int, float, bytes, type(None))):
        return repr(value)
    try:
        return marshal.dumps(value)
    except ValueError:
        return repr(value)


def _max_matching(edges: list[list[int]], n_calls: int) -> list[int]:
    """For each made call, the expected item it serves (-1 for none), in a maximum matching (Kuhn's
    augmenting paths; `edges[e]` lists the calls valid for expected item e)."""
    owner = [-1] * n_calls
    if len(edges) == 1:  # one expected call: any valid call serves it
        if edges[0]:
            owner[edges[0][0]] = 0
        return owner

    def augment(e: int, seen: set[int]) -> bool:
        for c in edges[e]:
            if c in seen:
                continue
            seen.add(c)
            if owner[c] == -1 or augment(owner[c], seen):
                owner[c] = e
                return True
        return False

    for e in range(len(edges)):
        augment(e, set())
    return owner


class ToolCall:
    """Picklable reward: matched expected calls / max(expected, made) (or / expected), with why."""

    def __init__(self, expected: list[JsonValue] | None = None, expected_field: str | None = None,
                 extra_calls: str = _DEFAULTS["extra_calls"],
                 strings: str = _DEFAULTS["strings"],
                 integers: str = _DEFAULTS["integers"],
                 empty_is_omitted: bool = _DEFAULTS["empty_is_omitted"],
                 name: str = "tool_call") -> None:
        self.expected = expected
        self.expected_field = expected_field
        self.extra_calls = extra_calls
        self.options = Options(strings=strings, integers=integers, empty_is_omitted=empty_is_omitted)
        self.__name__ = name
        self._cache: dict[bytes | str, Expected | str] = {}

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_cache": {}}

    def expected_items(self, value: object) -> Expected | str:
        """(name, compiled argument check or None) for each expected call, or why `value` cannot be one."""
        try:
            key = value if isinstance(value, str) else _fingerprint(value)
        except RecursionError:
            return "the expected calls are nested too deeply: not scored"
        cached = self._cache.get(key)
        if cached is None:
            cached = self._compile(value)
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[key] = cached
        return cached

    def _compile(self, value: object) -> Expected | str:
        if isinstance(value, str):
            parsed, problem = _loads(value)
            value = [value] if problem == "not JSON" else parsed
            if problem and problem != "not JSON":
                return f"the expected calls are {problem}: not scored"
        if not isinstance(value, list):
            return "the expected calls are not a list of names or {name, arguments}: not scored"
        items: Expected = []
        for i, item in enumerate(value):
            if isinstance(item, str):
                items.append((item, None))
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                if "arguments" not in item or item["arguments"] is None:
                    items.append((item["name"], None))
                    continue
                try:
                    items.append((item["name"], compile_schema(item["arguments"], self.options)))
                except (SchemaProblem, RecursionError) as exc:
                    return f"expected call [{i}] ({item['name']}) has an argument schema that does not compile: {exc}: not scored"
            else:
                return "the expected calls are not a list of names or {name, arguments}: not scored"
        return items

    def score_explained(self, completion: Completion, expected: Expected) -> tuple[float | None, str]:
        """(the value for one episode, why: what matched, calls beyond the expected ones, the first error)."""
        if not expected:
            return None, "the row expects no tool call: not scored"
        calls = made_calls(completion)
        edges, first_error = _edges(expected, calls)
        matched = len(calls) - _max_matching(edges, len(calls)).count(-1)
        denominator = len(expected) if self.extra_calls == "ignore" else max(len(expected), len(calls))
        made = ", ".join(c.name for c in calls) or "no tool call"
        why = f"{matched}/{len(expected)} expected call(s) made with valid arguments; made: {made}"
        if len(calls) > len(expected):
            cost = "ignored (extra_calls: ignore)" if self.extra_calls == "ignore" else \
                f"the value is {matched}/{denominator}"
            why += f"; {len(calls) - len(expected)} call(s) more than expected: {cost}"
        problems = [f"{c.name}: {c.problem}" for c in calls if c.problem]
        detail = problems[:1] or ([first_error] if first_error and matched < len(expected) else [])
        return matched / denominator, why + (f"; {detail[0]}" if detail else "")

    def score(self, completion: Completion, expected: Expected) -> float | None:
        """The value alone (what training reads), without building the explanation."""
        if not expected:
            return None
        calls = made_calls(completion)
        matched = len(calls) - _max_matching(_edges(expected, calls, explain=False)[0], len(calls)).count(-1)
        return matched / (len(expected) if self.extra_calls == "ignore" else max(len(expected), len(calls)))

    def _score(self, completions: list[Completion], columns: Mapping[str, object],
               explain: bool = True) -> list[tuple[float | None, str | None]]:
        if self.expected_field is not None and self.expected_field not in columns:
            raise KeyError(f"{self.__name__}: no column {self.expected_field!r} in the data; set "
                           "args.expected_field to the column holding each row's expected tool calls")
        out: list[tuple[float | None, str | None]] = []
        for i, completion in enumerate(completions):
            raw = self.expected if self.expected is not None else column_values(columns, str(self.expected_field))[i]
            items = self.expected_items(raw)
            if isinstance(items, str):
                out.append((None, items))
                continue
            try:
                out.append(self.score_explained(completion, items) if explain else (self.score(completion, items), None))
            except RecursionError:
                out.append((0.0, "the completion is nested too deeply to read: 0"))
        return out

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        return [value for value, _ in self._score(completions, columns, explain=False)]

    def explained(self, prompts: list[Prompt], completions: list[Completion],
                  **columns: object) -> list[tuple[float | None, str | None]]:
        """Each value with why: the expected calls matched, the calls made, extra calls, the first error."""
        return self._score(completions, columns)


def _edges(expected: Expected, calls: list[Call], explain: bool = True) -> tuple[list[list[int]], str]:
    """For each expected item, the calls that serve it (right name, readable, valid arguments); and the
    first argument error seen (when `explain`)."""
    edges: list[list[int]] = []
    first_error = ""
    for name, check in expected:
        valid = []
        for j, call in enumerate(calls):
            if call.name != name or call.problem:
                continue
            if check is None:
                valid.append(j)
                continue
            try:
                error = check(call.arguments)
            except RecursionError:
                error = ("", "nested too deeply to check")
            if error is None:
                valid.append(j)
            elif explain and not first_error:
                first_error = f"{name} arguments {_short(call.arguments)} fail ${error[0]}: {error[1]}"
        edges.append(valid)
    return edges, first_error
