"""Through the gate: one character changed in a reward's source, a reward's args, a sample or a verdict
makes the sealed record stale or tampered, and the failing line says which."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llm_finetuning.gate import gate_fingerprint, run_gate
from llm_finetuning.records.inspection import samples_path


def change_reward_source(brief: Path) -> None:
    src = brief.parent / "my_rewards.py"
    src.write_text(src.read_text().replace("1.0 if", "1.5 if"))


def change_reward_args(brief: Path) -> None:
    brief.write_text(brief.read_text().replace("extract: last_number", "extract: last_numbe"))
    brief.write_text(brief.read_text().replace("extract: last_numbe", "extract: boxed"))


def change_sample(brief: Path) -> None:
    spath = samples_path(brief.parent / "records" / "inspection.json")
    spath.write_text(spath.read_text().replace("The sum is 9.", "The sum is 9!", 1))


def change_verdict(brief: Path) -> None:
    path = brief.parent / "records" / "inspection.json"
    rec = json.loads(path.read_text())
    rec["verdicts"]["s010"]["note"] = "x"
    path.write_text(json.dumps(rec))


@pytest.mark.parametrize(("change", "expected"), [
    (change_reward_source, "stale: reward code changed since the record: my_rewards.py (my_rewards:contains_answer) changed"),
    (change_reward_args, "stale: reward specs changed since the record: rewards[0] (exact_match) fn/weight/args changed"),
    (change_sample, "tampered: inspection.samples.jsonl differs from the samples that were scored: changed or removed: s006"),
    (change_verdict, "tampered: verdicts edited after sealing: sample(s) s010"),
])
def test_one_change_makes_the_record_fail_and_named(change, expected: str, make_brief,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    assert run_gate(brief).passed
    change(brief)
    report = run_gate(brief)
    inspected = [c for c in report.failures if c.id == "reward_inspected"]
    assert [c.message for c in inspected][:1] == [expected], report.render()


def test_fingerprint_changes_with_any_record(make_brief) -> None:
    from llm_finetuning.brief import load_brief

    path = make_brief("passing")
    brief, _ = load_brief(path)
    before = gate_fingerprint(brief)
    assert gate_fingerprint(brief) == before
    baseline = path.parent / "records" / "baseline.json"
    baseline.write_text(baseline.read_text() + " ")
    assert gate_fingerprint(brief) != before


def diagnosed_run(run: Path, healthy: bool, brief_name: str) -> None:
    """A run directory with metrics and a diagnosis.json in the diagnose area's format 1."""
    import hashlib

    run.mkdir(parents=True, exist_ok=True)
    metrics = run / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "reward": 0.1 * s}) + "\n" for s in range(1, 6)))
    (run / "diagnosis.json").write_text(json.dumps({
        "format": 1, "healthy": healthy, "findings": [] if healthy else [{"id": "kl_blowup"}],
        "brief_name": brief_name, "source": "metrics.jsonl", "ended": True,
        "source_sha256": hashlib.sha256(metrics.read_bytes()).hexdigest()}))


def test_deviation_justified_by_a_healthy_run_warns(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_brief("passing")
    run = path.parent / "runs" / "first"
    diagnosed_run(run, True, "gate-fixture")
    path.write_text(path.read_text().replace("learning_rate: 5.0e-7", "learning_rate: 1.0e-5\n  deviation: runs/first"))
    monkeypatch.chdir(path.parent)
    report = run_gate(path)
    assert report.passed, report.render()
    [warn] = [c for c in report.checks if c.id == "recipe_values"]
    assert warn.verdict == "warn" and "justified by the healthy run runs/first" in warn.message
    diagnosed_run(run, False, "gate-fixture")
    [fail] = [c for c in run_gate(path).checks if c.id == "recipe_values"]
    assert fail.verdict == "fail" and "not diagnosed healthy (the run's findings: kl_blowup)" in fail.message
    diagnosed_run(run, True, "another-brief")
    [fail] = [c for c in run_gate(path).checks if c.id == "recipe_values"]
    assert "belongs to brief 'another-brief', not 'gate-fixture'" in fail.message
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "reward": 0.0}\n')
    diagnosed = [c for c in run_gate(path).checks if c.id == "recipe_values"]
    assert "changed since it was diagnosed" in diagnosed[0].message


