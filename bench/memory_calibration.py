"""Measure the peak GPU memory of short TRL GRPO runs, to calibrate `finetune memory`.

Each point builds a model of a real published shape (from llm_finetuning.memory.shapes) with random
weights directly on the GPU (memory does not depend on weight values), runs TRL's GRPOTrainer for a
few steps with transformers generation and a random reward, and records torch's peak allocated and
reserved memory, overall and by phase (generation, the rest of the step), with the exact settings.

Every point runs in a forked child (the parent imports the ML stack once and never touches CUDA), so
each one starts from an empty allocator. Results go one JSON object a line to OUT (default
$OUT/memory-h200.jsonl), flushed after each point, so a run stopped at its time limit keeps what it
measured. Usage on the GPU machine:

    python bench/memory_calibration.py --tokenizer .calib/tok --budget-s 420

`--cpu` runs a 2-layer smoke version on the CPU (checks the script, measures nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from llm_finetuning.memory.shapes import ModelShape, lookup  # noqa: E402

GIB = 1024**3

# Points in priority order: each is one short GRPO run. Keys: model (hub id of the shape), adapter
# (full|lora), dtype (the dtype the model is loaded in; float32 reproduces TRL's default for a path),
# beta, gc (gradient checkpointing), B (per-device batch = generation batch, G divides it), G,
# L (max_completion_length), P (prompt tokens), GA (gradient accumulation = steps per generation, 1
# when absent).
POINTS: list[dict[str, Any]] = [
    dict(model="Qwen/Qwen2.5-0.5B", adapter="full", dtype="bfloat16", beta=0.04, gc=False, B=8, G=8, L=128, P=64),
    dict(model="Qwen/Qwen2.5-1.5B", adapter="full", dtype="bfloat16", beta=0.04, gc=False, B=8, G=8, L=128, P=64),
    dict(model="Qwen/Qwen2.5-7B", adapter="full", dtype="bfloat16", beta=0.04, gc=True, B=8, G=8, L=128, P=128),
    dict(model="Qwen/Qwen2.5-7B", adapter="full", dtype="float32", beta=0.04, gc=True, B=8, G=8, L=64, P=64),
    dict(model="Qwen/Qwen2.5-1.5B", adapter="full", dtype="bfloat16", beta=0.04, gc=True, B=16, G=8, L=128, P=512),
    dict(model="Qwen/Qwen2.5-1.5B", adapter="lora", dtype="bfloat16", beta=0.04, gc=False, B=16, G=8, L=128, P=256),
    dict(model="Qwen/Qwen2.5-7B", adapter="lora", dtype="bfloat16", beta=0.04, gc=False, B=8, G=8, L=128, P=128),
    dict(model="Qwen/Qwen2.5-1.5B", adapter="full", dtype="float32", beta=0.04, gc=True, B=8, G=8, L=128, P=64),
    dict(model="Qwen/Qwen2.5-0.5B", adapter="full", dtype="bfloat16", beta=0.0, gc=True, B=16, G=8, L=256, P=256),
    dict(model="meta-llama/Llama-3.2-3B", adapter="full", dtype="bfloat16", beta=0.0, gc=False, B=8, G=8, L=128,
         P=128),
    dict(model="Qwen/Qwen3-8B", adapter="full", dtype="bfloat16", beta=0.0, gc=False, B=8, G=8, L=128, P=256),
    dict(model="Qwen/Qwen2.5-14B", adapter="lora", dtype="bfloat16", beta=0.04, gc=True, B=8, G=8, L=64, P=128),
    dict(model="Qwen/Qwen2.5-3B", adapter="lora", dtype="bfloat16", beta=0.04, gc=True, B=16, G=8, L=128, P=512),
    dict(model="Qwen/Qwen2.5-14B", adapter="full", dtype="bfloat16", beta=0.0, gc=True, B=8, G=8, L=64, P=128),
]

# Held out: measured after the constants were tuned on POINTS, to check the estimator on shapes and
# settings it was not fitted to (qk-norm Qwen3, Llama-3.1-8B, 32B, generation-bound with GA=8, and an
# activation-bound OOM).
VALIDATION: list[dict[str, Any]] = [
    dict(model="Qwen/Qwen2.5-1.5B", adapter="lora", dtype="bfloat16", beta=0.04, gc=True, B=8, GA=8, G=8, L=128,
         P=1024),
    dict(model="Qwen/Qwen3-4B", adapter="full", dtype="bfloat16", beta=0.04, gc=False, B=8, G=8, L=128, P=256),
    dict(model="Qwen/Qwen2.5-7B", adapter="full", dtype="bfloat16", beta=0.04, gc=False, B=16, G=8, L=128, P=1024),
    dict(model="meta-llama/Llama-3.1-8B", adapter="lora", dtype="bfloat16", beta=0.04, gc=False, B=16, G=8, L=128,
         P=512),
    dict(model="Qwen/Qwen2.5-7B", adapter="full", dtype="bfloat16", beta=0.04, gc=False, B=8, G=8, L=128, P=512),
    dict(model="Qwen/Qwen2.5-32B", adapter="lora", dtype="bfloat16", beta=0.04, gc=True, B=8, G=8, L=64, P=128),
]

# LoRA on float32 weights (a model path with no dtype, TRL's default): an outside check found these
# over-predicted by 24-42% at G=8, batch 8 x 4, 256-token completions, 64-token prompts, beta 0.01.
LORA_FLOAT32: list[dict[str, Any]] = [
    dict(model=m, adapter="lora", dtype="float32", beta=0.01, gc=True, B=8, GA=4, G=8, L=256, P=64)
    for m in ("Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-7B")
]

SMOKE = dict(model="smoke", adapter="full", dtype="float32", beta=0.04, gc=True, B=4, G=4, L=8, P=8)


def hf_config(shape: ModelShape) -> Any:
    """A transformers config of the shape's family (Qwen2, Qwen3 or Llama), random-init friendly."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    common = dict(
        vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        tie_word_embeddings=shape.tie_word_embeddings, max_position_embeddings=4096,
    )
    if shape.family == "qwen2":
        return Qwen2Config(**common)
    if shape.family == "qwen3":
        return Qwen3Config(head_dim=shape.d_head, **common)
    return LlamaConfig(head_dim=shape.d_head, **common)


