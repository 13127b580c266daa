"""Sampling a brief's model: the backend shared by `finetune baseline` and `finetune inspect`.

`run.sample_brief` resolves the model (`llm_finetuning.models`), builds the chat messages with the
brief's system prompt (`data`), and generates k completions per prompt on one backend (`backend`:
vLLM offline, an OpenAI-compatible endpoint, or transformers `generate`) with a progress bar on stderr
(`progress`); `run.score_run` scores them with the brief's rewards. `metrics` turns scored groups into
baseline figures and a verdict, `select` picks the samples a person reviews, `report` renders them.
Importing this package loads no ML library; the backends import theirs when they are built.
"""
