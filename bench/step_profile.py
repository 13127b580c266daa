"""Where a GRPO step's time goes through `finetune launch`, on one GPU: timed regions of every step.

Each case trains in a fresh process through the real path (`finetune gate`, `finetune render`, then
`verify_run` and `launch.trainer.train`, what `finetune launch` runs in-process on one GPU), with timing
wrappers around TRL's and transformers' own methods. On every other step (the *detailed* steps) each region
is bracketed by `torch.cuda.synchronize()`, so its time is the device work it launched plus its host time;
the steps between are left alone and give the step time undisturbed. Regions (exclusive: a region's time
leaves out the regions inside it):

- `generation`: `model.generate` (prefill and decoding, compiled or eager);
- `prompts and decoding`: the rest of TRL's `_generate` (chat template, tokenising, decoding the text);
- `reference forward`: the no-grad log-prob forward(s) of `_generate_and_score_completions` (the reference
  model, or the adapters disabled for LoRA);
- `rewards`: `_calculate_rewards` (the reward functions, math-verify's worker included);
- `batch preparation`: the rest of `_generate_and_score_completions` (advantages, metric gathers);
- `policy forward`, `loss`, `backward`: `compute_loss`'s forward, the loss around it, `accelerator.backward`;
- `optimizer`: gradient clipping and `optimizer.step`;
- `logging and completion log`: `_maybe_log_save_evaluate` (TRL's metrics, metrics.jsonl, completions.jsonl);
- `rest`: the step's wall time less all of the above (the data loader, the scheduler, `zero_grad`, Python).

The floor is what a step cannot do without: generation + reference forward + policy forward + backward +
optimizer, measured in the same steps; each case reports its median step over that floor.

Disk: each case's run folder is removed once it is measured (--keep-runs keeps them). Full fine-tuning of the
7B shape still did not fit the lent H200's 64 GiB disk (its random model, then the final checkpoint with the
optimizer state): measure 7B with LoRA there.

Models: SmolLM2-135M-Instruct with its real weights (`smollm2-135m-real`, the embedded GGUF; it must be
installed) or models of published shapes with RANDOM weights built on the machine (`smollm2-135m`,
`qwen2.5-1.5b`, `qwen2.5-7b`; random weights never stop early, so every completion runs to 128 tokens).
Random-weight cases and the arithmetic task get SYNTHETIC records written through the records API (the
gate needs a sealed inspection and a nonzero baseline); this measures speed, not learning.

A plan item is TASK:SHAPE:ADAPTER:VARIANT[:STEPS] (STEPS: this case's steps, else --steps). TASK `json` (examples/smollm2-json: its data and reward) or
`arith` (examples/math-exact's additions, `exact_match` with the last number); ADAPTER `full` or `lora`;
VARIANT `CODE-GEN`: CODE `today` (the source tree given by --today-src) or `new` (this tree), GEN `render`
(what the renderer decides), `compiled` or `eager` (decoding forced either way, said in the results), or
VARIANT `trl-defaults`: `trl grpo --config` on the file rendered with `compiled_generation: false`.

    python bench/step_profile.py --plan json:smollm2-135m-real:full:new-render,json:smollm2-135m-real:full:trl-defaults \\
        --today-src .gpu/src-today --out bench/results/step-profile-h200.json
    python bench/step_profile.py --plan json:tiny:full:new-render --steps 4 --out /tmp/p.json   # a CPU smoke run

bench/results/step-profile-h200.json came from three calls on one H200 (--today-src: main's src/ copied beside
this tree; the embedded GGUF was carried in two halves and joined on the machine):

    call1: --plan json:smollm2-135m:full:new-render,json:smollm2-135m:lora:new-compiled,json:qwen2.5-1.5b:full:new-render
    call2: --plan json:smollm2-135m:full:today-render,json:smollm2-135m:full:new-render --compile-cache shared
    call3: --plan arith:smollm2-135m-real:full:today-render,arith:smollm2-135m-real:full:new-render,
                  arith:smollm2-135m-real:lora:new-compiled:8,... --compile-cache shared   (cut by its time limit)
    (all --steps 10), then: python bench/step_profile.py --out bench/results/step-profile-h200.json --ran-today call1 \
        --merge call1.json=call1 call2.json=call2 call3.json=call3 --note call1=... --note call2=... --note call3=...

Later calls were added to the file as they came, each variant named VARIANT@callN (call4 is described in the file):

    call5: --plan json:qwen2.5-1.5b:lora:new-render:8,json:qwen2.5-7b:lora:new-eager:6,json:qwen2.5-7b:lora:new-render:6
           --compile-cache shared     (a fresh machine; LoRA renders compiled decoding)
    call6: --plan json:qwen2.5-1.5b:lora:new-render:4,json:qwen2.5-7b:lora:new-render:4 --steps 4 --warmup 1
           --compile-cache shared     (straight after call5, its inductor cache kept)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.environ.get("STEP_PROFILE_SRC") or str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

TASKS = {"json": "examples/smollm2-json", "arith": "examples/math-exact"}
REGIONS = ("generation", "prompts and decoding", "reference forward", "rewards", "batch preparation",
           "policy forward", "loss", "backward", "optimizer", "logging and completion log", "rest")
FLOOR = ("generation", "reference forward", "policy forward", "backward", "optimizer")
REAL = "smollm2-135m-real"


# --- the timer (runs inside the training process) -------------------------------------------------

class StepTimer:
    """Exclusive time per region per optimizer step. A step ends when `_maybe_log_save_evaluate` returns (the
    log of step N belongs to step N); regions are synchronised only on detailed steps."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.stack: list[list[Any]] = []  # [name, start, time of children, timed]
        self.regions: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.steps: list[dict[str, Any]] = []
        self.detail = True  # step 1 (the compile) is detailed
        self.last: float | None = None
        self.started = time.perf_counter()
        self.train_began: float | None = None
        self.gc_s = 0.0  # garbage collection inside the step (it falls inside whichever region it interrupted)
        self.gc_full = 0
        self._gc_start = 0.0

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_start
            self.gc_full += info.get("generation") == 2

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def names(self) -> list[str]:
        return [entry[0] for entry in self.stack]

    def enter(self, name: str) -> None:
        if self.detail:
            self._sync()
        self.stack.append([name, time.perf_counter(), 0.0, self.detail])

    def exit(self) -> None:
        name, start, children, timed = self.stack.pop()
        if not timed:
            return
        self._sync()
        spent = time.perf_counter() - start
        self.regions[name] += spent - children
        self.calls[name] += 1
        if self.stack:
            self.stack[-1][2] += spent

    @contextmanager
    def region(self, name: str) -> Iterator[None]:
        self.enter(name)
        try:
            yield
        finally:
            self.exit()

    def begin(self) -> None:
        self._sync()
        self.train_began = self.last = time.perf_counter()

    def boundary(self, step: int, extra: dict[str, Any]) -> None:
        if self.steps and step <= self.steps[-1]["step"]:
            return  # the Trainer's last log after the loop: no new step
        self._sync()
        now = time.perf_counter()
        wall = now - (self.last if self.last is not None else now)
        row: dict[str, Any] = {"step": step, "wall_s": round(wall, 4), "detailed": self.detail, **extra,
                               "gc_s": round(self.gc_s, 4), "gc_full_collections": self.gc_full}
        self.gc_s, self.gc_full = 0.0, 0
        if self.detail:
            regions = {k: round(v, 4) for k, v in self.regions.items()}
            regions["rest"] = round(wall - sum(self.regions.values()), 4)
            row["regions"] = regions
            row["calls"] = dict(self.calls)
        self.steps.append(row)
        self.regions.clear()
        self.calls.clear()
        self.last = now
        self.detail = step % 2 == 0  # the next step is detailed when this one was not


