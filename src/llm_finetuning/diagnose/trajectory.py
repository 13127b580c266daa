"""Reading a run's metric trajectory: `metrics.jsonl` from `finetune launch`, or TRL's `trainer_state.json`.

The keys are the ones TRL 1.16's GRPOTrainer logs (trl/trainer/grpo_trainer.py): `reward`, `reward_std`,
`rewards/<name>/mean`, `rewards/<name>/std`, `frac_reward_zero_std`, `completions/mean_length`,
`completions/clipped_ratio`, `completions/mean_terminated_length`, `entropy`, `kl` (only when beta > 0),
`clip_ratio/region_mean` (and `low_mean`, `high_mean`, `low_min`, `high_max`), plus the Trainer's
`grad_norm`, `learning_rate` and `loss`. Evaluation logs carry the same keys prefixed `eval_`.

Pure: json and the standard library only.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import sha256_file
from llm_finetuning.jsonvalue import JsonObject, JsonValue
from llm_finetuning.rundir import END_EVENT, METRICS, TRAINER_STATE
from llm_finetuning.rundir.checkpoints import checkpoint_dirs

# Keys of a training log event (one is enough to count the event as a training step).
TRAINING_KEYS = (
    "loss", "reward", "grad_norm", "entropy", "kl", "frac_reward_zero_std", "completions/mean_length",
)
# Keys TRL always logs as numbers: a null there is a NaN or infinity that a JSON writer nulled
# (`finetune launch` writes non-finite values as null), so it counts as non-finite, not as missing.
NULL_IS_NONFINITE = ("loss", "grad_norm", "kl", "entropy")
_COMPONENT = re.compile(r"^rewards/(?P<name>.+)/mean$")


@dataclass(frozen=True)
class Series:
    """One metric over steps, missing and non-finite points kept out of `values` (see `nonfinite_steps`)."""

    key: str
    steps: tuple[int, ...]
    values: tuple[float, ...]
    nonfinite_steps: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.values)

    def __bool__(self) -> bool:
        return bool(self.values)


@dataclass
class Trajectory:
    """The training log of a run: one row of metrics per logged step, in step order."""

    source: Path
    steps: list[int]
    rows: list[dict[str, float | None]]
    eval_rows: list[tuple[int, dict[str, float | None]]] = field(default_factory=list)
    ended: bool = False
    end_step: int | None = None
    skipped_lines: int = 0

    def series(self, key: str) -> Series:
        steps: list[int] = []
        values: list[float] = []
        bad: list[int] = []
        for step, row in zip(self.steps, self.rows, strict=True):
            value = row.get(key)
            if value is None:
                if key in row and key in NULL_IS_NONFINITE:
                    bad.append(step)
                continue
            if math.isfinite(value):
                steps.append(step)
                values.append(value)
            else:
                bad.append(step)
        return Series(key, tuple(steps), tuple(values), tuple(bad))

    def keys(self) -> set[str]:
        return {k for row in self.rows for k in row}

    def reward_components(self) -> list[str]:
        """The reward function names TRL logged (`rewards/<name>/mean`), in first-seen order."""
        names: list[str] = []
        for row in self.rows:
            for key in row:
                m = _COMPONENT.match(key)
                if m and m["name"] not in names:
                    names.append(m["name"])
        return names

    def component(self, name: str) -> Series:
        return self.series(f"rewards/{name}/mean")

    def eval_series(self, key: str) -> Series:
        """An evaluation metric (`eval_<key>` in TRL's logs) over steps."""
        points = [(step, row[f"eval_{key}"]) for step, row in self.eval_rows]
        kept = [(step, value) for step, value in points if value is not None and math.isfinite(value)]
        return Series(f"eval_{key}", tuple(s for s, _ in kept), tuple(v for _, v in kept))

    @property
    def last_step(self) -> int:
        return self.steps[-1] if self.steps else 0

    def source_sha256(self) -> str:
        return sha256_file(self.source)


def _num(value: JsonValue) -> float | None:
    """A metric value as float (NaN and infinities kept), None when missing or not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):  # some loggers write "nan" / "inf" as strings
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _from_events(source: Path, events: list[JsonObject], skipped: int) -> Trajectory:
    """Training rows (the last event per step wins, e.g. after a resume), eval rows and the end marker."""
    by_step: dict[int, dict[str, float | None]] = {}
    eval_rows: list[tuple[int, dict[str, float | None]]] = []
    ended, end_step = False, None
    for event in events:
        if event.get("event") == END_EVENT:
            ended, end_step = True, _int(event.get("step"))
            continue
        step = _int(event.get("step"))
        if step is None or "event" in event:
            continue
        if any(k.startswith("eval_") for k in event):
            eval_rows.append((step, {k: _num(v) for k, v in event.items() if k.startswith("eval_")}))
            continue
        if not any(k in event for k in TRAINING_KEYS) and not any(_COMPONENT.match(k) for k in event):
            continue  # the final summary (train_runtime, train_loss) and other non-step events
        by_step[step] = {k: _num(v) for k, v in event.items() if k != "step"}
        ended = False  # an end marker followed by more steps is a stale one from before a resume
    steps = sorted(by_step)
    return Trajectory(source=source, steps=steps, rows=[by_step[s] for s in steps], eval_rows=eval_rows,
                      ended=ended, end_step=end_step, skipped_lines=skipped)


def _int(value: JsonValue) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def read_metrics_jsonl(path: Path) -> Trajectory:
    """Parse `metrics.jsonl`. A line that is not a JSON object is skipped and counted (a live run may be
    mid-write on its last line); a file with no training step at all is unusable."""
    events: list[JsonObject] = []
    skipped = 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UnusableInput(f"cannot read {path.name}: {exc.strerror}", "check the run directory", str(path)) from exc
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(obj, dict):
            events.append(obj)
        else:
            skipped += 1
    return _from_events(path, events, skipped)


def read_trainer_state(path: Path) -> Trajectory:
    """Parse TRL's `trainer_state.json` (its `log_history`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UnusableInput(f"cannot parse {path.name}: {exc}", "point diagnose at a run directory written by "
                            "finetune launch or TRL", str(path)) from exc
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        raise UnusableInput(f"{path.name} has no log_history list", "use the trainer_state.json TRL writes in "
                            "each checkpoint", str(path))
    return _from_events(path, [e for e in history if isinstance(e, dict)], 0)


