"""RUN_DIR/manifest.json: its one parser, its write, the topology it stores, and its verification against the files it binds.

The manifest binds a run directory to its brief, records, gate fingerprint and rendered files by sha256
(`render.manifest` builds it from the brief and the plan). `finetune launch` re-reads it and refuses a run whose
brief, records or rendered files changed since rendering, naming each one as a Problem (id `missing_file`,
`edited_file`, `brief_changed` or `record_changed`; path the rendered file, `brief` or `records.<key>`).
Pure: hashlib and json only (the comparison is `integrity`'s, shared with the plugin's guard).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_text, read_json_or_none
from llm_finetuning.integrity import Mismatch, manifest_mismatches
from llm_finetuning.rundir import MANIFEST

MANIFEST_FORMAT = 1
LaunchMode = Literal["in-process", "script", "sbatch"]


@dataclass(frozen=True)
class Topology:
    """Where the processes go: CPU, one GPU, DDP/ZeRO/FSDP on several, a vLLM server on its own GPUs."""

    cpu: bool
    nodes: int
    gpus_per_node: int
    generation: str
    server_gpus: int  # GPUs given to `trl vllm-serve` (0 without a server)
    train_machines: int
    train_processes: int  # accelerate's num_processes (all training machines together)
    distributed: str  # single | ddp | zero2 | zero3 | fsdp2
    mixed_precision: str  # no | bf16 | fp16

    @property
    def processes_per_machine(self) -> int:
        return self.train_processes // max(self.train_machines, 1)

    @property
    def server_shares_node(self) -> bool:
        """vLLM server and trainers on the same (single) node, each on their own GPUs."""
        return self.server_gpus > 0 and self.nodes == 1

    @property
    def train_gpu_ids(self) -> str:
        """CUDA_VISIBLE_DEVICES for the trainers on a node that also runs the server, else empty."""
        if not self.server_shares_node:
            return ""
        return ",".join(str(i) for i in range(self.server_gpus, self.gpus_per_node))

    @property
    def server_gpu_ids(self) -> str:
        return ",".join(str(i) for i in range(self.server_gpus))

    @property
    def launch_mode(self) -> LaunchMode:
        """How `finetune launch` starts the run: in its own process (one training process, no server), through
        the rendered launch script (several processes or a server on one node), or through sbatch (nodes)."""
        if self.nodes > 1:
            return "sbatch"
        if self.train_processes == 1 and self.server_gpus == 0:
            return "in-process"
        return "script"

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu, "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
            "generation": self.generation, "server_gpus": self.server_gpus,
            "train_machines": self.train_machines, "train_processes": self.train_processes,
            "distributed": self.distributed, "mixed_precision": self.mixed_precision,
        }

    @classmethod
    def from_json(cls, value: Any) -> Topology:
        """The topology manifest.json stores (`to_json`'s output); UnusableInput when it is not one."""
        try:
            return cls(bool(value["cpu"]), int(value["nodes"]), int(value["gpus_per_node"]), str(value["generation"]),
                       int(value["server_gpus"]), int(value["train_machines"]), int(value["train_processes"]),
                       str(value["distributed"]), str(value["mixed_precision"]))
        except (TypeError, KeyError, ValueError):
            raise UnusableInput(f"{MANIFEST}'s topology is not one `finetune render` writes",
                                "render the run again") from None


def has_manifest(folder: Path) -> bool:
    """`folder` is a run directory `finetune render` wrote after a passing gate (it has manifest.json)."""
    return (Path(folder) / MANIFEST).is_file()


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """RUN_DIR/manifest.json as written, or None when absent or unreadable: for the readers that go on without it
    (diagnose, the gate's deviation run). `load_manifest` is the strict reading."""
    return read_json_or_none(Path(run_dir) / MANIFEST)


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """RUN_DIR's manifest, of this format, naming its brief; UnusableInput saying what to do otherwise."""
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise UnusableInput(f"{run_dir} is not a directory", "give the RUN_DIR written by `finetune render BRIEF -o RUN_DIR`")
    if not path.is_file():
        raise UnusableInput(f"{path} does not exist", "render the run first: `finetune render BRIEF -o RUN_DIR`")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UnusableInput(f"{path} is not readable JSON ({exc})", "render the run again") from None
    if (not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT or "files" not in manifest
            or brief_path(run_dir, manifest) is None):
        raise UnusableInput(f"{path} is not a manifest of format {MANIFEST_FORMAT}", "render the run again")
    return manifest


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> Path:
    """Write RUN_DIR/manifest.json atomically, keys sorted (render is deterministic)."""
    path = Path(run_dir) / MANIFEST
    atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n", 0o644)
    return path


def brief_path(run_dir: Path, manifest: dict[str, Any]) -> Path | None:
    """The brief the run was rendered from, as the manifest names it (None when it names none)."""
    info = manifest.get("brief")
    relative = info.get("path") if isinstance(info, dict) else None
    return (Path(run_dir) / relative).resolve() if isinstance(relative, str) else None


def brief_sha256(manifest: dict[str, Any]) -> str | None:
    """The sha256 the brief had when the run was rendered."""
    info = manifest.get("brief")
    digest = info.get("sha256") if isinstance(info, dict) else None
    return digest if isinstance(digest, str) else None


def verify_manifest(run_dir: Path, manifest: dict[str, Any]) -> list[Problem]:
    """Every rendered file, the brief and each record must still have the sha256 written at render time;
    one Problem for each that does not (`manifest` as `load_manifest` returned it). What is compared is
    `integrity.manifest_mismatches`, which the plugin's guard runs too."""
    rerender = "change the brief if needed and run `finetune render BRIEF -o RUN_DIR` again"
    info = manifest.get("brief")
    mismatches = manifest_mismatches(Path(run_dir), manifest["files"], str(info.get("path") if isinstance(info, dict) else ""),
                                     str(brief_sha256(manifest)), manifest.get("records", {}))
    return [_problem(m, rerender) for m in mismatches]


def _problem(m: Mismatch, rerender: str) -> Problem:
    if m.kind == "missing_file":
        return Problem("missing_file", m.key, "is missing from the run directory.", rerender)
    if m.kind == "edited_file":
        return Problem("edited_file", m.key, "was edited after rendering (its sha256 differs from manifest.json); "
                       "rendered files are not edited by hand.", rerender)
    if m.kind == "brief_missing":
        return Problem("missing_file", "brief", f"{m.path} no longer exists.", "render the run from its brief again")
    if m.kind == "brief_changed":
        return Problem("brief_changed", "brief", f"{m.path} changed after rendering.", f"run the gate and {rerender}")
    return Problem("record_changed", m.key, f"{m.path} changed after rendering.", f"run `finetune gate` and {rerender}")
