"""The seal's Ed25519 signature (docs/gate.md, "Signing"): a record sealed through the API is signed by the
session's reviewer key and trusted by its project; a seal recomputed by hand in the documented format, a
signature by another key, an edited signed record and a key nobody trusts all fail; a record sealed before
signing warns, then fails once a trusted-keys file lists a key."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from records_builders import build_inspection, write_brief_folder

from llm_finetuning import locations
from llm_finetuning.errors import Severity
from llm_finetuning.fileio import canonical_json, sha256_bytes
from llm_finetuning.records import inspection, signing
from llm_finetuning.records.inspection import check_inspection, verify_inspection


def kinds(problems: list[Any]) -> list[tuple[str, str, str]]:
    return [(p.id, p.path, p.severity) for p in problems]


def trusted_file(record: Path) -> Path:
    return locations.project_trusted_keys_path(signing.record_project(record))


def reseal_by_hand(path: Path, edit: Any = None, signature: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a forger can do with the documented format: edit the record, recompute seal.sha256 (sha256 of the
    canonical JSON of the record without `seal`) and put any signature block (or none) beside it."""
    record = json.loads(path.read_text())
    if edit:
        edit(record)
    body = {k: v for k, v in record.items() if k != "seal"}
    record["seal"]["sha256"] = sha256_bytes(canonical_json(body))
    record["seal"].pop("signature", None)
    if signature is not None:
        record["seal"]["signature"] = signature
    path.write_text(json.dumps(record))
    return record


def other_key(tmp_path: Path) -> Any:
    key, created = signing.private_key(tmp_path / "other" / "reviewer.ed25519")
    assert created
    return key


def test_a_sealed_record_is_signed_and_its_project_trusts_the_key(brief: Any) -> None:
    path = build_inspection(brief)
    block = json.loads(path.read_text())["seal"]["signature"]
    assert sorted(block) == ["algorithm", "key_id", "public_key", "value"] and block["algorithm"] == "ed25519"
    assert block["key_id"] == signing.key_id(block["public_key"]) and block["key_id"].startswith("SHA256:")
    result = check_inspection(brief, path)
    assert result.problems == []
    assert result.signer is not None and result.signer.who() == f"Ada Reviewer ({block['key_id']})"
    assert trusted_file(path).read_text().splitlines()[-1] == f"ed25519 {block['public_key']} Ada Reviewer"
    assert trusted_file(path) == brief.folder / ".llm-finetuning" / "trusted-keys"  # in no project: the brief's folder
    key = locations.private_key_path()
    assert key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert str(key).startswith(os.environ[locations.KEY_DIR_ENV])  # the session's folder, never the home


def test_a_new_key_is_made_private_and_a_readable_one_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "mine" / "key"
    _, created = signing.private_key(where)
    assert created and stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert signing.private_key(where)[1] is False
    where.chmod(0o644)
    try:
        signing.private_key(where)
    except signing.KeyProblem as exc:
        assert "may be read by others (mode 644)" in exc.message and exc.fix == f"run `chmod 600 {where}`"
    else:
        raise AssertionError("a key readable by others was used")


def test_a_hand_computed_seal_without_signature_fails_where_a_key_is_trusted(brief: Any) -> None:
    path = build_inspection(brief)
    reseal_by_hand(path, lambda r: r["verdicts"]["s000"].update(verdict="agree", note="forged"))
    problems = verify_inspection(brief, path)[1]
    assert kinds(problems) == [("unsigned", "seal", Severity.ERROR)]
    assert str(trusted_file(path).relative_to(brief.folder)) in problems[0].message


def test_a_seal_signed_with_another_key_is_untrusted(brief: Any, tmp_path: Path) -> None:
    path = build_inspection(brief)
    forger = other_key(tmp_path)
    record = json.loads(path.read_text())
    record["verdicts"]["s000"]["note"] = "forged"
    body = {k: v for k, v in record.items() if k != "seal"}
    forged = signing.sign(forger, inspection.FORMAT, sha256_bytes(canonical_json(body)))
    reseal_by_hand(path, lambda r: r["verdicts"]["s000"].update(note="forged"), forged)
    [problem] = verify_inspection(brief, path)[1]
    assert (problem.id, problem.path) == ("untrusted_key", "seal")
    assert forged["key_id"] in problem.message and "no trusted-keys file lists" in problem.message
    assert f"finetune keys trust {forged['public_key']} --project" in problem.fix


