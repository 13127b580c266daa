"""The reward inspection record: scored samples a person reviewed, sealed, and bound to what they judged.

Files: `<record>.json` (this format) and `<record>.samples.jsonl` beside it (one sample a line: id,
prompt, completion, rewards {name: value}, explanations {name: why or null} where the rewards gave them
(samples written before explanations existed have none), and the reference fields of the data row).
Every field of a sample line is bound by that line's sha256.

Life cycle (a library API; `finetune inspect` and `finetune review` are thin shells over it):

1. `create_inspection(brief, samples, record_path, model_identity)` writes both files, unreviewed.
2. `set_verdict(record, sample_id, verdict, note, seconds)` + `save_progress(path, record)` record each
   verdict (`agree` | `disagree` | `unsure`) as the person goes, with the seconds they spent on the sample
   (None: unknown; a second verdict on the same sample adds its seconds to the first).
3. `seal(path, reviewer, key=None)` needs a verdict on every sample; it adds the reviewer, the time, the OS
   user (from the uid), the terminal on stdin, the median and total seconds a sample, a sha256 over
   everything in the record (bindings, per-sample hashes, verdicts with notes and seconds, the review),
   and the reviewer's Ed25519 signature over that sha256 (`reviewer_key`: created on first use, and added
   to the project's trusted keys when no trusted-keys file lists it; records/signing.py).
   A record with disagreements can be sealed: the seal says what the person saw, and the gate then
   rejects it listing the disputed samples (fix the reward, then inspect again).
4. `verify_inspection(brief, path, model_identity)` returns the record with every `Problem`: missing or
   malformed, tampered (the record or the samples edited after sealing, naming the part or the sample, or a
   signature that does not verify), untrusted_key (signed by a key no trusted-keys file lists), unsigned (a
   seal with no signature: a warning while no trusted-keys file lists a key, an error once one does), stale
   (reward specs, reward code, model: naming exactly what changed), unsealed, incomplete, wrong size,
   disagreement. `check_inspection` also names the trusted key that signed.

The format is documented in docs/gate.md ("The records the gate trusts", "Signing"). The sha256 alone
guards against accidents, not a forger (anyone can recompute it); the signature is what a forger without
the reviewer's private key cannot make.
Records sealed before timings existed (verdicts without `seconds`, a review block without the timing
fields) keep the same format and stay valid; `review_timing` then reports no timed sample.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llm_finetuning import locations
from llm_finetuning.brief import Brief
from llm_finetuning.brief.episode import environment_reward_name
from llm_finetuning.errors import Problem, Severity, UnusableInput
from llm_finetuning.fileio import (
    atomic_write_bytes,
    atomic_write_json,
    canonical_json,
    read_json_object,
    sha256_bytes,
    sha256_json,
    shown,
    utc_now,
)
from llm_finetuning.integrity import writes_records
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.records import KINDS, signing
from llm_finetuning.records.bindings import current_bindings, stale_problems

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

FORMAT = "llm-finetuning/inspection@1"
FORMAT_PREFIX = "llm-finetuning/inspection@"
VERDICTS = ("agree", "disagree", "unsure")
MIN_SAMPLES = 50
MAX_SAMPLES = 100
SEALED_PARTS = ("meta", "bindings", "samples", "review")


class RecordError(UnusableInput):
    """A record API used on a record in the wrong state (sealed, incomplete, unknown sample): a ProblemError
    with the message and the fix, which the CLI converts in its one place."""


def _object(value: JsonValue) -> JsonObject:
    return value if isinstance(value, dict) else {}


def sample_refs(record: JsonObject) -> list[JsonObject]:
    """The record's `samples` entries ({id, sha256}), in order (`load_inspection` checked their shape)."""
    found = record.get("samples")
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []


def sample_ids(record: JsonObject) -> list[str]:
    return [str(s.get("id")) for s in sample_refs(record)]


