"""The parent's half of the grader: it splits tests so expected values never enter the sandbox, decodes
the job's records strictly, and decides every verdict itself.

A top-level `assert EXPR` of a test is split into probes: the maximal sub-expressions that need the
solution (calls, names, attributes, ...) are sent to the job, which returns their values as plain data
(exact builtin types only: an always-equal object or an int subclass cannot be encoded); the rest of the
expression (literals, comparisons, arithmetic, a few builtins such as `abs`, `len`, `sorted`,
`math.isclose`) is evaluated here, on the decoded values. So `assert f(2) == 4` sends only `f(2)`: the
job never sees the 4, and no record it can forge passes the test without computing the right value.
Other statements run in the job; an `assert` nested inside them (loops, functions) is checked in the
job with comparisons that refuse anything but plain data, and the test then counts on the job's
completion marker: see references/sandbox.md for what that does and does not cover.
"""

from __future__ import annotations

import ast
import base64
import json
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeGuard

from llm_finetuning.jsonvalue import JsonValue

_PROBE = "__lf_probe_"
_SAFE_CALLS: dict[str, Callable[..., object]] = {
    "abs": abs, "len": len, "round": round, "sorted": sorted, "set": set, "frozenset": frozenset,
    "list": list, "tuple": tuple, "sum": sum, "min": min, "max": max, "all": all, "any": any,
    "int": int, "float": float, "str": str, "bool": bool, "isinstance": isinstance, "type": type,
    "dict": dict, "reversed": lambda x: list(reversed(x)),
}
_SAFE_MATH: dict[str, Callable[..., object]] = {"isclose": math.isclose, "fabs": math.fabs, "sqrt": math.sqrt, "floor": math.floor,
              "ceil": math.ceil, "isnan": math.isnan, "isinf": math.isinf}
_TYPE_NAMES = {"int": int, "float": float, "str": str, "list": list, "tuple": tuple, "dict": dict,
               "set": set, "frozenset": frozenset, "bool": bool, "bytes": bytes, "complex": complex}
_NOT_PROBEABLE = (ast.Lambda, ast.GeneratorExp, ast.Starred, ast.Slice, ast.NamedExpr, ast.Await,
                  ast.Yield, ast.YieldFrom)
_MAX_SEQ = 1_000_000


@dataclass
class Assertion:
    """A top-level assert: its expression with probes replaced by placeholder names, and the source of each
    probe (the sub-expressions the job evaluates, in order), which name the values in a failure's reason."""

    expr: ast.expr
    sources: list[str]

    @property
    def n_probes(self) -> int:
        return len(self.sources)


# A step as the job gets it: ["exec", source] or ["probe", [expression sources]] (lists: marshal carries them).
Step = list[str | list[str]]


@dataclass
class PreparedTest:
    steps: list[Step]  # sent to the job
    assertions: dict[int, Assertion]  # step index -> parent-side expression
    judged_in_job: bool = False  # some check (a nested assert, or none at all) is decided inside the job


class _Unsupported(Exception):
    pass


