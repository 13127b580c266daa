"""`finetune render` and `finetune launch --plan` through the real CLI, gate and records: what is
refused, why, and what a launch would run (the vLLM paths are checked here through launch plans)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from launch_cases import copy_model, finetune, make_brief


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_model(tiny_model_dir, tmp_path_factory.mktemp("m") / "tiny")


def test_render_refuses_without_records_and_prints_the_gate(tmp_path: Path, model: Path) -> None:
    brief = make_brief(tmp_path / "b", model, records=False)
    out = finetune("render", str(brief), "-o", str(tmp_path / "run"))
    assert out.returncode == 1, out.stderr
    assert "FAIL  base_success_nonzero" in out.stdout and "FAIL  reward_inspected" in out.stdout
    assert "nothing was rendered" in out.stdout
    assert not (tmp_path / "run").exists()


def test_render_then_plan(tmp_path: Path, model: Path) -> None:
    brief = make_brief(tmp_path / "b", model)
    out = finetune("render", str(brief), "-o", str(tmp_path / "run"), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["rendered"] is True
    assert sorted(result["files"]) == ["accelerate.yaml", "grpo_config.yaml", "launch.sh", "rewards_entry.py"]
    plan = json.loads(finetune("launch", str(tmp_path / "run"), "--plan").stdout)
    assert (plan["how"], plan["train_processes"], plan["generation"]) == ("in-process", 1, "transformers")


def test_launch_refuses_a_hand_edited_file_naming_it(tmp_path: Path, model: Path) -> None:
    brief = make_brief(tmp_path / "b", model)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    cfg = run / "grpo_config.yaml"
    cfg.write_text(cfg.read_text().replace("learning_rate: 5.0e-07", "learning_rate: 1.0e-05"))
    out = finetune("launch", str(run))
    assert out.returncode == 1
    assert "grpo_config.yaml: was edited after rendering" in out.stderr
    assert "finetune render" in out.stderr


def rehash_manifest(run: Path) -> None:
    """What a forger does after editing a rendered file: recompute its sha256 in manifest.json."""
    from llm_finetuning.fileio import sha256_file

    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"] = {name: sha256_file(run / name) for name in manifest["files"]}
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def test_launch_rerenders_and_refuses_an_edit_whose_manifest_was_rehashed(tmp_path: Path, model: Path) -> None:
    """The manifest's hashes are not the authority: launch renders the brief again and compares every file."""
    brief = make_brief(tmp_path / "b", model)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    assert json.loads(finetune("launch", str(run), "--plan").stdout)["ok"] is True  # untouched: re-render agrees
    cfg = run / "grpo_config.yaml"
    cfg.write_text(cfg.read_text().replace("learning_rate: 5.0e-07", "learning_rate: 1.0e-05"))
    script = run / "launch.sh"
    script.write_text(script.read_text() + "echo trained anyway\n")
    rehash_manifest(run)
    out = finetune("launch", str(run), "--plan")
    refused = json.loads(out.stdout)
    assert out.returncode == 1 and refused["ok"] is False
    assert [(p["id"], p["path"]) for p in refused["problems"]] == [("rendered_differs", "grpo_config.yaml"),
                                                                    ("rendered_differs", "launch.sh")]
    line, text = next((n, t) for n, t in enumerate(cfg.read_text().splitlines(), 1) if t.startswith("learning_rate:"))
    assert f"line {line} is {text!r}, render writes {text.replace('1.0e-05', '5.0e-07')!r}" in \
        refused["problems"][0]["message"]
    assert "where render's file ends" in refused["problems"][1]["message"]
    out = finetune("launch", str(run))  # the real launch: refused before anything heavy is imported
    assert out.returncode == 1 and "grpo_config.yaml: differs from what `finetune render` makes" in out.stderr
    assert not (run / "metrics.jsonl").exists()
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    manifest = json.loads((run / "manifest.json").read_text())  # the manifest itself is rendered again too
    manifest["topology"]["train_processes"] = 2
    (run / "manifest.json").write_text(json.dumps(manifest))
    refused = json.loads(finetune("launch", str(run), "--plan").stdout)
    assert [(p["path"], p["message"]) for p in refused["problems"]] == [
        ("manifest.json", "differs from the manifest `finetune render` writes for the brief and its records now, "
                          "in topology.")]


def test_launch_refuses_when_the_gate_no_longer_passes(tmp_path: Path, model: Path) -> None:
    brief = make_brief(tmp_path / "b", model)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    (tmp_path / "b" / "records" / "baseline.json").unlink()
    out = finetune("launch", str(run), "--plan")
    assert out.returncode == 1
    refused = json.loads(out.stdout)  # --plan answers in JSON, a refusal too
    assert refused["ok"] is False
    assert [(p["id"], p["path"]) for p in refused["problems"]] == [("record_changed", "records.baseline")]
    out = finetune("launch", str(run))
    assert out.returncode == 1 and "records.baseline: " in out.stderr and "Fix: run `finetune gate`" in out.stderr


def test_launch_without_manifest_is_unusable(tmp_path: Path) -> None:
    tmp_path.joinpath("run").mkdir()
    out = finetune("launch", str(tmp_path / "run"))
    assert out.returncode == 2 and "manifest.json does not exist" in out.stderr


def test_vllm_server_plan_and_missing_vllm(tmp_path: Path, model: Path) -> None:
    """8 GPUs in vllm-server mode: the plan runs launch.sh (server on GPU 0, 7 trainers); without vLLM
    installed the launch itself is refused with the install command, never switched to transformers."""
    brief = make_brief(tmp_path / "b", model, gpus=8, generation="vllm-server",
                       extra="  vllm_server_gpus: 1\n")
    run = tmp_path / "run"
    out = finetune("render", str(brief), "-o", str(run))
    assert out.returncode == 0, out.stdout + out.stderr
    plan = json.loads(finetune("launch", str(run), "--plan").stdout)
    assert (plan["how"], plan["server_gpus"], plan["train_processes"]) == ("script", 1, 7)
    script = (run / "launch.sh").read_text()
    assert "CUDA_VISIBLE_DEVICES=0 trl vllm-serve" in script and "CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate" in script
    assert "trap stop_server EXIT" in script and "/health/" in script
    launched = finetune("launch", str(run))
    if plan["backend_problems"]:
        assert launched.returncode == 2
        assert "pip install 'llm-finetuning[vllm]'" in launched.stderr and "trl[vllm]==1.16.0" in launched.stderr


def test_render_takes_vllm_and_distribution_advice_from_the_memory_estimate(tmp_path: Path, model: Path) -> None:
    import yaml

    from llm_finetuning.brief import load_brief
    from llm_finetuning.memory import estimate_brief

    brief = make_brief(tmp_path / "b", model, gpus=1, generation="vllm-colocate")
    loaded, _ = load_brief(brief)
    recommend = estimate_brief(loaded).recommend
    assert finetune("render", str(brief), "-o", str(tmp_path / "run")).returncode == 0
    text = (tmp_path / "run" / "grpo_config.yaml").read_text()
    cfg = yaml.safe_load(text)
    assert cfg["vllm_gpu_memory_utilization"] == recommend["vllm_gpu_memory_utilization"]
    assert cfg["vllm_enable_sleep_mode"] == recommend["vllm_enable_sleep_mode"]
    assert "vllm_gpu_memory_utilization: " in text and "# the memory estimate's advice" in text
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["topology"]["distributed"] == "single"
