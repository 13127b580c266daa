"""Is the installed vLLM one that TRL 1.16 supports? Read from package metadata, no vLLM import.

TRL 1.16 supports vLLM 0.22.0 to 0.31.0 (`trl/import_utils.py`, `is_vllm_available`, which compares the
base version, so `0.24.0+cu129` counts as 0.24.0; its `vllm` extra pins the same range). TRL only warns
outside it; a run that starts and then fails inside vLLM's API costs far more than a refusal up front.
tests/launch/test_vllm_version.py reads the bounds out of the installed TRL's source.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

from llm_finetuning.errors import Problem

TRL_VLLM_MIN = (0, 22, 0)
TRL_VLLM_MAX = (0, 31, 0)
VLLM_RANGE = f"{'.'.join(map(str, TRL_VLLM_MIN))} to {'.'.join(map(str, TRL_VLLM_MAX))}"
VLLM_INSTALL = ("pip install 'llm-finetuning[vllm]'  (that is trl[vllm]==1.16.0, which pins "
                f"vllm>={'.'.join(map(str, TRL_VLLM_MIN))},<={'.'.join(map(str, TRL_VLLM_MAX))})")


def installed_vllm_version() -> str | None:
    """The installed vLLM's version string, or None when vLLM is not importable."""
    try:
        if importlib.util.find_spec("vllm") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"  # importable without metadata (a source checkout): nothing to compare


def base_version(version: str) -> tuple[int, int, int] | None:
    """(major, minor, micro) of a PEP 440 version, local and pre/post segments ignored; None if unreadable."""
    match = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", version)
    if match is None:
        return None
    return (int(match.group(1)), int(match.group(2) or 0), int(match.group(3) or 0))


def vllm_problem(what: str, path: str = "") -> Problem | None:
    """None when a supported vLLM is installed; else a Problem at `path` saying that `what` needs it, what was
    found, and the install command."""
    version = installed_vllm_version()
    if version is None:
        return Problem("vllm_missing", path, f"{what} needs vLLM, which is not installed.", VLLM_INSTALL)
    base = base_version(version)
    if base is not None and not (TRL_VLLM_MIN <= base <= TRL_VLLM_MAX):
        return Problem("vllm_unsupported", path, f"{what} needs vLLM {VLLM_RANGE} (the range TRL 1.16 supports), "
                       f"but vLLM {version} is installed.", VLLM_INSTALL)
    return None
