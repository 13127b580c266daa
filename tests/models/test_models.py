"""Model resolution and identity: hub ids, local folders, and the embedded GGUF dequantised once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llm_finetuning.errors import UnusableInput
from llm_finetuning.models import (
    EMBEDDED_ID,
    SOURCE_MARKER,
    ModelName,
    load_model,
    load_tokenizer,
    model_identity,
    resolve_model,
)


def test_hub_ids_resolve_without_download(tmp_path: Path) -> None:
    r = resolve_model(ModelName("Qwen/Qwen2.5-0.5B-Instruct", revision="abc123"), tmp_path)
    assert (r.path, r.revision, r.is_local, r.identity) == ("Qwen/Qwen2.5-0.5B-Instruct", "abc123", False,
                                                           "hf:Qwen/Qwen2.5-0.5B-Instruct@abc123")
    assert model_identity(ModelName("o/m")) == "hf:o/m@main"
    assert model_identity(ModelName("o/m", gguf_file="m.Q4.gguf")) == "hf:o/m@main/m.Q4.gguf"


def test_local_identity_follows_the_files_not_the_folder(tmp_path: Path, tiny_model_dir: Path) -> None:
    import shutil

    a = tmp_path / "a" / "model"
    shutil.copytree(tiny_model_dir, a)
    b = tmp_path / "b" / "model"
    shutil.copytree(tiny_model_dir, b)
    ident = model_identity(ModelName(str(a)))
    assert ident.startswith("local:model@sha256:") and ident == model_identity(ModelName("model"), b.parent)
    (b / "config.json").write_text((b / "config.json").read_text().replace("}", ', "x": 1}', 1))
    assert model_identity(ModelName(str(b))) != ident
    with pytest.raises(UnusableInput, match="does not exist"):
        model_identity(ModelName("./missing"), tmp_path)


def test_light_import() -> None:
    import subprocess

    code = "import llm_finetuning.models as m, sys; m.model_identity(m.ModelName('o/m')); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_embedded_gguf_is_dequantised_into_a_saveable_cache(tmp_path: Path) -> None:
    """The embedded id resolves to a plain safetensors folder (built once, then reused) that loads,
    generates, and saves again: the save_pretrained trap of GGUF-loaded models is gone."""
    r = resolve_model(ModelName(EMBEDDED_ID))
    assert r.gguf_file is None and r.is_local and r.identity.startswith(f"{EMBEDDED_ID}@sha256:")
    folder = Path(r.path)
    assert (folder / "model.safetensors").is_file() and (folder / "chat_template.jinja").is_file()
    assert json.loads((folder / SOURCE_MARKER).read_text())["identity"] == r.identity
    assert resolve_model(ModelName(EMBEDDED_ID)) == r  # second call: the cache, no dequantising
    tok = load_tokenizer(r)
    model = load_model(r, "float32", "cpu")
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n")
    model.save_pretrained(tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").is_file()
