"""Through `finetune gate`: the pass names who signed the review; a record re-sealed by hand in the documented
format (sha256 only, as anyone can compute it) is rejected where the project trusts a key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.fileio import canonical_json, sha256_bytes


def inspected(brief: Path) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["gate", str(brief), "--json"])
    report = json.loads(result.stdout)
    return result.exit_code, [c for c in report["checks"] if c["id"] == "reward_inspected"]


def test_the_pass_names_the_signer_and_a_hand_made_seal_fails(make_brief: Any) -> None:
    brief = make_brief("passing")
    record_path = brief.parent / "records" / "inspection.json"
    key_id = json.loads(record_path.read_text())["seal"]["signature"]["key_id"]
    code, checks = inspected(brief)
    assert code == 0 and checks[0]["verdict"] == "pass"
    assert not any(c["reason"].startswith("unsigned") for c in checks)
    assert checks[0]["reason"].endswith(f"sealed and current; signed by Ada Reviewer ({key_id})")

    record = json.loads(record_path.read_text())
    record["verdicts"]["s000"]["note"] = "looks fine to me"
    record["seal"] = {"algorithm": "sha256", "sha256": sha256_bytes(canonical_json(
        {k: v for k, v in record.items() if k != "seal"}))}
    record_path.write_text(json.dumps(record))
    code, checks = inspected(brief)
    assert code == 1 and [c["verdict"] for c in checks] == ["fail"]
    assert checks[0]["reason"].startswith("unsigned: the seal has no signature")
