"""Launch a rendered run: re-verify it, then train with TRL's GRPOTrainer (the only heavy layer).

This module stays light (the checks `finetune launch` runs before anything heavy): the manifest, the
gate again, and the generation backend being installed. `trainer.py` builds and runs the trainer and
imports torch/transformers/trl inside its functions; `worker.py` is what `accelerate launch` runs in
each process; `detach.py` starts a run in its own session and tells its state (`--detach`, `finetune
status`, `finetune stop`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_finetuning.brief import Brief
from llm_finetuning.errors import EXIT_REJECTED, EXIT_UNUSABLE, UnusableInput
from llm_finetuning.render.manifest import brief_path, load_manifest, verify_manifest
from llm_finetuning.vllm_support import vllm_problem as backend_vllm_problem


class LaunchRefused(Exception):
    """The run may not start; `lines` say why, each with its fix. `exit_code` is 1 (refused) or 2 (unusable)."""

    def __init__(self, lines: list[str], exit_code: int = EXIT_REJECTED) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.exit_code = exit_code


@dataclass
class VerifiedRun:
    """A run directory whose manifest, brief, records and gate verdict all still hold."""

    run_dir: Path
    manifest: dict[str, Any]
    brief: Brief
    warnings: list[str] = field(default_factory=list)

    @property
    def topology(self) -> dict[str, Any]:
        return dict(self.manifest.get("topology", {}))

    @property
    def in_process(self) -> bool:
        t = self.topology
        return int(t.get("train_processes", 1)) == 1 and not t.get("server_gpus") and int(t.get("nodes", 1)) == 1


def vllm_problem(generation: str) -> str | None:
    """A missing vLLM, or one outside the range TRL 1.16 supports, is an error with the install command,
    never a silent switch to transformers."""
    if generation == "transformers":
        return None
    problem = backend_vllm_problem(f"hardware.generation: {generation}")
    if problem is None:
        return None
    return f"{problem}; or set `hardware.generation: transformers` in the brief (slower generation), then render again."


def _gate_problems(brief: Brief, manifest: dict[str, Any]) -> list[str]:
    from llm_finetuning.gate import gate_brief, gate_fingerprint

    report = gate_brief(brief)
    lines = []
    if not report.passed:
        lines = [f"gate: {check.line()}" for check in report.failures]
        lines = lines or ["the gate rejects the brief. Fix: run `finetune gate BRIEF` and follow its fixes"]
    elif gate_fingerprint(brief) != manifest.get("gate_fingerprint"):
        lines.append("the gate's fingerprint differs from the one in manifest.json (the evidence changed since "
                     "rendering). Fix: run `finetune render BRIEF -o RUN_DIR` again")
    return lines


def verify_run(run_dir: Path, check_backend: bool = True) -> VerifiedRun:
    """Manifest, brief, records, gate and (unless `check_backend` is False) vLLM, in that order;
    LaunchRefused naming everything that no longer holds."""
    from llm_finetuning.gate.fastload import load_brief_for_gate

    run_dir = Path(run_dir).resolve()
    try:
        manifest = load_manifest(run_dir)
    except UnusableInput as exc:
        raise LaunchRefused([exc.line()], EXIT_UNUSABLE) from None
    problems = [p.line() for p in verify_manifest(run_dir, manifest)]
    if problems:
        raise LaunchRefused(problems)
    bpath = brief_path(run_dir, manifest)
    try:
        brief, errors = load_brief_for_gate(bpath)
    except UnusableInput as exc:
        raise LaunchRefused([exc.line()], EXIT_UNUSABLE) from None
    if brief is None:
        raise LaunchRefused([e.line() for e in errors], EXIT_UNUSABLE)
    gate = _gate_problems(brief, manifest)
    if gate:
        raise LaunchRefused(gate)
    vllm = vllm_problem(str(brief.data["hardware"]["generation"]))
    if vllm and check_backend:
        raise LaunchRefused([vllm], EXIT_UNUSABLE)
    return VerifiedRun(run_dir, manifest, brief, [vllm] if vllm else [])


def launch_plan(run: VerifiedRun, resume: bool) -> dict[str, Any]:
    """What `finetune launch` will run, as data (printed by `--plan`, checked by tests)."""
    args = ["--resume"] if resume else []
    topo = run.topology
    if run.in_process:
        how = "in-process"
        command = ["finetune", "launch", str(run.run_dir), *args]
    elif int(topo.get("nodes", 1)) > 1:
        how = "sbatch"
        command = ["sbatch", "--chdir", str(run.run_dir), str(run.run_dir / "sbatch.sh"), *args]
    else:
        how = "launch.sh"
        command = ["bash", str(run.run_dir / "launch.sh"), *args]
    return {
        "run_dir": str(run.run_dir),
        "how": how,
        "command": shlex.join(command),
        "generation": topo.get("generation"),
        "train_processes": topo.get("train_processes"),
        "server_gpus": topo.get("server_gpus"),
        "distributed": topo.get("distributed"),
        "nodes": topo.get("nodes"),
        "resume": resume,
        "backend_problems": list(run.warnings),
    }