def verdicts_of(record: JsonObject) -> JsonObject:
    """The record's verdicts by sample id (each {verdict, note, at, seconds}); the record's own object, which
    `set_verdict` adds to."""
    found = record.get("verdicts")
    if not isinstance(found, dict):
        found = record["verdicts"] = {}
    return found


def verdict_of(record: JsonObject, sample_id: str) -> JsonObject | None:
    """The verdict on one sample, or None when it has none."""
    found = verdicts_of(record).get(sample_id)
    return found if isinstance(found, dict) else None


def review_of(record: JsonObject) -> JsonObject:
    """The sealed review block ({reviewer, sealed_at, counts, ...}); empty while unsealed."""
    return _object(record.get("review"))


def samples_path(record_path: Path) -> Path:
    """`records/inspection.json` -> `records/inspection.samples.jsonl`."""
    record_path = Path(record_path)
    return record_path.with_name(record_path.stem + ".samples.jsonl")


def _sample_line(sample: Mapping[str, object]) -> bytes:
    return json.dumps(sample, ensure_ascii=False, sort_keys=True, allow_nan=False).encode("utf-8") + b"\n"


@writes_records
def create_inspection(brief: Brief, samples: Sequence[Mapping[str, object]], record_path: Path,
                      model_identity: str | None) -> JsonObject:
    """Write the samples file and the unreviewed record bound to the brief's rewards, code and model.

    Each sample needs `prompt`, `completion` and `rewards` ({reward name: value}); a missing `id` becomes
    `s000`, `s001`, ... Returns the record written.
    """
    record_path = Path(record_path)
    names = brief.reward_names + [
        n for n in [environment_reward_name(brief.episode)] if n]  # an episode's environment scores it too
    rows: list[dict[str, object]] = []
    seen: set[str] = set()
    for i, s in enumerate(samples):
        if not isinstance(s, dict) or "completion" not in s or "prompt" not in s:
            raise RecordError(f"sample {i} needs prompt and completion")
        row = dict(s)
        row["id"] = str(row.get("id") or f"s{i:03d}")
        if row["id"] in seen:
            raise RecordError(f"sample id {row['id']!r} repeats")
        seen.add(row["id"])
        rewards = row.get("rewards")
        if not isinstance(rewards, dict) or sorted(rewards) != sorted(names):
            scored = sorted(rewards) if isinstance(rewards, dict) else []
            raise RecordError(f"sample {row['id']} scores {scored}; the brief's rewards are {names}")
        why = row.get("explanations")
        if why is not None and (not isinstance(why, dict) or not set(why) <= set(names)
                                or not all(w is None or isinstance(w, str) for w in why.values())):
            raise RecordError(f"sample {row['id']}: explanations must map the brief's rewards {names} to text or null")
        rows.append(row)
    lines = [_sample_line(r) for r in rows]
    spath = samples_path(record_path)
    atomic_write_bytes(spath, b"".join(lines))
    bindings = current_bindings(brief, model_identity)
    bindings.pop("data_source")
    bindings.pop("data_sha256")
    bindings["samples_sha256"] = sha256_bytes(b"".join(lines))
    record: JsonObject = {
        "format": FORMAT,
        "brief": {"name": brief.name, "sha256": brief.sha256},
        "created_at": utc_now(),
        "samples_file": spath.name,
        "samples": [{"id": str(r["id"]), "sha256": sha256_bytes(line)} for r, line in zip(rows, lines, strict=True)],
        "bindings": bindings,
        "verdicts": {},
        "review": None,
        "seal": None,
    }
    atomic_write_json(record_path, record)
    return record


