"""Fixtures for chats with the real Claude Code client (see harness.py). A failed test prints the Markdown
transcript of every chat it ran, so a red test says what the client sent back. With CHAT_TRANSCRIPTS=DIR
set, every chat's transcript is also written to DIR (the README's transcript comes from there)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent / "plugin")]

from claude_cli import client_path  # noqa: E402
from harness import Chat  # noqa: E402
from test_plugin_install import copy_repository  # noqa: E402


@pytest.fixture(scope="session")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a clone of the repository has: the marketplace the plugin is installed from."""
    return copy_repository(tmp_path_factory.mktemp("marketplace") / "llm-finetuning")


@pytest.fixture
def client(request: pytest.FixtureRequest) -> Path:
    """The pinned Claude Code CLI; tests marked `@both_clients` also run with the newest release."""
    return client_path(getattr(request, "param", "pinned"))


@pytest.fixture
def chat(client: Path, repo_copy: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Chat]:
    """The plugin installed into a fresh HOME from the repository's marketplace, and an empty project."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    session = Chat(client, home, project, repo_copy)
    session.install_plugin()
    request.node.chat_session = session
    yield session
    keep = os.environ.get("CHAT_TRANSCRIPTS")  # a folder: each chat's Markdown transcript is written there
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for number, result in enumerate(session.runs, 1):
            name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
            (Path(keep) / f"{name}-{number}.md").write_text(result.describe())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    session = getattr(item, "chat_session", None)
    if report.failed and session is not None:
        for number, result in enumerate(session.runs, 1):
            report.sections.append((f"chat {number}: claude -p {result.prompt!r}", result.describe()))
