"""The step-profile table, as docs/results.md shows it (`python bench/_profile_table.py` writes it there; a test
checks that the page still shows what bench/results/step-profile-h200.json holds). Pure: json only."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STEP_PROFILE = REPO / "bench/results/step-profile-h200.json"
PAGE = REPO / "docs/results.md"
BEGIN = "<!-- BEGIN GENERATED: python bench/_profile_table.py -->"
END = "<!-- END GENERATED: step profile -->"
SHOWN = ("generation", "reference forward", "policy forward", "backward", "optimizer", "rewards",
         "logging and completion log")
OTHER = ("prompts and decoding", "batch preparation", "loss", "rest")
MODELS = {"smollm2-135m-real": "SmolLM2-135M (real)", "smollm2-135m": "SmolLM2-135M shape (random)",
          "qwen2.5-1.5b": "Qwen2.5-1.5B shape (random)", "qwen2.5-7b": "Qwen2.5-7B shape (random)"}


def variants(result: dict[str, Any]) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    """(task, model, adapter, variant@call, figures) of every measured variant, in the file's order."""
    rows = []
    for key, entry in result["cases"].items():
        task, shape, adapter = key.split("/")
        for name, figures in entry["variants"].items():
            if figures.get("step_s") is not None:
                rows.append((task, MODELS.get(shape, shape), adapter, name, figures))
    return rows


def profile_table(result: dict[str, Any]) -> str:
    lines = ["| task | model | adapter | run (code-decoding@call) | step s | floor s | step / floor | "
             + " | ".join(SHOWN) + " | other | first step s |",
             "| --- | --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in SHOWN) + " | --- | --- |"]
    for task, model, adapter, name, v in variants(result):
        regions = v.get("regions_s") or {}
        other = sum(regions.get(r) or 0.0 for r in OTHER)
        cells = " | ".join(f"{regions.get(r) or 0.0:.3f}" for r in SHOWN)
        if not regions:  # `trl grpo` on its defaults: only its step times, from its log lines
            cells, other_cell = " | ".join("-" for _ in SHOWN), "-"
        else:
            other_cell = f"{other:.3f}"
        floor = f"{v['floor_s']:.2f}" if v.get("floor_s") else "-"
        ratio = f"{v['step_over_floor']:.2f}x" if v.get("step_over_floor") else "-"
        lines.append(f"| {task} | {model} | {adapter} | {name} | {v['step_s']:.2f} | {floor} | {ratio} | {cells} | "
                     f"{other_cell} | {v['first_step_s']:.1f} |")
    return "\n".join(lines)


def page_with_table(page: str) -> str:
    """The page with its generated block replaced by the table of the results file."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(page):
        raise ValueError(f"{PAGE.name} has no generated block ({BEGIN})")
    table = profile_table(json.loads(STEP_PROFILE.read_text(encoding="utf-8")))
    return pattern.sub(lambda _: f"{BEGIN}\n{table}\n{END}", page)


if __name__ == "__main__":
    PAGE.write_text(page_with_table(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)}", file=sys.stderr)