class _CompareRewriter(ast.NodeTransformer):
    """In code that runs in the job, route comparisons and asserts through the plain-data checks."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        parts: list[ast.expr] = []
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            parts.append(ast.Call(ast.Name("__lf_cmp", ast.Load()),
                                  [ast.Constant(_OP_NAMES[type(op)]), left, right], []))
            left = right
        if len(parts) == 1:
            return parts[0]
        return ast.BoolOp(ast.And(), parts)

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.generic_visit(node)
        test = ast.UnaryOp(ast.Not(), ast.Call(ast.Name("__lf_truth", ast.Load()), [node.test], []))
        return ast.If(test, [ast.Raise(ast.Call(ast.Name("AssertionError", ast.Load()), [], []), None)], [])


_OP_NAMES = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
             ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


class _Splitter:
    def __init__(self, known: dict[str, ast.expr] | None = None) -> None:
        self.probes: list[str] = []
        self.known = known or {}  # test-local names bound to a literal: evaluated here, not in the job

    def probe(self, node: ast.expr) -> ast.expr:
        if any(isinstance(n, _NOT_PROBEABLE) for n in ast.walk(node)):
            raise _Unsupported
        code = ast.unparse(ast.fix_missing_locations(_CompareRewriter().visit(_copy(node))))
        self.probes.append(code)
        return ast.Name(f"{_PROBE}{len(self.probes) - 1}", ast.Load())

    def split(self, node: ast.expr) -> ast.expr:
        """Return the parent-side expression; sub-expressions that need the solution become probes."""
        if isinstance(node, ast.Name) and node.id in self.known:
            return _copy(self.known[node.id])
        if isinstance(node, ast.Constant) or (_literal(node) and not isinstance(node, ast.Name)):
            return node
        try:
            if isinstance(node, ast.BoolOp):
                return ast.BoolOp(node.op, [self.split(v) for v in node.values])
            if isinstance(node, ast.UnaryOp):
                return ast.UnaryOp(node.op, self.split(node.operand))
            if isinstance(node, ast.BinOp):
                return ast.BinOp(self.split(node.left), node.op, self.split(node.right))
            if isinstance(node, ast.Compare):
                return ast.Compare(self.split(node.left), node.ops, [self.split(c) for c in node.comparators])
            if isinstance(node, ast.IfExp):
                return ast.IfExp(self.split(node.test), self.split(node.body), self.split(node.orelse))
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                return type(node)([self.split(e) for e in node.elts], ast.Load()) if not isinstance(
                    node, ast.Set) else ast.Set([self.split(e) for e in node.elts])
            if isinstance(node, ast.Dict) and None not in node.keys:
                return ast.Dict([self.split(k) for k in node.keys if k is not None],
                                [self.split(v) for v in node.values])
            if isinstance(node, ast.Name) and node.id in _TYPE_NAMES:
                return node
            if isinstance(node, ast.Call) and _safe_callee(node.func):
                return ast.Call(node.func, [self.split(a) for a in node.args],
                                [ast.keyword(k.arg, self.split(k.value)) for k in node.keywords])
        except _Unsupported:
            pass
        return self.probe(node)


def _copy(node: ast.expr) -> ast.expr:
    return ast.parse(ast.unparse(node), mode="eval").body


def _safe_callee(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in _SAFE_CALLS
    return (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "math" and func.attr in _SAFE_MATH)


def _note_bindings(stmt: ast.stmt, known: dict[str, ast.expr]) -> None:
    """Track `name = <literal>` in a test, so `assert f(x) == name` keeps the literal out of the job;
    any other binding of the name (anywhere in the statement, nested definitions included) forgets it."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            known.pop(n.id, None)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            for name in n.names:
                known.pop(name, None)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            known.pop(n.name, None)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for alias in n.names:
                known.pop((alias.asname or alias.name).split(".")[0], None)
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and _literal(stmt.value)):
        known[stmt.targets[0].id] = stmt.value


class _LiteralFolder(ast.NodeTransformer):
    """Replace every literal sub-expression by a Constant holding its value, once, when the test is
    prepared, so judging a record never re-parses literals. Values are shared between judgements: the
    evaluator never mutates a value (every operator and allowed call returns a new object)."""

    def visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, ast.expr) and not isinstance(node, (ast.Constant, ast.Name)) and _literal(node):
            return ast.Constant(ast.literal_eval(node))
        return super().visit(node)


def _fold_literals(expr: ast.expr) -> ast.expr:
    folded = _LiteralFolder().visit(expr)
    assert isinstance(folded, ast.expr)
    return folded


def prepare_test(source: str) -> PreparedTest:
    """Split one test (a string of Python statements) into job steps and parent-side assertions."""
    tree = ast.parse(source)  # SyntaxError: the caller scores the test 0
    steps: list[Step] = []
    assertions: dict[int, Assertion] = {}
    pending: list[ast.stmt] = []
    in_job = False

    def flush() -> None:
        nonlocal in_job
        if pending:
            in_job = in_job or any(isinstance(n, (ast.Assert, ast.Raise)) for st in pending for n in ast.walk(st))
            mod = ast.Module(body=list(pending), type_ignores=[])
            mod = ast.fix_missing_locations(_CompareRewriter().visit(mod))
            steps.append(["exec", ast.unparse(mod)])
            pending.clear()

    known: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assert):
            splitter = _Splitter(known)
            try:
                expr = splitter.split(stmt.test)
            except _Unsupported:
                pending.append(stmt)
                continue
            flush()
            assertions[len(steps)] = Assertion(_fold_literals(expr), splitter.probes)
            steps.append(["probe", splitter.probes])
        else:
            _note_bindings(stmt, known)
            pending.append(stmt)
    flush()
    return PreparedTest(steps, assertions, in_job or not assertions)


# ---------------------------------------------------------------- records


class Malformed(Exception):
    pass


