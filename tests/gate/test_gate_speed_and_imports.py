"""The gate stays light: no ML library and, on the cached fast path, no jsonschema; TRL's fields read by ast."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llm_finetuning.brief.batch import GenerationBatch
from llm_finetuning.gate.trl_fields import grpo_config_fields

PROBE = """
import json, sys
from llm_finetuning.gate import run_gate
report = run_gate(sys.argv[1])
heavy = sorted(m for m in ("torch", "transformers", "trl", "vllm", "numpy", "datasets", "jsonschema", "yaml")
               if m in sys.modules)
print(json.dumps({"heavy": heavy, "checks": len(report.checks)}))
"""


def test_cached_gate_imports_no_heavy_module(make_brief, private_cache: Path) -> None:
    brief = make_brief("passing")
    env = {"LLM_FINETUNING_CACHE": str(private_cache), "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", PROBE, str(brief)], capture_output=True, text=True, env=env, check=True)
    assert set(json.loads(first.stdout)["heavy"]) <= {"jsonschema", "yaml"}
    second = subprocess.run([sys.executable, "-c", PROBE, str(brief)], capture_output=True, text=True, env=env, check=True)
    assert json.loads(second.stdout)["heavy"] == []


def smallest_fixes(per_device: int, accumulation: int, processes: int, n: int) -> list[str]:
    return GenerationBatch(per_device, processes, accumulation, n, accumulation, False).fixes()


def test_smallest_batch_fix_prefers_gradient_accumulation() -> None:
    assert smallest_fixes(8, 5, 1, 16)[0].startswith("set `grpo.gradient_accumulation_steps: 6`")
    assert smallest_fixes(4, 4, 3, 16)[0] == ("set `grpo.gradient_accumulation_steps: 4` (generation batch 48 = 3 groups of 16)")


def test_one_group_is_one_group(make_brief) -> None:  # type: ignore[no-untyped-def]
    """Issue 27 item 11: "1 groups of 12"."""
    from llm_finetuning.gate import run_gate

    assert smallest_fixes(6, 1, 1, 12)[0] == "set `grpo.gradient_accumulation_steps: 2` (generation batch 12 = 1 group of 12)"
    brief = make_brief("passing")
    brief.write_text(brief.read_text().replace("num_generations: 8", "num_generations: 32"))
    [check] = [c for c in run_gate(brief).checks if c.id == "global_batch"]
    assert check.message.endswith("= 32 = 1 group of 32")


@pytest.mark.slow
def test_ast_field_list_matches_the_imported_grpo_config() -> None:
    import dataclasses

    from trl import GRPOConfig

    assert grpo_config_fields() == frozenset(f.name for f in dataclasses.fields(GRPOConfig))


def test_cached_validity_is_dropped_when_a_named_file_changes(make_brief) -> None:
    from llm_finetuning.gate import run_gate

    path = make_brief("passing")
    assert run_gate(path).passed
    assert run_gate(path).passed  # from the cache
    (path.parent / "my_rewards.py").write_text("def other(prompts, completions, **kw):\n    return []\n")
    fails = [(c.id, c.path) for c in run_gate(path).failures]
    assert fails == [("brief_is_valid", "rewards[1].fn"), ("brief_is_valid", "")]
    (path.parent / "my_rewards.py").unlink()
    (path.parent / "data" / "train.jsonl").unlink()
    fails = [(c.id, c.path) for c in run_gate(path).failures]
    assert ("brief_is_valid", "data.train") in fails
