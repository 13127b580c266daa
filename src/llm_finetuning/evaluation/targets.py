"""A run's checkpoints as models to sample: which ones exist, and each as a folder any backend loads.

A run directory holds `model/` (the final weights, or the LoRA adapter, with the tokenizer) once
training ended, and `checkpoints/checkpoint-<step>/` for every save that was committed. A LoRA adapter
is merged into the brief's base model in a cache folder inside the run (`.eval-models/`, keyed by the
adapter's files and the base model's identity), so vLLM, an endpoint and transformers all sample the same plain
checkpoint. Heavy imports stay inside functions.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning.brief import Brief
from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import folder_swap, sha256_bytes
from llm_finetuning.rundir import CHECKPOINTS, FINAL_MODEL, end_step
from llm_finetuning.rundir.checkpoints import complete_checkpoints

MERGED_CACHE = ".eval-models"
MERGED_MARKER = "llm-finetuning-merged.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json")


@dataclass(frozen=True)
class Target:
    """One saved model of a run: `final` (RUN_DIR/model) or `checkpoint-<step>`."""

    label: str
    step: int | None
    folder: Path

    @property
    def adapter(self) -> bool:
        return (self.folder / "adapter_config.json").is_file()


NO_RUN_MANIFEST = ("no run manifest: this model was not trained through `finetune launch`, so no gate verdict "
                   "stands behind it")
FIX_NO_RUN_MANIFEST = ("train it through the gate: `finetune gate BRIEF`, `finetune render BRIEF -o RUN_DIR`, "
                       "`finetune launch RUN_DIR --detach`, then name RUN_DIR; or pass --brief BRIEF to score this "
                       "model against that brief's baseline anyway (the result says it has no run manifest)")


def is_model_folder(folder: Path) -> bool:
    """A saved model or LoRA adapter (transformers' config.json, or PEFT's adapter_config.json)."""
    return any((Path(folder) / name).is_file() for name in ("config.json", "adapter_config.json"))


def model_folder_target(folder: Path, which: str | None) -> Target:
    """A model folder without a run manifest as the one model to evaluate or export (it has no checkpoints)."""
    folder = Path(folder)
    if which not in (None, "final"):
        raise UnusableInput(f"--checkpoint {which}: {folder} is a model folder, not a run directory with checkpoints",
                            "drop --checkpoint", "--checkpoint")
    if not is_model_folder(folder):
        raise UnusableInput(f"{folder} holds no model (no config.json or adapter_config.json)",
                            "name the folder a model was saved to", str(folder))
    return Target("final", None, folder)


def saved_checkpoints(run_dir: Path) -> list[Target]:
    return [Target(f"checkpoint-{step}", step, path) for step, path in complete_checkpoints(run_dir)]


def final_target(run_dir: Path) -> Target:
    folder = Path(run_dir) / FINAL_MODEL
    if not folder.is_dir():
        steps = ", ".join(str(t.step) for t in saved_checkpoints(run_dir)) or "none"
        raise UnusableInput(f"{folder} does not exist: the run has not finished (committed checkpoints: {steps})",
                            "finish it with `finetune launch RUN_DIR --resume`, or name one with --checkpoint STEP",
                            "--checkpoint")
    return Target("final", end_step(run_dir), folder)


def select_targets(run_dir: Path, which: str) -> list[Target]:
    """`final`, a step number, or `all` (every committed checkpoint, then the final model unless a checkpoint
    at the same step already holds the same weights)."""
    run_dir = Path(run_dir)
    if which == "final":
        return [final_target(run_dir)]
    saved = saved_checkpoints(run_dir)
    if which == "all":
        targets = list(saved)
        final = run_dir / FINAL_MODEL
        if final.is_dir() and (end_step(run_dir) is None or end_step(run_dir) not in {t.step for t in saved}):
            targets.append(Target("final", end_step(run_dir), final))
        if not targets:
            raise UnusableInput(f"{run_dir} holds no committed checkpoint and no final model",
                                "train first: `finetune launch RUN_DIR`", "--checkpoint")
        return targets
    if not which.isdigit():
        raise UnusableInput(f"--checkpoint {which!r} is not a step number, final or all",
                            "pass e.g. --checkpoint 8, --checkpoint final or --checkpoint all", "--checkpoint")
    chosen = [t for t in saved if t.step == int(which)]
    if not chosen:
        steps = ", ".join(str(t.step) for t in saved) or "none"
        raise UnusableInput(f"{run_dir / CHECKPOINTS} has no committed checkpoint-{which} (committed: {steps})",
                            "name one of the committed steps, or --checkpoint final", "--checkpoint")
    return chosen


def folder_sha256(folder: Path) -> str:
    """sha256 over the files of a saved model (as `models.model_identity` binds a local model)."""
    from llm_finetuning.models import ModelName, model_identity

    return model_identity(ModelName(str(Path(folder).resolve()))).rsplit("sha256:", 1)[1]


def copy_tokenizer(source: Path, dest: Path) -> bool:
    """Copy the tokenizer files of `source` into `dest`; False when `source` has none."""
    found = [source / name for name in TOKENIZER_FILES if (source / name).is_file()]
    for path in found:
        shutil.copy2(path, dest / path.name)
    return bool(found)


def merge_adapter(adapter_dir: Path, brief: Brief, out: Path, dtype: str = "float32") -> Path:
    """The LoRA adapter in `adapter_dir` merged into the brief's base model, saved (with the tokenizer) as a
    plain checkpoint at `out`. Written to a temporary sibling and renamed, so a crash leaves no half folder."""
    import torch
    from peft import PeftModel

    from llm_finetuning.models import load_model, load_tokenizer, resolve_model

    resolved = resolve_model(brief.model, brief.folder)
    print(f"Merging the LoRA adapter {adapter_dir} into {resolved.display} ({dtype})...", file=sys.stderr, flush=True)
    base = load_model(resolved, dtype, "cpu")
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.to(getattr(torch, dtype))
    with folder_swap(out) as tmp:
        merged.save_pretrained(tmp)
        if not copy_tokenizer(adapter_dir, tmp):
            load_tokenizer(resolved).save_pretrained(tmp)
        marker = {"adapter": str(adapter_dir), "base": resolved.identity, "dtype": dtype}
        (tmp / MERGED_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    return out


def merged_key(target: Target, brief: Brief) -> str:
    """What a merged model is kept under: the adapter's files and the base model it is merged into (a changed base,
    a local folder's files or another model.id, is merged again)."""
    from llm_finetuning.models import model_identity

    base = model_identity(brief.model, brief.folder)
    return sha256_bytes(f"{folder_sha256(target.folder)}\0{base}".encode())[:12]


def sampling_folder(target: Target, brief: Brief, run_dir: Path) -> Path:
    """A folder every backend loads for `target`: the saved folder itself, or its adapter merged (cached)."""
    if not target.adapter:
        if not any((target.folder / name).is_file() for name in TOKENIZER_FILES):
            raise UnusableInput(f"{target.folder} holds no tokenizer", "render and train the run again with this "
                                "version of llm-finetuning (it saves the tokenizer with every checkpoint)",
                                str(target.folder))
        return target.folder
    out = Path(run_dir) / MERGED_CACHE / f"{target.label}-{merged_key(target, brief)}"
    if (out / MERGED_MARKER).is_file():
        return out
    return merge_adapter(target.folder, brief, out)