def decode_value(obj: JsonValue, depth: int = 0) -> object:
    """Rebuild plain data from the job's tagged JSON; anything unexpected is Malformed."""
    if depth > 60:
        raise Malformed("too deep")
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if not isinstance(obj, dict) or len(obj) != 1:
        raise Malformed(f"not a tagged value: {type(obj).__name__}")
    (tag, payload), = obj.items()
    try:
        if tag == "i" and isinstance(payload, str):
            return int(payload)
        if tag == "f" and isinstance(payload, str):
            return float(payload)
        if tag == "c" and isinstance(payload, list) and len(payload) == 2:
            return complex(_number(payload[0]), _number(payload[1]))
        if tag == "b" and isinstance(payload, str):
            return base64.b64decode(payload, validate=True)
        if tag in ("l", "t", "s", "fs") and isinstance(payload, list):
            items = [decode_value(x, depth + 1) for x in payload]
            return {"l": list, "t": tuple, "s": set, "fs": frozenset}[tag](items)
        if tag == "d" and isinstance(payload, list):
            out: dict[object, object] = {}
            for pair in payload:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise Malformed("bad dict item")
                out[decode_value(pair[0], depth + 1)] = decode_value(pair[1], depth + 1)
            return out
    except (ValueError, TypeError, OverflowError) as exc:
        raise Malformed(str(exc)) from None
    raise Malformed(f"unknown tag {tag!r}")


def _number(part: JsonValue) -> float:
    """A part of a complex number, which the job sends as the text of a float."""
    if isinstance(part, (str, int, float)):
        return float(part)
    raise Malformed(f"not a number: {type(part).__name__}")


_DECODE = json.JSONDecoder().decode


def split_records(raw: bytes) -> list[list[JsonValue]]:
    """Length-prefixed JSON frames; a truncated or non-JSON frame makes the whole stream Malformed."""
    out: list[list[JsonValue]] = []
    i = 0
    while i < len(raw):
        if i + 4 > len(raw):
            raise Malformed("truncated frame header")
        n = int.from_bytes(raw[i:i + 4], "big")
        body = raw[i + 4:i + 4 + n]
        if len(body) != n:
            raise Malformed("truncated frame")
        try:
            rec: JsonValue = _DECODE(body.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise Malformed(f"frame is not JSON: {exc}") from None
        if not isinstance(rec, list) or not rec or not isinstance(rec[0], str):
            raise Malformed("frame is not a record")
        out.append(rec)
        i += 4 + n
    return out


def _is_index(x: JsonValue) -> TypeGuard[int]:
    return type(x) is int and x >= 0


# ---------------------------------------------------------------- parent-side evaluation


class _EvalError(Exception):
    pass


def _check_size(v: object) -> object:
    if isinstance(v, (str, bytes, list, tuple)) and len(v) > _MAX_SEQ:
        raise _EvalError("value too large")
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 100_000:
        raise _EvalError("integer too large")
    return v


def _binop(op: ast.operator, a: object, b: object) -> object:
    if isinstance(op, ast.Pow):
        if isinstance(b, (int, float)) and abs(b) > 10_000:
            raise _EvalError("exponent too large")
        return _check_size(operator.pow(a, b))
    if isinstance(op, ast.Mult):
        for x, y in ((a, b), (b, a)):
            if isinstance(x, (str, bytes, list, tuple)) and isinstance(y, int) and len(x) * y > _MAX_SEQ:
                raise _EvalError("repetition too large")
    if isinstance(op, ast.LShift) and isinstance(b, int) and b > 100_000:
        raise _EvalError("shift too large")
    if isinstance(op, ast.Mod) and isinstance(a, (str, bytes)):
        raise _EvalError("string formatting is not evaluated")
    fn = _BINOPS.get(type(op))
    if fn is None:
        raise _EvalError(f"operator {type(op).__name__} is not evaluated")
    return _check_size(fn(a, b))


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.Pow: operator.pow}
_COMPARES = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
             ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
             ast.NotIn: lambda a, b: a not in b}


def _compare(op: ast.cmpop, a: object, b: object) -> bool:
    if isinstance(op, (ast.Is, ast.IsNot)):
        if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
            same = a is b
        else:
            same = type(a) is type(b) and a == b
        return same if isinstance(op, ast.Is) else not same
    return bool(_COMPARES[type(op)](a, b))


# A probe's outcome as the parent decoded it: ("ok", the value) or ("err", the exception's name).
Probe = tuple[str, object]