def grpo_kwargs(point: dict[str, Any], cpu: bool = False) -> dict[str, Any]:
    """The GRPOConfig keyword arguments of one point (everything else is TRL 1.16's default)."""
    return dict(
        per_device_train_batch_size=point["B"], num_generations=point["G"],
        gradient_accumulation_steps=point.get("GA", 1), max_completion_length=point["L"],
        max_steps=point.get("steps", 2), learning_rate=1e-6, beta=point["beta"], gradient_checkpointing=point["gc"],
        logging_steps=1, report_to="none", save_strategy="no",
        model_init_kwargs=None if point["dtype"] == "float32" else {"dtype": point["dtype"]},
        seed=0, temperature=1.0, disable_tqdm=True, dataloader_num_workers=0, use_cpu=cpu, bf16=not cpu,
    )


def run_settings(point: dict[str, Any], cpu: bool = False) -> dict[str, Any]:
    """Everything that decides a point's memory, recorded beside its measurements."""
    return {
        "grpo_config": grpo_kwargs(point, cpu),
        "peft": {"r": 16, "lora_alpha": 32, "target_modules": "all-linear"} if point["adapter"] == "lora" else None,
        "generation": "transformers generate (use_vllm=False)",
        "prompt": f"' 7' x {point['P']} (exactly {point['P']} tokens, plain text, no chat template)",
        "reward": "uniform random in [0, 1)",
        "weights": "random, built on the GPU from the published config in the model's dtype",
        "attention": "transformers default (sdpa)",
        "tokenizer": "llm_finetuning.testing.tiny tokenizer (ids < 512), model vocabulary as published",
    }


