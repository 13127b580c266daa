"""A hub model that is neither cached nor reachable is told at once: `finetune check` notes it, and loading it
stops before huggingface_hub retries; a cached one, or one behind a configured proxy, is left alone."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.errors import UnusableInput
from llm_finetuning.models import (
    ModelName,
    is_cached,
    load_tokenizer,
    offline_reason,
    resolve_model,
    unreachable_model,
)


def _brief(folder: Path, model_id: str) -> Path:
    (folder / "train.jsonl").write_text('{"prompt": "p", "answer": "1"}\n')
    brief = {"brief": 1, "name": "hub", "method": "grpo", "task": {"summary": "s"}, "model": {"id": model_id},
             "data": {"train": "train.jsonl"}, "rewards": [{"fn": "exact_match"}]}
    path = folder / "brief.yaml"
    path.write_text(json.dumps(brief))
    return path


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def test_check_notes_an_uncached_hub_model_offline_and_loading_stops_at_once(tmp_path: Path, hub_cache: Path) -> None:
    out = CliRunner().invoke(cli, ["check", str(_brief(tmp_path, "someorg/not-here"))])
    assert out.exit_code == 0, out.output  # the brief is valid; the note says what will fail
    assert ("note: model.id: the hub model 'someorg/not-here' is not in the local Hugging Face cache "
            f"({hub_cache}) and the hub cannot be reached (HF_HUB_OFFLINE=1) Fix: download it") in out.stderr
    started = time.monotonic()
    with pytest.raises(UnusableInput, match="not in the local Hugging Face cache") as refused:
        load_tokenizer(resolve_model(ModelName("someorg/not-here")))
    assert time.monotonic() - started < 5 and refused.value.path == "model.id" and "hf download" in refused.value.fix


def test_baseline_stops_before_loading_anything(tmp_path: Path, hub_cache: Path) -> None:
    out = CliRunner().invoke(cli, ["baseline", str(_brief(tmp_path, "someorg/not-here")), "--prompts", "1", "--k", "1"])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith("error: model.id: the hub model 'someorg/not-here' is not in the local Hugging Face "
                                 "cache"), out.stderr
    assert "Loading" not in out.stderr  # no backend started: nothing was loaded or retried


def test_a_cached_hub_model_is_not_noted(tmp_path: Path, hub_cache: Path) -> None:
    snapshot = hub_cache / "models--someorg--here" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert is_cached("someorg/here") and unreachable_model("someorg/here") is None
    out = CliRunner().invoke(cli, ["check", str(_brief(tmp_path, "someorg/here"))])
    assert out.exit_code == 0 and "note:" not in out.stderr


def test_online_is_the_offline_switch_then_a_connection_unless_a_proxy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert offline_reason() == "HF_HUB_OFFLINE=1"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens there
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    reason = offline_reason()
    assert reason is not None and reason.startswith("no connection to 127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert offline_reason() is None
