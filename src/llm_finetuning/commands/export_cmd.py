"""`finetune export RUN_DIR -o DIR`: the trained model as a plain Hugging Face folder with a model card.

The folder loads with `AutoModelForCausalLM.from_pretrained(DIR)` (a LoRA adapter merged with --merge;
without it, the adapter folder whose config names its base). README.md is generated from the brief, the
records, the gate, the run's figures, `finetune eval`'s result and the diagnosis. Refuses an unfinished
run unless a checkpoint is named, and a non-empty DIR without --force. Exit 0 written, 2 unusable.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("-o", "--out", "dest", required=True, type=click.Path(path_type=Path), help="Folder to write.")
@click.option("--checkpoint", default=None, metavar="STEP|final",
              help="Which saved model (default: the final model of a finished run).")
@click.option("--merge", is_flag=True, help="Merge a LoRA adapter into its base model (a standalone model folder).")
@click.option("--dtype", type=click.Choice(["bfloat16", "float16", "float32"]), default=None,
              help="Weights' dtype (default: the brief's model.dtype).")
@click.option("--force", is_flag=True, help="Replace DIR when it is not empty.")
@click.option("--brief", "brief_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="RUN_DIR is a model folder trained outside `finetune launch` (no run manifest): describe it with "
                   "this brief; the card says no gate verdict stands behind it.")
def command(run_dir: Path, dest: Path, checkpoint: str | None, merge: bool, dtype: str | None, force: bool,
            brief_path: Path | None) -> None:
    """Write RUN_DIR's model (or a checkpoint) as a Hugging Face folder with a generated model card."""
    from llm_finetuning.evaluation.targets import NO_RUN_MANIFEST
    from llm_finetuning.export.folder import export_model

    done = export_model(run_dir, dest, checkpoint, merge, dtype, force, brief_path)
    if not done.run_manifest:
        click.echo(f"warning: {NO_RUN_MANIFEST}", err=True)
    what = ("LoRA adapter merged into " if done.merged else "LoRA adapter for " if done.target.adapter
            else "full weights of a fine-tune of ") + done.base_model
    click.echo(f"Exported {done.target.label} ({what}, {done.dtype}) to {done.folder}")
    click.echo(f"  model card: {done.folder / 'README.md'}")
    click.echo(f"  {done.upload_hint}")
