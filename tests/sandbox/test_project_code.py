"""Project code (custom rewards, tools, environments) runs in the confined child (docs/security.md, "What runs
where"): called through it, each behaves as it would in-process, while it sees the reviewer's key folder not at
all, cannot write a record, cannot sign, and runs the bytes it was sent."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from llm_finetuning import locations
from llm_finetuning.errors import EXIT_UNUSABLE
from llm_finetuning.records import signing
from llm_finetuning.rewards.build import CustomReward
from llm_finetuning.rewards.code import CodeChanged, VerifiedCode, module_sources
from llm_finetuning.sandbox import project_code as pc

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

CODE = '''
import os
from pathlib import Path
import helper


def length(prompts, completions, **kwargs):
    return [helper.score(c) for c in completions]


def pid(prompts, completions, **kwargs):
    return [float(os.getpid()) for _ in completions]


def add(x: int, y: int = 2) -> int:
    """Adds two numbers.

    Args:
        x: the first
        y: the second
    """
    return x + y


def fails(x: int) -> int:
    """Raises.

    Args:
        x: anything
    """
    raise KeyError(f"no {x}")


class Counter:
    """Counts what it is given."""

    def reset(self, **row):
        self.total = int(row.get("start", 0))
        return f"start at {self.total}"

    def bump(self, by: int) -> str:
        """Adds to the count.

        Args:
            by: how much
        """
        self.total += by
        return f"total {self.total}"

    def get_reward(self):
        return float(self.total)
'''

ATTACKS = '''
import os
from pathlib import Path


def read_key(prompts, completions, **kwargs):
    """1.0 for each completion when the reviewer's key folder holds anything readable."""
    from llm_finetuning.locations import key_dir
    found = b""
    folder = key_dir()
    for name in (os.listdir(folder) if folder.is_dir() else []):
        try:
            found += (folder / name).read_bytes()
        except OSError:
            pass
    return [1.0 if found else 0.0 for _ in completions]


def write_record(prompts, completions, record, **kwargs):
    try:
        Path(record[0]).write_text("forged")
        return [1.0 for _ in completions]
    except OSError:
        return [0.0 for _ in completions]


def resign(prompts, completions, out, **kwargs):
    """Signs a digest of its own with the reviewer's key, as a flipped review would need."""
    from llm_finetuning.records import signing
    try:
        key, _ = signing.private_key(create=False)
    except Exception:
        return [0.0 for _ in completions]
    block = signing.sign(key, "inspection/1", "0" * 64)
    try:
        Path(out[0]).write_text(str(block))
    except OSError:
        pass
    return [1.0 for _ in completions]


def garble(prompts, completions, **kwargs):
    """Writes lines that are no answer into the protocol's pipe, then answers."""
    import sys
    for line in ("[]", '"text"', '{"id": "x"}', '{"id": 0, "ok": 1}', '{"error": 1}', "not json", "[" * 100000):
        sys.__stdout__.write(line + "\\n")
    sys.__stdout__.flush()
    return [1.0 for _ in completions]
