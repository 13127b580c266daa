"""Schema validation and cross-field consistency of a brief, every error at once.

Each error is a `Problem(id, path, message, fix)`; nothing here prints or exits. Pure: reads only the
files a brief names (existence checks and the AST of custom reward modules), never imports them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

import jsonschema
from jsonschema import Draft202012Validator

from llm_finetuning import reward_registry as registry
from llm_finetuning.brief.columns import check_data_columns
from llm_finetuning.brief.defaults import apply_defaults, list_at, object_at, schema
from llm_finetuning.brief.episode import check_episode
from llm_finetuning.brief.sections import DATA_SUFFIXES, data_is_local
from llm_finetuning.brief.variants import VARIANT_SYMPTOM
from llm_finetuning.errors import Problem, format_path, short_repr
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.models import EMBEDDED_IDS, EMBEDDED_PREFIX, model_is_local


def _validator(node: JsonObject) -> Draft202012Validator:
    return Draft202012Validator(node, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _type_name(value: object) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping",
            type(None): "null"}.get(type(value), type(value).__name__)


def _example_for(sub: JsonObject) -> str:
    required = list_at(sub, "required")
    if sub.get("type") == "object" and required:
        props = object_at(sub, "properties")
        inner = ", ".join(f"{k}: {_example_for(object_at(props, str(k)))}" for k in required)
        return "{" + inner + "}"
    if "default" in sub and sub["default"] is not None:
        return short_repr(sub["default"])
    if "enum" in sub:
        return str([e for e in list_at(sub, "enum") if e is not None][0])
    t = sub.get("type")
    t = t[0] if isinstance(t, list) else t
    return {"string": "...", "integer": "1", "number": "1.0", "object": "{}", "array": "[]", "boolean": "true"}.get(
        str(t), "...")


def _pattern_alternatives(pattern: str) -> tuple[list[str], list[str]]:
    """A pattern of alternatives such as `^(auto|boxed|last_number|regex:.+)$` as (its plain words, its other
    forms shown as `regex:<pattern>`); ([], []) for any other pattern."""
    m = re.fullmatch(r"\^\(([^()]*)\)\$", pattern)
    if not m:
        return [], []
    alternatives = m.group(1).split("|")
    words = [a for a in alternatives if re.fullmatch(r"[A-Za-z0-9_-]+", a)]
    forms = [a.replace(".+", "<pattern>") for a in alternatives if a not in words]
    return words, forms


def _schema_error(err: jsonschema.ValidationError, prefix: tuple[str | int, ...] = ()) -> list[Problem]:
    parts = list(prefix) + list(err.absolute_path)
    path = format_path(parts)
    v = err.validator
    inst = err.instance
    sch: JsonObject = err.schema if isinstance(err.schema, dict) else {}
    if v == "required":
        missing = [str(m) for m in list_at(sch, "required") if isinstance(inst, dict) and m not in inst]
        out = []
        for m in missing:
            sub = object_at(object_at(sch, "properties"), m)
            out.append(Problem("missing_field", format_path([*parts, m]), "is missing",
                               f"add `{m}: {_example_for(sub)}` ({sub.get('description', 'required')})"))
        return out
    if v == "additionalProperties":
        known = sorted(object_at(sch, "properties"))
        extra = [k for k in inst if k not in object_at(sch, "properties")] if isinstance(inst, dict) else []
        out = []
        for k in extra:
            close = difflib.get_close_matches(str(k), known, n=1)
            hint = f"rename it to `{close[0]}`" if close else f"remove it (known fields: {', '.join(known)})"
            out.append(Problem("unknown_field", format_path([*parts, str(k)]), "is not a field of the brief", hint))
        return out
    if v in ("enum", "const") and parts == ["method"]:
        return [Problem("not_grpo", path, f"found {short_repr(inst)}; this product trains GRPO only",
                        "set `method: grpo`; for preference pairs use the preference-optimization skill (DPO), "
                        "for demonstrations the lora-qlora-recipes skill (SFT)")]
    if v in ("enum", "const"):
        allowed = list_at(sch, "enum") if "enum" in sch else [sch.get("const")]
        shown = " | ".join(str(a) for a in allowed if a is not None)
        close = difflib.get_close_matches(str(inst), [str(a) for a in allowed if a is not None], n=1)
        fix = f"set it to `{close[0]}`" if close else f"use one of: {shown}"
        return [Problem("invalid_value", path, f"found {short_repr(inst)}; expected one of {shown}", fix)]
    if v == "type":
        want = sch.get("type")
        want_s = " or ".join(str(w) for w in want) if isinstance(want, list) else str(want)
        return [Problem("invalid_value", path,
                        f"found {_type_name(inst)} {short_repr(inst)}; expected {want_s}",
                        f"write {'an' if want_s[0] in 'aeiou' else 'a'} {want_s} here (e.g. {_example_for(sch)})")]
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        word = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[str(v)]
        return [Problem("invalid_value", path,
                        f"found {short_repr(inst)}; must be {word} {err.validator_value}",
                        f"set a value {word} {err.validator_value}")]
    if v == "pattern":
        words, forms = _pattern_alternatives(str(err.validator_value))
        if words:
            shown = " | ".join(words + forms)
            close = difflib.get_close_matches(str(inst), words, n=1)
            fix = f"did you mean `{close[0]}`? set it to `{close[0]}`" if close else f"use one of: {shown}"
            return [Problem("invalid_value", path, f"found {short_repr(inst)}; expected one of {shown}", fix)]
        return [Problem("invalid_value", path, f"found {short_repr(inst)}; must match {err.validator_value}",
                        "use lowercase letters, digits and '-'" if "a-z0-9-" in str(err.validator_value)
                        else f"write a value matching {err.validator_value}")]
    if v in ("minLength", "minItems"):
        return [Problem("invalid_value", path, "is empty", "give at least one value")]
    if v in ("maxLength", "maxItems"):
        return [Problem("invalid_value", path, f"is too long (limit {err.validator_value})", "shorten it")]
    if v == "oneOf" and isinstance(inst, dict):
        alternatives = err.validator_value if isinstance(err.validator_value, list) else []
        options = [" + ".join(o.get("required", [])) for o in alternatives if isinstance(o, dict)]
        given = [o for o in options if o and all(k in inst for k in o.split(" + "))]
        what = "sets " + " and ".join(given) if len(given) > 1 else "sets none of " + " / ".join(options)
        return [Problem("conflicting_fields", path, what, f"give exactly one of: {' / '.join(options)}")]
    if v == "not":
        return [Problem("conflicting_fields", path,
                        "combines fields that exclude each other", "keep only one of them")]
    return [Problem("invalid_value", path, err.message, "see references/brief-fields.md")]


def _collect_schema_errors(raw: JsonObject) -> list[Problem]:
    errors: list[Problem] = []
    for err in _validator(schema()).iter_errors(raw):
        if err.validator == "anyOf" and list(err.absolute_path)[-1:] == ["target_modules"]:
            errors.append(Problem("invalid_value", format_path(list(err.absolute_path)), f"found {short_repr(err.instance)}",
                                  "write `all-linear` or a list of module names such as [q_proj, v_proj]"))
            continue
        errors.extend(_schema_error(err))
    return errors


def _exists(path: Path) -> bool:
    """Path.exists that treats an impossible name (too long, NUL byte) as absent."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _check_data(data: JsonObject, folder: Path) -> list[Problem]:
    errors = []
    for key in ("train", "eval"):
        ref = data.get(key)
        if not isinstance(ref, str) or not ref:
            continue
        if data_is_local(ref, folder):
            p = Path(ref).expanduser()
            p = p if p.is_absolute() else folder / p
            if not _exists(p):
                errors.append(Problem("missing_file", f"data.{key}",
                                      f"file {ref!r} does not exist (looked at {p})",
                                      "fix the path (relative to the brief's folder) or generate the data"))
            elif p.is_file() and not p.name.lower().endswith(DATA_SUFFIXES):
                errors.append(Problem("unsupported_format", f"data.{key}",
                                      f"{ref!r} is not a .jsonl, .json, .parquet or .csv file",
                                      "convert the data to JSON Lines"))
    return errors


