"""One error shape across the verbs, through the real CLI: `check`, `gate`, a refused `launch` (a tampered
run directory, a gate that no longer passes, no manifest) and unusable input all print
`{"ok": false, "problems": [{"id", "path", "message", "fix", "severity"}]}` with `--json` (`--plan` for
launch), and the same problems as text lines that always end with their fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.errors import Problem, Severity, TextEnum

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "gate"))

from gate_fixtures import prepare_brief  # noqa: E402

PROBLEM_KEYS = {"id", "path", "message", "fix", "severity"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_FINETUNING_CACHE", str(tmp_path / "cache"))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def problems_of(stdout: str) -> list[Problem]:
    """The JSON error shape, checked, as Problems."""
    payload = json.loads(stdout)
    assert isinstance(payload["ok"], bool)
    assert all(set(p) == PROBLEM_KEYS for p in payload["problems"]), payload["problems"]
    problems = [Problem.from_json(p) for p in payload["problems"]]
    assert all(p.id and p.message and p.fix and p.severity in (Severity.ERROR, Severity.WARNING) for p in problems), \
        problems
    assert payload["ok"] == (not any(p.severity == Severity.ERROR for p in problems))
    return problems


def assert_lines_carry_fixes(text: str, problems: list[Problem]) -> None:
    """The text output holds each problem as `path: message Fix: fix`, the fix never dropped."""
    for p in problems:
        assert p.line().endswith(f" Fix: {p.fix}")
        assert p.line() in text, f"{p.line()!r} not in:\n{text}"


@pytest.fixture
def rendered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A brief that passes the gate, rendered into runs/r1."""
    brief = prepare_brief(tmp_path / "b", "passing")
    monkeypatch.chdir(brief.parent)
    code, out, err = run("render", "brief.yaml", "-o", "runs/r1")
    assert code == 0, out + err
    return brief.parent / "runs" / "r1"


def test_check_prints_the_shape_and_the_same_lines() -> None:
    brief = REPO / "tests" / "brief" / "fixtures" / "many-errors.yaml"
    code, out, _ = run("check", str(brief), "--json")
    problems = problems_of(out)
    assert code == 2 and len(problems) == 12 and all(p.severity == "error" for p in problems)
    code, _, err = run("check", str(brief))
    assert code == 2
    assert_lines_carry_fixes(err, problems)
    code, out, _ = run("check", str(REPO / "examples" / "math-exact" / "brief.yaml"), "--json")
    assert code == 0 and json.loads(out)["ok"] is True and json.loads(out)["problems"] == []


def test_unusable_input_prints_the_shape_in_every_verb(tmp_path: Path) -> None:
    bad = tmp_path / "brief.yaml"
    bad.write_text("brief: [1\n")
    for verb in ("check", "gate", "render"):
        extra = ["-o", str(tmp_path / "run")] if verb == "render" else []
        code, out, _ = run(verb, str(bad), *extra, "--json")
        [problem] = problems_of(out)
        assert (code, problem.id, problem.severity) == (2, "unusable_input", "error"), verb
        assert "not valid YAML" in problem.message
        code, _, err = run(verb, str(bad), *extra)
        assert err.strip() == f"error: {problem.line()}", verb


def test_gate_problems_are_its_failures_and_warnings(tmp_path: Path) -> None:
    brief = prepare_brief(tmp_path / "b", "global_batch")
    code, out, _ = run("gate", str(brief), "--json")
    report = json.loads(out)
    problems = problems_of(out)
    assert code == 1 and report["ok"] is False and report["passed"] is False
    # the checks keep docs/gate.md's keys; each failure or warning is also a problem with the check's id
    assert all(set(c) == {"id", "verdict", "path", "reason", "fix"} for c in report["checks"])
    flagged = [(c["id"], c["path"], c["reason"], c["fix"], "error" if c["verdict"] == "fail" else "warning")
               for c in report["checks"] if c["verdict"] != "pass"]
    assert [(p.id, p.path, p.message, p.fix, p.severity) for p in problems] == flagged
    assert "global_batch" in {p.id for p in problems if p.severity == "error"}
    code, text, _ = run("gate", str(brief))
    for p in problems:  # the gate's table row is the problem's line behind the verdict and the check id
        assert any(line.startswith(("FAIL", "WARN")) and line.endswith(p.line()) for line in text.splitlines()), p


def test_a_tampered_manifest_refuses_the_launch_in_the_same_shape(rendered: Path) -> None:
    cfg = rendered / "grpo_config.yaml"
    cfg.write_text(cfg.read_text() + "\nlearning_rate: 1.0e-4\n")
    (rendered / "launch.sh").unlink()
    code, out, _ = run("launch", str(rendered), "--plan")
    problems = problems_of(out)
    assert code == 1
    assert [(p.id, p.path) for p in problems] == [("edited_file", "grpo_config.yaml"), ("missing_file", "launch.sh")]
    code, _, err = run("launch", str(rendered))
    assert code == 1 and err.startswith(f"finetune launch: {rendered} is refused")
    assert_lines_carry_fixes(err, problems)


def test_a_gate_that_no_longer_passes_refuses_the_launch_with_its_checks(rendered: Path) -> None:
    rewards = rendered.parents[1] / "my_rewards.py"  # the reward code changes: both records go stale
    rewards.write_text(rewards.read_text() + "\n# changed\n")
    code, out, _ = run("launch", str(rendered), "--plan")
    problems = problems_of(out)
    assert code == 1
    assert {(p.id, p.path) for p in problems} == {("base_success_nonzero", "records.baseline"),
                                                  ("reward_inspected", "records.inspection")}
    assert all(p.message.startswith("stale: ") for p in problems)
    code, _, err = run("launch", str(rendered), "--detach")
    assert code == 1 and "the gate rejects its brief now" in err
    assert_lines_carry_fixes(err, problems)


