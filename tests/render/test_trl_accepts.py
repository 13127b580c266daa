"""Every rendered grpo_config.yaml loads into the installed TRL: its real GRPOConfig, and the TrlParser
that `trl grpo --config` uses, with nothing left over. Field names cannot drift from TRL's."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from render_cases import CASES

# This machine has no GPU: GRPOConfig refuses bf16 without one, so the CPU switches are added on top of
# what the file says (the same flags TRL's CLI takes after --config).
CPU_SWITCHES = {"use_cpu": True, "bf16": False, "fp16": False}
# Values GRPOConfig normalises on load (report_to "none" becomes []).
NORMALISED = {"report_to"}


def _config(run_dir: Path) -> dict[str, Any]:
    return yaml.safe_load((run_dir / "grpo_config.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", CASES)
def test_grpo_config_loads_into_trl_grpoconfig(case: str, rendered: dict[str, Path]) -> None:
    from trl import GRPOConfig

    cfg = _config(rendered[case])
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    kwargs = {k: v for k, v in cfg.items() if k in fields}
    args = GRPOConfig(**{**kwargs, **CPU_SWITCHES})
    for key, value in kwargs.items():
        if key in NORMALISED or key in CPU_SWITCHES:
            continue
        assert getattr(args, key) == value, key
    # The recipe's values, not TRL 1.16's defaults.
    assert args.model_init_kwargs["dtype"] == cfg["dtype"]
    assert args.report_to == (cfg.get("report_to") if cfg.get("report_to") != "none" else [])
    assert "loss_type" in cfg and "beta" in cfg and "learning_rate" in cfg


@pytest.mark.parametrize("case", CASES)
def test_trl_cli_parser_takes_the_file_with_nothing_left_over(case: str, rendered: dict[str, Path]) -> None:
    from trl.scripts.grpo import make_parser

    path = rendered[case] / "grpo_config.yaml"
    switches = [x for k, v in CPU_SWITCHES.items() for x in (f"--{k}", str(v).lower())]
    script, training, model, data = make_parser().parse_args_and_config(
        ["--config", str(path), *switches], fail_with_unknown_args=True)
    cfg = _config(rendered[case])
    assert script.reward_funcs == cfg["reward_funcs"]
    assert model.model_name_or_path == cfg["model_name_or_path"]
    assert model.dtype == cfg["dtype"]
    assert model.use_peft == cfg["use_peft"]
    assert [d.path for d in data.datasets] == [d["path"] for d in cfg["datasets"]]
    assert training.loss_type == cfg["loss_type"] and training.beta == cfg["beta"]
    assert training.learning_rate == cfg["learning_rate"]


def test_variant_settings() -> None:
    """Each variant's defining settings, read back from the golden files."""
    from render_cases import GOLDEN

    def cfg(case: str) -> dict[str, Any]:
        return yaml.safe_load((GOLDEN / case / "grpo_config.yaml").read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    assert cfg("single-gpu-full")["loss_type"] == "grpo" and cfg("single-gpu-full")["beta"] == 0.01
    dapo = cfg("variant-dapo")
    assert (dapo["loss_type"], dapo["epsilon_high"], dapo["mask_truncated_completions"], dapo["beta"]) == \
        ("dapo", 0.28, True, 0.0)
    dr = cfg("variant-dr-grpo")
    assert (dr["loss_type"], dr["scale_rewards"]) == ("dr_grpo", "none")
    gspo = cfg("variant-gspo")
    assert (gspo["importance_sampling_level"], gspo["loss_type"], gspo["beta"]) == ("sequence", "grpo", 0.0)
    assert gspo["steps_per_generation"] == 4 * gspo["gradient_accumulation_steps"]


def test_shipped_trl_field_list_matches_installed_trl() -> None:
    from trl import DatasetMixtureConfig, GRPOConfig, ModelConfig
    from trl.scripts.grpo import GRPOScriptArguments

    from llm_finetuning.render.plan import trl_fields

    shipped = trl_fields()
    for cls in (GRPOConfig, ModelConfig, GRPOScriptArguments, DatasetMixtureConfig):
        assert shipped[cls.__name__] == sorted(f.name for f in dataclasses.fields(cls)), cls.__name__


def test_render_imports_no_ml_library() -> None:
    code = ("import sys, llm_finetuning.commands.render, llm_finetuning.render, llm_finetuning.launch; "
            "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'trl', 'vllm', 'datasets') "
            "if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_trackers_are_the_ones_transformers_reports_to() -> None:
    """brief.tracking.TRACKERS (what the gate accepts, without importing transformers) against the source."""
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    from llm_finetuning.brief.tracking import TRACKERS

    assert set(TRACKERS) == set(INTEGRATION_TO_CALLBACK)