def test_moe_read_from_a_local_config(make_brief) -> None:
    path = make_brief("passing", records=False)
    model = path.parent / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3_moe", "num_experts": 128}))
    path.write_text(path.read_text().replace("id: Qwen/Qwen2.5-0.5B-Instruct", "id: ./model"))
    [fail] = [c for c in run_gate(path).checks if c.id == "variant_table"]
    assert fail.verdict == "fail" and "config.json names 128 experts" in fail.message
    path.write_text(path.read_text().replace("  num_generations: 8", "  variant: gspo\n  symptom: moe\n  num_generations: 8"))
    [ok] = [c for c in run_gate(path).checks if c.id == "variant_table"]
    assert ok.verdict == "pass" and "MoE model" in ok.message


def test_dapo_with_a_kl_term_contradicts_the_variant(make_brief) -> None:
    path = make_brief("passing", records=False)
    path.write_text(path.read_text().replace("  num_generations: 8", "  variant: dapo\n  symptom: entropy_collapse\n"
                                             "  num_generations: 8").replace("beta: 0.01", "beta: 0.05"))
    failing = {(c.id, c.path) for c in run_gate(path).failures}
    assert ("overrides", "grpo.beta") in failing


def test_local_weights_changed_in_place_make_the_records_stale(make_brief) -> None:
    from records_builders import build_baseline, build_inspection, loaded

    path = make_brief("passing", records=False)
    model = path.parent / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    path.write_text(path.read_text().replace("id: Qwen/Qwen2.5-0.5B-Instruct", "id: ./model"))
    build_baseline(loaded(path))
    build_inspection(loaded(path))
    assert not [c for c in run_gate(path).failures if c.id in ("reward_inspected", "base_success_nonzero")]
    (model / "model.safetensors").write_bytes(b"\1" * 64)  # same size, new content
    failures = [c for c in run_gate(path).failures if c.id == "reward_inspected"]
    assert failures and failures[0].message.startswith("stale: the model changed since the record: model identity")


def test_override_of_a_field_the_brief_decides_elsewhere_fails(make_brief) -> None:
    path = make_brief("passing", records=False)
    path.write_text(path.read_text().replace("  gradient_accumulation_steps: 4",
                                             "  gradient_accumulation_steps: 4\n  overrides: {use_vllm: false, top_k: 20}"))
    [fail] = [c for c in run_gate(path).checks if c.id == "overrides"]
    assert (fail.verdict, fail.path) == ("fail", "grpo.overrides.use_vllm")
    assert fail.fix == "remove grpo.overrides.use_vllm and set hardware.generation instead"


def test_many_unsure_verdicts_warn(make_brief) -> None:
    from records_builders import build_inspection, loaded

    path = make_brief("passing")
    build_inspection(loaded(path), verdicts={i: "unsure" for i in range(20)}, seconds=5.0)
    report = run_gate(path)
    assert report.passed
    [warn] = [c for c in report.warnings if c.id == "reward_inspected"]
    assert "unsure on 20 of 64 samples" in warn.message


