"""`finetune check`: examples pass, broken briefs name each YAML path and fix, malformed YAML exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*/brief.yaml"))
FIXTURES = Path(__file__).parent / "fixtures"


def run_check(path: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", str(path), *extra])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("brief", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_every_example_is_valid(brief: Path) -> None:
    code, out, err = run_check(brief)
    assert code == 0, err
    assert "valid brief" in out


def test_at_least_two_examples_exist() -> None:
    names = {p.parent.name for p in EXAMPLES}
    assert {"math-exact", "json-person"} <= names


@pytest.mark.parametrize("case", sorted(FIXTURES.glob("*.yaml")), ids=lambda p: p.stem)
def test_broken_brief_matches_expected_output(case: Path) -> None:
    code, _, err = run_check(case)
    expected = case.with_suffix(".expected.txt").read_text(encoding="utf-8")
    got = err.replace(str(case.parent) + "/", "")
    assert code == 2
    assert got.strip() == expected.strip()


def test_json_output_lists_every_error_with_path_and_fix() -> None:
    code, out, _ = run_check(FIXTURES / "many-errors.yaml", "--json")
    assert code == 2
    payload = json.loads(out)
    assert payload["ok"] is False
    paths = [e["path"] for e in payload["problems"]]
    assert paths == sorted(paths)
    assert "rewards[1].args.answer_feld" in paths and "grpo.symptom" in paths
    assert all(e["fix"] and e["id"] and e["severity"] == "error" for e in payload["problems"])
    by_path = {e["path"]: e["id"] for e in payload["problems"]}
    assert (by_path["model.dtyp"], by_path["rewards[0].fn"]) == ("unknown_field", "unknown_reward")


def _write(tmp_path: Path, text: str | bytes, name: str = "brief.yaml") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


MALFORMED = {
    "tabs": ("brief: 1\nmodel:\n\tid: x\n", "tab"),
    "bad-indentation": ("brief: 1\nmodel:\n  id: x\n   dtype: bfloat16\n", "line 4"),
    "billion-laughs": (
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",
        "anchors",
    ),
    "python-tag": ("brief: !!python/object/apply:os.system ['echo pwned']\n", "python/object"),
    "duplicate-key": ("brief: 1\nname: a\nname: b\n", "duplicate key 'name'"),
    "not-a-mapping": ("- just\n- a list\n", "not a mapping"),
    "empty": ("", "empty"),
    "two-documents": ("brief: 1\n---\nbrief: 1\n", "2 YAML documents"),
    "not-utf8": (b"brief: 1\nname: \xff\xfe\n", "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED), ids=str)
def test_malformed_yaml_is_exit_2_with_one_line(tmp_path: Path, case: str) -> None:
    text, needle = MALFORMED[case]
    code, out, err = run_check(_write(tmp_path, text))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    assert needle in lines[0]
    assert "Traceback" not in err


def test_fifty_megabyte_brief_is_refused_without_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.write(b"brief: 1\n")
        fh.truncate(50 * 2**20)
    start = time.perf_counter()
    code, _, err = run_check(big)
    assert code == 2
    assert "50.0 MiB" in err and "at most 1 MiB" in err
    assert time.perf_counter() - start < 1.0


def test_missing_file_and_directory(tmp_path: Path) -> None:
    code, _, err = run_check(tmp_path / "nope.yaml")
    assert code == 2 and "does not exist" in err
    code, _, err = run_check(tmp_path)
    assert code == 2 and "is a directory" in err


def test_check_answers_fast_in_a_fresh_process() -> None:
    brief = REPO / "examples/math-exact/brief.yaml"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "check", str(brief)],
                          capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 2.0  # well under a second on an idle machine; generous for a loaded CI box


def test_cli_import_leaves_the_ml_stack_out() -> None:
    code = ("import sys, llm_finetuning.cli, llm_finetuning.brief.check; "
            "from click.testing import CliRunner; "
            "CliRunner().invoke(llm_finetuning.cli.cli, ['--help']); "
            "heavy=[m for m in ('torch','transformers','trl','vllm','datasets','numpy') if m in sys.modules]; "
            "print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_paths_are_resolved_relative_to_the_brief(tmp_path: Path) -> None:
    src = (REPO / "examples/math-exact/brief.yaml").read_text(encoding="utf-8")
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    (sub / "data").mkdir()
    brief = _write(sub, src)
    code, _, err = run_check(brief)
    assert code == 2
    assert f"looked at {sub}/data/train.jsonl" in err
    (sub / "data/train.jsonl").write_text('{"prompt": "x", "answer": "1"}\n', encoding="utf-8")
    (sub / "data/eval.jsonl").write_text('{"prompt": "x", "answer": "1"}\n', encoding="utf-8")
    assert run_check(brief)[0] == 0


def test_custom_reward_is_located_without_import(tmp_path: Path) -> None:
    src = (REPO / "examples/math-exact/brief.yaml").read_text(encoding="utf-8")
    src = src.replace("data/train.jsonl", str(REPO / "examples/math-exact/data/train.jsonl"))
    src = src.replace("data/eval.jsonl", str(REPO / "examples/math-exact/data/eval.jsonl"))
    src = src.replace("fn: exact_match", "fn: my_rewards:correct")
    src = src.replace("args: {answer_field: answer, extract: last_number}", "args: {}")
    (tmp_path / "my_rewards.py").write_text("raise SystemExit('must not be imported by check')\n", encoding="utf-8")
    brief = _write(tmp_path, src)
    code, _, err = run_check(brief)
    assert code == 2 and "defines no top-level 'correct'" in err
    (tmp_path / "my_rewards.py").write_text(
        "import sys\nsys.exit('must not be imported by check')\n\n"
        "def correct(prompts, completions, **kw):\n    return [1.0 for _ in completions]\n", encoding="utf-8")
    assert run_check(brief)[0] == 0
