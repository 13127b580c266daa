"""Each diagnose rule on a synthetic trajectory that shows its symptom and on one that does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_finetuning.diagnose import FINDING_IDS, RULES, Finding, RunContext, diagnose, load_trajectory
from llm_finetuning.diagnose import rules as R
from llm_finetuning.diagnose.stats import fitted_change, pearson, spikes, step_ranges

from . import synth


def run_rules(tmp_path: Path, rows: list[dict[str, Any]], ctx: RunContext | None = None) -> dict[str, Finding]:
    traj = load_trajectory(synth.write_run(tmp_path / "run", rows))
    return {f.id: f for f in diagnose(traj, ctx or RunContext())}


def test_healthy_trajectory_has_no_finding(tmp_path: Path) -> None:
    assert run_rules(tmp_path, synth.healthy()) == {}


def test_every_rule_has_a_documented_id() -> None:
    assert {r.__name__ for r in RULES} == set(FINDING_IDS)
    assert all(r.__doc__ for r in RULES)


def test_every_finding_is_in_the_diagnose_table() -> None:
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "diagnose.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z_]+)` \|", page, re.M)
    assert set(rows) == set(FINDING_IDS), sorted(set(FINDING_IDS) ^ set(rows))


def test_entropy_collapse_names_dapo_with_its_settings(tmp_path: Path) -> None:
    found = run_rules(tmp_path, synth.entropy_collapse())
    f = found["entropy_collapse"]
    assert (f.severity, f.variant) == ("error", "dapo")
    assert f.evidence["entropy_late"] < R.ENTROPY_COLLAPSE_RATIO * f.evidence["entropy_early"]
    assert f.brief_edit == "grpo:\n  variant: dapo\n  symptom: entropy_collapse\n"
    assert f.settings["loss_type"] == "dapo" and f.settings["epsilon_high"] == 0.28 and f.settings["beta"] == 0.0
    assert f.steps[-1] == 40 and 1 not in f.steps


def test_entropy_that_keeps_rising_with_flat_correctness_is_an_error(tmp_path: Path) -> None:
    found = run_rules(tmp_path, synth.entropy_rising())
    assert set(found) == {"entropy_rising"}
    f = found["entropy_rising"]
    assert (f.severity, f.variant) == ("error", None)
    assert f.evidence["entropy_late"] >= R.ENTROPY_RISE_RATIO * f.evidence["entropy_early"]
    assert f.evidence["trend_corr"] >= R.ENTROPY_RISE_CORR and abs(f.evidence["correctness_change"]) < 0.05
    assert f.steps[-1] == 40 and 1 not in f.steps
    assert "half the learning rate" in f.fix and "stop the run" in f.fix


def test_entropy_rising_on_dapo_goes_back_to_plain_grpo(tmp_path: Path) -> None:
    rows = synth.vary(synth.entropy_rising(), rewards__exact_match__mean=lambda t, r: 0.2 + 0.5 * t)
    rows = synth.vary(rows, reward=lambda t, r: r["rewards/exact_match/mean"])
    found = run_rules(tmp_path, rows, RunContext(variant="dapo", learning_rate=1e-6))
    f = found["entropy_rising"]
    assert f.severity == "warning"  # correctness still improves: watch, do not stop
    assert f.brief_edit == "grpo:\n  learning_rate: 5e-07\n  variant: grpo\n  symptom: null\n  beta: 0.01\n"


def test_entropy_that_recovers_or_eases_is_not_rising(tmp_path: Path) -> None:
    assert run_rules(tmp_path, synth.entropy_recovers()) == {}
    bump = synth.vary(synth.healthy(), entropy=lambda t, r: 0.8 + (1.2 if 0.4 < t < 0.5 else 0.0))
    assert "entropy_rising" not in run_rules(tmp_path, bump)  # one bump is not a climb


def test_length_bias_with_a_length_paying_reward_names_dr_grpo(tmp_path: Path) -> None:
    f = run_rules(tmp_path, synth.length_bias())["length_reward_correlation"]
    assert f.variant == "dr_grpo" and "symptom: length_reward_correlation" in (f.brief_edit or "")
    assert f.evidence["length_reward_corr"] > 0.9
    assert abs(f.evidence["correctness_change"]) < R.CORRECTNESS_FLAT
    assert f.settings["loss_type"] == "dr_grpo" and f.settings["scale_rewards"] == "none"


def test_length_rising_with_a_flat_single_correctness_reward_is_length_bias(tmp_path: Path) -> None:
    rows = synth.vary(synth.healthy(), completions__mean_length=lambda t, r: 120 + 200 * t,
                      rewards__exact_match__mean=lambda t, r: 0.3, reward=lambda t, r: 0.3)
    assert "length_reward_correlation" in run_rules(tmp_path, rows)


def test_a_modest_length_drift_that_no_reward_pays_for_is_not_length_hacking(tmp_path: Path) -> None:
    rows = synth.vary(synth.healthy(), completions__mean_length=lambda t, r: 120 + 40 * t,
                      rewards__exact_match__mean=lambda t, r: 0.3, reward=lambda t, r: 0.3)
    assert "length_reward_correlation" not in run_rules(tmp_path, rows)  # +33%, reward flat
    paid = synth.vary(rows, rewards__style__mean=lambda t, r: 0.1 + 0.4 * t,
                      reward=lambda t, r: 0.3 + r["rewards/style/mean"])
    f = run_rules(tmp_path, paid)["length_reward_correlation"]  # the same +33%, but a reward rises with it
    assert f.kind == "training" and f.evidence["reward_change"] >= R.REWARD_RISE_MIN


def test_rare_successes_are_the_tasks_and_none_at_all_the_runs(tmp_path: Path) -> None:
    # as a recipe run at base pass@1 0.2% logged it: successes only on the steps that had a varying group
    rare = synth.vary(synth.healthy(), frac_reward_zero_std=lambda t, r: 0.75 if r["step"] % 5 == 0 else 1.0,
                      rewards__exact_match__mean=lambda t, r: 0.03 if r["step"] % 5 == 0 else 0.0)
    rare = synth.vary(rare, reward=lambda t, r: r["rewards/exact_match/mean"])
    f = run_rules(tmp_path, rare)["no_signal_all_fail"]
    assert (f.kind, f.severity, f.evidence["steps_with_signal"]) == ("task", "warning", 8)
    assert "grpo.deviation" in f.fix and "grpo.num_generations" in f.fix
    assert run_rules(tmp_path, synth.all_fail())["no_signal_all_fail"].kind == "training"


@pytest.mark.parametrize(("edit", "cost"), [
    ("episode:\n  max_turns: 4\n", "an episode change: makes records/baseline.json and records/inspection.json stale"),
    ("rewards:\n  - fn: style\n    weight: 0.1\n", "a reward change: makes records/baseline.json"),
    ("grpo:\n  max_completion_length: 256\n", "changes how the baseline was sampled: a new `finetune baseline`"),
    ("grpo:\n  learning_rate: 2.5e-07\n", "keeps the records"),
    ("grpo:\n  variant: dapo\n  symptom: entropy_collapse\n", "keeps the records"),
])
def test_every_brief_edit_says_what_it_costs(edit: str, cost: str) -> None:
    assert (R.edit_cost(edit) or "").startswith(cost)


def test_length_that_pays_off_in_correctness_is_not_a_finding(tmp_path: Path) -> None:
    assert run_rules(tmp_path, synth.length_pays_off()) == {}


def test_moe_without_gspo_is_an_error_and_gspo_is_required(tmp_path: Path) -> None:
    ctx = RunContext(is_moe=True, moe_source="brief model.architecture: moe", variant="grpo")
    f = run_rules(tmp_path, synth.healthy(), ctx)["moe_instability"]
    assert (f.severity, f.variant) == ("error", "gspo")
    assert f.brief_edit == "grpo:\n  variant: gspo\n  symptom: moe\n"
    assert f.settings["importance_sampling_level"] == "sequence"


def test_moe_on_gspo_or_dense_model_is_not_a_moe_finding(tmp_path: Path) -> None:
    assert "moe_instability" not in run_rules(tmp_path, synth.clip_spikes(), RunContext(is_moe=True, variant="gspo"))
    assert "moe_instability" not in run_rules(tmp_path, synth.clip_spikes(), RunContext(is_moe=False))


def test_clip_ratio_spikes_on_unknown_architecture_warn_of_moe(tmp_path: Path) -> None:
    f = run_rules(tmp_path, synth.clip_spikes())["moe_instability"]
    assert f.severity == "warning" and f.steps == [13, 26, 34]
    assert run_rules(tmp_path, synth.healthy()).get("moe_instability") is None


def test_all_fail_means_sft_first(tmp_path: Path) -> None:
    found = run_rules(tmp_path, synth.all_fail())
    f = found["no_signal_all_fail"]
    assert f.severity == "error" and f.variant is None and "SFT" in f.fix
    assert "no_signal_all_pass" not in found


def test_all_fail_after_a_baseline_that_succeeded_is_not_called_zero_base_success(tmp_path: Path) -> None:
    found = run_rules(tmp_path, synth.all_fail(), RunContext(base_pass_at_k=0.1, base_k=8))
    fix = found["no_signal_all_fail"].fix
    assert "Base success is zero" not in fix and "the baseline's pass@8 was 10%" in fix and "num_generations" in fix
    assert "Base success is zero" in run_rules(tmp_path / "zero", synth.all_fail(),
                                               RunContext(base_pass_at_k=0.0, base_k=8))["no_signal_all_fail"].fix


def test_all_pass_means_prompts_too_easy(tmp_path: Path) -> None:
    found = run_rules(tmp_path, synth.all_pass())
    assert "too easy" in found["no_signal_all_pass"].fix
    assert "no_signal_all_fail" not in found


# Issue 26 item 6: the tool task's 3e-5 run on one H200 learned its prompts (held-out pass@1 79% -> 98%) and
# its last steps tied at success; that is the run being done, not prompts too easy from the start.
def test_groups_that_tie_at_success_only_after_the_run_learned_them_are_prompts_learned(tmp_path: Path) -> None:
    from llm_finetuning.diagnose import diagnosis_json

    found = run_rules(tmp_path, synth.learned_prompts())
    assert set(found) == {"prompts_learned"}
    f = found["prompts_learned"]
    assert (f.severity, f.variant, f.brief_edit) == ("info", None, None)
    assert "after early steps that had signal; exact_match rose from" in f.evidence["message"]
    assert "the run has learned its training prompts" in f.evidence["message"] and "k/k" in f.fix
    assert diagnosis_json(list(found.values()))["healthy"] is True


def test_groups_that_tie_from_the_first_steps_stay_prompts_too_easy(tmp_path: Path) -> None:
    rows = synth.vary(synth.learned_prompts(), frac_reward_zero_std=lambda t, r: 1.0)
    assert set(run_rules(tmp_path, rows)) == {"no_signal_all_pass"}


def test_late_ties_without_learning_stay_prompts_too_easy(tmp_path: Path) -> None:
    rows = synth.vary(synth.learned_prompts(), rewards__exact_match__mean=lambda t, r: 0.9,
                      reward=lambda t, r: 0.9)  # correctness high from the start: nothing learned
    assert "no_signal_all_pass" in run_rules(tmp_path, rows) and "prompts_learned" not in run_rules(tmp_path, rows)


def test_truncation_with_nothing_terminating_is_an_error(tmp_path: Path) -> None:
    ctx = RunContext(max_completion_length=256)
    f = run_rules(tmp_path, synth.truncated(1.0), ctx)["truncation"]
    assert f.severity == "error" and f.brief_edit == "grpo:\n  max_completion_length: 512\n"
    assert f.evidence["mean_terminated_length_late"] == 0


def test_partial_truncation_is_a_warning_and_rare_truncation_nothing(tmp_path: Path) -> None:
    f = run_rules(tmp_path, synth.truncated(0.4))["truncation"]
    assert (f.severity, f.kind) == ("warning", "task")  # held at 40% all run: the base model's rambling
    assert "truncation" not in run_rules(tmp_path, synth.truncated(0.1))
    climbing = synth.vary(synth.truncated(0.4), completions__clipped_ratio=lambda t, r: 0.05 + 0.5 * t)
    assert run_rules(tmp_path, climbing)["truncation"].kind == "training"  # the run learned to ramble
    assert run_rules(tmp_path, synth.truncated(1.0))["truncation"].kind == "training"


def test_format_reward_saturating_while_correctness_flat_is_reward_hacking(tmp_path: Path) -> None:
    f = run_rules(tmp_path, synth.format_hack(), RunContext(reward_weights={"format": 1.0, "exact_match": 1.0}))[
        "reward_hacking"]
    assert f.variant is None and f.evidence["correctness"] == "exact_match"
    assert any("format saturated" in s for s in f.evidence["signatures"])
    assert f.brief_edit is not None and "fn: format" in f.brief_edit


def test_format_reward_saturating_with_correctness_rising_is_fine(tmp_path: Path) -> None:
    assert "reward_hacking" not in run_rules(tmp_path, synth.format_and_correct())


def test_held_out_stricter_verifier_diverging_is_reward_hacking(tmp_path: Path) -> None:
    ctx = RunContext(eval_steps=[10, 20, 30, 40], eval_scores=[0.2, 0.21, 0.19, 0.2], eval_source="eval.jsonl")
    f = run_rules(tmp_path, synth.healthy(), ctx)["reward_hacking"]
    assert f.severity == "error" and f.evidence["eval_score_change"] < 0.05
    tracking = RunContext(eval_steps=[10, 20, 30, 40], eval_scores=[0.25, 0.35, 0.45, 0.55])
    assert "reward_hacking" not in run_rules(tmp_path, synth.healthy(), tracking)


def test_trl_eval_reward_in_the_logs_counts_as_the_held_out_score(tmp_path: Path) -> None:
    rows = synth.healthy()
    evals = [{"step": s, "eval_reward": 0.2, "eval_loss": 0.0} for s in (10, 20, 30, 40)]
    f = run_rules(tmp_path, sorted(rows + evals, key=lambda r: r["step"]))["reward_hacking"]
    assert f.evidence["eval_source"] == "TRL eval_reward" and f.steps == [10, 20, 30, 40]


def test_kl_climbing_is_a_blowup_with_a_lower_learning_rate(tmp_path: Path) -> None:
    f = run_rules(tmp_path, synth.kl_climb(), RunContext(learning_rate=1e-5))["kl_blowup"]
    assert f.severity == "error" and f.brief_edit == "grpo:\n  learning_rate: 5e-06\n"


def test_repeated_grad_norm_spikes_and_nan_loss_are_findings(tmp_path: Path) -> None:
    assert run_rules(tmp_path, synth.grad_spikes())["kl_blowup"].steps == [11, 21, 31]
    nan = run_rules(tmp_path, synth.nan_loss())["kl_blowup"]
    assert nan.severity == "error" and nan.evidence["nonfinite_steps"][0] == 33


def test_null_loss_as_launch_writes_nan_is_non_finite(tmp_path: Path) -> None:
    rows = synth.vary(synth.healthy(), loss=lambda t, r: "null" if t > 0.9 else r["loss"])
    rows = [{k: (None if v == "null" else v) for k, v in r.items()} for r in rows]
    assert run_rules(tmp_path, rows)["kl_blowup"].evidence["nonfinite_steps"] == [37, 38, 39, 40]


def test_one_transient_spike_is_not_a_blowup(tmp_path: Path) -> None:
    assert run_rules(tmp_path, synth.one_spike()) == {}


def test_zero_loss_with_zero_gradient(tmp_path: Path) -> None:
    f = run_rules(tmp_path, synth.zero_loss())["zero_loss"]
    assert f.severity == "error" and len(f.steps) == 40


def test_grpo_loss_near_zero_with_a_gradient_is_normal(tmp_path: Path) -> None:
    assert "zero_loss" not in run_rules(tmp_path, synth.grpo_zero_loss_is_normal())


def test_short_trajectories_do_not_make_trend_findings(tmp_path: Path) -> None:
    rows = synth.entropy_collapse()[::10]  # 4 points
    assert "entropy_collapse" not in run_rules(tmp_path, rows)


def test_errors_come_before_warnings(tmp_path: Path) -> None:
    rows = synth.vary(synth.entropy_collapse(), completions__clipped_ratio=lambda t, r: 0.5)
    ids = [f.id for f in diagnose(load_trajectory(synth.write_run(tmp_path / "r", rows)))]
    assert ids == ["entropy_collapse", "truncation"]


@pytest.mark.parametrize(("steps", "logged", "text"), [
    ([1, 2, 3, 7, 9, 10], None, "1-3, 7, 9-10"),
    ([10, 20, 30, 50], [10, 20, 30, 40, 50], "10-30, 50"),
    ([], None, "-"),
])
def test_step_ranges(steps: list[int], logged: list[int] | None, text: str) -> None:
    assert step_ranges(steps, logged) == text


def test_stats_helpers() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [5, 5, 5]) is None
    assert fitted_change([0, 1, 2, 3], [0, 1, 2, 3]) == pytest.approx(3.0)
    assert spikes([1, 1, 1, 1, 20, 1, 1], factor=10, floor=0.1, minimum=0) == [4]


def test_a_blowup_names_the_learning_rate_the_schedule_had_reached(tmp_path: Path) -> None:
    decayed = synth.vary(synth.grad_spikes(), learning_rate=lambda t, r: 1e-5 * (1 - t))  # linear decay to 0
    f = run_rules(tmp_path, decayed, RunContext(learning_rate=1e-5, lr_scheduler="linear"))["kl_blowup"]
    assert f.evidence["learning_rate_at_first_problem"] == pytest.approx(1e-5 * (1 - 10 / 39))
    assert "the learning rate at step 11 was 7.44e-06 (peak 1e-05, schedule linear)" in f.evidence["message"]
    assert "already decayed" not in f.fix  # still above half the peak at the first spike
    late = synth.vary(synth.nan_loss(), learning_rate=lambda t, r: 1e-5 * (1 - t))
    f = run_rules(tmp_path, late, RunContext(learning_rate=1e-5, lr_scheduler="linear"))["kl_blowup"]
    assert "had already decayed the rate to 18% of the peak here, so the peak itself is too high" in f.fix
    flat = synth.vary(synth.grad_spikes(), learning_rate=lambda t, r: 1e-5)
    f = run_rules(tmp_path, flat, RunContext(learning_rate=1e-5, lr_scheduler="constant"))["kl_blowup"]
    assert "halving the peak halves every step's rate" in f.fix


# Issue 27 item 10: a falling entropy while correctness or a held-out score rises is convergence (info), not the
# collapse DAPO is for; synth.entropy_collapse (correctness still at 0.6, no held-out score) stays a collapse.
def test_entropy_falling_while_correctness_rises_and_holds_is_converged(tmp_path: Path) -> None:
    from llm_finetuning.diagnose import diagnosis_json

    found = run_rules(tmp_path, synth.entropy_converged())
    assert set(found) == {"converged"}
    f = found["converged"]
    assert (f.severity, f.variant, f.brief_edit) == ("info", None, None)
    assert "exact_match rose from" in f.evidence["message"] and "convergence, not entropy collapse" in f.evidence["message"]
    assert diagnosis_json(list(found.values()))["healthy"] is True


def test_correctness_that_falls_back_keeps_the_collapse(tmp_path: Path) -> None:
    assert set(run_rules(tmp_path, synth.entropy_converged_then_falls_back())) == {"entropy_collapse"}


@pytest.mark.parametrize(("beyond_noise", "expected"), [(True, "converged"), (False, "entropy_collapse")])
def test_held_out_gain_from_finetune_eval_tells_convergence(tmp_path: Path, beyond_noise: bool, expected: str) -> None:
    import json

    from llm_finetuning.diagnose import load_context

    run = synth.write_run(tmp_path / "run", synth.entropy_collapse())
    (run / "eval.json").write_text(json.dumps({"base": {"pass_at_1": 0.2}, "trained": {"pass_at_1": 0.6},
                                               "beyond_noise": beyond_noise}))
    ids = {f.id for f in diagnose(load_trajectory(run), load_context(run))}
    assert expected in ids and ({"converged", "entropy_collapse"} - {expected}).isdisjoint(ids)


def test_training_reward_up_with_a_flat_held_out_verifier_is_no_convergence(tmp_path: Path) -> None:
    rows = synth.entropy_converged()
    ctx = RunContext(eval_steps=[10, 20, 30, 40], eval_scores=[0.2, 0.21, 0.2, 0.19], eval_source="eval.jsonl")
    assert {"entropy_collapse", "reward_hacking"} <= set(run_rules(tmp_path, rows, ctx))
