"""references/brief-fields.md is generated from the schema and must not be stale."""

from __future__ import annotations

from pathlib import Path

from llm_finetuning.brief import docgen, schema

REPO = Path(__file__).resolve().parents[2]


def test_brief_fields_page_is_in_sync_with_the_schema() -> None:
    assert docgen.main(["--check", "--root", str(REPO)]) == 0, "run: python -m llm_finetuning.brief.docgen"


def test_every_schema_field_has_a_description_and_appears_on_the_page() -> None:
    page = (REPO / "references/brief-fields.md").read_text(encoding="utf-8")

    def walk(node: dict, prefix: str) -> None:
        for key, sub in node.get("properties", {}).items():
            assert sub.get("description"), f"{prefix}{key} has no description"
            assert f"`{prefix}{key}`" in page
            if "properties" in sub:
                walk(sub, f"{prefix}{key}.")
            if "properties" in sub.get("items", {}):
                walk(sub["items"], f"{prefix}{key}[].")

    walk(schema(), "")
