"""An episode's context in the memory estimate: TRL 1.16 caps the whole episode at max_completion_length and
generates each later turn with max_completion_length new tokens, so the generation cache holds one more."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from llm_finetuning.brief import load_brief
from llm_finetuning.memory import Settings, estimate, settings_from_brief
from llm_finetuning.memory.shapes import lookup

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
S7 = lookup("Qwen/Qwen2.5-7B-Instruct")


def test_an_episode_counts_one_more_turn_of_cache_and_says_so() -> None:
    assert S7 is not None
    single = Settings(gpu_memory_gib=141, generation="transformers", max_completion_length=1024, prompt_tokens=512)
    episode = replace(single, episode_turns=4)
    assert (single.generation_context(), episode.generation_context()) == (1536, 2560)
    assert estimate(S7, episode).phases["generation"] > estimate(S7, single).phases["generation"]
    assert estimate(S7, episode).phases["train"] == estimate(S7, single).phases["train"]  # capped as before
    assert single.episode_assumption() is None
    assert episode.episode_assumption() == (
        "episode of up to 4 tool rounds: prompt 512 + model turns and tool results sharing max_completion_length "
        "1024 (TRL 1.16) in training, and 1024 more for the turn being generated (2560 tokens of cache a sequence)")


def test_the_brief_s_turn_limit_reaches_the_estimate() -> None:
    brief, errors = load_brief(EXAMPLES / "calculator-tools/brief.yaml")
    assert brief is not None, errors
    assert settings_from_brief(brief).episode_turns == 2
    plain, errors = load_brief(EXAMPLES / "math-exact/brief.yaml")
    assert plain is not None, errors
    assert settings_from_brief(plain).episode_turns == 0
