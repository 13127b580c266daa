"""Model shapes for the memory estimator: a built-in table of common families, and readers for a local
config.json and a GGUF header.

The table holds the published `config.json` values of each model (hidden size, layers, heads, key/value
heads, head dim, MLP width, vocabulary, tied embeddings, experts), so that `finetune memory --model
Qwen/Qwen2.5-7B-Instruct` answers offline. Pure Python: no torch, no gguf package.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.models import config_experts


@dataclass(frozen=True)
class ModelShape:
    """What the estimator needs to know about a decoder-only transformer."""

    name: str
    family: str  # the config's model_type (qwen2, qwen3, llama, gemma2, ...)
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int  # dense MLP width (for MoE: the width of one expert)
    vocab: int
    tie_word_embeddings: bool
    head_dim: int | None = None  # None: hidden // heads
    experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    shared_expert_intermediate: int = 0  # always-active shared expert width (Qwen2-MoE style)
    qkv_bias: bool = False
    extra_params: int = 0  # parameters outside the text decoder (a vision tower), counted as weights

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    def layer_params(self) -> int:
        """Parameters of one decoder layer (attention, MLP or experts and router, norms)."""
        q = self.heads * self.d_head
        kv = self.kv_heads * self.d_head
        attn = self.hidden * q + 2 * self.hidden * kv + q * self.hidden
        if self.qkv_bias:
            attn += q + 2 * kv
        if self.is_moe:
            mlp = self.experts * 3 * self.hidden * self.intermediate + self.hidden * self.experts
            mlp += 3 * self.hidden * self.shared_expert_intermediate
        else:
            mlp = 3 * self.hidden * self.intermediate
        return attn + mlp + 2 * self.hidden

    def embedding_params(self) -> int:
        """Input embeddings plus the LM head when it is not tied to them."""
        return self.vocab * self.hidden * (1 if self.tie_word_embeddings else 2)

    def params(self) -> int:
        """Total parameters (the published count, to within norms and biases)."""
        return self.layers * self.layer_params() + self.embedding_params() + self.hidden + self.extra_params

    def linear_shapes(self) -> list[tuple[int, int, int]]:
        """(in, out, count) for every linear layer PEFT's all-linear targets (the LM head excluded)."""
        q = self.heads * self.d_head
        kv = self.kv_heads * self.d_head
        out = [(self.hidden, q, 1), (self.hidden, kv, 2), (q, self.hidden, 1)]
        if self.is_moe:
            # transformers 5 fuses experts into 3-D parameters and keeps the router as a bare parameter,
            # neither of which all-linear reaches; a shared expert is plain linears.
            if self.shared_expert_intermediate:
                s = self.shared_expert_intermediate
                out += [(self.hidden, s, 2), (s, self.hidden, 1)]
        else:
            out += [(self.hidden, self.intermediate, 2), (self.intermediate, self.hidden, 1)]
        return [(i, o, c * self.layers) for i, o, c in out]

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["params"] = self.params()
        return data


def _qwen2(name: str, h: int, n: int, a: int, kv: int, i: int, v: int, tie: bool) -> ModelShape:
    return ModelShape(name, "qwen2", h, n, a, kv, i, v, tie, qkv_bias=True)


def _qwen3(name: str, h: int, n: int, a: int, kv: int, i: int, tie: bool) -> ModelShape:
    return ModelShape(name, "qwen3", h, n, a, kv, i, 151936, tie, head_dim=128)


def _llama(name: str, h: int, n: int, a: int, kv: int, i: int, v: int, tie: bool) -> ModelShape:
    return ModelShape(name, "llama", h, n, a, kv, i, v, tie)


