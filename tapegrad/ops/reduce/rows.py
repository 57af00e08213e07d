"""Reductions: sum, mean, prod, max, min over axes; cumulative sums and products;
var, std and average written in terms of them; argmax/argmin (not differentiable)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..table import Kind, Op
from .kernels import (
    cumprod_bwd,
    cumprod_fwd,
    cumsum_bwd,
    cumsum_fwd,
    extreme_bwd,
    max_fwd,
    min_fwd,
    prod_bwd,
    prod_fwd,
    sum_bwd,
    sum_fwd,
)


def _like(a: np.ndarray, x: Any) -> np.ndarray:
    return a.astype(x.dtype)


def _axis_cases(name: str, extra: dict | None = None) -> Any:
    """Axis variants of a numpy-named reduction ``name``."""
    kw = extra or {}

    def cases() -> list:
        def f(m):
            return getattr(m, name)

        return [
            ("all", lambda m, x: f(m)(x, **kw), [(3, 4)], {}),
            ("0-d", lambda m, x: f(m)(x, **kw), [()], {}),
            ("axis=0", lambda m, x: f(m)(x, axis=0, **kw), [(3, 4)], {}),
            ("axis=-1", lambda m, x: f(m)(x, axis=-1, **kw), [(2, 3, 4)], {}),
            ("axis=(0,2)", lambda m, x: f(m)(x, axis=(0, 2), **kw), [(2, 3, 4)], {}),
            ("axis=1 keepdims", lambda m, x: f(m)(x, axis=1, keepdims=True, **kw), [(2, 3, 4)], {}),
            ("all keepdims", lambda m, x: f(m)(x, keepdims=True, **kw), [(2, 3)], {}),
            ("1-d", lambda m, x: f(m)(x, **kw), [(7,)], {}),
            ("after broadcast", lambda m, x, y: f(m)(x * y, axis=0, **kw), [(3, 1), (4,)], {}),
        ]

    return cases


def _extreme_cases(name: str) -> Any:
    base = _axis_cases(name)

    def cases() -> list:
        ties = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5]])
        return [
            *base(),
            (
                "ties share the gradient",
                lambda m, x: (
                    getattr(m, name)(
                        x * 0.0 + _like(ties, x) * (1 if name == "max" else -1), axis=1
                    )
                    + getattr(m, name)(x)
                ),
                [(2, 3)],
                {},
            ),
        ]

    return cases


def _prod_cases() -> list:
    zeros = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [1.5, 2.0, 0.5]])
    return [
        *_axis_cases("prod")(),
        ("with zeros", lambda m, x: m.prod((x + 1) * _like(zeros, x), axis=1), [(3, 3)], {}),
    ]


def _cumulative_cases(name: str) -> Any:
    def cases() -> list:
        def f(m):
            return getattr(m, name)

        zero = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
        out = [
            ("flattened", lambda m, x: f(m)(x), [(2, 3)], {}),
            ("axis=0", lambda m, x: f(m)(x, axis=0), [(3, 4)], {}),
            ("axis=1", lambda m, x: f(m)(x, axis=1), [(2, 3, 4)], {}),
            ("axis=-1", lambda m, x: f(m)(x, axis=-1), [(5,)], {}),
        ]
        if name == "cumprod":
            out.append(("with zeros", lambda m, x: f(m)(x * _like(zero, x)), [(6,)], {}))
        return out

    return cases


def _var_cases(name: str) -> Any:
    base = _axis_cases(name)

    def cases() -> list:
        f = lambda m: getattr(m, name)  # noqa: E731
        return [c for c in base() if c[0] not in ("0-d",)] + [
            ("ddof=1", lambda m, x: f(m)(x, axis=0, ddof=1), [(4, 3)], {}),
        ]

    return cases


def _average_cases() -> list:
    return [
        ("no weights", lambda m, x: m.average(x, axis=0), [(3, 4)], {}),
        ("1-d weights", lambda m, x, w: m.average(x, axis=1, weights=w + 2.5), [(3, 4), (4,)], {}),
        ("full weights", lambda m, x, w: m.average(x, weights=w + 2.5), [(3, 4), (3, 4)], {}),
    ]


def _arg_cases(name: str) -> Any:
    def cases() -> list:
        return [
            ("all", lambda m, x: getattr(m, name)(x), [(3, 4)], {}),
            ("axis=1", lambda m, x: getattr(m, name)(x, axis=1), [(3, 4)], {}),
        ]

    return cases


SUM = Op(
    "sum",
    Kind.ARRAY,
    sum_fwd,
    sum_bwd,
    "sum over axes (None, int or tuple; keepdims)",
    cuda="sum",
    array_saves=(),
    assigns=True,
    cases=_axis_cases("sum"),
    method=True,
)


MEAN = Op(
    "mean",
    Kind.ARRAY,
    sum_fwd,
    sum_bwd,
    "mean over axes (None, int or tuple; keepdims)",
    cuda="mean",
    array_saves=(),
    assigns=True,
    cases=_axis_cases("mean"),
    method=True,
)


PROD = Op(
    "prod",
    Kind.ARRAY,
    prod_fwd,
    prod_bwd,
    "product over axes; exact gradient with zeros",
    cases=_prod_cases,
    method=True,
)


MAX = Op(
    "max",
    Kind.ARRAY,
    max_fwd,
    extreme_bwd,
    "maximum over axes; ties share the gradient",
    cases=_extreme_cases("max"),
    aliases=("amax",),
    method=True,
)


MIN = Op(
    "min",
    Kind.ARRAY,
    min_fwd,
    extreme_bwd,
    "minimum over axes; ties share the gradient",
    cases=_extreme_cases("min"),
    aliases=("amin",),
    method=True,
)


CUMSUM = Op(
    "cumsum",
    Kind.ARRAY,
    cumsum_fwd,
    cumsum_bwd,
    "cumulative sum along an axis",
    array_saves=(),
    cases=_cumulative_cases("cumsum"),
    method=True,
)


CUMPROD = Op(
    "cumprod",
    Kind.ARRAY,
    cumprod_fwd,
    cumprod_bwd,
    "cumulative product along an axis; exact gradient with zeros",
    cases=_cumulative_cases("cumprod"),
    method=True,
)


VAR = Op(
    "var",
    Kind.COMPOSITE,
    None,
    None,
    "variance over axes (ddof)",
    cases=_var_cases("var"),
    method=True,
)


STD = Op(
    "std",
    Kind.COMPOSITE,
    None,
    None,
    "standard deviation (ddof); gradient 0 where it is 0",
    cases=_var_cases("std"),
    method=True,
)


AVERAGE = Op(
    "average",
    Kind.COMPOSITE,
    None,
    None,
    "weighted average along an axis",
    cases=_average_cases,
)


ARGMAX = Op(
    "argmax",
    Kind.COMPOSITE,
    None,
    None,
    "index of the maximum (integer constant)",
    differentiable=False,
    cases=_arg_cases("argmax"),
    method=True,
)


ARGMIN = Op(
    "argmin",
    Kind.COMPOSITE,
    None,
    None,
    "index of the minimum (integer constant)",
    differentiable=False,
    cases=_arg_cases("argmin"),
    method=True,
)
