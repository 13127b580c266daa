"""Records the gate trusts, with their verifiers: the baseline, the sealed reward inspection, the judge calibration
and the diagnosis of a run named by grpo.deviation.

Formats are versioned (`"format": "llm-finetuning/baseline@1"`, `"llm-finetuning/inspection@1"`), every
write is atomic, and every record binds by sha256 to the reward specs, the reward source files, the model
and its data, so the gate can name exactly what went stale. Pure: no ML library is imported here.
"""

from __future__ import annotations

from llm_finetuning.records.problem import Problem

__all__ = ["Problem"]
