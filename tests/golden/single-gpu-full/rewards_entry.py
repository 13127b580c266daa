"""Reward functions of run 'single-gpu-full' for TRL, rendered by llm-finetuning 0.1.0 from brief sha256 0d1ef415844a83b2023dd57e7ef814ead7cf49718099393590eb00c3b2294ee6.

Do not edit: `finetune launch` refuses a rendered file whose sha256 differs from manifest.json.
grpo_config.yaml names each callable below by import path (`rewards_entry.<name>`): TRL's grpo script
puts the working directory on sys.path. `finetune launch` and launch.sh do not import this file: they build
the same rewards from the verified brief, and a custom reward runs in a confined child (docs/security.md).
"""

import json
from pathlib import Path

from llm_finetuning.rewards import build_reward

BRIEF_FOLDER = (Path(__file__).resolve().parent / '..').resolve()
SPECS = json.loads('[{"args": {"answer_field": "answer", "extract": "last_number"}, "fn": "exact_match", "weight": 1.0}]')
MAX_COMPLETION_LENGTH = 512

# rewards[0]: metric name 'exact_match'
reward_0_exact_match = build_reward(SPECS[0], BRIEF_FOLDER, 1,
                                      max_completion_length=MAX_COMPLETION_LENGTH)