def evaluate(node: ast.expr, probes: list[Probe]) -> object:
    """Evaluate a parent-side expression over decoded probe values (plain data only)."""
    if isinstance(node, ast.Name):
        if node.id.startswith(_PROBE):
            kind, value = probes[int(node.id[len(_PROBE):])]
            if kind != "ok":
                raise _EvalError(f"the expression raised {value}")
            return value
        if node.id in _TYPE_NAMES:
            return _TYPE_NAMES[node.id]
        raise _EvalError(f"name {node.id}")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):
        result: object = None
        for v in node.values:
            result = evaluate(v, probes)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.UnaryOp):
        operand = evaluate(node.operand, probes)
        if isinstance(node.op, ast.Not):
            return not operand
        return _unary(node.op, operand)
    if isinstance(node, ast.BinOp):
        return _binop(node.op, evaluate(node.left, probes), evaluate(node.right, probes))
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, probes)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = evaluate(comp, probes)
            if not _compare(op, left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return evaluate(node.body, probes) if evaluate(node.test, probes) else evaluate(node.orelse, probes)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [evaluate(e, probes) for e in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return {evaluate(k, probes): evaluate(v, probes) for k, v in zip(node.keys, node.values, strict=True)
                if k is not None}
    if isinstance(node, ast.Call):
        fn = _safe_function(node.func)
        args = [evaluate(a, probes) for a in node.args]
        kwargs = {k.arg: evaluate(k.value, probes) for k in node.keywords if k.arg}
        if "key" in kwargs:
            raise _EvalError("key functions are not evaluated")
        return _check_size(fn(*args, **kwargs))
    raise _EvalError(f"{type(node).__name__} is not evaluated")


def _unary(op: ast.unaryop, v: object) -> object:
    """`-v`, `+v` or `~v` on a number, with Python's own TypeError for any other operand."""
    if isinstance(op, ast.Invert):
        if isinstance(v, int):
            return ~v
        raise TypeError(f"bad operand type for unary ~: '{type(v).__name__}'")
    if isinstance(v, (int, float, complex)):
        return -v if isinstance(op, ast.USub) else +v
    raise TypeError(f"bad operand type for unary {'-' if isinstance(op, ast.USub) else '+'}: '{type(v).__name__}'")


def _safe_function(func: ast.expr) -> Callable[..., object]:
    """The builtin or `math` function a parent-side call names (the splitter let only `_safe_callee`s through)."""
    if isinstance(func, ast.Name):
        return _SAFE_CALLS[func.id]
    if isinstance(func, ast.Attribute):
        return _SAFE_MATH[func.attr]
    raise _EvalError(f"{type(func).__name__} is not called")


def assertion_holds(assertion: Assertion, results: JsonValue) -> bool:
    """True only for a well-formed probe record whose values make the assertion true here."""
    return assertion_failure(assertion, results) is None


def assertion_failure(assertion: Assertion, results: JsonValue, sources: list[str] | None = None) -> str | None:
    """None when the assertion holds on a well-formed probe record, else why not, in a few words.

    `sources` (the probe expressions) name the values the solution produced: `f(2) gave 5`.
    """
    if not isinstance(results, list) or len(results) != assertion.n_probes:
        return "malformed record"
    probes: list[Probe] = []
    for item in results:
        if not isinstance(item, list) or len(item) != 2 or item[0] not in ("ok", "err"):
            return "malformed record"
        if item[0] == "ok":
            try:
                probes.append(("ok", decode_value(item[1])))
            except Malformed:
                return "malformed value"
        else:
            probes.append(("err", str(item[1])[:100]))
    for i, (kind, value) in enumerate(probes):
        if kind == "err":
            return f"{_probe_name(sources, i)} raised {value}"
    try:
        value = evaluate(assertion.expr, probes)
    except (_EvalError, ArithmeticError, TypeError, ValueError, KeyError, IndexError, RecursionError,
            MemoryError, AttributeError) as exc:
        return f"could not be checked ({type(exc).__name__}: {str(exc)[:80]})"
    if value is True or (type(value) in (int, float, str, list, tuple, dict, set) and bool(value)):
        return None
    got = ", ".join(f"{_probe_name(sources, i)} gave {_short(v)}" for i, (_, v) in enumerate(probes))
    return "assertion false" + (f": {got}" if got else "")


def _probe_name(sources: list[str] | None, i: int) -> str:
    return _short_text(sources[i]) if sources is not None and i < len(sources) else f"value {i + 1}"


def _short(value: object, limit: int = 80) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too long for repr, a deep structure
        text = f"<{type(value).__name__}>"
    return _short_text(text, limit)


def _short_text(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge_tests(prepared: list[PreparedTest | None], raw: bytes) -> list[bool]:
    """Per test: passed only with exactly one completion marker, no failure record, and exactly one
    well-formed, true record for each top-level assertion. A malformed stream fails every test."""
    return [why is None for why in failed_test_reasons(prepared, raw)]


def failed_test_reasons(prepared: list[PreparedTest | None], raw: bytes) -> list[str | None]:
    """Per test: None when it passed (the rules of `judge_tests`), else why it failed, in a few words.

    The reasons quote exception names and values that came from the job: data to show, never to trust.
    """
    try:
        records = split_records(raw)
    except Malformed as exc:
        return [f"malformed record stream ({exc})"] * len(prepared)
    seen_values: dict[tuple[int, int], JsonValue] = {}
    done: dict[int, int] = {}
    failed: dict[int, str] = {}
    crashed: str | None = None
    for rec in records:
        kind = rec[0]
        if kind == "s" and len(rec) == 2:
            crashed = crashed or f"the solution raised {str(rec[1])[:100]} when it was run, before any test"
            continue
        if kind == "v" and len(rec) == 4 and _is_index(rec[1]) and _is_index(rec[2]):
            key = (rec[1], rec[2])
            if key in seen_values:
                failed.setdefault(rec[1], "the same check was reported twice")
            seen_values[key] = rec[3]
        elif kind == "x" and len(rec) == 4 and _is_index(rec[1]):
            failed.setdefault(rec[1], f"raised {str(rec[3])[:100]}")
        elif kind == "d" and len(rec) == 2 and _is_index(rec[1]):
            done[rec[1]] = done.get(rec[1], 0) + 1
        else:
            return ["malformed record"] * len(prepared)
    if crashed is not None:  # the program crashed on import: every test fails, whatever else was sent
        return [crashed] * len(prepared)
    out: list[str | None] = []
    for ti, test in enumerate(prepared):
        if test is None:
            out.append("the test does not parse")
        elif ti in failed:
            out.append(failed[ti])
        elif done.get(ti) != 1:
            out.append("did not finish" if ti not in done else "finished more than once")
        else:
            out.append(_first_failed_assertion(ti, test, seen_values))
    return out


def _first_failed_assertion(ti: int, test: PreparedTest, seen_values: dict[tuple[int, int], JsonValue]) -> str | None:
    for si, assertion in test.assertions.items():
        if (ti, si) not in seen_values:
            return "an assertion was never checked"
        why = assertion_failure(assertion, seen_values[(ti, si)], assertion.sources)
        if why is not None:
            return why
    return None


def normalize_output(text: str) -> str:
    """Trailing whitespace on each line and trailing blank lines are ignored; nothing else is."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def judge_io(expected: list[str], raw: bytes) -> list[bool]:
    """Per case: exactly one untruncated output record whose text equals the expected stdout here."""
    return [why is None for why in failed_case_reasons(expected, raw)]


def failed_case_reasons(expected: list[str], raw: bytes) -> list[str | None]:
    """Per case: None when it passed (the rules of `judge_io`), else why not: the first differing line."""
    try:
        records = split_records(raw)
    except Malformed as exc:
        return [f"malformed record stream ({exc})"] * len(expected)
    outputs: dict[int, str | None] = {}
    codes: dict[int, JsonValue] = {}
    for rec in records:
        if rec[0] != "o" or len(rec) != 5 or not _is_index(rec[1]) or not isinstance(rec[2], str) \
                or type(rec[3]) is not bool:
            return ["malformed record"] * len(expected)
        ci = rec[1]
        outputs[ci] = None if ci in outputs or rec[3] else rec[2]
        codes[ci] = rec[4]
    out: list[str | None] = []
    for ci, want in enumerate(expected):
        if ci not in outputs:
            out.append("no output (the run stopped before this case)")
            continue
        got = outputs[ci]
        if got is None:
            out.append("output over the size limit or reported twice")
            continue
        out.append(_io_difference(normalize_output(want), normalize_output(got), codes[ci]))
    return out


def _io_difference(want: str, got: str, code: JsonValue) -> str | None:
    if want == got:
        return None
    exited = f" (exit code {code})" if type(code) is int and code != 0 else ""
    want_lines, got_lines = want.split("\n"), got.split("\n")
    for n, (w, g) in enumerate(zip(want_lines, got_lines, strict=False), 1):
        if w != g:
            return f"stdout line {n}: expected {_short(w, 60)}, got {_short(g, 60)}{exited}"
    if len(got_lines) < len(want_lines):
        return f"stdout has {len(got_lines)} lines, expected {len(want_lines)}{exited}"
    return f"stdout has {len(got_lines)} lines, expected {len(want_lines)}: extra {_short(got_lines[len(want_lines)], 60)}{exited}"
