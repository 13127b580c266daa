"""`data.chat_template_kwargs` reaches every place a prompt is rendered, and the records bind it.

The model here has a chat template that refuses to render unless `enable_thinking` is given and false
(as a Qwen3-style switch would be used), so a verb that dropped the brief's kwargs fails outright.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from launch_cases import child_env, copy_model, finetune, make_brief

THINKING_TEMPLATE = (
    "{% if enable_thinking is not defined or enable_thinking %}"
    "{{ raise_exception('this test model renders prompts only with enable_thinking false') }}{% endif %}"
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n{% endif %}"
)
KWARGS = {"enable_thinking": False}


@pytest.fixture(scope="module")
def thinking_model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import PreTrainedTokenizerFast

    model = copy_model(tiny_model_dir, tmp_path_factory.mktemp("thinking") / "tiny")
    tok = PreTrainedTokenizerFast.from_pretrained(model)
    tok.chat_template = THINKING_TEMPLATE
    tok.save_pretrained(model)
    return model


def with_kwargs(brief: Path, kwargs: dict[str, object] | None, overrides: dict[str, object] | None = None) -> Path:
    data = yaml.safe_load(brief.read_text())
    if kwargs is None:
        data["data"].pop("chat_template_kwargs", None)
    else:
        data["data"]["chat_template_kwargs"] = kwargs
    if overrides is not None:
        data["grpo"]["overrides"] = overrides
    brief.write_text(yaml.safe_dump(data, sort_keys=False))
    return brief


def test_gate_binds_the_kwargs_and_refuses_them_as_an_override(tiny_model_dir: Path, tmp_path: Path) -> None:
    brief = make_brief(tmp_path / "b", tiny_model_dir)  # records made with no kwargs
    assert finetune("gate", str(brief)).returncode == 0
    with_kwargs(brief, KWARGS)
    gate = finetune("gate", str(brief))
    assert gate.returncode == 1
    assert "data.chat_template_kwargs changed since the record: {} -> {'enable_thinking': False}" in gate.stdout
    with_kwargs(brief, None, overrides={"chat_template_kwargs": KWARGS})
    gate = finetune("gate", str(brief))
    assert "grpo.overrides.chat_template_kwargs" in gate.stdout and "set data.chat_template_kwargs instead" in gate.stdout


def test_render_writes_the_kwargs(tiny_model_dir: Path, tmp_path: Path) -> None:
    from _synthetic import synthetic_records

    brief = with_kwargs(make_brief(tmp_path / "b", tiny_model_dir, records=False), KWARGS)
    synthetic_records(brief, "llm-finetuning tests")
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    config = yaml.safe_load((run / "grpo_config.yaml").read_text())
    assert config["chat_template_kwargs"] == KWARGS


@pytest.mark.slow
def test_sampling_renders_prompts_with_the_kwargs(thinking_model: Path) -> None:
    from llm_finetuning.models import ResolvedModel, load_tokenizer
    from llm_finetuning.sampling.chat import render_prompt

    tok = load_tokenizer(ResolvedModel(str(thinking_model), None, None, "test", True))
    messages = [{"role": "user", "content": "hi"}]
    assert render_prompt(tok, messages, KWARGS).endswith("<think>\n\n</think>\n\n")
    with pytest.raises(Exception, match="enable_thinking false"):
        render_prompt(tok, messages)


@pytest.mark.slow
def test_baseline_and_launch_use_the_kwargs(thinking_model: Path, tmp_path: Path) -> None:
    """Both would fail in the template if the brief's kwargs did not reach it."""
    from _synthetic import synthetic_records

    brief = with_kwargs(make_brief(tmp_path / "b", thinking_model, max_steps=1, save_steps=1, records=False), KWARGS)
    baseline = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "baseline", str(brief), "--prompts", "2",
                               "--k", "2", "--json"], env=child_env(), capture_output=True, text=True, timeout=600)
    assert baseline.returncode == 0, baseline.stderr[-3000:]
    synthetic_records(brief, "llm-finetuning tests")
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    launch = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "launch", str(run)], env=child_env(),
                            capture_output=True, text=True, timeout=600)
    assert launch.returncode == 0, launch.stderr[-3000:]
    assert (run / "model").is_dir()
