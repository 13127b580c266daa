"""The step-speed and pipeline-vs-script tables, as docs/results.md shows them (`python bench/_speed_table.py`
writes them there; a test checks that the page still shows what the results files hold). Pure: json only."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STEP_SPEED = REPO / "bench/results/step-speed-h200.json"
PIPELINE_VS_SCRIPT = REPO / "bench/results/pipeline-vs-script-h200.json"
PAGE = REPO / "docs/results.md"
BEGIN = "<!-- BEGIN GENERATED: python bench/_speed_table.py -->"
END = "<!-- END GENERATED -->"
RUN_LABELS = {"trl-defaults": "`trl grpo --config`, TRL's generation (dynamic cache, eager)",
              "trl-static": "`trl grpo --config`, static cache decoded uncompiled",
              "launch-eager": "`finetune launch`, eager (the previous render)",
              "launch": "`finetune launch`, static cache compiled (today's render)"}


def speed_table(result: dict[str, Any]) -> str:
    lines = ["| model (random weights) | adapter | run | seconds per step | generated tokens/s | peak GPU memory "
             "(nvidia-smi) | vs `trl grpo` |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for shape, entry in result["shapes"].items():
        name = shape.partition("+")[0]
        for run, row in entry["runs"].items():
            if "seconds_per_step" not in row:
                continue
            peak = max(row["nvidia_smi_peak_used_gib"].values(), default=0.0)
            ratio = row.get("speedup_vs_trl_defaults")
            label = RUN_LABELS[run]
            if run == "launch" and entry["adapter"] != "full":  # measured before the renderer kept adapters eager
                label = "`finetune launch`, static cache compiled (`hardware.compiled_generation`, since kept for full)"
            lines.append(f"| {name} | {entry['adapter']} | {label} | {row['seconds_per_step']:.2f} | "
                         f"{row['generated_tokens_per_s']:,.0f} | {peak:.1f} GiB | "
                         f"{f'{ratio:.2f}x' if ratio else 'not measured'} |")
    return "\n".join(lines)


def learning_table(result: dict[str, Any]) -> str:
    table, ref = result["held_out"]["table"], result["reference_before_compiled_decoding"]
    rows = [("base model", table["base"]), ("hand-written TRL script", table["script"]),
            ("gate -> render -> `finetune launch` (compiled decoding)", table["pipeline"]),
            ("the same pipeline run before compiled decoding (schedule benchmark)", ref)]
    lines = ["| run (40 steps, 3e-5, constant) | held-out pass@1 at T 0.7 (95% interval) | at T 1.0 |",
             "| --- | --- | --- |"]
    for label, cells in rows:
        low, high = cells["T=0.7"]["ci95"]
        lines.append(f"| {label} | {cells['T=0.7']['pass_at_1']:.1%} ({low:.1%} to {high:.1%}) | "
                     f"{cells['T=1']['pass_at_1']:.1%} |")
    return "\n".join(lines)


def tables() -> str:
    speed = json.loads(STEP_SPEED.read_text(encoding="utf-8"))
    learning = json.loads(PIPELINE_VS_SCRIPT.read_text(encoding="utf-8"))
    return f"{speed_table(speed)}\n\n{learning_table(learning)}"


def page_with_tables(page: str) -> str:
    """The page with its generated block replaced by the tables of the results files."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(page):
        raise ValueError(f"{PAGE.name} has no generated block ({BEGIN})")
    return pattern.sub(lambda _: f"{BEGIN}\n{tables()}\n{END}", page)


if __name__ == "__main__":
    PAGE.write_text(page_with_tables(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}", file=sys.stderr)
