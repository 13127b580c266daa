"""`finetune keys`: show the reviewer's public key, trust a teammate's in a project, rotate the key with the
old one still trusted until its line is removed by hand (docs/gate.md, "Signing")."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.records import signing


def keys(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["keys", *args], catch_exceptions=False, env={"GIT_CONFIG_NOSYSTEM": "1"})
    return result.exit_code, result.stdout, result.stderr


def test_show_trust_and_rotate(tmp_path: Path) -> None:
    key = tmp_path / "keys" / "reviewer.ed25519"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    trusted = project / ".llm-finetuning" / "trusted-keys"

    code, _, err = keys("--key", str(key))
    assert code == 2 and f"no private key at {key}" in err and not key.exists()  # show makes nothing

    code, out, _ = keys("rotate", "--key", str(key), "--project", str(project), "--name", "Ada")
    first = signing.public_key_of(signing.private_key(key, create=False)[0])
    assert code == 0 and f"new key {signing.key_id(first)} at {key}; trusted in {trusted}" in out
    assert [k.public_key for k in signing.read_trusted_keys(trusted)[0]] == [first]

    code, out, _ = keys("show", "--key", str(key))
    line, key_id, where = out.splitlines()
    assert code == 0 and line.startswith(f"ed25519 {first}") and key_id == f"key id: {signing.key_id(first)}"
    assert where.startswith(f"private key: {key}")

    code, out, _ = keys("rotate", "--key", str(key), "--project", str(project), "--name", "Ada")
    second = signing.public_key_of(signing.private_key(key, create=False)[0])
    assert code == 0 and second != first
    assert f"the old key {signing.key_id(first)} is still trusted" in out
    assert [(k.public_key, k.comment) for k in signing.read_trusted_keys(trusted)[0]] == [(first, "Ada"), (second, "Ada")]

    teammate = signing.public_key_of(signing.private_key(tmp_path / "bo" / "k")[0])
    code, out, _ = keys("trust", f"ed25519 {teammate} Bo Builder", "--project", str(project / "sub"))
    assert code == 0 and f"added to {trusted}" in out  # the project of the folder given: the one with .git
    assert signing.read_trusted_keys(trusted)[0][-1].comment == "Bo Builder"
    assert keys("trust", teammate, "--project", str(project))[1].startswith(f"{signing.key_id(teammate)} already in")
    code, _, err = keys("trust", "not-a-key", "--project", str(project))
    assert code == 2 and "not an Ed25519 public key" in err


def test_help_and_the_keys_verb_load_no_cryptography_until_they_sign_or_verify() -> None:
    import subprocess
    import sys

    probe = ("import sys\nfrom click.testing import CliRunner\nfrom llm_finetuning.cli import cli\n"
             "assert CliRunner().invoke(cli, ['--help']).exit_code == 0\n"
             "assert CliRunner().invoke(cli, ['keys', '--help']).exit_code == 0\n"
             "print(sorted(m for m in sys.modules if m.startswith('cryptography')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_key_that_is_not_one_is_unusable_input(tmp_path: Path) -> None:
    """A subcommand's refusal ends through the CLI's one conversion: `error: message Fix: fix`, exit 2."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    code, out, err = keys("trust", "not-a-key", "--project", str(project))
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and err.rstrip().endswith(
        " Fix: give the base64 key, or the line `finetune keys` prints, in quotes"), err
    assert not (project / ".llm-finetuning" / "trusted-keys").exists()
