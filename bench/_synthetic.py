"""Random-weight models of published shapes, and synthetic records for them: what the speed benchmarks
(bench/launch_gpu.py, bench/step_speed.py, bench/generate_probe.py) and the launch tests train."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# name: (model family, config.json values)
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm2-135m": ("llama", {  # HuggingFaceTB/SmolLM2-135M(-Instruct) config.json
        "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
        "num_key_value_heads": 3, "vocab_size": 49152, "max_position_embeddings": 8192, "rope_theta": 100000.0,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "hidden_act": "silu"}),
    "qwen2.5-1.5b": ("qwen2", {  # Qwen/Qwen2.5-1.5B-Instruct config.json
        "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
        "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "hidden_act": "silu"}),
    "qwen2.5-7b": ("qwen2", {  # Qwen/Qwen2.5-7B-Instruct config.json
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
        "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu"}),
    "tiny": ("qwen2", {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "vocab_size": 512, "tie_word_embeddings": True}),  # smoke runs
}


def random_model(shape: str, dtype: str | None = None, **ids: int) -> Any:
    """A model of `shape` with random weights (seed 0), built on the GPU where there is one: a 1.5B init is
    minutes on one CPU core; in `dtype` where given (else float32). `ids`: bos/eos/pad token ids for its config."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    family, dims = SHAPES[shape]
    config_cls, model_cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}[family]
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        if dtype is not None:  # built in `dtype`: a 7B model in float32 is 30 GB before the cast
            previous = torch.get_default_dtype()
            torch.set_default_dtype(getattr(torch, dtype))
            try:
                return model_cls(config_cls(**dims, **ids))
            finally:
                torch.set_default_dtype(previous)
        return model_cls(config_cls(**dims, **ids))


def build_random_model(out: Path, shape: str, dtype: str | None = None) -> dict[str, Any]:
    """A model folder: `shape` with random weights (saved in `dtype`, else float32) and the tests' small local BPE
    tokenizer with its chat template; checks that the tokenizer really encodes."""
    from transformers import AutoTokenizer

    from llm_finetuning.testing.tiny import build_tiny_model

    build_tiny_model(out)  # tokenizer + chat template (the tiny weights are replaced below)
    tok = AutoTokenizer.from_pretrained(out)
    if not tok("hello world")["input_ids"]:
        # Some transformers versions swap in a model-specific tokenizer class that encodes nothing
        # for a hand-made tokenizer (FACTS.md); name the generic fast class explicitly.
        cfg_path = out / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
        cfg_path.write_text(json.dumps(cfg, indent=2))
        tok = AutoTokenizer.from_pretrained(out)
    assert tok("hello world")["input_ids"], "the tokenizer encodes nothing"
    for name in ("model.safetensors", "config.json", "generation_config.json"):
        (out / name).unlink(missing_ok=True)
    model = random_model(shape, dtype, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    return {"parameters": sum(p.numel() for p in model.parameters()), "tokenizer_class": type(tok).__name__,
            "tokenizer_vocab": len(tok)}


def person_completion(row: dict[str, Any]) -> str:
    """The right answer of the examples' JSON tasks (rows with `name` and `age`)."""
    return json.dumps({"name": row["name"], "age": row["age"]})


def seal_synthetic(record: Path, reviewer: str) -> None:
    """Seal a benchmark's record with a throwaway key (trusted in the record's project only, then gone), never
    the person's own reviewer key: no person reviewed it, so no person's signature may say so."""
    import tempfile

    from llm_finetuning.records import inspection

    with tempfile.TemporaryDirectory(prefix="synthetic-key-") as keys:
        inspection.seal(record, reviewer, inspection.reviewer_key(record, reviewer, Path(keys) / "reviewer.ed25519"))


def synthetic_records(brief_path: Path, writer: str, completion: Any = person_completion) -> None:
    """A sealed inspection and a nonzero baseline through the records API, for a random-weight model that has no
    honest baseline, so that the real gate, render and launch run end to end. SYNTHETIC: never for a real run.
    `completion(row)` is a training row's right answer (default: the JSON tasks' object); `writer` names the
    benchmark."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import model_identity
    from llm_finetuning.records import baseline, inspection

    brief, errors = load_brief(brief_path)
    assert brief is not None, errors
    identity = model_identity(brief.model, brief.folder)
    names = brief.reward_names
    rows = [json.loads(line) for line in (brief.folder / "data" / "train.jsonl").read_text().splitlines()]
    samples = [{**r, "completion": completion(r), "rewards": dict.fromkeys(names, 1.0)}
               for r in (rows[i % len(rows)] for i in range(64))]  # a review needs 50-100 samples
    ipath = brief.resolve(brief.records.inspection)
    record = inspection.create_inspection(brief, samples, ipath, identity)
    for s in record["samples"]:
        inspection.set_verdict(record, s["id"], "agree", "synthetic benchmark record")
    inspection.save_progress(ipath, record)
    seal_synthetic(ipath, f"{writer} (synthetic; not a human review)")
    bpath = brief.resolve(brief.records.baseline)
    baseline.write_baseline(bpath, baseline.make_baseline(
        brief, model_identity=identity, prompts={"source": "data/train.jsonl", "count": 16, "indices": list(range(16))},
        k=8, pass_at_1=0.2, pass_at_k=0.5, mean_reward=dict.fromkeys(names, 0.2), frac_groups_all_tie=0.3,
        frac_truncated=0.0, synthetic=f"{writer}: written so the gate passes on a random-weight model"))
