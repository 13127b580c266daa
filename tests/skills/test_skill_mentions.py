"""Everything the skills, the agent, the command and the reference pages point at exists: linked files,
paths in code spans, `finetune` verbs (their --help exits 0) and the options they show."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from skill_bundle import REPO, Doc

from llm_finetuning.cli import VERBS

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"(`{3,})[a-z]*\n(.*?)\1", re.S)  # a fence closes with as many backticks as it opened
PATH_LIKE = re.compile(r"^(?:\.\./)*(?:skills|references|examples|evals|agents|commands|bin|assets|docs|src)/[\w./-]+$")
FINETUNE = re.compile(r"(?<![\w/.-])finetune ([a-z][a-z-]*)((?: +[^\s`|]+)*)")


def mentioned_paths(doc: Doc) -> list[str]:
    prose = FENCE.sub("", doc.body)  # `x](y)` inside code is code (an index then a call), not a link
    found = [m for m in LINK.findall(prose) if not m.startswith(("http://", "https://", "mailto:"))]
    found += [s for s in CODE_SPAN.findall(doc.body) if PATH_LIKE.match(s)]
    return found


def resolve(doc: Doc, ref: str) -> Path | None:
    """The file a mention points at: relative to the page, or to the repository root."""
    for base in (doc.path.parent, REPO):
        candidate = (base / ref).resolve()
        if candidate.exists():
            return candidate
    return None


def test_mentioned_paths_exist(bundle_doc: Doc) -> None:
    missing = [ref for ref in mentioned_paths(bundle_doc) if resolve(bundle_doc, ref) is None]
    assert not missing, f"{bundle_doc.rel} mentions missing files: {sorted(set(missing))}"


def finetune_commands(doc: Doc) -> list[tuple[str, list[str]]]:
    """(verb, options) for every `finetune VERB ...` in code spans and fenced blocks."""
    snippets = CODE_SPAN.findall(FENCE.sub("", doc.body))
    snippets += [line for _, block in FENCE.findall(doc.body) for line in block.splitlines()]
    commands = []
    for snippet in snippets:
        for verb, rest in FINETUNE.findall(snippet):
            words = shlex.split(rest.replace("$ARGUMENTS", "BRIEF"), comments=True, posix=True) if rest else []
            commands.append((verb, [w.split("=")[0] for w in words if w.startswith("-")]))
    return commands


@functools.cache
def verb_help(verb: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llm_finetuning.cli", verb, "--help"], capture_output=True,
                          text=True, timeout=120, check=False)


def test_finetune_commands_parse_with_the_real_cli(bundle_doc: Doc) -> None:
    commands = finetune_commands(bundle_doc)
    if not commands:
        pytest.skip(f"{bundle_doc.rel} shows no finetune command")
    problems = []
    for verb, options in commands:
        if verb not in VERBS:
            problems.append(f"`finetune {verb}` is not a verb of the CLI ({', '.join(VERBS)})")
            continue
        result = verb_help(verb)
        if result.returncode != 0:
            problems.append(f"`finetune {verb} --help` exited {result.returncode}: {result.stderr.strip()}")
            continue
        absent = [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", result.stdout)]
        problems += [f"`finetune {verb}` has no option {o}" for o in absent]
    assert not problems, f"{bundle_doc.rel}:\n" + "\n".join(sorted(set(problems)))


def test_every_verb_a_skill_shows_has_help() -> None:
    """The verbs the bundle shows, all at once: --help exits 0 for each (fast feedback in one place)."""
    from skill_bundle import bundle_docs

    verbs = {verb for doc in bundle_docs() for verb, _ in finetune_commands(doc)}
    assert {"check", "gate", "baseline", "inspect", "review", "render", "launch", "diagnose"} <= verbs
    for verb in sorted(verbs & set(VERBS)):
        assert verb_help(verb).returncode == 0, verb


def test_slash_command_and_plugin_commands_exist() -> None:
    assert (REPO / "commands/finetune.md").is_file()  # /finetune
    for doc_path in [*REPO.glob("skills/*/SKILL.md"), *REPO.glob("agents/*.md")]:
        text = doc_path.read_text(encoding="utf-8")
        for slash in re.findall(r"(?<![\w./])/([a-z][a-z-]+)\b(?= BRIEF|`)", text):
            assert (REPO / "commands" / f"{slash}.md").is_file(), f"{doc_path}: /{slash} has no command file"
        if "llm-finetuning-setup" in text:
            assert (REPO / "bin/llm-finetuning-setup").is_file()
