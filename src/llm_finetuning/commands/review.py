"""`finetune review RECORD`: a person judges each scored sample at a terminal, then seals the record.

One sample at a time: prompt, completion, every reward's value (the reward's verdict) with the reward's
explanation of it where it gave one (the extracted answer, the failing test, the schema path, ...), and
the reference. An episode fits a 24-line terminal: the system prompt and worked episodes are folded to a line
each, the reference is summarised (the inspection report keeps both whole), and raw chat-format tokens the
model wrote inside a turn are highlighted and pointed at.
Keys: `a` agree, `d` disagree, `u` unsure (each may be followed by a note: `d the age is a string`),
`b` back, `n` next, `g N` go to sample N, `q` quit (progress is kept), `?` help. Every verdict is saved
at once, atomically, so an interrupted review resumes where it stopped. When every sample has a verdict
the reviewer gives their name and the record is sealed.

Each verdict carries the seconds from the moment its sample was shown to the verdict key; time spent on
a sample before moving away without a verdict (`b`, `n`, `g`), or on an earlier verdict, adds up. The seal
keeps them with the OS user and the terminal, and the gate warns when the median is too short for a read.

The seal is signed with the reviewer's Ed25519 private key (`--key PATH`, else
`$LLM_FINETUNING_KEY_DIR/reviewer.ed25519`, else `~/.config/llm-finetuning/keys/reviewer.ed25519`), made on
first use; a key that no trusted-keys file lists is added to the project's (`.llm-finetuning/trusted-keys`)
and the person is told (docs/gate.md, "Signing").

It refuses to run unless stdin and stdout are an interactive terminal (exit 2), so that an agent's
non-interactive shell cannot review for the person. That guards against rubber-stamping; the signature is
what an agent without the key cannot make, and neither proves that a human read the samples. Exit 0 sealed without disagreement, 1 sealed with
disagreements (the gate rejects the record and lists them) or review left unfinished, 2 no terminal or
unusable record.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from llm_finetuning.errors import EXIT_OK, EXIT_REJECTED, EXIT_UNUSABLE
from llm_finetuning.records.review_session import VERDICT_KEYS, Finish, ReviewSession

if TYPE_CHECKING:
    from rich.console import Console

    from llm_finetuning.records.inspection import ReviewerKey

KEYS_HELP = ("[a] agree  [d] disagree  [u] unsure  (+ a note: `d age is a string`)\n"
             "[b] back  [n] next  [g N] go to sample N  [q] quit and resume later  [?] help")
NO_TERMINAL = (
    "finetune review needs a person at an interactive terminal (stdin and stdout must be a TTY); "
    "it will not run from a script or an agent's shell, so that nobody signs a review they did not read.\n"
    "Ask the person who owns this reward to run, in their own terminal:\n  finetune review {record}"
)


def default_reviewer() -> str:
    """`git config user.name`, else $USER, else ''."""
    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=5,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return name or os.environ.get("USER", "") or os.environ.get("USERNAME", "")


class Review(ReviewSession):
    """A review session (records.review_session) with the terminal it is drawn on."""

    def __init__(self, path: Path, key_path: Path | None = None) -> None:
        from rich.console import Console

        super().__init__(path, key_path)
        self.console = Console(highlight=False)

    def show(self, i: int) -> None:
        """Sample i on one screen: an episode fits a 24-line terminal (context folded, reference summarised)."""
        from rich.markup import escape
        from rich.table import Table
        from rich.text import Text

        from llm_finetuning.records.episodes import (
            SPECIAL_TOKEN,
            completion_view,
            prompt_lines,
            reference_lines,
            special_tokens_in_turns,
        )
        from llm_finetuning.records.inspection import sample_explanations

        s = self.samples[i]
        c = self.console
        c.clear()
        c.rule(f"Sample {i + 1}/{self.n}  ({s['id']})   reviewed {self.reviewed()}/{self.n}")
        c.rule("Prompt", align="left", characters="·")
        c.print(Text("\n".join(prompt_lines(s.get("prompt", "")))))
        cut = "  [cut at max_completion_length]" if s.get("truncated") else ""
        label, text = completion_view(s)
        body = Text(text)
        body.highlight_regex(SPECIAL_TOKEN.pattern, "bold reverse")
        c.rule(escape(f"{label}{cut}"), align="left", characters="·")
        c.print(body)
        episode = s.get("episode")
        raw = special_tokens_in_turns(episode) if isinstance(episode, dict) else []
        if raw:
            c.print(Text(f"! raw special tokens the model wrote in {'; '.join(raw)}: a made-up chat turn", style="bold"))
        outcome = "success" if s.get("success") else "failure"
        c.rule(f"The reward's verdict: total {s.get('total')}, counted as a {outcome}", align="left", characters="·")
        table = Table(box=None, pad_edge=False, show_edge=False)
        table.add_column("reward")
        table.add_column("value", justify="right")
        why = sample_explanations(s)
        if why is not None:
            table.add_column("why", overflow="fold")
        rewards = s.get("rewards")
        for name, value in (rewards if isinstance(rewards, dict) else {}).items():
            cells = [Text(str(name)), Text(f"{value:g}" if isinstance(value, (int, float)) else str(value))]
            table.add_row(*cells, *([Text(why.get(name) or "")] if why is not None else []))
        c.print(table)
        c.rule("Reference (summarised; whole in the inspection report)", align="left", characters="·")
        c.print(Text("\n".join(reference_lines(s.get("reference", {})))))
        current = self.verdict(s)
        if current:
            note = f" (note: {current.get('note')})" if current.get("note") else ""
            c.print(f"Your verdict so far: {current['verdict']}{note}", markup=False)
        c.print("Is every reward value right for this completion?  " + KEYS_HELP, markup=False)


def _ask(console: Console, prompt: str) -> str | None:
    """One line from the person; None on end of input or Ctrl-C."""
    from rich.markup import escape

    try:
        return str(console.input(escape(prompt)))
    except (EOFError, KeyboardInterrupt):
        return None


def _summary(review: Review) -> list[tuple[str, str]]:
    from llm_finetuning.records.inspection import VERDICTS, disagreements

    counts = review.counts()
    review.console.print("Summary: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + f" of {review.n} samples")
    dis = disagreements(review.record)
    for sid, note in dis:
        review.console.print(f"  disagree {sid}" + (f": {note}" if note else ""), markup=False)
    return dis


def _tell_key(review: Review, key: ReviewerKey, name: str) -> None:
    """Tell the person what happened to their signing key: made now, trusted now, or not trusted."""
    from llm_finetuning.locations import private_key_path

    c = review.console
    if key.created:
        where = review.key_path or private_key_path()
        c.print(f"Made your signing key {where} (mode 600): keep it private; `finetune keys` shows its public half.",
                markup=False)
    if key.trusted_in is not None:
        c.print(f"Added your public key {key.key_id} to {key.trusted_in} as {name!r}: commit that file so the "
                "gate trusts your reviews wherever the project goes.", markup=False)
    if key.trust_error:
        c.print(f"Could not add your public key {key.key_id} to the project's trusted keys: {key.trust_error}. The "
                f"gate rejects this record until that file holds the line: ed25519 {key.public_key} {name}",
                markup=False)


def _finish(review: Review) -> Finish:
    from llm_finetuning.errors import UnusableInput
    from llm_finetuning.records.inspection import reviewer_key, seal

    c = review.console
    c.clear()
    c.rule("All samples have a verdict")
    dis = _summary(review)
    while True:
        answer = _ask(c, "[s] seal the review  [b] back to the last sample  [q] quit and seal later: ")
        if answer is None or answer.strip().lower() == "q":
            c.print(f"Not sealed. Run `finetune review {review.path}` again to seal.", markup=False)
            return Finish.NOT_SEALED
        if answer.strip().lower() == "b":
            return Finish.BACK
        if answer.strip().lower() == "s":
            break
    default = default_reviewer()
    name = ""
    while not name:
        answer = _ask(c, f"Your name, recorded as the reviewer [{default}]: " if default
                      else "Your name, recorded as the reviewer: ")
        if answer is None:
            c.print("Not sealed.")
            return Finish.NOT_SEALED
        name = answer.strip() or default
    try:
        key = reviewer_key(review.path, name, review.key_path)
        seal(review.path, name, key)
    except UnusableInput as exc:  # a record or key it cannot use: said in the review's own screen
        c.print(f"Cannot seal: {exc.message}. {exc.fix}", markup=False)
        return Finish.NOT_SEALED
    c.print(f"Sealed {review.path} as reviewed by {name}, signed with key {key.key_id}.", markup=False)
    _tell_key(review, key, name)
    if dis:
        c.print(f"You disagreed with the reward on {len(dis)} sample(s): {', '.join(s for s, _ in dis)}. "
                "The gate will reject this record until the reward is fixed and inspected again: "
                "fix the reward, then run `finetune inspect BRIEF` and `finetune review` again.", markup=False)
    else:
        c.print("No disagreements: the gate accepts this inspection while the reward code, specs and model "
                "stay as they are.")
    return Finish.SEALED


def run_review(path: Path, key_path: Path | None = None) -> int:
    """The interactive loop; returns the exit code."""
    from llm_finetuning.records.inspection import disagreements, is_sealed, review_of

    review = Review(path, key_path)
    c = review.console
    if is_sealed(review.record):
        who = review_of(review.record).get("reviewer", "?")
        c.print(f"{path} is already sealed (reviewer: {who}).", markup=False)
        dis = _summary(review)
        return EXIT_REJECTED if dis else EXIT_OK
    i = review.start()
    if i < review.n and review.reviewed():
        c.print(f"Resuming: {review.reviewed()} of {review.n} samples already have a verdict.")
    while True:
        if i >= review.n:
            i = review.start()
            if i < review.n:
                continue  # a sample still has no verdict
            finish = _finish(review)
            if finish is Finish.SEALED:
                return EXIT_REJECTED if disagreements(review.record) else EXIT_OK
            if finish is Finish.NOT_SEALED:
                return EXIT_REJECTED
            i = review.n - 1  # Finish.BACK: the last sample
            continue
        review.show(i)
        shown_at = time.monotonic()
        answer = _ask(c, "> ")
        review.looked(i, time.monotonic() - shown_at)
        if answer is None:
            c.print(f"\nStopped. {review.reviewed()}/{review.n} verdicts are saved; run "
                    f"`finetune review {path}` to resume.", markup=False)
            return EXIT_REJECTED
        key, _, note = answer.strip().partition(" ")
        key = key.lower()
        if key in VERDICT_KEYS:
            note = note.strip()
            if key == "d" and not note:
                asked = _ask(c, "What is wrong with the reward's value? (a note, Enter to skip): ")
                note = (asked or "").strip()
            i = review.judge(i, VERDICT_KEYS[key], note)
        elif (moved := review.moved(i, key, note)) is not None:
            i = moved
        elif key == "q":
            c.print(f"Stopped. {review.reviewed()}/{review.n} verdicts are saved; run "
                    f"`finetune review {path}` to resume.", markup=False)
            return EXIT_REJECTED
        else:
            c.print(KEYS_HELP, markup=False)
            _ask(c, "(Enter to continue) ")


@click.command("review")
@click.argument("record", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--key", "key_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Your Ed25519 private key file (made there on first use). Default: reviewer.ed25519 in "
              "$LLM_FINETUNING_KEY_DIR, else in ~/.config/llm-finetuning/keys/.")
def command(record: Path, key_path: Path | None) -> None:
    """Review each scored sample of RECORD at a terminal (agree / disagree / unsure), then seal and sign it."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        click.echo(NO_TERMINAL.format(record=record), err=True)
        sys.exit(EXIT_UNUSABLE)
    code = run_review(record, key_path)
    sys.exit(code)
