"""Ed25519 signatures on sealed records, the reviewer's private key, and the trusted public keys that verify
them. The formats and what a signature proves: docs/gate.md ("Signing").

- The private key: a PEM file (PKCS#8, unencrypted, `-----BEGIN PRIVATE KEY-----`) at
  `locations.private_key_path()` or a path the person chooses, created on first use (folder 0700, file
  0600) and refused when others may read it.
- A trusted-keys file: one key a line, `ed25519 <base64 of the 32-byte public key> <comment>`; blank lines
  and lines starting with `#` are ignored. A key's id is `SHA256:` + the unpadded base64 of the sha256 of
  its 32 bytes (the form `ssh-keygen -l` prints).
- A signature block (`seal.signature` of an inspection record): `{"algorithm": "ed25519", "public_key":
  <base64>, "key_id": "SHA256:...", "value": <base64 of the 64-byte signature>}` over the UTF-8 bytes of
  `<record format> sha256:<the seal's sha256>`.

The `cryptography` package is imported inside the functions that sign or verify, so `finetune --help` and
the gate's fast path never load it when no signature is at stake.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llm_finetuning import locations
from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import atomic_write_bytes, sha256_bytes, shown
from llm_finetuning.integrity import writes_records

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ALGORITHM = "ed25519"
KEY_BYTES = 32
SIGNATURE_BYTES = 64


class KeyProblem(UnusableInput):
    """A private key or trusted key that cannot be used: a ProblemError with the message and the fix."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str, size: int) -> bytes | None:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return raw if len(raw) == size else None


def key_id(public_key: str) -> str:
    """`SHA256:<unpadded base64 of sha256(the 32 raw bytes)>` of a base64 public key."""
    raw = _unb64(public_key, KEY_BYTES) or public_key.encode("utf-8")
    return "SHA256:" + _b64(bytes.fromhex(sha256_bytes(raw))).rstrip("=")


@dataclass(frozen=True)
class TrustedKey:
    """One line of a trusted-keys file."""

    public_key: str  # base64 of the 32 raw bytes
    comment: str
    source: Path  # the trusted-keys file that lists it

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    def who(self) -> str:
        """`Ada Reviewer (SHA256:...)`, the signer as the gate names it."""
        return f"{self.comment or 'an unnamed key'} ({self.key_id})"


def trusted_line(public_key: str, comment: str) -> str:
    """The line a trusted-keys file holds for a key."""
    return f"{ALGORITHM} {public_key} {' '.join(comment.split())}".rstrip()


def parse_public_key(text: str) -> tuple[str, str]:
    """`ed25519 <base64> [comment]` or a bare base64 key -> (base64, comment); ValueError when it is not one."""
    parts = text.strip().split(None, 2)
    if parts and parts[0] == ALGORITHM:
        parts = parts[1:]
    if not parts or _unb64(parts[0], KEY_BYTES) is None:
        raise ValueError(f"not an Ed25519 public key: {text.strip()[:80]!r} (expected `ed25519 <base64 of 32 bytes> "
                         "<comment>`, as `finetune keys` prints it)")
    return parts[0], parts[1] if len(parts) > 1 else ""


def read_trusted_keys(path: Path) -> tuple[list[TrustedKey], list[int]]:
    """The keys a trusted-keys file lists, and the numbers of its lines that are not keys (none: no file)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return [], []
    keys, bad = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[0] != ALGORITHM or _unb64(parts[1], KEY_BYTES) is None:
            bad.append(n)
            continue
        keys.append(TrustedKey(parts[1], parts[2].strip() if len(parts) > 2 else "", Path(path)))
    return keys, bad


def _has_marker(folder: Path) -> bool:
    return (folder / ".claude").is_dir() or (folder / ".git").exists()


@dataclass(frozen=True)
class Trust:
    """The trusted-keys files that vouch for a record, the keys they list, and any lines they could not read."""

    files: list[Path]
    keys: list[TrustedKey]
    bad_lines: dict[Path, list[int]]
    project: Path  # the record's project, whose file a person adds a key to
    excluded: str = ""  # why the record's project's file was not consulted

    def find(self, public_key: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.public_key == public_key), None)


def record_project(record_path: Path) -> Path:
    """The project a record belongs to: `locations.project_root` of its folder; in no project (no `.claude/` or
    `.git` above), the folder above the record's folder (the brief's folder in the usual `BRIEF_DIR/records/`),
    so that a trusted-keys file never lands among the records."""
    folder = Path(record_path).resolve().parent
    root = locations.project_root(folder)
    return root if _has_marker(root) else folder.parent


def trust_for(record_path: Path, brief_folder: Path | None = None) -> Trust:
    """The keys trusted for the record at `record_path`: the brief's project's file, then the user's.

    Which keys count depends on the brief's project (`locations.project_root` of `brief_folder`), never on
    where the record lies: a record moved into a folder of its own choosing, with or without a trusted-keys file
    beside it, is still checked against the brief's project. Without a brief, the record's own project."""
    project = record_project(record_path)
    excluded = ""
    if brief_folder is not None:
        brief_project = locations.project_root(Path(brief_folder))
        brief_project = brief_project if _has_marker(brief_project) else Path(brief_folder).resolve()
        if project != brief_project:
            excluded = (f"the record lies outside the brief's project {shown(brief_project)}, so the trusted keys "
                        f"of {shown(project)} do not count")
        project = brief_project
    files = [locations.project_trusted_keys_path(project), locations.user_trusted_keys_path()]
    keys: list[TrustedKey] = []
    bad: dict[Path, list[int]] = {}
    for path in files:
        found, lines = read_trusted_keys(path)
        keys += found
        if lines:
            bad[path] = lines
    return Trust(files, keys, bad, project, excluded)


def any_trusted_key(record_path: Path, trust: Trust) -> bool:
    """Whether any trusted-keys file that could speak for the record lists a key: the brief's project's, the
    user's, or the record's own project's. Where one does, a seal without a signature counts for nothing."""
    if trust.keys:
        return True
    return bool(read_trusted_keys(locations.project_trusted_keys_path(record_project(record_path)))[0])


