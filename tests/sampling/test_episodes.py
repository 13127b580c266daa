"""Episodes (docs/sampling.md, Episodes): TRL's tool loop run with the real tokenizer and template.

The loop tests script the model's turns (token ids of fixed texts) so they can assert exactly what the
loop did with them: parse the calls, call the tools, append the results, mask them, stop at the limit.
The last test samples the tiny random model through `sample_brief`, end to end.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.brief.episode import EpisodeSpec
from llm_finetuning.sampling.episode import Toolbox, prepare_tokenizer, run_episodes, timed

from .conftest import EXAMPLES, copy_example, load

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call><|im_end|>'


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def explode(x: int) -> int:
    """Always fails.

    Args:
        x: Anything.
    """
    raise RuntimeError("boom")


def stall(x: int) -> int:
    """Never answers in time.

    Args:
        x: Anything.
    """
    time.sleep(30)
    return x


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    spec = EpisodeSpec((), None, 4, 1.0, str(EXAMPLES / "calculator-tools/chat_template.jinja"))
    prepare_tokenizer(tok, spec, EXAMPLES)
    return tok


def scripted(tokenizer: Any, turns: list[str]) -> Any:
    """A `generate` that answers every sequence of the n-th call with turns[n] (the last one repeats)."""
    calls = [0]

    def generate(batch: list[list[int]], max_new: int) -> list[tuple[list[int], bool]]:
        text = turns[min(calls[0], len(turns) - 1)]
        calls[0] += 1
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][:max_new]
        return [(list(ids), ids[-1] == tokenizer.eos_token_id) for _ in batch]

    return generate


PROMPT = [[{"role": "user", "content": "What is 3 * 4?"}]]


def test_a_tool_call_is_made_its_result_appended_and_masked_out(tokenizer: Any) -> None:
    turns = [CALL.format(name="multiply", args='{"a": 3, "b": 4}'), "12<|im_end|>"]
    [[episode]] = run_episodes(tokenizer, scripted(tokenizer, turns), PROMPT, [{}], Toolbox([multiply]),
                               k=1, max_turns=4, max_completion_length=200)
    assert [m["role"] for m in episode.messages] == ["assistant", "tool", "assistant"]
    assert episode.messages[0]["tool_calls"][0]["function"] == {"name": "multiply", "arguments": {"a": 3, "b": 4}}
    assert episode.messages[1] == {"role": "tool", "name": "multiply", "content": "12"}
    assert episode.final_answer == "12"
    assert (episode.tool_calls, episode.tool_failures, episode.turns, episode.cut_at_limit) == (1, 0, 2, False)
    tool_ids = [t for t, m in zip(episode.completion_ids, episode.tool_mask, strict=True) if m == 0]
    model_ids = [t for t, m in zip(episode.completion_ids, episode.tool_mask, strict=True) if m == 1]
    assert "<tool_response>\n12\n</tool_response>" in tokenizer.decode(tool_ids)
    assert "tool_response" not in tokenizer.decode(model_ids) and "12" in tokenizer.decode(model_ids)


def test_a_tool_that_raises_or_hangs_answers_with_an_error_and_the_episode_goes_on(tokenizer: Any) -> None:
    both = ('<tool_call>\n{"name": "explode", "arguments": {"x": 1}}\n</tool_call>\n'
            '<tool_call>\n{"name": "stall", "arguments": {"x": 1}}\n</tool_call><|im_end|>')
    started = time.monotonic()
    [[episode]] = run_episodes(tokenizer, scripted(tokenizer, [both, "done<|im_end|>"]), PROMPT, [{}],
                               Toolbox([timed(explode, 0.3), timed(stall, 0.3)]), k=1, max_turns=4,
                               max_completion_length=300)
    assert time.monotonic() - started < 10
    results = [m["content"] for m in episode.messages if m["role"] == "tool"]
    assert results == ["{'error': 'boom'}", "{'error': 'stall did not return within 0.3 s'}"]  # TRL's str()
    assert episode.tool_failures == 2 and episode.final_answer == "done"


def test_an_unknown_tool_is_an_error_result_and_the_turn_limit_cuts_the_episode(tokenizer: Any) -> None:
    loop = CALL.format(name="nope", args='{"x": 1}')
    [[episode]] = run_episodes(tokenizer, scripted(tokenizer, [loop]), PROMPT, [{}], Toolbox([multiply]),
                               k=1, max_turns=2, max_completion_length=400)
    assert episode.cut_at_limit and episode.turns == 3 and episode.tool_calls == 2
    assert all(m["content"] == "{'error': 'Tool nope not found.'}" for m in episode.messages if m["role"] == "tool")


def test_a_tool_result_past_the_length_limit_ends_the_episode_as_it_stood(tokenizer: Any) -> None:
    turn = CALL.format(name="multiply", args='{"a": 3, "b": 4}')
    n = len(tokenizer(turn, add_special_tokens=False)["input_ids"])
    [[episode]] = run_episodes(tokenizer, scripted(tokenizer, [turn]), PROMPT, [{}], Toolbox([multiply]),
                               k=1, max_turns=4, max_completion_length=n + 2)
    assert [m["role"] for m in episode.messages] == ["assistant"] and episode.tool_mask == [1] * n


class Counter:
    """An environment: one instance per episode, reset with the row, rewarded by its own state."""

    def reset(self, **row: Any) -> str:
        self.target = int(row["target"])
        self.total = 0
        return f" (target {self.target})"

    def step(self, n: int) -> int:
        """Add n to the total.

        Args:
            n: How much to add.
        """
        self.total += n
        return self.total

    def get_reward(self) -> float:
        return float(self.total == self.target)


def test_an_environment_is_reset_per_episode_and_rewards_it(tokenizer: Any) -> None:
    turns = [CALL.format(name="step", args='{"n": 5}'), "ok<|im_end|>"]
    groups = run_episodes(tokenizer, scripted(tokenizer, turns), PROMPT * 2, [{"target": 5}, {"target": 6}],
                          Toolbox([], Counter), k=2, max_turns=4, max_completion_length=300)
    assert [[e.environment_reward for e in g] for g in groups] == [[1.0, 1.0], [0.0, 0.0]]
    assert all(e.environment == "Counter" and e.messages[1]["content"] == "5" for g in groups for e in g)


@pytest.mark.slow
def test_sample_brief_runs_episodes_on_the_tiny_model(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llm_finetuning.sampling.run import sample_brief, score_run

    brief = load(copy_example("calculator-tools", tmp_path, **{"model.id": str(tiny_model_dir),
                                                               "grpo.max_completion_length": 8}))
    run = sample_brief(brief, n_prompts=2, k=2, split="eval", backend="transformers")
    score_run(brief, run, explain=True)
    for p in run.prompts:
        for c, s in zip(p.completions, p.scores, strict=True):
            assert c.episode is not None and c.episode["messages"][0]["role"] == "assistant"
            assert set(s["rewards"]) == {"tool_call", "exact_match"}
            assert s["explanations"]["tool_call"].startswith("0/1 expected call(s)")
    assert run.tokenizer.response_template is not None  # the brief's template got TRL's parser


def test_a_tool_that_runs_the_model_s_code_runs_it_in_the_sandbox(tokenizer: Any) -> None:
    from transformers.utils.chat_template_utils import get_json_schema

    from llm_finetuning.sampling.python_tool import run_python

    assert get_json_schema(run_python)["function"]["parameters"]["required"] == ["code"]
    turns = [CALL.format(name="run_python", args='{"code": "print(6 * 7)"}'),
             CALL.format(name="run_python", args='{"code": "while True: pass"}'), "42<|im_end|>"]
    [[episode]] = run_episodes(tokenizer, scripted(tokenizer, turns), PROMPT, [{}], Toolbox([timed(run_python, 30)]),
                               k=1, max_turns=4, max_completion_length=600)
    results = [m["content"] for m in episode.messages if m["role"] == "tool"]
    assert results == ["42\n", "{'error': 'the program ran past 5 s'}"]
    assert episode.tool_failures == 1 and episode.final_answer == "42"


class ScriptedEngine:
    """A backend that answers every sequence of its n-th turn with turns[n] (the loop's `scripted`), so the
    whole of `sample_episodes` runs with tool calls on a model that would never make them."""

    name = "scripted"

    def __init__(self, tokenizer: Any, turns: list[str]) -> None:
        self.tokenizer = tokenizer
        self._generate = scripted(tokenizer, turns)

    def generate_ids(self, batch: list[list[int]], max_new: int, settings: Any, seed: int) -> Any:
        return self._generate(batch, max_new)


def test_calls_that_hang_past_the_limit_are_counted_and_reported_in_one_line(
        tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from transformers import AutoTokenizer

    from llm_finetuning.sampling.data import load_split
    from llm_finetuning.sampling.progress import SamplingProgress
    from llm_finetuning.sampling.run import prompts_at, sample_episodes, settings_from_brief

    brief_path = copy_example("calculator-tools", tmp_path, **{
        "model.id": str(tiny_model_dir), "episode.tools": ["hang:stall"], "episode.tool_timeout_s": 0.2,
        "grpo.max_completion_length": 400})
    (brief_path.parent / "hang.py").write_text(
        'import time\n\n\ndef stall(x: int) -> int:\n    """Sleeps past any limit.\n\n    Args:\n'
        '        x: Anything.\n    """\n    time.sleep(5)\n    return x\n', encoding="utf-8")
    brief = load(brief_path)
    spec = brief.episode
    assert spec is not None
    call = CALL.format(name="stall", args='{"x": 1}')
    engine = ScriptedEngine(AutoTokenizer.from_pretrained(tiny_model_dir), [call, call, "done<|im_end|>"])
    prompts = prompts_at(brief, load_split(brief, "eval"), [0], None)
    with SamplingProgress(1, 1, enabled=False) as bar:
        [[completion]] = sample_episodes(engine, brief, spec, prompts, settings_from_brief(brief, 1), bar)
    assert completion.episode is not None and completion.episode["tool_failures"] == 2
    assert completion.text == "done"
    assert capsys.readouterr().err.splitlines() == [
        "warning: tool calls passed episode.tool_timeout_s (0.2 s) and were left running in the background: "
        "stall 2 call(s), 2 still running; make the tool return in time (or raise)"]
