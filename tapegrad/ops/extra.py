"""More of NumPy's functions (issue 20), written in other ops: composite rows, no kernels.

Index rearrangements (``flipud``, ``rot90``, ``tril``, ``atleast_2d``, ``sort``...) apply
NumPy's own function to an array of positions and gather (``frontends.shape.
gather_positions``), so they have NumPy's exact semantics and a scatter-add gradient;
the rest are short compositions (``sinc``, ``nansum``, ``diff``, ``trapezoid``,
``polyval``, ``median``...). Their gradients, forward mode and second order come from the
ops they are written in, and the generated tests check them like every other row.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .table import Kind, Op


def _cases(*entries: Any) -> Any:
    return lambda: [(*e, {}) for e in entries]


def _row(name: str, doc: str, *cases: Any, aliases: tuple[str, ...] = ()) -> Op:
    return Op(name, Kind.COMPOSITE, None, None, doc, cases=_cases(*cases), aliases=aliases)


_GAP = np.array([False, True, False, False])  # where a (.., 4) input is NaN (data, not x)

FLIPUD = _row("flipud", "reverse along axis 0", ("2-D", lambda m, x: m.flipud(x), [(3, 2)]))
FLIPLR = _row("fliplr", "reverse along axis 1", ("2-D", lambda m, x: m.fliplr(x), [(3, 2)]))
ROT90 = _row(
    "rot90",
    "rotate by 90 degrees k times in the plane of two axes",
    ("k=1", lambda m, x: m.rot90(x), [(2, 3)]),
    ("k=3, axes (1, 2)", lambda m, x: m.rot90(x, 3, axes=(1, 2)), [(2, 3, 4)]),
)
ROLLAXIS = _row(
    "rollaxis", "move an axis to a position", ("3-D", lambda m, x: m.rollaxis(x, 2), [(2, 3, 4)])
)
ATLEAST_1D = _row(
    "atleast_1d", "at least 1-D (a view)", ("0-d", lambda m, x: m.atleast_1d(x) * x, [()])
)
ATLEAST_2D = _row(
    "atleast_2d", "at least 2-D (a view)", ("1-D", lambda m, x: m.atleast_2d(x), [(3,)])
)
ATLEAST_3D = _row(
    "atleast_3d", "at least 3-D (a view)", ("2-D", lambda m, x: m.atleast_3d(x), [(2, 3)])
)
TRIL = _row(
    "tril",
    "lower triangle (k-th diagonal and below), zeros above",
    ("2-D", lambda m, x: m.tril(x), [(3, 3)]),
    ("k=-1, stacked", lambda m, x: m.tril(x, -1), [(2, 3, 4)]),
)
TRIU = _row(
    "triu",
    "upper triangle (k-th diagonal and above), zeros below",
    ("2-D k=1", lambda m, x: m.triu(x, 1), [(3, 4)]),
)
APPEND = _row(
    "append",
    "values appended (flattened without axis)",
    ("flat", lambda m, x, y: m.append(x, y), [(2, 2), (3,)]),
    ("axis 0", lambda m, x, y: m.append(x, y, axis=0), [(2, 3), (1, 3)]),
)
VSPLIT = _row(
    "vsplit",
    "split along axis 0",
    ("2 parts", lambda m, x: m.vsplit(x, 2)[1] * 2.0 + m.vsplit(x, 2)[0], [(4, 3)]),
)
HSPLIT = _row(
    "hsplit",
    "split along axis 1 (axis 0 for 1-D)",
    ("at 1", lambda m, x: m.hsplit(x, [1])[1] ** 2, [(2, 3)]),
)
DSPLIT = _row(
    "dsplit", "split along axis 2", ("2 parts", lambda m, x: m.dsplit(x, 2)[0] ** 2, [(2, 2, 4)])
)
SORT = _row(
    "sort",
    "sorted along an axis; the gradient follows the permutation",
    ("last axis", lambda m, x: m.sort(x) * np.arange(4.0), [(3, 4)]),
    ("axis 0", lambda m, x: m.sort(x, axis=0) * np.arange(3.0)[:, None], [(3, 2)]),
    ("flattened", lambda m, x: m.sort(x, axis=None) ** 2, [(2, 3)]),
)
MEDIAN = _row(
    "median",
    "median along axes (the mean of the two middle values for an even count)",
    ("odd", lambda m, x: m.median(x), [(5,)]),
    ("even, axis 1", lambda m, x: m.median(x, axis=1), [(3, 4)]),
)
QUANTILE = _row(
    "quantile",
    "q-th quantile, NumPy's linear interpolation between order statistics",
    ("q=0.3", lambda m, x: m.quantile(x, 0.3), [(7,)]),
    ("q array, axis 0", lambda m, x: m.quantile(x, np.array([0.1, 0.9]), axis=0), [(5, 2)]),
)
PERCENTILE = _row(
    "percentile",
    "q-th percentile (quantile of q / 100)",
    ("q=75, keepdims", lambda m, x: m.percentile(x, 75.0, axis=-1, keepdims=True), [(2, 5)]),
)
PTP = _row("ptp", "max - min along an axis", ("axis 1", lambda m, x: m.ptp(x, axis=1), [(3, 4)]))
DIFF = _row(
    "diff",
    "n-th discrete difference along an axis",
    ("n=1", lambda m, x: m.diff(x), [(5,)]),
    ("n=2, axis 0", lambda m, x: m.diff(x, n=2, axis=0), [(4, 3)]),
)
TRAPEZOID = _row(
    "trapezoid",
    "integral by the trapezoidal rule (dx, or sample points x)",
    ("dx", lambda m, y: m.trapezoid(y, dx=0.5), [(6,)]),
    ("x, axis 0", lambda m, y, x: m.trapezoid(y, m.cumsum(x * x + 0.1), axis=0), [(4, 2), (4,)]),
)
POLYVAL = _row(
    "polyval",
    "polynomial p[0] x^(n-1) + ... + p[n-1] (Horner)",
    ("coefficients and points", lambda m, p, x: m.polyval(p, x), [(4,), (5,)]),
)
CROSS = _row(
    "cross",
    "cross product of 3-vectors along the last axis",
    ("stacked", lambda m, x, y: m.cross(x, y), [(4, 3), (4, 3)]),
    ("broadcast", lambda m, x, y: m.cross(x, y), [(2, 3), (3,)]),
)
KRON = _row(
    "kron",
    "Kronecker product",
    ("2-D", lambda m, x, y: m.kron(x, y), [(2, 3), (2, 2)]),
    ("1-D", lambda m, x, y: m.kron(x, y), [(3,), (2,)]),
)
SINC = _row(
    "sinc",
    "sin(pi x) / (pi x), 1 at 0",
    ("values", lambda m, x: m.sinc(x), [(3, 4)]),
    ("at 0", lambda m, x: m.sinc(x * np.array([0.0, 1.0, 1.0])), [(3,)]),
)
DEG2RAD = _row(
    "deg2rad",
    "degrees to radians",
    ("values", lambda m, x: m.deg2rad(x * 90.0), [(3,)]),
    aliases=("radians",),
)
RAD2DEG = _row(
    "rad2deg",
    "radians to degrees",
    ("values", lambda m, x: m.rad2deg(x), [(3,)]),
    aliases=("degrees",),
)
NAN_TO_NUM = _row(
    "nan_to_num",
    "NaN to 0 (or nan=), infinities to the largest finite numbers (or posinf=, neginf=)",
    ("nan", lambda m, x: m.nan_to_num(m.where(_GAP, np.nan, x)), [(2, 4)]),
    ("fill", lambda m, x: m.nan_to_num(m.where(_GAP, np.nan, x), nan=-1.0), [(4,)]),
)
NANSUM = _row(
    "nansum",
    "sum ignoring NaN",
    ("axis 1", lambda m, x: m.nansum(m.where(_GAP, np.nan, x), axis=1), [(3, 4)]),
)
NANMEAN = _row(
    "nanmean",
    "mean ignoring NaN",
    ("all", lambda m, x: m.nanmean(m.where(_GAP, np.nan, x)), [(3, 4)]),
)
NANMAX = _row(
    "nanmax",
    "maximum ignoring NaN",
    ("axis 1", lambda m, x: m.nanmax(m.where(_GAP, np.nan, x), axis=1), [(3, 4)]),
)
NANMIN = _row(
    "nanmin",
    "minimum ignoring NaN",
    ("all", lambda m, x: m.nanmin(m.where(_GAP, np.nan, x)), [(3, 4)]),
)
CONVOLVE = _row(
    "convolve",
    "discrete linear convolution of 1-D sequences (full, same, valid)",
    ("full", lambda m, a, v: m.convolve(a, v), [(5,), (3,)]),
    ("same, short first", lambda m, a, v: m.convolve(a, v, mode="same"), [(3,), (6,)]),
    ("valid", lambda m, a, v: m.convolve(a, v, mode="valid"), [(6,), (3,)]),
)
CORRELATE = _row(
    "correlate",
    "cross-correlation of 1-D sequences (valid, same, full)",
    ("valid", lambda m, a, v: m.correlate(a, v), [(6,), (3,)]),
    ("same", lambda m, a, v: m.correlate(a, v, mode="same"), [(5,), (2,)]),
    ("full", lambda m, a, v: m.correlate(a, v, mode="full"), [(4,), (3,)]),
)
INTERP = _row(
    "interp",
    "piecewise-linear interpolation, differentiable in x, xp and fp",
    ("inside", lambda m, x, fp: m.interp(x * 0.4 + 1.5, np.arange(5.0), fp), [(6,), (5,)]),
    ("edges", lambda m, x, fp: m.interp(x * 2.0 + 1.0, np.arange(4.0), fp), [(5,), (4,)]),
)
GRADIENT = _row(
    "gradient",
    "second-order central differences inside, first-order at the edges",
    ("1-D, spacing", lambda m, f: m.gradient(f, 0.5), [(6,)]),
    ("2-D, axis 0", lambda m, f: m.gradient(f, axis=0), [(4, 3)]),
    ("2-D, both", lambda m, f: m.gradient(f)[1] * m.gradient(f)[0], [(3, 4)]),
)
