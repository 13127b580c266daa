"""The schedule benchmark's table, as references/grpo-recipe.md shows it (the bench writes it there; a test
checks that the page still shows what bench/results/schedule-h200.json holds). Pure: json only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench/results/schedule-h200.json"
PAGE = REPO / "references/grpo-recipe.md"
BEGIN = "<!-- BEGIN GENERATED: python bench/schedule_gpu.py --phase report -->"
END = "<!-- END GENERATED -->"


def schedule_table(result: dict[str, Any]) -> str:
    lines = ["| task | learning rate | schedule | held-out pass@1 at T 0.7 (95% interval) | at T 1.0 | "
             "vs linear, points (T 0.7 / 1.0) | diagnose |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for task, base in result["base"].items():
        lines.append(f"| {task} | base model | | {base['T=0.7']['pass_at_1']:.1%} | {base['T=1']['pass_at_1']:.1%} | | |")
        for row in (r for r in result["runs"] if r["task"] == task):
            low, high = row["T=0.7"]["ci95"]
            diagnosis = "healthy" if row["healthy"] else ", ".join(row["findings"] or [])
            lines.append(f"| {task} | {row['learning_rate']:g} | {row['schedule']} | {row['T=0.7']['pass_at_1']:.1%} "
                         f"({low:.1%} to {high:.1%}) | {row['T=1']['pass_at_1']:.1%} | "
                         f"{row['vs_linear_points_T=0.7']:+.1f} / {row['vs_linear_points_T=1']:+.1f} | {diagnosis} |")
    return "\n".join(lines)


def page_with_table(page: str, result: dict[str, Any]) -> str:
    """The page with its generated block replaced by the table of `result`."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(page):
        raise ValueError(f"{PAGE.name} has no generated block ({BEGIN})")
    return pattern.sub(lambda _: f"{BEGIN}\n{schedule_table(result)}\n{END}", page)
