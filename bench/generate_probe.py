"""Probe: where a transformers `generate()` of a small model spends its time on a GPU, and which levers help.

Raw `model.generate` (no trainer) of 128 new tokens from random prompts of 32-48 tokens, a model of the
published shape with random weights in bf16, in training mode as TRL generates: the dynamic cache (TRL's
default) at batch 32 to 256, a static cache uncompiled, a static cache compiled into CUDA graphs (before and
after an in-place weight update, as an optimizer step makes), continuous batching (`generate_batch`), and one
optimizer step's forward and backward for scale. One mode per process; rows go to $OUT/probe.jsonl. The
H200's figures are in bench/results/step-speed-h200.json ("probe"); bench/step_speed.py measures the chosen
lever through the real trainer.

    python bench/generate_probe.py smollm2-135m eager      # eager | static-compiled | continuous | train
    python bench/generate_probe.py qwen2.5-1.5b static-compiled
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import torch
from _synthetic import SHAPES, random_model
from transformers import GenerationConfig

NEW_TOKENS = 128


def log(**row: Any) -> None:
    print(json.dumps(row), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def prompts(n: int, vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` left-padded random prompts of 32-48 tokens."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(32, 49, (n,), generator=g)
    width = int(lengths.max())
    ids = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.long)
    for i, length in enumerate(lengths.tolist()):
        ids[i, width - length:] = torch.randint(3, vocab, (length,), generator=g)
        mask[i, width - length:] = 1
    return ids.cuda(), mask.cuda()


def timed_generate(model: Any, vocab: int, n: int, seed: int = 0, **settings: Any) -> float:
    ids, mask = prompts(n, vocab, seed)
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=True, temperature=1.0,
                              top_p=1.0, top_k=0, pad_token_id=0, eos_token_id=2, **settings)
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    shape, mode = sys.argv[1], sys.argv[2]
    vocab = SHAPES[shape][1]["vocab_size"]
    model = random_model(shape, eos_token_id=2, pad_token_id=0, bos_token_id=1).to("cuda", torch.bfloat16)
    model.train()  # TRL generates from the model in training mode
    batches = [32, 64, 128, 256] if shape == "smollm2-135m" else [32, 128]
    if mode == "eager":
        timed_generate(model, vocab, 8)  # CUDA and kernel warm-up
        for n in batches:
            s = timed_generate(model, vocab, n)
            log(shape=shape, mode="eager-dynamic", batch=n, s=round(s, 3), tok_s=round(n * NEW_TOKENS / s))
        s = timed_generate(model, vocab, 32, cache_implementation="static", disable_compile=True)
        log(shape=shape, mode="static-uncompiled", batch=32, s=round(s, 3), tok_s=round(32 * NEW_TOKENS / s))
    elif mode == "static-compiled":
        for n in batches[:2]:
            for rep in range(3):  # the first call compiles
                s = timed_generate(model, vocab, n, seed=rep, cache_implementation="static")
                log(shape=shape, mode="static-compiled", batch=n, rep=rep, s=round(s, 3),
                    tok_s=round(n * NEW_TOKENS / s))
            with torch.no_grad():  # an optimizer step updates the weights in place: the graphs must follow
                for p in model.parameters():
                    p.add_(1e-3)
            s = timed_generate(model, vocab, n, seed=9, cache_implementation="static")
            log(shape=shape, mode="static-compiled-after-update", batch=n, s=round(s, 3),
                tok_s=round(n * NEW_TOKENS / s))
    elif mode == "continuous":
        for n in batches[:2]:
            for rep in range(2):
                ids, mask = prompts(n, vocab, seed=rep)
                rows = [row[m.bool()].tolist() for row, m in zip(ids.cpu(), mask.cpu(), strict=True)]
                config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=True, temperature=1.0, top_p=1.0,
                                          top_k=0, pad_token_id=0, eos_token_id=2)
                torch.cuda.synchronize()
                start = time.perf_counter()
                with torch.no_grad():
                    outputs = model.generate_batch(rows, generation_config=config, progress_bar=False)
                torch.cuda.synchronize()
                s = time.perf_counter() - start
                tokens = sum(len(o.generated_tokens) for o in outputs.values())
                log(shape=shape, mode="continuous-batching", batch=n, rep=rep, tokens=tokens, s=round(s, 3),
                    tok_s=round(tokens / s))
    elif mode == "train":  # one optimizer step: 32 sequences of 176 tokens in micro-batches of 8
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
        for rep in range(3):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _micro in range(4):
                logits = model(input_ids=torch.randint(3, vocab, (8, 176), device="cuda")).logits
                torch.log_softmax(logits.float(), -1).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.synchronize()
            log(shape=shape, mode="train-step-32x176", rep=rep, s=round(time.perf_counter() - start, 3))
    log(shape=shape, mode=mode, peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2))


if __name__ == "__main__":
    main()
