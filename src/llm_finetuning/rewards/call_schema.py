"""Argument schemas of `tool_call`, compiled once into plain Python checks.

`compile_schema(schema, options)` turns a JSON Schema (draft 2020-12) into a function that returns None for
valid arguments or `(json path, message)` for the first error. The keywords an argument schema usually
holds (type, enum, const, properties, required, additionalProperties, patternProperties, propertyNames,
items, prefixItems, min/max items, properties and length, uniqueItems, minimum/maximum, pattern, allOf,
anyOf, oneOf, not) are compiled here, with jsonschema's meaning (tests/rewards/test_call_schema.py holds
the two to the same verdicts); a schema with any other validating keyword ($ref, if/then/else, contains,
multipleOf, dependent*, unevaluated*, another draft's $schema) is validated by jsonschema itself, with the
same options. Compiling is what makes `tool_call` fast: jsonschema takes about 100 microseconds for an
arguments object that these checks judge in a few.

The options are the reward's (references/reward-functions.md, tool_call):
- `strings: normalised` compares the strings of `enum` and `const` as the Berkeley Function Calling
  Leaderboard does: case, spaces and `, . / - _ * ^` ignored, `'` read as `"`.
- `integers: strict`: only an integer is an integer (JSON Schema also counts 5.0).
- `empty_is_omitted`: an optional property (not in `required`) whose schema admits a string, given as
  `""`, counts as left out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llm_finetuning.reward_registry import JSON_TYPES, tool_call_schema_problems

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

Error = tuple[str, str]  # (json path below the checked value, e.g. ".unit" or "[0]"; message)
Check = Callable[[object], "Error | None"]  # a compiled schema: None for a valid value, else its first error

_NORMALISE = re.compile(r"[ ,./\-_*^]")
_ANNOTATIONS = {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
                "writeOnly", "format", "contentMediaType", "contentEncoding", "contentSchema", "$defs",
                "definitions", "$id", "$anchor", "$vocabulary", "minContains", "maxContains"}
_COMPILED = {"type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
             "propertyNames", "minProperties", "maxProperties", "items", "prefixItems", "minItems", "maxItems",
             "uniqueItems", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
             "exclusiveMaximum", "allOf", "anyOf", "oneOf", "not", "$schema"}
_LATEST = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#")


@dataclass(frozen=True)
class Options:
    """How arguments are compared (the reward's args `strings`, `integers`, `empty_is_omitted`)."""

    strings: str = "exact"
    integers: str = "json_schema"
    empty_is_omitted: bool = False


class SchemaProblem(ValueError):
    """An argument schema that cannot be compiled: its path below the schema, what is wrong, the fix."""


def normalise(text: str) -> str:
    """BFCL's string standardisation: lower case, without spaces and `, . / - _ * ^`, `'` read as `"`."""
    return _NORMALISE.sub("", text).lower().replace("'", '"')


def _is_type(value: object, name: str, strict_integers: bool) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (not strict_integers and isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    return name == "null" and value is None


def equal(a: object, b: object, strings: str = "exact") -> bool:
    """jsonschema's equality (true is not 1, 1 is 1.0, lists and objects compared member by member), with
    strings compared normalised when `strings` is "normalised"."""
    if isinstance(a, str) or isinstance(b, str):
        if isinstance(a, str) and isinstance(b, str) and strings == "normalised":
            return normalise(a) == normalise(b)
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y, strings) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k], strings) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


def _short(value: object) -> str:
    try:
        text = repr(value)
    except RecursionError:
        return "<nested too deeply>"
    return text if len(text) <= 60 else text[:57] + "..."


