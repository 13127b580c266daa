"""The rewards package stays light to import, and math-verify runs only in its worker process."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "trl", "numpy", "datasets", "math_verify", "sympy")


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()


def test_registry_sources_and_calibration_import_nothing_heavy() -> None:
    out = _run("import sys; import llm_finetuning.rewards, llm_finetuning.reward_registry, "
               "llm_finetuning.records.judge_labels; "
               "from llm_finetuning.rewards import reward_source_files; "
               f"print([m for m in {HEAVY!r} if m in sys.modules])")
    assert out == "[]"


def test_math_verify_is_imported_only_inside_the_worker() -> None:
    out = _run("import sys; from llm_finetuning.rewards.exact_match import ExactMatch; r = ExactMatch(); "
               "v = r(prompts=['p'], completions=['\\\\boxed{1+x}'], answer=['x+1']); r.close(); "
               "print(v, 'math_verify' in sys.modules, 'sympy' in sys.modules)")
    assert out == "[1.0] False False"
