"""`tool_call` against the Berkeley Function Calling Leaderboard's own AST checker, on every entry of the
categories BFCL checks by AST (simple_python, multiple, parallel, parallel_multiple and their live
versions: 2,351 entries) and 27 families of candidate replies built from each entry's possible answer
(bench/_bfcl.py): verdict agreement per family and per category, every difference, and speed.

Each entry's answer is written as `expected_calls` by `llm_finetuning.rewards.tool_call_bfcl` (the
documented way) and scored with its `BFCL_ARGS`. A candidate is rendered twice, as `<tool_call>` text
and as chat messages; both renderings must get the same value from the reward, and the reward's verdict
(value 1.0) is compared with BFCL's (`valid`).

Speed, side by side in the same run, on the same text candidates, in alternating rounds so a slow spell
of the shared machine falls on every path: the reward on the text (a fresh reward each round, so its
schemas are compiled again, and fresh rows: `expected_calls` as the JSON strings the converter writes,
and the same rows parsed into lists); BFCL's checker on already decoded calls; BFCL's decode-and-check
path (its Qwen function-calling handler's `decode_ast` on the same text, then the checker). The garbage
collector is paused while each path is timed, as `timeit` does. Ratios are against BFCL's
decode-and-check path.

    python bench/bfcl_agreement.py [--rounds 3] [--out bench/results/bfcl-agreement.json]

Needs `pip install --no-deps bfcl-eval==2026.3.23` (as .ci/run) and, for the decode path, the imports of
BFCL's handler: `pip install openai overrides tenacity filelock tree_sitter==0.21.3
tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4`.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _bfcl  # bench/ is the script folder, so on sys.path
from sandbox_throughput import machine

from llm_finetuning.rewards.tool_call import ToolCall
from llm_finetuning.rewards.tool_call_bfcl import BFCL_ARGS, expected_calls

CHUNK = 2000  # candidates each path scores in its turn


def verdicts(cands: list[_bfcl.Candidate]) -> tuple[list[bool], list[bool], list[str]]:
    """(BFCL valid, ours valid, our explanation) per candidate; raises if the two renderings differ."""
    valid = _bfcl.checker()
    reward = ToolCall(expected_field="expected_calls", **BFCL_ARGS)
    expected = {c.entry.id: expected_calls(c.entry.functions, c.entry.answer) for c in cands}
    column = [expected[c.entry.id] for c in cands]
    text = reward.explained([""] * len(cands), [_bfcl.as_text(c.calls) for c in cands], expected_calls=column)
    chat = reward.explained([""] * len(cands), [_bfcl.as_messages(c.calls) for c in cands], expected_calls=column)
    split = [c for c, (t, m) in zip(cands, zip(text, chat, strict=True), strict=True) if t[0] != m[0]]
    if split:
        raise AssertionError(f"text and chat renderings scored differently: {split[:3]}")
    return [valid(c.entry, c.calls) for c in cands], [v == 1.0 for v, _ in text], [str(w) for _, w in text]


def _timed(run: Callable[[], object]) -> float:
    """Seconds `run` takes with the cyclic garbage collector paused, as `timeit` does (the candidates make a
    large heap whose collections would land on whichever path happened to allocate at the time)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        run()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def timings(cands: list[_bfcl.Candidate], rounds: int) -> dict[str, Any]:
    valid = _bfcl.checker()
    decode = _bfcl.decoder()
    texts = [_bfcl.as_text(c.calls) for c in cands]
    expected = {c.entry.id: expected_calls(c.entry.functions, c.entry.answer) for c in cands}
    runs: dict[str, list[float]] = {"ours_text": [], "ours_text_list_rows": [], "bfcl_checker": [],
                                    "bfcl_decode_and_check": []}

    def bfcl_decode_and_check(part: slice) -> None:
        assert decode is not None
        for c, text in zip(cands[part], texts[part], strict=True):
            valid(c.entry, [next(iter(d.items())) for d in decode(text)])

    for r in range(rounds):
        # a fresh reward (its schemas compiled again) and fresh rows each round, as a dataset hands them over:
        # the JSON strings the converter writes, and the same rows parsed into lists. The paths take turns
        # chunk by chunk, their order rotating, so a slow spell of the machine falls on all of them.
        strings = [json.dumps(expected[c.entry.id]) for c in cands]
        lists = [copy.deepcopy(expected[c.entry.id]) for c in cands]
        rewards = {k: ToolCall(expected_field="expected_calls", **BFCL_ARGS) for k in ("ours_text", "ours_text_list_rows")}
        spent = dict.fromkeys(runs, 0.0)
        for start in range(0, len(cands), CHUNK):
            part = slice(start, start + CHUNK)
            paths = {
                "ours_text": lambda p=part, rw=rewards, col=strings: rw["ours_text"](texts[p], texts[p],
                                                                                   expected_calls=col[p]),
                "ours_text_list_rows": lambda p=part, rw=rewards, col=lists: rw["ours_text_list_rows"](
                    texts[p], texts[p], expected_calls=col[p]),
                "bfcl_checker": lambda p=part: [valid(c.entry, c.calls) for c in cands[p]],
            }
            if decode is not None:
                paths["bfcl_decode_and_check"] = lambda p=part: bfcl_decode_and_check(p)
            keys = list(paths)
            shift = (start // CHUNK + r) % len(keys)
            for key in keys[shift:] + keys[:shift]:
                spent[key] += _timed(paths[key])
        for key, seconds in spent.items():
            if seconds:
                runs[key].append(seconds)
    per_s = {k: round(len(cands) / statistics.median(v), 1) for k, v in runs.items() if v}
    base = per_s.get("bfcl_decode_and_check")
    return {"candidates_per_s": per_s, "rounds": rounds, "garbage_collector": "paused while timed, for every path",
            "ratio_vs_bfcl_decode_and_check": {k: round(v / base, 2) for k, v in per_s.items()} if base else None,
            "note": None if decode else "BFCL's handler could not be imported: no decode-and-check figure"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "bfcl-agreement.json")
    args = ap.parse_args()
    started = {**machine(), "note": "a shared machine: other processes compete for the cores (see loadavg_at_start)"}
    entries = _bfcl.entries()
    cands = _bfcl.candidates(entries)
    theirs, ours, why = verdicts(cands)
    total: Counter[str] = Counter()
    same: Counter[str] = Counter()
    differences = []
    for c, b, o, w in zip(cands, theirs, ours, why, strict=True):
        for key in (f"family:{c.family}", f"category:{c.entry.category}"):
            total[key] += 1
            same[key] += b == o
        if b != o:
            differences.append({"id": c.entry.id, "family": c.family, "bfcl_valid": b, "ours_valid": o,
                                "calls": c.calls, "ours_explanation": w})
    agreement = {k: {"candidates": total[k], "agree": same[k], "share": round(same[k] / total[k], 5)}
                 for k in sorted(total)}
    speed = timings(cands, args.rounds)
    out = {"bfcl_eval": "2026.3.23", "entries": len(entries), "candidates": len(cands),
           "renderings": ["<tool_call> text", "chat messages (same value required)"],
           "reward_args": {"expected_field": "expected_calls", **BFCL_ARGS},
           "agree": len(cands) - len(differences), "agree_share": round(1 - len(differences) / len(cands), 5),
           "lowest_share": min(a["share"] for a in agreement.values()),
           "agreement": agreement, "differences": differences, "speed": speed, "machine": started}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"{len(entries)} entries, {len(cands)} candidates: {out['agree']} agree ({100 * out['agree_share']:.3f}%), "
          f"lowest family/category {100 * out['lowest_share']:.2f}%; {len(differences)} differences")
    for k, v in speed["candidates_per_s"].items():
        ratio = (speed["ratio_vs_bfcl_decode_and_check"] or {}).get(k)
        print(f"  {k:24s} {v:10.1f} candidates/s" + (f"  ({ratio}x BFCL's decode-and-check)" if ratio else ""))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