def test_a_check_that_raises_rejects_the_brief(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    import llm_finetuning.gate.checks as checks

    def broken(brief: object, ctx: object) -> list:
        raise KeyError("grpo")

    monkeypatch.setattr(checks, "CHECKS", [*checks.CHECKS, ("broken_check", broken)])
    report = run_gate(make_brief("passing"))
    assert not report.passed and report.exit_code == 1
    [fail] = report.failures
    assert (fail.id, fail.message) == ("broken_check", "the check itself failed: KeyError: 'grpo'")


def _base_success_warnings(brief: Path) -> list[tuple[str, str, str]]:
    report = run_gate(brief)
    assert report.passed, report.render()
    return [(c.path, c.message, c.fix) for c in report.warnings if c.id == "base_success_nonzero"]


def test_baseline_measured_under_other_settings_warns_naming_each(make_brief,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    assert _base_success_warnings(brief) == []  # measured under the brief's own settings
    text = brief.read_text()
    brief.write_text(text.replace("grpo:\n", "grpo:\n  max_completion_length: 128\n  temperature: 0.7\n", 1))
    warned = _base_success_warnings(brief)
    assert [(path, reason) for path, reason, _ in warned] == [
        ("grpo.max_completion_length", "the baseline was measured with max_completion_length 512; the brief now "
         "sets grpo.max_completion_length 128: its figures may not hold for this run"),
        ("grpo.temperature", "the baseline was measured with temperature 1; the brief now sets grpo.temperature "
         "0.7: its figures may not hold for this run"),
    ]
    assert all(fix == "run `finetune baseline brief.yaml` to measure under the brief's settings"
               for _, _, fix in warned)


@pytest.mark.parametrize(("sampling", "setting"), [
    ({"temperature": 0.0, "greedy": True, "purpose": "evaluation"}, "greedy"),
    ({"temperature": 0.7, "greedy": False, "purpose": "evaluation"}, "temperature 0.7"),
])
def test_baseline_measured_at_an_evaluation_setting_fails(make_brief, monkeypatch: pytest.MonkeyPatch,
                                                          sampling: dict, setting: str) -> None:
    """Issue 20 item 3: figures from `finetune baseline --greedy` (or --temperature) at records.baseline,
    which would pass on their numbers, do not stand for the learning signal at the training temperature."""
    from llm_finetuning.brief import load_brief

    sys.path.insert(0, str(Path(__file__).parents[1] / "records"))
    from records_builders import build_baseline

    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    loaded, _ = load_brief(brief)
    build_baseline(loaded, pass_at_k=0.9, pass_at_1=0.6, sampling=sampling)
    report = run_gate(brief)
    assert not report.passed and report.exit_code == 1
    [fail] = [c for c in report.failures if c.id == "base_success_nonzero"]
    assert (fail.path, fail.message, fail.fix) == (
        "records.baseline", f"the baseline record was measured at {setting} (`finetune baseline --temperature/"
        "--greedy`), an evaluation setting: the learning signal is judged at the training temperature "
        "(grpo.temperature 1)", "run `finetune baseline brief.yaml` without --temperature or --greedy: it "
        "measures at grpo.temperature into records.baseline")
    build_baseline(loaded, pass_at_k=0.9, pass_at_1=0.6)  # the same figures at the training temperature pass
    assert _base_success_warnings(brief) == []


def test_truncation_warning_quotes_the_baselines_own_length(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38 item 4: a baseline measured at 24 tokens, under a brief that now says more, is quoted at 24."""
    from llm_finetuning.brief import load_brief

    sys.path.insert(0, str(Path(__file__).parents[1] / "records"))
    from records_builders import build_baseline

    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    loaded, _ = load_brief(brief)
    assert loaded.grpo.max_completion_length != 24
    build_baseline(loaded, truncated=0.8, sampling={"max_completion_length": 24})
    cut = [m for path, m, _ in _base_success_warnings(brief) if path == "grpo.max_completion_length" and "were cut" in m]
    assert cut == ["80% of baseline completions were cut at max_completion_length (24 tokens, "
                                        "the baseline's setting)"]


def test_baseline_without_settings_warns_they_are_unknown(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_finetuning.brief import load_brief

    sys.path.insert(0, str(Path(__file__).parents[1] / "records"))
    from records_builders import build_baseline

    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    loaded, _ = load_brief(brief)
    build_baseline(loaded, settings=False)  # as `finetune baseline` wrote records before settings were bound
    assert _base_success_warnings(brief) == [(
        "records.baseline", "the baseline record does not say which max_completion_length, temperature, top_p, "
        "system_prompt, chat_template it was measured with (an older `finetune baseline` wrote it): whether "
        "they match the brief is unknown", "run `finetune baseline brief.yaml` to measure under the brief's settings")]


def test_shipped_example_passes_with_honest_warnings_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/smollm2-json's record: every settings warning names a real difference or a real unknown."""
    import json as _json

    from llm_finetuning.brief import load_brief
    from llm_finetuning.records.baseline import brief_sampling_settings

    example = Path(__file__).parents[2] / "examples" / "smollm2-json"
    monkeypatch.chdir(example)
    brief, _ = load_brief(example / "brief.yaml")
    record = _json.loads((example / "records" / "baseline.json").read_text())
    now = brief_sampling_settings(brief)
    for path, reason, _ in _base_success_warnings(example / "brief.yaml"):
        if path == "records.baseline":
            unknown = reason.split("which ", 1)[1].split(" it was", 1)[0].split(", ")
            assert all(name not in record.get("sampling", {}) for name in unknown), reason
        else:
            name = path.rsplit(".", 1)[1]
            assert record["sampling"][name] != now[name], reason


def test_tracker_without_its_package_warns_with_the_install_command(make_brief,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    brief.write_text(brief.read_text() + "tracking:\n  report_to: [wandb]\n")
    report = run_gate(brief)
    assert report.passed, report.render()
    warned = [(c.path, c.message, c.fix) for c in report.warnings if c.id == "tracking"]
    assert warned == [("tracking.report_to", "wandb: its package (wandb) is not installed here, so the trainer "
                       "would refuse to start on this machine", "pip install wandb")]


def _zero_success_fail(brief: Path, inspected: bool) -> tuple[str, str]:
    """The base-success failure for a 0% baseline with the verdict `finetune baseline` writes into the record."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.sampling.metrics import verdict

    sys.path.insert(0, str(Path(__file__).parents[1] / "records"))
    from records_builders import build_baseline

    loaded, _ = load_brief(brief)
    figures = {"pass_at_1": 0.0, "pass_at_k": 0.0, "frac_truncated": 0.0, "frac_groups_all_tie": 1.0, "completions": 128}
    build_baseline(loaded, pass_at_k=0.0, pass_at_1=0.0, tie=1.0, truncated=0.0,
                   verdict=verdict(figures, 8, 512).to_json())
    if not inspected:
        (brief.parent / "records" / "inspection.json").unlink()
    [fail] = [c for c in run_gate(brief).failures if c.id == "base_success_nonzero"]
    return fail.message, fail.fix


def test_zero_success_without_an_inspection_names_inspect_first(make_brief, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27 item 9: at 0% the likelier cause may be a reward that never matched; the fix carries the
    baseline's own advice, with `finetune inspect` first while no inspection has checked the reward."""
    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    message, fix = _zero_success_fail(brief, inspected=False)
    assert "a reward that never matches the model's answers" in message
    assert fix.startswith("(1) check the reward first: `finetune inspect brief.yaml` then `finetune review "
                          "records/inspection.json`")
    assert "(2) SFT first: fine-tune on a few hundred demonstrations" in fix  # the record's own advice
    assert "easier prompts: start GRPO on a subset" in fix
    assert fix.count("finetune inspect") == 1


def test_zero_success_with_a_sealed_inspection_carries_the_record_advice(make_brief,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    brief = make_brief("passing")
    monkeypatch.chdir(brief.parent)
    message, fix = _zero_success_fail(brief, inspected=True)
    assert "never matches" not in message
    assert fix.startswith("(1) SFT first: fine-tune on a few hundred demonstrations")  # the reward was checked
    assert "(2) easier prompts" in fix and "finetune inspect" not in fix
