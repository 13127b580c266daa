"""Reward functions: the built-in and custom rewards (their names and argument schemas: `reward_registry`).

Light on purpose: the gate imports `reward_source_files`, so nothing here loads a
reward implementation or any ML library at import time. `build_reward`, `build_reward_funcs` and
`score_rows` import the implementations when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_finetuning.brief import Brief
from llm_finetuning.reward_registry import reward_names
from llm_finetuning.rewards.sources import reward_source_files

if TYPE_CHECKING:
    from llm_finetuning.rewards.build import RewardFunc
    from llm_finetuning.rewards.code import VerifiedCode
    from llm_finetuning.rewards.length_penalty import Tokenizer

__all__ = ["build_reward", "build_reward_funcs", "reward_names", "reward_source_files", "score_rows"]


def build_reward(spec: Mapping[str, object], brief_folder: Path, index: int = 1, tokenizer: Tokenizer | None = None,
                 *, max_completion_length: int | None = None) -> RewardFunc:
    """One picklable reward callable with TRL's signature and a stable `__name__`.

    `index` is the 1-based occurrence of this `fn` among the brief's rewards (1 gives the plain name, 2
    gives `fn#2`; 0 counts as 1). `max_completion_length` is length_penalty's default `max_length`.
    """
    from llm_finetuning.rewards.build import build_reward as _build

    return _build(spec, brief_folder, index, tokenizer, max_completion_length=max_completion_length)


def build_reward_funcs(brief: Brief, tokenizer: Tokenizer | None = None,
                       code: VerifiedCode | None = None) -> tuple[list[RewardFunc], list[float]]:
    """(reward callables, weights) for a loaded brief, in the brief's order; `code`: a run's verified bytes for
    its custom rewards (`rewards.code.VerifiedCode`)."""
    from llm_finetuning.rewards.build import build_reward_funcs as _build_all

    return _build_all(brief, tokenizer, code)


def score_rows(brief: Brief, rows: Sequence[Mapping[str, object]], *, chunk_size: int = 256,
               progress: Callable[[int], None] | None = None, tokenizer: Tokenizer | None = None,
               funcs: tuple[list[RewardFunc], list[float]] | None = None, explain: bool = False,
               describe: Callable[[int], str] | None = None,
               code: VerifiedCode | None = None) -> list[dict[str, Any]]:
    """Score rows (prompt, completion and the dataset's columns) with every reward of the brief.

    Returns `{"index", "rewards": {name: value}, "total"}` per row, in input order; with `explain=True`
    each row also has `explanations` ({name: why or None}, see `rewards.explain`). The other keywords:
    `rewards.build.score_rows`.
    """
    from llm_finetuning.rewards.build import score_rows as _score

    return _score(brief, rows, chunk_size=chunk_size, progress=progress, tokenizer=tokenizer, funcs=funcs,
                  explain=explain, describe=describe, code=code)
