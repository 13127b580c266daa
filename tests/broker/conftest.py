"""Fixtures for the broker: the gate's fixture briefs (with records built through the records API) as projects."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gate"))

from gate_fixtures import prepare_brief  # noqa: E402


@pytest.fixture
def make_brief(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))

    def make(fixture: str, records: bool = True) -> Path:
        return prepare_brief(tmp_path / "b", fixture, records)

    return make