@writes_records
def add_trusted_key(path: Path, public_key: str, comment: str) -> bool:
    """Append `public_key` to the trusted-keys file at `path` (created with its folder); False when listed."""
    path = Path(path)
    keys, _ = read_trusted_keys(path)
    if any(k.public_key == public_key for k in keys):
        return False
    try:
        before = path.read_bytes()
    except FileNotFoundError:
        before = b"# Ed25519 public keys whose signatures on reviews this project trusts (docs/gate.md, Signing)\n"
    if before and not before.endswith(b"\n"):
        before += b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, before + (trusted_line(public_key, comment) + "\n").encode("utf-8"), 0o644)
    return True


# -- the private key ------------------------------------------------------------------------------------

def _load(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise KeyProblem(f"the private key {path} may be read by others (mode {mode:o})", f"run `chmod 600 {path}`")
    try:
        key = load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise KeyProblem(f"the private key {path} cannot be read ({exc})",
                        "give the key `finetune keys` made (`--key PATH`), or move the file away to make a new one"
                        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyProblem(f"{path} is not an Ed25519 private key", "give the key `finetune keys` made")
    return key


def _create(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    key = Ed25519PrivateKey.generate()
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, mode=0o700)
        path.parent.chmod(0o700)  # mkdir's mode is masked by the umask
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    atomic_write_bytes(path, pem, 0o600)
    return key


def private_key(path: Path | None = None, create: bool = True) -> tuple[Ed25519PrivateKey, bool]:
    """The reviewer's key at `path` (default `locations.private_key_path()`) and whether it was created now."""
    path = Path(path) if path is not None else locations.private_key_path()
    try:
        if path.is_file():
            return _load(path), False
        if path.exists():
            raise KeyProblem(f"{path} is not a file", "give the path of the private key file")
        if not create:
            raise KeyProblem(f"no private key at {path}", "run `finetune review` once, or `finetune keys rotate`")
        return _create(path), True
    except OSError as exc:
        raise KeyProblem(f"the private key {path} cannot be read or written ({exc.strerror or exc})",
                        "run this in your own terminal, outside an agent's sandbox, or give `--key PATH`") from None


def public_key_of(key: Ed25519PrivateKey) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return _b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


# -- signatures ---------------------------------------------------------------------------------------------

def signed_message(record_format: str, digest: str) -> bytes:
    """What is signed: `<format> sha256:<digest>` (the format keeps a signature from meaning another record)."""
    return f"{record_format} sha256:{digest}".encode()


def sign(key: Ed25519PrivateKey, record_format: str, digest: str) -> dict[str, str]:
    """The signature block over a seal's sha256."""
    public = public_key_of(key)
    value = key.sign(signed_message(record_format, digest))
    return {"algorithm": ALGORITHM, "public_key": public, "key_id": key_id(public), "value": _b64(value)}


def signature_fault(block: object, record_format: str, digest: str) -> str:
    """Why the signature block does not prove that its key signed `digest` ('' when it does)."""
    if not isinstance(block, dict) or block.get("algorithm") != ALGORITHM:
        return "seal.signature is not an ed25519 signature block"
    public = _unb64(str(block.get("public_key", "")), KEY_BYTES)
    value = _unb64(str(block.get("value", "")), SIGNATURE_BYTES)
    if public is None or value is None:
        return "seal.signature's public_key or value is not base64 of the right length"
    if block.get("key_id") != key_id(str(block["public_key"])):
        return "seal.signature's key_id does not belong to its public_key"
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public).verify(value, signed_message(record_format, digest))
    except InvalidSignature:
        return (f"the seal's signature by {block['key_id']} does not verify: the record was sealed again by someone "
                "without that key")
    return ""
