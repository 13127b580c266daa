"""Columns a brief names are checked against the data's first rows before anything samples or trains.

`finetune check` (and so the gate) reads the first rows of local files with the standard library; the
sampling verbs check the rows they loaded before they sample; `score` checks its input rows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from llm_finetuning.brief import load_brief
from llm_finetuning.brief.columns import first_rows, needed_columns
from llm_finetuning.cli import cli
from llm_finetuning.errors import UnusableInput

REPO = Path(__file__).resolve().parents[2]


def example(tmp_path: Path, name: str, **rewards_args: object) -> Path:
    folder = tmp_path / name
    shutil.copytree(REPO / "examples" / name, folder)
    brief = folder / "brief.yaml"
    data = yaml.safe_load(brief.read_text())
    for key, value in rewards_args.items():
        data["rewards"][0].setdefault("args", {})[key] = value
    brief.write_text(yaml.safe_dump(data, sort_keys=False))
    return brief


def check(brief: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check", str(brief)])
    return result.exit_code, result.stderr


@pytest.mark.parametrize(("name", "arg", "bad", "found"), [
    ("math-exact", "answer_field", "solution", "answer, prompt"),
    ("json-person", "schema_field", "json_schema", "age, name, prompt, schema"),
    ("code-tests", "tests_field", "test", None),
])
def test_check_names_the_yaml_path_the_columns_and_the_fix(tmp_path: Path, name: str, arg: str, bad: str,
                                                           found: str | None) -> None:
    code, err = check(example(tmp_path, name, **{arg: bad}))
    assert code == 2
    line = next(line for line in err.splitlines() if line.startswith(f"rewards[0].args.{arg}:"))
    assert f"column {bad!r} is in none of the first" in line and "columns found:" in line
    if found:
        assert f"columns found: {found} " in line
    assert f"or add the column {bad!r} to the data" in line


def test_io_field_and_the_default_tests_field(tmp_path: Path) -> None:
    brief = example(tmp_path, "code-tests")
    data = yaml.safe_load(brief.read_text())
    data["rewards"][0]["args"] = {"io_field": "cases"}
    brief.write_text(yaml.safe_dump(data))
    code, err = check(brief)
    assert code == 2 and "rewards[0].args.io_field: column 'cases' is in none" in err
    data["rewards"][0]["args"] = {}
    brief.write_text(yaml.safe_dump(data))
    assert check(brief)[0] == 0  # the default tests_field is the example's column


def test_a_row_that_lacks_the_column_is_named(tmp_path: Path) -> None:
    brief = example(tmp_path, "math-exact")
    train = brief.parent / "data" / "train.jsonl"
    lines = train.read_text().splitlines()
    row = json.loads(lines[3])
    del row["answer"]
    lines[3] = json.dumps(row)
    train.write_text("\n".join(lines) + "\n")
    code, err = check(brief)
    assert code == 2
    assert "column 'answer' is missing from row 3 of data.train (data/train.jsonl) (1 of the first 20" in err


def test_a_typo_gets_the_close_column(tmp_path: Path) -> None:
    code, err = check(example(tmp_path, "json-person", schema_field="schemas"))
    assert code == 2 and "Fix: set `rewards[0].args.schema_field: schema`, or add" in err


def test_json_csv_and_parquet_rows(tmp_path: Path) -> None:
    rows = [{"prompt": "p", "answer": "1"}, {"prompt": "q", "answer": "2"}]
    (tmp_path / "d.json").write_text(json.dumps({"data": rows}))
    (tmp_path / "d.csv").write_text("prompt,answer\np,1\nq,2\n")
    assert first_rows(tmp_path / "d.json") == rows
    assert first_rows(tmp_path / "d.csv") == rows
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    assert first_rows(tmp_path / "d.parquet") == rows


def test_custom_rewards_name_no_columns_and_check_stays_fast(tmp_path: Path) -> None:
    assert [n.column for n in needed_columns({}, [{"fn": "mod:fn", "args": {}}])] == ["prompt"]
    brief = example(tmp_path, "math-exact")
    code = "import sys, llm_finetuning.cli as c; sys.argv=['finetune','check',sys.argv[1]]; c.main()"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code, str(brief)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert not imported & {"torch", "transformers", "trl", "vllm", "datasets", "pyarrow"}


def test_sampling_checks_the_loaded_rows_before_it_samples(tmp_path: Path) -> None:
    """The loader's rows (a hub dataset's too) meet the rewards before any model is resolved."""
    from llm_finetuning.sampling.run import sample_brief

    brief, errors = load_brief(example(tmp_path, "math-exact"))
    assert brief is not None and not errors
    data = brief.as_mapping()
    data["rewards"][0]["args"]["answer_field"] = "solution"
    data["model"]["id"] = str(tmp_path / "no-such-model")  # never reached
    brief = brief.replaced(data)
    with pytest.raises(UnusableInput) as info:
        sample_brief(brief, n_prompts=2, k=1, backend="transformers")
    assert info.value.path == "rewards[0].args.answer_field"
    assert "the column rewards[0].args.answer_field names ('solution') is in none of" in info.value.message


@pytest.mark.slow
def test_baseline_refuses_before_sampling(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The case found outside: `answer_field: solution` used to sample every completion, then die in a
    KeyError traceback inside exact_match."""
    brief = example(tmp_path, "math-exact", answer_field="solution")
    data = yaml.safe_load(brief.read_text())
    data["model"] = {"id": str(tiny_model_dir), "dtype": "float32"}
    brief.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "baseline", str(brief), "--prompts", "4",
                           "--k", "2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "Sampling" not in proc.stderr and "Loading" not in proc.stderr
    assert "rewards[0].args.answer_field: column 'solution' is in none of" in proc.stderr


def test_check_refuses_an_expected_calls_column_whose_argument_schema_does_not_compile(tmp_path: Path) -> None:
    good = [{"name": "multiply", "arguments": {"type": "object", "properties": {"a": {"type": "integer"}}}}]
    bad = [{"name": "multiply", "arguments": {"type": "object", "properties": {"a": {"type": "integr"}, "b": {"enum": 3}}}}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"prompt": "3 x 4?", "calls": c}) + "\n"
                                                  for c in (good, json.dumps(bad))))
    (tmp_path / "brief.yaml").write_text(yaml.safe_dump({
        "brief": 1, "name": "tools", "method": "grpo", "task": {"summary": "multiply with a tool"},
        "model": {"id": "Qwen/Qwen2.5-0.5B-Instruct"}, "data": {"train": "train.jsonl"},
        "rewards": [{"fn": "tool_call", "args": {"expected_field": "calls"}}]}))
    code, err = check(tmp_path / "brief.yaml")
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("rewards[0].args.expected_field:")]
    assert lines == [
        "rewards[0].args.expected_field: row 1 of data.train (train.jsonl), calls[0].arguments.properties.a.type: "
        "found 'integr', which is not a JSON Schema type Fix: did you mean `integer`? use a JSON Schema type: "
        "string, integer, number, boolean, array, object, null (or a list of them)",
        "rewards[0].args.expected_field: row 1 of data.train (train.jsonl), calls[0].arguments.properties.b.enum: "
        "3 is not of type 'array' Fix: write enum as a list, e.g. enum: [value]"]
