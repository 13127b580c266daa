"""A verb loads its brief once and passes the loaded `Brief` down: the gate, render and launch gate the brief the
verb loaded instead of reading the file again.

Loads are counted at `Brief.__init__`, which both loaders go through: `brief.load_brief` (the YAML read and
checked) and the gate's cache of briefs that were valid before (`gate.fastload`). With a cold cache every load
is a full one; with a warm cache every load is a cache hit; either way each verb makes one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning.brief import Brief
from llm_finetuning.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gate"))
from gate_fixtures import prepare_brief  # noqa: E402

VERBS = (
    ["gate", "brief.yaml"],
    ["render", "brief.yaml", "-o", "runs/r1"],
    ["launch", "runs/r1", "--plan"],
    ["memory", "--brief", "brief.yaml"],
    ["check", "brief.yaml"],
)


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_each_verb_loads_its_brief_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: str) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    loads: list[Path] = []
    init = Brief.__init__

    def counted(self: Brief, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        loads.append(self.path)

    monkeypatch.setattr(Brief, "__init__", counted)
    for i, args in enumerate(VERBS):
        if cache == "cold":
            monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / f"cache-{i}"))
        else:
            assert CliRunner().invoke(cli, ["gate", "brief.yaml"]).exit_code == 0  # the gate remembers the brief
        loads.clear()
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert loads == [brief.resolve()], f"`finetune {' '.join(args)}` loaded the brief {len(loads)} times"
