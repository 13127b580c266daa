"""What a record is bound to, computed the same way when a record is written and when it is verified.

A record binds by sha256 to: the reward specs of the brief (each `rewards[i]` entry with defaults),
the source files of every reward function used, the model (id, revision, GGUF file, and a light
fingerprint of a local model directory), the data or samples it was computed from, and for a tool-use
brief the episode section, the source files of its tools or environment and its chat template. Pure:
reads files, imports no reward or tool code and no ML library.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llm_finetuning.brief import Brief, DataSpec, ModelSpec, RewardSpec
from llm_finetuning.brief.episode import template_path
from llm_finetuning.cache import KeyedEntries
from llm_finetuning.errors import Problem
from llm_finetuning.fileio import (
    sha256_bytes,
    sha256_file_or_none,
    sha256_json,
    stat_key,
)
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.rewards.sources import file_label
from llm_finetuning.rewards.sources import reward_source_files as _reward_sources

_SOURCES = KeyedEntries("reward-sources.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


def reward_source_files(fn: str, brief_folder: Path) -> list[Path]:
    """`rewards.sources.reward_source_files`, remembered in the cache while none of the files found (nor their
    folders, nor the brief's folder) changed size or mtime: finding them parses every module of the closure."""
    folder = Path(brief_folder).resolve()
    name = f"{fn}\0{folder}"
    hit = _SOURCES.get(name, lambda files: _source_stats([Path(str(f)) for f in _listed(files)], folder))
    if isinstance(hit, list):
        return [Path(str(f)) for f in hit]
    files = [Path(p) for p in _reward_sources(fn, folder)]
    _SOURCES.put(name, _source_stats(files, folder), [str(f) for f in files])
    return files


def _listed(files: JsonValue) -> list[JsonValue]:
    """The files a cache entry lists (TypeError when it is not a list: a miss)."""
    if not isinstance(files, list):
        raise TypeError("a cached entry that lists no files")
    return files


def _source_stats(files: list[Path], folder: Path) -> list[list[str | int]]:
    dirs = sorted({str(f.parent) for f in files} | {str(folder)})
    return [stat_key(f) for f in files] + [stat_key(Path(d)) for d in dirs]


def reward_bindings(rewards: Sequence[RewardSpec], brief_folder: Path) -> list[JsonObject]:
    """Per reward: name, fn, sha256 of its spec, and sha256 of each of its source files."""
    out: list[JsonObject] = []
    for spec in rewards:
        code: JsonObject = {}
        for f in reward_source_files(spec.fn, brief_folder):
            code[file_label(f, brief_folder)] = sha256_file_or_none(f) or "unreadable"
        out.append({"name": spec.name, "fn": spec.fn, "spec_sha256": sha256_json(spec.as_mapping()), "code": code})
    return out


def code_sha256(bound: list[JsonObject]) -> str:
    """One sha256 over the source files of every reward (`reward_bindings`' `code` maps)."""
    return sha256_json(sorted({k: v for b in bound for k, v in as_object(b.get("code")).items()}.items()))


def as_object(value: JsonValue) -> JsonObject:
    """`value` when it is a JSON object, else an empty one: a binding a record lacks compares as absent."""
    return value if isinstance(value, dict) else {}


def model_fingerprint(model: ModelSpec, brief_folder: Path) -> str:
    """A cheap, stable fingerprint of the model the brief names.

    Hub ids: `hub:<id>@<revision>`. Local directories: the sha256 of config.json plus the name and size
    of every weight file (hashing gigabytes of weights would make the gate slow; a retrained model in
    place changes its sizes or config in practice, and the sampler's own identity is bound as well).
    """
    mid = model.id
    if model.is_embedded:
        return mid
    if not model.is_local(brief_folder):
        return f"hub:{mid}@{model.revision or 'main'}"
    d = Path(mid).expanduser()
    d = d if d.is_absolute() else brief_folder / d
    parts: list[JsonValue] = [sha256_file_or_none(d / "config.json") or "no-config"]
    try:
        files = sorted(p for p in d.iterdir() if p.name.endswith(WEIGHT_SUFFIXES))
    except OSError:
        files = []
    parts += [[p.name, p.stat().st_size] for p in files]
    if model.gguf_file:
        parts.append(["gguf_file", model.gguf_file])
    return "local:" + sha256_json(parts)


def model_binding(model: ModelSpec, brief_folder: Path, identity: str | None) -> JsonObject:
    return {
        "id": model.id,
        "revision": model.revision,
        "gguf_file": model.gguf_file,
        "fingerprint": model_fingerprint(model, brief_folder),
        "identity": identity,
    }


def data_binding(data: DataSpec, brief_folder: Path) -> tuple[str, str]:
    """(source, sha256) of the prompts a baseline samples from: data.eval when set, else data.train."""
    ref = data.eval or data.train
    p = Path(ref).expanduser()
    p = p if p.is_absolute() else brief_folder / p
    if p.is_file():
        return ref, sha256_file_or_none(p) or "unreadable"
    return ref, sha256_bytes(f"hub:{ref}:{data.split}".encode())


def episode_binding(brief: Brief) -> JsonObject | None:
    """The episode a record was sampled under: its section, and sha256 of each tool's and the environment's
    source files (as reward code is bound) and of the chat template file; None without an episode."""
    spec = brief.episode
    if spec is None:
        return None
    code: JsonObject = {}
    for _, ref in spec.code_refs():
        for f in reward_source_files(ref, brief.folder):
            code[file_label(f, brief.folder)] = sha256_file_or_none(f) or "unreadable"
    template = template_path(spec, brief.folder)
    if template is not None:
        code[file_label(template, brief.folder)] = sha256_file_or_none(template) or "unreadable"
    return {"spec_sha256": sha256_json(brief.as_mapping()["episode"]), "code": code}  # the section as defaulted


def _episode_problems(stored: JsonValue, current: JsonValue, fix: str) -> list[Problem]:
    """What changed in the episode (tools, environment, template) since a record, naming each file."""
    if stored == current:
        return []
    if not isinstance(stored, dict) or not isinstance(current, dict):
        what = "the brief gained an episode section" if current else "the brief's episode section was removed"
        return [Problem("stale", "episode", f"{what} since the record", fix)]
    changes = ["the episode section (tools, environment, max_turns, chat_template) changed"] \
        if stored.get("spec_sha256") != current.get("spec_sha256") else []
    old, new = as_object(stored.get("code")), as_object(current.get("code"))
    changes += [f"{label} {'is new' if label not in old else 'is no longer used' if label not in new else 'changed'}"
                for label in sorted(set(old) | set(new)) if old.get(label) != new.get(label)]
    return [Problem("stale", "episode", "the episode's tools changed since the record: " + "; ".join(changes), fix)]


def current_bindings(brief: Brief, model_identity: str | None) -> JsonObject:
    """The bindings a record written now for `brief` would carry (shared by baseline and inspection)."""
    bound: list[JsonValue] = [*reward_bindings(brief.rewards, brief.folder)]
    source, data_sha = data_binding(brief.data, brief.folder)
    episode = episode_binding(brief)
    return {
        **({"episode": episode} if episode is not None else {}),  # absent for a brief without tools
        "rewards_spec_sha256": sha256_json([r.as_mapping() for r in brief.rewards]),
        "rewards": bound,
        "reward_code_sha256": code_sha256([b for b in bound if isinstance(b, dict)]),
        "model": model_binding(brief.model, brief.folder, model_identity),
        "data_source": source,
        "data_sha256": data_sha,
        # the prompt format the samples were drawn with (a record without it was sampled with none)
        "chat_template_kwargs": dict(brief.data.chat_template_kwargs),
    }


def _rewards_by_name(bindings: JsonObject) -> dict[str, JsonObject]:
    found = bindings.get("rewards")
    return {str(b.get("name")): b for b in found if isinstance(b, dict)} if isinstance(found, list) else {}


def stale_problems(stored: JsonObject, current: JsonObject, fix: str,
                   check_identity: bool, check_data: bool = False) -> list[Problem]:
    """Problems naming exactly what changed between a record's bindings and the brief's now (`current`, from
    `current_bindings`)."""
    problems: list[Problem] = []
    old_rewards = _rewards_by_name(stored)
    new_rewards = _rewards_by_name(current)
    spec_changes = []
    code_changes = []
    for i, (name, new) in enumerate(new_rewards.items()):
        old = old_rewards.get(name)
        if old is None:
            spec_changes.append(f"rewards[{i}] ({name}) was added")
            continue
        if old.get("spec_sha256") != new.get("spec_sha256"):
            spec_changes.append(f"rewards[{i}] ({name}) fn/weight/args changed")
        old_code, new_code = as_object(old.get("code")), as_object(new.get("code"))
        for label in sorted(set(old_code) | set(new_code)):
            if label not in new_code:
                code_changes.append(f"{label} is no longer part of {name}")
            elif label not in old_code:
                code_changes.append(f"{label} is new in {name}")
            elif old_code[label] != new_code[label]:
                code_changes.append(f"{label} ({name}) changed")
    for name in old_rewards:
        if name not in new_rewards:
            spec_changes.append(f"reward {name} was removed")
    if not spec_changes and stored.get("rewards_spec_sha256") != current.get("rewards_spec_sha256"):
        spec_changes.append("the rewards list changed (order or content)")
    if spec_changes:
        problems.append(Problem("stale", "rewards_spec", "reward specs changed since the record: "
                                + "; ".join(spec_changes), fix))
    if code_changes:
        problems.append(Problem("stale", "reward_code", "reward code changed since the record: "
                                + "; ".join(dict.fromkeys(code_changes)), fix))
    old_model, new_model = as_object(stored.get("model")), as_object(current.get("model"))
    changed = [f"model.{k}: {old_model.get(k)!r} -> {new_model.get(k)!r}" for k in ("id", "revision", "gguf_file")
               if old_model.get(k) != new_model.get(k)]
    if not changed and old_model.get("fingerprint") != new_model.get("fingerprint"):
        changed.append(f"the files of model {new_model.get('id')!r} changed (config.json or weight files)")
    if (check_identity and new_model.get("identity") is not None
            and old_model.get("identity") != new_model.get("identity")):
        changed.append(f"model identity {old_model.get('identity')!r} -> {new_model.get('identity')!r}")
    if changed:
        problems.append(Problem("stale", "model", "the model changed since the record: " + "; ".join(changed), fix))
    old_kwargs = stored.get("chat_template_kwargs") or {}
    if old_kwargs != current.get("chat_template_kwargs"):
        problems.append(Problem("stale", "chat_template", "data.chat_template_kwargs changed since the record: "
                                f"{old_kwargs!r} -> {current.get('chat_template_kwargs')!r} (the prompts were rendered "
                                "differently)", fix))
    problems += _episode_problems(stored.get("episode"), current.get("episode"), fix)
    if check_data and stored.get("data_sha256") != current.get("data_sha256"):
        problems.append(Problem("stale", "data", f"the prompts ({current.get('data_source')}) changed since the record",
                                fix))
    return problems
