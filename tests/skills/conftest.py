"""Parametrisation over the plugin's Markdown.

A test that takes `skill_doc` runs once per skill; one that takes `bundle_doc` runs once per page this
area owns (skills, agent, command, its reference pages, the evals README).
"""

from __future__ import annotations

import pytest
from skill_bundle import bundle_docs, skill_docs


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "skill_doc" in metafunc.fixturenames:
        docs = skill_docs()
        metafunc.parametrize("skill_doc", docs, ids=[d.name for d in docs])
    if "bundle_doc" in metafunc.fixturenames:
        docs = bundle_docs()
        metafunc.parametrize("bundle_doc", docs, ids=[d.rel for d in docs])
