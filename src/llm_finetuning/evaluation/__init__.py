"""After training: held-out evaluation of a run's checkpoints against the baseline record (`finetune eval`).

`paired` holds the statistics (pure), `targets` finds a run's checkpoints and makes each one a model
folder that every sampling backend loads (a LoRA adapter merged into its base), and `run` samples and
scores them with the baseline record's prompts and settings through `llm_finetuning.sampling`.
"""