def _check_structure(rec: JsonObject, path: Path) -> None:
    fmt = rec.get("format")
    if fmt != FORMAT:
        if isinstance(fmt, str) and fmt.startswith(FORMAT_PREFIX):
            raise UnusableInput(f"{path} is {fmt}; this llm-finetuning reads {FORMAT}",
                                "upgrade llm-finetuning, or run `finetune inspect` again", str(path))
        raise UnusableInput(f"{path} is not an inspection record (format {fmt!r}, expected {FORMAT})",
                            "point records.inspection at the file `finetune inspect` wrote", str(path))
    expected = {"brief": dict, "created_at": str, "samples_file": str, "samples": list, "bindings": dict,
                "verdicts": dict}
    for key, typ in expected.items():
        if not isinstance(rec.get(key), typ):
            raise UnusableInput(f"{path}: field {key!r} is missing or not a {typ.__name__}",
                                "run `finetune inspect` again", str(path))
    name = str(rec["samples_file"])
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise UnusableInput(f"{path}: samples_file {name!r} is not a file name beside the record",
                            "run `finetune inspect` again", str(path))
    for key in ("review", "seal"):
        if rec.get(key) is not None and not isinstance(rec.get(key), dict):
            raise UnusableInput(f"{path}: field {key!r} is not an object", "run `finetune inspect` again", str(path))
    for s in rec["samples"] if isinstance(rec["samples"], list) else []:
        if not (isinstance(s, dict) and isinstance(s.get("id"), str) and isinstance(s.get("sha256"), str)):
            raise UnusableInput(f"{path}: an entry of 'samples' lacks id/sha256", "run `finetune inspect` again",
                                str(path))


def load_inspection(path: Path) -> JsonObject:
    """The record at `path`, structurally checked; UnusableInput when it is not one."""
    rec = read_json_object(Path(path), "inspection record",
                           "run `finetune inspect BRIEF` to write it again, then `finetune review` it")
    _check_structure(rec, Path(path))
    return rec


def load_samples(record_path: Path) -> list[JsonObject]:
    """The samples beside a record, in order (for `finetune review` to show)."""
    spath = samples_path(record_path)
    try:
        text = spath.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"samples file {spath} cannot be read ({exc})", "run `finetune inspect` again",
                            str(spath)) from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            obj = json.loads(line)
        except ValueError:
            raise UnusableInput(f"{spath} line {n} is not JSON", "run `finetune inspect` again", str(spath)) from None
        if not isinstance(obj, dict):
            raise UnusableInput(f"{spath} line {n} is not a sample object", "run `finetune inspect` again",
                                str(spath))
        out.append(obj)
    return out


def sample_explanations(sample: JsonObject) -> dict[str, str | None] | None:
    """Each reward's explanation of one sample, made safe to print; None for a sample written before
    explanations existed (or whose rewards gave none)."""
    from llm_finetuning.rewards.explain import tidy

    why = sample.get("explanations")
    if not isinstance(why, dict) or not any(isinstance(w, str) for w in why.values()):
        return None
    return {str(name): tidy(w) if isinstance(w, str) else None for name, w in why.items()}


def is_sealed(record: JsonObject) -> bool:
    return isinstance(record.get("seal"), dict)


def _known_seconds(value: JsonValue) -> float | None:
    """A verdict's seconds when it is a usable number, else None (unknown)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


@writes_records
def set_verdict(record: JsonObject, sample_id: str, verdict: str, note: str = "",
                seconds: float | None = None) -> JsonObject:
    """Record the person's verdict on one sample (in memory; `save_progress` writes it).

    `seconds`: how long the sample was in front of the person before this verdict (None: unknown). A
    sample judged again keeps the sum of its known seconds, rounded to 0.1 s.
    """
    if is_sealed(record):
        raise RecordError("the record is sealed; verdicts cannot change",
                          "run `finetune inspect BRIEF` for a new record")
    if verdict not in VERDICTS:
        raise RecordError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    if sample_id not in sample_ids(record):
        raise RecordError(f"no sample {sample_id!r} in this record")
    if seconds is not None and _known_seconds(seconds) is None:
        raise RecordError(f"seconds {seconds!r} is not a number of seconds >= 0")
    before = verdict_of(record, sample_id)
    earlier = _known_seconds(before.get("seconds")) if before is not None else None
    spent = None if seconds is None and earlier is None else round((earlier or 0.0) + (seconds or 0.0), 1)
    verdicts_of(record)[sample_id] = {"verdict": verdict, "note": str(note), "at": utc_now(), "seconds": spent}
    return record


@dataclass(frozen=True)
class ReviewTiming:
    """How long the person spent per sample, over the verdicts that carry a time."""

    timed: int  # samples whose verdict has known seconds
    samples: int
    median_seconds: float | None
    total_seconds: float | None


def review_timing(record: JsonObject) -> ReviewTiming:
    """The median and total seconds a sample over the record's timed verdicts (None when none is timed)."""
    times = []
    ids = sample_ids(record)
    for sid in ids:
        v = verdict_of(record, sid)
        known = _known_seconds(v.get("seconds")) if v is not None else None
        if known is not None:
            times.append(known)
    if not times:
        return ReviewTiming(0, len(ids), None, None)
    times.sort()
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    return ReviewTiming(len(times), len(ids), round(median, 1), round(sum(times), 1))


