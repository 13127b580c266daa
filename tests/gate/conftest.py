"""Fixtures for the gate tests: fixture briefs copied into a temporary folder with records built
through the records API, and a private cache folder."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from gate_fixtures import prepare_brief  # noqa: E402


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path_factory.getbasetemp() / "llm-finetuning-cache"
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(cache))
    return cache


@pytest.fixture
def make_brief(tmp_path: Path) -> Any:
    def make(fixture: str, records: bool = True) -> Path:
        return prepare_brief(tmp_path / "b", fixture, records)

    return make
