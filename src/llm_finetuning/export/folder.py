"""Write an exported model folder: weights (or the adapter), tokenizer and chat template, model card.

Built in a temporary sibling of DIR and renamed into place, so DIR is never left half written. Full
fine-tuning and a merged adapter are loaded and saved through transformers in the chosen dtype (which
drops the trainer's optimizer and RNG state); an unmerged adapter is copied with its config naming the
base model. Heavy imports stay inside functions.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from llm_finetuning.brief import Brief
from llm_finetuning.errors import UnusableInput
from llm_finetuning.evaluation.targets import (
    Target,
    copy_tokenizer,
    folder_sha256,
    merge_adapter,
    model_folder_target,
    saved_checkpoints,
    select_targets,
)
from llm_finetuning.fileio import atomic_write_json, folder_swap, utc_now
from llm_finetuning.rundir import MANIFEST, METRICS, run_finished

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
PROVENANCE = "llm-finetuning-export.json"
DTYPES = ("bfloat16", "float16", "float32")


@dataclass
class Exported:
    folder: Path
    target: Target
    merged: bool
    dtype: str
    base_model: str
    upload_hint: str
    run_manifest: bool = True  # False: a model folder trained outside `finetune launch`


def choose_target(run_dir: Path, checkpoint: str | None) -> Target:
    """The final model of a finished run, or the named checkpoint; an unfinished run needs one named."""
    if checkpoint is None:
        if not run_finished(run_dir):
            steps = ", ".join(str(t.step) for t in saved_checkpoints(run_dir))
            raise UnusableInput(f"{run_dir} has not finished training (no final model with the end marker in "
                                f"{METRICS}{'; committed checkpoints: ' + steps if steps else ''})",
                                "export a checkpoint you have evaluated with --checkpoint STEP, or finish the run "
                                "with `finetune launch RUN_DIR --resume`", "--checkpoint")
        checkpoint = "final"
    if checkpoint == "all":
        raise UnusableInput("--checkpoint all names several models; export takes one",
                            "pass --checkpoint STEP or final", "--checkpoint")
    return select_targets(run_dir, checkpoint)[0]


def prepare_dest(dest: Path, force: bool) -> None:
    if dest.exists() and not dest.is_dir():
        raise UnusableInput(f"-o {dest} is a file", "name a folder", "-o")
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise UnusableInput(f"-o {dest} is not empty", "name an empty or new folder, or pass --force to replace it",
                            "-o")


def base_model_name(brief: Brief) -> str:
    """What the card and an adapter's config name as the base: the hub id, or the local model as the brief names it."""
    return brief.model.id


def _save_full(source: Path, tmp: Path, dtype: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=getattr(torch, dtype))
    model.save_pretrained(tmp)


def _copy_adapter(target: Target, tmp: Path, brief: Brief) -> None:
    from llm_finetuning.models import resolve_model

    for name in ADAPTER_FILES:
        if (target.folder / name).is_file():
            shutil.copy2(target.folder / name, tmp / name)
    config = json.loads((tmp / "adapter_config.json").read_text(encoding="utf-8"))
    resolved = resolve_model(brief.model, brief.folder)
    # a hub model is named by its id; a local or dequantised one by the folder this machine loads it from
    config["base_model_name_or_path"] = resolved.path if resolved.is_local else resolved.source
    (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def export_model(run_dir: Path, dest: Path, checkpoint: str | None, merge: bool, dtype: str | None,
                 force: bool, brief_path: Path | None = None) -> Exported:
    """Write DIR and return what was written. `brief_path`: `run_dir` is a model folder without a run manifest
    (trained outside `finetune launch`), described with this brief; the card says no gate verdict stands behind it."""
    from llm_finetuning.evaluation.run import brief_and_manifest
    from llm_finetuning.export.card import render_card
    from llm_finetuning.export.evidence import gather

    run_dir = Path(run_dir).resolve()
    brief, manifest = brief_and_manifest(run_dir, brief_path)
    target = choose_target(run_dir, checkpoint) if manifest else model_folder_target(run_dir, checkpoint)
    prepare_dest(dest, force)
    dtype = dtype or brief.model.dtype
    if dtype not in DTYPES:
        raise UnusableInput(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}", "pass --dtype bfloat16", "--dtype")
    if merge and not target.adapter:
        raise UnusableInput(f"--merge: {target.folder} holds full weights, not a LoRA adapter",
                            "drop --merge (full fine-tuning exports the weights themselves)", "--merge")
    dest = dest.resolve()
    with folder_swap(dest) as tmp:
        if target.adapter and merge:
            merged_dir = tmp / "merged"
            merge_adapter(target.folder, brief, merged_dir, dtype)
            for item in merged_dir.iterdir():
                os.replace(item, tmp / item.name)
            merged_dir.rmdir()
            (tmp / "llm-finetuning-merged.json").unlink(missing_ok=True)
        elif target.adapter:
            _copy_adapter(target, tmp, brief)
        else:
            _save_full(target.folder, tmp, dtype)
        if not copy_tokenizer(target.folder, tmp):
            raise UnusableInput(f"{target.folder} holds no tokenizer", "train the run again with this version",
                                str(target.folder))
        sha = folder_sha256(target.folder)
        hint = upload_hint(dest, brief.name)
        ev = gather(brief, run_dir, target.label, target.step, sha, target.adapter, merge, dtype, base_model_name(brief),
                    run_manifest=manifest)
        (tmp / "README.md").write_text(render_card(ev, hint), encoding="utf-8")
        atomic_write_json(tmp / PROVENANCE, {
            "format": "llm-finetuning/export@1", "created_at": utc_now(), "run_dir": str(run_dir),
            "brief": {"path": str(brief.path), "sha256": brief.sha256}, "checkpoint": target.label,
            "step": target.step, "checkpoint_sha256": sha, "adapter": target.adapter, "merged": merge,
            "run_manifest": str(run_dir / MANIFEST) if manifest else None,
            "dtype": dtype, "baseline_digest": ev.baseline.digest if ev.baseline else None,
            "eval": {"delta_pass_at_1": ev.evaluation.delta_pass_at_1, "ci95": list(ev.evaluation.ci95),
                     "beyond_noise": ev.evaluation.beyond_noise} if ev.evaluation else None,
        })
        for item in tmp.iterdir():  # temporary files are created private; the folder is meant to be shared
            item.chmod(0o644)
    return Exported(dest, target, merge, dtype, base_model_name(brief), hint, manifest)


def upload_hint(dest: Path, name: str) -> str:
    return (f"To publish it on the Hugging Face hub (needs an account and `hf auth login`): "
            f"`hf upload YOUR-USER/{name} {dest} --repo-type model`")
