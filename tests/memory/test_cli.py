"""`finetune memory`: exit codes, the JSON contract, overrides, and no ML import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from llm_finetuning.cli import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["memory", *args])  # through the CLI, which turns Problems into exit codes


def test_json_object_has_the_contract_fields_and_exit_0_when_it_fits() -> None:
    res = run("--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu-memory-gib", "141", "--generation", "transformers",
              "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["fits"] is True and data["total_gib"] > 0
    assert abs(sum(data["components"].values()) - data["total_gib"]) < 0.05


def test_fp32_seven_b_does_not_fit_141_gib_and_the_advice_says_bf16() -> None:
    res = run("--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu-memory-gib", "141", "--generation", "transformers",
              "--dtype", "float32", "--beta", "0.04")
    assert res.exit_code == 1
    assert "does NOT fit" in res.output
    assert "load the model in bfloat16" in res.output.split("cheapest changes that fit:")[1].splitlines()[1]


def test_brief_values_are_read_and_options_override_them() -> None:
    brief = str(EXAMPLES / "math-exact" / "brief.yaml")
    plain = json.loads(run("--brief", brief, "--json").output)
    assert plain["model"] == "Qwen/Qwen2.5-0.5B-Instruct" and plain["settings"]["adapter"] == "full"
    changed = json.loads(run("--brief", brief, "--adapter", "lora", "--num-generations", "16", "--json").output)
    assert changed["settings"]["adapter"] == "lora" and changed["settings"]["num_generations"] == 16
    assert changed["components"]["policy_weights"] == plain["components"]["policy_weights"]
    assert "optimizer_state" in changed["components"]
    assert changed["components"]["optimizer_state"] < plain["components"]["optimizer_state"]


def test_unusable_input_exits_2() -> None:
    assert run("--model", "someone/unknown-model").exit_code == 2
    assert run("--json").exit_code == 2  # neither --brief nor --model
    res = run("--brief", "/nonexistent/brief.yaml", "--json")
    assert res.exit_code == 2


def test_local_model_folder(tiny_model_dir: Path) -> None:
    res = run("--model", str(tiny_model_dir), "--gpu-memory-gib", "24", "--json")
    assert res.exit_code == 0
    assert json.loads(res.output)["params"] > 0


def test_the_verb_imports_no_ml_library() -> None:
    code = (
        "import sys; from llm_finetuning.cli import main\n"
        "sys.argv = ['finetune', 'memory', '--model', 'Qwen/Qwen2.5-7B', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'vllm', 'numpy', 'gguf') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


def test_a_cpu_brief_is_described_as_cpu_with_ram_and_no_cuda_context(tmp_path: Path) -> None:
    """Issue 27 item 11: `hardware.gpus: 0` was described as "1 GPU(s) x 80 GiB" plus a CUDA context."""
    import shutil

    from llm_finetuning.memory import host_ram_gib

    work = tmp_path / "cpu"
    shutil.copytree(EXAMPLES / "math-exact", work, ignore=shutil.ignore_patterns("records", "runs"))
    brief = work / "brief.yaml"
    text = brief.read_text(encoding="utf-8")
    brief.write_text(text.replace("  gpus: 1\n", "  gpus: 0\n").replace("generation: vllm-colocate",
                                                                       "generation: transformers"), encoding="utf-8")
    res = run("--brief", str(brief))
    ram = host_ram_gib()
    assert ram is not None
    assert f", CPU, {ram:g} GiB RAM, transformers," in res.output.splitlines()[0]
    assert "GPU" not in res.output and "CUDA context" not in res.output
    assert f" GiB of {ram:g} GiB RAM (headroom" in res.output
    data = json.loads(run("--brief", str(brief), "--json").output)
    assert data["cuda_context_gib"] == 0 and data["settings"]["cpu"] is True and data["gpu_memory_gib"] == ram
