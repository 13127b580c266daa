"""Shared fixtures. Area-specific fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_finetuning import locations
from llm_finetuning.gate.protection import REGISTRY_DIR_NAME

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The reviewer's signing key of every test (and of the CLIs they start) lives in a folder of this session,
# never in the real home; the user's trusted-keys file is replaced in this process by one of this session
# (subprocesses read the real one, which no test writes: see pytest_sessionfinish).
SESSION_KEYS = Path(tempfile.mkdtemp(prefix="llm-finetuning-test-keys-"))
os.environ[locations.KEY_DIR_ENV] = str(SESSION_KEYS / "keys")
SESSION_USER_TRUSTED_KEYS = SESSION_KEYS / "user-trusted-keys"


def _real_user_trusted_keys() -> tuple[bool, int, int]:
    path = locations.user_trusted_keys_path()
    return (True, path.stat().st_mtime_ns, path.stat().st_size) if path.exists() else (False, 0, 0)


REAL_USER_TRUSTED_KEYS = _real_user_trusted_keys()
# `finetune protect` run as a child process records the project in the person's real user config folder (found
# from the account, never from the environment: docs/security.md); what this session's tests add there goes again
REAL_REGISTRY = locations.user_config_dir() / REGISTRY_DIR_NAME
REGISTRY_BEFORE = set(REAL_REGISTRY.glob("*.json"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(SESSION_KEYS, ignore_errors=True)
    for added in set(REAL_REGISTRY.glob("*.json")) - REGISTRY_BEFORE:
        added.unlink(missing_ok=True)
    if _real_user_trusted_keys() != REAL_USER_TRUSTED_KEYS:
        print(f"\nerror: a test changed the user's trusted keys, {locations.user_trusted_keys_path()}")
        session.exitstatus = 1


@pytest.fixture(autouse=True)
def session_user_trusted_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's trusted-keys file as this process sees it: one of this session, absent unless a test writes it."""
    monkeypatch.setattr(locations, "user_trusted_keys_path", lambda: SESSION_USER_TRUSTED_KEYS)
    yield SESSION_USER_TRUSTED_KEYS
    SESSION_USER_TRUSTED_KEYS.unlink(missing_ok=True)

@pytest.fixture(autouse=True)
def protected_projects_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The person's record of protected projects as this process sees it: one of this test, never the real
    user config folder."""
    from llm_finetuning.gate import protection

    folder = tmp_path / ".protected-projects"
    monkeypatch.setattr(protection, "registry_dir", lambda: folder)
    return folder


# Claude Code sets CLAUDECODE=1 for its Bash commands and the gate's protection check reads it: tests run from
# inside Claude Code gate as a person's terminal does, unless a test sets it.
os.environ.pop("CLAUDECODE", None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files in tests/golden/")


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Qwen2 with a locally trained tokenizer and chat template (built once per session)."""
    from llm_finetuning.testing.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model")