def test_an_edited_signed_record_fails_even_when_resealed(brief: Any) -> None:
    path = build_inspection(brief)
    signature = json.loads(path.read_text())["seal"]["signature"]
    reseal_by_hand(path, lambda r: r["review"].update(reviewer="Someone Else"), signature)
    [problem] = verify_inspection(brief, path)[1]
    assert (problem.id, problem.path) == ("tampered", "seal") and "does not verify" in problem.message
    record = json.loads(path.read_text())  # an edit left under the old seal is named by part, as before
    record["review"]["reviewer"] = "Ada"
    path.write_text(json.dumps(record))
    assert kinds(verify_inspection(brief, path)[1]) == [("tampered", "review", Severity.ERROR)]


def test_a_record_sealed_before_signing_warns_then_fails_once_a_key_is_trusted(
        tmp_path: Path, session_user_trusted_keys: Path) -> None:
    from records_builders import loaded

    brief = loaded(write_brief_folder(tmp_path / "legacy"))
    path = build_inspection(brief)
    trusted_file(path).unlink()  # as before signing: no trusted-keys file anywhere
    reseal_by_hand(path)  # the same seal, without its signature block
    [warning] = verify_inspection(brief, path)[1]
    assert (warning.id, warning.severity) == ("unsigned", Severity.WARNING) and "finetune review" in warning.fix
    assert signing.add_trusted_key(session_user_trusted_keys, signing.public_key_of(other_key(tmp_path)), "Bo")
    assert kinds(verify_inspection(brief, path)[1]) == [("unsigned", "seal", Severity.ERROR)]


def test_a_record_outside_the_briefs_project_brings_no_trusted_keys(tmp_path: Path) -> None:
    """A brief pointed at a record in a folder of the agent's choosing: that folder's trusted keys do not count."""
    from records_builders import BRIEF, loaded

    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    text = BRIEF.replace("\nrewards:", f"\nrecords:\n  inspection: {elsewhere}/inspection.json\nrewards:", 1)
    brief = loaded(write_brief_folder(project, text))
    path = build_inspection(brief)  # signed, and trusted by the trusted-keys file of elsewhere's project
    assert trusted_file(path) == tmp_path / ".llm-finetuning" / "trusted-keys" and trusted_file(path).is_file()
    [problem] = verify_inspection(brief, path)[1]
    assert problem.id == "untrusted_key" and "outside the brief's project" in problem.message


def test_the_documented_format_verifies_a_signature_without_our_code(brief: Any) -> None:
    """docs/gate.md states what is signed; checking a sealed record by that text alone, with the cryptography
    package directly, must succeed."""
    import base64

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    docs = (Path(__file__).resolve().parents[2] / "docs" / "gate.md").read_text(encoding="utf-8")
    assert "Ed25519 over the UTF-8 bytes\nof `llm-finetuning/inspection@1 sha256:<seal.sha256>`" in docs
    record = json.loads(build_inspection(brief).read_text())
    block = record["seal"]["signature"]
    body = {k: v for k, v in record.items() if k != "seal"}
    digest = sha256_bytes(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    assert digest == record["seal"]["sha256"]
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(block["public_key"]))
    public.verify(base64.b64decode(block["value"]), f"llm-finetuning/inspection@1 sha256:{digest}".encode())


def test_an_unsigned_seal_moved_outside_the_project_still_fails(tmp_path: Path) -> None:
    """The record moved to a folder in another project (a `.git` of its own, no trusted keys) and resealed by
    hand without a signature: the keys of the brief's project still speak for it, so the seal counts for nothing."""
    from records_builders import BRIEF, loaded

    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    brief = loaded(write_brief_folder(project, BRIEF))
    signed = build_inspection(brief)  # the person's signed review: the project's trusted keys list the key
    assert trusted_file(signed) == project / ".llm-finetuning" / "trusted-keys"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".git").mkdir(parents=True)
    for path in signed.parent.glob("inspection*"):
        (elsewhere / path.name).write_bytes(path.read_bytes())
    text = (project / "brief.yaml").read_text().replace(
        "\nrewards:", f"\nrecords:\n  inspection: {elsewhere}/inspection.json\nrewards:", 1)
    (project / "brief.yaml").write_text(text)
    moved = loaded(project / "brief.yaml")
    reseal_by_hand(elsewhere / "inspection.json", lambda r: r["verdicts"]["s000"].update(note="forged"))
    problems = verify_inspection(moved, elsewhere / "inspection.json")[1]
    assert kinds(problems) == [("unsigned", "seal", Severity.ERROR)], problems
    assert signing.trust_for(elsewhere / "inspection.json", moved.folder).project == project
