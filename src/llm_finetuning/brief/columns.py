"""The columns a brief names exist in its data: `data.prompt_field` and every reward's column argument
(`answer_field`, `schema_field`, `tests_field`, `io_field`, `expected_field`), and the argument schemas in a
`tool_call` expected-calls column compile.

`finetune check` (and so the gate) reads the first rows of the local train and eval files with the
standard library alone (JSON Lines, JSON, CSV; Parquet's schema only when pyarrow is importable), so a
brief whose reward reads a column the data lacks is refused before anything samples or trains. The
sampling verbs run the same check on the rows they loaded (a hub dataset included) before they sample.
"""

from __future__ import annotations

import csv
import difflib
import importlib.util
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning.brief.sections import DataSpec, RewardSpec
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.reward_registry import data_columns, tool_call_schema_problems

FIRST_ROWS = 20


@dataclass(frozen=True)
class Needed:
    """A column the brief needs: the YAML path that names it and the column's name."""

    yaml_path: str
    column: str
    written: bool  # named in the YAML (False: the reward's default)


def needed_columns(data: JsonObject, rewards: Sequence[JsonValue]) -> list[Needed]:
    """Every column the brief reads from each row, with the YAML path that decides it."""
    out = [Needed("data.prompt_field", str(data.get("prompt_field") or "prompt"), "prompt_field" in data)]
    for i, spec in enumerate(rewards):
        fn = spec.get("fn") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or not isinstance(fn, str):
            continue
        found = spec.get("args")
        args: JsonObject = found if isinstance(found, dict) else {}
        for arg, column in data_columns(fn, args):
            out.append(Needed(f"rewards[{i}].args.{arg}", column, arg in args))
    return out


def parquet_readable() -> bool:
    try:
        return importlib.util.find_spec("pyarrow") is not None
    except (ImportError, ValueError):
        return False


def first_rows(path: Path, n: int = FIRST_ROWS) -> list[dict[str, object]] | None:
    """The first `n` rows' columns (values only where the format gives them cheaply), or None when the
    format cannot be read without a missing package (Parquet without pyarrow). Raises ValueError with a
    one-line reason for a file that does not hold rows."""
    suffix = path.suffix.lower()
    rows: object = []
    if suffix == ".jsonl":
        lines: list[object] = []
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if len(lines) >= n:
                    break
                if line.strip():
                    try:
                        lines.append(json.loads(line))
                    except ValueError as exc:
                        raise ValueError(f"line {number} is not JSON ({exc})") from None
        rows = lines
    elif suffix == ".json":
        loaded = json.loads(path.read_text(encoding="utf-8"))
        rows = loaded.get("data", loaded) if isinstance(loaded, dict) else loaded
        rows = rows[:n] if isinstance(rows, list) else rows
    elif suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as fh:
            rows = [row for _, row in zip(range(n), csv.DictReader(fh), strict=False)]
    elif suffix == ".parquet":
        if not parquet_readable():
            return None
        import pyarrow.parquet as pq

        batch = next(pq.ParquetFile(path).iter_batches(batch_size=n), None)
        rows = batch.to_pylist() if batch is not None else []
    else:
        return None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("it does not hold a list of objects (one object per example)")
    return rows