def test_a_folder_without_manifest_is_unusable_in_the_same_shape(tmp_path: Path) -> None:
    code, out, _ = run("launch", str(tmp_path), "--plan")
    [problem] = problems_of(out)
    assert (code, problem.id) == (2, "unusable_input") and "manifest.json does not exist" in problem.message


def test_a_passing_plan_says_ok(rendered: Path) -> None:
    code, out, _ = run("launch", str(rendered), "--plan")
    plan = json.loads(out)
    assert code == 0 and plan["ok"] is True and plan["how"]
    assert [p.line() for p in problems_of(out)] == plan["backend_problems"]


def test_every_line_carries_its_fix(tmp_path: Path) -> None:
    """Brief, record, manifest and launch problems alike (a record problem's line used to drop it)."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.records.baseline import verify_baseline
    from llm_finetuning.records.inspection import verify_inspection

    brief, _ = load_brief(prepare_brief(tmp_path / "b", "passing", records=False))
    assert brief is not None
    for verify, key in ((verify_baseline, "baseline"), (verify_inspection, "inspection")):
        record, [missing] = verify(brief, brief.resolve(f"records/{key}.json"))
        assert record is None
        assert (missing.id, missing.path) == ("missing", "record")
        assert missing.line() == f"record: {missing.message} Fix: {missing.fix}" and "finetune" in missing.fix
    assert Problem("stale", "reward_code", "reward code changed since the record", "run `finetune inspect b.yaml`",
                   ).line() == "reward_code: reward code changed since the record Fix: run `finetune inspect b.yaml`"
    assert Problem("unusable_input", "", "x.yaml does not exist", "give a path").line() == \
        "x.yaml does not exist Fix: give a path"


def test_every_verb_and_subcommand_converts_problems_in_the_one_place() -> None:
    """The CLI wraps each verb's callback, and each subcommand's (`finetune keys trust`), in `converting_problems`:
    a verb raises an UnusableInput and needs no `except` of its own to print it."""
    import click

    from llm_finetuning.cli import VERBS

    ctx = click.Context(cli)
    seen = []
    todo = [cli.get_command(ctx, verb) for verb in VERBS]
    while todo:
        command = todo.pop()
        assert command is not None
        seen.append(command.name)
        assert getattr(command.callback, "converts_problems", False), command.name
        todo += list(getattr(command, "commands", {}).values())
    assert {"eval", "export", "stop", "keys", "trust", "rotate"} <= set(seen)


def text_enums() -> list[type[TextEnum]]:
    from llm_finetuning.gate import Verdict
    from llm_finetuning.launch.detach import RunState

    return [Severity, Verdict, RunState]


@pytest.mark.parametrize("enum", text_enums(), ids=lambda e: e.__name__)
def test_an_enum_member_prints_and_serialises_as_its_string(enum: type[TextEnum]) -> None:
    """Severities, gate verdicts and run states are enums, and every output still holds the bare strings: json.dumps
    byte for byte, str(), format() with a width and f-strings (a str-mixin Enum prints `Verdict.PASS` there on
    Python 3.11 and 3.12), equality and hashing (a string read from a record is the same key)."""
    for member in enum:
        value = member.value
        assert json.dumps({"k": member, "l": [member]}, indent=2) == json.dumps({"k": value, "l": [value]}, indent=2)
        assert (str(member), f"{member}", f"{member:<12}|", f"{member}") == (value, value, f"{value:<12}|", value)
        assert member == value and hash(member) == hash(value) and {value: 1}[member] == 1
        assert enum(value) is member and member.upper() == value.upper()


def test_a_problem_read_back_from_json_is_the_same_problem() -> None:
    """`finetune check` reads the episode probe's problems from a child's stdout: severity back to a Severity."""
    warning = Problem("tool_import", "episode.tools", "cannot import", "install it", Severity.WARNING)
    text = json.dumps(warning.to_json())
    assert text == ('{"id": "tool_import", "path": "episode.tools", "message": "cannot import", "fix": "install it", '
                    '"severity": "warning"}')
    back = Problem.from_json(json.loads(text))
    assert back == warning and back.severity is Severity.WARNING
    assert Problem.from_json({"id": "x", "path": "", "message": "m"}).severity is Severity.ERROR
    with pytest.raises(ValueError):
        Problem.from_json({"id": "x", "path": "", "message": "m", "severity": "fatal"})


def test_every_problem_id_in_the_code_is_documented() -> None:
    """docs/workflow.md lists the ids a consumer may meet; a new `Problem("...")` in src/ must be listed."""
    import ast

    import llm_finetuning
    from llm_finetuning.errors import UNUSABLE_INPUT
    from llm_finetuning.records import KINDS

    section = (REPO / "docs" / "workflow.md").read_text(encoding="utf-8").split("## Errors", 1)[1].split("\n# ", 1)[0]
    ids = {UNUSABLE_INPUT, *KINDS}
    for source in Path(llm_finetuning.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Problem" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                ids.add(node.args[0].value)
    assert len(ids) > 20
    assert [i for i in sorted(ids) if f"`{i}`" not in section] == []
