"""The memory check never reports an empty reason: an estimate that cannot be made says why and how."""

from __future__ import annotations

from pathlib import Path

from gate_fixtures import prepare_brief

from llm_finetuning.gate import run_gate


def test_unknown_model_names_why_the_estimate_could_not_be_made(tmp_path: Path) -> None:
    brief = prepare_brief(tmp_path / "b", "passing")
    brief.write_text(brief.read_text().replace("id: Qwen/Qwen2.5-0.5B-Instruct", "id: someorg/not-a-known-model"))
    report = run_gate(brief)
    memory = next(c for c in report.checks if c.id == "memory_fits")
    assert memory.verdict == "warn"
    assert "the memory estimate could not be made: model.id: 'someorg/not-a-known-model' is not a local model" \
        in memory.message
    # Issue 27 item 11: the estimator's own fix is the check's fix, not a second "Fix:" inside the message
    assert memory.line().count("Fix:") == 1 and "Fix:" not in memory.message
    assert memory.fix.startswith("download the model (its config.json is enough)")
    assert "finetune memory --list-models" in memory.fix and memory.fix.endswith("then run `finetune memory --brief "
                                                                                  f"{brief}`")


def test_a_cpu_brief_is_judged_against_ram_and_warns_when_over(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Issue 27 item 11: a CPU brief (`hardware.gpus: 0`) is a CPU run with RAM, not one 80 GiB GPU."""
    from llm_finetuning import memory

    brief = prepare_brief(tmp_path / "b", "passing")
    text = brief.read_text()
    brief.write_text(text.replace("gpus: 1", "gpus: 0").replace("generation: vllm-colocate", "generation: transformers"))
    monkeypatch.setattr(memory, "host_ram_gib", lambda: 64.0)
    check = next(c for c in run_gate(brief).checks if c.id == "memory_fits")
    assert (check.verdict, check.path) == ("pass", "hardware.gpus")
    assert " GiB of 64 GiB RAM (a CPU run, hardware.gpus 0)" in check.message and "GPU of" not in check.message
    monkeypatch.setattr(memory, "host_ram_gib", lambda: 2.0)
    check = next(c for c in run_gate(brief).checks if c.id == "memory_fits")
    assert check.verdict == "warn" and check.message.startswith("may not fit: predicted peak")
