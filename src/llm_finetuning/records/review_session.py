"""A review session over an inspection record, kept as a typed state machine outside the CLI.

`finetune review` (commands/review.py) draws the screens and reads the keys; the session holds the state: the
record and its samples, the sample in front of the person, the seconds spent on a sample not yet judged, and
where each key leads. Every verdict is saved at once (`save_progress`), so an interrupted review resumes. The
end of a session is a `Finish`, not a sentinel number. The records API is imported where it is used, so that
`finetune review --help` stays instant.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

from llm_finetuning.jsonvalue import JsonObject

VERDICT_KEYS = {"a": "agree", "d": "disagree", "u": "unsure"}


class Finish(Enum):
    """How the sealing screen ended: the record sealed, left unsealed, or the person went back to a sample."""

    SEALED = "sealed"
    NOT_SEALED = "not_sealed"
    BACK = "back"


class ReviewSession:
    """The state of one review over the record at `path` and its samples (a sample the samples file lacks is
    shown as missing rather than dropped, so the verdicts still line up with the record)."""

    def __init__(self, path: Path, key_path: Path | None = None) -> None:
        from llm_finetuning.records.inspection import load_inspection, load_samples, sample_ids

        self.path = path
        self.key_path = key_path
        self.record = load_inspection(path)
        by_id = {s.get("id"): s for s in load_samples(path)}
        self.samples: list[JsonObject] = [
            by_id.get(sid, {"id": sid, "prompt": "(missing)", "completion": "(missing)", "rewards": {}})
            for sid in sample_ids(self.record)]
        self.unjudged_seconds: dict[str, float] = {}  # time on a sample this session, not yet in a verdict

    @property
    def n(self) -> int:
        return len(self.samples)

    def reviewed(self) -> int:
        return sum(1 for s in self.samples if self.verdict(s) is not None)

    def verdict(self, sample: JsonObject) -> JsonObject | None:
        """The verdict on `sample` so far ({verdict, note, at, seconds}), or None."""
        from llm_finetuning.records.inspection import verdict_of

        return verdict_of(self.record, str(sample.get("id")))

    def counts(self) -> dict[str, int]:
        from llm_finetuning.records.inspection import verdict_counts

        return verdict_counts(self.record)

    def first_missing(self) -> int | None:
        return next((i for i, s in enumerate(self.samples) if self.verdict(s) is None), None)

    def next_missing(self, after: int) -> int:
        """The next sample without a verdict after `after` (wrapping round), or n when none is left."""
        for j in list(range(after + 1, self.n)) + list(range(0, after + 1)):
            if self.verdict(self.samples[j]) is None:
                return j
        return self.n

    def start(self) -> int:
        """The first sample without a verdict, or n (the sealing screen) when every sample has one."""
        first = self.first_missing()
        return self.n if first is None else first

    def moved(self, i: int, key: str, argument: str) -> int | None:
        """Where a navigation key leads from sample i (`b` back, `n` next, `g N` sample N), or None when the key
        is not a move the session knows."""
        if key == "b":
            return max(0, i - 1)
        if key == "n":
            return i + 1
        if key == "g" and argument.strip().isdigit() and 1 <= int(argument) <= self.n:
            return int(argument) - 1
        return None

    def looked(self, i: int, seconds: float) -> None:
        """The person had sample i in front of them for `seconds`; it counts towards its next verdict."""
        sid = str(self.samples[i].get("id"))
        self.unjudged_seconds[sid] = self.unjudged_seconds.get(sid, 0.0) + seconds

    def judge(self, i: int, verdict: str, note: str) -> int:
        """Record the verdict on sample i (saved at once) and return the next sample without one (n: none)."""
        from llm_finetuning.records.inspection import save_progress, set_verdict

        sid = str(self.samples[i].get("id"))
        set_verdict(self.record, sid, verdict, note, self.unjudged_seconds.pop(sid, None))
        save_progress(self.path, self.record)
        return self.next_missing(i)
