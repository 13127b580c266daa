"""`json_schema`: 1.0 when the completion is strict JSON that validates against a JSON Schema, else 0.0.

Strict means what a careful consumer of the output would accept: one JSON value and nothing after it,
no duplicate keys (Python keeps the last one silently), no NaN or Infinity (not JSON at all). The schema
comes from the brief (`schema`) or from a dataset column (`schema_field`, a mapping or a JSON string),
and is checked with format checking on (`"format": "email"`, dates, ...). With `fenced: true` the JSON
may sit in the last fenced code block; text outside that block is then ignored. `mode: partial` gives
partial credit, defined in `partial_score`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn, TypedDict

from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.reward_registry import arg_default
from llm_finetuning.rewards._text import Completion, Prompt, column_values, completion_text, strip_think

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

_FN = "json_schema"


class JsonSchemaDefaults(TypedDict):
    """The defaults of json_schema's args, as the registry's schema holds them (the one source of them)."""

    mode: str
    fenced: bool


_DEFAULTS = JsonSchemaDefaults(
    mode=arg_default(_FN, "mode", str),
    fenced=arg_default(_FN, "fenced", bool),
)

log = logging.getLogger(__name__)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


class StrictJSONError(ValueError):
    """The text is not strict JSON."""


def _no_duplicates(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    out: JsonObject = {}
    for key, value in pairs:
        if key in out:
            raise StrictJSONError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> NoReturn:
    raise StrictJSONError(f"{name} is not JSON")


def parse_strict(text: str) -> JsonValue:
    """Parse exactly one JSON value; raise StrictJSONError on duplicates, NaN/Infinity or trailing text."""
    try:
        value: JsonValue = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except StrictJSONError:
        raise
    except (ValueError, RecursionError) as exc:
        raise StrictJSONError(str(exc)) from None
    return value


def json_text(completion: str, fenced: bool) -> str:
    """The part of the completion that must be JSON: the last fenced block when allowed and present."""
    text = strip_think(completion)
    if fenced:
        blocks = _FENCE.findall(text)
        if blocks:
            return str(blocks[-1][1]).strip()
    return text.strip()


def _validator(schema: JsonObject) -> Validator:
    from jsonschema import validators

    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def partial_score(instance: JsonValue, schema: JsonObject, errors: list[ValidationError]) -> float:
    """Partial credit for JSON that parses but does not validate (mode: partial).

    0.5 x the share of the schema's top-level properties (`properties` and `required` together) that are
    present and carry no error; halved again when the object also breaks a rule of its own (extra keys,
    size limits). Anything that is not an object, or a schema that names no properties, earns 0.
    """
    properties, required = schema.get("properties", {}), schema.get("required", [])
    names = set(properties if isinstance(properties, dict) else []) | \
        {str(n) for n in (required if isinstance(required, list) else [])}
    if not isinstance(instance, dict) or not names:
        return 0.0
    bad = {str(e.absolute_path[0]) for e in errors if e.absolute_path}
    root = [e for e in errors if not e.absolute_path]
    missing = {n for n in names if n not in instance}
    if any(e.validator == "type" for e in root):
        return 0.0
    good = [n for n in names if n not in bad and n not in missing]
    score = 0.5 * len(good) / len(names)
    if any(e.validator != "required" for e in root):
        score *= 0.5
    return score


class JsonSchema:
    """Reward strict, schema-valid JSON: 1.0 or 0.0 (or partial credit), None when a row has no schema."""

    def __init__(self, schema: JsonObject | None = None, schema_field: str | None = None,
                 mode: str = _DEFAULTS["mode"], fenced: bool = _DEFAULTS["fenced"],
                 name: str = "json_schema") -> None:
        if (schema is None) == (schema_field is None):
            raise ValueError("give exactly one of schema (inline) or schema_field (a column)")
        if mode not in ("strict", "partial"):
            raise ValueError(f"mode {mode!r}: use strict or partial")
        self.__name__ = name
        self.schema = schema
        self.schema_field = schema_field
        self.mode = mode
        self.fenced = fenced
        self.stats = {"scored": 0, "not_json": 0, "invalid": 0, "bad_schema": 0}
        self._validators: dict[str, Validator] = {}
        if schema is not None:
            self.validator(schema)  # a broken inline schema fails at build time, not mid-training

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_validators"] = {}
        return state

    def validator(self, schema: JsonObject) -> Validator:
        """A checked validator for `schema`, built once per distinct schema (checking a schema is slow)."""
        key = json.dumps(schema, sort_keys=True, default=str)
        found = self._validators.get(key)
        if found is None:
            found = _validator(schema)
            if len(self._validators) >= 1024:
                self._validators.clear()
            self._validators[key] = found
        return found

    def _row_schema(self, columns: Mapping[str, object], i: int) -> JsonObject | None:
        if self.schema is not None:
            return self.schema
        assert self.schema_field is not None
        value = column_values(columns, self.schema_field)[i]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        return value if isinstance(value, dict) else None

    def score(self, completion: Completion, schema: JsonObject) -> float:
        """The reward of one completion against one schema."""
        return self.score_explained(completion, schema, why=False)[0]

    def score_explained(self, completion: Completion, schema: JsonObject, why: bool = True) -> tuple[float, str]:
        """(the reward of one completion against one schema, why: the parse error, the first schema
        error by path with its message, or that it is valid; "" when `why` is false)."""
        try:
            instance = parse_strict(json_text(completion_text(completion), self.fenced))
        except StrictJSONError as exc:
            self.stats["not_json"] += 1
            return 0.0, f"{self._where(completion)} is not strict JSON: {exc}" if why else ""
        errors = list(self.validator(schema).iter_errors(instance))
        if not errors:
            return 1.0, f"{self._where(completion)} is strict JSON and valid against the schema" if why else ""
        self.stats["invalid"] += 1
        if not why:
            return (partial_score(instance, schema, errors) if self.mode == "partial" else 0.0), ""
        first = min(errors, key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))
        more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
        reason = f"schema error at {first.json_path}: {first.message}{more}"
        if self.mode == "partial":
            value = partial_score(instance, schema, errors)
            return value, f"{reason}; partial credit {value:g}"
        return 0.0, reason

    def _where(self, completion: Completion) -> str:
        """Which text was read as JSON, for an explanation."""
        fenced = self.fenced and _FENCE.search(strip_think(completion_text(completion)))
        return "the last fenced block" if fenced else "the completion"

    def _score(self, completions: list[Completion], columns: Mapping[str, object],
               why: bool) -> list[tuple[float | None, str | None]]:
        if self.schema_field is not None and self.schema_field not in columns:
            raise KeyError(f"{self.__name__}: no column {self.schema_field!r} in the data; "
                           "set args.schema_field to the column holding each row's JSON Schema")
        out: list[tuple[float | None, str | None]] = []
        for i, completion in enumerate(completions):
            schema = self._row_schema(columns, i)
            if schema is None:
                self.stats["bad_schema"] += 1
                out.append((None, f"column {self.schema_field!r} holds no JSON Schema object: not scored"))
                continue
            try:
                self.validator(schema)
            except Exception as exc:  # noqa: BLE001 - jsonschema's SchemaError and friends
                self.stats["bad_schema"] += 1
                reason = str(exc).splitlines()[0][:200]
                log.warning("%s: row %d has an invalid schema (%s); no reward for it", self.__name__, i, reason)
                out.append((None, f"the row's schema is invalid ({reason}): not scored"))
                continue
            self.stats["scored"] += 1
            out.append(self.score_explained(completion, schema, why))
        return out

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        return [value for value, _ in self._score(completions, columns, why=False)]

    def explained(self, prompts: list[Prompt], completions: list[Completion],
                  **columns: object) -> list[tuple[float | None, str | None]]:
        """Each value with why: the parse error, the first schema error (path and message), or valid."""
        return self._score(completions, columns, why=True)