# Published config.json values. Keys are lower-case hub ids without the -Instruct/-it suffix; lookups
# strip those suffixes (instruct and base models share a shape).
_TABLE: list[ModelShape] = [
    _qwen2("Qwen/Qwen2.5-0.5B", 896, 24, 14, 2, 4864, 151936, True),
    _qwen2("Qwen/Qwen2.5-1.5B", 1536, 28, 12, 2, 8960, 151936, True),
    _qwen2("Qwen/Qwen2.5-3B", 2048, 36, 16, 2, 11008, 151936, True),
    _qwen2("Qwen/Qwen2.5-7B", 3584, 28, 28, 4, 18944, 152064, False),
    _qwen2("Qwen/Qwen2.5-14B", 5120, 48, 40, 8, 13824, 152064, False),
    _qwen2("Qwen/Qwen2.5-32B", 5120, 64, 40, 8, 27648, 152064, False),
    _qwen2("Qwen/Qwen2.5-72B", 8192, 80, 64, 8, 29568, 152064, False),
    _qwen3("Qwen/Qwen3-0.6B", 1024, 28, 16, 8, 3072, True),
    _qwen3("Qwen/Qwen3-1.7B", 2048, 28, 16, 8, 6144, True),
    _qwen3("Qwen/Qwen3-4B", 2560, 36, 32, 8, 9728, True),
    _qwen3("Qwen/Qwen3-8B", 4096, 36, 32, 8, 12288, False),
    _qwen3("Qwen/Qwen3-14B", 5120, 40, 40, 8, 17408, False),
    _qwen3("Qwen/Qwen3-32B", 5120, 64, 64, 8, 25600, False),
    ModelShape("Qwen/Qwen3-30B-A3B", "qwen3_moe", 2048, 48, 32, 4, 768, 151936, False, head_dim=128,
               experts=128, experts_per_token=8),
    ModelShape("Qwen/Qwen3-235B-A22B", "qwen3_moe", 4096, 94, 64, 4, 1536, 151936, False, head_dim=128,
               experts=128, experts_per_token=8),
    _llama("meta-llama/Llama-3.2-1B", 2048, 16, 32, 8, 8192, 128256, True),
    _llama("meta-llama/Llama-3.2-3B", 3072, 28, 24, 8, 8192, 128256, True),
    _llama("meta-llama/Llama-3.1-8B", 4096, 32, 32, 8, 14336, 128256, False),
    _llama("meta-llama/Meta-Llama-3-8B", 4096, 32, 32, 8, 14336, 128256, False),
    _llama("meta-llama/Llama-3.1-70B", 8192, 80, 64, 8, 28672, 128256, False),
    _llama("meta-llama/Llama-3.3-70B", 8192, 80, 64, 8, 28672, 128256, False),
    ModelShape("google/gemma-2-2b", "gemma2", 2304, 26, 8, 4, 9216, 256000, True, head_dim=256),
    ModelShape("google/gemma-2-9b", "gemma2", 3584, 42, 16, 8, 14336, 256000, True, head_dim=256),
    ModelShape("google/gemma-2-27b", "gemma2", 4608, 46, 32, 16, 36864, 256000, True, head_dim=128),
    ModelShape("google/gemma-3-1b", "gemma3_text", 1152, 26, 4, 1, 6912, 262144, True, head_dim=256),
    # Gemma 3 4B/12B/27B are image-text models; the SigLIP tower (~0.42 B) is counted as extra weights.
    ModelShape("google/gemma-3-4b", "gemma3", 2560, 34, 8, 4, 10240, 262208, True, head_dim=256,
               extra_params=417_000_000),
    ModelShape("google/gemma-3-12b", "gemma3", 3840, 48, 16, 8, 15360, 262208, True, head_dim=256,
               extra_params=417_000_000),
    ModelShape("google/gemma-3-27b", "gemma3", 5376, 62, 32, 16, 21504, 262208, True, head_dim=128,
               extra_params=417_000_000),
    ModelShape("mistralai/Mistral-7B-v0.1", "mistral", 4096, 32, 32, 8, 14336, 32000, False),
    ModelShape("mistralai/Mistral-7B-v0.3", "mistral", 4096, 32, 32, 8, 14336, 32768, False),
    ModelShape("mistralai/Mixtral-8x7B-v0.1", "mixtral", 4096, 32, 32, 8, 14336, 32000, False,
               experts=8, experts_per_token=2),
    ModelShape("mistralai/Mixtral-8x22B-v0.1", "mixtral", 6144, 56, 48, 8, 16384, 32768, False,
               experts=8, experts_per_token=2),
    _llama("HuggingFaceTB/SmolLM2-135M", 576, 30, 9, 3, 1536, 49152, True),
    _llama("HuggingFaceTB/SmolLM2-360M", 960, 32, 15, 5, 2560, 49152, True),
    _llama("HuggingFaceTB/SmolLM2-1.7B", 2048, 24, 32, 32, 8192, 49152, True),
]

