"""Turn the brief's reward specs into callables, and score rows with them.

Built-ins are instantiated from the registry with their argument defaults applied; a custom
`module:function` is wrapped in `CustomReward`, which runs it in the confined child (`sandbox.project_code`),
gives it the spec's name, passes its `args`, checks what it returns, and stays picklable by loading the
function in the child again after unpickling.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_finetuning import reward_registry as registry
from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem, ProblemError
from llm_finetuning.rewards._text import Completion, Prompt, is_message
from llm_finetuning.rewards.explain import call_explained

if TYPE_CHECKING:
    from llm_finetuning.rewards.code import VerifiedCode
    from llm_finetuning.rewards.length_penalty import Tokenizer
    from llm_finetuning.sandbox.project_code import Confined

log = logging.getLogger(__name__)

RewardFunc = Callable[..., list[float | None]]


def _check_args(fn: str, args: Mapping[str, object], where: str) -> None:
    from jsonschema import Draft202012Validator

    errors = sorted(Draft202012Validator(registry.BUILTINS[fn][1]).iter_errors(args), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        path = ".".join([where, *[str(p) for p in err.absolute_path]])
        raise ValueError(f"{path}: {err.message}")


class RewardRaised(Exception):
    """A user's reward function raised: its name, its `module:function` and the exception (`_run_reward` turns it
    into the Problem `reward_raised`, naming the row)."""

    def __init__(self, name: str, fn: str, error: BaseException) -> None:
        super().__init__(f"{name} ({fn}) raised {type(error).__name__}: {error}")
        self.name, self.fn, self.error = name, fn, error


class RewardFailed(ProblemError):
    """The Problem `reward_raised`, for every verb that scores (exit 2): which reward, on which row, what it raised,
    where in the user's file, and the fix."""


def _where_raised(error: BaseException, fn: str) -> str:
    """`file:line` of the innermost frame in the user's module (the reward's own code), '' when none is. An
    exception from the confined child carries the place the child found (`ProjectCodeError.where`)."""
    where = getattr(error, "where", None)
    if where is not None:
        return str(where)
    module = fn.split(":", 1)[0].replace(".", "/")
    frames = traceback.extract_tb(error.__traceback__)
    mine = [f for f in frames if Path(f.filename).with_suffix("").as_posix().endswith(module)]
    chosen = mine or list(frames)[-1:]
    return f"{Path(chosen[-1].filename).name}:{chosen[-1].lineno}" if chosen else ""


def reward_failed(raised: RewardRaised, row: str, index: int | None) -> RewardFailed:
    """The Problem for `raised` on `row` (which row, in words); `index` is the reward's position in the brief's
    rewards."""
    err = raised.error
    at = _where_raised(err, raised.fn)
    on = f"on {row}"
    label = raised.name if raised.name == raised.fn else f"{raised.name} ({raised.fn})"
    kind = getattr(err, "kind", None) or type(err).__name__  # a ProjectCodeError names the type the child saw
    message = (f"reward {label} raised {kind}: {err} {on}"
               f"{f', at {at}' if at else ''}")
    fix = (f"fix {raised.fn}{f' ({at})' if at else ''}, then try it on a few rows with "
           "`finetune score BRIEF ROWS.jsonl` before sampling again")
    return RewardFailed([Problem("reward_raised", f"rewards[{index}]" if index is not None else "rewards", message,
                                 fix)])


class _Remote:
    """The user's function as it runs in the confined child: calling it, and its `explained`/`explain` when the
    function offers them (`rewards.explain`)."""

    def __init__(self, handle: Confined, info: Mapping[str, object]) -> None:
        self.handle = handle
        self.__name__ = str(info.get("name") or "reward")
        for attr in ("explained", "explain"):
            if info.get(attr):
                setattr(self, attr, functools.partial(handle.call, attr=attr))

    def __call__(self, **kwargs: object) -> object:
        return self.handle.call(attr=None, **kwargs)


