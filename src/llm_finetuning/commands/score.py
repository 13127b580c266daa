"""`finetune score BRIEF --completions FILE.jsonl [--json]`: run the brief's rewards over given rows.

Each line of FILE is one JSON object with `prompt`, `completion` and the dataset's columns. Output per
row: every reward's value (null where the reward does not apply) and the weighted total of the values
that exist (a row that lacks a reward's column gets null from it; a column that no row has is refused);
with `--explain`, also each reward's explanation of its value (`rewards.explain`): under the
table, or as `explanations` ({name: why or null}) in each `--json` row. Exit 0, or 2 for unusable input
(a bad row is named by its line number).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import click

from llm_finetuning.brief.columns import require_columns
from llm_finetuning.commands._common import fields, load_checked_brief, optional_number
from llm_finetuning.errors import EXIT_OK, UnusableInput
from llm_finetuning.jsonvalue import JsonObject

PROGRESS_MIN_ROWS = 100


def read_rows(path: Path) -> list[JsonObject]:
    """The rows of a JSONL file; UnusableInput naming the line of the first bad row."""
    from llm_finetuning.rewards.build import validate_row

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UnusableInput(f"{path} does not exist", "give a JSONL file of {prompt, completion, ...} rows") from None
    except IsADirectoryError:
        raise UnusableInput(f"{path} is a directory", "give a JSONL file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"{path} cannot be read: {exc}", "save the rows as UTF-8 JSON Lines") from None
    rows: list[JsonObject] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UnusableInput(f"{path}, line {number}: not JSON ({exc.args[0][:80]})",
                                "write one JSON object per line") from None
        try:
            validate_row(row, f"{path}, line {number}")
        except ValueError as exc:
            raise UnusableInput(str(exc), "each line needs a prompt and a completion (string or chat messages)") from None
        rows.append(row)
    if not rows:
        raise UnusableInput(f"{path} holds no rows", "write one JSON object per line")
    return rows


def _fmt(value: float | None) -> str:
    return "null" if value is None else f"{value:.4g}"


def render_explanations(scored: Sequence[Mapping[str, object]]) -> str:
    """Each row's explanations, one line per reward that gave one."""
    lines = []
    for r in scored:
        for name, why in fields(r.get("explanations") or {}).items():
            if why is not None:
                lines.append(f"{r['index']:>5}  {name}: {why}")
    return "\n".join(lines)


def render_table(scored: Sequence[Mapping[str, object]]) -> str:
    """Rows as an aligned text table, then the mean of each reward over the rows where it applies."""
    rewards = [fields(r["rewards"]) for r in scored]
    totals = [optional_number(r["total"]) for r in scored]
    names = list(rewards[0]) if scored else []
    header = ["index", *names, "total"]
    body = [[str(r["index"]), *[_fmt(optional_number(by_name[n])) for n in names], _fmt(total)]
            for r, by_name, total in zip(scored, rewards, totals, strict=True)]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in [header, *body]]
    lines.append("")
    for name in [*names, "total"]:
        values = totals if name == "total" else [optional_number(by_name[name]) for by_name in rewards]
        present = [v for v in values if v is not None]
        mean = f"{sum(present) / len(present):.4g}" if present else "n/a"
        lines.append(f"mean {name}: {mean} over {len(present)} of {len(values)} rows")
    return "\n".join(lines)


@click.command("score")
@click.argument("brief", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--completions", "completions", required=True, type=click.Path(path_type=Path),
              help="JSONL rows: prompt, completion and the dataset's columns.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--explain", is_flag=True, help="Also give each reward's explanation of its value "
              "(the extracted answer, the failing test, the schema path, ...).")
def command(brief: Path, completions: Path, as_json: bool, explain: bool) -> None:
    """Run the brief's reward functions on given rows and print every reward and the weighted total."""
    loaded = load_checked_brief(str(brief), as_json)
    rows = read_rows(completions)
    # A row without a reward's column is scored None by that reward; a column no row has is a wrong name.
    require_columns(loaded.data, loaded.rewards, rows, str(completions), prompt=False, every_row=False)

    from llm_finetuning.rewards.build import build_reward_funcs, load_brief_tokenizer, score_rows

    try:
        funcs = build_reward_funcs(loaded, load_brief_tokenizer(loaded))
    except (ValueError, TypeError, ImportError, AttributeError) as exc:
        raise UnusableInput(f"a reward cannot be built: {exc}", "fix the reward's args in the brief", str(brief)) from exc
    try:
        if len(rows) >= PROGRESS_MIN_ROWS:
            from rich.console import Console
            from rich.progress import Progress

            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("scoring", total=len(rows))
                scored = score_rows(loaded, rows, funcs=funcs, progress=lambda n: bar.advance(task, n),
                                    explain=explain)
        else:
            scored = score_rows(loaded, rows, funcs=funcs, explain=explain)
    except (KeyError, ValueError, TypeError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise UnusableInput(f"scoring failed: {message}", "check the rows' columns against the rewards' args",
                            str(completions)) from exc
    finally:
        for func in funcs[0]:
            close = getattr(func, "close", None)
            if callable(close):
                close()
    if as_json:
        click.echo(json.dumps({"rows": scored}))
    else:
        click.echo(render_table(scored))
        if explain:
            click.echo("")
            click.echo(render_explanations(scored) or "(no reward of this brief explains its values)")
    sys.exit(EXIT_OK)
