"""The sampling progress bar on stderr: completions done (with a rate and an ETA) and prompts done."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm


class SamplingProgress:
    """A tqdm bar counting completions, with `prompts d/n` in its postfix. Always on stderr."""

    def __init__(self, n_prompts: int, k: int, desc: str = "Sampling", enabled: bool = True) -> None:
        self.n_prompts = n_prompts
        self.k = k
        self.prompts_done = 0
        self._bar: tqdm[None] | None = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=n_prompts * k, desc=desc, unit="completion", file=sys.stderr,
                             dynamic_ncols=True, mininterval=0.5, smoothing=0.2)
            self._bar.set_postfix_str(f"prompts 0/{n_prompts}", refresh=False)

    def advance(self, prompts: int, completions: int) -> None:
        self.prompts_done += prompts
        if self._bar is not None:
            self._bar.set_postfix_str(f"prompts {self.prompts_done}/{self.n_prompts}", refresh=False)
            self._bar.update(completions)

    def note(self, line: str) -> None:
        """A line on stderr above the bar (tqdm.write), or plainly when there is no bar."""
        if self._bar is not None:
            from tqdm import tqdm

            tqdm.write(line, file=sys.stderr)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> SamplingProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
