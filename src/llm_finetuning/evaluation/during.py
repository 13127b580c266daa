"""Held-out evaluation while training (the brief's `held_out_eval`): the current policy, every N steps.

The policy samples the first `prompts` of the baseline record's prompts `k` times with the baseline's
settings (the same as `finetune eval`), in memory, through the transformers sampler; the torch RNG is
forked around it so the run's own sampling is unchanged. Each evaluation appends `{"step", "score",
"pass_at_k", "prompts", "k", "seconds"}` to RUN_DIR/eval.jsonl, where `finetune diagnose` (and
`--follow`, live) reads held-out scores; when the record holds per-prompt successes for that k, the base
model's score is the row of step 0. Its cost is printed and written with every row.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from llm_finetuning.brief import Brief
from llm_finetuning.evaluation.paired import pass_figures
from llm_finetuning.evaluation.run import EvalPlan, plan_eval, scored_successes
from llm_finetuning.rundir import EVAL_JSONL

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from llm_finetuning.models import CausalLM
    from llm_finetuning.rewards.code import VerifiedCode


class HeldOutRow(TypedDict):
    """One evaluation of the policy, as RUN_DIR/eval.jsonl holds it."""

    step: int
    score: float
    pass_at_k: float
    prompts: int
    k: int
    seconds: float
    source: str


class HeldOutEvaluator:
    """Scores a model in memory on the plan's prompts; appends each result to RUN_DIR/eval.jsonl."""

    def __init__(self, brief: Brief, run_dir: Path, plan: EvalPlan, every_steps: int,
                 code: VerifiedCode | None = None) -> None:
        from llm_finetuning.sampling.data import load_split
        from llm_finetuning.sampling.run import prompts_at

        self.brief, self.run_dir, self.plan, self.every_steps = brief, Path(run_dir), plan, every_steps
        self.code = code  # a run's verified reward and tool bytes: what the policy is scored with, as it trains
        self.split = load_split(brief, plan.split)
        self.prompts = prompts_at(brief, self.split, plan.indices, plan.system_prompt)

    @classmethod
    def from_brief(cls, brief: Brief, run_dir: Path, code: VerifiedCode | None = None) -> HeldOutEvaluator | None:
        """The evaluator the brief asks for, or None when `held_out_eval.every_steps` is 0."""
        cfg = brief.held_out_eval
        if cfg.every_steps <= 0:
            return None
        return cls(brief, run_dir, plan_eval(brief, cfg.prompts, cfg.k), cfg.every_steps, code)

    def due(self, step: int) -> bool:
        return step > 0 and step % self.every_steps == 0

    def _append(self, row: Mapping[str, object]) -> None:
        with open(self.run_dir / EVAL_JSONL, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    def write_base_row(self) -> None:
        """Step 0: the base model's score on the same prompts, from the record (nothing sampled)."""
        if self.plan.base_successes is not None:
            fig = pass_figures(self.plan.base_successes, self.plan.settings.k)
            self._append({"step": 0, "score": fig["pass_at_1"], "pass_at_k": fig["pass_at_k"],
                          "prompts": len(self.plan.indices), "k": self.plan.settings.k, "source": "baseline record"})

    def evaluate(self, model: CausalLM, tokenizer: PreTrainedTokenizerBase, step: int) -> HeldOutRow:
        """Sample and score the policy now; append and return the row."""
        import torch

        from llm_finetuning.sampling.progress import SamplingProgress
        from llm_finetuning.sampling.run import SampledPrompt, SamplingRun, generate_groups
        from llm_finetuning.sampling.transformers_backend import TransformersBackend

        started = time.monotonic()
        device = next(model.parameters()).device
        backend = TransformersBackend.for_loaded(model, tokenizer, device.type)
        prompts = [SampledPrompt(p.row_index, p.row, p.messages, []) for p in self.prompts]
        was_training = model.training
        model.eval()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                groups = generate_groups(backend, self.brief, prompts, self.plan.settings,
                                         SamplingProgress(len(prompts), self.plan.settings.k, enabled=False),
                                         code=self.code)
        finally:
            model.train(was_training)
        for p, group in zip(prompts, groups, strict=True):
            p.completions = group
        run = SamplingRun(self.split, prompts, self.plan.settings, "policy", backend.describe(),
                          time.monotonic() - started, tokenizer)
        successes = scored_successes(self.brief, run, self.code)
        fig = pass_figures(successes, self.plan.settings.k)
        seconds = round(time.monotonic() - started, 2)
        row: HeldOutRow = {"step": step, "score": fig["pass_at_1"], "pass_at_k": fig["pass_at_k"], "prompts": len(prompts),
               "k": self.plan.settings.k, "seconds": seconds, "source": "held_out_eval"}
        self._append(row)
        print(f"\nheld-out eval at step {step}: pass@1 {100 * fig['pass_at_1']:.1f}% ({len(prompts)} prompts x "
              f"{self.plan.settings.k}, {seconds} s)", file=sys.stderr, flush=True)
        return row
