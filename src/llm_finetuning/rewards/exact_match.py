"""`exact_match`: 1.0 when the completion's final answer equals the reference answer, else 0.0.

The answer is extracted from the completion outside any think block (the last `\\boxed{}`/`\\fbox{}`,
the `####` answer, the last number, or a regex), then compared with the reference: first as
normalised strings and exact fractions, then through math-verify (gold first, prediction second) in a
worker process with its own wall-clock timeout. A substring is never a match: the whole extracted answer
has to equal the reference. Rows whose reference is missing score None (the reward does not apply).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from fractions import Fraction
from typing import TypedDict

from llm_finetuning.jsonvalue import JsonValue
from llm_finetuning.locations import isolated_python
from llm_finetuning.reward_registry import arg_default
from llm_finetuning.rewards._mathverify_worker import Request
from llm_finetuning.rewards._text import (
    Completion,
    Prompt,
    column_values,
    completion_text,
    prompt_text,
    remove_echo,
    strip_think,
)
from llm_finetuning.rewards.explain import quoted

_FN = "exact_match"


class ExactMatchDefaults(TypedDict):
    """The defaults of exact_match's args, as the registry's schema holds them (the one source of them)."""

    answer_field: str
    extract: str
    math_verify: bool
    timeout_s: float


_DEFAULTS = ExactMatchDefaults(
    answer_field=arg_default(_FN, "answer_field", str),
    extract=arg_default(_FN, "extract", str),
    math_verify=arg_default(_FN, "math_verify", bool),
    timeout_s=arg_default(_FN, "timeout_s", float),
)

log = logging.getLogger(__name__)

EXTRACT_MODES = ("auto", "boxed", "hash", "last_number")
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_BARE = re.compile(r"\\boxed +([^\s${}]+)")
_HASH = re.compile(r"####[ \t]*([^\n]*)")
_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+(?:\.\d+)?)?|-?\.\d+")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_FRAC = re.compile(r"^\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}$|^\\[dt]?frac(\d)(\d)$")
_UNIT_TAIL = re.compile(r"^(-?[\d.,/]+)\s*(?:[a-z]+\.?(?:\s+[a-z]+\.?)?|\^\\circ|°)$")


# ---------------------------------------------------------------------------------------------------
# Extraction

def _brace_pairs(text: str) -> dict[int, int]:
    """Index of each opening brace -> index of its closing brace, in one pass (escaped braces skipped).

    One pass, so degenerate output (thousands of unclosed `\\boxed{`) costs linear time, not quadratic.
    """
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def extract_boxed(text: str) -> str | None:
    """Content of the last top-level `\\boxed{...}` or `\\fbox{...}` (braces matched), or None."""
    pairs = _brace_pairs(text)
    spans: list[tuple[int, int, int]] = []  # (start of the command, start of the content, closing brace)
    for m in _BOX_START.finditer(text):
        end = pairs.get(m.end() - 1)
        if end is not None:
            spans.append((m.start(), m.end(), end))
    for m in _BOX_BARE.finditer(text):
        spans.append((m.start(), m.start(1), m.end()))
    # Matched braces nest or are disjoint: a span is top-level when it starts after every earlier one ends.
    last: tuple[int, int, int] | None = None
    reach = -1
    for span in sorted(spans):
        if span[0] > reach:
            last = span
        reach = max(reach, span[2])
    if last is None:
        return None
    start, end = last[1], last[2]
    while True:  # a box that holds only a box is unwrapped: \boxed{\boxed{5}} is 5
        i = start
        while i < end and text[i].isspace():
            i += 1
        box = _BOX_START.match(text, i)
        close = pairs.get(box.end() - 1) if box and box.end() <= end else None
        if box is None or close is None or text[close + 1: end].strip():
            break
        start, end = box.end(), close
    return text[start:end].strip()


def extract_hash(text: str) -> str | None:
    """The rest of the line after the last `####`, or None."""
    found = _HASH.findall(text)
    if not found:
        return None
    answer = found[-1].strip().rstrip(".").strip()
    return answer or None


def extract_last_number(text: str) -> str | None:
    """The last number in the text (integers, decimals, thousands separators, simple a/b), or None."""
    last = None
    for m in _NUMBER.finditer(text):
        value = m.group(0)
        # A minus sign right after a digit, letter or bracket is subtraction, not a sign.
        if value.startswith("-") and m.start() > 0 and (text[m.start() - 1].isalnum() or text[m.start() - 1] in ")]}"):
            value = value[1:]
        # Part of a longer token such as x2 or v1.2.3: not a standalone number.
        if m.start() > 0 and (text[m.start() - 1].isalpha() or text[m.start() - 1] == "_"):
            continue
        last = value
    return last


def extract_answer(text: str, mode: str, pattern: re.Pattern[str] | None = None) -> str | None:
    """The answer the completion commits to under `mode`, or None when it gives none."""
    return extract_answer_how(text, mode, pattern)[0]


def _extract_regex(text: str, pattern: re.Pattern[str] | None) -> str | None:
    assert pattern is not None
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    value = m.group(1) if pattern.groups else m.group(0)
    return value.strip() if value is not None and value.strip() else None


_EXTRACTORS = {"boxed": extract_boxed, "hash": extract_hash, "last_number": extract_last_number}


def extract_answer_how(text: str, mode: str, pattern: re.Pattern[str] | None = None) -> tuple[str | None, str]:
    """(the answer under `mode`, the extraction that found it: boxed, hash, last_number or regex).

    With `auto` the method is the first of boxed, hash, last_number that finds an answer (`auto` when
    none does); otherwise it is `mode` itself.
    """
    if mode == "regex":
        return _extract_regex(text, pattern), "regex"
    if mode in _EXTRACTORS:
        return _EXTRACTORS[mode](text), mode
    for name, extract in _EXTRACTORS.items():  # auto
        answer = extract(text)
        if answer is not None:
            return answer, name
    return None, "auto"


def reference_answer(gold: object) -> str | None:
    """The reference as a string; a full worked solution is reduced to its `####` or boxed answer."""
    if gold is None or isinstance(gold, bool):
        return None if gold is None else str(gold).lower()
    if isinstance(gold, float) and gold.is_integer():
        gold = int(gold)
    text = str(gold).strip()
    if not text:
        return None
    if "####" in text:
        return extract_hash(text) or text
    if _BOX_START.search(text):
        return extract_boxed(text) or text
    return text


# ---------------------------------------------------------------------------------------------------
# Comparison

def _as_fraction(s: str) -> Fraction | None:
    m = _FRAC.match(s)
    if m:
        num, den = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
        return Fraction(int(num), int(den)) if int(den) != 0 else None
    if re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)(/-?(\d+(\.\d*)?|\.\d+))?", s):
        try:
            return Fraction(s)
        except (ValueError, ZeroDivisionError):
            return None
    return None


def normalise(answer: str) -> str:
    """A canonical string for the plain comparison: LaTeX spacing, units, separators and case removed."""
    s = answer.strip()
    boxed = extract_boxed(s)
    if boxed is not None and _BOX_START.match(s):
        s = boxed
    s = s.strip().strip("$").strip()
    for wrap in (("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(wrap[0]) and s.endswith(wrap[1]):
            s = s[2:-2].strip()
    s = re.sub(r"\\left|\\right|\\[!,;: ]|~", "", s)
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "")
    # \text{ cm} after a number is a unit; elsewhere keep the words.
    s = _TEXT_CMD.sub(lambda m: " " + m.group(1) + " ", s)
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    s = " ".join(s.split()).lower().rstrip(".").strip()
    unit = _UNIT_TAIL.match(s)
    if unit:
        s = unit.group(1)
    s = s.replace(" ", "")
    value = _as_fraction(s)
    if value is not None:
        return str(value)
    return s


def plain_equal(gold: str, pred: str) -> bool:
    return normalise(gold) == normalise(pred)


class MathVerifyWorker:
    """A long-lived child process running math-verify, killed and restarted when a comparison times out."""

    def __init__(self, start_timeout_s: float = 120.0) -> None:
        self.start_timeout_s = start_timeout_s
        self.available: bool | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._next_id = 0
        self._lock = threading.Lock()

    def _start(self) -> None:
        self._proc = subprocess.Popen(
            isolated_python("llm_finetuning.rewards._mathverify_worker"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._buf = b""
        hello = self._read_line(self.start_timeout_s)
        if hello is None:
            self.close()
            raise RuntimeError("the math-verify worker did not start in time")
        greeting: JsonValue = json.loads(hello)
        self.available = isinstance(greeting, dict) and bool(greeting.get("math_verify"))
        if not self.available:
            log.warning("math-verify is not installed; exact_match compares normalised strings and fractions only "
                        "(pip install math-verify)")

    def _read_line(self, timeout_s: float) -> bytes | None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def compare(self, gold: str, pred: str, timeout_s: float) -> bool | None:
        """True/False, or None when the comparison ran past `timeout_s` (the worker is then killed)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            if not self.available:
                return plain_equal(gold, pred)
            assert self._proc is not None and self._proc.stdin is not None
            self._next_id += 1
            req: Request = {"id": self._next_id, "gold": gold, "pred": pred, "timeout_s": timeout_s}
            try:
                self._proc.stdin.write((json.dumps(req) + "\n").encode())
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self.close()
                return None
            while True:
                line = self._read_line(timeout_s)
                if line is None:
                    self.close()
                    return None
                out: JsonValue = json.loads(line)
                if isinstance(out, dict) and out.get("id") == self._next_id:
                    break
            if "error" in out:
                log.debug("math-verify failed on %r vs %r: %s", gold, pred, out["error"])
                return False
            return bool(out["equal"])

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