def run_point(point: dict[str, Any], tokenizer_dir: str, cpu: bool) -> dict[str, Any]:
    """One GRPO run; returns the measurements (called in a forked child)."""
    import torch
    import trl.trainer.grpo_trainer as grpo_mod
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    device = "cpu" if cpu else "cuda"
    tok = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    if point["model"] == "smoke":
        shape = ModelShape("smoke", "qwen2", 64, 2, 4, 2, 128, 512, True)
    else:
        found = lookup(point["model"])
        assert found is not None, point["model"]
        shape = found
    config = hf_config(shape)
    config.eos_token_id = tok.eos_token_id
    config.pad_token_id = tok.pad_token_id
    config._name_or_path = "calib:" + shape.name

    def build(name: str, **kwargs: Any) -> Any:
        """Stands in for TRL's create_model_from_path: the shape, random weights, built on the device."""
        dtype = kwargs.get("dtype", "float32")  # TRL's default when model_init_kwargs has no dtype
        dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        model.config._name_or_path = name
        model.generation_config.eos_token_id = tok.eos_token_id
        model.generation_config.pad_token_id = tok.pad_token_id
        return model

    grpo_mod.create_model_from_path = build
    marks: list[dict[str, Any]] = []

    def mark(label: str) -> None:
        if cpu:
            marks.append({"label": label})
            return
        torch.cuda.synchronize()
        marks.append({
            "label": label,
            "alloc_now_gib": torch.cuda.memory_allocated() / GIB,
            "peak_alloc_gib": torch.cuda.max_memory_allocated() / GIB,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
        })
        torch.cuda.reset_peak_memory_stats()

    original_generate = grpo_mod.GRPOTrainer._generate_single_turn

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        mark("before_generation")
        out = original_generate(self, *args, **kwargs)
        mark("generation")
        return out

    grpo_mod.GRPOTrainer._generate_single_turn = generate

    class StepMarks(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            mark(f"train_step_{state.global_step}")

    word = " 7"
    assert len(tok(word * 4)["input_ids"]) == 4, "the tiny tokenizer must encode ' 7' as one token"
    prompts = [word * point["P"] for _ in range(64)]
    dataset = Dataset.from_dict({"prompt": prompts})
    rng = random.Random(0)

    def reward(completions: list[str], **_: Any) -> list[float]:
        return [rng.random() for _ in completions]

    peft_config = None
    if point["adapter"] == "lora":
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")
    config_kwargs = grpo_kwargs(point, cpu)
    args = GRPOConfig(output_dir="/tmp/calib-out", **config_kwargs)
    result: dict[str, Any] = {"point": point, "params": shape.params(), "shape": shape.to_json(),
                              "settings": run_settings(point, cpu),
                              "optim": str(args.optim), "steps": args.max_steps}
    t0 = time.time()
    if not cpu:
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        free0, total = torch.cuda.mem_get_info()
        result["device_total_gib"] = total / GIB
        result["context_gib"] = (total - free0) / GIB  # CUDA context + library handles, before any model
    try:
        trainer = GRPOTrainer(model="calib:" + shape.name, reward_funcs=reward, args=args, train_dataset=dataset,
                              processing_class=tok, peft_config=peft_config, callbacks=[StepMarks()])
        mark("init")
        result["ref_model"] = trainer.ref_model is not None
        result["policy_dtype"] = str(next(trainer.model.parameters()).dtype)
        trainer.train()
        result["oom"] = False
        logs = [h for h in trainer.state.log_history if "completions/mean_length" in h]
        result["completion_mean_length"] = [h["completions/mean_length"] for h in logs]
    except torch.OutOfMemoryError as exc:
        result["oom"] = True
        result["oom_message"] = str(exc).splitlines()[0][:300]
        marks.append({"label": "oom", "peak_alloc_gib": torch.cuda.max_memory_allocated() / GIB,
                      "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB})
    result["seconds"] = round(time.time() - t0, 1)
    result["marks"] = marks
    if not cpu:
        result["peak_alloc_gib"] = max(m["peak_alloc_gib"] for m in marks)
        result["peak_reserved_gib"] = max(m["peak_reserved_gib"] for m in marks)
        free, total = torch.cuda.mem_get_info()
        result["device_used_end_gib"] = (total - free) / GIB
        result["reserved_end_gib"] = torch.cuda.memory_reserved() / GIB
    import transformers
    import trl

    result["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                          "trl": trl.__version__, "gpu": None if cpu else torch.cuda.get_device_name()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", required=True, help="a tokenizer dir (llm_finetuning.testing.tiny)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "memory-h200.jsonl"))
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no point after this many seconds")
    parser.add_argument("--point-timeout-s", type=float, default=150.0)
    parser.add_argument("--only", type=int, nargs="*", help="indices into POINTS")
    parser.add_argument("--validation", action="store_true", help="run the held-out VALIDATION points")
    parser.add_argument("--lora-float32", action="store_true", help="run the LORA_FLOAT32 points")
    parser.add_argument("--cpu", action="store_true", help="smoke run of the script on the CPU")
    ns = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "")
    # Import the heavy stack once in the parent (no CUDA use here), so each forked child starts fast.
    import datasets  # noqa: F401
    import peft  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import trl  # noqa: F401

    chosen = VALIDATION if ns.validation else LORA_FLOAT32 if ns.lora_float32 else POINTS
    points = [SMOKE] if ns.cpu else [chosen[i] for i in (ns.only if ns.only is not None else range(len(chosen)))]
    start = time.time()
    with open(ns.out, "a") as out:
        for index, point in enumerate(points):
            if time.time() - start > ns.budget_s:
                print(f"budget spent: skipped {len(points) - index} point(s)", flush=True)
                break
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                try:
                    res = run_point(point, ns.tokenizer, ns.cpu)
                except Exception as exc:  # report any failure as data, never hang the sweep
                    res = {"point": point, "error": f"{type(exc).__name__}: {exc}"[:500]}
                os.write(write_fd, json.dumps(res).encode())
                os.close(write_fd)
                os._exit(0)
            os.close(write_fd)
            deadline = time.time() + ns.point_timeout_s
            chunks = []
            os.set_blocking(read_fd, False)
            while True:
                try:
                    data = os.read(read_fd, 1 << 16)
                    if not data:
                        break
                    chunks.append(data)
                except BlockingIOError:
                    if time.time() > deadline:
                        os.kill(pid, signal.SIGKILL)
                        chunks = [json.dumps({"point": point, "error": "timeout"}).encode()]
                        break
                    time.sleep(0.2)
            os.close(read_fd)
            os.waitpid(pid, 0)
            line = b"".join(chunks).decode() or json.dumps({"point": point, "error": "child died"})
            res = json.loads(line)
            out.write(json.dumps(res) + "\n")
            out.flush()
            brief = {k: res.get(k) for k in ("peak_alloc_gib", "peak_reserved_gib", "oom", "seconds", "error")}
            print(json.dumps({"point": point, **brief}), flush=True)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
