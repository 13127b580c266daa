"""Rows of a brief's data split and the chat messages built from them.

Local files (jsonl, json, csv, parquet; relative to the brief) are read here; a hub dataset id goes
through `datasets.load_dataset` (imported only then). The messages are built exactly as training
builds them: a string prompt becomes one user message, a list of messages is used as given, and
`data.system_prompt` is prepended as a system message unless the prompt already starts with one.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning.brief import Brief
from llm_finetuning.brief.sections import data_is_local
from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import sha256_bytes, sha256_file
from llm_finetuning.sampling.backend import ChatMessage

# One example of a split: its columns as the file or dataset holds them (JSON values, or a parquet file's types).
Row = dict[str, object]


@dataclass
class DataSplit:
    """The rows of one split, what they came from, and a sha256 that binds records to them."""

    rows: list[Row]
    split: str  # "eval" or "train"
    source: str  # the file or hub id, for messages and records
    sha256: str
    yaml_path: str  # data.eval or data.train


def _read_local(path: Path, yaml_path: str) -> list[Row]:
    if not path.is_file():
        raise UnusableInput(f"{yaml_path} names {path}, which does not exist",
                            "point it at a jsonl/json/csv/parquet file relative to the brief", yaml_path)
    suffix = path.suffix.lower()
    rows: object
    try:
        if suffix == ".jsonl":
            lines: list[object] = []
            rows = lines
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    lines.append(json.loads(line))
                except ValueError as exc:
                    raise UnusableInput(f"{path} line {number} is not JSON: {exc}",
                                        "write one JSON object per line", yaml_path) from None
        elif suffix == ".json":
            loaded = json.loads(path.read_text(encoding="utf-8"))
            rows = loaded.get("data", loaded) if isinstance(loaded, dict) else loaded
        elif suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as fh:
                rows = list(csv.DictReader(fh))
        elif suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
        else:
            raise UnusableInput(f"{yaml_path} names {path.name}; the format {suffix or '(none)'} is not read",
                                "use .jsonl, .json, .csv or .parquet", yaml_path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UnusableInput(f"{path} cannot be read: {exc}", "fix or regenerate the file", yaml_path) from None
    objects = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    if not isinstance(rows, list) or len(objects) != len(rows):
        raise UnusableInput(f"{path} does not hold a list of objects", "one object per example", yaml_path)
    return objects


def _read_hub(dataset_id: str, split: str, yaml_path: str) -> list[Row]:
    try:
        from datasets import load_dataset

        return [dict(r) for r in load_dataset(dataset_id, split=split)]
    except Exception as exc:  # noqa: BLE001 - any loader failure is unusable input, reported in one line
        raise UnusableInput(f"{yaml_path}: hub dataset {dataset_id!r} (split {split!r}) cannot be loaded: "
                            f"{type(exc).__name__}: {exc}",
                            "check the id and split, or download it and point the brief at a local file",
                            yaml_path) from None


def load_split(brief: Brief, which: str = "auto") -> DataSplit:
    """The eval split (`which="auto"` falls back to train when the brief has none) or the train split.

    `data.eval` may be a local file, a hub dataset id, or, when `data.train` is a hub id, the name of
    another split of that dataset (e.g. `test`).
    """
    data = brief.data
    folder: Path = brief.folder
    use_eval = which == "eval" or (which == "auto" and bool(data.eval))
    if use_eval and not data.eval:
        raise UnusableInput("data.eval is not set", "add held-out prompts as data.eval", "data.eval")
    spec = str(data.eval if use_eval else data.train)
    yaml_path = "data.eval" if use_eval else "data.train"
    if data_is_local(spec, folder):
        path = brief.resolve(spec)
        rows = _read_local(path, yaml_path)
        source, digest = str(path), sha256_file(path)
    else:
        if use_eval and data.eval_is_split(folder):
            dataset_id, split = data.train, spec
        else:
            dataset_id, split = spec, data.split or "train"
        rows = _read_hub(dataset_id, split, yaml_path)
        source = f"{dataset_id}[{split}]"
        digest = sha256_bytes(f"hf-dataset:{source}".encode())
    if not rows:
        raise UnusableInput(f"{yaml_path} ({source}) holds no rows", "add examples", yaml_path)
    field = data.prompt_field
    missing = [i for i, r in enumerate(rows) if field not in r]
    if missing:
        raise UnusableInput(f"{yaml_path} ({source}): row {missing[0]} has no column {field!r} "
                            f"({len(missing)} row(s) lack it; columns: {sorted(rows[missing[0]])})",
                            "set data.prompt_field to the column holding the prompt", "data.prompt_field")
    return DataSplit(rows, "eval" if use_eval else "train", source, digest, yaml_path)


def pick_indices(n_rows: int, n: int, seed: int) -> list[int]:
    """`n` row indices spread over the split (all of them when n >= n_rows), seeded and sorted."""
    if n >= n_rows:
        return list(range(n_rows))
    return sorted(random.Random(seed).sample(range(n_rows), n))


def _message(m: object) -> ChatMessage | None:
    """A prompt's message when it is one ({role, content} strings); an assistant turn's tool_calls and a tool
    message's name stay: a worked episode can be part of a prompt."""
    if not isinstance(m, dict):
        return None
    role, content = m.get("role"), m.get("content")
    if not isinstance(role, str) or not isinstance(content, str):
        return None
    message: ChatMessage = {"role": role, "content": content}
    if "tool_calls" in m:
        message["tool_calls"] = m["tool_calls"]
    if "name" in m:
        message["name"] = m["name"]
    return message


def build_messages(prompt: object, system_prompt: str | None,
                   yaml_path: str = "data.prompt_field") -> list[ChatMessage]:
    """The chat messages for one prompt: a string or a list of {role, content}, plus the system prompt."""
    given = [_message(m) for m in prompt] if isinstance(prompt, list) else []
    messages: list[ChatMessage]
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    elif given and all(m is not None for m in given):
        messages = [m for m in given if m is not None]
    else:
        raise UnusableInput(f"a prompt is neither a string nor a list of {{role, content}} messages: "
                            f"{json.dumps(prompt, default=str)[:80]}",
                            "store each prompt as a string or as chat messages", yaml_path)
    if system_prompt and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def prompt_text(prompt: object) -> str:
    """A prompt as one readable string (the last user message of a conversation)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if users:
            return str(users[-1])
    return json.dumps(prompt, ensure_ascii=False, default=str)
