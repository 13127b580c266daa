"""A model trained outside `finetune launch` has no run manifest: `finetune eval` and `finetune export` refuse
it with that reason, or, given --brief, score and export it saying so in their output, --json and the card."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.evaluation.targets import NO_RUN_MANIFEST

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gate"))

from gate_fixtures import prepare_brief  # noqa: E402

LINE = ("no run manifest: this model was not trained through `finetune launch`, so no gate verdict stands "
        "behind it")


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_the_line_is_the_one_the_guard_and_docs_promise() -> None:
    assert NO_RUN_MANIFEST == LINE


def test_a_bare_model_folder_is_refused_with_the_reason(tmp_path: Path) -> None:
    model = tmp_path / "my-grpo-model"  # what a hand-written GRPOTrainer script saves
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    for verb in (["eval", str(model)], ["export", str(model), "-o", str(tmp_path / "out")]):
        code, _, err = run_cli(*verb)
        assert code == 2 and LINE in err and "finetune launch RUN_DIR --detach" in err and "--brief BRIEF" in err
    code, out, _ = run_cli("eval", str(model), "--json")
    [problem] = json.loads(out)["problems"]
    assert code == 2 and LINE in problem["message"] and problem["path"] == str(model)
    assert not (tmp_path / "out").exists()


def test_a_model_inside_a_run_directory_names_the_run(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    (run / "model").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "model" / "config.json").write_text("{}")
    code, _, err = run_cli("eval", str(run / "model"))
    assert code == 2 and f"is a model inside the run directory {run}" in err and LINE not in err


def test_the_card_of_a_model_without_a_run_manifest_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.brief import load_brief
    from llm_finetuning.export.card import render_card
    from llm_finetuning.export.evidence import Evidence

    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    brief, _ = load_brief(prepare_brief(tmp_path / "b", "passing"))
    assert brief is not None
    unbound = Evidence(brief, "final", None, "0" * 64, False, False, "float32", "m", gate_passed=True,
                       run_manifest=False)
    card = render_card(unbound, "hint")
    assert card.count("No run manifest: this model was not trained through `finetune launch`") == 2
    assert "Phase 1 gate, re-run at export on the brief (it did not gate this model's training): passed" in card
    bound = render_card(Evidence(brief, "final", 4, "0" * 64, False, False, "float32", "m", gate_passed=True), "hint")
    assert "no run manifest" not in bound.lower() and "Phase 1 gate, re-run at export: passed" in bound


@pytest.mark.slow
def test_given_a_brief_it_is_scored_and_exported_saying_so(full_run: tuple[Path, Path], tmp_path: Path) -> None:
    brief, run = full_run
    model = tmp_path / "hand-trained"
    shutil.copytree(run / "model", model)  # the same weights, saved where no run manifest binds them
    code, out, err = run_cli("eval", str(model), "--brief", str(brief), "--prompts", "2", "--k", "2", "--json")
    assert code in (0, 1), err
    result = json.loads(out)
    assert result["run_manifest"] is None and result["no_run_manifest"] == LINE and result["prompts"] == 2
    assert f"note: {LINE}" in err
    code, out, _ = run_cli("eval", str(model), "--brief", str(brief), "--prompts", "2", "--k", "2")
    assert code in (0, 1) and out.startswith(f"  {LINE}\n")
    code, out, err = run_cli("export", str(model), "--brief", str(brief), "-o", str(tmp_path / "export"))
    assert code == 0, err
    assert f"warning: {LINE}" in err
    card = (tmp_path / "export" / "README.md").read_text()
    assert "No run manifest: this model was not trained through `finetune launch`" in card
    assert json.loads((tmp_path / "export" / "llm-finetuning-export.json").read_text())["run_manifest"] is None
    code, _, err = run_cli("eval", str(run), "--brief", str(brief))
    assert code == 2 and "is a run directory; its manifest names its brief" in err
