"""A training run leaves the process as it found it: working directory, sys.path, signal handlers, environment,
torch's threads and the run's own modules (`launch.trainer.process_state_for_training`)."""

from __future__ import annotations

import gc
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from launch_cases import copy_model, finetune, make_brief

from llm_finetuning.launch.trainer import STOP_SIGNALS, process_state_for_training


def _process_state() -> dict[str, Any]:
    import torch

    return {"cwd": os.getcwd(), "sys.path": list(sys.path), "environ": dict(os.environ),
            "handlers": {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}, "threads": torch.get_num_threads(),
            "frozen": gc.get_freeze_count(), "rewards_entry": sys.modules.get("rewards_entry")}


def test_every_change_inside_is_undone_on_an_exception(tmp_path: Path) -> None:
    import torch

    run, brief = tmp_path / "brief" / "runs" / "r1", tmp_path / "brief"
    run.mkdir(parents=True)
    (run / "rewards_entry.py").write_text("VALUE = 1\n")
    (brief / "my_tools.py").write_text("VALUE = 2\n")
    (brief / "venv" / "site").mkdir(parents=True)  # a library that only lies inside the brief folder
    (brief / "venv" / "site" / "a_library.py").write_text("VALUE = 3\n")
    elsewhere = type(sys)("rewards_entry")
    elsewhere.__file__ = str(tmp_path / "other" / "rewards_entry.py")  # another run's, imported earlier
    sys.modules["rewards_entry"] = elsewhere
    try:
        before = _process_state()
        with pytest.raises(RuntimeError), process_state_for_training(run.resolve(), brief) as stop:
            assert Path.cwd() == run.resolve() and sys.path[0] == str(run.resolve())
            assert "rewards_entry" not in sys.modules  # set aside: the run imports its own
            sys.path[:0] = [str(brief), str(brief / "venv" / "site")]
            import a_library  # type: ignore[import-not-found]  # noqa: F401
            import my_tools  # type: ignore[import-not-found]  # noqa: F401
            import rewards_entry  # type: ignore[import-not-found]  # noqa: F401

            stop.install()
            os.environ["TENSORBOARD_LOGGING_DIR"] = str(run / "tb")
            os.environ.pop("HOME", None)
            torch.set_num_threads(1)
            gc.freeze()
            raise RuntimeError("the run failed")
        assert _process_state() == before
        assert "my_tools" not in sys.modules and sys.modules["rewards_entry"] is elsewhere
        assert "a_library" in sys.modules
    finally:
        sys.modules.pop("rewards_entry", None)
        sys.modules.pop("a_library", None)


@pytest.mark.slow
def test_a_run_in_process_leaves_the_process_as_it_was(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llm_finetuning.launch import verify_run
    from llm_finetuning.launch.worker import run_worker

    model = copy_model(tiny_model_dir, tmp_path / "tiny")
    brief = make_brief(tmp_path / "b", model, max_steps=1, save_steps=1)
    run = tmp_path / "run"
    assert finetune("render", str(brief), "-o", str(run)).returncode == 0
    verified = verify_run(run)
    before = _process_state()
    assert run_worker(verified, resume=False, extra_args=[], progress=False) == 0
    assert _process_state() == before
    assert (run / "model").is_dir() and (run / "checkpoints" / "checkpoint-1" / "COMPLETE").is_file()
