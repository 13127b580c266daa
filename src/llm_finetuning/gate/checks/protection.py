"""The project protects its records and the reviewer's key when an agent runs the gate inside Claude Code.

Inside Claude Code (the client sets CLAUDECODE=1 for its Bash commands) the check fails when the reviewer's
private key opens from the gate's own process (unless the plugin's broker runs the gate: it is the person's
side, outside the sandbox, and reads the key by design), or when the project's settings lack what `finetune protect`
writes (the sandbox on, failing closed, unsandboxed commands off, the brief's records folders denied for
writing, the key folder for reading), or when the person has no record of protecting the project
(`finetune protect` writes one in the user config folder, which the sandbox keeps read-only: a folder the agent
made is not a protected project) or the brief's records lie outside the folders it fenced.
`protection: {required: false, reason: ...}` turns that into a warning only where the person recorded that
the project runs without the sandbox (`finetune protect --unprotected REASON`): the agent can write the brief. In a person's own terminal it passes with a note. What the settings enforce: docs/security.md.
"""

from __future__ import annotations

from llm_finetuning.brief import Brief
from llm_finetuning.gate.context import GateContext
from llm_finetuning.gate.protection import FIX, missing_protection, outside_registered, records_folders
from llm_finetuning.gate.result import FAIL, PASS, WARN, CheckResult

ID = "protection"
PATH = "protection"


def check(brief: Brief, ctx: GateContext) -> list[CheckResult]:
    facts = ctx.protection
    if facts is None or not facts.in_claude_code:
        return [CheckResult(ID, PASS, PATH, "not run inside Claude Code (CLAUDECODE unset): a person's own "
                            "terminal, where nothing needs fencing in")]
    found = []
    if facts.key_readable and not facts.in_broker:
        found.append(f"the reviewer's private key {facts.key_path} is readable from the gate's own process")
    folders = records_folders(brief.records.paths(), brief.folder)
    if facts.settings is None:
        found.append(facts.settings_problem or f"{facts.project}/.claude/settings.json does not exist")
    else:  # settings there, yet no record of the person's: settings someone else wrote (protect writes both)
        found += missing_protection(facts.settings, facts.project, folders)
        found += outside_registered(facts.registered, facts.project, folders)
    fix = FIX.format(project=facts.project)
    if not found:
        where = "in the plugin's broker (outside the sandbox)" if facts.in_broker else "inside Claude Code"
        return [CheckResult(ID, PASS, PATH, f"{where}, and the sandbox fences the records and the reviewer's key "
                            "from the agent in this project")]
    opt_out = brief.protection
    left_open = facts.registered.unprotected if facts.registered is not None else ""
    if not opt_out.required and left_open:
        return [CheckResult(ID, WARN, PATH, f"inside Claude Code without the protection ({'; '.join(found)}); "
                            f"the brief does without it: {opt_out.reason} (the person left this project open: "
                            f"{left_open})", fix)]
    if not opt_out.required:  # the agent can write the brief: only the person's own record makes it count
        fix = (f"{fix}; or, to run this project without the sandbox, the person runs `finetune protect --project "
               f"{facts.project} --unprotected REASON` in their own terminal (the brief's `protection: "
               "{required: false}` alone does not count)")
    return [CheckResult(ID, FAIL, PATH, f"inside Claude Code, {what}", fix) for what in found]