EMBEDDED_ID = "embedded:smollm2-135m-instruct"
_SUFFIXES = ("-instruct-2507", "-instruct", "-chat", "-it", "-base")


def _key(model_id: str) -> str:
    key = model_id.strip().lower()
    for suffix in _SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key.replace("-instruct-", "-")  # Mistral: Mistral-7B-Instruct-v0.3


TABLE: dict[str, ModelShape] = {_key(s.name): s for s in _TABLE}


def known_ids() -> list[str]:
    """The hub ids of the built-in table (base names; -Instruct/-it variants resolve to them)."""
    return [s.name for s in _TABLE]


def embedded_shape() -> ModelShape:
    """The embedded model's shape: SmolLM2-135M's (the GGUF holds that model), no package needed."""
    return replace(TABLE[_key("HuggingFaceTB/SmolLM2-135M")], name=EMBEDDED_ID)


def lookup(model_id: str) -> ModelShape | None:
    """The built-in shape for a hub id (case and -Instruct/-it suffix ignored), or None."""
    if model_id.strip().lower() == EMBEDDED_ID:
        return embedded_shape()
    key = _key(model_id)
    if key in TABLE:
        return replace(TABLE[key], name=model_id)
    # Meta names its instruct models "Llama-3.1-8B-Instruct" and older ones "Meta-Llama-3.1-8B".
    if "/meta-llama-3." in key:
        alt = key.replace("/meta-llama-", "/llama-")
        if alt in TABLE:
            return replace(TABLE[alt], name=model_id)
    return None


def _whole(value: JsonValue, key: str) -> int:
    """`int()` of a config.json size (an int, or a float or string that reads as one); TypeError naming the key
    for null, a list or a mapping."""
    if value is None or isinstance(value, (list, dict)):
        raise TypeError(f"{key} is {value!r}, not a number")
    return int(value)


def shape_from_config(config: JsonObject, name: str) -> ModelShape:
    """A shape from a transformers config.json object (text config of multimodal models included): the one place
    the config's fields are read."""
    text_config = config.get("text_config")
    cfg = text_config if isinstance(text_config, dict) and text_config else config
    if "hidden_size" not in cfg:
        raise ValueError("config.json has no hidden_size")
    hidden = _whole(cfg["hidden_size"], "hidden_size")
    heads = _whole(cfg.get("num_attention_heads", 1), "num_attention_heads")
    experts = config_experts(cfg)
    moe_width = cfg.get("moe_intermediate_size")
    intermediate = (_whole(moe_width, "moe_intermediate_size") if experts and moe_width
                    else _whole(cfg.get("intermediate_size", 4 * hidden), "intermediate_size"))
    family = str(cfg.get("model_type") or config.get("model_type") or "unknown")
    tie = config.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    return ModelShape(
        name=name,
        family=family,
        hidden=hidden,
        layers=_whole(cfg["num_hidden_layers"], "num_hidden_layers"),
        heads=heads,
        kv_heads=_whole(cfg.get("num_key_value_heads") or heads, "num_key_value_heads"),
        intermediate=intermediate,
        vocab=_whole(cfg.get("vocab_size", 32000), "vocab_size"),
        tie_word_embeddings=bool(True if tie is None else tie),
        head_dim=_whole(cfg["head_dim"], "head_dim") if cfg.get("head_dim") else None,
        experts=experts,
        experts_per_token=_whole(cfg.get("num_experts_per_tok") or 0, "num_experts_per_tok") if experts else 0,
        shared_expert_intermediate=_whole(cfg.get("shared_expert_intermediate_size") or 0,
                                          "shared_expert_intermediate_size"),
        qkv_bias=bool(cfg.get("attention_bias", family.startswith("qwen2"))),
    )