def missing_columns(needed: list[Needed], rows: Sequence[Mapping[str, object]], source: str,
                    name_path: bool = False, every_row: bool = True) -> list[Problem]:
    """One error per needed column that some of `rows` lack (`every_row=False`: that all of them lack),
    naming the columns they do have (`name_path`: the message itself names the YAML path, for errors
    printed without it)."""
    errors = []
    for need in needed:
        lacking = [i for i, row in enumerate(rows) if need.column not in row]
        if not lacking or (not every_row and len(lacking) < len(rows)):
            continue
        found = sorted(rows[lacking[0]])
        default = "" if need.written else ", the default"
        subject = (f"the column {need.yaml_path} names ({need.column!r}{default})" if name_path
                   else f"column {need.column!r}{' (the default)' if default else ''}")
        read = "the only row" if len(rows) == 1 else f"the first {len(rows)} rows"
        if len(lacking) == len(rows):
            what = (f"{subject} is {'not in' if len(rows) == 1 else 'in none of'} {read} of {source}; "
                    f"columns found: {', '.join(found)}")
        else:
            what = (f"{subject} is missing from row {lacking[0]} of {source} ({len(lacking)} "
                    f"of {read} lack it); that row has: {', '.join(found)}")
        close = difflib.get_close_matches(need.column, found, n=1, cutoff=0.8)  # a typo, not a guess
        how = (f"set `{need.yaml_path}: {close[0]}`" if close
               else f"set `{need.yaml_path}` to the right column (one of: {', '.join(found)})")
        errors.append(Problem("missing_column", need.yaml_path, what,
                              f"{how}, or add the column {need.column!r} to the data"))
    return errors


def check_data_columns(data: JsonObject, rewards: Sequence[JsonValue], folder: Path) -> list[Problem]:
    """Errors for columns the brief names that the local train/eval files lack (hub datasets are checked
    when a verb loads them)."""
    needed = needed_columns(data, rewards)
    errors: list[Problem] = []
    for key in ("train", "eval"):
        ref = data.get(key)
        if not isinstance(ref, str) or not ref:
            continue
        path = Path(ref).expanduser()
        path = path if path.is_absolute() else folder / path
        if not path.is_file():
            continue  # a hub dataset, or a missing file (reported by the data check)
        try:
            rows = first_rows(path)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            errors.append(Problem("unreadable_data", f"data.{key}", f"{ref} cannot be read as data: {exc}",
                                  "write one JSON object per line (or a JSON list, CSV with a header, Parquet)"))
            continue
        if rows is None:
            continue
        if not rows:
            errors.append(Problem("empty_data", f"data.{key}", f"{ref} holds no rows", "add examples"))
            continue
        errors += missing_columns(needed, rows, f"data.{key} ({ref})")
        errors += expected_call_schemas(rewards, rows, f"data.{key} ({ref})")
    return errors


def expected_call_schemas(rewards: Sequence[JsonValue], rows: Sequence[Mapping[str, object]], source: str) -> list[Problem]:
    """One error per argument schema in a `tool_call` reward's expected-calls column that does not compile
    (its row and path below the column in the message), so a bad schema stops `finetune check`, not a run."""
    errors = []
    for i, spec in enumerate(rewards):
        args = spec.get("args") if isinstance(spec, dict) and spec.get("fn") == "tool_call" else None
        column = args.get("expected_field") if isinstance(args, dict) else None
        if not isinstance(column, str):
            continue
        for number, row in enumerate(rows):
            value = row.get(column)
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except (ValueError, RecursionError):
                    continue  # a plain tool name, or text the reward scores None with its reason
            for sub, message, fix in tool_call_schema_problems(value):
                errors.append(Problem("invalid_schema", f"rewards[{i}].args.expected_field",
                                      f"row {number} of {source}, {column}{sub}: {message}", fix))
    return errors


def require_columns(data: DataSpec, rewards: Sequence[RewardSpec], rows: Sequence[Mapping[str, object]], source: str,
                    prompt: bool = True, every_row: bool = True) -> None:
    """Raise UnusableInput (the first missing column, and how many more) before any sampling or scoring
    starts, so a wrong column name never costs a whole sampling run and a KeyError traceback.
    `every_row=False`: only a column that no row has is refused."""
    named = needed_columns({"prompt_field": data.prompt_field}, [r.as_mapping() for r in rewards])
    needed = [n for n in named if prompt or n.yaml_path != "data.prompt_field"]
    errors = missing_columns(needed, rows, source, name_path=True, every_row=every_row)
    if errors:
        more = f" (and {len(errors) - 1} more column problem(s); `finetune check` lists them)" if len(errors) > 1 else ""
        raise UnusableInput(errors[0].message + more, errors[0].fix, errors[0].path)
