"""`finetune launch` refuses a vLLM outside the range TRL 1.16 supports, naming the range and the install.

The installed vLLM is faked honestly: a directory on PYTHONPATH with an importable `vllm` package and a
`vllm-X.dist-info` whose METADATA says the version, which is exactly what `importlib.metadata` reads.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from launch_cases import child_env, copy_model, finetune, make_brief

from llm_finetuning.vllm_support import TRL_VLLM_MAX, TRL_VLLM_MIN, VLLM_INSTALL, base_version

REPO = Path(__file__).resolve().parents[2]


def fake_vllm(root: Path, version: str) -> Path:
    """A site directory where vLLM `version` is installed (package and metadata, no code)."""
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = root / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return root


def test_bounds_are_the_installed_trls() -> None:
    """The range is read from TRL's own check (trl/import_utils.py, is_vllm_available) and its extra."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("trl")
    assert spec is not None and spec.origin is not None
    source = (Path(spec.origin).parent / "import_utils.py").read_text(encoding="utf-8")
    bounds = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)', source)
    assert bounds is not None, "TRL's vLLM version check moved: read it again and update vllm_support.py"
    assert (base_version(bounds.group(1)), base_version(bounds.group(2))) == (TRL_VLLM_MIN, TRL_VLLM_MAX)
    extra = [r for r in importlib.metadata.requires("trl") or [] if r.startswith("vllm") and "extra == \"vllm\"" in r]
    assert extra and f">={bounds.group(1)}" in extra[0] and f"<={bounds.group(2)}" in extra[0], extra


@pytest.mark.parametrize(("version", "supported"), [
    ("0.21.2", False), ("0.22.0", True), ("0.24.0+cu129", True), ("0.31.0", True), ("0.31.1", False), ("0.32.0", False),
])
def test_version_range(version: str, supported: bool) -> None:
    base = base_version(version)
    assert base is not None and (TRL_VLLM_MIN <= base <= TRL_VLLM_MAX) is supported


@pytest.fixture(scope="module")
def colocate_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rendered run of the tiny model whose generation is vLLM colocate (its gate passes)."""
    root = tmp_path_factory.mktemp("vllm-run")
    brief = make_brief(root / "b", copy_model(tiny_model_dir, root / "tiny"), gpus=1, generation="vllm-colocate")
    run = root / "run"
    rendered = finetune("render", str(brief), "-o", str(run))
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    return run


def _launch(run: Path, site: Path | None, *extra: str) -> subprocess.CompletedProcess[str]:
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([*([str(site)] if site else []), str(REPO / "src")])
    return subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "launch", str(run), *extra], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("version", ["0.32.0", "0.21.2"])
def test_launch_refuses_an_unsupported_vllm(colocate_run: Path, tmp_path: Path, version: str) -> None:
    proc = _launch(colocate_run, fake_vllm(tmp_path / "site", version))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    assert f"vLLM {version} is installed" in out and "0.22.0 to 0.31.0" in out and VLLM_INSTALL in out
    assert "hardware.generation: vllm-colocate" in out


def test_launch_plan_accepts_a_supported_vllm(colocate_run: Path, tmp_path: Path) -> None:
    """A supported version passes the check (`--plan` stops before anything would import vLLM)."""
    proc = _launch(colocate_run, fake_vllm(tmp_path / "site", "0.31.0"), "--plan")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"backend_problems": []' in proc.stdout
    unsupported = _launch(colocate_run, fake_vllm(tmp_path / "old", "0.32.0"), "--plan")
    assert "vLLM 0.32.0 is installed" in unsupported.stdout


def test_sampling_refuses_an_unsupported_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """baseline/inspect with the vLLM backend: the same refusal, before any model is loaded."""
    import importlib

    from llm_finetuning.errors import UnusableInput
    from llm_finetuning.sampling.factory import make_backend

    monkeypatch.syspath_prepend(str(fake_vllm(tmp_path / "site", "0.40.1")))
    importlib.invalidate_caches()
    with pytest.raises(UnusableInput) as info:
        make_backend("vllm", resolved=None, dtype="bfloat16")
    assert "vLLM 0.40.1 is installed" in info.value.message and "--backend transformers" in info.value.fix
