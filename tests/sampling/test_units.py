"""Pure parts of sampling: prompts and messages, backend choice, baseline figures, the verdict, the spread."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_finetuning.brief.sections import reward_specs
from llm_finetuning.errors import UnusableInput
from llm_finetuning.sampling.backend import SamplingSettings
from llm_finetuning.sampling.data import build_messages, load_split, pick_indices
from llm_finetuning.sampling.factory import choose_backend
from llm_finetuning.sampling.metrics import baseline_figures, is_success, verdict, verifier_names
from llm_finetuning.sampling.select import spread_samples
from llm_finetuning.sampling.vllm_backend import sampling_params_kwargs

from .conftest import copy_example, load


def test_messages_carry_the_system_prompt_once() -> None:
    assert build_messages("hi", None) == [{"role": "user", "content": "hi"}]
    assert build_messages("hi", "be brief") == [{"role": "system", "content": "be brief"},
                                                {"role": "user", "content": "hi"}]
    chat = [{"role": "system", "content": "own"}, {"role": "user", "content": "hi"}]
    assert build_messages(chat, "be brief") == chat
    with pytest.raises(UnusableInput, match="neither a string nor a list"):
        build_messages({"text": "hi"}, None)


def test_split_falls_back_to_train_and_picks_are_seeded(tmp_path: Path) -> None:
    brief_path = copy_example("math-exact", tmp_path)
    assert load_split(load(brief_path)).split == "eval"
    no_eval = copy_example("json-person", tmp_path / "b", **{"data.eval": None})
    split = load_split(load(no_eval))
    assert (split.split, split.yaml_path, len(split.rows)) == ("train", "data.train", 512)
    assert pick_indices(512, 8, 3) == pick_indices(512, 8, 3) != pick_indices(512, 8, 4)
    assert pick_indices(5, 8, 3) == [0, 1, 2, 3, 4]
    bad = copy_example("json-person", tmp_path / "c", **{"data.prompt_field": "question"})
    from llm_finetuning.brief import load_brief

    _, errors = load_brief(bad)  # `finetune check` reads the first rows: the brief is refused up front
    assert [e.path for e in errors] == ["data.prompt_field", "data.prompt_field"]
    brief = load(copy_example("json-person", tmp_path / "d"))
    data = brief.as_mapping()
    data["data"]["prompt_field"] = "question"  # and the loader itself still refuses it
    brief = brief.replaced(data)
    with pytest.raises(UnusableInput, match="no column 'question'") as exc:
        load_split(brief)
    assert exc.value.path == "data.prompt_field"


@pytest.mark.parametrize(("requested", "endpoint", "vllm", "cuda", "expected"), [
    ("auto", None, True, True, "vllm"),
    ("auto", None, True, False, "transformers"),
    ("auto", None, False, True, "transformers"),
    ("auto", "http://127.0.0.1:8000", True, True, "endpoint"),
    ("transformers", None, True, True, "transformers"),
    ("vllm", None, True, True, "vllm"),
])
def test_backend_choice(requested: str, endpoint: str | None, vllm: bool, cuda: bool, expected: str) -> None:
    assert choose_backend(requested, endpoint, vllm, cuda) == expected


@pytest.mark.parametrize(("requested", "endpoint", "vllm", "cuda", "message"), [
    ("vllm", None, False, True, "vLLM is not installed"),
    ("vllm", None, True, False, "no CUDA GPU"),
    ("vllm", "http://x:1", True, True, "both given"),
    ("endpoint", None, True, True, "needs --endpoint"),
])
def test_backend_refusals(requested: str, endpoint: str | None, vllm: bool, cuda: bool, message: str) -> None:
    with pytest.raises(UnusableInput, match=message):
        choose_backend(requested, endpoint, vllm, cuda)


def test_vllm_params_seed_each_prompt() -> None:
    settings = SamplingSettings(k=8, temperature=0.7, max_completion_length=64, seed=10)
    assert sampling_params_kwargs(settings, 3) == {"n": 8, "temperature": 0.7, "top_p": 1.0, "max_tokens": 64,
                                                   "seed": 13}


def _c(value: float | None, truncated: bool = False) -> dict:
    return {"rewards": {"exact_match": value, "length_penalty": -0.1}, "total": (value or 0) - 0.1,
            "truncated": truncated}


def test_figures_and_success_definition() -> None:
    names = ["exact_match", "length_penalty"]
    verifiers = verifier_names(reward_specs([{"fn": fn, "weight": 1.0, "args": {}} for fn in names]))
    assert verifiers == ["exact_match"]
    assert is_success({"exact_match": 1.0, "length_penalty": -0.5}, verifiers)
    assert not is_success({"exact_match": None}, verifiers)
    groups = [[_c(1.0), _c(0.0), _c(0.0, True), _c(0.0)],   # 1 of 4
              [_c(0.0), _c(0.0), _c(0.0), _c(0.0, True)],   # all tie
              [_c(1.0), _c(1.0), _c(1.0), _c(1.0)]]         # all tie
    fig = baseline_figures(groups, names, verifiers)
    assert fig["pass_at_1"] == pytest.approx((0.25 + 0 + 1) / 3, abs=1e-6)
    assert fig["pass_at_k"] == pytest.approx(2 / 3, abs=1e-6)
    assert fig["frac_groups_all_tie"] == pytest.approx(2 / 3, abs=1e-6)
    assert fig["frac_truncated"] == pytest.approx(2 / 12, abs=1e-6)
    assert fig["mean_reward"] == {"exact_match": pytest.approx(5 / 12, abs=1e-6), "length_penalty": -0.1}
    assert verdict(fig, 4, 64).signal


def test_verdicts_say_what_to_do() -> None:
    none = {"pass_at_1": 0.0, "pass_at_k": 0.0, "frac_groups_all_tie": 1.0, "frac_truncated": 0.5,
            "completions": 256}
    v = verdict(none, 8, 64)
    assert not v.signal and "No learning signal" in v.headline
    assert v.advice[0].startswith("lengthen completions") and any(a.startswith("SFT first") for a in v.advice)
    assert any("easier prompts" in a for a in v.advice)
    done = verdict({**none, "pass_at_1": 0.99, "pass_at_k": 1.0, "frac_truncated": 0.0}, 8, 64)
    assert not done.signal and "harder prompts" in done.advice[0]
    tied = verdict({**none, "pass_at_1": 0.02, "pass_at_k": 0.1, "frac_groups_all_tie": 0.92,
                    "frac_truncated": 0.0}, 8, 64)
    assert not tied.signal and "Weak learning signal" in tied.headline
    assert "more completions per group than k=8 (raise grpo.num_generations)" in tied.advice[0]
    measured_apart = verdict({**none, "pass_at_1": 0.02, "pass_at_k": 0.1, "frac_groups_all_tie": 0.92,
                              "frac_truncated": 0.0}, 4, 64, num_generations=8)
    assert measured_apart.advice[0] == ("measure at training's group size: this baseline sampled k=4 completions a "
                                        "prompt, training samples grpo.num_generations=8; run `finetune baseline` "
                                        "without --k")
    assert "grpo.num_generations above" not in " ".join(measured_apart.advice)


def test_spread_covers_rare_outcomes_and_many_prompts() -> None:
    candidates = [{"prompt_index": p, "sample_index": j, "rewards": {"r": 1.0 if (p, j) in {(0, 0), (7, 1)} else 0.0},
                   "total": 0.0} for p in range(40) for j in range(3)]
    chosen = spread_samples(candidates, 50, seed=1)
    assert len(chosen) == 50
    assert sum(c["rewards"]["r"] == 1.0 for c in chosen) == 2  # both successes, not drowned by 118 failures
    assert len({c["prompt_index"] for c in chosen}) == 40
    assert spread_samples(candidates, 50, seed=1) == chosen


def test_greedy_decoding_arguments_for_each_backend() -> None:
    """Greedy is transformers' do_sample=False and temperature 0 for vLLM (and an endpoint): one completion."""
    from llm_finetuning.sampling.transformers_backend import decoding_kwargs

    greedy = SamplingSettings(k=1, temperature=0.0, max_completion_length=64, seed=10, top_p=0.9, greedy=True)
    assert decoding_kwargs(greedy) == {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    sampled = SamplingSettings(k=4, temperature=0.7, max_completion_length=64, top_p=0.9)
    assert decoding_kwargs(sampled) == {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 0}
    params = sampling_params_kwargs(greedy, 3)
    assert (params["n"], params["temperature"], params["top_p"]) == (1, 0.0, 1.0)


def test_spread_takes_distinct_completions_first_and_counts_repeats() -> None:
    """Issue 27 item 11: 6 of 64 inspection samples were the same completion of the same prompt."""
    from llm_finetuning.sampling.select import repeat_note, repeated_pairs

    # 40 prompts x 4 completions; each prompt's first two completions are the same text, the third differs
    candidates = [{"prompt_index": p, "sample_index": j, "completion": f"answer {p}" if j < 2 else f"other {p}.{j}",
                   "rewards": {"r": 0.0}, "total": 0.0} for p in range(40) for j in range(4)]
    chosen = spread_samples(candidates, 64, seed=3)
    assert len(chosen) == 64 and repeated_pairs(chosen) == 0  # 120 distinct pairs: no repeat needed
    assert repeat_note(chosen) is None
    few = [c for c in candidates if c["sample_index"] < 2]  # 40 distinct pairs for 64 samples
    chosen = spread_samples(few, 64, seed=3)
    assert len(chosen) == 64 and repeated_pairs(chosen) == 24  # the distinct ones all taken, then repeats
    assert len({(c["prompt_index"], c["completion"]) for c in chosen}) == 40
    assert str(repeat_note(chosen)).startswith("24 of 64 samples repeat a (prompt, completion) pair already in the "
                                               "sample: the model answered those prompts the same way each time and "
                                               "the pool held only 40 distinct pairs")
