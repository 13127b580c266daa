"""The other rendered files are what their tools accept: accelerate's own config loader (unknown keys
are errors there), `bash -n` for the scripts, Python's parser for rewards_entry.py."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from render_cases import CASES


@pytest.mark.parametrize("case", CASES)
def test_accelerate_yaml_loads_in_accelerate(case: str, rendered: dict[str, Path]) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(rendered[case] / "accelerate.yaml"))
    topo = json.loads((rendered[case] / "manifest.json").read_text())["topology"]
    assert config.num_processes == topo["train_processes"]
    assert config.num_machines == topo["train_machines"]
    want = {"single": "NO", "ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED", "fsdp2": "FSDP"}
    assert str(config.distributed_type).rsplit(".", 1)[-1] == want[topo["distributed"]]


@pytest.mark.parametrize("case", CASES)
def test_scripts_parse_in_bash_and_python(case: str, rendered: dict[str, Path]) -> None:
    for script in sorted(rendered[case].glob("*.sh")):
        out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert out.returncode == 0, f"{script.name}: {out.stderr}"
    tree = ast.parse((rendered[case] / "rewards_entry.py").read_text())
    names = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
             if isinstance(t, ast.Name)}
    cfg = yaml.safe_load((rendered[case] / "grpo_config.yaml").read_text())
    assert {ref.split(".", 1)[1] for ref in cfg["reward_funcs"]} <= names
