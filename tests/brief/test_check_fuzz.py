"""Property-based: thousands of malformed briefs never make `finetune check` raise a traceback."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_finetuning.cli import cli

REPO = Path(__file__).resolve().parents[2]
BASE_BRIEF = yaml.safe_load((REPO / "examples/math-exact/brief.yaml").read_text(encoding="utf-8"))
WORKDIR = Path(tempfile.mkdtemp(prefix="brief-fuzz-"))
(WORKDIR / "data").mkdir()
(WORKDIR / "data/train.jsonl").write_text('{"prompt": "1+1?", "answer": "2"}\n', encoding="utf-8")
(WORKDIR / "data/eval.jsonl").write_text('{"prompt": "1+1?", "answer": "2"}\n', encoding="utf-8")
RUNNER = CliRunner()

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


ALL_PATHS = _paths(BASE_BRIEF)


def _set(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> None:
    for key in path[:-1]:
        doc = doc[key]
    if delete:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


def _check_text(text: str) -> None:
    brief = WORKDIR / "brief.yaml"
    brief.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = RUNNER.invoke(cli, ["check", str(brief), "--json"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for input {text[:300]!r}") from result.exception
    assert result.exit_code in (0, 2), result.output
    if result.stdout.strip():
        json.loads(result.stdout)  # --json always prints one JSON object


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), values, st.booleans()), min_size=1, max_size=4))
def test_mutated_briefs_never_crash(mutations: list[tuple[tuple[Any, ...], Any, bool]]) -> None:
    doc = copy.deepcopy(BASE_BRIEF)
    for path, value, delete in mutations:
        try:
            _set(doc, path, value, delete)
        except (KeyError, IndexError, TypeError):
            continue
    _check_text(yaml.safe_dump(doc, allow_unicode=True))


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=st.sampled_from(list("abc:-[]{}&*!|>'\"#%@`\t\n 0123.,?\\")), max_size=200))
def test_random_yaml_text_never_crashes(text: str) -> None:
    _check_text(text)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.text(max_size=10), values, max_size=6))
def test_random_documents_never_crash(doc: dict[str, Any]) -> None:
    _check_text(yaml.safe_dump(doc, allow_unicode=True))
