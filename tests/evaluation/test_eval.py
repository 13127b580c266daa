"""`finetune eval` on real CPU runs of the tiny model: the real CLI, real sampling, real scoring."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli

pytestmark = pytest.mark.slow

CONTRACT = {"checkpoint", "prompts", "k", "base", "trained", "delta_pass_at_1", "ci95", "beyond_noise"}
DECODING = {"temperature", "greedy"}  # docs/workflow.md's keys end with the setting both sides were measured at


def run_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_eval_against_a_real_baseline_uses_its_prompts_and_settings(full_run: tuple[Path, Path]) -> None:
    from llm_finetuning.records.baseline import load_baseline

    brief, run = full_run
    code, _, err = run_cli("baseline", str(brief), "--prompts", "6", "--k", "2")  # real, per-prompt successes
    assert code == 0, err
    record = load_baseline(brief.parent / "records" / "baseline.json")
    code, out, err = run_cli("eval", str(run), "--json")
    assert code == 1, err  # a random model writes no JSON before or after: not better
    result = json.loads(out)
    assert set(result) == CONTRACT | DECODING
    assert (result["temperature"], result["greedy"]) == (record.sampling.temperature if record.sampling else None, False)
    assert (result["checkpoint"], result["prompts"], result["k"]) == ("final", 6, 2)
    assert result["base"] == {"pass_at_1": record.pass_at_1, "pass_at_k": record.pass_at_k}
    assert result["beyond_noise"] is False and result["ci95"][0] <= 0 <= result["ci95"][1]
    assert "Held-out (final)" in err and "Held-out (base)" not in err  # the base side came from the record
    written = json.loads((run / "eval.json").read_text())
    assert written["baseline"] == {"path": str(brief.parent / "records" / "baseline.json"),
                                   "digest": record.digest, "base_source": "record"}
    assert written["indices"] == list(record.prompts.indices)
    assert written["settings"]["max_completion_length"] == record.sampling.max_completion_length == 8
    assert written["settings"]["temperature"] == record.sampling.temperature
    from llm_finetuning.evaluation.targets import folder_sha256

    assert written["checkpoint_sha256"] == folder_sha256(run / "model")
    assert len(written["per_prompt"]["trained"]) == 6


def test_eval_at_an_evaluation_setting_compares_both_sides_there(full_run: tuple[Path, Path]) -> None:
    """Issue 20 item 3: --greedy / --temperature T sample both sides at that setting; the base side comes from
    the record of that setting when `finetune baseline --greedy` wrote one, else it is sampled again."""
    brief, run = full_run
    records = brief.parent / "records"
    for stale in records.glob("baseline.*.json"):
        stale.unlink()
    assert run_cli("baseline", str(brief), "--prompts", "4", "--k", "2")[0] == 0
    training = json.loads((records / "baseline.json").read_text())
    code, out, err = run_cli("eval", str(run), "--greedy", "--json")
    assert code == 1, err
    result = json.loads(out)
    assert set(result) == CONTRACT | DECODING
    assert (result["temperature"], result["greedy"], result["k"], result["prompts"]) == (0.0, True, 1, 4)
    assert f"note: no baseline record at greedy ({records / 'baseline.greedy.json'}; `finetune baseline {brief} " \
        "--greedy` writes one): the base model is sampled again at greedy on the prompts of" in err
    assert "Held-out (base)" in err  # sampled again, greedily, on the training record's prompts
    written = json.loads((run / "eval.json").read_text())
    assert written["baseline"]["base_source"] == "sampled" and written["settings"]["greedy"] is True
    assert written["indices"] == training["prompts"]["indices"]

    assert run_cli("baseline", str(brief), "--prompts", "4", "--greedy")[0] == 0
    greedy = json.loads((records / "baseline.greedy.json").read_text())
    code, out, err = run_cli("eval", str(run), "--greedy")
    assert code == 1, err
    assert "x 1 samples, greedy, max 8 tokens; base side: record)" in out
    assert "Held-out (base)" not in err and "note:" not in err
    written = json.loads((run / "eval.json").read_text())
    assert written["baseline"]["path"] == str(records / "baseline.greedy.json")
    assert written["per_prompt"]["base"] == greedy["per_prompt"]
    assert written["base"] == {"pass_at_1": greedy["pass_at_1"], "pass_at_k": greedy["pass_at_k"]}

    code, out, err = run_cli("eval", str(run), "--temperature", "1.3", "--json")
    assert code == 1, err
    assert (json.loads(out)["temperature"], json.loads(out)["k"]) == (1.3, 2)
    assert "Held-out (base)" in err and "no baseline record at temperature 1.3" in err
    code, out, err = run_cli("eval", str(run), "--temperature", f"{training['sampling']['temperature']:g}", "--json")
    assert code == 1 and "Held-out (base)" not in err  # the training temperature: the training record's side
    assert json.loads(out)["base"] == {"pass_at_1": training["pass_at_1"], "pass_at_k": training["pass_at_k"]}
    code, _, err = run_cli("eval", str(run), "--greedy", "--k", "3")
    assert code == 2 and "greedy decoding gives the same completion every time" in err


def test_every_checkpoint_into_eval_jsonl_which_diagnose_reads(full_run: tuple[Path, Path]) -> None:
    brief, run = full_run
    code, out, err = run_cli("eval", str(run), "--checkpoint", "all", "--prompts", "2", "--k", "2")
    assert code == 1, err
    assert "checkpoint 2 (" in out and "checkpoint 4 (" in out and "final model" not in out  # final == step 4
    rows = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4] and all(0 <= r["score"] <= 1 for r in rows)
    code, out, err = run_cli("diagnose", str(run), "--json")
    assert code in (0, 1), err
    from llm_finetuning.diagnose.context import load_context

    assert load_context(run).eval_steps == [2, 4]


def test_one_checkpoint_and_unusable_choices(full_run: tuple[Path, Path]) -> None:
    _, run = full_run
    code, out, _ = run_cli("eval", str(run), "--checkpoint", "2", "--prompts", "2", "--json")
    assert code == 1 and json.loads(out)["checkpoint"] == 2
    code, out, err = run_cli("eval", str(run), "--checkpoint", "3")
    assert code == 2 and "has no committed checkpoint-3 (committed: 2, 4)" in err
    code, out, err = run_cli("eval", str(run / "nowhere"))
    assert code == 2 and err.startswith("error: ")


def test_unfinished_run_names_its_checkpoints(full_run: tuple[Path, Path], tmp_path: Path) -> None:
    brief, run = full_run
    copy = tmp_path / run.parent.name
    shutil.copytree(run.parent, copy, symlinks=True)
    shutil.rmtree(copy / "run" / "model")
    code, _, err = run_cli("eval", str(copy / "run"))
    assert code == 2
    assert "the run has not finished (committed checkpoints: 2, 4)" in err and "--checkpoint STEP" in err


def test_lora_adapter_is_merged_and_sampled(lora_run: tuple[Path, Path]) -> None:
    brief, run = lora_run
    assert (run / "model" / "adapter_config.json").is_file()
    code, out, err = run_cli("eval", str(run), "--prompts", "2", "--k", "2", "--json")
    assert code == 1, err
    assert "base model is sampled again" in err  # the synthetic record holds no per-prompt successes
    merged = list((run / ".eval-models").glob("final-*"))
    assert len(merged) == 1 and (merged[0] / "model.safetensors").is_file()
    written = json.loads((run / "eval.json").read_text())
    assert written["adapter"] is True and written["baseline"]["base_source"] == "sampled"


REWARD = '''
def nonempty(prompts, completions, **kwargs):
    """1.0 for any completion with a visible character: a random model earns it often."""
    return [1.0 if str(c).strip() else 0.0 for c in completions]
'''


def test_better_beyond_noise_exits_0(full_run: tuple[Path, Path], tmp_path: Path) -> None:
    """The exit-0 path through the real CLI: a reward the trained (random) model passes, and a base side of
    zero successes per prompt written through the records API (SYNTHETIC: it stands for a weaker base)."""
    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import model_identity
    from llm_finetuning.records import baseline

    _, run = full_run
    copy = tmp_path / run.parent.name
    shutil.copytree(run.parent, copy, symlinks=True)
    brief_path = copy / "brief" / "brief.yaml"
    (brief_path.parent / "my_reward.py").write_text(REWARD)
    text = brief_path.read_text()
    start, end = text.index("rewards:"), text.index("grpo:")
    brief_path.write_text(text[:start] + "rewards:\n  - fn: my_reward:nonempty\n" + text[end:])
    brief, errors = load_brief(brief_path)
    assert brief is not None, errors
    baseline.write_baseline(brief.resolve("records/baseline.json"), baseline.make_baseline(
        brief, model_identity=model_identity(brief.model, brief.folder),
        prompts={"split": "train", "source": "data/train.jsonl", "count": 8, "indices": list(range(8))},
        k=2, pass_at_1=0.0, pass_at_k=0.0, mean_reward={"my_reward:nonempty": 0.0}, frac_groups_all_tie=1.0,
        frac_truncated=1.0, per_prompt=[0] * 8, sampling={**baseline.brief_sampling_settings(brief), "seed": 3407},
        synthetic="tests/evaluation: a base side of zero successes"))
    code, out, err = run_cli("eval", str(copy / "run"))
    assert code == 0, out + err
    assert "verdict: better beyond the noise" in out


def test_trained_model_through_an_openai_compatible_endpoint(full_run: tuple[Path, Path]) -> None:
    """The endpoint backend samples the served checkpoint with the baseline's settings; the base side is
    the record's (an endpoint serves one model)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sampling"))
    from openai_stub import ChatServer

    brief, run = full_run
    assert run_cli("baseline", str(brief), "--prompts", "3", "--k", "2")[0] == 0
    record = json.loads((brief.parent / "records" / "baseline.json").read_text())
    with ChatServer(run / "model") as server:
        code, out, err = run_cli("eval", str(run), "--endpoint", server.url, "--json")
    assert code == 1, err
    assert json.loads(out)["prompts"] == 3 and json.loads(out)["k"] == 2
    assert len(server.requests) == 3
    req = server.requests[0]
    assert (req["n"], req["temperature"], req["max_tokens"]) == (2, record["sampling"]["temperature"], 8)
    written = json.loads((run / "eval.json").read_text())
    assert written["backend"]["backend"] == "endpoint" and written["baseline"]["base_source"] == "record"
    code, _, err = run_cli("eval", str(run), "--endpoint", server.url, "--checkpoint", "all")
    assert code == 2 and "--endpoint serves one model" in err
