"""`finetune keys [show|trust|rotate]`: the reviewer's signing key and the keys a project trusts.

- `finetune keys [show] [--key PATH]`: the public key as the line a trusted-keys file holds, its id, and
  where the private key lives (nothing is made; `finetune review` makes the key on first use).
- `finetune keys trust PUBKEY --project DIR [--name NAME]`: add a key (the base64, or the whole
  `ed25519 <base64> <comment>` line a teammate's `finetune keys` printed) to DIR's trusted keys.
- `finetune keys rotate [--key PATH] [--project DIR] [--name NAME]`: a new private key in place of the old,
  the new public key added to the project's trusted keys; the old public key stays trusted until the person
  removes its line by hand (records it signed keep verifying until then).

Exit 0 done, 2 no key yet, an unreadable key, or a key that is not one. Formats and what a signature proves:
docs/gate.md ("Signing").
"""

from __future__ import annotations

from pathlib import Path

import click

from llm_finetuning.errors import UnusableInput

KEY_OPTION = click.option("--key", "key_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
                          help="The private key file (default: reviewer.ed25519 in $LLM_FINETUNING_KEY_DIR, else in "
                          "~/.config/llm-finetuning/keys/).")


def _key_file(key_path: Path | None) -> Path:
    from llm_finetuning.locations import private_key_path

    return key_path or private_key_path()


def _project(project: Path | None) -> Path:
    from llm_finetuning.locations import project_root

    return project_root(project or Path.cwd())


@click.group("keys", invoke_without_command=True)
@KEY_OPTION
@click.pass_context
def command(ctx: click.Context, key_path: Path | None) -> None:
    """The reviewer's signing key (show, rotate) and a project's trusted keys (trust)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(show, key_path=key_path)


@command.command("show")
@KEY_OPTION
def show(key_path: Path | None) -> None:
    """Print the public key (the line for a trusted-keys file), its id and the private key's place."""
    from llm_finetuning.commands.review import default_reviewer
    from llm_finetuning.records import signing

    where = _key_file(key_path)
    key, _ = signing.private_key(where, create=False)
    public = signing.public_key_of(key)
    click.echo(signing.trusted_line(public, default_reviewer()))
    click.echo(f"key id: {signing.key_id(public)}")
    click.echo(f"private key: {where} (keep it private; never commit it)")


@command.command("trust")
@click.argument("pubkey")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The project whose .llm-finetuning/trusted-keys gets the key (default: the project of the "
              "current folder).")
@click.option("--name", default="", help="The comment kept with the key: whose it is (default: the line's own).")
def trust(pubkey: str, project: Path | None, name: str) -> None:
    """Add PUBKEY (base64, or a whole `ed25519 <base64> <comment>` line) to a project's trusted keys."""
    from llm_finetuning.locations import project_trusted_keys_path
    from llm_finetuning.records import signing

    try:
        public, comment = signing.parse_public_key(pubkey)
    except ValueError as exc:
        raise UnusableInput(str(exc), "give the base64 key, or the line `finetune keys` prints, in quotes") from exc
    target = project_trusted_keys_path(_project(project))
    added = signing.add_trusted_key(target, public, name or comment)
    verb = "added to" if added else "already in"
    click.echo(f"{signing.key_id(public)} {verb} {target}: reviews it signs pass the gate there. Commit the file.")


@command.command("rotate")
@KEY_OPTION
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The project that trusts the new key (default: the project of the current folder).")
@click.option("--name", default="", help="The comment kept with the new key (default: git's user.name).")
def rotate(key_path: Path | None, project: Path | None, name: str) -> None:
    """Make a new private key in place of the old one and trust it in the project; the old public key stays
    trusted until you remove its line."""
    from llm_finetuning.commands.review import default_reviewer
    from llm_finetuning.locations import project_trusted_keys_path
    from llm_finetuning.records import signing

    where = _key_file(key_path)
    old = None
    if where.exists():
        try:
            old = signing.public_key_of(signing.private_key(where, create=False)[0])
        except signing.KeyProblem as exc:  # the same problem, with the way out that rotating offers
            raise signing.KeyProblem(exc.message,
                                     f"{exc.fix}; or move {where} away and run `finetune keys rotate` again") from None
        where.unlink()
    key, _ = signing.private_key(where)
    public = signing.public_key_of(key)
    target = project_trusted_keys_path(_project(project))
    signing.add_trusted_key(target, public, name or default_reviewer())
    click.echo(f"new key {signing.key_id(public)} at {where}; trusted in {target}")
    if old:
        click.echo(f"the old key {signing.key_id(old)} is still trusted wherever it is listed: once the records it "
                   f"signed are reviewed again, delete its line from each trusted-keys file:\n  ed25519 {old} ...")
