"""The estimator's arithmetic: each setting moves memory the way the mechanism says, advice is checked."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

from llm_finetuning.brief import load_brief
from llm_finetuning.memory import Settings, estimate, estimate_brief
from llm_finetuning.memory.estimator import GIB, lora_params
from llm_finetuning.memory.shapes import lookup

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
S7 = lookup("Qwen/Qwen2.5-7B-Instruct")
BASE = Settings(gpu_memory_gib=141, generation="transformers", beta=0.04, gradient_accumulation_steps=1,
                max_completion_length=256, prompt_tokens=256)


def total(**changes: object) -> float:
    assert S7 is not None
    return estimate(S7, replace(BASE, **changes)).total_gib


def test_weights_scale_with_dtype_and_the_reference_model() -> None:
    assert S7 is not None
    est = estimate(S7, BASE)
    assert est.components["policy_weights"] == S7.params() * 2 / GIB
    assert est.components["reference_weights"] == est.components["policy_weights"]
    assert est.components["optimizer_state"] == 2 * est.components["policy_weights"]  # bf16 m and v
    assert "reference_weights" not in estimate(S7, replace(BASE, beta=0.0)).components
    assert "reference_weights" not in estimate(S7, replace(BASE, adapter="lora")).components
    assert total(dtype="float32") > 1.9 * total()


def test_each_saving_tactic_saves() -> None:
    assert total(adapter="lora") < total() / 2
    assert total(adapter="qlora") < total(adapter="lora")
    assert total(gradient_checkpointing=False) > total()
    assert total(beta=0.0) < total()
    assert total(gpus=4, distributed="zero3") < total(gpus=4, distributed="zero2") < total(gpus=4, distributed="ddp")
    assert total(gpus=8, distributed="zero3") < total(gpus=4, distributed="zero3")


def test_lora_parameter_count_matches_peft_all_linear() -> None:
    # Qwen2.5-0.5B, r=16 on q,k,v,o,gate,up,down: PEFT reports 8,798,208 trainable parameters
    shape = lookup("Qwen/Qwen2.5-0.5B-Instruct")
    assert shape is not None
    assert lora_params(shape, 16) == 8_798_208


def test_sleep_mode_frees_the_vllm_share_during_training() -> None:
    colocate = replace(BASE, generation="vllm-colocate", gpu_memory_gib=80, vllm_gpu_memory_utilization=0.3)
    assert S7 is not None
    awake = estimate(S7, replace(colocate, vllm_enable_sleep_mode=False))
    asleep = estimate(S7, replace(colocate, vllm_enable_sleep_mode=True))
    share = 0.3 * 80
    assert awake.phases["train"] - asleep.phases["train"] > share - 1.5
    # asleep, the peak moves to generation: the resident training state plus the whole vLLM share
    assert asleep.peak_phase == "generation" and asleep.components["vllm"] == share


def test_advice_is_cheapest_first_and_every_item_fits() -> None:
    assert S7 is not None
    est = estimate(S7, replace(BASE, dtype="float32"))
    assert not est.fits and est.advice
    assert est.advice[0].startswith("load the model in bfloat16")
    for line in est.advice:
        peak = float(line.rsplit(": ", 1)[1].split(" GiB")[0])
        assert peak <= BASE.gpu_memory_gib


def test_colocate_chooses_share_and_sleep_mode() -> None:
    assert S7 is not None
    est = estimate(S7, replace(BASE, generation="vllm-colocate", gpu_memory_gib=80,
                                vllm_gpu_memory_utilization=None, vllm_enable_sleep_mode=None))
    rec = est.recommend
    assert 0.1 <= rec["vllm_gpu_memory_utilization"] <= 0.9
    assert rec["vllm_enable_sleep_mode"] is True  # 7B full bf16 does not fit 80 GiB beside an awake vLLM


def test_several_gpus_choose_the_cheapest_sharding_that_fits() -> None:
    assert S7 is not None
    est = estimate(S7, replace(BASE, gpus=4, gpu_memory_gib=48, distributed="auto"))
    assert est.recommend["distributed"] in ("zero2", "zero3") and est.fits


def test_estimate_brief_on_the_examples() -> None:
    for name in ("math-exact", "json-person"):
        brief, errors = load_brief(EXAMPLES / name / "brief.yaml")
        assert brief is not None and not errors
        est = estimate_brief(brief)
        data = est.to_json()
        assert {"total_gib", "fits", "components", "gpu_memory_gib", "recommend", "advice"} <= set(data)
        assert abs(sum(data["components"].values()) - data["total_gib"]) < 0.05
        assert est.fits  # small models on an 80 GiB card


def test_the_named_components_add_up_to_the_peak_phase() -> None:
    # every byte of the peak phase is in exactly one named component, whatever the settings
    assert S7 is not None
    for adapter, dtype, generation, gc, gpus, distributed in itertools.product(
            ("full", "lora", "qlora"), ("bfloat16", "float32"), ("transformers", "vllm-colocate", "vllm-server"),
            (True, False), (1, 4), ("auto", "zero2", "zero3", "fsdp2")):
        est = estimate(S7, replace(BASE, adapter=adapter, dtype=dtype, generation=generation,
                                   gradient_checkpointing=gc, gpus=gpus, distributed=distributed))
        assert math.isclose(sum(est.components.values()), est.phases[est.peak_phase], rel_tol=1e-9), est.settings
        assert math.isclose(est.total_gib, est.phases[est.peak_phase], rel_tol=1e-9), est.settings
        assert ("generation_kv_cache" in est.components) == (generation == "transformers"
                                                             and est.peak_phase == "generation")
        assert (est.vllm_server_gib is not None) == (generation == "vllm-server")
        assert ("adapter_weights" in est.components) == (adapter != "full")
        assert ("autocast_weight_copies" in est.components) == (dtype == "float32")