def _check_model(model: JsonObject, raw_model: JsonObject, folder: Path) -> list[Problem]:
    errors = []
    if "lora" in raw_model and model.get("adapter") == "full":
        errors.append(Problem("inconsistent_fields", "model.lora", "is set but model.adapter is full",
                              "set `model.adapter: lora` (or qlora), or remove model.lora"))
    mid = model.get("id")
    if not isinstance(mid, str) or not mid:
        return errors  # the schema error already names model.id
    if mid.startswith(EMBEDDED_PREFIX) and mid not in EMBEDDED_IDS:
        return errors + [_unknown_embedded(mid)]
    gguf = model.get("gguf_file")
    if model_is_local(mid, folder):
        p = Path(mid).expanduser()
        p = p if p.is_absolute() else folder / p
        if not _exists(p) or not p.is_dir():
            errors.append(Problem("missing_file", "model.id",
                                  f"local model directory {mid!r} does not exist (looked at {p})",
                                  "give an existing directory with config.json, or a hub id such as Qwen/Qwen2.5-1.5B-Instruct"))
        elif isinstance(gguf, str) and gguf and not (_exists(p / gguf) and (p / gguf).is_file()):
            errors.append(Problem("missing_file", "model.gguf_file", f"{gguf!r} is not a file inside {mid!r}",
                                  "name a .gguf file that exists in model.id"))
    if isinstance(gguf, str) and gguf and not gguf.endswith(".gguf"):
        errors.append(Problem("invalid_value", "model.gguf_file",
                              f"found {gguf!r}; expected a file name ending in .gguf",
                              "name the .gguf file, or set it to null"))
    if model.get("adapter") == "qlora" and model.get("dtype") == "float32":
        errors.append(Problem("inconsistent_fields", "model.dtype",
                              "qlora computes in bfloat16 or float16, found float32",
                              "set `model.dtype: bfloat16`"))
    return errors


