"""Where the reviewer's signing key, the trusted public keys and a project's protection live.

One module names these places so that `finetune review` (which signs), the gate (which verifies), and
`finetune protect` (which makes the Claude Code sandbox deny an agent reading the key and writing the
trusted keys) agree on them. Standard library only.

- The reviewer's private key: `key_dir()/reviewer.ed25519` (a folder of the person's choosing through
  `LLM_FINETUNING_KEY_DIR`, else `<user config>/keys`). Only the person's own processes read it; inside a
  protected project the sandbox denies every Bash command reading this folder.
- Trusted public keys, one per line (`ed25519 <base64 of the 32-byte key> <comment>`): the user's file
  `<user config>/trusted-keys` and the project's `<project>/.llm-finetuning/trusted-keys` (a team's keys,
  committed with the project). Neither place follows an environment variable, because the gate may run in
  an agent's process, whose environment the agent sets: the user config folder is found from the account's
  home in the password database, not from `$HOME` or `$XDG_CONFIG_HOME`.
- The project: the nearest folder above a brief that holds `.claude/` or `.git`, else the brief's folder;
  its Claude Code settings are `<project>/.claude/settings.json`.
"""

from __future__ import annotations

import os
from pathlib import Path

KEY_DIR_ENV = "LLM_FINETUNING_KEY_DIR"
PRIVATE_KEY_NAME = "reviewer.ed25519"
TRUSTED_KEYS_NAME = "trusted-keys"
PROJECT_DIR_NAME = ".llm-finetuning"


def account_home() -> Path:
    """The home folder of the process's real uid from the password database ($HOME where there is none)."""
    try:
        import pwd

        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        return Path.home()


def user_config_dir() -> Path:
    """`~/.config/llm-finetuning` of the account (never redirected by the environment)."""
    return account_home() / ".config" / "llm-finetuning"


def key_dir() -> Path:
    """The folder that holds the reviewer's private key: $LLM_FINETUNING_KEY_DIR, else `<user config>/keys`."""
    chosen = os.environ.get(KEY_DIR_ENV)
    return Path(chosen).expanduser() if chosen else user_config_dir() / "keys"


def private_key_path() -> Path:
    """The reviewer's Ed25519 private key file."""
    return key_dir() / PRIVATE_KEY_NAME


def user_trusted_keys_path() -> Path:
    """The user's own trusted public keys (`finetune review` adds the person's key here on first use)."""
    return user_config_dir() / TRUSTED_KEYS_NAME


def project_root(start: Path) -> Path:
    """The nearest folder at or above `start` (a brief's folder) holding `.claude/` or `.git`, else `start`."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / ".claude").is_dir() or (folder / ".git").exists():
            return folder
    return start


def project_trusted_keys_path(root: Path) -> Path:
    """A project's trusted public keys: `<project>/.llm-finetuning/trusted-keys`."""
    return Path(root) / PROJECT_DIR_NAME / TRUSTED_KEYS_NAME


def project_settings_path(root: Path) -> Path:
    """A project's shared Claude Code settings: `<project>/.claude/settings.json`."""
    return Path(root) / ".claude" / "settings.json"


def isolated_python(module: str) -> list[str]:
    """The command line that runs `module` of this package (`python -m module`) in an isolated interpreter: `-I`
    keeps the working directory, PYTHONPATH and the user's site folder off sys.path, so nothing in the folder it
    starts in (a project, a run folder) is imported in place of this package; the package's own folder is put
    back first, for a package that is itself found through PYTHONPATH."""
    import sys

    root = str(Path(__file__).resolve().parents[1])
    bootstrap = (f"import runpy, sys; sys.path.insert(0, {root!r}); "
                 f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-c", bootstrap]
