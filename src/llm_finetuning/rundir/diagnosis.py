"""RUN_DIR/diagnosis.json as a value: `Diagnosis` and its findings, parsed once where the record is read.

`finetune diagnose` builds it (diagnose/report.py) and writes it through `rundir.write_diagnosis`; the gate verifies
a `grpo.deviation` run's with `records.diagnosis.verify_diagnosis`, and export and the demo quote its findings.
The format (docs/diagnose.md): `{"format": 1, "healthy", "findings": [{"id", "kind", "severity", "steps",
"evidence", "variant", "fix", "brief_edit", "edit_cost", "settings"}], "task", "brief_name", "brief_sha256",
"source", "source_sha256", "steps_logged", "last_step", "ended", "created_at", "llm_finetuning_version"}`.
Pure: the foundation only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from llm_finetuning.errors import UnusableInput
from llm_finetuning.jsonvalue import JsonObject, JsonValue

DIAGNOSIS_FORMAT = 1


class MalformedDiagnosis(ValueError):
    """What makes a JSON object no diagnosis record; `Diagnosis.from_json` names the file with it."""


def _typed(value: JsonValue, kind: type[str] | type[int] | type[bool], key: str) -> None:
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise MalformedDiagnosis(f"field {key!r} is {value!r}; expected {'a string' if kind is str else kind.__name__}")


def _text(data: JsonObject, key: str, where: str = "") -> str | None:
    value = data.get(key)
    _typed(value, str, where + key)
    return value if isinstance(value, str) else None


def _integer(data: JsonObject, key: str) -> int | None:
    value = data.get(key)
    _typed(value, int, key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(data: JsonObject, key: str) -> bool:
    value = data.get(key)
    _typed(value, bool, key)
    return value is True


def _object(data: JsonObject, key: str, where: str) -> JsonObject:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedDiagnosis(f"field {where + key!r} is {value!r}; expected an object")
    return value


@dataclass(frozen=True)
class DiagnosedFinding:
    """One finding as the record holds it: `kind` training (a failure mode of the run unless its severity is
    `info`) or task (what training should reduce); `evidence` its measured numbers and one-line `message`."""

    id: str
    kind: str = "training"
    severity: str = "error"
    steps: tuple[int, ...] = ()
    evidence: Mapping[str, object] = field(default_factory=dict)
    variant: str | None = None
    fix: str = ""
    brief_edit: str | None = None
    edit_cost: str | None = None
    settings: Mapping[str, object] = field(default_factory=dict)  # GRPOConfig values the variant implies

    @property
    def is_failure(self) -> bool:
        """Not an `info` finding (what happened, which is no failure)."""
        return self.severity != "info"

    @property
    def because(self) -> str:
        """The evidence's `because`, else its `message`: why the finding was made, in one line."""
        for key in ("because", "message"):
            value = self.evidence.get(key)
            if isinstance(value, str) and value:
                return value
        return ""

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "kind": self.kind, "severity": self.severity, "steps": list(self.steps),
                "evidence": self.evidence, "variant": self.variant, "fix": self.fix, "brief_edit": self.brief_edit,
                "edit_cost": self.edit_cost, "settings": self.settings}

    @classmethod
    def from_json(cls, data: JsonValue, where: str) -> DiagnosedFinding:
        if not isinstance(data, dict):
            raise MalformedDiagnosis(f"field {where!r} is {data!r}; expected an object")
        finding_id = _text(data, "id", f"{where}.")
        if finding_id is None:
            raise MalformedDiagnosis(f"field '{where}.id' is missing")
        steps = data.get("steps") or []
        if not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
            raise MalformedDiagnosis(f"field '{where}.steps' is {steps!r}; expected a list of steps")
        return cls(finding_id, _text(data, "kind", f"{where}.") or "training",
                   _text(data, "severity", f"{where}.") or "error", tuple(s for s in steps if isinstance(s, int)),
                   _object(data, "evidence", f"{where}."), _text(data, "variant", f"{where}."),
                   _text(data, "fix", f"{where}.") or "", _text(data, "brief_edit", f"{where}."),
                   _text(data, "edit_cost", f"{where}."), _object(data, "settings", f"{where}."))


@dataclass(frozen=True)
class Diagnosis:
    """`finetune diagnose`'s record of a run: whether it was healthy, its findings, and what binds it to the run
    (the brief, the metrics file diagnosed and its sha256, whether the run had ended). A field the record lacks
    is None (False for `healthy` and `ended`): the gate then names what is unknown."""

    healthy: bool
    findings: tuple[DiagnosedFinding, ...]
    task: tuple[str, ...]
    brief_name: str | None = None
    brief_sha256: str | None = None
    source: str | None = None  # the metrics diagnosed, relative to RUN_DIR
    source_sha256: str | None = None
    steps_logged: int | None = None
    last_step: int | None = None
    ended: bool = False
    created_at: str | None = None
    llm_finetuning_version: str | None = None

    def to_json(self) -> dict[str, object]:
        """The record as `finetune diagnose` writes it."""
        return {"healthy": self.healthy, "findings": [f.to_json() for f in self.findings], "task": list(self.task),
                "format": DIAGNOSIS_FORMAT, "brief_name": self.brief_name, "brief_sha256": self.brief_sha256,
                "source": self.source, "source_sha256": self.source_sha256, "steps_logged": self.steps_logged,
                "last_step": self.last_step, "ended": self.ended, "created_at": self.created_at,
                "llm_finetuning_version": self.llm_finetuning_version}

    @classmethod
    def parse(cls, data: JsonObject) -> Diagnosis:
        """The record in `data`; MalformedDiagnosis saying which field is wrong."""
        if data.get("format") != DIAGNOSIS_FORMAT:
            raise MalformedDiagnosis(f"is not a diagnosis of format {DIAGNOSIS_FORMAT}")
        findings, task = data.get("findings") or [], data.get("task") or []
        if not isinstance(findings, list):
            raise MalformedDiagnosis(f"field 'findings' is {findings!r}; expected a list")
        if not isinstance(task, list) or not all(isinstance(t, str) for t in task):
            raise MalformedDiagnosis(f"field 'task' is {task!r}; expected a list of finding ids")
        return cls(_flag(data, "healthy"),
                   tuple(DiagnosedFinding.from_json(f, f"findings[{i}]") for i, f in enumerate(findings)),
                   tuple(t for t in task if isinstance(t, str)), _text(data, "brief_name"),
                   _text(data, "brief_sha256"), _text(data, "source"), _text(data, "source_sha256"),
                   _integer(data, "steps_logged"), _integer(data, "last_step"), _flag(data, "ended"),
                   _text(data, "created_at"), _text(data, "llm_finetuning_version"))

    @classmethod
    def from_json(cls, data: JsonObject, path: str, fix: str) -> Diagnosis:
        """The record read from `path`; UnusableInput naming the file, what is wrong, and `fix`."""
        try:
            return cls.parse(data)
        except MalformedDiagnosis as exc:
            raise UnusableInput(f"{path} {exc}", fix, path) from None
