"""Every Problem the product builds carries a fix: a walk over every constructor site in src/ of the Problem
shape (`Problem(...)`, `UnusableInput(...)` and its subclasses) that fails on a missing or empty fix argument.
A fix passed as a variable cannot be judged here; such sites pass on a fix computed elsewhere, which the
verbs' own tests read."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "llm_finetuning"
FIX_POSITION = {"Problem": 3, "UnusableInput": 1, "NothingRuns": 1}  # (id, path, message, fix) / (message, fix)


def _fix_argument(call: ast.Call, position: int) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == "fix"), None)


def sites_without_a_fix(sources: dict[str, str]) -> list[str]:
    """`file:line Name(...) has no fix` for each constructor call in `sources` ({name: source text})."""
    found = []
    for name_of_file, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name not in FIX_POSITION or any(isinstance(a, ast.Starred) for a in node.args):
                continue
            fix = _fix_argument(node, FIX_POSITION[name])
            if fix is None or (isinstance(fix, ast.Constant) and not fix.value):
                found.append(f"{name_of_file}:{node.lineno} {name}(...) has no fix")
    return found


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py"))}


def test_every_problem_constructor_site_has_a_fix() -> None:
    assert sites_without_a_fix(_sources()) == []


def test_the_walk_sees_the_sites() -> None:
    """Not vacuous: the product builds over a hundred Problems, and a site without a fix is caught."""
    calls = sum(1 for source in _sources().values() for n in ast.walk(ast.parse(source))
                if isinstance(n, ast.Call) and (getattr(n.func, "id", None) or getattr(n.func, "attr", None))
                in FIX_POSITION)
    assert calls > 100
    snippet = 'UnusableInput("gone", "", "x")\nProblem("a", "b", "c")\nProblem("a", "b", "c", fix="do it")\n'
    assert sites_without_a_fix({"x.py": snippet}) == ["x.py:1 UnusableInput(...) has no fix",
                                                      "x.py:2 Problem(...) has no fix"]
