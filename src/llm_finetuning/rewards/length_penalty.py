"""`length_penalty`: DAPO's soft overlong punishment, as a reward term or as a wrapper of other rewards.

With a maximum length L and a buffer B, a completion of length n gets

    0                      when n <= L - B
    ((L - B) - n) / B      when L - B < n <= L   (falls linearly from 0 to -1)
    -1                     when n > L

Length is counted in tokens when the token ids are known (TRL passes `completion_ids`) or a tokenizer
was given, else in characters. As a brief entry the term is added to the other rewards with its weight;
since the total is a weighted sum, that is the same as wrapping the sum of the others (`SoftOverlong`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Protocol, TypedDict

from llm_finetuning.reward_registry import arg_default, optional_arg_default
from llm_finetuning.rewards._text import Completion, Prompt, completion_text

_FN = "length_penalty"


class LengthPenaltyDefaults(TypedDict):
    """The defaults of length_penalty's args, as the registry's schema holds them (the one source of them)."""

    max_length: int | None
    buffer: int | None
    unit: str


_DEFAULTS = LengthPenaltyDefaults(
    max_length=optional_arg_default(_FN, "max_length", int),
    buffer=optional_arg_default(_FN, "buffer", int),
    unit=arg_default(_FN, "unit", str),
)

log = logging.getLogger(__name__)


class Tokenizer(Protocol):
    """What the penalty needs of the policy's tokenizer (a transformers tokenizer): the token ids of a text."""

    def __call__(self, text: str, *, add_special_tokens: bool) -> Mapping[str, Sized]: ...


def completion_ids_of(columns: Mapping[str, object]) -> Sequence[object] | None:
    """The token ids TRL passes for each completion (`completion_ids`), None when it passes none."""
    ids = columns.get("completion_ids")
    return ids if isinstance(ids, (list, tuple)) else None


def _row_ids(ids: Sequence[object] | None, i: int) -> Sequence[int] | None:
    row = ids[i] if ids is not None else None
    return row if isinstance(row, (list, tuple)) else None


def overlong_penalty(length: int, max_length: int, buffer: int) -> float:
    """DAPO's soft overlong punishment for one completion of `length` units."""
    start = max_length - buffer
    if length <= start:
        return 0.0
    if length <= max_length:
        return (start - length) / buffer
    return -1.0


class LengthPenalty:
    """The overlong penalty term: 0 for short completions, down to -1 past `max_length`."""

    def __init__(self, max_length: int, buffer: int | None = _DEFAULTS["buffer"],
                 unit: str = _DEFAULTS["unit"], tokenizer: Tokenizer | None = None, name: str = "length_penalty") -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, found {max_length}")
        buffer = max(1, max_length // 4) if buffer is None else buffer
        if not 1 <= buffer <= max_length:
            raise ValueError(f"buffer must be between 1 and max_length ({max_length}), found {buffer}")
        if unit not in ("tokens", "chars"):
            raise ValueError(f"unit {unit!r}: use tokens or chars")
        self.__name__ = name
        self.max_length = int(max_length)
        self.buffer = int(buffer)
        self.unit = unit
        self.tokenizer = tokenizer
        self._warned = False

    def length(self, completion: Completion, completion_ids: Sequence[int] | None = None) -> int:
        """Length of one completion in this reward's unit (characters when tokens cannot be counted)."""
        if self.unit == "tokens":
            if completion_ids is not None:
                return len(completion_ids)
            if self.tokenizer is not None:
                return len(self.tokenizer(completion_text(completion), add_special_tokens=False)["input_ids"])
            if not self._warned:
                log.warning("%s: no tokenizer and no completion_ids; counting characters instead of tokens",
                            self.__name__)
                self._warned = True
        return len(completion_text(completion))

    def counted_in(self, completion_ids: Sequence[int] | None) -> str:
        """The unit lengths are actually counted in for one completion: tokens or chars."""
        if self.unit == "tokens" and (completion_ids is not None or self.tokenizer is not None):
            return "tokens"
        return "chars"

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        ids = completion_ids_of(columns)
        return [overlong_penalty(self.length(c, _row_ids(ids, i)), self.max_length, self.buffer)
                for i, c in enumerate(completions)]

    def explained(self, prompts: list[Prompt], completions: list[Completion],
                  **columns: object) -> list[tuple[float | None, str | None]]:
        """Each penalty with the length it was computed from and where the penalty starts."""
        ids = completion_ids_of(columns)
        out: list[tuple[float | None, str | None]] = []
        start = self.max_length - self.buffer
        for i, c in enumerate(completions):
            row_ids = _row_ids(ids, i)
            n = self.length(c, row_ids)
            unit = self.counted_in(row_ids)
            penalty = overlong_penalty(n, self.max_length, self.buffer)
            if n <= start:
                where = f"within {start} (no penalty)"
            elif n <= self.max_length:
                where = f"past {start}, in the buffer up to {self.max_length}"
            else:
                where = f"past max_length {self.max_length}"
            out.append((penalty, f"{n} {unit}, {where}: penalty {penalty:g}"))
        return out


class SoftOverlong:
    """Wrap rewards: the weighted sum of `funcs` plus `penalty_weight` x the overlong penalty.

    None from an inner reward is skipped in the sum (as TRL does); a row where every inner reward is None
    stays None.
    """

    def __init__(self, funcs: Sequence[Callable[..., list[float | None]]], penalty: LengthPenalty,
                 weights: Sequence[float] | None = None, penalty_weight: float = 1.0,
                 name: str = "soft_overlong") -> None:
        self.__name__ = name
        self.funcs = list(funcs)
        self.weights = [1.0] * len(self.funcs) if weights is None else [float(w) for w in weights]
        if len(self.weights) != len(self.funcs):
            raise ValueError("give one weight per wrapped reward")
        self.penalty = penalty
        self.penalty_weight = float(penalty_weight)

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        inner = [f(prompts=prompts, completions=completions, **columns) for f in self.funcs]
        penalty = self.penalty(prompts=prompts, completions=completions, **columns)
        out: list[float | None] = []
        for i in range(len(completions)):
            values: list[float] = [w * float(v) for w, r in zip(self.weights, inner, strict=True)
                                   if (v := r[i]) is not None]
            if self.funcs and not values:
                out.append(None)
                continue
            out.append(sum(values) + self.penalty_weight * (penalty[i] or 0.0))
        return out
