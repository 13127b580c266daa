"""Render a passing brief into a run directory: TRL config, accelerate config, launch scripts, manifest.

Pure: Jinja2 (StrictUndefined, autoescape off) over values computed in `plan.py`; every value reaches a
file through a filter (YAML through yaml.safe_dump, shell through shlex.quote, Python through repr),
never as raw text. Output is deterministic: no timestamps, no absolute paths, the brief's sha256 in a
header comment. No torch, transformers, trl or vllm import, so `finetune render` answers fast.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from llm_finetuning import __version__
from llm_finetuning.brief import Brief
from llm_finetuning.errors import Problem, UnusableInput
from llm_finetuning.fileio import atomic_write_text, sha256_bytes, sha256_file
from llm_finetuning.render.manifest import build_manifest
from llm_finetuning.render.plan import (
    MAIN_PROCESS_PORT,
    VLLM_SERVER_GPU_MEMORY_UTILIZATION,
    VLLM_SERVER_PORT,
    RenderError,
    RunPlan,
    build_plan,
)
from llm_finetuning.rundir import (
    ACCELERATE_CONFIG,
    GRPO_CONFIG,
    LAUNCH_SCRIPT,
    MANIFEST,
    REWARDS_ENTRY,
    SBATCH_SCRIPT,
)
from llm_finetuning.rundir.manifest import Manifest, load_manifest, read_manifest, write_manifest

if TYPE_CHECKING:
    import jinja2

__all__ = ["RenderError", "RenderResult", "RunPlan", "build_plan", "render_differences", "render_files", "render_run",
           "to_yaml"]

SERVER_WAIT_S = 900


def to_yaml(value: object) -> str:
    """One YAML value on one line, through yaml.safe_dump (strings quoted whenever YAML needs it)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31, allow_unicode=True, sort_keys=False)
    text = text.strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    elif text.endswith("..."):
        text = text[:-3].rstrip()
    if "\n" in text:
        raise ValueError(f"value does not fit on one YAML line: {value!r}")
    return text


def _comment(value: object) -> str:
    return " ".join(str(value).split())


def _sh_args(args: Sequence[object]) -> str:
    return " ".join(shlex.quote(str(a)) for a in args)


