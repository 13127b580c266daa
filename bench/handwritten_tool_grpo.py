"""A hand-written TRL 1.16 GRPOTrainer script for a tool task: the bar a run through the gate must meet.

What a TRL user writes for examples/inventory-tools: the example's four lookup functions passed as
`tools=[...]`, the Qwen2.5 tool template set on the tokenizer with TRL's own response parser
(`add_response_schema`), one reward on the answer (the last number of the final reply equals the looked-up
value), and the run's settings in GRPOConfig (learning rate, constant schedule, beta, G, batch, completion
length, temperature, bf16, seed, steps, `max_tool_calling_iterations` = the brief's episode.max_turns); TRL's
defaults for the rest. bench/inventory_tools_gpu.py runs it beside the gated pipeline and scores both with
`finetune eval --brief`.

    python bench/handwritten_tool_grpo.py --model DIR --example examples/inventory-tools --out /tmp/hand
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

LAST_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def final_reply(completion: Any) -> str:
    """The text of the last assistant message of an episode (or the completion itself when it is text)."""
    if isinstance(completion, str):
        return completion
    replies = [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
    return str(replies[-1].get("content") or "") if replies else ""


def answer_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1.0 when the last number of the final reply is the expected answer, else 0.0."""
    out = []
    for completion, want in zip(completions, answer, strict=True):
        numbers = LAST_NUMBER.findall(final_reply(completion))
        out.append(1.0 if numbers and numbers[-1] == str(want) else 0.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a transformers model folder")
    ap.add_argument("--example", type=Path, required=True, help="the example folder (data, tools.py, the template)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--learning-rate", type=float, default=3e-5)
    ap.add_argument("--max-turns", type=int, default=2)
    ap.add_argument("--seed", type=int, default=3407)
    args = ap.parse_args()

    import torch
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import add_response_schema

    spec = importlib.util.spec_from_file_location("example_tools", args.example / "tools.py")
    assert spec is not None and spec.loader is not None
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.padding_side = "left"
    tokenizer.chat_template = (args.example / "chat_template.jinja").read_text(encoding="utf-8")
    add_response_schema(tokenizer)
    dataset = load_dataset("json", data_files=str(args.example / "data" / "train.jsonl"), split="train")
    gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=str(args.out / "checkpoints"), max_steps=args.steps, learning_rate=args.learning_rate,
        lr_scheduler_type="constant", warmup_steps=0, beta=0.01, num_generations=8, per_device_train_batch_size=8,
        gradient_accumulation_steps=4 if gpu else 1, max_completion_length=96 if gpu else 16, temperature=0.7,
        bf16=gpu, use_cpu=not gpu, seed=args.seed, logging_steps=1, save_strategy="no", report_to="none",
        model_init_kwargs={"dtype": torch.bfloat16 if gpu else torch.float32},
        max_tool_calling_iterations=args.max_turns)
    trainer = GRPOTrainer(model=args.model, reward_funcs=answer_reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, tools=[tools.price, tools.stock, tools.weight, tools.shelf])
    trainer.train()
    trainer.save_model(str(args.out / "model"))
    tokenizer.save_pretrained(str(args.out / "model"))
    logs = [row for row in trainer.state.log_history if "reward" in row]
    settings = {k: v for k, v in config.to_dict().items() if isinstance(v, (int, float, str, bool, type(None)))}
    (args.out / "script.json").write_text(json.dumps({
        "reward_curve": [row["reward"] for row in logs],
        "train_runtime": next((row["train_runtime"] for row in trainer.state.log_history if "train_runtime" in row),
                              None),
        "grpo_config": settings}, indent=1))


if __name__ == "__main__":
    main()
