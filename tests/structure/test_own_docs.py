"""The contracts (the CLI's verbs and `--json` objects, the brief, the record formats, the reward contract, the
layers) live in this repository's docs, and the code and tests cite those: no file names a design document
that is not in the tree, or a path outside it, and every `docs/<page>.md` a file cites exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("src", "tests", "docs", "references", "skills", "commands", "agents", "hooks", "bench", "evals", "bin",
           ".claude-plugin", "README.md")
SUFFIXES = {".py", ".md", ".json", ".yaml", ".yml", ".j2", ".sh", ".txt", ".toml", ""}
# Spelled in parts so that this file does not match itself.
OUTSIDE = re.compile("|".join((r"\bDESIGN" r"\.md\b", r"\.\./" r"shared\b", r"/work" r"/shared\b")))
CITED_PAGE = re.compile(r"\bdocs/([A-Za-z0-9_-]+\.md)\b")


def text_files() -> Iterator[Path]:
    for top in SCANNED:
        root = REPO / top
        paths = [root] if root.is_file() else sorted(root.rglob("*")) if root.is_dir() else []
        for path in paths:
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                yield path


def test_no_file_cites_a_document_outside_the_repository() -> None:
    found = []
    for path in text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:100]}")
    assert not found, "cite this repository's docs (docs/*.md) instead:\n" + "\n".join(found)


def test_every_cited_docs_page_exists() -> None:
    missing = []
    for path in text_files():
        for page in CITED_PAGE.findall(path.read_text(encoding="utf-8", errors="replace")):
            if not (REPO / "docs" / page).is_file():
                missing.append(f"{path.relative_to(REPO)} cites docs/{page}")
    assert not missing, "\n".join(sorted(set(missing)))
