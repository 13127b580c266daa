"""`finetune export` on real CPU runs of the tiny model: folders that transformers (and PEFT) load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli

pytestmark = pytest.mark.slow


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _generates(folder: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(folder))
    tok = AutoTokenizer.from_pretrained(str(folder))
    text = tok.apply_chat_template([{"role": "user", "content": "Alice is 30"}], add_generation_prompt=True,
                                   tokenize=False)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert out.shape[1] > ids["input_ids"].shape[1]


def test_full_run_exports_a_loadable_folder_with_a_card(full_run: tuple[Path, Path], tmp_path: Path) -> None:
    brief, run = full_run
    assert run_cli("eval", str(run), "--prompts", "2", "--k", "2")[0] in (0, 1)  # eval.json of the final model
    dest = tmp_path / "export"
    code, out, err = run_cli("export", str(run), "-o", str(dest))
    assert code == 0, err
    assert "hf upload YOUR-USER/tiny-launch" in out
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {p.name for p in dest.iterdir()}
    assert not (dest / "optimizer.pt").exists() and not (dest / "training_args.bin").exists()
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in dest.iterdir())  # readable by whoever it is shared with
    _generates(dest)
    card = (dest / "README.md").read_text()
    record = json.loads((brief.parent / "records" / "baseline.json").read_text())
    assert f"pass@1 {100 * record['pass_at_1']:.1f}%" in card
    assert "reviewed by llm-finetuning tests (synthetic; not a human review) on " in card  # who and when
    from llm_finetuning.gate import run_gate

    verdict = "passed" if run_gate(brief).passed else "rejected"  # test_eval's real baseline never succeeds
    assert f"Phase 1 gate, re-run at export: {verdict}" in card
    assert "## Held-out results" in card and "| pass@1 |" in card and "95% interval" in card
    evaluated = json.loads((run / "eval.json").read_text())["settings"]["temperature"]
    assert f"sampling settings at temperature {evaluated:g} (both sides)" in card
    assert "## Diagnosis" in card and "`finetune diagnose`" in card
    assert "4 steps; reward" in card
    provenance = json.loads((dest / "llm-finetuning-export.json").read_text())
    assert provenance["checkpoint"] == "final" and provenance["eval"] is not None

    # never over a non-empty folder without --force
    code, _, err = run_cli("export", str(run), "-o", str(dest))
    assert code == 2 and "is not empty" in err and "--force" in err
    code, _, err = run_cli("export", str(run), "-o", str(dest), "--checkpoint", "2", "--force", "--dtype", "bfloat16")
    assert code == 0, err
    assert json.loads((dest / "config.json").read_text())["dtype"] == "bfloat16"
    card = (dest / "README.md").read_text()
    assert "Checkpoint: checkpoint-2 (step 2)" in card and "scored another checkpoint" in card

    # an evaluation at another setting says so in the card
    assert run_cli("eval", str(run), "--prompts", "2", "--greedy")[0] in (0, 1)
    assert run_cli("export", str(run), "-o", str(dest), "--force")[0] == 0
    assert "sampling settings at greedy decoding (both sides)" in (dest / "README.md").read_text()


def test_unfinished_run_is_refused_unless_a_checkpoint_is_named(full_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, run = full_run
    copy = tmp_path / run.parent.name
    shutil.copytree(run.parent, copy, symlinks=True)
    shutil.rmtree(copy / "run" / "model")
    code, _, err = run_cli("export", str(copy / "run"), "-o", str(tmp_path / "out"))
    assert code == 2 and "has not finished training" in err and "committed checkpoints: 2, 4" in err
    assert not (tmp_path / "out").exists()
    code, _, err = run_cli("export", str(copy / "run"), "-o", str(tmp_path / "out"), "--checkpoint", "4")
    assert code == 0, err
    _generates(tmp_path / "out")


def test_lora_adapter_folder_and_merged_model(lora_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, run = lora_run
    adapter = tmp_path / "adapter"
    code, out, err = run_cli("export", str(run), "-o", str(adapter))
    assert code == 0, err
    assert "LoRA adapter for" in out
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]).is_dir()  # the local base model it names
    _generates(adapter)  # transformers loads the base it names and applies the adapter (PEFT integration)
    assert "library_name: peft" in (adapter / "README.md").read_text()

    merged = tmp_path / "merged"
    code, out, err = run_cli("export", str(run), "-o", str(merged), "--merge")
    assert code == 0, err
    assert not (merged / "adapter_config.json").exists() and (merged / "model.safetensors").is_file()
    _generates(merged)
    assert "merged into the base weights" in (merged / "README.md").read_text()
    code, _, err = run_cli("export", str(run), "-o", str(tmp_path / "x"), "--checkpoint", "all")
    assert code == 2 and "export takes one" in err
