"""Reward functions of run 'lora' for TRL, rendered by llm-finetuning 0.1.0 from brief sha256 fb3ca65856a491a9e788a6b06a07075dc3a244c6a29fd0d0591b8d055cbd474d.

Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
grpo_config.yaml names each callable below by import path (`rewards_entry.<name>`): TRL's grpo script
puts the working directory on sys.path. `finetune launch` and launch.sh do not import this file: they build
the same rewards from the verified brief, and a custom reward runs in a confined child (docs/security.md).
"""

import json
from pathlib import Path

from llm_finetuning.rewards import build_reward

BRIEF_FOLDER = (Path(__file__).resolve().parent / '..').resolve()
SPECS = json.loads('[{"args": {"extract": "last_number"}, "fn": "exact_match", "weight": 1.0}, {"args": {"buffer": 16}, "fn": "length_penalty", "weight": 0.2}, {"args": {"extract": "boxed"}, "fn": "exact_match", "weight": 0.5}]')
MAX_COMPLETION_LENGTH = 128

# rewards[0]: metric name 'exact_match'
reward_0_exact_match = build_reward(SPECS[0], BRIEF_FOLDER, 1,
                                      max_completion_length=MAX_COMPLETION_LENGTH)

# rewards[1]: metric name 'length_penalty'
reward_1_length_penalty = build_reward(SPECS[1], BRIEF_FOLDER, 1,
                                         max_completion_length=MAX_COMPLETION_LENGTH)

# rewards[2]: metric name 'exact_match#2'
reward_2_exact_match = build_reward(SPECS[2], BRIEF_FOLDER, 2,
                                      max_completion_length=MAX_COMPLETION_LENGTH)
