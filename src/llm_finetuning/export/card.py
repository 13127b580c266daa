"""The model card (README.md) of an exported model, rendered from `Evidence`. Pure: text in, text out.

The front matter is what the Hugging Face hub reads (base_model, library_name, tags); the body says what
the model was trained to do, on what reward, how the base model did, who reviewed the reward and when,
what the gate said, how training went, how the trained model does on held-out prompts with the noise,
and what the diagnosis found. Figures the run does not have are stated as missing, never filled in.
"""

from __future__ import annotations

import json

from llm_finetuning.evaluation.targets import NO_RUN_MANIFEST
from llm_finetuning.export.evidence import Evidence


def _pct(value: object) -> str:
    return f"{100 * float(value):.1f}%" if isinstance(value, (int, float)) else "n/a"


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "n/a"


def front_matter(ev: Evidence) -> list[str]:
    tags = ["llm-finetuning", "grpo", "rlvr", "trl"] + (["lora"] if ev.adapter else [])
    hub_id = "/" in ev.base_model and ":" not in ev.base_model and not ev.base_model.startswith((".", "/", "~"))
    lines = ["---"] + ([f"base_model: {json.dumps(ev.base_model)}"] if hub_id else []) + [
        f"library_name: {'peft' if ev.adapter and not ev.merged else 'transformers'}",
        "pipeline_tag: text-generation", "tags:"]
    return lines + [f"  - {t}" for t in tags] + ["---", ""]


def _training_section(ev: Evidence) -> list[str]:
    grpo, model = ev.brief.grpo, ev.brief.model
    out = ["## How it was trained", "",
           f"GRPO (TRL `GRPOTrainer`, variant `{grpo.variant}`) on `{model.id}`, "
           + (f"LoRA adapter (r {model.lora.r}, alpha {model.lora.alpha})"
              + (" merged into the base weights" if ev.merged else "") if ev.adapter else "full fine-tuning")
           + f", saved as {ev.dtype}.", "",
           "| setting | value |", "| --- | --- |"]
    for key in ("learning_rate", "beta", "num_generations", "per_device_train_batch_size",
                "gradient_accumulation_steps", "max_completion_length", "temperature", "max_steps", "seed"):
        out.append(f"| {key} | {getattr(grpo, key)} |")
    if grpo.deviation:
        out.append(f"| deviation justified by | `{grpo.deviation}` |")
    out += ["", "Rewards (weighted sum):", ""]
    for spec in ev.brief.rewards:
        out.append(f"- `{spec.fn}` weight {spec.weight}"
                   + (f", args `{json.dumps(dict(spec.args), sort_keys=True)}`" if spec.args else ""))
    t = ev.training
    out += ["", f"Checkpoint: {ev.label}" + (f" (step {ev.step})" if ev.step is not None else "")
            + f", files sha256 `{ev.checkpoint_sha256}`."]
    if t is not None:
        out.append(f"Training: {t.steps} steps; reward {_num(t.reward_first)} at the first logged step, "
                   f"{_num(t.reward_last)} at the last; KL {_num(t.kl_last)} at the end; "
                   f"{_num(t.elapsed_s)} s of training.")
    else:
        out.append("Training figures: metrics.jsonl is missing from the run directory.")
    return out + [""]


