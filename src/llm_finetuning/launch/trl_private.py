"""Every private name of TRL or transformers that llm-finetuning uses, in one place, with why it is private.

Everything else goes through their public surface: `TrainerCallback` events, constructor arguments,
`Trainer.add_callback`/`remove_callback`, `TrainingArguments.should_save`. The uses below have no public
equivalent in the versions named here. tests/launch/test_trl_private.py checks each against the installed
TRL and transformers (the name exists, with the signature or behaviour listed), so a TRL upgrade that moves
one fails a test rather than a training run. The two accessors at the end are the only code that touches
the private names at run time; sampling/episode.py and bench/step_profile.py use the others as listed.

Light: no torch, transformers or trl import at module level.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import GenerationMixin
    from trl import GRPOTrainer

TRL_VERSION = "1.16.0"  # pinned in pyproject.toml; a new pin means checking every entry again
TRANSFORMERS_VERSION = "5.24.0"  # the version the entries were read in (pyproject allows >=5.0,<6)


@dataclass(frozen=True)
class PrivateUse:
    """One private name: whose (`owner`, an import path), how we use it, where, and why no public way serves."""

    owner: str
    name: str
    how: str  # read | written | mirrored (its logic copied, never called) | wrapped (timed, bench only)
    where: str
    why: str
    parameters: tuple[str, ...] | None = None  # a method's parameter names, where the use depends on them


PRIVATE_USES: tuple[PrivateUse, ...] = (
    PrivateUse(
        "trl.GRPOTrainer", "_logs", "read", "launch/trainer.py, completions.jsonl (`last_generation_batch`)",
        "TRL keeps the last generation batch's prompts, completions and per-function rewards only here. Its public "
        "output of them, `log_completions`, writes a parquet file per log step into output_dir/completions (our "
        "checkpoints/) and prints a rich table on stdout; no callback event or log_history entry carries them."),
    PrivateUse(
        "transformers.GenerationMixin", "_previous_max_cache_length", "written",
        "launch/trainer.py, compile_decoding (`presize_static_cache`), only where GenerationConfig has no "
        "`max_cache_len`",
        "transformers before GenerationConfig.max_cache_len (5.x, #46424) sized a static cache from this memo "
        "alone; the installed version has the public field, and the fallback is then never taken."),
    PrivateUse(
        "trl.GRPOTrainer", "_tool_call_loop", "mirrored", "sampling/episode.py, run_episodes",
        "sampling runs episodes the way training will, outside any trainer; TRL's loop is a method of a built "
        "GRPOTrainer (it needs its model, accelerator and generation backend).",
        ("self", "prompts", "prompt_ids", "completion_ids", "completions", "logprobs", "images",
         "multimodal_fields")),
    PrivateUse(
        "trl.GRPOTrainer", "_get_tool_suffix_ids", "mirrored", "sampling/episode.py, tool_suffix_ids",
        "the same: the suffix is computed from the trainer's processing_class inside TRL's loop.",
        ("self", "tool_messages")),
    PrivateUse(
        "trl.GRPOTrainer", "_generate", "wrapped", "bench/step_profile.py (timing only)",
        "a step's regions have no timing hooks of their own; callbacks see only step boundaries."),
    PrivateUse(
        "trl.GRPOTrainer", "_generate_and_score_completions", "wrapped", "bench/step_profile.py (timing only)",
        "as above."),
    PrivateUse(
        "trl.GRPOTrainer", "_calculate_rewards", "wrapped", "bench/step_profile.py (timing only)",
        "as above."),
    PrivateUse(
        "trl.GRPOTrainer", "_get_per_token_logps_and_entropies", "wrapped", "bench/step_profile.py (timing only)",
        "as above."),
    PrivateUse(
        "transformers.Trainer", "_clip_grad_norm", "wrapped", "bench/step_profile.py (timing only)",
        "as above."),
    PrivateUse(
        "transformers.Trainer", "_maybe_log_save_evaluate", "wrapped", "bench/step_profile.py (timing only)",
        "as above: a step's log and save come after on_step_end, and no event fires after them on every step."),
)


def last_generation_batch(trainer: GRPOTrainer) -> tuple[list[object], list[object], dict[str, list[object]]]:
    """(prompts, completions, {reward name: values}) of the trainer's latest generation batch, gathered from
    every process (TRL's `_logs`, sized to one generation batch). Prompts and completions are strings or chat
    messages, each reward a float (NaN where the function gave none): written out as they are."""
    logs = trainer._logs
    rewards = logs["rewards"]
    assert isinstance(rewards, Mapping)  # TRL's defaultdict of deques, one per reward function name
    return list(logs["prompt"]), list(logs["completion"]), {str(name): list(v) for name, v in rewards.items()}


def presize_static_cache(model: GenerationMixin, max_cache_len: int) -> None:
    """Make transformers without GenerationConfig.max_cache_len size the model's static cache for
    `max_cache_len` at its first generate (the memo it keeps of the longest cache so far)."""
    model._previous_max_cache_length = max(max_cache_len, getattr(model, "_previous_max_cache_length", 0))
