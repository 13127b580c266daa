"""The readable inspection report: Markdown and one self-contained HTML page (no script, no network).

Each sample shows the prompt, the completion, every reward's value with the reward's explanation of it
(the answer it extracted, the test that failed, the schema path, ...; none for samples written before
explanations existed) and the reference fields of its data row side by side, so a person can judge
whether each reward value is right. The HTML page names
the sample count in its title and heading, and marks each sample with `class="sample"`.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.records.episodes import completion_view
from llm_finetuning.records.inspection import sample_explanations
from llm_finetuning.sampling.data import prompt_text
from llm_finetuning.sampling.select import bin_counts


def report_paths(record_path: Path) -> tuple[Path, Path]:
    """`records/inspection.json` -> (`records/inspection.report.md`, `records/inspection.report.html`)."""
    record_path = Path(record_path)
    stem = record_path.stem
    return record_path.with_name(f"{stem}.report.md"), record_path.with_name(f"{stem}.report.html")


def _value(v: object) -> str:
    if v is None:
        return "None"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _reference_text(ref: object) -> str:
    if isinstance(ref, str):
        return ref
    return json.dumps(ref, ensure_ascii=False, indent=1, sort_keys=True, default=str)


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def _title(n: int, brief_name: object) -> str:
    return f"Reward inspection: {n} samples ({brief_name})"


def _rewards(sample: JsonObject) -> list[tuple[str, JsonValue]]:
    """A sample's (reward, value) pairs, in the order scored."""
    rewards = sample.get("rewards")
    return list(rewards.items()) if isinstance(rewards, dict) else []


def _reward_names(meta: Mapping[str, object]) -> list[str]:
    names = meta["rewards"]
    return [str(r) for r in names] if isinstance(names, (list, tuple)) else []


def _passes(v: JsonValue) -> bool:
    """A reward value shown as passing (>= 1)."""
    return isinstance(v, (int, float, str)) and float(v) >= 1


def render_markdown(samples: Sequence[JsonObject], meta: Mapping[str, object]) -> str:
    n = len(samples)
    lines = [f"# {_title(n, meta['brief'])}", ""]
    lines += [f"- model: `{meta['model']}`", f"- rewards: {', '.join(f'`{r}`' for r in _reward_names(meta))}",
              f"- record: `{meta['record']}`", f"- success means: {meta['success_definition']}",
              "- totals: " + ", ".join(f"{k}: {v}" for k, v in bin_counts(samples).items()), "",
              "Read each sample and ask: is every reward value right for this completion? Then run "
              f"`finetune review {meta['record']}` in your own terminal to record your verdicts.", ""]
    for i, s in enumerate(samples, 1):
        flags = (" (cut at max_completion_length)" if s.get("truncated") else "")
        outcome = "success" if s.get("success") else "failure"
        lines += [f"## {i}/{n} `{s['id']}`: {outcome}, total {_value(s.get('total'))}{flags}", "",
                  "**Prompt**", "", _fence(prompt_text(s["prompt"])), "",
                  f"**{completion_view(s)[0]}**", "", _fence(completion_view(s)[1]), "",
                  *_markdown_rewards(s)]
        lines += ["", "**Reference**", "", _fence(_reference_text(s.get("reference", {}))), ""]
    return "\n".join(lines)


