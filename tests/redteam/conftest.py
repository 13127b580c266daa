"""Fixtures for the red-team suite: each suite (with the protection, and the hook alone) runs once per session
in a chat of its own; bench/redteam.py holds the attempts and the runner."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests" / "chat"), str(REPO / "tests" / "plugin")]

from test_plugin_install import copy_repository  # noqa: E402

import redteam  # noqa: E402


@pytest.fixture(scope="session")
def marketplace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repository(tmp_path_factory.mktemp("marketplace") / "llm-finetuning")


def _suite(tmp_path_factory: pytest.TempPathFactory, marketplace: Path, protected: bool) -> Any:
    chat = redteam.new_chat(tmp_path_factory.mktemp("protected" if protected else "hook-only"), marketplace)
    return redteam.run_suite(chat, protected)


@pytest.fixture(scope="session")
def protected_run(tmp_path_factory: pytest.TempPathFactory, marketplace: Path) -> Any:
    """(outcomes, facts) of every attempt after `finetune protect`: the hook and the sandbox."""
    return _suite(tmp_path_factory, marketplace, True)


@pytest.fixture(scope="session")
def hook_only_run(tmp_path_factory: pytest.TempPathFactory, marketplace: Path) -> Any:
    """(outcomes, facts) of every attempt with the plugin's hook alone."""
    return _suite(tmp_path_factory, marketplace, False)
