"""A hand-written TRL GRPOTrainer script: the bar a run through the pipeline must meet.

What a TRL user writes for the smollm2-json task: the run's own settings in GRPOConfig (learning rate and
schedule, beta, G, batch, completion length, temperature, bf16, seed, steps) and TRL 1.16's defaults for
everything else. The prompts become chat messages (the model has a chat template), as `finetune launch` does,
and the reward is the example's own `person_json`. bench/pipeline_vs_script_gpu.py runs it beside the same
run through gate -> render -> launch and scores both on the same held-out prompts.

    python bench/handwritten_grpo.py --model DIR --example examples/smollm2-json --out /tmp/hand
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a transformers model folder")
    ap.add_argument("--example", type=Path, required=True, help="the example folder (data/train.jsonl, the reward)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--learning-rate", type=float, default=3e-5)
    ap.add_argument("--lr-scheduler", default="constant")
    ap.add_argument("--seed", type=int, default=3407)
    ap.add_argument("--cache-implementation", default=None,
                    help="TRL's cache_implementation (its default: none, a dynamic cache)")
    args = ap.parse_args()

    import torch
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    sys.path.insert(0, str(args.example.resolve()))
    from person_reward import person_json

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.padding_side = "left"
    dataset = load_dataset("json", data_files=str(args.example / "data" / "train.jsonl"), split="train")
    dataset = dataset.map(lambda row: {"prompt": [{"role": "user", "content": row["prompt"]}]})
    config = GRPOConfig(
        output_dir=str(args.out / "checkpoints"), max_steps=args.steps, learning_rate=args.learning_rate,
        lr_scheduler_type=args.lr_scheduler, warmup_steps=0, beta=0.01, num_generations=8,
        per_device_train_batch_size=8, gradient_accumulation_steps=4, max_completion_length=128, temperature=0.7,
        bf16=torch.cuda.is_available(), use_cpu=not torch.cuda.is_available(), seed=args.seed, logging_steps=1,
        save_strategy="no", report_to="none", model_init_kwargs={"dtype": torch.bfloat16},
        cache_implementation=args.cache_implementation)
    trainer = GRPOTrainer(model=args.model, reward_funcs=person_json, args=config, train_dataset=dataset,
                          processing_class=tokenizer)
    trainer.train()
    trainer.save_model(str(args.out / "model"))
    tokenizer.save_pretrained(str(args.out / "model"))
    rewards = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    settings = {k: v for k, v in config.to_dict().items() if isinstance(v, (int, float, str, bool, type(None)))}
    (args.out / "script.json").write_text(json.dumps({"reward_curve": rewards, "grpo_config": settings}, indent=1))


if __name__ == "__main__":
    main()
