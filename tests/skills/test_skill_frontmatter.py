"""Every SKILL.md keeps to the Agent Skills spec: frontmatter fields and limits, a lean body, detail in
references/."""

from __future__ import annotations

import re

from skill_bundle import REPO, SKILLS, Doc

SPEC_FIELDS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_BODY_WORDS = 2000


def test_the_five_skills_exist() -> None:
    assert sorted(p.parent.name for p in (REPO / "skills").glob("*/SKILL.md")) == sorted(SKILLS)


def test_frontmatter_is_within_the_spec(skill_doc: Doc) -> None:
    fm = skill_doc.frontmatter
    assert set(fm) <= SPEC_FIELDS, f"fields outside the spec: {sorted(set(fm) - SPEC_FIELDS)}"
    name = fm.get("name")
    assert isinstance(name, str) and NAME.match(name) and len(name) <= 64, name
    assert name == skill_doc.path.parent.name, "name must equal the skill's folder"
    description = fm.get("description")
    assert isinstance(description, str) and 0 < len(description) <= 1024, len(str(description))
    if "compatibility" in fm:
        assert isinstance(fm["compatibility"], str) and 0 < len(fm["compatibility"]) <= 500
    if "metadata" in fm:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in fm["metadata"].items())
    if "license" in fm:
        assert fm["license"] == "MIT"


def test_description_says_when_to_use_it(skill_doc: Doc) -> None:
    description = skill_doc.frontmatter["description"]
    assert "Use when" in description, "the description must say when to use the skill ('Use when ...')"
    assert not re.search(r"\b(I|you) (can|will)\b", description), "descriptions are written in the third person"


def test_body_is_lean_and_points_to_references(skill_doc: Doc) -> None:
    words = len(skill_doc.body.split())
    assert words <= MAX_BODY_WORDS, f"{skill_doc.rel}: {words} words; move detail into references/"
    assert re.search(r"\]\(\.\./\.\./references/[a-z0-9-]+\.md\)", skill_doc.body), \
        "link at least one references/ page for the detail"
    assert skill_doc.body.lstrip().startswith("# "), "the body starts with a title"


def test_body_is_in_the_imperative(skill_doc: Doc) -> None:
    """Instructions address the agent directly; no first-person narration or hedged 'you might want to'."""
    assert not re.search(r"\b(I will|I'll|we will|you might want to|you may want to)\b", skill_doc.body, re.I)
