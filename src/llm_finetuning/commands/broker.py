"""`finetune broker`: serve the gated verbs to Claude Code as the plugin's stdio MCP server.

Claude Code starts it from the plugin's `.mcp.json` (server `finetune`) in the project's folder; it is not a
command for a terminal. What it serves and how each tool runs: docs/claude-code.md ("The broker").
"""

from __future__ import annotations

import os
import sys

import click


@click.command("broker")
def command() -> None:
    """Serve check, baseline, inspect, gate, render, launch (detached), status, stop, diagnose, eval, export and
    memory as MCP tools over stdio, for the project in the working directory. Never review, keys or protect."""
    if not sys.flags.isolated:  # the broker is the person's side: nothing from the project may shadow a module
        os.execv(sys.executable, [sys.executable, "-I", "-m", "llm_finetuning.cli", "broker"])
    from llm_finetuning.broker.server import serve

    serve()
