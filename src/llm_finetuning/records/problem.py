"""`Problem`: one reason a record cannot be trusted, as a value (kind, what changed, message, fix)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# kinds, in the order a person should deal with them
KINDS = ("missing", "malformed", "tampered", "stale", "unsealed", "incomplete", "size", "disagreement")


@dataclass(frozen=True)
class Problem:
    """Why a record fails verification.

    `kind` is one of KINDS; `what` names the part concerned (`reward_code`, `rewards_spec`, `model`,
    `samples`, `verdicts`, `record`, ...); `message` is one line; `fix` is the command or edit that cures it.
    """

    kind: str
    what: str
    message: str
    fix: str

    def line(self) -> str:
        return f"{self.kind} ({self.what}): {self.message}"

    def to_json(self) -> dict[str, str]:
        return asdict(self)
