"""Records the gate trusts, with their verifiers: the baseline, the sealed reward inspection, the judge calibration
and the diagnosis of a run named by grpo.deviation.

Formats are versioned (`"format": "llm-finetuning/baseline@1"`, `"llm-finetuning/inspection@1"`), every
write is atomic, and every record binds by sha256 to the reward specs, the reward source files, the model
and its data, so the gate can name exactly what went stale. Pure: no ML library is imported here.

A verifier returns `llm_finetuning.errors.Problem`s: `id` is the kind of problem (one of KINDS), `path`
the part of the record concerned (`reward_code`, `rewards_spec`, `model`, `samples`, `verdicts`,
`record`, ...), `message` one line, `fix` the command or edit that cures it.
"""

from __future__ import annotations

# kinds of record problem (a Problem's id), in the order a person should deal with them
KINDS = ("missing", "malformed", "tampered", "untrusted_key", "unsigned", "stale", "unsealed", "incomplete", "size", "disagreement")

__all__ = ["KINDS"]
