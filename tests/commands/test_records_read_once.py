"""A verb reads and hashes each record once and hashes each file of the reward code once: what it verified is
passed down (the records to the checks, the gate's fingerprint and record hashes to render and launch, the
verified run to the trainer) instead of being computed again.

Counted: `load_baseline` and `load_inspection` (a record parsed), `reward_bindings` (the reward specs and code
bound), and every file that `llm_finetuning.fileio` opens to hash (`sha256_file`), by path; the inspection's
samples file is hashed by `verify_inspection` from the bytes it reads, and the fingerprint takes that verified
value. Before this was counted, one `finetune render` bound the rewards 4 times and hashed each record 3 times.
"""

from __future__ import annotations

import builtins
import importlib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_finetuning import fileio, integrity
from llm_finetuning.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gate"))
from gate_fixtures import render_passing  # noqa: E402

COUNTED = (("records.baseline", "load_baseline"), ("records.inspection", "load_inspection"),
           ("records.bindings", "reward_bindings"))
RECORDS = ("records/baseline.json", "records/inspection.json")


def count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[Any]:
    """Calls of the COUNTED functions by name, and files hashed by `fileio` (`integrity`) by resolved path."""
    counts: Counter[Any] = Counter()
    for module_name, name in COUNTED:
        module = importlib.import_module(f"llm_finetuning.{module_name}")
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    real_open = builtins.open

    def hashing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if mode == "rb":
            counts[Path(file).resolve()] += 1
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(fileio, "open", hashing_open, raising=False)
    monkeypatch.setattr(integrity, "open", hashing_open, raising=False)  # what sha256_file opens
    return counts


def assert_once(counts: Counter[Any], folder: Path, files: list[str]) -> None:
    assert counts["reward_bindings"] == 1, f"the rewards were bound {counts['reward_bindings']} times"
    hashed_twice = {str(p): n for p, n in counts.items() if isinstance(p, Path) and n > 1}
    assert not hashed_twice, f"files hashed more than once: {hashed_twice}"
    for name in files:
        assert counts[(folder / name).resolve()] == 1, f"{name} was hashed {counts[(folder / name).resolve()]} times"
    reward_code = [p for p in counts if isinstance(p, Path) and p.name in ("my_rewards.py", "exact_match.py")]
    assert len(reward_code) == 2, f"the reward code hashed: {reward_code}"


@pytest.fixture()
def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A passing brief's folder (the current directory) with the gate's cache warm and RUN_DIR runs/r1."""
    return render_passing(tmp_path, monkeypatch)


def test_render_reads_and_hashes_each_record_once(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_reads(monkeypatch)
    result = CliRunner().invoke(cli, ["render", "brief.yaml", "-o", "runs/r2"])
    assert result.exit_code == 0, result.output
    assert counts["load_baseline"] == 1 and counts["load_inspection"] == 1, counts
    assert_once(counts, rendered, [*RECORDS, "data/train.jsonl"])
    manifest = json.loads((rendered / "runs/r2/manifest.json").read_text())
    first = json.loads((rendered / "runs/r1/manifest.json").read_text())
    assert manifest["gate_fingerprint"] == first["gate_fingerprint"] and manifest["records"] == first["records"]


def test_launch_plan_verifies_once_and_takes_the_gates_fingerprint(rendered: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    counts = count_reads(monkeypatch)
    result = CliRunner().invoke(cli, ["launch", "runs/r1", "--plan"])
    assert result.exit_code == 0, result.output
    assert counts["load_baseline"] == 1 and counts["load_inspection"] == 1, counts
    assert_once(counts, rendered, [*RECORDS, "brief.yaml", "runs/r1/grpo_config.yaml", "data/train.jsonl"])


def test_eval_reads_and_hashes_the_baseline_once(rendered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to sampling, which is stubbed here: the base and trained sides come back as fixed successes."""
    import llm_finetuning.evaluation.run as run

    (rendered / "runs/r1/model").mkdir()
    (rendered / "runs/r1/metrics.jsonl").write_text('{"event": "end", "step": 1}\n')
    monkeypatch.setattr(run, "sample_successes", lambda *a, **k: run.Sampled([0, 1], 0.0, {}, None))
    targets: list[Any] = []
    monkeypatch.setattr(run, "_evaluate_target", lambda *a, **k: targets.append(a[3]) or {"checkpoint": "final"})
    monkeypatch.setattr(run, "_write_results", lambda *a, **k: None)
    counts = count_reads(monkeypatch)
    run.evaluate(rendered / "runs/r1")
    assert [t.label for t in targets] == ["final"]
    assert counts["load_baseline"] == 1 and counts["load_inspection"] == 0, counts
    assert counts["reward_bindings"] == 1 and counts[(rendered / "data/train.jsonl").resolve()] == 1
    assert not {str(p): n for p, n in counts.items() if isinstance(p, Path) and n > 1}
