"""The review session as a state machine outside the CLI (records.review_session): where each key leads, a
verdict saved at once and the next unjudged sample, the time on a sample counted into its verdict, and a
resumed session starting at the first sample without a verdict."""

from __future__ import annotations

from typing import Any

from records_builders import build_inspection

from llm_finetuning.records.inspection import load_inspection
from llm_finetuning.records.review_session import ReviewSession


def test_keys_move_and_verdicts_save_and_advance(brief: Any) -> None:
    path = build_inspection(brief, seal=False, review_all=False, verdicts={0: "agree", 2: "agree"})
    session = ReviewSession(path)
    assert (session.n, session.reviewed(), session.start()) == (64, 2, 1)
    assert [session.moved(5, k, a) for k, a in (("b", ""), ("n", ""), ("g", "10"), ("g", "99"), ("x", ""))] == \
        [4, 6, 9, None, None]
    assert session.moved(0, "b", "") == 0
    session.looked(1, 2.5)
    session.looked(1, 1.5)
    assert session.judge(1, "unsure", "not sure") == 3  # sample 2 already has a verdict
    saved = load_inspection(path)["verdicts"][session.samples[1]["id"]]
    assert (saved["verdict"], saved["note"], saved["seconds"]) == ("unsure", "not sure", 4.0)
    assert session.counts() == {"agree": 2, "disagree": 0, "unsure": 1}
    assert ReviewSession(path).start() == 3  # a new session resumes where this one stopped


def test_a_fully_judged_record_starts_at_the_sealing_screen(brief: Any) -> None:
    path = build_inspection(brief, seal=False)
    session = ReviewSession(path)
    assert session.start() == session.n and session.next_missing(0) == session.n
