"""The run directory's records are parsed once into values (`Manifest`, `Diagnosis`) whose writers give back the
JSON the formats document, and a record they cannot use is refused naming the file, the field and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_finetuning.errors import UnusableInput
from llm_finetuning.rundir.diagnosis import Diagnosis
from llm_finetuning.rundir.manifest import Manifest, Topology, load_manifest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.mark.parametrize("case", sorted(p.parent.name for p in GOLDEN.glob("*/manifest.json")))
def test_a_rendered_manifest_parses_and_writes_back_the_same_json(case: str) -> None:
    data = json.loads((GOLDEN / case / "manifest.json").read_text())
    manifest = Manifest.parse(data)
    assert manifest.to_json() == data
    assert isinstance(manifest.topology, Topology) and manifest.files and manifest.gate_fingerprint


def test_a_manifest_of_the_wrong_shape_names_the_field(tmp_path: Path) -> None:
    data = json.loads((GOLDEN / "cpu" / "manifest.json").read_text())
    for field, value, says in (("files", ["x"], "field 'files'"), ("brief", {"sha256": "x"}, "field 'path'"),
                               ("topology", {"cpu": "yes"}, "topology is not one"), ("format", 2, "format 1")):
        (tmp_path / "manifest.json").write_text(json.dumps({**data, field: value}))
        with pytest.raises(UnusableInput) as caught:
            load_manifest(tmp_path)
        assert says in caught.value.message and caught.value.fix, caught.value.message
        assert "manifest.json" in caught.value.message or field == "topology"


def test_a_diagnosis_parses_and_writes_back_the_same_json() -> None:
    record = {"format": 1, "healthy": False, "task": ["tool_failures"], "brief_name": "b", "brief_sha256": "f" * 64,
              "source": "metrics.jsonl", "source_sha256": "0" * 64, "steps_logged": 40, "last_step": 40,
              "ended": True, "created_at": "2026-01-01T00:00:00Z", "llm_finetuning_version": "0.1.0",
              "findings": [{"id": "kl_blowup", "kind": "training", "severity": "error", "steps": [3, 4],
                            "evidence": {"message": "KL spiked", "kl_max": 9.5}, "variant": None, "fix": "lower it",
                            "brief_edit": "grpo:\n  learning_rate: 1e-7\n", "edit_cost": "none",
                            "settings": {"beta": 0.04}}]}
    diagnosis = Diagnosis.parse(record)
    assert diagnosis.to_json() == record
    assert [f.id for f in diagnosis.findings if f.is_failure] == ["kl_blowup"]
    assert diagnosis.findings[0].because == "KL spiked"


@pytest.mark.parametrize(("change", "says"), [({"format": 2}, "not a diagnosis of format 1"),
                                              ({"healthy": "yes"}, "field 'healthy'"),
                                              ({"findings": [{"kind": "task"}]}, "findings[0].id"),
                                              ({"findings": {"id": "x"}}, "field 'findings'")])
def test_a_diagnosis_of_the_wrong_shape_names_the_field(change: dict[str, object], says: str) -> None:
    with pytest.raises(UnusableInput) as caught:
        Diagnosis.from_json({"format": 1, "healthy": True, "findings": [], **change}, "run/diagnosis.json",
                            "run `finetune diagnose run` again")
    assert caught.value.message.startswith("run/diagnosis.json ") and says in caught.value.message
    assert caught.value.fix == "run `finetune diagnose run` again"