def os_user() -> str:
    """The login name of the process's real uid (not $USER, which anyone can set), else `uid N`."""
    uid = os.getuid()
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def stdin_terminal() -> str | None:
    """The terminal device on stdin (`/dev/pts/3`), or None when stdin is not a terminal."""
    try:
        return os.ttyname(0)
    except OSError:
        return None


@writes_records
def save_progress(path: Path, record: JsonObject) -> None:
    """Write an unsealed record atomically (a review can stop and resume)."""
    if is_sealed(record):
        raise RecordError("the record is sealed; it is never rewritten", "run `finetune inspect BRIEF` again")
    atomic_write_json(Path(path), record)


def _parts(record: JsonObject) -> JsonObject:
    meta = {k: record.get(k) for k in ("format", "brief", "created_at", "samples_file")}
    return {
        "meta": sha256_json(meta),
        "bindings": sha256_json(record.get("bindings")),
        "samples": sha256_json(record.get("samples")),
        "review": sha256_json(record.get("review")),
        "verdicts": {sid: sha256_json(v) for sid, v in sorted(_object(record.get("verdicts")).items())},
    }


def _seal_digest(record: JsonObject) -> str:
    body = {k: v for k, v in record.items() if k != "seal"}
    return sha256_bytes(canonical_json(body))


def verdict_counts(record: JsonObject) -> dict[str, int]:
    """How many samples carry each verdict (VERDICTS), counted from the verdicts: the one count, which the seal
    stores and the gate reads."""
    verdicts = _object(record.get("verdicts"))
    return {v: sum(1 for x in verdicts.values() if isinstance(x, dict) and x.get("verdict") == v) for v in VERDICTS}


def missing_verdicts(record: JsonObject) -> list[str]:
    return [sid for sid in sample_ids(record) if sid not in verdicts_of(record)]


def disagreements(record: JsonObject) -> list[tuple[str, str]]:
    """(sample id, note) of every sample the person disagreed with, in sample order."""
    out = []
    for sid in sample_ids(record):
        v = verdict_of(record, sid)
        if v is not None and v.get("verdict") == "disagree":
            out.append((sid, str(v.get("note", ""))))
    return out


@dataclass(frozen=True)
class ReviewerKey:
    """The key a review is signed with: whether it was made now, and the trusted-keys file it was added to
    now (None: a trusted-keys file listed it already), or why it could not be added."""

    key: Ed25519PrivateKey
    public_key: str
    created: bool
    trusted_in: Path | None = None
    trust_error: str = ""

    @property
    def key_id(self) -> str:
        return signing.key_id(self.public_key)


