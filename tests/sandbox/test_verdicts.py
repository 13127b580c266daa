"""The parent's half of the grader: test splitting, strict decoding, and verdicts on records."""

from __future__ import annotations

import json

import pytest

from llm_finetuning.sandbox.verdicts import (
    Malformed,
    decode_value,
    failed_test_reasons,
    judge_io,
    judge_tests,
    normalize_output,
    prepare_test,
)


def frame(*records: object) -> bytes:
    out = b""
    for rec in records:
        data = json.dumps(rec).encode()
        out += len(data).to_bytes(4, "big") + data
    return out


def test_expected_values_never_reach_the_job() -> None:
    test = prepare_test("assert f(2) == 123456789\nassert sorted(g([3, 1])) == [777, 888]")
    sent = json.dumps(test.steps)
    assert "123456789" not in sent and "777" not in sent
    assert test.steps == [["probe", ["f(2)"]], ["probe", ["g([3, 1])"]]]
    assert not test.judged_in_job


def test_literals_bound_in_the_test_stay_out_of_the_job() -> None:
    test = prepare_test("expected = [424242, 1]\nassert f(1) == expected\nexpected = g()\nassert f(2) == expected")
    assert test.steps[1] == ["probe", ["f(1)"]]  # the literal is compared here
    assert test.steps[3] == ["probe", ["f(2)", "expected"]]  # rebound by code: the job evaluates it
    assert judge_tests([test], frame(["v", 0, 1, [["ok", {"l": [{"i": "424242"}, {"i": "1"}]}]]],
                                     ["v", 0, 3, [["ok", {"i": "3"}], ["ok", {"i": "3"}]]], ["d", 0])) == [True]
    assert judge_tests([test], frame(["v", 0, 1, [["ok", {"i": "7"}]]],
                                     ["v", 0, 3, [["ok", {"i": "3"}], ["ok", {"i": "3"}]]], ["d", 0])) == [False]


def test_statements_run_in_the_job_and_nested_asserts_use_plain_comparisons() -> None:
    test = prepare_test("x = f(2)\nfor i in range(2):\n    assert f(i) == i\nassert x == 4")
    assert test.steps[0][0] == "exec" and "__lf_cmp('=='" in test.steps[0][1]
    assert "__lf_truth" in test.steps[0][1]
    assert test.steps[1] == ["probe", ["x"]]
    assert test.judged_in_job


@pytest.mark.parametrize(
    ("source", "values", "ok"),
    [
        ("assert f(2) == 4", [{"i": "4"}], True),
        ("assert f(2) == 4", [{"i": "5"}], False),
        ("assert f(2) == 4", [{"f": "4.0"}], True),
        ("assert f(2) == 4", [True], False),
        ("assert abs(f(1) - 0.3) < 1e-9", [{"f": "0.30000000000000004"}], True),
        ("assert math.isclose(f(1), 2.0)", [{"f": "2.0000000001"}], True),
        ("assert f(1) is None", [None], True),
        ("assert f(1)", [{"l": []}], False),
        ("assert not f(1)", [{"l": []}], True),
        ("assert f(1) in [1, 2]", [{"i": "2"}], True),
        ("assert f('a') == {'a': [1, (2, 3)]}", [{"d": [["a", {"l": [{"i": "1"}, {"t": [{"i": "2"}, {"i": "3"}]}]}]]}], True),
        ("assert len(f(3)) == 3 and f(3)[0] == 0", [{"l": [{"i": "0"}] * 3}, {"i": "0"}], True),
    ],
)
def test_verdicts_are_computed_in_the_parent(source: str, values: list[object], ok: bool) -> None:
    test = prepare_test(source)
    raw = frame(["v", 0, 0, [["ok", v] for v in values]], ["d", 0])
    assert judge_tests([test], raw) == [ok]


@pytest.mark.parametrize(
    ("source", "value", "why"),
    [
        ("assert -f(1) == 3", {"i": "-3"}, None),
        ("assert ~f(1) == -4", {"i": "3"}, None),
        ("assert +f(1) == 2.5", {"f": "2.5"}, None),
        ("assert -f(1) == 3j", {"c": ["0.0", "-3.0"]}, None),
        ("assert -f(1) == 3", "x", "could not be checked (TypeError: bad operand type for unary -: 'str')"),
        ("assert +f(1) == 3", {"l": []}, "could not be checked (TypeError: bad operand type for unary +: 'list')"),
        ("assert ~f(1) == 3", {"f": "1.0"}, "could not be checked (TypeError: bad operand type for unary ~: 'float')"),
    ],
)
def test_unary_operators_are_evaluated_here_with_pythons_own_errors(source: str, value: object,
                                                                   why: str | None) -> None:
    raw = frame(["v", 0, 0, [["ok", value]]], ["d", 0])
    assert failed_test_reasons([prepare_test(source)], raw) == [why]


def test_missing_duplicated_or_malformed_records_fail() -> None:
    test = prepare_test("assert f(2) == 4")
    good = ["v", 0, 0, [["ok", {"i": "4"}]]]
    assert judge_tests([test], frame(good, ["d", 0])) == [True]
    assert judge_tests([test], frame(good)) == [False]  # no completion marker
    assert judge_tests([test], frame(["d", 0])) == [False]  # no value
    assert judge_tests([test], frame(good, good, ["d", 0])) == [False]  # duplicated value
    assert judge_tests([test], frame(good, ["d", 0], ["d", 0])) == [False]  # duplicated marker
    assert judge_tests([test], frame(["v", 0, 0, [["err", "ZeroDivisionError"]]], ["d", 0])) == [False]
    assert judge_tests([test], frame(good, ["d", 0]) + b"\x00\x00") == [False]  # truncated frame
    assert judge_tests([test], frame(["v", True, 0, good[3]], ["d", 0])) == [False]  # bool is not an index
    assert judge_tests([test], frame(good, ["d", 0], ["zz"])) == [False]  # unknown record


def test_decoder_accepts_plain_data_only() -> None:
    assert decode_value({"s": [{"i": "1"}]}) == {1}
    for bad in ({"i": 1}, [1], {"x": "1"}, {"i": "1", "f": "2"}, {"d": [[{"l": []}, 1]]}, 3):
        with pytest.raises(Malformed):
            decode_value(bad)


def test_io_comparison_is_on_plain_strings() -> None:
    assert normalize_output("a  \nb\n\n\n") == "a\nb"
    raw = frame(["o", 0, "7  \n", False, 0], ["o", 1, "15", True, 0])
    assert judge_io(["7\n", "15\n"], raw) == [True, False]  # the second was truncated
    assert judge_io(["7"], frame(["o", 0, "7", False, 0], ["o", 0, "7", False, 0])) == [False]
