"""`finetune diagnose --plot FILE.png`: the run's curves with the findings marked.

Five panels over steps: reward (with its std band), per-reward means, entropy, mean completion length
(and mean terminated length), clipped ratio (and the share of groups with zero reward std). Each finding
shades its steps in every panel. matplotlib is imported inside the function, through the Agg canvas
(no pyplot, no display), so the rest of diagnose never loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from llm_finetuning.diagnose.rules import Finding, failure_modes
from llm_finetuning.diagnose.trajectory import Trajectory

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PANELS = 5
_FINDING_COLOURS = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f",
                    "#1f77b4"]


def _spans(steps: list[int], logged: list[int]) -> list[tuple[float, float]]:
    """Contiguous runs of logged steps as (start, end) x-ranges, half a log interval wide on each side."""
    if not steps:
        return []
    index = {s: i for i, s in enumerate(logged)}
    gap = (logged[-1] - logged[0]) / max(len(logged) - 1, 1) if len(logged) > 1 else 1.0
    chosen = sorted(s for s in set(steps) if s in index)
    spans: list[tuple[float, float]] = []
    start = prev = chosen[0] if chosen else None
    for s in chosen[1:]:
        if index[s] == index[prev] + 1:  # type: ignore[index]
            prev = s
            continue
        spans.append((start - gap / 2, prev + gap / 2))  # type: ignore[operator]
        start = prev = s
    if start is not None:
        spans.append((start - gap / 2, prev + gap / 2))  # type: ignore[operator]
    return spans


def plot_run(traj: Trajectory, findings: list[Finding], path: str | Path | None = None,
             title: str | None = None, reward_range: tuple[float, float] | None = None) -> Figure:
    """Draw the run and return the matplotlib Figure (with PANELS axes); save a PNG when `path` is given.
    `reward_range`: what the total reward can score (0 to 1 for one 0/1 reward): the mean ± std band stays
    inside it. Steps are integers on the x axis, also for a run of three."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(9, 11), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(PANELS, 1, sharex=True)

    def line(ax: Axes, key: str, label: str, color: str | None = None, linestyle: str = "-") -> bool:
        s = traj.series(key)
        if s:
            ax.plot(s.steps, s.values, label=label, marker="." if len(s) < 60 else None, color=color,
                    linestyle=linestyle)
        return bool(s)

    ax = axes[0]
    drawn = line(ax, "reward", "reward", color="#1f77b4")
    reward, std = traj.series("reward"), traj.series("reward_std")
    if reward and std:
        std_at = dict(zip(std.steps, std.values, strict=True))
        pts = [(s, v, std_at[s]) for s, v in zip(reward.steps, reward.values, strict=True) if s in std_at]
        low, high = reward_range if reward_range is not None else (float("-inf"), float("inf"))
        ax.fill_between([p[0] for p in pts], [max(p[1] - p[2], low) for p in pts], [min(p[1] + p[2], high) for p in pts],
                        color="#1f77b4", alpha=0.15, label="± reward_std" + (" (within the reward's range)"
                                                                             if reward_range is not None else ""))
    ax.set_ylabel("reward")
    _finish(ax, drawn, "reward")

    ax = axes[1]
    drawn = False
    for name in traj.reward_components():
        drawn = line(ax, f"rewards/{name}/mean", name) or drawn
    ax.set_ylabel("reward mean\nper function")
    _finish(ax, drawn, "rewards/<name>/mean")

    ax = axes[2]
    _finish(ax, line(ax, "entropy", "entropy", color="#2ca02c"), "entropy")
    ax.set_ylabel("entropy\n(nats/token)")

    ax = axes[3]
    drawn = line(ax, "completions/mean_length", "mean length", color="#9467bd")
    drawn = line(ax, "completions/mean_terminated_length", "mean terminated length", color="#c5b0d5",
                 linestyle="--") or drawn
    ax.set_ylabel("completion\nlength (tokens)")
    _finish(ax, drawn, "completions/mean_length")

    ax = axes[4]
    drawn = line(ax, "completions/clipped_ratio", "clipped ratio", color="#8c564b")
    drawn = line(ax, "frac_reward_zero_std", "frac_reward_zero_std", color="#7f7f7f", linestyle=":") or drawn
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("share")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # shared: every panel's steps are whole
    _finish(ax, drawn, "completions/clipped_ratio")

    handles = []
    for i, f in enumerate(findings):
        colour = _FINDING_COLOURS[i % len(_FINDING_COLOURS)]
        for a in axes:
            for lo, hi in _spans(f.steps, traj.steps):
                a.axvspan(lo, hi, color=colour, alpha=0.15, linewidth=0)
        variant = f" -> {f.variant}" if f.variant else ""
        handles.append(Patch(color=colour, alpha=0.4, label=f"{f.severity}: {f.id}{variant}"))
    problems = failure_modes(findings)
    verdict = "healthy" if not problems else f"{len(problems)} finding(s)"
    fig.suptitle(f"{title or traj.source.parent.name}: {verdict}", fontsize=12)
    rows = (len(handles) + 2) // 3
    fig.subplots_adjust(left=0.12, right=0.97, top=0.95, hspace=0.12, bottom=0.06 + 0.025 * rows)
    if handles:
        fig.legend(handles=handles, loc="lower center", ncols=min(len(handles), 3), fontsize=8, frameon=False)
    if path is not None:
        fig.savefig(str(path), dpi=100)
    return fig


def _finish(ax: Axes, drawn: bool, key: str) -> None:
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, f"{key} not logged", transform=ax.transAxes, ha="center", va="center", color="#888888")
