"""Launch a rendered run: re-verify it, then train with TRL's GRPOTrainer (the only heavy layer).

This module stays light (the checks `finetune launch` runs before anything heavy): the manifest, the
gate again, the run's files against a fresh render of the brief and records (so an edited file whose
sha256 was recomputed in manifest.json is still refused), and the generation backend being installed. `trainer.py` builds and runs the trainer and
imports torch/transformers/trl inside its functions; `worker.py` is what `accelerate launch` runs in
each process; `detach.py` starts a run in its own session and tells its state (`--detach`, `finetune
status`, `finetune stop`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from llm_finetuning.brief import Brief
from llm_finetuning.errors import (
    EXIT_REJECTED,
    EXIT_UNUSABLE,
    Problem,
    ProblemError,
    Severity,
    UnusableInput,
    sort_problems,
)
from llm_finetuning.rundir import LAUNCH_SCRIPT, SBATCH_SCRIPT
from llm_finetuning.rundir.manifest import LaunchMode, Manifest, Topology, load_manifest, verify_manifest
from llm_finetuning.vllm_support import vllm_problem as backend_vllm_problem

if TYPE_CHECKING:
    from llm_finetuning.gate.result import GateReport
    from llm_finetuning.rewards.code import VerifiedCode


class LaunchRefused(ProblemError):
    """The run may not start: every Problem found (each with its fix), what they concern (`why`, for the
    header), and `exit_code` 1 (refused) or 2 (unusable)."""

    def __init__(self, problems: list[Problem], exit_code: int = EXIT_REJECTED, why: str = "") -> None:
        super().__init__(problems, exit_code)
        self.why = why

    def header(self, subject: Path | str) -> str:
        return f"finetune launch: {subject} is refused{f' ({self.why})' if self.why else ''}:"


@dataclass
class VerifiedRun:
    """A run directory whose manifest, brief, records and gate verdict all still hold."""

    run_dir: Path
    manifest: Manifest
    brief: Brief
    warnings: list[Problem] = field(default_factory=list)
    # the custom reward, tool and environment source bytes read here and checked against the sha256 the run's
    # records bind: the trainer runs these bytes, whatever the files hold later
    code: VerifiedCode | None = None

    @property
    def topology(self) -> Topology:
        return self.manifest.run_topology()

    @property
    def in_process(self) -> bool:
        return self.topology.launch_mode == "in-process"


def vllm_problem(generation: str) -> Problem | None:
    """A missing vLLM, or one outside the range TRL 1.16 supports, is an error with the install command,
    never a silent switch to transformers."""
    if generation == "transformers":
        return None
    problem = backend_vllm_problem(generation, "hardware.generation")
    if problem is None:
        return None
    return replace(problem, fix=f"{problem.fix}; or set `hardware.generation: transformers` in the brief (slower "
                   "generation), then render again.")


def _gate_problems(brief: Brief, manifest: Manifest) -> tuple[list[Problem], GateReport]:
    """The gate's failures now (each a Problem with its check's id), or a fingerprint that moved; and the report."""
    from llm_finetuning.gate import gate_brief

    # verify_manifest found each record's sha256 equal to the manifest's: the gate takes those
    verified = {key: rec.sha256 for key, rec in manifest.records.items()}
    report = gate_brief(brief, record_sha256=verified)
    if not report.passed:
        return [p for p in report.problems if p.severity == Severity.ERROR], report
    if report.fingerprint != manifest.gate_fingerprint:
        return [Problem("gate_fingerprint", "", "the gate's fingerprint differs from the one in manifest.json (the "
                        "evidence changed since rendering).", "run `finetune render BRIEF -o RUN_DIR` again")], report
    return [], report


def verify_run(run_dir: Path, check_backend: bool = True) -> VerifiedRun:
    """Manifest, brief, records, gate, the run's files against a fresh render of the brief and records, and
    (unless `check_backend` is False) vLLM, in that order; LaunchRefused naming everything that no longer holds."""
    from llm_finetuning.gate.fastload import load_brief_for_gate

    run_dir = Path(run_dir).resolve()
    try:
        manifest = load_manifest(run_dir)
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE) from None
    problems = verify_manifest(run_dir, manifest)
    if problems:
        raise LaunchRefused(problems, why="its files no longer match manifest.json")
    bpath = manifest.brief_path(run_dir)
    try:
        brief, errors = load_brief_for_gate(bpath)
    except UnusableInput as exc:
        raise LaunchRefused([exc.problem], EXIT_UNUSABLE) from None
    if brief is None:
        raise LaunchRefused(sort_problems(errors), EXIT_UNUSABLE, why=f"its brief {bpath} is no longer valid")
    gate, report = _gate_problems(brief, manifest)
    if gate:
        raise LaunchRefused(gate, why="the gate rejects its brief now")
    from llm_finetuning.render import render_differences

    differs = render_differences(brief, run_dir, str(report.fingerprint), report.render_advice()[0],
                                 report.record_sha256)
    if differs:
        raise LaunchRefused(differs, why="its files are not what `finetune render` makes of its brief and records now")
    vllm = vllm_problem(brief.hardware.generation)
    if vllm and check_backend:
        raise LaunchRefused([vllm], EXIT_UNUSABLE)
    return VerifiedRun(run_dir, manifest, brief, [replace(vllm, severity=Severity.WARNING)] if vllm else [],
                       verified_code(brief, run_dir, manifest))


def verified_code(brief: Brief, run_dir: Path, manifest: Manifest) -> VerifiedCode:
    """The brief's custom reward, tool and environment code, read now and refused (LaunchRefused) where its bytes
    are not those the run's records bind: what the trainer runs (`rewards.code.VerifiedCode`)."""
    from llm_finetuning import reward_registry as registry
    from llm_finetuning.rewards.code import CodeChanged, VerifiedCode

    refs = [r.fn for r in brief.rewards if registry.is_custom(r.fn)]
    refs += [ref for _, ref in brief.episode.code_refs()] if brief.episode is not None else []
    try:
        return VerifiedCode.read(refs, brief.folder, bound_code_sha256(run_dir, manifest))
    except CodeChanged as exc:
        raise LaunchRefused(exc.problems, why="its reward or tool code changed during verification") from None