def _enum_check(allowed: list[object], strings: str, const: bool) -> Check:
    """Membership under `equal`: scalars by hashed lookups (strings normalised first when asked), lists and
    objects one by one."""
    norm = normalise if strings == "normalised" else None
    texts = {norm(v) if norm else v for v in allowed if isinstance(v, str)}
    flags = {v for v in allowed if isinstance(v, bool)}
    numbers = [v for v in allowed if isinstance(v, (int, float)) and not isinstance(v, bool)]
    number_set = {v for v in numbers if v == v}  # nan equals nothing, itself included, as in jsonschema
    null = any(v is None for v in allowed)
    composite = [v for v in allowed if isinstance(v, (list, dict))]

    def check(value: object) -> Error | None:
        kind = type(value)
        if isinstance(value, str):  # str subclasses too: `equal` would compare them as these strings
            if (norm(value) if norm else value) in texts:
                return None
        elif kind is bool:
            if value in flags:
                return None
        elif kind is int or kind is float:
            if value in number_set:
                return None
        elif value is None:
            if null:
                return None
        elif any(equal(value, v, strings) for v in (composite if kind is list or kind is dict else allowed)):
            return None
        if const:
            return "", f"{_short(allowed[0])} was expected"
        return "", f"{_short(value)} is not one of {_short(allowed)}"
    return check


def _needs_jsonschema(schema: object) -> bool:
    """True when `schema` (or a schema inside it) uses a validating keyword this module does not compile."""
    if not isinstance(schema, dict):
        return False
    if "$schema" in schema and schema["$schema"] not in _LATEST:
        return True
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key not in _COMPILED and (key.startswith("$") or key in _OTHER_KEYWORDS):
            return True
        if key in ("properties", "patternProperties") and isinstance(value, dict):
            if any(_needs_jsonschema(v) for v in value.values()):
                return True
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(value, list):
            if any(_needs_jsonschema(v) for v in value):
                return True
        elif key in ("items", "additionalProperties", "propertyNames", "not") and _needs_jsonschema(value):
            return True
    return False


_OTHER_KEYWORDS = {"if", "then", "else", "contains", "multipleOf", "dependentRequired", "dependentSchemas",
                   "unevaluatedItems", "unevaluatedProperties", "dependencies", "additionalItems"}


def _at(path: str, error: Error | None) -> Error | None:
    return None if error is None else (path + error[0], error[1])


def _admits_string(schema: object) -> bool:
    if not isinstance(schema, dict):
        return schema is True
    t = schema.get("type")
    return t is None or t == "string" or (isinstance(t, list) and "string" in t)


def _subschemas(schema: Mapping[str, object], key: str) -> dict[str, object]:
    """The mapping under `key` (properties, patternProperties); {} when there is none (`_malformed` checked it)."""
    value = schema.get(key, {})
    return value if isinstance(value, dict) else {}


def _items(schema: Mapping[str, object], key: str) -> list[object]:
    """The list under `key` (required, allOf, prefixItems, ...); [] when there is none."""
    value = schema.get(key, [])
    return value if isinstance(value, list) else []


def _number(schema: Mapping[str, object], key: str) -> int | float | None:
    """The number under `key` (a count or a bound); None when there is none."""
    value = schema.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _type_names(wanted: object) -> str | list[str]:
    """A schema's `type`: one name, or a list of them."""
    return wanted if isinstance(wanted, str) else [str(n) for n in wanted] if isinstance(wanted, list) else str(wanted)


