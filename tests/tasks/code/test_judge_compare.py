"""The stdin/stdout comparison (no sandbox): numbers compared as numbers only where the expected token is
in canonical form, exactly (decimal arithmetic), with a tolerance only where the problem states one and
never wider than half a unit of the expected token's last digit (issue 34); nan and inf only as the same
text; lines as LiveCodeBench strips them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrgrpo_tasks.code.sandboxed._judge import _number_kind, _same_output


@pytest.mark.parametrize(
    ("got", "expected", "same"),
    [
        ("3\n", "3", True),
        ("  3  \n\n", "\n3", True),  # the whole text and each line stripped, as LiveCodeBench does
        ("1 2\r\n3 4\r\n", "1 2\n3 4\n", True),
        ("1  2", "1 2", True),  # tokens, on a line that differs
        ("2000000", "2000001", False),  # no relative tolerance for integers
        ("2.000001e6", "2000001", True),  # the same integer, exactly
        ("5.0", "5", True),
        ("5.0000001", "5", False),
        ("2.652528598121911e+32", "265252859812191058636308480000000", False),  # 30! through lgamma
        ("265252859812191058636308480000000", "265252859812191058636308480000000", True),
        ("nan", "1.5", False),
        ("nan", "3", False),
        ("inf", "1e308", False),
        ("1e999", "1.5", False),  # a float overflowing to inf is not near anything
        ("inf", "inf", True),  # the same literal
        ("nan", "nan", True),
        ("inf", "Infinity", False),
        ("-inf", "inf", False),
        ("0.3333333", "0.333333333", False),  # no tolerance the problem did not state
        ("1.0000009", "1.0", False),
        ("1000000.5", "1000000.0", False),
        ("0.50", "0.5", True),  # the same value
        ("2500000", "2500000.5", False),
        ("0", "0.0000005", False),
        ("101", "00000101", False),  # not canonical: only the same text
        ("00000101", "00000101", True),
        ("1000", "1e3", False),
        ("-0.000000", "0.000000", True),
        ("1_000", "1000", False),
        ("0x10", "16", False),
        ("+7", "7", True),
        ("YES", "yes", False),
        ("1 2 3", "1 2", False),
        ("1\n2", "1 2", False),
        ("", "", True),
        ("", "0", False),
    ],
)
def test_same_output(got: str, expected: str, same: bool) -> None:
    assert _same_output(got, expected) is same


@pytest.mark.parametrize(
    ("token", "kind"),
    [("12", "int"), ("-0", "int"), ("1.5", "real"), (".5", "real"), ("5.", "real"), ("1e5", "real")]
    + [(t, "") for t in ("nan", "inf", "-Infinity", "1e", "e5", ".", "+", "1_0", "١٢", "0x1", "1.2.3", "")],
)
def test_number_kind(token: str, kind: str) -> None:
    assert _number_kind(token) == kind


@given(st.integers(), st.integers())
def test_integers_compare_exactly(a: int, b: int) -> None:
    assert _same_output(str(a), str(b)) is (a == b)
    assert _same_output(f"{a}.0", str(b)) is (a == b)


@given(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-(10**18), max_value=10**18))
def test_no_float_passes_for_an_integer_unless_it_is_that_integer(x: float, n: int) -> None:
    same = _same_output(repr(x), str(n))
    assert same is (math.isfinite(x) and x == n and float(n) == n)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_non_finite_output_never_matches_a_finite_expected_value(x: float) -> None:
    expected = f"{x:.6f}"
    for bad in ("nan", "inf", "-inf", "NaN", "Infinity"):
        assert not _same_output(bad, expected)
        assert not _same_output(bad, expected, 1e-6)
    assert _same_output(expected + "0", expected)


@pytest.mark.parametrize(
    ("got", "expected", "tolerance", "same"),
    [
        ("1.0000009", "1.0", 1e-6, True),  # within the stated tolerance
        ("1.000002", "1.0", 1e-6, False),
        ("2500000", "2500000.5", 1e-6, False),  # 1e-6 relative is 2.5, half a unit of the last digit 0.05
        ("0", "0.0000005", 1e-6, False),  # half a unit: 5e-8
        ("0.3333333", "0.333333333", 1e-6, False),
        ("2.49", "2.5", 0.01, True),
        ("2.44", "2.5", 0.1, False),  # 0.06 is more than half a unit (0.05)
        ("5.4", "5", 1.0, True),
        ("5.6", "5", 1.0, False),
        ("nan", "5", 1.0, False),
        ("4", "00005", 1.0, False),
    ],
)
def test_a_stated_tolerance_is_capped_at_half_a_unit(
    got: str, expected: str, tolerance: float, same: bool
) -> None:
    assert _same_output(got, expected, tolerance) is same