def reviewer_key(record_path: Path, reviewer: str, key_path: Path | None = None) -> ReviewerKey:
    """The reviewer's private key (`key_path`, default `locations.private_key_path()`; made on first use), trusted
    for the record at `record_path`: when neither its project's nor the user's trusted keys list it, it is added
    to the project's file with the reviewer's name. `signing.KeyProblem` when the key cannot be read or made."""
    key, created = signing.private_key(key_path)
    public = signing.public_key_of(key)
    trust = signing.trust_for(Path(record_path))
    if trust.find(public) is not None:
        return ReviewerKey(key, public, created)
    target = locations.project_trusted_keys_path(trust.project)
    try:
        signing.add_trusted_key(target, public, reviewer)
    except OSError as exc:
        return ReviewerKey(key, public, created, None, f"{target} cannot be written ({exc.strerror or exc})")
    return ReviewerKey(key, public, created, target)


@writes_records
def seal(path: Path, reviewer: str, key: ReviewerKey | None = None) -> JsonObject:
    """Seal a fully reviewed record: reviewer, time, OS user, terminal, seconds a sample, a sha256 over all of
    it, and the signature of `key` (default: `reviewer_key(path, reviewer)`). Returns the record."""
    path = Path(path)
    record = load_inspection(path)
    if is_sealed(record):
        raise RecordError(f"{path} is already sealed", "run `finetune inspect BRIEF` for a new record")
    if not reviewer.strip():
        raise RecordError("the reviewer's name is empty", "give the name of the person who reviewed")
    missing = missing_verdicts(record)
    if missing:
        raise RecordError(f"{len(missing)} sample(s) have no verdict: {', '.join(missing[:10])}",
                          f"finish `finetune review {shown(path)}`")
    stray = sorted(set(verdicts_of(record)) - set(sample_ids(record)))
    if stray:
        raise RecordError(f"verdicts for unknown samples: {', '.join(stray)}", "run `finetune inspect BRIEF` again")
    now = _samples_digest(path, record)
    if now != _object(record.get("bindings")).get("samples_sha256"):
        raise RecordError(f"{samples_path(path)} changed since `finetune inspect` wrote it",
                          "run `finetune inspect BRIEF` again")
    key = key or reviewer_key(path, reviewer.strip())
    counts = verdict_counts(record)
    timing = review_timing(record)
    record["review"] = {"reviewer": reviewer.strip(), "sealed_at": utc_now(), "counts": {**counts},
                        "os_user": os_user(), "tty": stdin_terminal(), "timed_samples": timing.timed,
                        "median_seconds": timing.median_seconds, "total_seconds": timing.total_seconds}
    digest = _seal_digest(record)
    record["seal"] = {"algorithm": "sha256", "parts": _parts(record), "sha256": digest,
                      "signature": {**signing.sign(key.key, FORMAT, digest)}}
    atomic_write_json(path, record)
    return record


def _samples_digest(path: Path, record: JsonObject) -> str | None:
    spath = Path(path).with_name(str(record.get("samples_file") or samples_path(path).name))
    try:
        return sha256_bytes(spath.read_bytes())
    except OSError:
        return None


def _tamper_problems(record: JsonObject, redo: str) -> list[Problem]:
    s = _object(record.get("seal"))
    if _seal_digest(record) == s.get("sha256"):
        return []
    fix = f"{redo}; never edit a sealed record"
    stored = _object(s.get("parts"))
    now = _parts(record)
    changed = [p for p in SEALED_PARTS if stored.get(p) != now[p]]
    old_v, now_v = _object(stored.get("verdicts")), _object(now["verdicts"])
    changed_v = sorted(sid for sid in set(old_v) | set(now_v) if old_v.get(sid) != now_v.get(sid))
    problems = []
    if changed_v:
        problems.append(Problem("tampered", "verdicts", "verdicts edited after sealing: sample(s) "
                                + ", ".join(changed_v), fix))
    for part in changed:
        what = {"meta": "record", "review": "review"}.get(part, part)
        problems.append(Problem("tampered", what, f"the record's {part} was edited after sealing", fix))
    if not problems:
        problems.append(Problem("tampered", "seal", "the record does not match its seal", fix))
    return problems


