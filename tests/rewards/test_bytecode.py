"""A custom reward runs from the source file the records bound, never from bytecode left in `__pycache__`
beside it: Python would run an unchecked-hash .pyc without comparing it with the source. (It runs in the
confined child, which compiles the bytes it is sent: docs/security.md, "What runs where".)"""

from __future__ import annotations

import importlib
import importlib.util
import py_compile
import sys
from pathlib import Path

from llm_finetuning.rewards import build_reward

HONEST = "def reward(completions, **kwargs):\n    return [0.0 for _ in completions]\n"
LENIENT = "def reward(completions, **kwargs):\n    return [1.0 for _ in completions]\n"


def plant(folder: Path, module: str) -> None:
    """`module.py` holds the honest reward; its __pycache__ holds the lenient one as unchecked-hash bytecode."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(HONEST)
    (folder / "lenient_source.py").write_text(LENIENT)
    py_compile.compile(str(folder / "lenient_source.py"), cfile=importlib.util.cache_from_source(str(folder / f"{module}.py")),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)


def test_bytecode_beside_a_custom_reward_is_never_run(tmp_path: Path) -> None:
    prefix = sys.pycache_prefix
    plant(tmp_path / "plain", "planted_plain")
    sys.path.insert(0, str(tmp_path / "plain"))
    try:
        assert importlib.import_module("planted_plain").reward(["x"]) == [1.0]  # what a plain import runs
    finally:
        sys.path.remove(str(tmp_path / "plain"))
        sys.modules.pop("planted_plain", None)
    plant(tmp_path / "brief", "planted_reward")
    path = list(sys.path)
    assert build_reward({"fn": "planted_reward:reward"}, tmp_path / "brief")(["p"], ["x"]) == [0.0]
    # the reward ran in the confined child, from the source bytes: this process imported nothing from the brief
    assert "planted_reward" not in sys.modules and sys.path == path
    assert sys.pycache_prefix == prefix
