"""Run untrusted completion code in an isolated, pre-forked worker pool (see references/sandbox.md)."""

from llm_finetuning.sandbox.pool import Isolation, JobResult, Limits, SandboxError, SandboxPool, get_pool

__all__ = ["Isolation", "JobResult", "Limits", "SandboxError", "SandboxPool", "get_pool"]
