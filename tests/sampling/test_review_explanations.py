"""The rewards' explanations on the review screen and in the report, bound into the record like the rest
of each sample; records written before explanations existed show as before. Driven through a real
pseudo-terminal."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import FINETUNE, cli_env, copy_example, load, make_inspection
from .ptydrive import PtyDriver


def _review(record: Path, tmp_path: Path) -> PtyDriver:
    env = cli_env(USER="ada", GIT_CONFIG_GLOBAL=str(tmp_path / "no-gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                  TERM="xterm")
    return PtyDriver([*FINETUNE, "review", str(record)], env=env, cwd=str(tmp_path))


def _problems(brief_path: Path, record: Path) -> list:
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.inspection import verify_inspection

    brief = load(brief_path)
    return verify_inspection(brief, record, model_identity(brief.model, brief.folder))[1]


def test_review_shows_why_each_value_then_seals_and_binds_it(tmp_path: Path) -> None:
    brief_path = copy_example("json-person", tmp_path)
    record = make_inspection(brief_path, explain=True)
    samples_file = record.with_name("inspection.samples.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert samples[0]["explanations"] == {"json_schema": "the completion is strict JSON and valid against the schema"}
    wrong_age = samples[1]["reference"]["age"]
    assert samples[1]["explanations"] == {"json_schema": f"schema error at $.age: {wrong_age} was expected"}

    review = _review(record, tmp_path)
    review.expect(r"Sample 1/50")
    seen = review.expect(r"> ")
    assert "why" in seen and "the completion is strict JSON and valid against the schema" in seen
    review.send("a")
    review.expect(r"Sample 2/50")
    seen = review.expect(r"> ")
    assert f"schema error at $.age: {wrong_age} was expected" in seen
    for i in range(2, 51):
        if i > 2:
            review.expect(rf"Sample {i}/50")
            review.expect(r"> ")
        review.send("a")
    review.expect(r"\[s\] seal the review")
    review.send("s")
    review.expect(r"recorded as the reviewer \[ada\]")
    review.send("")
    review.expect(r"No disagreements")
    assert review.wait() == 0
    assert _problems(brief_path, record) == []

    # The explanation is part of what the person read: editing it afterwards is tampering.
    lines = samples_file.read_text().splitlines(keepends=True)
    edited = json.loads(lines[1])
    edited["explanations"]["json_schema"] = "valid"
    lines[1] = json.dumps(edited, ensure_ascii=False, sort_keys=True) + "\n"
    samples_file.write_text("".join(lines))
    problems = _problems(brief_path, record)
    assert [(p.id, p.path) for p in problems] == [("tampered", "samples")]
    assert "changed or removed: s001" in problems[0].message


def test_a_record_without_explanations_reviews_as_before(tmp_path: Path) -> None:
    record = make_inspection(copy_example("json-person", tmp_path))
    assert all("explanations" not in json.loads(line)
               for line in record.with_name("inspection.samples.jsonl").read_text().splitlines())
    review = _review(record, tmp_path)
    review.expect(r"Sample 1/50")
    seen = review.expect(r"> ")
    assert "The reward's verdict" in seen and "json_schema" in seen
    assert "why" not in seen.split("The reward's verdict", 1)[1].split("Reference", 1)[0]
    review.send("q")
    assert review.wait() == 1


def test_reports_put_each_explanation_beside_its_value(tmp_path: Path) -> None:
    from llm_finetuning.records.inspection import load_samples
    from llm_finetuning.sampling.report import render_html, render_markdown

    record = make_inspection(copy_example("json-person", tmp_path), explain=True)
    samples = load_samples(record)
    samples[2]["explanations"]["json_schema"] = "a <b>bold</b> | claim\x1b[2J"  # text from a reward, shown as text
    meta = {"brief": "json-person", "model": "m", "record": str(record), "rewards": ["json_schema"],
            "success_definition": "every verifier scores 1"}
    md = render_markdown(samples, meta)
    assert md.count("| reward | value | why |") == 50
    assert "| `json_schema` | 1 | the completion is strict JSON and valid against the schema |" in md
    wrong_age = samples[1]["reference"]["age"]
    assert f"| `json_schema` | 0 | schema error at $.age: {wrong_age} was expected |" in md
    assert "| `json_schema` | 1 | a &lt;b&gt;bold&lt;/b&gt; \\| claim [2J |" in md
    page = render_html(samples, meta)
    assert page.count("<th>why</th>") == 50
    assert f'<td class="why">schema error at $.age: {wrong_age} was expected</td>' in page
    assert '<td class="why">a &lt;b&gt;bold&lt;/b&gt; | claim [2J</td>' in page and "\x1b" not in page

    old = make_inspection(copy_example("json-person", tmp_path / "old"))
    old_samples = load_samples(old)
    assert "why" not in render_markdown(old_samples, meta) and "<th>why</th>" not in render_html(old_samples, meta)