class CustomReward:
    """A user's `module:function` reward with a stable name, its args, and checked output. The function runs in
    the process's confined child (`sandbox.project_code`), from the source bytes read when it is loaded, or with
    `code` from the bytes a run's verification read (`VerifiedCode`)."""

    def __init__(self, fn: str, search_dir: Path, args: Mapping[str, object], name: str,
                 code: VerifiedCode | None = None) -> None:
        self.__name__ = name
        self.fn = fn
        self.search_dir = Path(search_dir)
        self.args = dict(args)
        self.code = code
        self._func: Callable[..., object] | None = self._load()

    def _load(self) -> Callable[..., object]:
        """The user's function in the confined child, from the source files the records bound."""
        from llm_finetuning.rewards.code import module_sources
        from llm_finetuning.sandbox.project_code import ProjectCodeError, load_confined

        modules = self.code.modules(self.fn, self.search_dir) if self.code else module_sources(self.fn, self.search_dir)
        handle, info = load_confined(self.fn, modules)
        if not info.get("callable"):
            raise ProjectCodeError("TypeError", f"{self.fn} is not callable")
        return _Remote(handle, info)

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_func"] = None
        return state

    def _call_args(self, columns: Mapping[str, object]) -> tuple[Callable[..., object], dict[str, object]]:
        if self._func is None:
            self._func = self._load()
        clash = sorted(set(self.args) & set(columns))
        if clash:
            raise ValueError(f"{self.__name__}: args {clash} have the same names as data columns; rename them")
        return self._func, {**columns, **self.args}

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        func, kwargs = self._call_args(columns)
        try:
            out = func(prompts=prompts, completions=completions, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's code: any exception is theirs to fix
            raise RewardRaised(self.__name__, self.fn, exc) from exc
        return check_output(self.__name__, out, len(completions))

    def explained(self, prompts: list[Prompt], completions: list[Completion],
                  **columns: object) -> list[tuple[float | None, str | None]]:
        """The user's values with the explanations their function offers (`explained` or `explain`; see
        `rewards.explain`), else None for each."""
        func, kwargs = self._call_args(columns)
        try:
            out, why = call_explained(func, prompts, completions, kwargs, self.__name__)
        except Exception as exc:  # noqa: BLE001 - the user's code: any exception is theirs to fix
            raise RewardRaised(self.__name__, self.fn, exc) from exc
        return list(zip(check_output(self.__name__, out, len(completions)), why, strict=True))


def check_output(name: str, out: object, n: int) -> list[float | None]:
    """A reward's output as `list[float | None]` of length n, or a ValueError that says what is wrong."""
    if not isinstance(out, (list, tuple)):
        raise ValueError(f"reward {name} returned {type(out).__name__}; it must return a list of floats or None")
    if len(out) != n:
        raise ValueError(f"reward {name} returned {len(out)} values for {n} completions")
    values: list[float | None] = []
    for i, v in enumerate(out):
        if v is None:
            values.append(None)
        elif isinstance(v, (int, float)) and math.isfinite(float(v)):
            values.append(float(v))
        else:
            raise ValueError(f"reward {name} returned {v!r} for completion {i}; expected a finite number or None")
    return values


def build_reward(spec: Mapping[str, object], brief_folder: Path, index: int = 1, tokenizer: Tokenizer | None = None,
                 *, max_completion_length: int | None = None, where: str = "rewards[]",
                 code: VerifiedCode | None = None) -> RewardFunc:
    """See `llm_finetuning.rewards.build_reward`. `code`: for a custom reward, the bytes a run's verification read
    (`CustomReward`)."""
    fn = str(spec["fn"])
    name = registry.reward_name(fn, index)
    given = spec.get("args") or {}
    if not isinstance(given, Mapping):
        raise ValueError(f"{where}.args: expected a mapping of arguments, found {type(given).__name__}")
    args: dict[str, object] = dict(given)
    if registry.is_custom(fn):
        return CustomReward(fn, Path(brief_folder), args, name, code)
    if fn not in registry.BUILTINS:
        raise ValueError(f"{where}.fn: unknown reward {fn!r}; use one of {', '.join(registry.builtin_names())}, "
                         "or module:function for a custom reward")
    _check_args(fn, args, f"{where}.args")
    kwargs: dict[str, object] = {**registry.argument_defaults(fn), **args}
    if fn == "length_penalty":
        if kwargs.get("max_length") is None:
            if max_completion_length is None:
                raise ValueError(f"{where}.args.max_length: not set and no grpo.max_completion_length to default to")
            kwargs["max_length"] = max_completion_length
        kwargs["tokenizer"] = tokenizer
    module, _, cls_name = registry.BUILTINS[fn][0].partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    reward: RewardFunc = cls(**kwargs, name=name)
    return reward


def build_reward_funcs(brief: Brief, tokenizer: Tokenizer | None = None,
                       code: VerifiedCode | None = None) -> tuple[list[RewardFunc], list[float]]:
    """See `llm_finetuning.rewards.build_reward_funcs`."""
    max_len = brief.grpo.max_completion_length
    funcs = []
    for i, spec in enumerate(brief.rewards):
        funcs.append(build_reward(spec.as_mapping(), brief.folder, spec.occurrence, tokenizer,
                                  max_completion_length=max_len, where=f"rewards[{i}]", code=code))
    return funcs, [float(s.weight) for s in brief.rewards]


def _needs_tokens(brief: Brief) -> bool:
    return any(s.fn == "length_penalty" and s.args.get("unit", "tokens") == "tokens" for s in brief.rewards)


def load_brief_tokenizer(brief: Brief) -> Tokenizer | None:
    """The policy's tokenizer when a reward counts tokens, else None (then lengths are in characters)."""
    if not _needs_tokens(brief):
        return None
    try:
        from llm_finetuning.models import load_tokenizer, resolve_model

        tokenizer: Tokenizer = load_tokenizer(resolve_model(brief.model, brief.folder))
        return tokenizer
    except Exception as exc:  # noqa: BLE001 - any failure falls back to characters, loudly
        log.warning("could not load the model's tokenizer (%s); length_penalty counts characters", exc)
        return None


def validate_row(row: object, where: str) -> None:
    """Raise ValueError unless `row` is a mapping with a usable prompt and completion."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected a JSON object with prompt and completion, found {type(row).__name__}")
    for key in ("prompt", "completion"):
        if key not in row:
            raise ValueError(f"{where}: missing {key!r} (found keys: {', '.join(sorted(row)) or 'none'})")
        if _chat(row[key]) is None:
            raise ValueError(f"{where}: {key!r} must be a string or a list of chat messages with content, "
                             f"found {type(row[key]).__name__}")


def _chat(value: object) -> Completion | None:
    """A row's prompt or completion as rewards take it: a string, or chat messages that each have content (None
    for anything else)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return None
    messages = [m for m in value if is_message(m) and "content" in m]
    return messages if len(messages) == len(value) else None