'''


@pytest.fixture
def brief_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "brief"
    folder.mkdir()
    (folder / "mine.py").write_text(CODE)
    (folder / "helper.py").write_text("def score(c):\n    return float(len(c))\n")
    (folder / "attacks.py").write_text(ATTACKS)
    return folder


def test_a_custom_reward_runs_in_the_child_with_the_modules_beside_it(brief_folder: Path) -> None:
    reward = CustomReward("mine:length", brief_folder, {}, "mine:length")
    assert reward(["p", "q"], ["ab", "abcd"]) == [2.0, 4.0]
    [pid] = CustomReward("mine:pid", brief_folder, {}, "mine:pid")(["p"], ["x"])
    assert pid != os.getpid()
    assert "mine" not in sys.modules and "helper" not in sys.modules  # nothing imported here


def test_a_tool_reads_as_the_original_and_runs_in_the_child(brief_folder: Path) -> None:
    from transformers.utils.chat_template_utils import get_json_schema

    tool = pc.confined_tool("mine:add", module_sources("mine:add", brief_folder))
    sys.path.insert(0, str(brief_folder))
    try:
        import mine  # the original, imported here only to compare with
        assert get_json_schema(tool) == get_json_schema(mine.add)
    finally:
        sys.path.remove(str(brief_folder))
        sys.modules.pop("mine", None)
        sys.modules.pop("helper", None)
    assert tool.__name__ == "add" and tool(x=3) == 5 and tool(x=3, y=4) == 7
    failing = pc.confined_tool("mine:fails", module_sources("mine:fails", brief_folder))
    with pytest.raises(pc.ProjectCodeError) as info:
        failing(x=1)
    assert str(info.value) == "'no 1'" and info.value.kind == "KeyError"  # str(exc), as TRL shows the model


def test_an_environment_keeps_its_state_in_the_child(brief_folder: Path) -> None:
    from llm_finetuning.sampling.episode import environment_tools

    env_class = pc.confined_environment("mine:Counter", module_sources("mine:Counter", brief_folder))
    first, second = env_class(), env_class()
    assert first.reset(start=2) == "start at 2" and second.reset() == "start at 0"
    assert first.bump(by=3) == "total 5" and second.bump(by=1) == "total 1"
    assert first.get_reward() == 5.0 and second.get_reward() == 1.0
    assert [t.__name__ for t in environment_tools(first)] == ["bump"]


def test_the_reward_sees_no_key_writes_no_record_and_cannot_sign(brief_folder: Path, tmp_path: Path) -> None:
    key, _ = signing.private_key(create=True)  # the session's reviewer key exists and is readable here
    assert any(locations.key_dir().iterdir())
    record = tmp_path / "records" / "inspection.json"
    record.parent.mkdir()
    record.write_text('{"sealed": true}')
    out = tmp_path / "signature.json"
    columns = {"record": [str(record)], "out": [str(out)]}
    for name in ("read_key", "write_record", "resign"):
        assert CustomReward(f"attacks:{name}", brief_folder, {}, name)(["p"], ["x"], **columns) == [0.0], name
    assert record.read_text() == '{"sealed": true}' and not out.exists()


def test_lines_the_code_writes_into_the_protocol_are_not_answers(brief_folder: Path) -> None:
    child = pc.ProjectCode()
    try:
        handle, _ = pc.load_confined("attacks:garble", module_sources("attacks:garble", brief_folder), child=child)
        answer: Future[object] = Future()
        threading.Thread(target=lambda: answer.set_result(handle.call(["p"], ["x"])), daemon=True).start()
        assert answer.result(timeout=60) == [1.0]
    finally:
        child.close()


def test_the_child_runs_the_bytes_it_was_sent(brief_folder: Path) -> None:
    from llm_finetuning.fileio import sha256_file

    bound = {name: sha256_file(brief_folder / name) for name in ("mine.py", "helper.py")}
    verified = VerifiedCode.read(["mine:length"], brief_folder, bound)
    (brief_folder / "helper.py").write_text("def score(c):\n    return 0.777\n")  # swapped after the read
    reward = CustomReward("mine:length", brief_folder, {}, "mine:length", verified)
    assert reward(["p"], ["abc"]) == [3.0]


def test_bytes_that_differ_from_the_bound_sha256_are_refused(brief_folder: Path) -> None:
    from llm_finetuning.fileio import sha256_file

    bound = {"mine.py": sha256_file(brief_folder / "mine.py"), "helper.py": "0" * 64}
    with pytest.raises(CodeChanged) as info:
        VerifiedCode.read(["mine:length"], brief_folder, bound)
    assert info.value.problems[0].message == "helper.py changed after the run was verified"


def test_without_bubblewrap_project_code_is_refused_with_the_fix(brief_folder: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(pc.UNCONFINED_ENV, raising=False)
    with pytest.raises(pc.ConfinementUnavailable) as info:
        pc.ProjectCode().request("drop", handle=0)
    [problem] = info.value.problems
    assert info.value.exit_code == EXIT_UNUSABLE
    assert "bubblewrap (bwrap) is not installed" in problem.message
    assert "install bubblewrap" in problem.fix and f"export {pc.UNCONFINED_ENV}=1" in problem.fix


def test_the_documented_opt_out_runs_the_child_unconfined(brief_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv(pc.UNCONFINED_ENV, "1")
    child = pc.ProjectCode()
    try:
        handle, _ = pc.load_confined("mine:length", module_sources("mine:length", brief_folder), child=child)
        assert handle.call(prompts=["p"], completions=["abc"]) == [3.0]
    finally:
        child.close()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "sandbox.md").read_text()
    assert pc.UNCONFINED_ENV in docs


def test_one_reward_batch_costs_little(brief_folder: Path, record_property: pytest.RecordProperty) -> None:
    """Reported, not asserted as a timing (bench/project_code_overhead.py measures it)."""
    reward = CustomReward("mine:length", brief_folder, {}, "mine:length")
    completions = ["x" * 200] * 64
    reward(["p"] * 64, completions)
    started = time.perf_counter()
    for _ in range(20):
        assert reward(["p"] * 64, completions) == [200.0] * 64
    record_property("ms_per_batch_of_64", json.dumps(round((time.perf_counter() - started) / 20 * 1000, 3)))
