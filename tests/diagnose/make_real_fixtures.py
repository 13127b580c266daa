"""Produce the real-run fixtures of `finetune diagnose`: TRL 1.16 GRPOTrainer on CPU, tiny model.

Run once (about a minute or two on two cores) and commit what it writes:

    python tests/diagnose/make_real_fixtures.py            # all three runs
    python tests/diagnose/make_real_fixtures.py healthy    # one of: healthy truncation hackable

Each run writes tests/diagnose/fixtures/real-<name>/ with:
- metrics.jsonl: one JSON object per TRL log event, as `finetune launch` writes it (`step`, `epoch`, every
  key TRL logs), then the end marker `{"event": "end", "step": N}`;
- trainer_state.json: TRL's own state (`log_history`), saved at the end of training;
- completions.jsonl: every scored completion (`step`, `prompt`, `completion`, `rewards`);
- run.json: how the run was made (model, rewards, settings), so the fixture explains itself.

The policy is `llm_finetuning.testing.tiny.build_tiny_model`, first taught the reply format with a few
hundred plain supervised steps (the recipe starts GRPO from an SFT checkpoint), except for the truncation
run, which uses the untrained random model on purpose:

- healthy: one-digit sums, reward `correct` (the sum, as digits or as a word). SFT labels were half
  wrong, so the base success is about one half and GRPO can sharpen it.
- truncation: the random model never emits its end token and `max_completion_length` is 4: every
  completion is cut, none terminates.
- hackable: two-digit sums the model cannot do (`correct` stays at zero) plus a `digits_only` format
  reward that the model learns to satisfy: the format reward saturates while correctness stays flat.
"""

from __future__ import annotations

import json
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
INSTRUCTION = "Reply with only the number."


def _prompt(a: int, b: int) -> str:
    return f"What is {a} + {b}? {INSTRUCTION}"


def _one_digit_pairs() -> list[tuple[int, int]]:
    return [(a, b) for a in range(10) for b in range(10) if a + b <= 9]


def _sft_rows(seed: int = 0) -> list[tuple[str, str]]:
    """(prompt, reply): correct half of the time, digits half of the time, words otherwise."""
    rng = random.Random(seed)
    rows = []
    for _ in range(4):
        for a, b in _one_digit_pairs():
            value = a + b if rng.random() < 0.5 else rng.randrange(10)
            reply = str(value) if rng.random() < 0.5 else WORDS[value]
            rows.append((_prompt(a, b), reply))
    rng.shuffle(rows)
    return rows


def _sft(model_dir: Path, out_dir: Path, steps: int = 300) -> Path:
    """Teach the random tiny model the reply format (a number or a number word, then the end token)."""
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    if (out_dir / "config.json").is_file():
        return out_dir
    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    torch.manual_seed(0)
    encoded = []
    for prompt, reply in _sft_rows():
        head = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                       tokenize=False)
        p_ids = tok(head, add_special_tokens=False)["input_ids"]
        r_ids = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        encoded.append((p_ids + r_ids, [-100] * len(p_ids) + r_ids))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    rng = random.Random(0)
    for step in range(steps):
        batch = rng.sample(encoded, 32)
        width = max(len(ids) for ids, _ in batch)
        ids = torch.tensor([x + [tok.pad_token_id] * (width - len(x)) for x, _ in batch])
        labels = torch.tensor([y + [-100] * (width - len(y)) for _, y in batch])
        mask = (torch.arange(width)[None, :] < torch.tensor([len(x) for x, _ in batch])[:, None]).long()
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if step % 100 == 0 or step == steps - 1:
            print(f"sft step {step} loss {loss.item():.3f}", file=sys.stderr)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return str(completion[-1]["content"]) if completion else ""
    return str(completion)


def _value(text: str) -> int | None:
    text = text.strip().lower()
    if re.fullmatch(r"\d+", text):
        return int(text)
    return WORDS.index(text) if text in WORDS else None


def correct(prompts: list[Any], completions: list[Any], answer: list[int], **_: Any) -> list[float]:
    """1.0 when the reply is the sum (as digits or as a word)."""
    return [1.0 if _value(_text(c)) == int(a) else 0.0 for c, a in zip(completions, answer, strict=True)]


