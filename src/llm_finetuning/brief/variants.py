"""What each GRPO variant (`grpo.variant`) sets in TRL's GRPOConfig, with the reason for every value.

One table, read by the renderer (which writes these values after the brief's own) and by `finetune diagnose`
(which names what switching variant changes). It lives with the brief, below both: the variant is a field of
the brief, and diagnose must not import the renderer. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

# A value of TRL's GRPOConfig as grpo_config.yaml holds it: a YAML scalar, a list or a mapping of them. Read-only
# containers, so a list[str] or a dict[str, str] is one as it is.
ConfigValue: TypeAlias = str | int | float | bool | None | Sequence["ConfigValue"] | Mapping[str, "ConfigValue"]

# The symptom `finetune diagnose` names that each variant answers (`grpo.symptom`); grpo answers none.
VARIANT_SYMPTOM = {"dapo": "entropy_collapse", "dr_grpo": "length_reward_correlation", "gspo": "moe"}


def variant_decides(variant: str) -> dict[str, ConfigValue]:
    """What the variant sets in GRPOConfig, key by key: an override may repeat it but not contradict it."""
    return {key: value for key, value, _ in VARIANT_SETTINGS[variant]}


# One entry per GRPO variant: (key, value, why). Applied after the brief's own values.
VARIANT_SETTINGS: dict[str, list[tuple[str, ConfigValue, str]]] = {
    "grpo": [
        ("loss_type", "grpo", "the recipe's loss (TRL 1.16 defaults to dapo)"),
        ("scale_rewards", "group", "advantages scaled by the group's standard deviation"),
        ("importance_sampling_level", "token", "per-token ratios"),
        ("mask_truncated_completions", False, "truncated completions still count"),
    ],
    "dapo": [
        ("loss_type", "dapo", "DAPO: token-level loss normalised over the accumulated batch"),
        ("epsilon_high", 0.28, "DAPO clip-higher against entropy collapse"),
        ("mask_truncated_completions", True, "DAPO: truncated completions leave the loss"),
        ("beta", 0.0, "DAPO drops the KL term"),
        ("scale_rewards", "group", "advantages scaled by the group's standard deviation"),
        ("importance_sampling_level", "token", "per-token ratios"),
    ],
    "dr_grpo": [
        ("loss_type", "dr_grpo", "Dr. GRPO: constant normaliser, no length bias"),
        ("scale_rewards", "none", "Dr. GRPO: no std scaling (removes the difficulty bias)"),
        ("importance_sampling_level", "token", "per-token ratios"),
        ("mask_truncated_completions", False, "truncated completions still count"),
    ],
    "gspo": [
        ("importance_sampling_level", "sequence", "GSPO: one importance ratio per sequence"),
        ("loss_type", "grpo", "TRL's paper index: GSPO with the grpo loss"),
        ("beta", 0.0, "GSPO (paper v2) trains without the KL term"),
        ("epsilon", 3e-4, "GSPO paper v2, section 5.1"),
        ("epsilon_high", 4e-4, "GSPO paper v2, section 5.1"),
        ("scale_rewards", "group", "advantages scaled by the group's standard deviation"),
        ("mask_truncated_completions", False, "truncated completions still count"),
    ],
}