def _env() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("llm_finetuning.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["yaml"] = to_yaml
    env.filters["comment"] = _comment
    env.filters["sh"] = lambda v: shlex.quote(str(v))
    env.filters["sh_args"] = _sh_args
    env.filters["py"] = lambda v: repr(str(v))
    return env


def _serve_args(plan: RunPlan) -> list[str | int | float]:
    args: list[str | int | float] = []
    if plan.model_revision:
        args += ["--revision", plan.model_revision]
    args += ["--tensor_parallel_size", plan.topology.server_gpus, "--gpu_memory_utilization",
             VLLM_SERVER_GPU_MEMORY_UTILIZATION, "--dtype", plan.dtype, "--max_model_len", plan.vllm_max_model_length]
    return args


def render_files(plan: RunPlan) -> dict[str, str]:
    """The rendered files' text by file name (manifest.json excluded)."""
    env = _env()
    context = {
        "plan": plan,
        "topo": plan.topology,
        "version": __version__,
        "server_port": VLLM_SERVER_PORT,
        "server_wait_s": SERVER_WAIT_S,
        "main_process_port": MAIN_PROCESS_PORT,
        "serve_args": _serve_args(plan),
        "specs_json": json.dumps(plan.reward_specs, sort_keys=True, ensure_ascii=False),
    }
    names = [GRPO_CONFIG, ACCELERATE_CONFIG, LAUNCH_SCRIPT, REWARDS_ENTRY]
    if plan.topology.nodes > 1:
        names.append(SBATCH_SCRIPT)
    out = {}
    for name in names:
        text = env.get_template(f"{name}.j2").render(**context)
        out[name] = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    # The file TRL will read must load back to exactly the plan's values.
    if yaml.safe_load(out[GRPO_CONFIG]) != plan.config():
        raise AssertionError("grpo_config.yaml does not load back to the planned values")
    return out


@dataclass
class RenderResult:
    run_dir: Path
    plan: RunPlan
    files: dict[str, str]  # name -> sha256
    manifest: Manifest


def render_run(brief: Brief, run_dir: Path, gate_fingerprint: str, recommend: Mapping[str, object] | None = None,
               record_sha256: dict[str, str | None] | None = None) -> RenderResult:
    """Write the run directory for `brief` (which passed the gate) and its manifest; RenderError if TRL could not run it.

    `gate_fingerprint` and `record_sha256` (each record file's sha256, by key) come from the gate's report, so
    nothing the gate hashed is hashed again; a record left out of `record_sha256` is hashed here."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    plan = build_plan(brief, run_dir, recommend)
    texts = render_files(plan)
    previous = read_manifest(run_dir)
    old = previous.files if previous is not None else {}
    for stale in set(old) - set(texts):
        if "/" not in stale and (run_dir / stale).is_file():
            (run_dir / stale).unlink()
    for name, text in texts.items():
        atomic_write_text(run_dir / name, text, 0o755 if name.endswith(".sh") else 0o644)
    hashes = {name: sha256_file(run_dir / name) for name in sorted(texts)}
    manifest = build_manifest(brief, run_dir, plan, hashes, gate_fingerprint, record_sha256 or {})
    write_manifest(run_dir, manifest)
    return RenderResult(run_dir, plan, hashes, manifest)


def _first_difference(have: str, want: str) -> str:
    """`line 12 is `...`, render writes `...`` for the first line where two texts part."""
    ours, theirs = have.splitlines(), want.splitlines()
    for n, (a, b) in enumerate(zip(ours, theirs, strict=False), 1):
        if a != b:
            return f"line {n} is {_cut(a)}, render writes {_cut(b)}"
    n = min(len(ours), len(theirs)) + 1
    if len(ours) > len(theirs):
        return f"line {n} is {_cut(ours[n - 1])}, where render's file ends"
    if len(ours) < len(theirs):
        return f"it ends before line {n}, where render writes {_cut(theirs[n - 1])}"
    return "their line endings or final newline differ"


def _cut(line: str, width: int = 100) -> str:
    line = line.strip()
    return repr(line[:width] + ("..." if len(line) > width else ""))


def render_differences(brief: Brief, run_dir: Path, gate_fingerprint: str,
                       recommend: Mapping[str, object] | None = None,
                       record_sha256: dict[str, str | None] | None = None) -> list[Problem]:
    """Render `brief` again in memory, exactly as `finetune render` would into `run_dir`, and name every file
    of the run directory (manifest.json included) that differs: a Problem `rendered_differs` per file, with
    the first line (or manifest key) that differs. Rendering is deterministic, so an untouched run has none."""
    run_dir = Path(run_dir)
    rerender = "run `finetune render BRIEF -o RUN_DIR` again; rendered files are never edited by hand"
    try:
        plan = build_plan(brief, run_dir, recommend)
        texts = render_files(plan)
    except RenderError as exc:
        return exc.problems
    problems = []
    for name, text in sorted(texts.items()):
        try:
            have = (run_dir / name).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem("rendered_differs", name, f"cannot be read as the rendered text ({exc}).", rerender))
            continue
        if have != text:
            problems.append(Problem("rendered_differs", name, "differs from what `finetune render` makes of the brief "
                                    f"and its records now: {_first_difference(have, text)}.", rerender))
    hashes = {name: sha256_bytes(text.encode("utf-8")) for name, text in sorted(texts.items())}
    want = build_manifest(brief, run_dir, plan, hashes, gate_fingerprint, record_sha256 or {})
    try:
        have_manifest = load_manifest(run_dir)
    except UnusableInput as exc:
        return [*problems, Problem("rendered_differs", MANIFEST, exc.message, rerender)]
    want_json, have_json = want.to_json(), have_manifest.to_json()
    keys = sorted(k for k in set(want_json) | set(have_json) if want_json.get(k) != have_json.get(k))
    have_files = have_manifest.files
    if "files" in keys and set(have_files) == set(hashes) and {
            n for n in hashes if have_files[n] != hashes[n]} <= {p.path for p in problems}:
        keys.remove("files")  # only the hashes of files named above differ
    if keys:
        problems.append(Problem("rendered_differs", MANIFEST, "differs from the manifest `finetune render` writes for "
                                f"the brief and its records now, in {', '.join(keys)}.", rerender))
    return problems
