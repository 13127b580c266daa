"""Sampling, `finetune baseline` and `finetune inspect` on the tiny random model (real generation, CPU)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_finetuning.cli import cli
from llm_finetuning.sampling.factory import vllm_installed

from .conftest import load
from .openai_stub import ChatServer


def test_transformers_sampling_is_seeded_and_flags_truncation(tiny_person_brief: Path) -> None:
    from llm_finetuning.sampling.run import sample_brief

    brief = load(tiny_person_brief)
    a = sample_brief(brief, n_prompts=3, k=2, backend="transformers")
    b = sample_brief(brief, n_prompts=3, k=2, backend="transformers")
    c = sample_brief(brief, n_prompts=3, k=2, backend="transformers", seed_offset=1)
    texts = [[x.text for x in p.completions] for p in a.prompts]
    assert texts == [[x.text for x in p.completions] for p in b.prompts]
    assert texts != [[x.text for x in p.completions] for p in c.prompts]
    assert a.backend["backend"] == "transformers" and a.backend["device"] == "cpu"
    assert a.model_identity.startswith("local:model@sha256:")
    for p in a.prompts:
        assert [x.sample_index for x in p.completions] == [0, 1]
        for x in p.completions:  # cut exactly when it ran to the limit without EOS
            assert x.truncated == (x.num_tokens == 8)
            assert 1 <= x.num_tokens <= 8


def test_baseline_through_an_openai_compatible_endpoint(tiny_person_brief: Path, tiny_model_dir: Path) -> None:
    from llm_finetuning.records.baseline import load_baseline

    with ChatServer(tiny_model_dir) as server:
        result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--k", "2",
                                          "--endpoint", server.url + "/v1/"])
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 3
    req = server.requests[0]
    assert (req["model"], req["n"], req["temperature"], req["max_tokens"]) == ("tiny", 2, 0.7, 8)
    assert sorted(r["seed"] for r in server.requests) == sorted(3407 + i for i in range(3))
    record = load_baseline(tiny_person_brief.parent / "records/baseline.json")
    raw = json.loads((tiny_person_brief.parent / "records/baseline.json").read_text())
    assert record.sampling is not None and record.sampling.backend == "endpoint"
    assert raw["sampling"]["served_model"] == "tiny"
    assert record.k == 2 and record.prompts.count == 3
    assert record.frac_truncated > 0  # a random model rarely says EOS within 8 tokens: finish_reason length


def test_endpoint_down_is_unusable_input(tiny_person_brief: Path) -> None:
    result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--endpoint", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "cannot be reached" in result.output and "trl vllm-serve" in result.output


@pytest.mark.skipif(vllm_installed(), reason="vLLM is installed here")
def test_vllm_backend_refused_where_vllm_is_absent(tiny_person_brief: Path) -> None:
    result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--backend", "vllm"])
    assert result.exit_code == 2
    assert "vLLM is not installed" in result.output and "--backend transformers" in result.output


def test_baseline_record_verifies(tiny_person_brief: Path) -> None:
    from llm_finetuning.models import model_identity
    from llm_finetuning.records.baseline import verify_baseline

    result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "4", "--k", "2", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["format"] == "llm-finetuning/baseline@1"
    assert out["prompts"]["split"] == "eval" and len(out["prompts"]["indices"]) == 4
    assert out["verdict"]["signal"] is False  # a random model never writes the JSON
    assert "SFT first" in " ".join(out["verdict"]["advice"])
    assert "Baseline" in result.stderr and "prompts 4/4" in result.stderr  # the progress bar
    brief = load(tiny_person_brief)
    assert verify_baseline(brief, Path(out["path"]), model_identity(brief.model, brief.folder))[1] == []
    sampling = out["sampling"]  # the settings the figures were measured under
    assert (sampling["max_completion_length"], sampling["temperature"], sampling["top_p"]) == (8, 0.7, 1.0)
    assert sampling["system_prompt"] == brief.data.system_prompt
    assert sampling["chat_template"]["applied"] is True and len(sampling["chat_template"]["sha256"]) == 64
    assert len(out["per_prompt"]) == 4 and all(0 <= s <= 2 for s in out["per_prompt"])


def test_gate_warns_when_the_brief_leaves_the_baselines_settings(tiny_person_brief: Path) -> None:
    """Issue 22 item 4: a baseline at 8 tokens, then the brief raised to 16: the gate names the difference."""
    result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "2", "--k", "2"])
    assert result.exit_code == 0, result.output
    text = tiny_person_brief.read_text()
    tiny_person_brief.write_text(text.replace("max_completion_length: 8", "max_completion_length: 16"))
    gate = CliRunner().invoke(cli, ["gate", str(tiny_person_brief), "--json"])
    checks = json.loads(gate.stdout)["checks"]
    warned = [c for c in checks if c["id"] == "base_success_nonzero" and c["verdict"] == "warn"]
    assert [c["path"] for c in warned] == ["grpo.max_completion_length", "grpo.num_generations"]
    assert "measured with max_completion_length 8; the brief now sets grpo.max_completion_length 16" \
        in warned[0]["reason"]
    assert "measured with k 2; the brief now sets grpo.num_generations" in warned[1]["reason"]
    assert all("finetune baseline" in c["fix"] for c in warned)


def test_baseline_at_an_evaluation_temperature_keeps_the_training_record(tiny_person_brief: Path) -> None:
    """Issue 20 item 3: `--temperature T` measures into a second record; records.baseline stays the training one."""
    records = tiny_person_brief.parent / "records"
    assert CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--k", "2"]).exit_code == 0
    training = json.loads((records / "baseline.json").read_text())
    result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--k", "2",
                                      "--temperature", "1.3", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["path"] == str(records / "baseline.t1.3.json")
    assert (out["sampling"]["temperature"], out["sampling"]["greedy"], out["sampling"]["purpose"]) == (1.3, False,
                                                                                                      "evaluation")
    assert "verdict" not in out  # the learning-signal verdict speaks of training's groups only
    assert out["prompts"]["indices"] == training["prompts"]["indices"]  # the same prompts, paired
    assert json.loads((records / "baseline.json").read_text()) == training  # untouched
    assert (training["sampling"]["temperature"], training["sampling"]["purpose"]) == (0.7, "training")
    human = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--k", "2",
                                     "--temperature", "1.3"])
    assert "x 2 completions, temperature 1.3 (transformers" in human.stdout
    assert "`finetune eval RUN_DIR --temperature 1.3` compares with these figures; the gate judges" in human.stdout
    same = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--k", "2",
                                    "--temperature", "0.7", "--json"])  # the training temperature itself
    assert json.loads(same.stdout)["path"] == str(records / "baseline.json")


def test_greedy_baseline_is_one_completion_whatever_the_seed(tiny_person_brief: Path) -> None:
    from llm_finetuning.records.baseline import Decoding
    from llm_finetuning.sampling.run import sample_brief, settings_from_brief

    brief = load(tiny_person_brief)
    greedy = settings_from_brief(brief, 1, decoding=Decoding(0.0, greedy=True))
    runs = [sample_brief(brief, n_prompts=3, k=1, backend="transformers",
                         settings=settings_from_brief(brief, 1, seed_offset=o, decoding=Decoding(0.0, greedy=True)))
            for o in (0, 1)]
    texts = [[c.text for p in r.prompts for c in p.completions] for r in runs]
    assert texts[0] == texts[1]  # no sampling: the seed changes nothing
    sampled = [sample_brief(brief, n_prompts=3, k=1, backend="transformers", seed_offset=o) for o in (0, 1)]
    assert [c.text for p in sampled[0].prompts for c in p.completions] != \
        [c.text for p in sampled[1].prompts for c in p.completions]
    assert greedy.greedy and greedy.k == 1
    result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--greedy", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["path"] == str(tiny_person_brief.parent / "records" / "baseline.greedy.json")
    assert out["k"] == 1 and (out["sampling"]["greedy"], out["sampling"]["temperature"]) == (True, 0.0)
    human = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "3", "--greedy"]).stdout
    assert "x 1 completions, greedy (transformers" in human and human.count("pass@1 ") == 1
    refused = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--greedy", "--k", "4"])
    assert refused.exit_code == 2 and "greedy decoding gives the same completion every time" in refused.output
    both = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--greedy", "--temperature", "0.5"])
    assert both.exit_code == 2 and "--temperature and --greedy both given" in both.output


def test_a_baseline_at_an_evaluation_setting_alone_does_not_pass_the_gate(tiny_person_brief: Path) -> None:
    assert CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "2", "--greedy"]).exit_code == 0
    gate = CliRunner().invoke(cli, ["gate", str(tiny_person_brief), "--json"])
    assert gate.exit_code == 1
    [check] = [c for c in json.loads(gate.stdout)["checks"] if c["id"] == "base_success_nonzero"]
    assert check["verdict"] == "fail"
    assert "no baseline record at" in check["reason"] and "baseline.greedy.json beside it measure evaluation " \
        "settings, not the training temperature the gate judges" in check["reason"]
    assert check["fix"] == f"run `finetune baseline {tiny_person_brief}`"


def test_greedy_through_an_endpoint_asks_for_temperature_0(tiny_person_brief: Path, tiny_model_dir: Path) -> None:
    with ChatServer(tiny_model_dir) as server:
        result = CliRunner().invoke(cli, ["baseline", str(tiny_person_brief), "--prompts", "2", "--greedy",
                                          "--endpoint", server.url])
    assert result.exit_code == 0, result.output
    assert [(r["n"], r["temperature"], r["top_p"]) for r in server.requests] == [(1, 0.0, 1.0)] * 2


def _png_is_blank(png: bytes) -> bool:
    """True when every byte of the decoded image rows (filter bytes aside) is the same."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data, width, channels = 8, b"", 0, 4
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        chunk = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width = struct.unpack(">I", chunk[:4])[0]
            channels = {2: 3, 6: 4, 0: 1, 4: 2}.get(chunk[9], 4)
        elif kind == b"IDAT":
            data += chunk
        pos += 12 + length
    raw = zlib.decompress(data)
    stride = width * channels + 1
    pixels = b"".join(raw[i + 1:i + stride] for i in range(0, len(raw), stride))
    return len(set(pixels)) <= 1