# ---------------------------------------------------------------------------------------------------
# The reward

_METHOD = {"boxed": "the last \\boxed{}", "hash": "the #### answer", "last_number": "the last number",
           "regex": "the regex"}
_NOT_FOUND = {"auto": "no \\boxed{}, no ####, no number", "boxed": "no \\boxed{}", "hash": "no ####",
              "last_number": "no number", "regex": "the regex did not match"}

class ExactMatch:
    """Reward 1.0 when the final answer equals `columns[answer_field]`, 0.0 when not, None without a reference."""

    def __init__(self, answer_field: str = _DEFAULTS["answer_field"],
                 extract: str = _DEFAULTS["extract"],
                 math_verify: bool = _DEFAULTS["math_verify"],
                 timeout_s: float = _DEFAULTS["timeout_s"],
                 name: str = "exact_match") -> None:
        self.__name__ = name
        self.answer_field = answer_field
        self.math_verify = math_verify
        self.timeout_s = float(timeout_s)
        self.pattern: re.Pattern[str] | None = None
        if extract.startswith("regex:"):
            try:
                self.pattern = re.compile(extract[len("regex:"):])
            except re.error as exc:
                raise ValueError(f"extract {extract!r} is not a valid regular expression: {exc}") from None
            self.mode = "regex"
        elif extract in EXTRACT_MODES:
            self.mode = extract
        else:
            raise ValueError(f"extract {extract!r}: use auto, boxed, hash, last_number or regex:<pattern>")
        self.extract = extract
        self.stats = {"scored": 0, "no_answer": 0, "no_reference": 0, "timeouts": 0}
        self._worker: MathVerifyWorker | None = None

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_worker"] = None
        return state

    def answer_of(self, completion: Completion, prompt: Prompt | None = None) -> str | None:
        """The extracted answer of one completion (think blocks and echoed prompt removed)."""
        return self.answer_and_method(completion, prompt)[0]

    def answer_and_method(self, completion: Completion, prompt: Prompt | None = None) -> tuple[str | None, str]:
        """(the extracted answer, the extraction that found it); see `extract_answer_how`."""
        text = strip_think(completion_text(completion))
        if prompt is not None:
            text = remove_echo(text, prompt_text(prompt))
        return extract_answer_how(text, self.mode, self.pattern)

    def equal(self, gold: str, pred: str) -> bool:
        return self.compare(gold, pred)[0]

    def compare(self, gold: str, pred: str) -> tuple[bool, str]:
        """(equal, how it was decided: `normalised`, `math-verify`, `math-verify timed out` or `plain`)."""
        if plain_equal(gold, pred):
            return True, "normalised"
        if not self.math_verify:
            return False, "plain"
        if self._worker is None:
            self._worker = MathVerifyWorker()
        result = self._worker.compare(gold, pred, self.timeout_s)
        if result is None:
            self.stats["timeouts"] += 1
            log.warning("%s: math-verify ran past %.1f s on %r vs %r; scored 0", self.__name__,
                        self.timeout_s, gold[:80], pred[:80])
            return False, f"math-verify timed out after {self.timeout_s:g} s"
        return result, "math-verify" if self._worker.available else "plain"

    def _score(self, prompts: list[Prompt] | None, completions: list[Completion], columns: Mapping[str, object],
               why: bool) -> list[tuple[float | None, str | None]]:
        if self.answer_field not in columns:
            raise KeyError(f"{self.__name__}: no column {self.answer_field!r} in the data "
                           f"(columns: {', '.join(sorted(k for k in columns if k != 'completion_ids'))}); "
                           "set args.answer_field to the column holding the reference answer")
        golds = column_values(columns, self.answer_field)
        timeouts_before = self.stats["timeouts"]
        out: list[tuple[float | None, str | None]] = []
        for i, completion in enumerate(completions):
            gold = reference_answer(golds[i])
            if gold is None:
                self.stats["no_reference"] += 1
                out.append((None, f"no reference in column {self.answer_field!r}: not scored" if why else None))
                continue
            pred, method = self.answer_and_method(completion, prompts[i] if prompts is not None else None)
            self.stats["scored"] += 1
            if pred is None:
                self.stats["no_answer"] += 1
                out.append((0.0, f"no answer found ({_NOT_FOUND[self.mode]}); reference {quoted(gold)}"
                            if why else None))
                continue
            equal, how = self.compare(gold, pred)
            verdict = f"equal ({how})" if equal else f"not equal ({how})"
            out.append((1.0 if equal else 0.0,
                        f"extracted {quoted(pred)} by {_METHOD[method]}; reference {quoted(gold)}: {verdict}"
                        if why else None))
        log_metric = columns.get("log_metric")
        if callable(log_metric):
            log_metric(f"rewards/{self.__name__}/timeouts", float(self.stats["timeouts"] - timeouts_before))
        return out

    def __call__(self, prompts: list[Prompt], completions: list[Completion], **columns: object) -> list[float | None]:
        return [value for value, _ in self._score(prompts, completions, columns, why=False)]

    def explained(self, prompts: list[Prompt], completions: list[Completion],
                  **columns: object) -> list[tuple[float | None, str | None]]:
        """Each value with the answer extracted, how, the reference and how they compared."""
        return self._score(prompts, completions, columns, why=True)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
