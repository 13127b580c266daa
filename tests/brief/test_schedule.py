"""The schedule the gate reports and the renderer writes is the one transformers runs, step by step."""

from __future__ import annotations

import pytest

from llm_finetuning.brief.schedule import SCHEDULES, Schedule
from llm_finetuning.gate.checks.recipe_values import schedule_report


@pytest.mark.parametrize("name", SCHEDULES)
@pytest.mark.parametrize("warmup_ratio", [0.0, 0.1, 0.5])
def test_multipliers_match_transformers_schedulers(name: str, warmup_ratio: float) -> None:
    torch = pytest.importorskip("torch")
    from transformers import get_scheduler

    schedule = Schedule.of({"lr_scheduler": name, "warmup_ratio": warmup_ratio, "max_steps": 37, "learning_rate": 1.0})
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scheduler = get_scheduler(schedule.trl_type, optimizer, num_warmup_steps=schedule.warmup_steps,
                              num_training_steps=37)
    seen = []
    for _ in range(37):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert [round(schedule.multiplier(s), 12) for s in range(37)] == [round(x, 12) for x in seen]


def test_the_gate_reports_the_mean_learning_rate_a_run_sees() -> None:
    grpo = {"lr_scheduler": "linear", "warmup_ratio": 0.0, "max_steps": 40, "learning_rate": 3e-5}
    assert schedule_report(Schedule.of(grpo)) == ("schedule linear decay to 0, no warm-up: mean learning rate 1.54e-05 "
                                     "(51% of the peak) over 40 steps")
    grpo.update(lr_scheduler="constant", warmup_ratio=0.1)
    assert schedule_report(Schedule.of(grpo)) == ("schedule constant, 4 warm-up step(s): mean learning rate 2.81e-05 "
                                     "(94% of the peak) over 40 steps")
    grpo.update(warmup_ratio=0.0)
    assert schedule_report(Schedule.of(grpo)) == "schedule constant, no warm-up: mean learning rate 3e-05 over 40 steps"
