"""Experiment tracking: the `report_to` names TRL 1.16 (through transformers 5) accepts, what each needs
installed, and the GRPOConfig entries the brief's `tracking` section renders to.

Pure (no transformers import): a test compares TRACKERS with transformers' own INTEGRATION_TO_CALLBACK,
so a name transformers adds or drops shows up as a failing test, not as a run that dies at start.
`metrics.jsonl` is written by `finetune launch` whatever is chosen here; it is what `diagnose` reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llm_finetuning.brief.sections import TrackingSpec
    from llm_finetuning.brief.variants import ConfigValue

# report_to name -> (module that must import, the pip install that provides it)
TRACKERS: dict[str, tuple[str, str]] = {
    "azure_ml": ("azureml.core", "pip install azureml-core"),
    "clearml": ("clearml", "pip install clearml"),
    "codecarbon": ("codecarbon", "pip install codecarbon"),
    "comet_ml": ("comet_ml", "pip install comet-ml"),
    "dagshub": ("dagshub", "pip install dagshub mlflow"),
    "dvclive": ("dvclive", "pip install dvclive"),
    "flyte": ("flytekit", "pip install flytekit"),
    "kubeflow": ("kubeflow.trainer", "pip install kubeflow"),
    "mlflow": ("mlflow", "pip install mlflow"),
    "neptune": ("neptune", "pip install neptune"),
    "swanlab": ("swanlab", "pip install swanlab"),
    "tensorboard": ("tensorboard", "pip install tensorboard"),
    "trackio": ("trackio", "pip install trackio"),
    "wandb": ("wandb", "pip install wandb"),
}
TENSORBOARD_DIR = "tensorboard"  # inside RUN_DIR; `finetune launch` points TENSORBOARD_LOGGING_DIR at it


def tracking_entries(tracking: TrackingSpec, brief_name: str) -> list[tuple[str, ConfigValue, str]]:
    """(GRPOConfig key, value, why) for the brief's `tracking` section."""
    report_to = list(tracking.report_to)
    if not report_to:
        return [("report_to", "none", "metrics go to metrics.jsonl (finetune launch) and trainer_state.json")]
    out: list[tuple[str, ConfigValue, str]] = [
        ("report_to", report_to, "tracking.report_to; metrics.jsonl is still written for finetune diagnose"),
        ("run_name", tracking.run_name or brief_name, "tracking.run_name" if tracking.run_name
         else "the brief's name (tracking.run_name unset)"),
    ]
    if tracking.project:
        out.append(("project", tracking.project, "tracking.project"))
    return out