def _batch(rows: Sequence[Mapping[str, object]]) -> tuple[list[Prompt], list[Completion], dict[str, list[object]]]:
    prompts: list[Prompt] = []
    completions: list[Completion] = []
    for r in rows:
        prompt, c = _chat(r["prompt"]), _chat(r["completion"])
        if prompt is None or c is None:
            raise ValueError("a row's prompt or completion is not a string or a list of chat messages with content")
        # TRL gives conversational completions to conversational prompts; mirror that.
        if isinstance(prompt, list) and isinstance(c, str):
            c = [{"role": "assistant", "content": c}]
        prompts.append(prompt)
        completions.append(c)
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in ("prompt", "completion") and k not in keys)
    columns = {k: [r.get(k) for r in rows] for k in keys}
    return prompts, completions, columns


def total_of(values: Iterable[float | None], weights: Iterable[float]) -> float | None:
    """Weighted sum skipping None; None when every value is None."""
    pairs = [(w, v) for w, v in zip(weights, values, strict=True) if v is not None]
    return sum(w * v for w, v in pairs) if pairs else None


def _call_reward(func: RewardFunc, prompts: list[Prompt], completions: list[Completion],
                 columns: dict[str, list[object]],
                 explain: bool) -> tuple[list[float | None], list[str | None]]:
    """One reward over a chunk: checked values, and explanations when asked for (else all None)."""
    if not explain:
        values = func(prompts=prompts, completions=completions, **columns)
        return check_output(func.__name__, values, len(completions)), [None] * len(completions)
    out, why = call_explained(func, prompts, completions, columns)
    return check_output(func.__name__, out, len(completions)), why


