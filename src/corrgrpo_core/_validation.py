"""Option checks shared by the estimators and the objectives: one message format everywhere.

Every message reads ``"<name> must be <what is allowed>, got <value>"``, with a hint in
parentheses where one helps. A value of the wrong type (a string for a number, a number for a
string option) raises ``TypeError``; a value of the right type outside the allowed set or range
raises ``ValueError``. The same mistake gets the same message from the core and the objectives.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal, TypeVar, get_args

__all__ = [
    "DARA_BASES",
    "DARA_VARIANTS",
    "EPS_PLACEMENTS",
    "NAN_POLICIES",
    "SINGLETON_POLICIES",
    "STD_SCOPES",
    "DaraBase",
    "DaraVariant",
    "EpsPlacement",
    "FilterCriterion",
    "NanPolicy",
    "SingletonPolicy",
    "StdScope",
    "check_choice",
    "check_int",
    "check_number",
    "check_optional_number",
    "choices",
    "unknown_name",
]

EpsPlacement = Literal["inside", "outside"]
NanPolicy = Literal["raise", "ignore"]
SingletonPolicy = Literal["zero", "raise"]
StdScope = Literal["group", "batch"]
DaraVariant = Literal["asym", "sym"]
DaraBase = Literal["gdpo", "corrgrpo"]
FilterCriterion = Literal["total", "any_component"]

S = TypeVar("S", bound=str)


def choices(literal: object) -> tuple[str, ...]:
    """The strings a ``Literal[...]`` option type allows, in declaration order."""
    return tuple(get_args(literal))


EPS_PLACEMENTS = choices(EpsPlacement)
NAN_POLICIES = choices(NanPolicy)
SINGLETON_POLICIES = choices(SingletonPolicy)
STD_SCOPES = choices(StdScope)
DARA_VARIANTS = choices(DaraVariant)
DARA_BASES = choices(DaraBase)


def _shown(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_choice(name: str, value: S, allowed: tuple[str, ...]) -> S:
    """``value`` if it is one of ``allowed``; else ``ValueError`` (a string) or ``TypeError`` (not one).

    Examples
    --------
    >>> check_choice("nan_policy", "drop", ("raise", "ignore"))
    Traceback (most recent call last):
    ...
    ValueError: nan_policy must be one of 'raise', 'ignore', got 'drop'
    """
    if value in allowed and isinstance(value, str):
        return value
    what = f"{name} must be one of {', '.join(map(repr, allowed))}"
    if not isinstance(value, str):
        raise TypeError(f"{what}, got {_shown(value)}")
    raise ValueError(f"{what}, got {value!r}")


def _is_real(value: object) -> bool:
    """A real Python or numpy scalar number (bool excluded: ``True`` is no eps)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    return kind in "iuf" and kind != "" and getattr(value, "ndim", 1) == 0


def check_number(
    name: str,
    value: object,
    *,
    minimum: float = 0.0,
    strict: bool = False,
    finite: bool = True,
) -> float:
    """``value`` as a float, checked to be a real number >= ``minimum`` (> with ``strict``) and finite.

    Examples
    --------
    >>> check_number("eps", 1e-6)
    1e-06
    >>> check_number("eps", -1.0)
    Traceback (most recent call last):
    ...
    ValueError: eps must be a non-negative number, got -1.0
    >>> check_number("eps", "1e-6")
    Traceback (most recent call last):
    ...
    TypeError: eps must be a non-negative number, got '1e-6' (str)
    """
    if type(value) is float or type(value) is int:  # the common case, checked in a few operations
        number = float(value)
        if (number > minimum if strict else number >= minimum) and (not finite or number < math.inf):
            return number
    if minimum == 0.0:
        what = "a positive number" if strict else "a non-negative number"
    else:
        what = f"a number {'>' if strict else '>='} {minimum:g}"
    if not _is_real(value):
        raise TypeError(f"{name} must be {what}, got {_shown(value)}")
    number = float(value)  # type: ignore[arg-type]
    if not (number > minimum if strict else number >= minimum):  # NaN fails here too
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if finite and not math.isfinite(number):
        raise ValueError(f"{name} must be {what}, got {value!r} (it must be finite)")
    return number


def check_optional_number(
    name: str, value: object, *, minimum: float = 0.0, strict: bool = False
) -> float | None:
    """None, or :func:`check_number` of ``value`` (infinity allowed: it means no bound)."""
    if value is None:
        return None
    return check_number(name, value, minimum=minimum, strict=strict, finite=False)


def check_int(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum`` (a bool or a float is a ``TypeError``).

    Examples
    --------
    >>> check_int("ddof", 1.5)
    Traceback (most recent call last):
    ...
    TypeError: ddof must be a non-negative integer, got 1.5 (float)
    """
    if type(value) is int and value >= minimum:
        return value
    what = "a non-negative integer" if minimum == 0 else f"an integer >= {minimum}"
    kind = getattr(getattr(value, "dtype", None), "kind", "")
    if isinstance(value, bool) or not (isinstance(value, int) or (kind in "iu" and kind != "")):
        raise TypeError(f"{name} must be {what}, got {_shown(value)}")
    number: int = int(value)  # type: ignore[call-overload]
    if number < minimum:
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return number


def unknown_name(kind: str, name: object, known: Iterable[str]) -> ValueError:
    """The error for a registry lookup that failed: ``unknown <kind> 'x'; known: a, b``."""
    return ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")
