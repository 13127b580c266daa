"""What diagnose knows about a run besides its metrics: the brief (through manifest.json), the rendered
GRPO config, the model's architecture, logged completions and a held-out evaluation.

Everything here is optional: a bare TRL output_dir with only a trainer_state.json is diagnosed from its
metrics alone. Pure: json, yaml and the standard library.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from llm_finetuning.brief import Brief
from llm_finetuning.diagnose.trajectory import Completion, read_completions
from llm_finetuning.errors import UnusableInput
from llm_finetuning.fileio import read_json_or_none
from llm_finetuning.models import is_moe
from llm_finetuning.rundir import COMPLETIONS, EVAL_JSON, EVAL_JSONL, GRPO_CONFIG
from llm_finetuning.rundir.checkpoints import checkpoint_dirs
from llm_finetuning.rundir.manifest import has_manifest, load_manifest

# Built-in rewards that check correctness (reward_registry.VERIFIERS) and name patterns of custom ones.
CORRECTNESS_NAME = re.compile(r"exact|correct|accura|match|unit_test|pass|verif|solve|answer|json_schema|judge",
                              re.IGNORECASE)
# Name patterns of shaping rewards: format, length, style. These never count as correctness.
SHAPING_NAME = re.compile(r"format|length|len_|style|tag|think|xml|digit|penalty|shape|brevity", re.IGNORECASE)


@dataclass(frozen=True)
class HeldOut:
    """`finetune eval`'s comparison (RUN_DIR/eval.json): held-out pass@1 of the base and the trained model."""

    base: float
    trained: float
    beyond_noise: bool

    @property
    def improved(self) -> bool:
        """Better beyond the sampling noise (the paired 95% interval excludes zero)."""
        return self.beyond_noise and self.trained > self.base


def read_heldout(path: Path) -> HeldOut | None:
    """The base and trained pass@1 of RUN_DIR/eval.json; None when it is absent or not `finetune eval`'s."""
    data = read_json_or_none(path) or {}
    base, trained = data.get("base"), data.get("trained")
    before = base.get("pass_at_1") if isinstance(base, dict) else None
    after = trained.get("pass_at_1") if isinstance(trained, dict) else None
    if "beyond_noise" not in data or not isinstance(before, (int, float)) or not isinstance(after, (int, float)):
        return None
    return HeldOut(float(before), float(after), data["beyond_noise"] is True)


@dataclass
class RunContext:
    """Facts about the run that the rules may use; None means unknown."""

    brief_name: str | None = None
    brief_sha256: str | None = None
    variant: str | None = None  # grpo | dapo | dr_grpo | gspo, from the brief or the rendered config
    importance_sampling_level: str | None = None
    is_moe: bool | None = None
    moe_source: str = ""
    reward_weights: dict[str, float] = field(default_factory=dict)  # TRL reward name -> weight
    correctness: list[str] = field(default_factory=list)  # reward names that measure correctness
    model_id: str | None = None  # a hub id whose architecture no local config told
    max_completion_length: int | None = None
    max_turns: int | None = None  # episode.max_turns of a tool-use brief
    reward_range: tuple[float, float] | None = None  # what the weighted total can score (built-ins only)
    base_pass_at_k: float | None = None  # the brief's baseline record: pass@k of the base model, and its k
    base_k: int | None = None
    learning_rate: float | None = None  # the peak learning rate
    lr_scheduler: str | None = None  # GRPOConfig's lr_scheduler_type: what the run's learning rate did over time
    warmup_steps: int | None = None
    beta: float | None = None
    completions: list[Completion] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)  # held-out stricter verifier: step -> score
    eval_scores: list[float] = field(default_factory=list)
    eval_source: str = ""
    heldout: HeldOut | None = None  # RUN_DIR/eval.json: held-out pass@1 before and after training
    notes: list[str] = field(default_factory=list)  # what could not be read, for stderr