def _first_row_raising(func: RewardFunc, prompts: list[Prompt], completions: list[Completion],
                       columns: dict[str, list[object]]) -> int | None:
    """The first row of a chunk on which `func` raises when called on that row alone (None: none does)."""
    for i in range(len(completions)):
        try:
            func(prompts=prompts[i:i + 1], completions=completions[i:i + 1], **{k: v[i:i + 1] for k, v in columns.items()})
        except RewardRaised:
            return i
        except Exception:  # noqa: BLE001, S112 - only the user's own exception names the row
            continue
    return None


def _run_reward(func: RewardFunc, prompts: list[Prompt], completions: list[Completion],
                columns: dict[str, list[object]],
                explain: bool, start: int, index: int | None,
                describe: Callable[[int], str]) -> tuple[list[float | None], list[str | None]]:
    """`_call_reward`; a user's reward that raises ends in `RewardFailed`, naming (`describe`) the first row,
    counted from `start`, on which it raises."""
    try:
        return _call_reward(func, prompts, completions, columns, explain)
    except RewardRaised as raised:
        row = _first_row_raising(func, prompts, completions, columns)
        where = (describe(start + row) if row is not None
                 else f"{describe(start)} to {describe(start + len(completions) - 1)} (no single row raises alone)")
        raise reward_failed(raised, where, index) from raised.error


def score_rows(brief: Brief, rows: Sequence[Mapping[str, object]], *, chunk_size: int = 256,
               progress: Callable[[int], None] | None = None, tokenizer: Tokenizer | None = None,
               funcs: tuple[list[RewardFunc], list[float]] | None = None,
               explain: bool = False, describe: Callable[[int], str] | None = None,
               code: VerifiedCode | None = None) -> list[dict[str, Any]]:
    """See `llm_finetuning.rewards.score_rows`. `progress(n)` is called after each chunk of n rows; `code`: a run's
    verified reward bytes (`rewards.code.VerifiedCode`), what the rewards run while it trains.

    `explain`: each row also gets `explanations` ({name: why or None}), from rewards that offer them
    (`rewards.explain`). A user's reward that raises ends in `RewardFailed` (exit 2) naming the reward, the first
    row it raises on (`describe(i)` says row i in words; default "row i") and the exception.
    """
    for i, row in enumerate(rows):
        validate_row(row, f"row {i}")
    if funcs is None:
        funcs = build_reward_funcs(brief, tokenizer if tokenizer is not None else load_brief_tokenizer(brief), code)
    reward_funcs, weights = funcs
    out: list[dict[str, Any]] = []
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start: start + chunk_size]
        prompts, completions, columns = _batch(chunk)
        per_func = [_run_reward(f, prompts, completions, columns, explain, start,
                                i if i < len(brief.rewards) else None, describe or "row {}".format)
                    for i, f in enumerate(reward_funcs)]
        for j in range(len(chunk)):
            values = [vals[j] for vals, _ in per_func]
            scored: dict[str, Any] = {"index": start + j,
                                      "rewards": {f.__name__: v for f, v in zip(reward_funcs, values, strict=True)},
                                      "total": total_of(values, weights)}
            if explain:
                scored["explanations"] = {f.__name__: why[j] for f, (_, why) in zip(reward_funcs, per_func, strict=True)}
            out.append(scored)
        if progress is not None:
            progress(len(chunk))
    return out