def _wrap(owner: Any, attr: str, name: Callable[[StepTimer], str | None], timer: StepTimer) -> None:
    """Time `owner.attr` under the region `name(timer)` (None: pass through, e.g. a call nested in its own)."""
    original = getattr(owner, attr)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        region = name(timer)
        if region is None:
            return original(*args, **kwargs)
        with timer.region(region):
            return original(*args, **kwargs)

    setattr(owner, attr, timed)


def _compiled_graphs() -> int:
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - an older torch without the counter: report none
        return -1


def _allocator() -> dict[str, int]:
    """cudaMalloc calls and allocator retries so far (a step that grows the cache pays for them)."""
    import torch

    if not torch.cuda.is_available():
        return {}
    stats = torch.cuda.memory_stats()
    return {"device_allocs": int(stats.get("num_device_alloc", -1)), "alloc_retries": int(stats.get("num_alloc_retries", -1))}


def install_timer(timer: StepTimer) -> None:
    """Wrap TRL's GRPOTrainer, transformers' generate and accelerate's backward; add the step callback."""
    import gc

    import accelerate
    from transformers import TrainerCallback
    from transformers.generation.utils import GenerationMixin
    from trl import GRPOTrainer


    def fixed(region: str) -> Callable[[StepTimer], str | None]:
        return lambda t: None if region in t.names() else region

    gc.callbacks.append(timer.on_gc)
    _wrap(GenerationMixin, "generate", fixed("generation"), timer)
    _wrap(GRPOTrainer, "_generate", fixed("prompts and decoding"), timer)
    _wrap(GRPOTrainer, "_generate_and_score_completions", fixed("batch preparation"), timer)
    _wrap(GRPOTrainer, "_calculate_rewards", fixed("rewards"), timer)
    _wrap(GRPOTrainer, "_get_per_token_logps_and_entropies",
          lambda t: "policy forward" if "loss" in t.names() else "reference forward", timer)
    _wrap(GRPOTrainer, "compute_loss", fixed("loss"), timer)
    _wrap(GRPOTrainer, "_clip_grad_norm", fixed("optimizer"), timer)
    _wrap(accelerate.Accelerator, "backward", fixed("backward"), timer)

    original_log = GRPOTrainer._maybe_log_save_evaluate

    @functools.wraps(original_log)
    def log_and_close_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        with timer.region("logging and completion log"):
            out = original_log(self, *args, **kwargs)
        timer.boundary(int(self.state.global_step), {"compiled_graphs": _compiled_graphs(), **_allocator()})
        return out

    GRPOTrainer._maybe_log_save_evaluate = log_and_close_step

    class OptimizerStep(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            timer.begin()

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            timer.enter("optimizer")

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            timer.exit()

    from llm_finetuning.launch import callbacks as launch_callbacks

    original_callbacks = launch_callbacks.training_callbacks

    def callbacks(*args: Any, **kwargs: Any) -> list[Any]:
        return [*original_callbacks(*args, **kwargs), OptimizerStep()]

    launch_callbacks.training_callbacks = callbacks  # type: ignore[assignment]


# --- one case (a child process) -------------------------------------------------------------------

def parse_item(item: str) -> dict[str, str]:
    task, shape, adapter, variant, *steps = item.split(":")
    code, _, gen = variant.partition("-") if variant != "trl-defaults" else ("trl", "", "defaults")
    assert task in TASKS and adapter in ("full", "lora") and code in ("today", "new", "trl"), item
    assert gen in ("render", "compiled", "eager", "defaults"), item
    return {"task": task, "shape": shape, "adapter": adapter, "variant": variant, "code": code, "gen": gen,
            "steps": steps[0] if steps else ""}


def write_brief(folder: Path, case: dict[str, str], steps: int, cuda: bool, model_id: str,
                completion_length: int) -> Path:
    data = yaml.safe_load((folder / "brief.yaml").read_text(encoding="utf-8"))
    data["model"] = {"id": model_id, "dtype": "bfloat16" if cuda else "float32", "adapter": case["adapter"]}
    hardware: dict[str, Any] = {"gpus": 1 if cuda else 0, "generation": "transformers"}
    if cuda:
        hardware["gpu_memory_gib"] = 139
    if case["gen"] in ("compiled", "eager", "defaults"):
        hardware["compiled_generation"] = case["gen"] == "compiled"
    data["hardware"] = hardware
    data.pop("held_out_eval", None)
    data["grpo"].pop("deviation", None)  # the recipe's rate needs no justifying run; speed does not depend on it
    data["grpo"].update({"max_steps": steps, "save_steps": 100000, "logging_steps": 1, "learning_rate": 5e-7,
                         "per_device_train_batch_size": 8, "gradient_accumulation_steps": 4, "num_generations": 8,
                         "max_completion_length": completion_length, "temperature": 0.7, "seed": 3407})
    path = folder / "profile.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def case_folder(work: Path, case: dict[str, str]) -> Path:
    return work / f"{case['task']}-{case['shape']}-{case['adapter']}-{case['variant']}"


def prepare(case: dict[str, str], work: Path, steps: int, cuda: bool, completion_length: int) -> tuple[Path, Path]:
    """The case's folder (the task's example, its data, records) and its brief; the random model built once."""
    from _synthetic import build_random_model, synthetic_records

    folder = case_folder(work, case)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(REPO / TASKS[case["task"]], folder,
                    ignore=shutil.ignore_patterns("runs", "evidence", "records", "__pycache__"))
    if case["shape"] == REAL:
        model_id = "embedded:smollm2-135m-instruct"
    else:
        model_dir = work / "models" / case["shape"]
        if not (model_dir / "config.json").is_file():
            shutil.rmtree(model_dir, ignore_errors=True)
            build_random_model(model_dir, case["shape"], "bfloat16" if cuda else None)
            import torch

            if cuda:
                torch.cuda.empty_cache()
        model_id = str(model_dir)
    brief = write_brief(folder, case, steps, cuda, model_id, completion_length)
    answer = (lambda row: str(row["answer"])) if case["task"] == "arith" else None
    synthetic_records(brief, "bench/step_profile.py", *([answer] if answer else []))
    return folder, brief


def render(brief: Path, run_dir: Path, force_compiled: bool) -> None:
    """`finetune render` in this process; `force_compiled` renders compiled decoding whatever the adapter
    (to measure LoRA compiled where the renderer would keep it eager)."""
    import llm_finetuning.render.plan as plan
    from llm_finetuning.cli import cli

    if force_compiled:
        original = plan.compiled_generation
        plan.compiled_generation = lambda topo, hardware, adapter: original(topo, hardware, "full")  # type: ignore[assignment]
    try:
        cli.main(["render", str(brief), "-o", str(run_dir)], standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise


def child(item: str, work: Path, steps: int, out: Path, completion_length: int) -> None:
    import torch

    case = parse_item(item)
    cuda = torch.cuda.is_available()
    timer = StepTimer(cuda)
    folder, brief = prepare(case, work, steps, cuda, completion_length)
    run_dir = folder / "run"
    render(brief, run_dir, force_compiled=case["gen"] == "compiled")
    rendered = yaml.safe_load((run_dir / "grpo_config.yaml").read_text(encoding="utf-8"))
    result: dict[str, Any] = {**case, "cache_implementation": rendered.get("cache_implementation"),
                              "compile_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}
    if case["code"] == "trl":
        result.update(trl_defaults(brief, run_dir))
    else:
        install_timer(timer)
        from llm_finetuning.launch import verify_run
        from llm_finetuning.launch.trainer import train

        run = verify_run(run_dir)
        timer.started = time.perf_counter()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        train(run.run_dir, run.brief, progress=False)
        metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        lengths = {int(r["step"]): r["completions/mean_length"] for r in metrics if "completions/mean_length" in r}
        for row in timer.steps:
            row["completion_mean_length"] = lengths.get(row["step"])
        result.update({"setup_s": round((timer.train_began or timer.started) - timer.started, 1),
                       "steps": timer.steps,
                       "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None})
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def trl_defaults(brief: Path, run_dir: Path) -> dict[str, Any]:
    """`trl grpo --config` on the file rendered with compiled_generation false; seconds per step from the
    arrival of its log lines."""
    from step_speed import timed_run

    from llm_finetuning.brief import load_brief
    from llm_finetuning.models import resolve_model

    loaded, _ = load_brief(brief)
    assert loaded is not None
    model = str(resolve_model(loaded.model, loaded.folder).path)
    env = {**os.environ, "PYTHONPATH": f"{run_dir}:{os.environ.get('PYTHONPATH', '')}"}
    code, wall, stamps = timed_run([sys.executable, "-m", "trl.cli.main", "grpo", "--config", "grpo_config.yaml",
                                    "--model_name_or_path", model], run_dir, env, run_dir / "trl.log")
    log = (run_dir / "trl.log").read_text(errors="replace")
    lengths = [float(m.group(1)) for m in re.finditer(r"'completions/mean_length': '?([0-9.]+)", log)]
    steps = [{"step": i + 1, "wall_s": round(b - a, 4), "detailed": False,
              "completion_mean_length": lengths[i] if i < len(lengths) else None}
             for i, (a, b) in enumerate(zip([0.0, *stamps], stamps, strict=False))]
    return {"exit": code, "wall_s": round(wall, 1), "steps": steps, **({"log_tail": log[-3000:]} if code else {})}


# --- summaries (the parent) -----------------------------------------------------------------------

def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def summarise(raw: dict[str, Any], warmup: int) -> dict[str, Any]:
    """Medians over the steps after `warmup`: the undisturbed steps' wall time, each region over the
    detailed steps, the floor and the step over the floor."""
    steps = raw.get("steps") or []
    # The last step also saves the final checkpoint (the Trainer saves at max_steps): left out, reported apart.
    later = [s for s in steps[:-1] if s["step"] > warmup]
    plain = [s["wall_s"] for s in later if not s["detailed"]]
    detailed = [s for s in later if s["detailed"]]
    out: dict[str, Any] = {"first_step_s": steps[0]["wall_s"] if steps else None,
                           "steps_measured": len(later), "step_s": _median(plain or [s["wall_s"] for s in later]),
                           "step_s_detailed": _median([s["wall_s"] for s in detailed])}
    if detailed:
        out["regions_s"] = {r: _median([s["regions"].get(r, 0.0) for s in detailed]) for r in REGIONS}
        floor = _median([sum(s["regions"].get(r, 0.0) for r in FLOOR) for s in detailed])
        out["floor_s"] = floor
        if floor and out["step_s"]:
            out["step_over_floor"] = round(out["step_s"] / floor, 2)
        graphs = [s.get("compiled_graphs") for s in steps]
        out["compiled_graphs"] = {"after_step_1": graphs[0], "at_end": graphs[-1]}
    timed_gc = [s["gc_s"] for s in later if "gc_s" in s]  # none in results from before the GC timer
    out["gc_s_per_step"] = _median(timed_gc)
    out["gc_s_max"] = max(timed_gc, default=None)
    out["step_s_max"] = max((s["wall_s"] for s in later), default=None)
    out["last_step_with_checkpoint_s"] = steps[-1]["wall_s"] if steps else None
    lengths = [s["completion_mean_length"] for s in later if s.get("completion_mean_length") is not None]
    out["completion_mean_length"] = _median(lengths)
    return out


def machine() -> dict[str, Any]:
    import torch
    import transformers
    import trl
    from _machine import cpu_model

    return {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count(), "cpu": cpu_model()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", help="TASK:SHAPE:ADAPTER:VARIANT,... in the order to run them")
    ap.add_argument("--steps", type=int, default=10, help="optimizer steps per case")
    ap.add_argument("--warmup", type=int, default=2, help="steps left out of the medians (step 1 compiles)")
    ap.add_argument("--completion-length", type=int, default=128)
    ap.add_argument("--today-src", type=Path, help="the source tree of the `today` variants (main's src/)")
    ap.add_argument("--compile-cache", default="fresh",
                    help="'fresh': each case compiles into an empty inductor cache; 'shared': one cache for all")
    ap.add_argument("--work", type=Path, default=Path("/tmp/step-profile"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--merge", nargs="*", default=[], metavar="FILE=LABEL",
                    help="results files of earlier device calls: their cases kept, each variant re-summarised and "
                         "named VARIANT@LABEL (the call it ran in)")
    ap.add_argument("--ran-today", action="append", default=[], metavar="LABEL",
                    help="a merged call whose `new` variants ran today's launch code (no lever yet): named today-*")
    ap.add_argument("--note", action="append", default=[], metavar="LABEL=TEXT", help="what a call's code was")
    ap.add_argument("--keep-runs", action="store_true",
                    help="keep each case's run folder (checkpoints, final model); by default it is removed once measured")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        child(ns.child, ns.work, ns.steps, ns.out, ns.completion_length)
        return 0

    result: dict[str, Any] = {
        "benchmark": "step_profile", "machine": machine(),
        "settings": {"num_generations": 8, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 4,
                     "max_completion_length": ns.completion_length, "steps": ns.steps,
                     "warmup_steps_left_out": ns.warmup, "dtype": "bfloat16", "generation": "transformers"},
        "records": "SYNTHETIC (records API) for every case: a benchmark of speed, not a product run",
        "cases": {}}
    result["calls"] = dict(note.split("=", 1) for note in ns.note)
    for spec in ns.merge:
        path, _, label = spec.partition("=")
        earlier = json.loads(Path(path).read_text(encoding="utf-8"))
        result["machine"] = earlier.get("machine", result["machine"])
        for key, entry in earlier["cases"].items():
            merged = result["cases"].setdefault(key, {**entry, "variants": {}})
            for name, variant in entry["variants"].items():
                if variant.get("raw_steps"):
                    variant = {**variant, **summarise({"steps": variant["raw_steps"]}, ns.warmup)}
                if label in ns.ran_today and name.startswith("new-"):
                    name = "today-" + name.removeprefix("new-")
                merged["variants"][f"{name}@{label}"] = variant
    ns.work.mkdir(parents=True, exist_ok=True)
    ns.out.parent.mkdir(parents=True, exist_ok=True)
    ns.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for item in (ns.plan or "").split(","):
        if not item:
            continue
        case = parse_item(item)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
        if case["code"] == "today":
            assert ns.today_src, "--today-src is needed for `today` variants"
            env["STEP_PROFILE_SRC"] = str(ns.today_src.resolve())
            env["PYTHONPATH"] = f"{ns.today_src.resolve()}:{env.get('PYTHONPATH', '')}"
        cache = ns.work / ("compile-cache" if ns.compile_cache == "shared" else f"compile-cache-{len(result['cases'])}"
                           f"-{time.monotonic_ns()}")
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache))
        env.setdefault("TORCH_LOGS", "recompiles")
        raw_path = ns.work / f"{item.replace(':', '_')}.json"
        raw_path.unlink(missing_ok=True)
        print(f"== {item}", flush=True)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, __file__, "--child", item, "--work", str(ns.work), "--steps",
                               case["steps"] or str(ns.steps), "--completion-length", str(ns.completion_length), "--out", str(raw_path)],
                              env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, errors="replace")
        key = f"{case['task']}/{case['shape']}/{case['adapter']}"
        entry = result["cases"].setdefault(key, {
            "task": TASKS[case["task"]], "adapter": case["adapter"],
            "weights": "real (the embedded GGUF, dequantised)" if case["shape"] == REAL else
            "random, built from the published config on this machine", "variants": {}})
        if proc.returncode or not raw_path.is_file():
            entry["variants"][case["variant"]] = {"exit": proc.returncode, "log_tail": proc.stdout[-4000:]}
            print(proc.stdout[-4000:], flush=True)
        else:
            raw = json.loads(raw_path.read_text(encoding="utf-8"))
            entry["variants"][case["variant"]] = {**{k: raw[k] for k in ("cache_implementation",) if k in raw},
                                                  "process_s": round(time.monotonic() - t0, 1),
                                                  **{k: raw[k] for k in ("setup_s", "peak_allocated_gib", "exit")
                                                     if k in raw},
                                                  **summarise(raw, ns.warmup), "raw_steps": raw["steps"]}
            recompiles = [line[:300] for line in proc.stdout.splitlines() if "ecompil" in line]
            entry["variants"][case["variant"]]["recompile_log"] = recompiles[:12]
            shown = {k: v for k, v in entry["variants"][case["variant"]].items() if k != "raw_steps"}
            print(json.dumps(shown), flush=True)
        ns.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")  # kept as it goes
        if not ns.keep_runs:  # a 7B run's checkpoint and final model alone take most of a 64 GiB disk
            shutil.rmtree(case_folder(ns.work, case) / "run", ignore_errors=True)
    print(table(result), flush=True)
    return 0


def table(result: dict[str, Any]) -> str:
    """A short text table of every case and variant (the device call's last lines)."""
    lines = []
    for key, entry in result["cases"].items():
        for name, v in entry["variants"].items():
            regions = v.get("regions_s") or {}
            shown = " ".join(f"{r.split()[0][:6]}={regions[r]:.3f}" for r in REGIONS if regions.get(r))
            lines.append(f"{key} {name}: step {v.get('step_s')} floor {v.get('floor_s')} x{v.get('step_over_floor')} "
                         f"first {v.get('first_step_s')} | {shown}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