def bound_code_sha256(run_dir: Path, manifest: Manifest) -> dict[str, str]:
    """File label -> sha256 of every reward, tool and environment source file the run's records bind (the
    inspection record's bindings, else the baseline's), read from record bytes whose sha256 is the manifest's."""
    import json

    from llm_finetuning.fileio import sha256_bytes

    for key in ("inspection", "baseline"):
        rec = manifest.records.get(key)
        if rec is None:
            continue
        path = (run_dir / rec.path).resolve()
        data = path.read_bytes()
        if sha256_bytes(data) != rec.sha256:
            raise LaunchRefused([Problem("record_changed", f"records.{key}", f"{path} changed after rendering.",
                                         "run `finetune gate` and render again")])
        bindings = json.loads(data).get("bindings") or {}
        code: dict[str, str] = {}
        for bound in [*(bindings.get("rewards") or []), bindings.get("episode") or {}]:
            code.update({str(k): str(v) for k, v in (bound.get("code") or {}).items()})
        return code
    return {}


class LaunchPlan(TypedDict):
    """What `finetune launch` will run: how, the command, the run's topology, and any backend problem."""

    run_dir: str
    how: LaunchMode
    command: str
    generation: str
    train_processes: int
    server_gpus: int
    distributed: str
    nodes: int
    resume: bool
    backend_problems: list[str]


def launch_plan(run: VerifiedRun, resume: bool) -> LaunchPlan:
    """What `finetune launch` will run, as data (printed by `--plan`, checked by tests)."""
    args = ["--resume"] if resume else []
    topo = run.topology
    how = topo.launch_mode
    if how == "in-process":
        command = ["finetune", "launch", str(run.run_dir), *args]
    elif how == "sbatch":
        command = ["sbatch", "--chdir", str(run.run_dir), str(run.run_dir / SBATCH_SCRIPT), *args]
    else:
        command = ["bash", str(run.run_dir / LAUNCH_SCRIPT), *args]
    return {
        "run_dir": str(run.run_dir),
        "how": how,
        "command": shlex.join(command),
        "generation": topo.generation,
        "train_processes": topo.train_processes,
        "server_gpus": topo.server_gpus,
        "distributed": topo.distributed,
        "nodes": topo.nodes,
        "resume": resume,
        "backend_problems": [p.line() for p in run.warnings],
    }