def _read_brief(ctx: RunContext, brief_path: Path) -> Brief | None:
    """The brief at `brief_path`, or None with a note saying why diagnose goes on without it."""
    from llm_finetuning.brief import load_brief

    try:
        brief, errors = load_brief(brief_path)
    except UnusableInput as exc:
        ctx.notes.append(f"brief {brief_path} unreadable: {exc.message}")
        return None
    if brief is None:
        ctx.notes.append(f"brief {brief_path} has {len(errors)} error(s); diagnosing from the metrics alone")
    return brief


def _apply_brief(ctx: RunContext, brief: Brief) -> None:
    ctx.brief_name, ctx.brief_sha256 = brief.name, brief.sha256
    grpo = brief.grpo
    ctx.variant = grpo.variant
    ctx.max_completion_length = grpo.max_completion_length
    ctx.max_turns = brief.episode.max_turns if brief.episode is not None else None
    baseline = read_json_or_none(brief.resolve(brief.records.baseline))
    pass_at_k = baseline.get("pass_at_k") if baseline is not None else None
    if baseline is not None and isinstance(pass_at_k, (int, float)):
        ctx.base_pass_at_k = float(pass_at_k)
        k = baseline.get("k")
        ctx.base_k = k if isinstance(k, int) else None
    ctx.learning_rate = grpo.learning_rate
    from llm_finetuning.brief.schedule import Schedule

    schedule = Schedule.of_spec(grpo)
    ctx.lr_scheduler, ctx.warmup_steps = schedule.trl_type, schedule.warmup_steps
    ctx.beta = grpo.beta
    # by the names TRL logs them under (`rewards/<name>/mean`)
    ctx.reward_weights = {r.name: float(r.weight) for r in brief.rewards}
    from llm_finetuning.reward_registry import total_range

    ctx.reward_range = total_range([(r.fn, float(r.weight)) for r in brief.rewards])
    from llm_finetuning.reward_registry import VERIFIERS

    ctx.correctness = [r.name for r in brief.rewards
                       if r.fn in VERIFIERS or r.is_judge
                       or (":" in r.fn and CORRECTNESS_NAME.search(r.name) and not SHAPING_NAME.search(r.name))]
    model = brief.model
    arch = model.architecture
    if arch in ("moe", "dense"):
        ctx.is_moe, ctx.moe_source = arch == "moe", f"brief model.architecture: {arch}"
    else:
        model_id = model.id
        local = brief.resolve(model_id)
        config = read_json_or_none(local / "config.json") if model.is_local(brief.folder) and local.is_dir() else None
        if isinstance(config, dict):
            ctx.is_moe, ctx.moe_source = is_moe(config), f"{local / 'config.json'}"
        else:
            ctx.model_id = model_id  # looked up in the table of published shapes if nothing better says


def _apply_known_shape(ctx: RunContext, model_id: str) -> None:
    """A hub id in `finetune memory`'s table of published shapes says whether the model routes experts."""
    from llm_finetuning.memory.shapes import lookup

    shape = lookup(model_id)
    if shape is not None:
        ctx.is_moe, ctx.moe_source = shape.is_moe, f"{model_id} (published shape in finetune memory's table)"


def _apply_grpo_config(ctx: RunContext, path: Path) -> None:
    """The rendered TRL config: what actually ran, which wins over the brief for the loss settings."""
    import yaml

    from llm_finetuning.brief.load import safe_load

    try:
        config = safe_load(path.read_text(encoding="utf-8"))  # TRL's own configs write learning_rate: 5e-7
    except (OSError, yaml.YAMLError):
        ctx.notes.append(f"{path} unreadable")
        return
    if not isinstance(config, dict):
        return
    ctx.importance_sampling_level = config.get("importance_sampling_level", ctx.importance_sampling_level)
    if isinstance(config.get("max_completion_length"), int):
        ctx.max_completion_length = config["max_completion_length"]
    if isinstance(config.get("learning_rate"), (int, float)):
        ctx.learning_rate = float(config["learning_rate"])
    if isinstance(config.get("beta"), (int, float)):
        ctx.beta = float(config["beta"])
    # A config without these ran TRL's defaults: linear decay to 0, no warm-up.
    ctx.lr_scheduler = str(config.get("lr_scheduler_type") or "linear")
    warmup = config.get("warmup_steps", 0)
    ctx.warmup_steps = warmup if isinstance(warmup, int) else None
    weights = config.get("reward_weights")
    if ctx.importance_sampling_level == "sequence" and ctx.variant is None:
        ctx.variant = "gspo"
    if isinstance(weights, list) and not ctx.reward_weights:
        ctx.notes.append("reward weights from grpo_config.yaml without names; assuming 1.0 per logged reward")