class _Compiler:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.strict = options.integers == "strict"

    def compile(self, schema: object) -> Check:
        if schema is True or schema == {}:
            return lambda value: None
        if schema is False:
            return lambda value: ("", "False schema does not allow " + _short(value))
        assert isinstance(schema, dict)
        checks: list[Check] = []
        if "type" in schema:
            checks.append(self._type(_type_names(schema["type"])))
        if "enum" in schema:
            checks.append(_enum_check(_items(schema, "enum"), self.options.strings, const=False))
        if "const" in schema:
            checks.append(_enum_check([schema["const"]], self.options.strings, const=True))
        checks += self._object(schema) + self._array(schema) + self._scalar(schema) + self._logic(schema)
        if len(checks) == 1:
            return checks[0]

        def all_checks(value: object) -> Error | None:
            for check in checks:
                error = check(value)
                if error is not None:
                    return error
            return None
        return all_checks

    def _type(self, wanted: str | list[str]) -> Check:
        names = [wanted] if isinstance(wanted, str) else list(wanted)
        strict = self.strict
        shown = repr(wanted) if isinstance(wanted, str) else ", ".join(repr(n) for n in names)
        plain = {"string": str, "object": dict, "array": list, "boolean": bool}
        if len(names) == 1 and names[0] in plain:
            cls = plain[names[0]]

            def one(value: object) -> Error | None:
                return None if type(value) is cls or isinstance(value, cls) else ("", f"{_short(value)} is not of type {shown}")
            return one

        def check(value: object) -> Error | None:
            for name in names:
                if _is_type(value, name, strict):
                    return None
            return "", f"{_short(value)} is not of type {shown}"
        return check

    def _object(self, schema: dict[str, object]) -> list[Check]:
        keys = ("properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                "minProperties", "maxProperties")
        if not any(k in schema for k in keys):
            return []
        props = {k: self.compile(v) for k, v in _subschemas(schema, "properties").items()}
        patterns = [(re.compile(p), self.compile(v)) for p, v in _subschemas(schema, "patternProperties").items()]
        required = _items(schema, "required")
        extra = schema.get("additionalProperties", True)
        extra_check = None if extra is True else self.compile(extra)
        names = self.compile(schema["propertyNames"]) if "propertyNames" in schema else None
        low, high = _number(schema, "minProperties"), _number(schema, "maxProperties")
        skippable = set()
        if self.options.empty_is_omitted:
            skippable = {k for k, v in _subschemas(schema, "properties").items() if k not in required and _admits_string(v)}

        def check(value: object) -> Error | None:
            if not isinstance(value, dict):
                return None
            for name in required:
                if name not in value:
                    return "", f"{name!r} is a required property"
            for name, item in value.items():
                if name in skippable and item == "" and isinstance(item, str):
                    continue
                matched = False
                sub = props.get(name)
                if sub is not None:
                    matched = True
                    error = sub(item)
                    if error is not None:
                        return _at(f".{name}", error)
                for pattern, pcheck in patterns:
                    if isinstance(name, str) and pattern.search(name):
                        matched = True
                        error = pcheck(item)
                        if error is not None:
                            return _at(f".{name}", error)
                if not matched and extra_check is not None:
                    error = extra_check(item)
                    if error is not None:
                        if extra is False:
                            return "", f"Additional properties are not allowed ({name!r} was unexpected)"
                        return _at(f".{name}", error)
                if names is not None:
                    error = names(name)
                    if error is not None:
                        return "", f"property name {name!r}: {error[1]}"
            if low is not None and len(value) < low:
                return "", f"{_short(value)} has fewer than {low} properties"
            if high is not None and len(value) > high:
                return "", f"{_short(value)} has more than {high} properties"
            return None
        return [check]

    def _array(self, schema: dict[str, object]) -> list[Check]:
        if not any(k in schema for k in ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")):
            return []
        prefix = [self.compile(s) for s in _items(schema, "prefixItems")]
        items = self.compile(schema["items"]) if "items" in schema else None
        low, high = _number(schema, "minItems"), _number(schema, "maxItems")
        unique = bool(schema.get("uniqueItems"))
        strings = "exact"  # uniqueness is about the values themselves, never normalised

        def check(value: object) -> Error | None:
            if not isinstance(value, list):
                return None
            for i, item in enumerate(value):
                sub = prefix[i] if i < len(prefix) else items
                if sub is not None:
                    error = sub(item)
                    if error is not None:
                        return _at(f"[{i}]", error)
            if low is not None and len(value) < low:
                return "", f"{_short(value)} should be non-empty" if low == 1 else f"{_short(value)} is too short"
            if high is not None and len(value) > high:
                return "", f"{_short(value)} is too long"
            if unique and any(equal(a, b, strings) for i, a in enumerate(value) for b in value[i + 1:]):
                return "", f"{_short(value)} has non-unique elements"
            return None
        return [check]

    def _scalar(self, schema: dict[str, object]) -> list[Check]:
        out: list[Check] = []
        bounds = [(k, bound) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
                  if (bound := _number(schema, k)) is not None]
        if bounds:
            def number(value: object) -> Error | None:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    return None
                for key, bound in bounds:
                    bad = {"minimum": value < bound, "maximum": value > bound,
                           "exclusiveMinimum": value <= bound, "exclusiveMaximum": value >= bound}[key]
                    if bad:
                        return "", f"{_short(value)} fails {key} {bound}"
                return None
            out.append(number)
        low, high = _number(schema, "minLength"), _number(schema, "maxLength")
        source = schema.get("pattern")
        pattern = re.compile(source) if isinstance(source, str) else None
        if low is not None or high is not None or pattern is not None:
            def text(value: object) -> Error | None:
                if not isinstance(value, str):
                    return None
                if low is not None and len(value) < low:
                    return "", f"{_short(value)} is too short"
                if high is not None and len(value) > high:
                    return "", f"{_short(value)} is too long"
                if pattern is not None and not pattern.search(value):
                    return "", f"{_short(value)} does not match {pattern.pattern!r}"
                return None
            out.append(text)
        return out

    def _logic(self, schema: dict[str, object]) -> list[Check]:
        out: list[Check] = []
        for sub in _items(schema, "allOf"):
            out.append(self.compile(sub))
        if "anyOf" in schema:
            any_of = [self.compile(s) for s in _items(schema, "anyOf")]

            def any_check(value: object) -> Error | None:
                errors = [c(value) for c in any_of]
                if all(e is not None for e in errors):
                    first = next(e for e in errors if e is not None)
                    return first[0], f"{first[1]} (and fails every other choice of anyOf)" if len(errors) > 1 else first[1]
                return None
            out.append(any_check)
        if "oneOf" in schema:
            one_of = [self.compile(s) for s in _items(schema, "oneOf")]

            def one_check(value: object) -> Error | None:
                passed = sum(c(value) is None for c in one_of)
                if passed == 1:
                    return None
                return "", f"{_short(value)} is valid under {passed} of the oneOf schemas, not exactly one"
            out.append(one_check)
        if "not" in schema:
            negated = self.compile(schema["not"])

            def not_check(value: object) -> Error | None:
                return ("", f"{_short(value)} should not be valid under the not schema") if negated(value) is None else None
            out.append(not_check)
        return out


def _jsonschema_check(schema: Mapping[str, object], options: Options) -> Check:
    """The same verdicts through jsonschema, for schemas with keywords this module does not compile."""
    from jsonschema import validators
    from jsonschema.exceptions import ValidationError

    base = validators.validator_for(schema, default=validators.Draft202012Validator)
    strict = options.integers == "strict"
    checker = base.TYPE_CHECKER.redefine("integer", lambda _, v: _is_type(v, "integer", strict))
    chosen: dict[str, Callable[[Validator, object, object, Mapping[str, object]], Iterator[ValidationError]]] = {}
    if options.strings == "normalised":
        def enum(validator: Validator, allowed: object, value: object,
                 schema: Mapping[str, object]) -> Iterator[ValidationError]:
            allowed = allowed if isinstance(allowed, list) else []  # the metaschema holds enum to a list
            if not any(equal(value, a, "normalised") for a in allowed):
                yield ValidationError(f"{_short(value)} is not one of {_short(allowed)}")

        def const(validator: Validator, wanted: object, value: object,
                  schema: Mapping[str, object]) -> Iterator[ValidationError]:
            if not equal(value, wanted, "normalised"):
                yield ValidationError(f"{_short(wanted)} was expected")
        chosen.update(enum=enum, const=const)
    if options.empty_is_omitted:
        plain = base.VALIDATORS["properties"]

        def properties(validator: Validator, props: object, value: object,
                       schema: Mapping[str, object]) -> Iterator[ValidationError]:
            props = props if isinstance(props, dict) else {}  # the metaschema holds properties to a mapping
            if isinstance(value, dict):
                required = _items(schema, "required")
                value = {k: v for k, v in value.items()
                         if not (v == "" and isinstance(v, str) and k in props and k not in required
                                 and _admits_string(props[k]))}
            yield from plain(validator, props, value, schema)
        chosen["properties"] = properties
    cls = validators.extend(base, chosen, type_checker=checker)  # type: ignore[no-untyped-call]
    validator = cls(schema)

    def check(value: object) -> Error | None:
        errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
        if not errors:
            return None
        return errors[0].json_path[1:], errors[0].message
    return check


def _problem(path: str, message: str, fix: str) -> SchemaProblem:
    return SchemaProblem(f"{path}: {message}. Fix: {fix}")


_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties")
_SCHEMA_ONES = ("items", "additionalProperties", "propertyNames", "not")
_COUNTS = ("minProperties", "maxProperties", "minItems", "maxItems", "minLength", "maxLength")


def _malformed(schema: object, path: str = "") -> SchemaProblem | None:
    """What keeps `schema` from being a draft 2020-12 schema, for the keywords compiled here (the rest is
    jsonschema's, which checks its schema against the metaschema). The same faults `finetune check` finds
    with the metaschema (reward_registry.tool_call_schema_problems), found in microseconds."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, dict):
        return _problem(path, f"is {type(schema).__name__}, not a JSON Schema object", "write a mapping such as {type: string}")
    t = schema.get("type")
    for name in ([t] if isinstance(t, str) else t if isinstance(t, list) else [] if t is None else [t]):
        if name not in JSON_TYPES:
            return _problem(path + ".type", f"found {name!r}, which is not a JSON Schema type",
                            f"use a JSON Schema type: {', '.join(JSON_TYPES)}")
    if "enum" in schema and not isinstance(schema["enum"], list):
        return _problem(path + ".enum", f"{_short(schema['enum'])} is not of type 'array'", "write enum as a list, e.g. enum: [value]")
    if "required" in schema and not (isinstance(schema["required"], list) and all(isinstance(r, str) for r in schema["required"])):
        return _problem(path + ".required", "is not a list of property names", "write required as a list, e.g. required: [name]")
    for key in _COUNTS:
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], int) or schema[key] < 0):
            return _problem(f"{path}.{key}", f"found {_short(schema[key])}", "write a whole number >= 0")
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], (int, float))):
            return _problem(f"{path}.{key}", f"found {_short(schema[key])}", "write a number")
    patterns = ([schema["pattern"]] if "pattern" in schema else []) + list(schema.get("patternProperties") or {})
    for pattern in patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError):
            return _problem(path + (".pattern" if "pattern" in schema else ".patternProperties"),
                            f"{pattern!r} is not a 'regex'", "write a valid regular expression (Python's re syntax)")
    for key in _SCHEMA_LISTS:
        if key in schema:
            if not isinstance(schema[key], list) or not schema[key]:
                return _problem(f"{path}.{key}", "is not a non-empty list of schemas", f"write {key} as a list of schemas")
            for i, sub in enumerate(schema[key]):
                problem = _malformed(sub, f"{path}.{key}[{i}]")
                if problem:
                    return problem
    for key in _SCHEMA_MAPS:
        if key in schema:
            if not isinstance(schema[key], dict):
                return _problem(f"{path}.{key}", "is not a mapping of schemas", f"write {key} as a mapping")
            for name, sub in schema[key].items():
                problem = _malformed(sub, f"{path}.{key}.{name}")
                if problem:
                    return problem
    for key in _SCHEMA_ONES:
        if key in schema:
            problem = _malformed(schema[key], f"{path}.{key}")
            if problem:
                return problem
    return None


def compile_schema(schema: object, options: Options = Options()) -> Check:
    """A check for `schema`, or SchemaProblem naming the first thing that keeps it from compiling."""
    if isinstance(schema, dict) and _needs_jsonschema(schema):
        problems = tool_call_schema_problems([{"name": "_", "arguments": schema}])
        if problems:
            path, message, fix = problems[0]
            raise _problem(path.removeprefix("[0].arguments"), message, fix)
        return _jsonschema_check(schema, options)
    problem = _malformed(schema)
    if problem:
        raise problem
    return _Compiler(options).compile(schema)
