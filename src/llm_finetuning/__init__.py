"""llm-finetuning: gated GRPO/RLVR fine-tuning with TRL.

The core (brief, gate, render, rewards registry, diagnose, memory) imports no torch, transformers,
trl or vllm; only `launch` and `sampling` load the ML stack, inside the functions that need it.
"""

__version__ = "0.1.0"
