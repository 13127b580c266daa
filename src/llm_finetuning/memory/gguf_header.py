"""A small pure-Python reader for a GGUF file's header: metadata keys and tensor names, no weights.

Enough to size a model for the memory estimator without the `gguf` package or numpy. The format
(version 2 and 3): magic `GGUF`, u32 version, u64 tensor count, u64 metadata count, then typed
key/value pairs, then per tensor its name, dimensions, type and offset. All little-endian.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO, TypeAlias, Union

from llm_finetuning.memory.shapes import ModelShape

# GGUF metadata value types -> struct format (scalars); 8 is a string, 9 an array.
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

# A metadata value: a number or bool, a string, or an array of them (an array not kept: its length).
GGUFValue: TypeAlias = Union[int, float, bool, str, "list[GGUFValue]"]


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands."""


class _Reader:
    """Reads the header from an in-memory buffer, topped up from the file as parsing reaches its end
    (a header with a 150k-entry vocabulary is a few MB; walking it in memory keeps this fast)."""

    CHUNK = 4 << 20

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.data = f.read(self.CHUNK)
        self.pos = 0

    def _ensure(self, n: int) -> None:
        while self.pos + n > len(self.data):
            more = self.f.read(max(n, self.CHUNK))
            if not more:
                raise GGUFError("file ends inside the GGUF header")
            self.data = self.data[self.pos:] + more
            self.pos = 0

    def take(self, n: int) -> bytes:
        self._ensure(n)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def scalar(self, fmt: str) -> int | float | bool:
        """One little-endian number of the struct format `fmt` (an entry of _SCALAR, or `<I`/`<Q`)."""
        size = struct.calcsize(fmt)
        self._ensure(size)
        value: int | float | bool = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += size
        return value

    def u32(self) -> int:
        return int(self.scalar("<I"))

    def u64(self) -> int:
        return int(self.scalar("<Q"))

    def skip(self, n: int) -> None:
        self._ensure(n)
        self.pos += n

    def skip_strings(self, count: int) -> None:
        """Skip `count` length-prefixed strings (a vocabulary): a tight loop, topping up as needed."""
        unpack = struct.Struct("<Q").unpack_from
        left = count
        while left:
            data, pos, end = self.data, self.pos, len(self.data)
            while left and pos + 8 <= end:
                nxt = pos + 8 + unpack(data, pos)[0]
                if nxt > end:
                    break
                pos = nxt
                left -= 1
            self.pos = pos
            if left:  # the next string crosses the buffer's end: top up through the slow path
                self._ensure(8)
                self.skip(8 + unpack(self.data, self.pos)[0])
                left -= 1

    def string(self) -> str:
        n = self.u64()
        if n > 1 << 24:
            raise GGUFError(f"implausible string length {n} in the GGUF header")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, vtype: int, keep: bool = True) -> GGUFValue:
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype = self.u32()
            count = self.u64()
            if itype in _SCALAR and not keep:
                self.skip(struct.calcsize(_SCALAR[itype]) * count)
                return count
            if itype == _STRING and not keep:
                self.skip_strings(count)
                return count
            return [self.value(itype) for _ in range(count)]
        raise GGUFError(f"unknown GGUF value type {vtype}")


def read_header(path: str | Path) -> tuple[dict[str, GGUFValue], dict[str, list[int]]]:
    """(metadata, {tensor name: dims}) of a GGUF file; arrays are kept as their length only."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if r.take(4) != b"GGUF":
            raise GGUFError("not a GGUF file (no GGUF magic)")
        version = r.u32()
        if version not in (2, 3):
            raise GGUFError(f"GGUF version {version} is not supported (2 and 3 are)")
        n_tensors = r.u64()
        n_kv = r.u64()
        meta: dict[str, GGUFValue] = {"GGUF.version": version}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.u32(), keep=False)
        tensors: dict[str, list[int]] = {}
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.u64() for _ in range(r.u32())]
            r.u32()  # ggml type
            r.u64()  # offset
            tensors[name] = dims
    return meta, tensors


def shape_from_gguf(path: str | Path, name: str | None = None) -> ModelShape:
    """A ModelShape from a GGUF file's metadata (llama.cpp key names)."""
    meta, tensors = read_header(path)
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise GGUFError("GGUF metadata has no general.architecture")

    def get(key: str, default: int | None = None) -> int | None:
        """The architecture's number `key` as an int (an array not kept: its length); `default` when absent."""
        value = meta.get(f"{arch}.{key}", default)
        if isinstance(value, (str, list)):
            raise GGUFError(f"GGUF metadata {arch}.{key} is not a number")
        return None if value is None else int(value)

    hidden = get("embedding_length")
    layers = get("block_count")
    heads = get("attention.head_count")
    if not (hidden and layers and heads):
        raise GGUFError(f"GGUF metadata lacks {arch}.embedding_length/block_count/attention.head_count")
    vocab = get("vocab_size") or meta.get("tokenizer.ggml.tokens")
    if not isinstance(vocab, int):
        embd = tensors.get("token_embd.weight")
        vocab = embd[1] if embd else 32000
    head_dim = get("attention.key_length")
    experts = get("expert_count", 0) or 0
    ffn = get("expert_feed_forward_length") if experts else None
    kv_heads = get("attention.head_count_kv", heads)
    return ModelShape(
        name=name or Path(path).name,
        family=arch,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads,
        intermediate=ffn or get("feed_forward_length", 4 * hidden) or 0,
        vocab=int(vocab),
        tie_word_embeddings="output.weight" not in tensors,
        head_dim=head_dim if head_dim and head_dim != hidden // heads else None,
        experts=experts,
        experts_per_token=(get("expert_used_count", 0) or 0) if experts else 0,
        qkv_bias="blk.0.attn_q.bias" in tensors,
    )
