"""Fixture briefs for the gate and hook tests: copied into a folder, with records built through the
records API as each fixture's header asks (`# baseline: pass_at_k=0`, `# inspection: disagree=3,17`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "records"))

from records_builders import build_baseline, build_inspection  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def directives(text: str) -> dict[str, dict[str, str]]:
    """`# baseline: pass_at_k=0 tie=1.0` header lines -> {"baseline": {"pass_at_k": "0", "tie": "1.0"}}."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if not line.startswith("#") or ":" not in line:
            continue
        key, _, rest = line[1:].partition(":")
        if key.strip() in ("baseline", "inspection", "records", "env"):
            out[key.strip()] = dict(item.split("=", 1) if "=" in item else (item, "") for item in rest.split())
    return out


def prepare_brief(folder: Path, fixture: str, records: bool = True) -> Path:
    """Copy fixtures/<fixture>.yaml to folder/brief.yaml with its reward module and data, and build the
    records its header asks for (by default: a sealed all-agree inspection and a nonzero baseline)."""
    from llm_finetuning.brief import load_brief

    folder.mkdir(parents=True, exist_ok=True)
    text = (FIXTURES / f"{fixture}.yaml").read_text()
    (folder / "brief.yaml").write_text(text)
    shutil.copy(FIXTURES / "my_rewards.py", folder / "my_rewards.py")
    shutil.copytree(FIXTURES / "data", folder / "data", dirs_exist_ok=True)
    brief, _ = load_brief(folder / "brief.yaml")
    if brief is None or not records:
        return folder / "brief.yaml"
    d = directives(text)
    b = d.get("baseline", {})
    build_baseline(brief, pass_at_k=float(b.get("pass_at_k", 0.5)), pass_at_1=float(b.get("pass_at_1", 0.2)),
                   tie=float(b.get("tie", 0.3)), truncated=float(b.get("truncated", 0.05)))
    i = d.get("inspection", {})
    disagree = {int(x): "disagree" for x in i.get("disagree", "").split(",") if x}
    build_inspection(brief, verdicts=disagree)
    return folder / "brief.yaml"


def render_passing(tmp_path: Path, monkeypatch: Any) -> Path:
    """The passing fixture in tmp_path/b (made the current directory, with its own gate cache), rendered by
    `finetune render` into runs/r1; returns the brief's folder."""
    from click.testing import CliRunner

    from llm_finetuning.cli import cli

    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    result = CliRunner().invoke(cli, ["render", "brief.yaml", "-o", "runs/r1"])
    assert result.exit_code == 0, result.output
    return brief.parent
