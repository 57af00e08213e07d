"""More of NumPy's functions, written in other ops: composite rows, no kernels.

Index rearrangements (``flipud``, ``rot90``, ``tril``, ``atleast_2d``, ``sort``...) apply
NumPy's own function to an array of positions and gather (``ops.shape.front.
gather_positions``), so they have NumPy's exact semantics and a scatter-add gradient;
the rest are short compositions (``sinc``, ``nansum``, ``diff``, ``trapezoid``,
``polyval``, ``median``...). Their gradients, forward mode and second order come from the
ops they are written in, and the generated tests check them like every other row.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ..table import ROWS, Kind, Op


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


# --- the rest of what HIPS autograd's numpy_vjps.py covers for real inputs, and more -------

PARTITION = _row(
    "partition",
    "the k-th element in its sorted place, smaller ones before, larger after (a "
    "permutation from the values)",
    ("kth=2", lambda m, x: m.partition(x, 2)[2] * m.sort(m.partition(x, 2)), [(5,)]),
    ("kth list, axis 0", lambda m, x: m.sort(m.partition(x, [0, 2], axis=0), axis=0), [(4, 3)]),
)
TAKE_ALONG_AXIS = _row(
    "take_along_axis",
    "gather with an index array along an axis (argsort / argmax results)",
    (
        "axis 1",
        lambda m, x: m.take_along_axis(x, np.array([[0, 2], [1, 1], [2, 0]]), axis=1),
        [(3, 3)],
    ),
    ("flattened", lambda m, x: m.take_along_axis(x, np.array([5, 0, 5]), axis=None), [(2, 3)]),
)
SELECT = _row(
    "select",
    "the choice of the first true condition, elementwise (nested where)",
    (
        "two conditions",
        lambda m, x, y: m.select([x > 0.5, x < -0.5], [x * y, x - y], default=0.25),
        [(6,), (6,)],
    ),
)
CHOOSE = _row(
    "choose",
    "elementwise pick among choices by an index array",
    ("two choices", lambda m, x, y: m.choose(np.array([0, 1, 1, 0]), [x, y]), [(4,), (4,)]),
)
COMPRESS = _row(
    "compress",
    "the slices where a condition holds, along an axis",
    ("axis 0", lambda m, x: m.compress([True, False, True], x, axis=0), [(3, 2)]),
    ("flattened", lambda m, x: m.compress([False, True, True], x), [(2, 2)]),
)
EXTRACT = _row(
    "extract",
    "the elements where a condition holds (flattened)",
    ("mask", lambda m, x: m.extract(np.array([[1, 0, 1], [0, 1, 0]]), x), [(2, 3)]),
)
DSTACK = _row(
    "dstack",
    "stack along the third axis",
    ("1-D and 2-D", lambda m, x, y: m.dstack([x, y]), [(3,), (1, 3)]),
)
COLUMN_STACK = _row(
    "column_stack",
    "1-D arrays as columns, 2-D ones as they are",
    ("vector and matrix", lambda m, x, y: m.column_stack([x, y]), [(3,), (3, 2)]),
)
REAL = _row(
    "real", "the real part (the input itself)", ("2-D", lambda m, x: m.real(x) * x, [(2, 3)])
)
IMAG = _row("imag", "the imaginary part (zeros)", ("2-D", lambda m, x: m.imag(x) + x, [(2, 3)]))
CONJ = _row(
    "conj",
    "complex conjugate (a copy)",
    ("2-D", lambda m, x: m.conj(x) * 2.0, [(2, 3)]),
    aliases=("conjugate",),
)
ANGLE = _row(
    "angle",
    "the argument: 0 or pi (deg: 180); gradient 0",
    ("degrees", lambda m, x: m.angle(x, deg=True) + x, [(5,)]),
)
REAL_IF_CLOSE = _row(
    "real_if_close",
    "the input itself (real input)",
    ("1-D", lambda m, x: m.real_if_close(x) ** 2, [(4,)]),
)
POSITIVE = _row("positive", "+x (a copy)", ("1-D", lambda m, x: m.positive(x) * x, [(4,)]))
FMOD = _row(
    "fmod",
    "C's remainder: x - y trunc(x / y) (the sign of x)",
    ("x and y", lambda m, x, y: m.fmod(x * 3.0, y + 3.0), [(6,), (6,)]),
)
COPYSIGN = _row(
    "copysign",
    "|x| with the sign of y (gradient sign(x) sign(y) in x, 0 in y)",
    ("broadcast", lambda m, x, y: m.copysign(x, y), [(2, 3), (3,)]),
)
NANPROD = _row(
    "nanprod",
    "product ignoring NaN",
    ("axis 1", lambda m, x: m.nanprod(m.where(_GAP, np.nan, x), axis=1), [(3, 4)]),
)
NANCUMSUM = _row(
    "nancumsum",
    "cumulative sum, NaN counted as 0",
    ("axis 1", lambda m, x: m.nancumsum(m.where(_GAP, np.nan, x), axis=1), [(3, 4)]),
)
NANCUMPROD = _row(
    "nancumprod",
    "cumulative product, NaN counted as 1",
    ("flattened", lambda m, x: m.nancumprod(m.where(_GAP, np.nan, x)), [(2, 4)]),
)
NANVAR = _row(
    "nanvar",
    "variance ignoring NaN",
    ("axis 1, ddof 1", lambda m, x: m.nanvar(m.where(_GAP, np.nan, x), axis=1, ddof=1), [(3, 4)]),
)
NANSTD = _row(
    "nanstd",
    "standard deviation ignoring NaN",
    ("all", lambda m, x: m.nanstd(m.where(_GAP, np.nan, x)), [(3, 4)]),
)
COV = _row(
    "cov",
    "covariance matrix of variables in rows (or columns: rowvar=False); no weights",
    ("rows", lambda m, x: m.cov(x), [(3, 5)]),
    (
        "columns, two arrays, bias",
        lambda m, x, y: m.cov(x, y, rowvar=False, bias=True),
        [(6, 2), (6,)],
    ),
)
CORRCOEF = _row(
    "corrcoef",
    "Pearson correlation coefficients (cov scaled by the standard deviations)",
    ("rows", lambda m, x: m.corrcoef(x), [(3, 6)]),
)
VANDER = _row(
    "vander",
    "Vandermonde matrix: powers of x in columns",
    ("N=3", lambda m, x: m.vander(x, 3), [(4,)]),
    ("increasing", lambda m, x: m.vander(x, increasing=True), [(3,)]),
)


def _integrate(m: Any) -> Any:
    """scipy.integrate next to numpy; next to tapegrad.numpy, tapegrad's functions of
    its names."""
    if m is np:
        import scipy.integrate

        return scipy.integrate
    return types.SimpleNamespace(
        **{op.name: op.front for op in ROWS if op.namespace == "scipy.integrate" and op.front}
    )


CUMULATIVE_TRAPEZOID = Op(
    "cumulative_trapezoid",
    Kind.COMPOSITE,
    None,
    None,
    "running integral by the trapezoidal rule (scipy.integrate; initial None or 0)",
    namespace="scipy.integrate",
    cases=_cases(
        ("dx", lambda m, y: _integrate(m).cumulative_trapezoid(y, dx=0.5), [(6,)]),
        (
            "x, axis 0, initial 0",
            lambda m, y, x: _integrate(m).cumulative_trapezoid(
                y, m.cumsum(x + 3.0), axis=0, initial=0
            ),
            [(5, 2), (5,)],
        ),
    ),
)