def _apply_checkpoint_config(ctx: RunContext, run_dir: Path) -> None:
    """A checkpoint's own config.json (full fine-tuning) tells the architecture when nothing else did."""
    for ckpt in reversed(checkpoint_dirs(run_dir)):
        config = read_json_or_none(ckpt / "config.json")
        if isinstance(config, dict):
            ctx.is_moe, ctx.moe_source = is_moe(config), str(ckpt / "config.json")
            return


def read_eval(path: Path) -> tuple[list[int], list[float]]:
    """A held-out evaluation with a stricter verifier: JSONL rows `{"step": int, "score": float}`."""
    steps: list[int] = []
    scores: list[float] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UnusableInput(f"cannot read {path}: {exc.strerror}", "pass a JSONL file of {\"step\", \"score\"} rows",
                            str(path)) from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            step, score = int(row["step"]), float(row["score"])
        except (ValueError, KeyError, TypeError):
            raise UnusableInput(f"{path.name} line {number} is not a {{\"step\": int, \"score\": number}} object",
                                "write one JSON object per line with step and score", str(path)) from None
        if math.isfinite(score):
            steps.append(step)
            scores.append(score)
    order = sorted(range(len(steps)), key=lambda i: steps[i])
    return [steps[i] for i in order], [scores[i] for i in order]


def load_context(run_dir: str | Path, brief: Brief | str | Path | None = None, eval_file: str | Path | None = None,
                 architecture: str | None = None, correctness: list[str] | None = None) -> RunContext:
    """Gather what is known about the run. Explicit arguments (`brief`: a loaded brief or its path) win over what
    the run directory says."""
    ctx = RunContext()
    root = Path(run_dir)
    root = root.parent if root.is_file() else root
    manifest = load_manifest(root) if has_manifest(root) else None  # a bare TRL output_dir has none
    given: Brief | None = None
    brief_path: Path | None = None
    if isinstance(brief, Brief):
        given, brief_path = brief, brief.path
    elif brief:
        brief_path = Path(brief)
    if manifest is not None:
        ctx.brief_name = manifest.name
        ctx.brief_sha256 = manifest.brief_sha256
        if brief_path is None:
            brief_path = manifest.brief_path(root)
    if brief_path is not None:
        if given is not None or brief_path.is_file():
            manifest_sha = ctx.brief_sha256
            loaded = given if given is not None else _read_brief(ctx, brief_path)
            if loaded is not None:
                _apply_brief(ctx, loaded)
            if manifest_sha and ctx.brief_sha256 and manifest_sha != ctx.brief_sha256 and not brief:
                ctx.notes.append("the brief changed since rendering; diagnosis.json records the manifest's sha256")
                ctx.brief_sha256 = manifest_sha
        else:
            ctx.notes.append(f"brief {brief_path} not found; diagnosing from the metrics alone")
    if (root / GRPO_CONFIG).is_file():
        _apply_grpo_config(ctx, root / GRPO_CONFIG)
    if ctx.is_moe is None:
        _apply_checkpoint_config(ctx, root)
    if ctx.is_moe is None and ctx.model_id:
        _apply_known_shape(ctx, ctx.model_id)
    if architecture in ("moe", "dense"):
        ctx.is_moe, ctx.moe_source = architecture == "moe", f"--architecture {architecture}"
    if correctness:
        ctx.correctness = list(correctness)
    ctx.completions = read_completions(root / COMPLETIONS)
    eval_path = Path(eval_file) if eval_file else (root / EVAL_JSONL if (root / EVAL_JSONL).is_file() else None)
    if eval_path is not None:
        ctx.eval_steps, ctx.eval_scores = read_eval(eval_path)
        ctx.eval_source = str(eval_path)
    ctx.heldout = read_heldout(root / EVAL_JSON)
    return ctx