def _records_section(ev: Evidence) -> list[str]:
    out = ["## Evidence before training", ""]
    if not ev.run_manifest:
        out.append(f"- **{NO_RUN_MANIFEST[0].upper()}{NO_RUN_MANIFEST[1:]}.** The evidence below belongs to the "
                   "brief it was described with, not to this model's training.")
    b = ev.baseline
    if b is None:
        out.append("- Baseline: no readable baseline record.")
    else:
        s = b.sampling
        temperature = s.temperature if s is not None and "temperature" in s.held else "unknown"
        max_length = s.max_completion_length if s is not None and "max_completion_length" in s.held else "unknown"
        out.append(f"- Base model (`finetune baseline`): pass@1 {_pct(b.pass_at_1)}, pass@{b.k} "
                   f"{_pct(b.pass_at_k)} over {b.prompts.count} "
                   f"{b.prompts.split or 'sampled'} prompts; temperature {temperature}, "
                   f"max {max_length} tokens; {_pct(b.frac_truncated)} cut at the "
                   f"limit; measured {b.created_at}.")
    r = ev.inspection_review
    if r is None:
        out.append("- Reward inspection: no sealed review.")
    else:
        counts = r.counts
        out.append(f"- Reward inspection: reviewed by {r.reviewer} on {r.sealed_at} "
                   f"({counts.get('agree', 0)} agree, {counts.get('disagree', 0)} disagree, {counts.get('unsure', 0)} "
                   "unsure), sealed. `finetune review` requires an interactive terminal: a guard against "
                   "rubber-stamping, not a cryptographic proof that a person read them.")
    verdict = {True: "passed", False: "rejected", None: "could not run"}[ev.gate_passed]
    on = "" if ev.run_manifest else " on the brief (it did not gate this model's training)"
    out.append(f"- Phase 1 gate, re-run at export{on}: {verdict}"
               + ("; its warnings and failures:" if ev.gate_lines else "."))
    out += [f"  - {' '.join(line.split())}" for line in ev.gate_lines]
    return out + [""]


def _results_section(ev: Evidence) -> list[str]:
    out = ["## Held-out results", ""]
    e = ev.evaluation
    if e is None:
        return out + [ev.evaluation_note, ""]
    lo, hi = e.ci95
    k = e.k
    decoding = ("greedy decoding" if e.greedy else f"temperature {e.temperature:g}"
                if e.temperature is not None else "the baseline's temperature")
    out += [f"`finetune eval` on {e.prompts} {e.split} prompts x {k} samples, with the baseline's "
            f"prompts and sampling settings at {decoding} (both sides):", "",
            "| | base | trained |", "| --- | --- | --- |",
            f"| pass@1 | {_pct(e.base.pass_at_1)} | {_pct(e.trained.pass_at_1)} |",
            f"| pass@{k} | {_pct(e.base.pass_at_k)} | {_pct(e.trained.pass_at_k)} |", "",
            f"Difference in pass@1: {100 * e.delta_pass_at_1:+.1f} points, 95% interval [{100 * lo:+.1f}, "
            f"{100 * hi:+.1f}] (paired over prompts): "
            + ("better beyond the sampling noise." if e.beyond_noise and e.delta_pass_at_1 > 0
               else "worse beyond the sampling noise." if e.beyond_noise else "within the sampling noise."), ""]
    return out


def _diagnosis_section(ev: Evidence) -> list[str]:
    out = ["## Diagnosis", ""]
    d = ev.diagnosis
    if d is None:
        return out + [ev.diagnosis_note or "no diagnosis", ""]
    findings = d.findings
    if not findings:
        return out + ["`finetune diagnose`: healthy, no findings.", ""]
    out.append("`finetune diagnose` found:")
    for f in findings:
        variant = f" (variant to try: {f.variant})" if f.variant else ""
        whose = ", the task's: what training should reduce" if f.kind == "task" else ""
        out.append(f"- `{f.id}` ({f.severity}{whose}){variant}")
    return out + [""]


def render_card(ev: Evidence, upload_hint: str) -> str:
    lines = front_matter(ev) + [
        f"# {ev.brief.name}", "",
        f"{ev.brief.task.summary}", "",
        (f"Fine-tuned with llm-finetuning from `{ev.brief.model.id}` by GRPO "
         "with verifiable rewards." if ev.run_manifest else
         f"{NO_RUN_MANIFEST[0].upper()}{NO_RUN_MANIFEST[1:]}: it is described with the brief below, from "
         f"`{ev.brief.model.id}`.")
        + " Every figure below was measured by the `finetune` verbs named beside it; a "
        "figure that was not measured says so.", "",
    ]
    lines += _training_section(ev) + _records_section(ev) + _results_section(ev) + _diagnosis_section(ev)
    lines += ["## Use", "", "```python", "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
              'model = AutoModelForCausalLM.from_pretrained("PATH_OR_REPO")', 'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")',
              "```", "", upload_hint, ""]
    return "\n".join(lines)
