"""Why a reward gave each value: the explanation convention, shared by the built-in and custom rewards.

TRL calls a reward as `fn(prompts, completions, **columns) -> list[float | None]`, and that stays the
whole training contract. A person checking the reward (the inspection report, `finetune review`,
`finetune score --explain`) also wants to know why each value came out as it did, so a reward may offer,
in addition and never instead:

- `explained(prompts, completions, **columns) -> list[(value, explanation)]`: one pass that returns each
  completion's value and its explanation together (what the built-ins do: a sandbox run or a judge call
  is not repeated just to explain it);
- or `explain(prompts, completions, **columns) -> list[str | None]`: a companion that returns only the
  explanations; the values still come from calling the reward itself. The easiest form for a custom
  function: `my_reward.explain = explain_my_reward` after both are defined.

An explanation is one short line of plain text or None. Training never asks for one. Explanations are
data from the reward, and for `unit_tests` partly from the code under test: `tidy` keeps them printable
(no terminal control characters) and short before anyone sees them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from llm_finetuning.rewards._text import Completion, Prompt

MAX_CHARS = 400
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def tidy(text: object) -> str | None:
    """An explanation fit to show: a string without control characters, at most MAX_CHARS, else None."""
    if text is None:
        return None
    s = _CONTROL.sub(" ", str(text)).replace("\n", " ").strip()
    if not s:
        return None
    return s if len(s) <= MAX_CHARS else s[: MAX_CHARS - 3] + "..."


def quoted(text: object, limit: int = 60) -> str:
    """A value quoted for an explanation, cut to `limit` characters."""
    s = repr(text)
    return s if len(s) <= limit else s[: limit - 4] + "...'"


def explains(func: Callable[..., object]) -> bool:
    """Whether a reward offers explanations (`explained` or `explain`)."""
    return callable(getattr(func, "explained", None)) or callable(getattr(func, "explain", None))


def call_explained(func: Callable[..., object], prompts: list[Prompt], completions: list[Completion],
                   columns: Mapping[str, object], name: str | None = None) -> tuple[object, list[str | None]]:
    """(the reward's raw output, one tidy explanation or None per completion), in one pass when it can.

    The raw output is checked by the caller (`build.check_output`), exactly as a plain call's would be.
    `name` is the reward's name in errors (default: the callable's `__name__`).
    """
    n = len(completions)
    name = name or str(getattr(func, "__name__", "reward"))
    single = getattr(func, "explained", None)
    if callable(single):
        pairs = single(prompts=prompts, completions=completions, **columns)
        if not isinstance(pairs, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2
                                                           for p in pairs):
            raise ValueError(f"reward {name}: explained() must return a list of (value, explanation) pairs")
        return [p[0] for p in pairs], _tidy_all(name, [p[1] for p in pairs], n)
    values = func(prompts=prompts, completions=completions, **columns)
    companion = getattr(func, "explain", None)
    if not callable(companion):
        return values, [None] * n
    return values, _tidy_all(name, companion(prompts=prompts, completions=completions, **columns), n)


def _tidy_all(name: str, out: object, n: int) -> list[str | None]:
    if not isinstance(out, (list, tuple)) or len(out) != n:
        found = f"{len(out)} items" if isinstance(out, (list, tuple)) else type(out).__name__
        raise ValueError(f"reward {name}: its explanations are {found}; expected a list of {n} strings or None")
    return [tidy(x) for x in out]