def digits_only(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    """1.0 when the reply is a bare run of digits (a format reward: says nothing about correctness)."""
    return [1.0 if re.fullmatch(r"\s*\d+\s*", _text(c)) else 0.0 for c in completions]


class _Recorder:
    """Wraps the reward functions to log every scored completion with the trainer's step."""

    def __init__(self, funcs: list[Any], path: Path) -> None:
        self.funcs = funcs
        self.path = path
        self.trainer: Any = None
        self.pending: dict[str, list[float]] = {}
        path.write_text("")

    def wrap(self, index: int) -> Any:
        func = self.funcs[index]

        def scored(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
            values: list[float] = func(prompts, completions, **columns)
            self.pending[func.__name__] = values
            if index == len(self.funcs) - 1:
                step = self.trainer.state.global_step + 1 if self.trainer is not None else 0
                with self.path.open("a") as fh:
                    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
                        row = {"step": step, "prompt": _text(p), "completion": _text(c),
                               "rewards": {name: vals[i] for name, vals in self.pending.items()}}
                        fh.write(json.dumps(row) + "\n")
                self.pending = {}
            return values

        scored.__name__ = func.__name__
        return scored


def _metrics_callback(path: Path) -> Any:
    from transformers import TrainerCallback

    class MetricsJsonl(TrainerCallback):  # type: ignore[misc]
        """What `finetune launch` writes: one line per log event, then the end marker."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            path.write_text("")

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            with path.open("a") as fh:
                fh.write(json.dumps({"step": state.global_step, "epoch": state.epoch, **(logs or {})}) + "\n")

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            with path.open("a") as fh:
                fh.write(json.dumps({"event": "end", "step": state.global_step}) + "\n")

    return MetricsJsonl()


RUNS: dict[str, dict[str, Any]] = {
    "healthy": {
        "model": "sft", "pairs": "one_digit", "rewards": ["correct"], "max_completion_length": 8,
        "learning_rate": 1e-3, "max_steps": 30,
    },
    "truncation": {
        "model": "random", "pairs": "one_digit", "rewards": ["correct"], "max_completion_length": 4,
        "learning_rate": 1e-3, "max_steps": 12,
    },
    "hackable": {
        "model": "sft", "pairs": "two_digit", "rewards": ["digits_only", "correct"], "max_completion_length": 8,
        "learning_rate": 1e-3, "max_steps": 30,
    },
}


def make_run(name: str, work: Path, out: Path | None = None, **overrides: Any) -> Path:
    """Train one run and write its logs into `out` (default tests/diagnose/fixtures/real-<name>/)."""
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    from llm_finetuning.testing.tiny import build_tiny_model

    spec = {**RUNS[name], **overrides}
    texts = [_prompt(a, b) + " " + str(a + b) for a, b in _one_digit_pairs()] + WORDS
    base = build_tiny_model(work / "tiny", texts=texts)
    model_dir = _sft(base, work / "tiny-sft") if spec["model"] == "sft" else base
    if spec["pairs"] == "one_digit":
        pairs = random.Random(1).sample(_one_digit_pairs(), 8)  # few prompts, each seen several times
    else:
        rng = random.Random(1)
        pairs = [(rng.randrange(10, 50), rng.randrange(10, 50)) for _ in range(40)]
    rows = [{"prompt": [{"role": "user", "content": _prompt(a, b)}], "answer": a + b} for a, b in pairs]
    out = out or FIXTURES / f"real-{name}"
    out.mkdir(parents=True, exist_ok=True)
    funcs = [{"correct": correct, "digits_only": digits_only}[r] for r in spec["rewards"]]
    recorder = _Recorder(funcs, out / "completions.jsonl")
    args = GRPOConfig(
        output_dir=str(work / f"out-{name}"), use_cpu=True, bf16=False, report_to=[], save_strategy="no",
        per_device_train_batch_size=16, num_generations=8, gradient_accumulation_steps=1,
        max_completion_length=spec["max_completion_length"], learning_rate=spec["learning_rate"],
        beta=0.01, loss_type="grpo", max_steps=spec["max_steps"], logging_steps=1, seed=3407,
        temperature=1.0, lr_scheduler_type="constant", disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=str(model_dir), args=args, reward_funcs=[recorder.wrap(i) for i in range(len(funcs))],
        train_dataset=Dataset.from_list(rows), processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir),
        callbacks=[_metrics_callback(out / "metrics.jsonl")],
    )
    recorder.trainer = trainer
    trainer.train()
    trainer.state.save_to_json(str(out / "trainer_state.json"))
    run = {"made_by": "tests/diagnose/make_real_fixtures.py", "trl": __import__("trl").__version__,
           "model": f"llm_finetuning.testing.tiny.build_tiny_model ({spec['model']})", **spec,
           "num_generations": 8, "per_device_train_batch_size": 16, "beta": 0.01, "loss_type": "grpo"}
    (out / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    return out


def main(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in names or list(RUNS):
            print(f"run {name} -> {make_run(name, Path(tmp))}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