def test_inspect_writes_record_and_a_report_that_renders(tiny_person_brief: Path, tmp_path: Path) -> None:
    from llm_finetuning.records.inspection import load_inspection, load_samples, verify_inspection

    result = CliRunner().invoke(cli, ["inspect", str(tiny_person_brief), "--samples", "50", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["samples"] == 50 and out["prompts"] == 50
    record = load_inspection(Path(out["record"]))
    samples = load_samples(Path(out["record"]))
    assert len(record["samples"]) == 50 and record["review"] is None
    assert all(set(s["rewards"]) == {"json_schema"} and "schema" in s["reference"] for s in samples)
    brief = load(tiny_person_brief)
    kinds = {p.id for p in verify_inspection(brief, Path(out["record"]), record["bindings"]["model"]["identity"])[1]}
    assert kinds == {"incomplete", "unsealed"}  # all that is missing is the person's review
    md = Path(out["report_md"]).read_text()
    assert md.count("\n## ") == 50 and "finetune review" in md
    # Each sample carries the reward's explanation of its value, in the samples file and beside the value.
    for s in samples:
        why = s["explanations"]["json_schema"]
        assert why.startswith(("the completion is ", "the last fenced block is ", "schema error at $")), why
        assert f"| `json_schema` | {s['rewards']['json_schema']:g} | " in md
    assert md.count("| reward | value | why |") == 50

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    url = Path(out["report_html"]).resolve().as_uri()
    dom = subprocess.run([*flags, f"--user-data-dir={tmp_path / 'c1'}", "--dump-dom", url], capture_output=True,
                         text=True, timeout=120).stdout
    assert dom.count('<section class="sample ') == 50
    assert "<title>Reward inspection: 50 samples (json-person)</title>" in dom
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--user-data-dir={tmp_path / 'c2'}", f"--screenshot={shot}",
                    "--window-size=1200,3000", url], capture_output=True, timeout=120, check=True)
    assert not _png_is_blank(shot.read_bytes())
