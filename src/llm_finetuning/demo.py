"""`finetune demo`: the whole gated pipeline on the embedded SmolLM2-135M-Instruct, on CPU.

Steps, each the real verb a user would run (so the demo shows the commands, not a shortcut):
gate without records (rejected, and why) -> gate with the shipped records (passes) -> render ->
launch (GRPO) -> `finetune eval` (held-out pass@1 before and after, paired 95% interval) -> diagnose
with its plot -> summary.
The example lives in the checkout's examples/smollm2-json; it runs offline once the packages are in. It is
copied into a work folder (`default_work_dir`: demo/ in the cache folder, or `--out DIR`), never into the
current folder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

from llm_finetuning.cache import cache_root
from llm_finetuning.errors import UnusableInput
from llm_finetuning.locations import isolated_python
from llm_finetuning.rundir import EVAL_JSON, read_diagnosis
from llm_finetuning.rundir.diagnosis import Diagnosis

EXAMPLE = "smollm2-json"


def default_work_dir() -> Path:
    """Where the demo works unless `--out` says otherwise: demo/ in the cache folder, not the current
    folder (which is often the checkout, where it would show as untracked files)."""
    return cache_root() / "demo"


def example_dir() -> Path:
    """The demo's example in the checkout the package was installed from (an editable install)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "examples" / EXAMPLE
        if (candidate / "brief.yaml").is_file():
            return candidate
    raise click.ClickException(
        f"the demo's example (examples/{EXAMPLE}) was not found next to the installed package; "
        "finetune demo runs from a checkout: clone the repository and `pip install -e '.[train]'` in it")


@dataclass
class Stage:
    name: str
    seconds: float = 0.0
    ok: bool = True
    note: str = ""


@dataclass
class DemoSummary:
    work_dir: Path
    run_dir: Path
    eval_prompts: int
    k: int
    pass_before: float | None = None
    pass_after: float | None = None
    evaluation: dict[str, Any] = field(default_factory=dict)  # RUN_DIR/eval.json, as `finetune eval` wrote it
    stages: list[Stage] = field(default_factory=list)
    minutes: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "work_dir": str(self.work_dir), "run_dir": str(self.run_dir), "eval_prompts": self.eval_prompts,
            "k": self.k, "pass_at_1_before": self.pass_before, "pass_at_1_after": self.pass_after,
            "ci95": self.evaluation.get("ci95"), "beyond_noise": self.evaluation.get("beyond_noise"),
            "minutes": round(self.minutes, 2),
            "stages": [{"name": s.name, "seconds": round(s.seconds, 1), "ok": s.ok, "note": s.note}
                       for s in self.stages],
        }


def _say(text: str) -> None:
    click.echo(text, err=True)


def _finetune(*args: str, expect: tuple[int, ...] = (0,)) -> int:
    """Run a real `finetune` verb in a child process, streaming its output; return its exit code."""
    return _finetune_output(*args, expect=expect, capture=False)[0]


def _finetune_output(*args: str, expect: tuple[int, ...] = (0,), capture: bool = True) -> tuple[int, str]:
    """`_finetune`, with the verb's stdout also returned (shown once it ends) when `capture`."""
    cmd = [*isolated_python("llm_finetuning.cli"), *args]
    _say(click.style("$ finetune " + " ".join(args), fg="cyan"))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None, text=True, check=False)
    if capture:
        click.echo(proc.stdout, nl=False)
    if proc.returncode not in expect:
        raise click.ClickException(f"`finetune {' '.join(args)}` exited {proc.returncode} (expected {expect})")
    return proc.returncode, proc.stdout or ""


def gate_note(gate_output: str) -> str:
    """What the demo says about the gate that passed on the shipped records, warnings counted by check: those of
    `reward_inspected` are about the example's own inspection record (sealed without a signature or review
    timings), which a person's `finetune review` of their own brief does not share."""
    from collections import Counter

    warned = Counter(line.split()[1] for line in gate_output.splitlines()
                     if line.startswith("WARN") and len(line.split()) > 1)
    if not warned:
        return "passed"
    parts = []
    if warned.pop("reward_inspected", 0):
        parts.append("reward_inspected: the example's inspection record has no signature or review timings; the "
                     "record `finetune review` writes for your own brief is signed and timed")
    parts += [f"{check} (see above)" for check in sorted(warned)]
    return "passed with warnings: " + "; ".join(parts)


