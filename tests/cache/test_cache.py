"""The package's one cache (docs/development.md, "Caches"): one root honouring LLM_FINETUNING_CACHE and
XDG_CACHE_HOME, a said-once move to $TMPDIR when the root cannot be written (Claude Code's sandbox mounts HOME
read-only), and keyed entries that a changed file turns into a miss."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from llm_finetuning import cache
from llm_finetuning.cache import FALLBACK_NAME, KeyedEntries, cache_root
from llm_finetuning.models import cached_sha256_file


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmpdir"))
    (tmp_path / "tmpdir").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(cache, "_noted", set())
    return tmp_path / "tmpdir"


def test_root_honours_the_variable_then_xdg_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv("LLM_FINETUNING_CACHE")
    assert cache_root() == tmp_path / "x" / "llm-finetuning"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "llm-finetuning"


def test_an_unwritable_root_moves_to_tmpdir_and_says_so_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             private_tmp: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "a-file" / "cache"))  # no folder can be made there
    assert cache_root() == cache_root() == private_tmp / FALLBACK_NAME
    err = capsys.readouterr().err
    assert err.count("cannot be written") == 1 and str(private_tmp / FALLBACK_NAME) in err and "LLM_FINETUNING_CACHE" in err


def test_a_verb_with_a_read_only_home_works_and_says_why(tmp_path: Path, private_tmp: Path) -> None:
    """As in Claude Code's Bash sandbox: HOME cannot be written, $TMPDIR can. No traceback, one note."""
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(private_tmp)}
    env.pop("LLM_FINETUNING_CACHE", None)
    env.pop("XDG_CACHE_HOME", None)
    code = ("from llm_finetuning.models import cached_sha256_file; from pathlib import Path; import sys; "
            "p = Path(sys.argv[1]); print(cached_sha256_file(p) == cached_sha256_file(p))")
    (tmp_path / "f").write_text("x")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f")], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "True"
    assert out.stderr.count("cannot be written") == 1 and "Traceback" not in out.stderr
    assert (private_tmp / FALLBACK_NAME / "file-hashes.json").is_file()


def test_keyed_entries_miss_when_the_key_moves(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "c"))
    entries = KeyedEntries("t.json")
    entries.put("a", [1, 2], "value")
    assert entries.get("a", [1, 2]) == "value"
    assert entries.get("a", [1, 3]) is None and entries.get("b", [1, 2]) is None
    assert entries.get("a", lambda value: [1, 2] if value == "value" else None) == "value"


def test_a_changed_file_is_hashed_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "c"))
    f = tmp_path / "weights.bin"
    f.write_bytes(b"aaaa")
    first = cached_sha256_file(f)
    f.write_bytes(b"bbbb")  # same size: the mtime moves the key
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert cached_sha256_file(f) != first
