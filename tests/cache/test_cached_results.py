"""Every cached result of the package is computed again when a file it depends on changes (issue 37 item 3).

The caches (docs/development.md, "Caches"), each with the files its key holds:
- `grpo-config-fields.json` (gate.trl_fields): every file of TRL and transformers the GRPOConfig fields were read
  from, by path, size and mtime;
- `reward-sources.json` (records.bindings): a reward's source files, their folders and the brief's folder;
- `file-hashes.json` (models.cached_sha256_file): the hashed file;
- `valid-briefs/` (gate.fastload): the brief's bytes, the code `check_brief` runs (here) and every file the brief
  names (tests/gate/test_fastload_keys.py);
- `models/` (models.resolve_model): a dequantised GGUF, in a folder named by the model's identity, which hashes the
  GGUF file (a local model folder's identity hashes its files);
- RUN_DIR/.eval-models/ (evaluation.targets.sampling_folder): a LoRA adapter merged into the base model, keyed by the
  adapter's files and the base model's identity.
Each test points LLM_FINETUNING_CACHE at its own folder and changes the files one by one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def edit(path: Path, text: str) -> None:
    """Rewrite `path` and move its mtime on by a second, so a stat key sees the change within one clock tick."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(later, later))


def test_trl_fields_are_read_again_when_any_file_they_came_from_changes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.gate import trl_fields

    trl = tmp_path / "site" / "trl"
    (trl / "trainer").mkdir(parents=True)
    base = trl / "trainer" / "base_config.py"
    entry = trl / "trainer" / "grpo_config.py"
    edit(base, "class _BaseConfig:\n    output_dir: str\n")
    edit(entry, "from .base_config import _BaseConfig\n\n\nclass GRPOConfig(_BaseConfig):\n    beta: float\n")
    monkeypatch.setattr(trl_fields, "package_dir", lambda name: trl)
    parsed: list[Path] = []
    real = trl_fields._class_fields

    def counting(file: Path, class_name: str, seen: list[Path]) -> set[str]:
        parsed.append(file)
        return real(file, class_name, seen)

    monkeypatch.setattr(trl_fields, "_class_fields", counting)
    assert trl_fields.grpo_config_fields() == {"output_dir", "beta"}
    parsed.clear()
    assert trl_fields.grpo_config_fields() == {"output_dir", "beta"}
    assert parsed == []  # a hit: nothing parsed
    edit(base, "class _BaseConfig:\n    output_dir: str\n    seed: int\n")
    assert trl_fields.grpo_config_fields() == {"output_dir", "beta", "seed"}
    edit(entry, entry.read_text(encoding="utf-8") + "    epsilon: float\n")
    assert trl_fields.grpo_config_fields() == {"output_dir", "beta", "seed", "epsilon"}


def test_reward_sources_are_found_again_when_a_source_file_changes(tmp_path: Path) -> None:
    from llm_finetuning.models import cached_sha256_file
    from llm_finetuning.records.bindings import reward_source_files

    folder = tmp_path / "project"
    folder.mkdir()
    module = folder / "my_reward.py"
    edit(module, "def score(completions, **kwargs):\n    return [1.0 for _ in completions]\n")
    first = reward_source_files("my_reward:score", folder)
    assert [p.name for p in first] == ["my_reward.py"]
    digest = cached_sha256_file(module)
    assert reward_source_files("my_reward:score", folder) == first  # a hit
    edit(folder / "helper.py", "WEIGHT = 1.0\n")
    edit(module, "from helper import WEIGHT\n\n\ndef score(completions, **kwargs):\n"
                 "    return [WEIGHT for _ in completions]\n")
    assert sorted(p.name for p in reward_source_files("my_reward:score", folder)) == ["helper.py", "my_reward.py"]
    assert cached_sha256_file(module) != digest  # what records bind the reward to follows the edit too


def test_a_valid_brief_is_checked_again_when_the_code_that_checked_it_changes(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.gate import fastload

    package = tmp_path / "package"
    for name in fastload.CODE_FILES:
        target = package / name
        target.parent.mkdir(parents=True, exist_ok=True)
        edit(target, (fastload.PACKAGE_DIR / name).read_text(encoding="utf-8"))
    monkeypatch.setattr(fastload, "PACKAGE_DIR", package)
    folder = tmp_path / "project"
    folder.mkdir()
    brief = folder / "brief.yaml"
    raw = {"data": {"train": "train.jsonl"}, "model": {"id": "embedded:smollm2-135m-instruct"}, "rewards": []}
    text = "the brief's text"
    keys = {fastload._cache_key(brief, text, raw)}
    assert None not in keys
    for changed in (package / name for name in fastload.CODE_FILES):
        edit(changed, changed.read_text(encoding="utf-8") + "\n")
        key = fastload._cache_key(brief, text, raw)
        assert key not in keys, f"{changed} changed and the valid-brief cache key did not"
        keys.add(key)
    for name in ("errors.py", "fileio.py", "cache.py", "models.py", "reward_registry.py"):
        assert name in fastload.CODE_FILES  # what check_brief imports from outside the brief package


def test_a_model_folder_and_a_gguf_are_new_identities_when_their_files_change(tmp_path: Path) -> None:
    from llm_finetuning.models import ModelName, model_identity

    folder = tmp_path / "model"
    folder.mkdir()
    edit(folder / "config.json", '{"model_type": "qwen2"}')
    edit(folder / "model.gguf", "GGUF v1")
    plain, gguf = ModelName(str(folder)), ModelName(str(folder), gguf_file="model.gguf")
    before = model_identity(plain), model_identity(gguf)
    edit(folder / "model.gguf", "GGUF v2")  # the dequantised cache folder is named by this identity
    assert model_identity(gguf) != before[1]
    edit(folder / "config.json", '{"model_type": "qwen3"}')
    assert model_identity(plain) not in (before[0], model_identity(gguf))


def test_an_adapter_is_merged_again_when_the_adapter_or_the_base_model_changes(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from llm_finetuning.evaluation import targets
    from llm_finetuning.models import ModelName

    base = tmp_path / "base"
    base.mkdir()
    edit(base / "config.json", '{"model_type": "qwen2"}')
    run_dir = tmp_path / "run"
    adapter = run_dir / "model"
    adapter.mkdir(parents=True)
    edit(adapter / "adapter_config.json", '{"r": 8}')
    edit(adapter / "adapter_model.safetensors", "weights v1")
    brief = SimpleNamespace(model=ModelName(str(base)), folder=tmp_path)
    merged: list[Path] = []

    def merge(adapter_dir: Path, brief: object, out: Path) -> Path:
        out.mkdir(parents=True)
        (out / targets.MERGED_MARKER).write_text("{}")
        merged.append(out)
        return out

    monkeypatch.setattr(targets, "merge_adapter", merge)
    target = targets.Target("final", None, adapter)
    first = targets.sampling_folder(target, brief, run_dir)
    assert targets.sampling_folder(target, brief, run_dir) == first and merged == [first]  # a hit
    edit(adapter / "adapter_model.safetensors", "weights v2")
    second = targets.sampling_folder(target, brief, run_dir)
    edit(base / "config.json", '{"model_type": "qwen3"}')
    third = targets.sampling_folder(target, brief, run_dir)
    assert merged == [first, second, third] and len({first, second, third}) == 3