def _samples_problems(path: Path, record: JsonObject, redo: str) -> list[Problem]:
    spath = Path(path).with_name(str(record.get("samples_file")))
    fix = f"{redo}; never edit the samples file"
    digest = _samples_digest(path, record)
    if digest is None:
        return [Problem("missing", "samples", f"samples file {spath} is missing", fix)]
    if digest == _object(record.get("bindings")).get("samples_sha256"):
        return []
    bound = {str(s.get("id")): s.get("sha256") for s in sample_refs(record)}
    try:
        lines = spath.read_bytes().splitlines(keepends=True)
        now: dict[str, str] = {}
        for line in lines:
            sid = str(json.loads(line).get("id"))
            now[sid] = sha256_bytes(line if line.endswith(b"\n") else line + b"\n")
    except (ValueError, AttributeError):
        return [Problem("tampered", "samples", f"{spath} no longer parses as the samples that were reviewed", fix)]
    changed = [sid for sid in bound if now.get(sid) != bound[sid]]
    added = [sid for sid in now if sid not in bound]
    detail = []
    if changed:
        detail.append("changed or removed: " + ", ".join(changed[:10]) + (" ..." if len(changed) > 10 else ""))
    if added:
        detail.append("added: " + ", ".join(added[:10]))
    what = "; ".join(detail) or "the file's bytes differ (order or whitespace)"
    return [Problem("tampered", "samples", f"{spath.name} differs from the samples that were scored: {what}", fix)]


def _signature_problems(record: JsonObject, path: Path, brief: Brief,
                        redo: str) -> tuple[list[Problem], signing.TrustedKey | None]:
    """A sealed record whose sha256 holds: its signature must verify and its key be trusted; a record sealed
    before signing passes with a warning until a trusted-keys file lists a key."""
    seal_block = _object(record.get("seal"))
    block = seal_block.get("signature")
    trust = signing.trust_for(path, brief.folder)
    listed = ", ".join(shown(f) for f in trust.files)
    if block is None:
        if signing.any_trusted_key(path, trust):
            holders = ", ".join(sorted({shown(k.source) for k in trust.keys})) or shown(
                locations.project_trusted_keys_path(signing.record_project(path)))
            return [Problem("unsigned", "seal", f"the seal has no signature (sha256 only, which anyone can recompute), "
                            f"and {holders} trust reviewer keys, so only a signed review counts", redo)], None
        return [Problem("unsigned", "seal", "sealed with a sha256 only (by a `finetune review` older than signing): "
                        "anyone can recompute it; this passes until a trusted-keys file lists a key",
                        f"for a signed review, {redo}", Severity.WARNING)], None
    fault = signing.signature_fault(block, FORMAT, str(seal_block.get("sha256")))
    if fault:
        return [Problem("tampered", "seal", fault, f"{redo}; never edit a sealed record")], None
    signed = _object(block)  # signature_fault found it an ed25519 block
    found = trust.find(str(signed.get("public_key")))
    if found is not None:
        return [], found
    unread = "".join(f"; lines {', '.join(map(str, n))} of {shown(f)} are not keys" for f, n in trust.bad_lines.items())
    why = f" ({trust.excluded})" if trust.excluded else ""
    target = shown(locations.project_trusted_keys_path(trust.project))
    return [Problem("untrusted_key", "seal", f"signed by key {signed.get('key_id')}, which no trusted-keys file lists "
                    f"(read: {listed}{unread}){why}",
                    f"if that is your reviewer's key, add it in your own terminal: `finetune keys trust "
                    f"{signed.get('public_key')} --project {shown(trust.project)}` (the line `ed25519 "
                    f"{signed.get('public_key')} NAME` in {target}); otherwise {redo}")], None


@dataclass(frozen=True)
class InspectionCheck:
    """What verifying a record found: every problem, and the trusted key that signed it (None: unsigned or
    not trusted)."""

    record: JsonObject | None = None  # None when missing or malformed
    problems: list[Problem] = field(default_factory=list)
    signer: signing.TrustedKey | None = None

    @property
    def review(self) -> SealedReview | None:
        """The sealed review as a typed value, when the record holds one whose structure verified."""
        if self.record is None or not is_sealed(self.record) or not review_of(self.record):
            return None
        return SealedReview.of(self.record)