def _markdown_cell(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|").replace("`", "\\`")


def _markdown_rewards(sample: JsonObject) -> list[str]:
    """The sample's reward table: value, and why where the rewards explained themselves."""
    why = sample_explanations(sample)
    if why is None:
        return ["| reward | value |", "| --- | --- |",
                *[f"| `{name}` | {_value(v)} |" for name, v in _rewards(sample)]]
    return ["| reward | value | why |", "| --- | --- | --- |",
            *[f"| `{name}` | {_value(v)} | {_markdown_cell(why.get(name) or '')} |"
              for name, v in _rewards(sample)]]


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 8px}
.meta{color:#444;font-size:14px;margin-bottom:16px}
.meta code{background:#f2f4f7;padding:1px 4px;border-radius:3px}
.sample{border:1px solid #d0d7de;border-radius:8px;margin:0 0 16px;padding:12px 16px;background:#fafbfc}
.sample.success{border-left:6px solid #1a7f37}.sample.failure{border-left:6px solid #cf222e}
.sample h2{font-size:15px;margin:0 0 8px}
.grid{display:grid;grid-template-columns:1fr 1fr 400px;gap:12px}
.label{font-size:12px;font-weight:600;text-transform:uppercase;color:#57606a;margin-bottom:4px}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #e1e4e8;border-radius:6px;
padding:8px;margin:0;font-size:13px;max-height:420px;overflow:auto}
table{border-collapse:collapse;width:100%;font-size:13px;margin-bottom:8px}
td,th{border:1px solid #e1e4e8;padding:4px 6px;text-align:left}
.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.why{color:#3d444d;font-size:12px}
.badge{display:inline-block;font-size:11px;padding:1px 6px;border-radius:10px;background:#fff1c2;color:#7a4b00}
"""


def render_html(samples: Sequence[JsonObject], meta: Mapping[str, object]) -> str:
    n = len(samples)
    esc = html.escape
    title = _title(n, meta["brief"])
    totals = ", ".join(f"{esc(k)}: {v}" for k, v in bin_counts(samples).items())
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
        f'<h1 id="title" data-sample-count="{n}">{esc(title)}</h1>',
        '<div class="meta">',
        f"<div>model: <code>{esc(str(meta['model']))}</code></div>",
        "<div>rewards: " + ", ".join(f"<code>{esc(r)}</code>" for r in _reward_names(meta)) + "</div>",
        f"<div>success means: {esc(str(meta['success_definition']))}</div>",
        f"<div>totals: {totals}</div>",
        f"<div>Read each sample and ask: is every reward value right for this completion? Then run "
        f"<code>finetune review {esc(str(meta['record']))}</code> in your own terminal.</div>",
        "</div>",
    ]
    for i, s in enumerate(samples, 1):
        outcome = "success" if s.get("success") else "failure"
        badge = ' <span class="badge">cut at max_completion_length</span>' if s.get("truncated") else ""
        why = sample_explanations(s)
        rows = "".join(
            f"<tr><td><code>{esc(name)}</code></td>"
            f"<td class=\"{'ok' if _passes(v) else 'bad'}\">{esc(_value(v))}</td>"
            + (f'<td class="why">{esc(why.get(name) or "")}</td>' if why is not None else "") + "</tr>"
            for name, v in _rewards(s))
        head = "<tr><th>reward</th><th>value</th>" + ("<th>why</th>" if why is not None else "") + "</tr>"
        sid = esc(str(s["id"]))
        parts += [
            f'<section class="sample {outcome}" id="{sid}" data-sample-id="{sid}">',
            f"<h2>{i}/{n} <code>{sid}</code>: {outcome}, total {esc(_value(s.get('total')))}{badge}</h2>",
            '<div class="grid">',
            f'<div><div class="label">Prompt</div><pre>{esc(prompt_text(s["prompt"]))}</pre></div>',
            '<div><div class="label">{}</div><pre>{}</pre></div>'.format(*map(esc, completion_view(s))),
            '<div><div class="label">Rewards</div>'
            f"<table>{head}{rows}</table>"
            f'<div class="label">Reference</div><pre>{esc(_reference_text(s.get("reference", {})))}</pre></div>',
            "</div>", "</section>",
        ]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


def write_reports(record_path: Path, samples: Sequence[JsonObject], meta: Mapping[str, object]) -> tuple[Path, Path]:
    """Write the Markdown and HTML reports beside the record (atomically) and return their paths."""
    from llm_finetuning.fileio import atomic_write_bytes

    md_path, html_path = report_paths(record_path)
    atomic_write_bytes(md_path, render_markdown(samples, meta).encode("utf-8"))
    atomic_write_bytes(html_path, render_html(samples, meta).encode("utf-8"))
    return md_path, html_path