def latest_trainer_state(run_dir: Path) -> Path | None:
    """The trainer_state.json with the most training behind it: RUN_DIR's own, or the latest checkpoint's."""
    candidates = [run_dir / TRAINER_STATE] + [d / TRAINER_STATE for d in reversed(checkpoint_dirs(run_dir))]
    best: tuple[int, Path] | None = None
    for path in candidates:
        if not path.is_file():
            continue
        try:
            step = int(json.loads(path.read_text(encoding="utf-8")).get("global_step") or 0)
        except (OSError, ValueError, AttributeError):
            step = -1
        if best is None or step > best[0]:
            best = (step, path)
    return best[1] if best else None


def load_trajectory(run_dir: str | Path) -> Trajectory:
    """The run's trajectory: `metrics.jsonl` when present, else (or when it has fewer steps) the latest
    `trainer_state.json`. A path to either file directly also works. Raises `UnusableInput`."""
    path = Path(run_dir)
    if path.is_file():
        traj = read_trainer_state(path) if path.suffix == ".json" else read_metrics_jsonl(path)
        return _require_steps(traj)
    if not path.is_dir():
        raise UnusableInput(f"run directory {path} does not exist", "pass the RUN_DIR that finetune render "
                            "wrote and finetune launch trained in", str(path))
    metrics = path / METRICS
    state = latest_trainer_state(path)
    if not metrics.is_file() and state is None:
        raise UnusableInput(f"{path} has neither {METRICS} nor a {TRAINER_STATE}",
                            "run finetune launch first, or point diagnose at a TRL output_dir", str(path))
    if not metrics.is_file():
        assert state is not None
        return _require_steps(read_trainer_state(state))
    traj = read_metrics_jsonl(metrics)
    if state is not None:
        other = read_trainer_state(state)
        if other.last_step > traj.last_step:
            traj = other
    return _require_steps(traj)


def _require_steps(traj: Trajectory) -> Trajectory:
    if not traj.steps:
        raise UnusableInput(f"{traj.source.name} has no training step logged yet",
                            "wait for the first log (logging_steps) or check that the run started",
                            str(traj.source))
    return traj


@dataclass(frozen=True)
class Completion:
    """One logged completion with its reward values (RUN_DIR/completions.jsonl)."""

    step: int
    completion: str
    rewards: dict[str, float]
    episode: EpisodeStats | None = None  # a tool-use run's completion is an episode of messages


@dataclass(frozen=True)
class EpisodeStats:
    """What one logged episode did with its tools, read from its messages as TRL logs them."""

    turns: int  # the model's turns (assistant messages)
    tool_calls: int
    tool_failures: int  # tool results TRL wrote for a failed call: "{'error': ...}"
    ended_on_call: bool  # its last turn still called a tool: cut by max_tool_calling_iterations or the length

    @classmethod
    def of(cls, messages: list[JsonValue]) -> EpisodeStats | None:
        msgs = [m for m in messages if isinstance(m, dict)]
        if not any(m.get("role") == "tool" or m.get("tool_calls") for m in msgs):
            return None
        assistant = [m for m in msgs if m.get("role", "assistant") == "assistant"]
        calls = sum(len(c) for m in assistant if isinstance(c := m.get("tool_calls"), list))
        failures = sum(1 for m in msgs if m.get("role") == "tool" and str(m.get("content", "")).startswith("{'error':"))
        return cls(len(assistant), calls, failures, bool(assistant and assistant[-1].get("tool_calls")))


def read_completions(path: Path, limit: int = 200_000) -> list[Completion]:
    """Logged completions, if any: `{"step", "prompt", "completion", "rewards": {name: value}}` per line."""
    if not path.is_file():
        return []
    out: list[Completion] = []
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict) or _int(obj.get("step")) is None:
                continue
            rewards = obj.get("rewards")
            values = {str(k): float(v) for k, v in (rewards.items() if isinstance(rewards, dict) else [])
                      if _num(v) is not None and math.isfinite(float(v))}
            completion = obj.get("completion")
            episode = None
            if isinstance(completion, list):  # chat messages
                episode = EpisodeStats.of(completion)
                completion = " ".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
            out.append(Completion(int(obj["step"]), str(completion or ""), values, episode))
            if len(out) >= limit:
                break
    return out
