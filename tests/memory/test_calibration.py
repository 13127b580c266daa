"""The estimator against measured GRPO runs on an H200 (bench/results/memory-h200.jsonl)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_finetuning.memory.calibration import load

RESULTS = sorted((Path(__file__).resolve().parents[2] / "bench" / "results").glob("memory-h200*.jsonl"))
ROWS = load(*RESULTS)


def test_the_calibration_file_covers_the_cases_that_matter() -> None:
    points = [r.point for r in ROWS]
    assert len(points) >= 18
    assert any(p.gradient_accumulation_steps > 1 for p in points), "a generation-bound point"
    assert {p.adapter for p in points} == {"full", "lora"}
    assert {p.gradient_checkpointing for p in points} == {True, False}
    assert {p.beta > 0 for p in points} == {True, False}
    assert {p.dtype for p in points} == {"bfloat16", "float32"}
    assert any(r.oom for r in ROWS), "a measured out-of-memory point keeps the fit verdict honest"
    assert max(r.predicted.params for r in ROWS) > 14e9


@pytest.mark.parametrize("row", ROWS, ids=[r.label() for r in ROWS])
def test_prediction_is_within_ten_percent_of_measured_peak_reserved(row) -> None:  # type: ignore[no-untyped-def]
    assert row.verdict_right, f"{row.label()}: predicted fits={row.predicted.fits}, measured oom={row.oom}"
    if row.oom:
        # the run died on the way to its peak: the prediction must at least exceed what it reached
        assert row.predicted.device_total_gib > row.device_gib >= row.measured_reserved_gib
    else:
        assert abs(row.error) <= 0.10, f"{row.label()}: {row.predicted.total_gib:.2f} GiB predicted, " \
                                       f"{row.measured_reserved_gib:.2f} GiB measured"


@pytest.mark.parametrize("row", [r for r in ROWS if not r.oom], ids=[r.label() for r in ROWS if not r.oom])
def test_generation_phase_is_within_ten_percent(row) -> None:  # type: ignore[no-untyped-def]
    """The phase that is not the peak is modelled too (it decides vLLM shares and long-prompt runs)."""
    assert row.generation_error is not None
    assert abs(row.generation_error) <= 0.10, f"{row.label()}: generation phase off by {row.generation_error:+.1%}"


def test_the_fp32_trap_is_predicted_and_bf16_fixes_it() -> None:
    """TRL 1.16 loads a model path in float32: 7B full fine-tuning OOMs on a 141 GB card, bf16 fits."""
    fp32 = [r for r in ROWS if r.point.dtype == "float32" and "7B" in r.point.model
            and r.point.adapter == "full"]
    bf16 = [r for r in ROWS if r.point.dtype == "bfloat16" and "7B" in r.point.model
            and r.point.adapter == "full" and r.point.gradient_checkpointing]
    assert fp32 and bf16
    assert fp32[0].oom and not fp32[0].predicted.fits
    assert not bf16[0].oom and bf16[0].predicted.fits