@dataclass(frozen=True)
class SealedReview:
    """A sealed inspection record as the gate reads it, parsed once: who sealed it and when, how many samples,
    each verdict counted once from the verdicts themselves, the timing and the samples file it binds."""

    samples: int
    reviewer: str
    sealed_at: str
    counts: Mapping[str, int]  # verdict -> samples with it (VERDICTS)
    timing: ReviewTiming
    samples_sha256: str

    @classmethod
    def of(cls, record: JsonObject) -> SealedReview:
        review = review_of(record)
        return cls(len(sample_refs(record)), str(review.get("reviewer", "")), str(review.get("sealed_at", "")),
                   verdict_counts(record), review_timing(record),
                   str(_object(record.get("bindings")).get("samples_sha256", "")))


def check_inspection(brief: Brief, path: Path, model_identity: str | None = None,
                     bindings: JsonObject | None = None) -> InspectionCheck:
    """The record at `path`, every reason the gate cannot trust it for `brief`, and who signed it. `bindings`:
    the brief's `current_bindings`, when the caller has them already (a verb computes them once)."""
    path = Path(path)
    if not path.exists():
        return InspectionCheck(None, [Problem("missing", "record", f"no inspection record at {shown(path)}",
                                        f"run `finetune inspect {shown(brief.path)}` then `finetune review {shown(path)}`")])
    try:
        record = load_inspection(path)
    except UnusableInput as exc:
        return InspectionCheck(None, [Problem("malformed", "record", exc.message,
                                        exc.fix or f"run `finetune inspect {shown(brief.path)}` again")])
    problems: list[Problem] = []
    signer = None
    redo = f"run `finetune inspect {shown(brief.path)}` then `finetune review {shown(path)}`"
    if is_sealed(record):
        tampered = _tamper_problems(record, redo)
        problems += tampered
        if not tampered:
            found, signer = _signature_problems(record, path, brief, redo)
            problems += found
    problems += _samples_problems(path, record, redo)
    current = bindings if bindings is not None else current_bindings(brief, model_identity)
    problems += stale_problems(_object(record.get("bindings")), current, redo,
                               check_identity=model_identity is not None)
    n = len(sample_refs(record))
    if not MIN_SAMPLES <= n <= MAX_SAMPLES:
        problems.append(Problem("size", "samples", f"holds {n} samples; a review needs {MIN_SAMPLES}-{MAX_SAMPLES}",
                                f"run `finetune inspect {shown(brief.path)} --samples 64` then `finetune review {shown(path)}`"))
    missing = missing_verdicts(record)
    if missing:
        problems.append(Problem("incomplete", "verdicts", f"{len(missing)} of {n} samples have no verdict",
                                f"finish `finetune review {shown(path)}` at a terminal"))
    if not is_sealed(record):
        problems.append(Problem("unsealed", "review", "the record was never sealed by `finetune review`",
                                f"run `finetune review {shown(path)}` at a terminal"))
    dis = disagreements(record)
    if dis:
        listed = "; ".join(f"{sid}" + (f" ({note})" if note else "") for sid, note in dis[:10])
        problems.append(Problem("disagreement", "verdicts",
                                f"the reviewer disagreed with the reward on {len(dis)} sample(s): {listed}",
                                f"fix the reward function first, then {redo}"))
    return InspectionCheck(record, sorted(problems, key=lambda p: KINDS.index(p.id)), signer)


def verify_inspection(brief: Brief, path: Path, model_identity: str | None = None,
                      bindings: JsonObject | None = None) -> tuple[JsonObject | None, list[Problem]]:
    """(the record at `path`, every reason the gate cannot trust it for `brief`): no problem (or only a
    `warning` one) means trusted; the record is None when it is missing or malformed."""
    checked = check_inspection(brief, path, model_identity, bindings)
    return checked.record, checked.problems