def diagnosis_note(record: Diagnosis | None) -> str:
    """What the demo says about `finetune diagnose`'s verdict (RUN_DIR/diagnosis.json): healthy, what an `info`
    finding means (entropy falling as the policy converges is not the collapse the variant table is for), or
    which failure modes were found."""
    if record is None:
        return "no diagnosis.json (see the report above)"
    failing = [f for f in record.findings if f.is_failure]
    problems = [f"{f.id} ({f.severity})" for f in failing if f.kind == "training"]
    task = [f.id for f in failing if f.kind == "task"]
    infos = [f for f in record.findings if not f.is_failure]
    notes = [f"{f.id}: {f.because}" for f in infos]
    if any(f.id == "converged" for f in infos):
        notes.append("entropy fell because the policy settled on answers that score: convergence, not entropy collapse")
    if task:
        notes.append(f"the task's (what training should reduce): {', '.join(task)}")
    verdict = f"findings: {', '.join(problems)}" if problems else "healthy"
    return "; ".join([verdict, *notes]) + ("; see the report above" if problems else "")


def _diagnosis(run_dir: Path) -> Diagnosis | None:
    """RUN_DIR/diagnosis.json, or None when `finetune diagnose` left none it can use (its report says why)."""
    try:
        return read_diagnosis(run_dir)
    except UnusableInput:
        return None


def _prepare_work_dir(work: Path, steps: int | None) -> Path:
    """Copy the example without its records; return the brief path."""
    src = example_dir()
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(src, work, ignore=shutil.ignore_patterns("records", "runs", "__pycache__"))
    brief_path = work / "brief.yaml"
    if steps is not None:
        text = brief_path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        old = data["grpo"]["max_steps"]
        brief_path.write_text(text.replace(f"max_steps: {old}", f"max_steps: {steps}"), encoding="utf-8")
    return brief_path


def run_demo(work: Path, steps: int | None, eval_prompts: int, k: int) -> DemoSummary:
    started = time.monotonic()
    work = work.resolve()
    run_dir = work / "runs" / "demo"
    summary = DemoSummary(work_dir=work, run_dir=run_dir, eval_prompts=eval_prompts, k=k)
    total = 7

    def stage(i: int, name: str) -> Stage:
        _say("")
        _say(click.style(f"[{i}/{total}] {name}", bold=True))
        s = Stage(name)
        summary.stages.append(s)
        return s

    s = stage(1, "Copy the example (SmolLM2-135M-Instruct, strict JSON reward) without its records")
    t = time.monotonic()
    brief = _prepare_work_dir(work, steps)
    _say(f"  work folder {work} (replaced on the next run; `--out DIR` puts it elsewhere)")
    _say(f"  {brief}")
    s.seconds = time.monotonic() - t

    s = stage(2, "Phase 1 gate without records: it must refuse, naming every missing piece")
    t = time.monotonic()
    code = _finetune("gate", str(brief), expect=(1,))
    s.note = f"rejected (exit {code})"
    s.seconds = time.monotonic() - t

    s = stage(3, "Add the shipped records (baseline + the example's sealed inspection) and gate again")
    t = time.monotonic()
    shutil.copytree(example_dir() / "records", work / "records")
    s.note = gate_note(_finetune_output("gate", str(brief))[1])
    s.seconds = time.monotonic() - t

    s = stage(4, "Render the validated TRL config and run directory")
    t = time.monotonic()
    _finetune("render", str(brief), "-o", str(run_dir))
    s.seconds = time.monotonic() - t

    s = stage(5, "Train: GRPO through `finetune launch` (TRL GRPOTrainer, transformers generation, CPU)")
    t = time.monotonic()
    _finetune("launch", str(run_dir))
    s.seconds = time.monotonic() - t

    s = stage(6, f"Held-out pass@1 before and after: `finetune eval` ({eval_prompts} prompts x {k} samples, "
                 "the baseline's settings)")
    t = time.monotonic()
    code = _finetune("eval", str(run_dir), "--prompts", str(eval_prompts), "--k", str(k), expect=(0, 1))
    summary.evaluation = json.loads((run_dir / EVAL_JSON).read_text(encoding="utf-8"))
    summary.pass_before = summary.evaluation["base"]["pass_at_1"]
    summary.pass_after = summary.evaluation["trained"]["pass_at_1"]
    s.note = f"{summary.pass_before:.1%} -> {summary.pass_after:.1%}" + (" (better beyond noise)" if code == 0 else "")
    s.seconds = time.monotonic() - t

    s = stage(7, "Diagnose the run from its logs, with a plot")
    t = time.monotonic()
    _finetune("diagnose", str(run_dir), "--plot", str(run_dir / "diagnosis.png"), expect=(0, 1))
    s.note = diagnosis_note(_diagnosis(run_dir))
    s.seconds = time.monotonic() - t

    summary.minutes = (time.monotonic() - started) / 60
    (work / "demo-summary.json").write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
    return summary
