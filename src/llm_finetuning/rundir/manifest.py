"""RUN_DIR/manifest.json: its one parser, its write, the topology it stores, and its verification against the files it binds.

The manifest binds a run directory to its brief, records, gate fingerprint and rendered files by sha256
(`render.manifest` builds it from the brief and the plan). `finetune launch` re-reads it and refuses a run whose
brief, records or rendered files changed since rendering, naming each one as a Problem (id `missing_file`,
`edited_file`, `brief_changed` or `record_changed`; path the rendered file, `brief` or `records.<key>`).
Pure: hashlib and json only (the comparison is `integrity`'s, shared with the plugin's guard).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_text, read_json_object
from llm_finetuning.integrity import Mismatch, manifest_mismatches
from llm_finetuning.jsonvalue import JsonObject, JsonValue
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

    def to_json(self) -> JsonObject:
        return {
            "cpu": self.cpu, "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
            "generation": self.generation, "server_gpus": self.server_gpus,
            "train_machines": self.train_machines, "train_processes": self.train_processes,
            "distributed": self.distributed, "mixed_precision": self.mixed_precision,
        }

    @classmethod
    def from_json(cls, value: JsonValue) -> Topology:
        """The topology manifest.json stores (`to_json`'s output); UnusableInput when it is not one."""
        try:
            data = _object(value, "topology")
            return cls(_flag(data, "cpu"), _count(data, "nodes"), _count(data, "gpus_per_node"),
                       _text(data, "generation"), _count(data, "server_gpus"), _count(data, "train_machines"),
                       _count(data, "train_processes"), _text(data, "distributed"), _text(data, "mixed_precision"))
        except MalformedManifest:
            raise UnusableInput(f"{MANIFEST}'s topology is not one `finetune render` writes",
                                "render the run again") from None


class MalformedManifest(ValueError):
    """A manifest.json field that is missing or of the wrong type (the message names it)."""


def _object(value: JsonValue, key: str) -> JsonObject:
    if not isinstance(value, dict):
        raise MalformedManifest(f"field {key!r} is missing or not an object")
    return value


def _flag(data: JsonObject, key: str) -> bool:
    value = data.get(key)
    if not isinstance(value, bool):
        raise MalformedManifest(f"field {key!r} is {value!r}; expected true or false")
    return value


def _count(data: JsonObject, key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedManifest(f"field {key!r} is {value!r}; expected an integer")
    return value


def _text(data: JsonObject, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise MalformedManifest(f"field {key!r} is {value!r}; expected a string")
    return value


def _text_or_none(data: JsonObject, key: str) -> str | None:
    return None if data.get(key) is None else _text(data, key)


@dataclass(frozen=True)
class RecordBinding:
    """A record the run is bound to: its path relative to RUN_DIR and its sha256 at render time (None: absent)."""

    path: str
    sha256: str | None


@dataclass(frozen=True)
class Manifest:
    """RUN_DIR/manifest.json, parsed once where it is read: the brief (its path relative to RUN_DIR and sha256),
    the gate's fingerprint, the records and rendered files with their sha256, and the topology. `render.manifest`
    builds it; `to_json` is the file's content."""

    name: str | None
    brief_relative: str  # the brief's path, relative to RUN_DIR
    brief_sha256: str | None
    files: Mapping[str, str]  # rendered file -> sha256
    records: Mapping[str, RecordBinding] = field(default_factory=dict)
    gate_fingerprint: str | None = None
    topology: Topology | None = None  # None: not stored (launch refuses such a run)
    llm_finetuning_version: str | None = None

    def brief_path(self, run_dir: Path) -> Path:
        """The brief the run was rendered from."""
        return (Path(run_dir) / self.brief_relative).resolve()

    def run_topology(self) -> Topology:
        """The topology; UnusableInput when the manifest stores none."""
        if self.topology is None:
            raise UnusableInput(f"{MANIFEST}'s topology is not one `finetune render` writes", "render the run again")
        return self.topology

    def to_json(self) -> JsonObject:
        """The manifest's JSON object, as `finetune render` writes it."""
        out: JsonObject = {
            "format": MANIFEST_FORMAT,
            "llm_finetuning_version": self.llm_finetuning_version,
            "name": self.name,
            "brief": {"path": self.brief_relative, "sha256": self.brief_sha256},
            "gate_fingerprint": self.gate_fingerprint,
            "records": {key: {"path": r.path, "sha256": r.sha256} for key, r in self.records.items()},
            "files": dict(self.files),
        }
        if self.topology is not None:
            out["topology"] = self.topology.to_json()
        return out

    @classmethod
    def parse(cls, data: JsonObject) -> Manifest:
        """The manifest in `data`; MalformedManifest naming the field that is wrong."""
        if data.get("format") != MANIFEST_FORMAT:
            raise MalformedManifest(f"is not a manifest of format {MANIFEST_FORMAT}")
        brief, files = _object(data.get("brief"), "brief"), _object(data.get("files"), "files")
        records = _object(data.get("records", {}), "records")
        if not all(isinstance(v, str) for v in files.values()):
            raise MalformedManifest("field 'files' maps a file to something other than its sha256")
        bound = {}
        for key, value in records.items():
            record = _object(value, f"records.{key}")
            bound[key] = RecordBinding(_text(record, "path"), _text_or_none(record, "sha256"))
        topology = data.get("topology")
        return cls(_text_or_none(data, "name"), _text(brief, "path"), _text_or_none(brief, "sha256"),
                   {name: digest for name, digest in files.items() if isinstance(digest, str)}, bound,
                   _text_or_none(data, "gate_fingerprint"),
                   Topology.from_json(topology) if topology is not None else None,
                   _text_or_none(data, "llm_finetuning_version"))

    @classmethod
    def from_json(cls, data: JsonObject, path: Path | str) -> Manifest:
        """The manifest read from `path`; UnusableInput naming the file, the field, and the fix."""
        try:
            return cls.parse(data)
        except MalformedManifest as exc:
            raise UnusableInput(f"{path} {exc}", "render the run again", str(path)) from None


def has_manifest(folder: Path) -> bool:
    """`folder` is a run directory `finetune render` wrote after a passing gate (it has manifest.json)."""
    return (Path(folder) / MANIFEST).is_file()


def read_manifest(run_dir: Path) -> Manifest | None:
    """RUN_DIR/manifest.json, or None when absent, unreadable or not a manifest: for the readers that go on without
    it (diagnose, the gate's deviation run, a render into RUN_DIR). `load_manifest` is the strict reading."""
    try:
        return load_manifest(run_dir)
    except UnusableInput:
        return None


def load_manifest(run_dir: Path) -> Manifest:
    """RUN_DIR's manifest, of this format, naming its brief; UnusableInput saying what to do otherwise."""
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise UnusableInput(f"{run_dir} is not a directory", "give the RUN_DIR written by `finetune render BRIEF -o RUN_DIR`")
    if not path.is_file():
        raise UnusableInput(f"{path} does not exist", "render the run first: `finetune render BRIEF -o RUN_DIR`")
    return Manifest.from_json(read_json_object(path, "run manifest", "render the run again"), path)


def write_manifest(run_dir: Path, manifest: Manifest) -> Path:
    """Write RUN_DIR/manifest.json atomically, keys sorted (render is deterministic)."""
    path = Path(run_dir) / MANIFEST
    atomic_write_text(path, json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n", 0o644)
    return path


def brief_path(run_dir: Path, manifest: Manifest) -> Path:
    """The brief the run was rendered from, as the manifest names it."""
    return manifest.brief_path(run_dir)


def brief_sha256(manifest: Manifest) -> str | None:
    """The sha256 the brief had when the run was rendered."""
    return manifest.brief_sha256


def verify_manifest(run_dir: Path, manifest: Manifest) -> list[Problem]:
    """Every rendered file, the brief and each record must still have the sha256 written at render time;
    one Problem for each that does not (`manifest` as `load_manifest` returned it). What is compared is
    `integrity.manifest_mismatches`, which the plugin's guard runs too."""
    rerender = "change the brief if needed and run `finetune render BRIEF -o RUN_DIR` again"
    records: JsonObject = {key: {"path": r.path, "sha256": r.sha256} for key, r in manifest.records.items()}
    mismatches = manifest_mismatches(Path(run_dir), dict(manifest.files), manifest.brief_relative,
                                     str(manifest.brief_sha256), records)
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
