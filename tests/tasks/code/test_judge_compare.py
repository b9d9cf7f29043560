"""The stdin/stdout comparison (no sandbox): integers exact, a tolerance only for non-integer expected
numbers, nan and inf only as the same text; lines as LiveCodeBench strips them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrgrpo_tasks.code._judge import _number_kind, _same_output


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
        ("0.3333333", "0.333333333", True),  # within 1e-6
        ("1.0000009", "1.0", True),
        ("1.00001", "1.0", False),
        ("1000000.5", "1000000.0", True),  # relative 1e-6 of the expected value
        ("1000002.5", "1000000.0", False),
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
    assert _same_output(repr(x), expected)