def _unknown_embedded(mid: str) -> Problem:
    """An `embedded:` id that names no embedded model (a typo would otherwise reach the hub as a model id)."""
    close = difflib.get_close_matches(mid, EMBEDDED_IDS, n=1, cutoff=0.5)
    known = ", ".join(EMBEDDED_IDS)
    fix = (f"did you mean `{close[0]}`? set `model.id: {close[0]}`" if close else f"set `model.id` to one of {known}") + \
        ", or give a hub id (owner/name) or a local model folder"
    return Problem("unknown_model", "model.id", f"unknown embedded model {mid!r}; the embedded models are: {known}", fix)


def _check_rewards(rewards: Sequence[JsonValue], folder: Path) -> list[Problem]:
    errors: list[Problem] = []
    for i, spec in enumerate(rewards):
        fn = spec.get("fn") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or not isinstance(fn, str):
            continue
        base = f"rewards[{i}]"
        if registry.is_custom(fn):
            try:
                _, problem = registry.locate_custom(fn, folder)
            except (OSError, ValueError) as exc:
                problem = f"{fn!r} cannot be looked up as a module: {exc}"
            if problem:
                errors.append(Problem("reward_not_found", f"{base}.fn", problem,
                                      "put the module next to the brief (or on PYTHONPATH) and check the names"))
            continue
        if fn not in registry.BUILTINS:
            close = difflib.get_close_matches(fn, registry.builtin_names(), n=1)
            fix = (f"did you mean `{close[0]}`? " if close else "") + \
                f"use one of {', '.join(registry.builtin_names())}, or module:function for a custom reward"
            errors.append(Problem("unknown_reward", f"{base}.fn", f"unknown reward {fn!r}", fix))
            continue
        args = spec.get("args", {})
        if not isinstance(args, dict):
            continue
        arg_schema = registry.BUILTINS[fn][1]
        for err in _validator(arg_schema).iter_errors(args):
            errors.extend(_schema_error(err, prefix=("rewards", i, "args")))
        if fn == "tool_call":
            for sub, message, fix in registry.tool_call_schema_problems(args.get("expected")):
                errors.append(Problem("invalid_schema", f"{base}.args.expected{sub}", message, fix))
    return errors


def _check_grpo(grpo: JsonObject) -> list[Problem]:
    errors = []
    variant = grpo.get("variant", "grpo")
    symptom = grpo.get("symptom")
    if variant != "grpo" and symptom is None:
        want = VARIANT_SYMPTOM.get(str(variant), "...")
        errors.append(Problem("inconsistent_fields", "grpo.symptom", f"is required with variant {variant!r}",
                              f"set `grpo.symptom: {want}` after `finetune diagnose` showed it, or go back to `variant: grpo`"))
    if variant == "grpo" and symptom is not None:
        errors.append(Problem("inconsistent_fields", "grpo.symptom", f"found {symptom!r} but variant is grpo",
                              f"set `grpo.variant: {[v for v, s in VARIANT_SYMPTOM.items() if s == symptom][0]}` or remove the symptom"))
    overrides = grpo.get("overrides", {})
    decided = set(grpo) - {"overrides", "variant", "symptom", "deviation"}
    if isinstance(overrides, dict):
        for key in sorted(overrides):
            if key in decided:
                errors.append(Problem("inconsistent_fields", f"grpo.overrides.{key}",
                                      f"repeats grpo.{key}, which the brief already decides",
                                      f"set `grpo.{key}` and remove it from overrides"))
    return errors


def _check_hardware(hw: JsonObject) -> list[Problem]:
    errors = []
    gpus = hw.get("gpus", 1)
    if gpus == 0 and hw.get("generation") != "transformers":
        errors.append(Problem("inconsistent_fields", "hardware.generation",
                              f"{hw.get('generation')} needs a GPU but hardware.gpus is 0",
                              "set `hardware.generation: transformers` for a CPU run"))
    return errors


def check_brief(raw: JsonObject, folder: Path) -> list[Problem]:
    """Every error of the brief: schema first, then cross-field checks on the defaulted brief."""
    errors = _collect_schema_errors(raw)
    # Cross-field checks run on whatever sections are well-typed, so one bad field hides nothing else.
    data = apply_defaults({k: v for k, v in raw.items()})
    model, data_section, grpo, hardware, rewards = (data.get(k) for k in ("model", "data", "grpo", "hardware",
                                                                          "rewards"))
    if isinstance(model, dict):
        errors += _check_model(model, object_at(raw, "model"), folder)
    if isinstance(data_section, dict):
        data_errors = _check_data(data_section, folder)
        errors += data_errors
        if not data_errors and isinstance(rewards, list):
            errors += check_data_columns(data_section, rewards, folder)
    if isinstance(rewards, list):
        errors += _check_rewards(rewards, folder)
    if isinstance(grpo, dict):
        errors += _check_grpo(grpo)
    if isinstance(hardware, dict):
        errors += _check_hardware(hardware)
    errors += check_episode(data, folder)
    return sorted(set(errors), key=lambda e: (e.path, e.message))
