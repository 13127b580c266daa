"""The docs pages the README links to exist, their relative links resolve, and the CLI table in
docs/workflow.md lists every verb the CLI has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llm_finetuning.cli import VERBS

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://", "#", "mailto:")):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"


def test_the_cli_table_lists_every_verb() -> None:
    table = (REPO / "docs/workflow.md").read_text(encoding="utf-8").split("# The CLI", 1)[1].split("\n# ", 1)[0]
    listed = set(re.findall(r"^\| `finetune ([a-z-]+)", table, re.M))
    assert listed == set(VERBS), f"missing {sorted(set(VERBS) - listed)}, extra {sorted(listed - set(VERBS))}"


def test_the_readme_is_a_front_page() -> None:
    """docs/development.md: the README is a front page (at most 2,000 words); the detail lives in docs/*.md."""
    words = len((REPO / "README.md").read_text(encoding="utf-8").split())
    assert words <= 2000, f"README.md has {words} words; move detail into docs/"


def test_the_readmes_count_of_broker_era_red_team_tests_is_the_suites() -> None:
    """The README's figure for the red-team tests of the broker and confinement design counts the tests in the
    three files it names, so a test added or removed there changes the figure or fails here."""
    files = ["test_redteam_trust.py", "test_redteam_confine.py", "test_redteam_broker.py"]
    count = sum(len(re.findall(r"^def test_", (REPO / "tests" / "redteam" / f).read_text(encoding="utf-8"), re.M))
                for f in files)
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert f"`test_redteam_broker.py`): {count} tests, and no attack in them has an effect" in readme
