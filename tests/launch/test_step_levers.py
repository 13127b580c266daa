"""The two step-time levers `finetune launch` adds (docs/results.md, where a step's time goes): the heap frozen
once after the first step, and compiled decoding's kernels kept in a persistent cache."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from llm_finetuning.launch.callbacks import training_callbacks
from llm_finetuning.launch.trainer import StopFlag, compile_cache_dir, compile_decoding


def test_the_heap_is_frozen_once_after_the_first_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    freeze = [c for c in training_callbacks(tmp_path, StopFlag(), progress=False) if type(c).__name__ == "FreezeHeap"]
    assert len(freeze) == 1
    for step in (1, 2, 3):
        freeze[0].on_step_end(None, SimpleNamespace(global_step=step), None)
    assert calls == ["collect", "freeze"]


def _trainer() -> SimpleNamespace:
    return SimpleNamespace(generation_config=SimpleNamespace(disable_compile=True, max_cache_len=None),
                           model=SimpleNamespace())


def test_compiled_kernels_go_to_the_products_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")  # recorded, so the value compile_decoding sets is undone
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    trainer = _trainer()
    compile_decoding(trainer, 96)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "torch-compile") == str(compile_cache_dir())
    assert trainer.generation_config.disable_compile is False and trainer.generation_config.max_cache_len == 96


def test_a_cache_folder_the_user_chose_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    compile_decoding(_trainer(), 96)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
