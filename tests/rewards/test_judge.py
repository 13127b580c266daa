"""judge against a real local OpenAI-compatible server backed by a tiny model (no hosted service)."""

from __future__ import annotations

import logging
import pickle
import time

import pytest

from llm_finetuning.rewards.judge import Judge, JudgeError, parse_score

PROMPTS = ["Name a primary colour.", "What is 2 + 2?", "Say hello."]
COMPLETIONS = ["Red.", "4", "Hello!"]


def judge(url: str, **kw: object) -> Judge:
    args: dict[str, object] = {"model": "tiny", "rubric": "Full marks for a correct, short answer.",
                               "timeout_s": 10.0, "max_retries": 1, "backoff_s": 0.01, "concurrency": 4}
    args.update(kw)
    return Judge(endpoint=url, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("reply", "expected"), [
    ("Looks right.\nSCORE: 7", 0.7), ("SCORE: 10", 1.0), ("score: 0", 0.0), ("**Score:** 8/10", 0.8),
    ("SCORE: 5\nreasoning...\nSCORE: 5", 0.5),
])
def test_score_parser_accepts(reply: str, expected: float) -> None:
    assert parse_score(reply, 10) == pytest.approx(expected)


@pytest.mark.parametrize("reply", [
    "", "It deserves a 9.", "SCORE: 11", "SCORE: -1", "SCORE: 7.5", "SCORE: 8/5", "SCORE: seven",
    "SCORE: 9\nActually no.", "SCORE: 3\nSCORE: 9", "SCORE: 9 because it is good",
])
def test_score_parser_rejects(reply: str) -> None:
    with pytest.raises(JudgeError):
        parse_score(reply, 10)


def test_scores_through_the_local_model_server(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = judge(judge_server.url("ok"))
    metrics: dict[str, float] = {}
    got = reward(prompts=PROMPTS, completions=COMPLETIONS, log_metric=metrics.__setitem__)
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in got)
    assert metrics == {"rewards/judge/failed": 0.0}
    # Deterministic and cached: the same rows again make no request.
    before = len(judge_server.requests)
    assert reward(prompts=PROMPTS, completions=COMPLETIONS) == got
    assert len(judge_server.requests) == before
    assert reward.stats["cached"] == 3
    # Conversational rows work too.
    conv = reward(prompts=[[{"role": "user", "content": PROMPTS[0]}]],
                  completions=[[{"role": "assistant", "content": COMPLETIONS[0]}]])
    assert isinstance(conv[0], float)


@pytest.mark.parametrize(("mode", "reason"), [("garbage", "malformed"), ("badjson", "bad_response"),
                                              ("unauthorized", "http_401")])
def test_broken_answers_give_none_and_a_metric(judge_server, mode: str, reason: str,  # type: ignore[no-untyped-def]
                                               caplog: pytest.LogCaptureFixture) -> None:
    reward = judge(judge_server.url(mode))
    metrics: dict[str, float] = {}
    with caplog.at_level(logging.WARNING):
        got = reward(prompts=PROMPTS[:2], completions=COMPLETIONS[:2], log_metric=metrics.__setitem__)
    assert got == [None, None]
    assert metrics == {"rewards/judge/failed": 2.0}
    assert reward.stats["failed"] == 2 and reward.stats[f"failed_{reason}"] == 2
    assert "not a guessed score" in caplog.text
    assert reward.cache == {}  # failures are never cached


def test_a_server_that_times_out_gives_none_within_the_deadline(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = judge(judge_server.url("slow"), timeout_s=0.5, max_retries=1, backoff_s=0.0)
    start = time.monotonic()
    got = reward(prompts=PROMPTS[:1], completions=COMPLETIONS[:1])
    assert got == [None]
    assert reward.stats["failed_timeout"] == 1 and reward.stats["attempt_failed_timeout"] == 2
    assert time.monotonic() - start < 1.9  # two attempts of 0.5 s, not the server's 2 s


def test_retries_recover_from_a_flaky_server(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = judge(judge_server.url("flaky"), max_retries=2)
    got = reward(prompts=["Flaky?"], completions=["Yes."])
    assert isinstance(got[0], float)
    assert reward.stats["attempt_failed_http_503"] == 1 and reward.stats["failed"] == 0


def test_no_retry_left_gives_none_on_a_flaky_server(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = judge(judge_server.url("flaky"), max_retries=0)
    assert reward(prompts=["Flaky, no retry?"], completions=["Yes."]) == [None]


def test_api_key_is_sent_from_the_named_variable(judge_server, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-local")
    reward = judge(judge_server.url("ok"), api_key_env="TEST_JUDGE_KEY")
    reward(prompts=["key?"], completions=["yes"])
    assert ("ok", "Bearer sk-local") in judge_server.requests
    monkeypatch.delenv("TEST_JUDGE_KEY")
    with pytest.raises(ValueError, match="TEST_JUDGE_KEY"):
        judge(judge_server.url("ok"), api_key_env="TEST_JUDGE_KEY")


def test_unreachable_endpoint_gives_none() -> None:
    reward = judge("http://127.0.0.1:9/v1", max_retries=0, timeout_s=1.0)
    assert reward(prompts=["p"], completions=["c"]) == [None]
    assert reward.stats["failed_connection"] == 1


def test_pickles_with_its_cache_and_name(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = judge(judge_server.url("ok"), name="judge#2")
    first = reward(prompts=["pickle?"], completions=["yes"])
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "judge#2" and copy.cache == reward.cache
    assert copy(prompts=["pickle?"], completions=["yes"]) == first


def test_a_server_that_trickles_bytes_still_meets_the_deadline(judge_server) -> None:  # type: ignore[no-untyped-def]
    reward = judge(judge_server.url("trickle"), timeout_s=1.0, max_retries=0)
    start = time.monotonic()
    assert reward(prompts=["p"], completions=["c"]) == [None]
    assert reward.stats["failed_timeout"] == 1
    assert time.monotonic() - start < 3.0  # the whole answer would take 13 s
