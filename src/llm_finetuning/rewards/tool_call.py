"""`tool_call`: the share of the expected tool calls that an episode made, with arguments that validate.

An episode (docs/sampling.md, Episodes) is the list of messages the model and its tools wrote: assistant
messages carry `tool_calls` (`{"type": "function", "function": {"name", "arguments"}}`, as TRL's
`parse_response` returns them) and `tool` messages the results. A plain-text completion is read for
`<tool_call>{json}</tool_call>` blocks instead, so `finetune score` works on rows written by hand.

The expected calls come from the brief (`expected`) or a dataset column (`expected_field`): a list whose
items are a tool name, or `{"name": ..., "arguments": <JSON Schema of the arguments object>}`. Each
expected item is matched by at most one call, in order; the value is matched / expected (1.0 when every
expected call was made with valid arguments, 0.0 when none was). A row that expects nothing gets None.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llm_finetuning.reward_registry import arg_defaults

_DEFAULTS = arg_defaults("tool_call")  # none today: every argument is the brief's choice
_TEXT_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _arguments(value: Any) -> Any:
    """A call's arguments as a value: templates give a mapping, some a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return {} if value is None else value


def episode_calls(completion: Any) -> list[tuple[str, Any]]:
    """(tool name, arguments) of every call an episode made, in order."""
    if isinstance(completion, str):
        calls = []
        for block in _TEXT_CALL.findall(completion):
            try:
                obj = json.loads(block)
            except ValueError:
                calls.append(("", block))
                continue
            if isinstance(obj, dict):
                calls.append((str(obj.get("name", "")), _arguments(obj.get("arguments"))))
        return calls
    messages = [completion] if isinstance(completion, dict) else completion if isinstance(completion, list) else []
    out = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role", "assistant") != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call) if isinstance(call, dict) else {}
            out.append((str(fn.get("name", "")), _arguments(fn.get("arguments"))))
    return out


def _expected_items(value: Any) -> list[tuple[str, dict[str, Any] | None]] | None:
    """(name, argument schema or None) for each expected call; None when the value is not such a list."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [value]
    if not isinstance(value, list):
        return None
    items: list[tuple[str, dict[str, Any] | None]] = []
    for item in value:
        if isinstance(item, str):
            items.append((item, None))
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            schema = item.get("arguments")
            items.append((item["name"], schema if isinstance(schema, dict) else None))
        else:
            return None
    return items


def _argument_error(arguments: Any, schema: dict[str, Any] | None) -> str | None:
    """Why `arguments` fails `schema` (the first error by path), or None when it validates."""
    if schema is None:
        return None
    from jsonschema import validators

    cls = validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    return f"{errors[0].json_path}: {errors[0].message}" if errors else None


class ToolCall:
    """Picklable reward: matched expected calls / expected calls, with why."""

    def __init__(self, expected: list[Any] | None = None, expected_field: str | None = None,
                 name: str = "tool_call") -> None:
        self.expected = expected
        self.expected_field = expected_field
        self.__name__ = name

    def score_explained(self, completion: Any, expected: list[tuple[str, dict[str, Any] | None]]
                        ) -> tuple[float | None, str]:
        """(the value for one episode, why: which expected calls matched and the first argument error)."""
        if not expected:
            return None, "the row expects no tool call: not scored"
        calls = episode_calls(completion)
        unused = list(range(len(calls)))
        matched, first_error = 0, ""
        for name, schema in expected:
            hit = None
            for i in unused:
                if calls[i][0] != name:
                    continue
                error = _argument_error(calls[i][1], schema)
                if error is None:
                    hit = i
                    break
                first_error = first_error or f"{name} arguments {json.dumps(calls[i][1], default=str)[:80]} fail {error}"
            if hit is not None:
                unused.remove(hit)
                matched += 1
        made = ", ".join(n or "<unparsed>" for n, _ in calls) or "no tool call"
        why = f"{matched}/{len(expected)} expected call(s) made with valid arguments; made: {made}"
        return matched / len(expected), why + (f"; {first_error}" if first_error else "")

    def _score(self, completions: list[Any], columns: dict[str, Any]) -> list[tuple[float | None, str | None]]:
        if self.expected_field is not None and self.expected_field not in columns:
            raise KeyError(f"{self.__name__}: no column {self.expected_field!r} in the data; set "
                           "args.expected_field to the column holding each row's expected tool calls")
        out: list[tuple[float | None, str | None]] = []
        for i, completion in enumerate(completions):
            raw = self.expected if self.expected is not None else columns[str(self.expected_field)][i]
            items = _expected_items(raw)
            if items is None:
                out.append((None, "the expected calls are not a list of names or {name, arguments}: not scored"))
                continue
            out.append(self.score_explained(completion, items))
        return out

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        return [value for value, _ in self._score(completions, columns)]

    def explained(self, prompts: list[Any], completions: list[Any],
                  **columns: Any) -> list[tuple[float | None, str | None]]:
        """Each value with why: the expected calls matched, the calls made, the first argument error."""
        return self._score(completions, columns)

