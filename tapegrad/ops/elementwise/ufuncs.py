"""Elementwise rows: the rest of NumPy's elementwise functions (``expm1 log1p tan
arcsin sinh floor rint arctan2 hypot logaddexp fmax remainder round``...), each as
scalar formulas and a row (see :mod:`tapegrad.ops.elementwise.core`)."""

from __future__ import annotations

import numpy as np

from ..._jit import jit
from ...kernels import vecmath as vm
from ..table import Kind, Op
from ..vocabulary import select
from .core import RANGE, add_bwd_x, expm1_fwd_vec

LN2 = 0.6931471805599453


LN10 = 2.302585092994046


@jit
def expm1_fwd(x):
    return np.expm1(x)


@jit
def expm1_bwd(g, x, out):
    return g * (out + 1)


@jit
def exp2_fwd(x):
    return np.exp2(x)


@jit
def exp2_bwd(g, x, out):
    return g * out * LN2


@jit
def log1p_fwd(x):
    return np.log1p(x)


@jit
def log1p_bwd(g, x, out):
    return g / (1 + x)


@jit
def log2_fwd(x):
    return np.log2(x)


@jit
def log2_bwd(g, x, out):
    return g / (x * LN2)


@jit
def log10_fwd(x):
    return np.log10(x)


@jit
def log10_bwd(g, x, out):
    return g / (x * LN10)


@jit
def cbrt_fwd(x):
    return np.cbrt(x)


@jit
def cbrt_bwd(g, x, out):
    return g / (3 * out * out)


@jit
def square_fwd(x):
    return x * x


@jit
def square_bwd(g, x, out):
    return 2 * g * x


@jit
def reciprocal_fwd(x):
    return 1 / x


@jit
def reciprocal_bwd(g, x, out):
    return -g * out * out


@jit
def tan_fwd(x):
    return np.tan(x)


@jit
def tan_bwd(g, x, out):
    return g * (1 + out * out)


@jit
def arcsin_fwd(x):
    return np.arcsin(x)


@jit
def arcsin_bwd(g, x, out):
    return g / np.sqrt(1 - x * x)


@jit
def arccos_fwd(x):
    return np.arccos(x)


@jit
def arccos_bwd(g, x, out):
    return -g / np.sqrt(1 - x * x)


@jit
def arctan_fwd(x):
    return np.arctan(x)


@jit
def arctan_bwd(g, x, out):
    return g / (1 + x * x)


@jit
def sinh_fwd(x):
    return np.sinh(x)


@jit
def sinh_bwd(g, x, out):
    return g * np.cosh(x)


@jit
def cosh_fwd(x):
    return np.cosh(x)


@jit
def cosh_bwd(g, x, out):
    return g * np.sinh(x)


@jit
def arcsinh_fwd(x):
    return np.arcsinh(x)


@jit
def arcsinh_bwd(g, x, out):
    return g / np.sqrt(x * x + 1)


@jit
def arccosh_fwd(x):
    return np.arccosh(x)


@jit
def arccosh_bwd(g, x, out):
    return g / np.sqrt(x * x - 1)


@jit
def arctanh_fwd(x):
    return np.arctanh(x)


@jit
def arctanh_bwd(g, x, out):
    return g / (1 - x * x)


@jit
def zero_bwd(g, x, out):
    return 0.0 * g


@jit
def sign_fwd(x):
    return np.sign(x)


@jit
def floor_fwd(x):
    return np.floor(x)


@jit
def ceil_fwd(x):
    return np.ceil(x)


@jit
def trunc_fwd(x):
    return np.trunc(x)


@jit
def rint_fwd(x):
    return np.rint(x)  # round half to even, as numpy.round


EXPM1 = Op(
    "expm1",
    Kind.UNARY,
    expm1_fwd,
    expm1_bwd,
    "e ** x - 1, accurate near 0",
    vector=(expm1_fwd_vec, expm1_bwd),
    vector_range=RANGE["expm1"],
)


EXP2 = Op("exp2", Kind.UNARY, exp2_fwd, exp2_bwd, "2 ** x")


LOG1P = Op(
    "log1p", Kind.UNARY, log1p_fwd, log1p_bwd, "log(1 + x), accurate near 0", domain=(-0.5, 2.0)
)


LOG2 = Op("log2", Kind.UNARY, log2_fwd, log2_bwd, "base-2 logarithm", domain=(0.2, 3.0))


LOG10 = Op("log10", Kind.UNARY, log10_fwd, log10_bwd, "base-10 logarithm", domain=(0.2, 3.0))


CBRT = Op("cbrt", Kind.UNARY, cbrt_fwd, cbrt_bwd, "cube root", domain=(0.3, 3.0))


SQUARE = Op("square", Kind.UNARY, square_fwd, square_bwd, "x * x")


RECIPROCAL = Op(
    "reciprocal", Kind.UNARY, reciprocal_fwd, reciprocal_bwd, "1 / x", domain=(0.5, 2.0)
)


TAN = Op("tan", Kind.UNARY, tan_fwd, tan_bwd, "tangent", domain=(-1.2, 1.2))


ARCSIN = Op(
    "arcsin",
    Kind.UNARY,
    arcsin_fwd,
    arcsin_bwd,
    "inverse sine",
    domain=(-0.9, 0.9),
    aliases=("asin",),
)


ARCCOS = Op(
    "arccos",
    Kind.UNARY,
    arccos_fwd,
    arccos_bwd,
    "inverse cosine",
    domain=(-0.9, 0.9),
    aliases=("acos",),
)


ARCTAN = Op("arctan", Kind.UNARY, arctan_fwd, arctan_bwd, "inverse tangent", aliases=("atan",))


SINH = Op("sinh", Kind.UNARY, sinh_fwd, sinh_bwd, "hyperbolic sine")


COSH = Op("cosh", Kind.UNARY, cosh_fwd, cosh_bwd, "hyperbolic cosine")


ARCSINH = Op(
    "arcsinh", Kind.UNARY, arcsinh_fwd, arcsinh_bwd, "inverse hyperbolic sine", aliases=("asinh",)
)


ARCCOSH = Op(
    "arccosh",
    Kind.UNARY,
    arccosh_fwd,
    arccosh_bwd,
    "inverse hyperbolic cosine",
    domain=(1.2, 3.0),
    aliases=("acosh",),
)


ARCTANH = Op(
    "arctanh",
    Kind.UNARY,
    arctanh_fwd,
    arctanh_bwd,
    "inverse hyperbolic tangent",
    domain=(-0.9, 0.9),
    aliases=("atanh",),
)


SIGN = Op("sign", Kind.UNARY, sign_fwd, zero_bwd, "sign (-1, 0, 1); gradient 0")


FLOOR = Op("floor", Kind.UNARY, floor_fwd, zero_bwd, "round down; gradient 0", domain=(0.1, 0.9))


CEIL = Op("ceil", Kind.UNARY, ceil_fwd, zero_bwd, "round up; gradient 0", domain=(0.1, 0.9))


TRUNC = Op(
    "trunc",
    Kind.UNARY,
    trunc_fwd,
    zero_bwd,
    "round toward 0; gradient 0",
    domain=(0.1, 0.9),
    aliases=("fix",),
)


RINT = Op(
    "rint", Kind.UNARY, rint_fwd, zero_bwd, "round half to even; gradient 0", domain=(0.1, 0.4)
)


@jit
def arctan2_fwd(x, y):
    return np.arctan2(x, y)


@jit
def arctan2_bwd_x(g, x, y, out):
    return g * y / (x * x + y * y)


@jit
def arctan2_bwd_y(g, x, y, out):
    return -g * x / (x * x + y * y)


@jit
def hypot_fwd(x, y):
    return np.hypot(x, y)


@jit
def hypot_bwd_x(g, x, y, out):
    return g * x / out


@jit
def hypot_bwd_y(g, x, y, out):
    return g * y / out


@jit
def logaddexp_fwd(x, y):
    return np.logaddexp(x, y)


# d/dx log(e^x + e^y) = e^x / (e^x + e^y) = 1 / (1 + e^(y - x)): from x and y, not from
# the rounded out (e^(x - out) loses all accuracy once ulp(out) is near 1: |x| ~ 1e16 in
# float64, ~3e7 in float32; logaddexp(x, x) at 2e7 in float32 had derivative 2). At
# x = +inf and y finite it is 1 and 0 (e^(x - out) was NaN there).
@jit
def logaddexp_bwd_x(g, x, y, out):
    return g / (1.0 + np.exp(y - x))


@jit
def logaddexp_bwd_y(g, x, y, out):
    return g / (1.0 + np.exp(x - y))


@jit
def logaddexp2_fwd(x, y):
    return np.logaddexp2(x, y)


@jit
def logaddexp2_bwd_x(g, x, y, out):
    return g / (1.0 + np.exp2(y - x))


@jit
def logaddexp2_bwd_y(g, x, y, out):
    return g / (1.0 + np.exp2(x - y))


# Vector formulas (kernels/vecmath.py) for blocks where every |x - y| <= 700 (forward and
# backward): the forward is max + log1p(e^-|x - y|) (NumPy's own formula; its scalar
# loop takes ~15 ns an element), the backward the weights above with vm.exp (vm.exp2).
LOGADDEXP_RANGE = 700.0
LOG2E = 1.4426950408889634


@jit
def difference(x, y):
    return x - y


@jit
def logaddexp_fwd_vec(x, y):
    a, b = np.float64(x), np.float64(y)  # (numba's float() keeps a float32 a float32)
    return max(a, b) + vm.log1p_unit(vm.exp(-abs(a - b)))


@jit
def logaddexp_bwd_x_vec(g, x, y, out):
    return g / (1.0 + vm.exp(np.float64(y) - np.float64(x)))


@jit
def logaddexp_bwd_y_vec(g, x, y, out):
    return g / (1.0 + vm.exp(np.float64(x) - np.float64(y)))


@jit
def logaddexp2_fwd_vec(x, y):
    a, b = np.float64(x), np.float64(y)
    return max(a, b) + vm.log1p_unit(vm.exp2(-abs(a - b))) * LOG2E


@jit
def logaddexp2_bwd_x_vec(g, x, y, out):
    return g / (1.0 + vm.exp2(np.float64(y) - np.float64(x)))


@jit
def logaddexp2_bwd_y_vec(g, x, y, out):
    return g / (1.0 + vm.exp2(np.float64(x) - np.float64(y)))


@jit
def fmax_fwd(x, y):
    if x != x:
        return y
    if y != y:
        return x
    return x if x >= y else y


@jit
def fmax_bwd_x(g, x, y, out):
    # the gradient goes where the value came from: the other operand is NaN, or this one wins
    return select(y != y, g, select(x > y, g, select(x == y, 0.5 * g, 0.0 * g)))


@jit
def fmax_bwd_y(g, x, y, out):
    # the gradient goes where the value came from: the other operand is NaN, or this one wins
    return select(x != x, g, select(y > x, g, select(x == y, 0.5 * g, 0.0 * g)))


@jit
def fmin_fwd(x, y):
    if x != x:
        return y
    if y != y:
        return x
    return x if x <= y else y


@jit
def fmin_bwd_x(g, x, y, out):
    # the gradient goes where the value came from: the other operand is NaN, or this one wins
    return select(y != y, g, select(x < y, g, select(x == y, 0.5 * g, 0.0 * g)))


@jit
def fmin_bwd_y(g, x, y, out):
    # the gradient goes where the value came from: the other operand is NaN, or this one wins
    return select(x != x, g, select(y < x, g, select(x == y, 0.5 * g, 0.0 * g)))


@jit
def remainder_fwd(x, y):
    return np.remainder(x, y)


@jit
def remainder_bwd_y(g, x, y, out):
    # out = x - floor(x / y) * y, piecewise linear in y between the jumps
    return -g * np.floor(x / y)


ARCTAN2 = Op(
    "arctan2",
    Kind.BINARY,
    arctan2_fwd,
    (arctan2_bwd_x, arctan2_bwd_y),
    "angle of the point (y=x1, x=x2)",
    domain=((-2.0, 2.0), (0.5, 2.0)),
    aliases=("atan2",),
)


HYPOT = Op(
    "hypot",
    Kind.BINARY,
    hypot_fwd,
    (hypot_bwd_x, hypot_bwd_y),
    "sqrt(x**2 + y**2)",
    domain=(0.3, 2.0),
)


LOGADDEXP = Op(
    "logaddexp",
    Kind.BINARY,
    logaddexp_fwd,
    (logaddexp_bwd_x, logaddexp_bwd_y),
    "log(exp(x) + exp(y)) without overflow",
    vector=(logaddexp_fwd_vec, (logaddexp_bwd_x_vec, logaddexp_bwd_y_vec)),
    vector_range=LOGADDEXP_RANGE,
    vector_gate=difference,
)


LOGADDEXP2 = Op(
    "logaddexp2",
    Kind.BINARY,
    logaddexp2_fwd,
    (logaddexp2_bwd_x, logaddexp2_bwd_y),
    "log2(2**x + 2**y) without overflow",
    vector=(logaddexp2_fwd_vec, (logaddexp2_bwd_x_vec, logaddexp2_bwd_y_vec)),
    vector_range=LOGADDEXP_RANGE,
    vector_gate=difference,
)


FMAX = Op(
    "fmax",
    Kind.BINARY,
    fmax_fwd,
    (fmax_bwd_x, fmax_bwd_y),
    "elementwise max ignoring NaN; ties split the gradient",
)


FMIN = Op(
    "fmin",
    Kind.BINARY,
    fmin_fwd,
    (fmin_bwd_x, fmin_bwd_y),
    "elementwise min ignoring NaN; ties split the gradient",
)


REMAINDER = Op(
    "remainder",
    Kind.BINARY,
    remainder_fwd,
    (add_bwd_x, remainder_bwd_y),
    "x mod y with the sign of y",
    domain=((2.5, 3.0), (1.55, 1.65)),
    aliases=("mod",),
    dunder=("__mod__", "__rmod__"),
)


FLOAT_POWER = Op(
    "float_power",
    Kind.COMPOSITE,
    None,
    None,
    "x1 ** x2 in float64",
    cases=lambda: [
        ("tensors", lambda m, x, y: m.float_power(x, y), [(3,), (3,)], {}),
        ("scalar exponent", lambda m, x: m.float_power(x, 2.5), [(2, 2)], {}),
    ],
    domain=((0.5, 2.0), (-1.5, 1.5)),
)


ROUND = Op(
    "round",
    Kind.COMPOSITE,
    None,
    None,
    "round to decimals (half to even); gradient 0",
    aliases=("around",),
    cases=lambda: [
        ("decimals=0", lambda m, x: m.round(x), [(5,)], {}),
        ("decimals=2", lambda m, x: m.round(x * 1.001, 2), [(5,)], {}),
    ],
    domain=(0.1, 0.4),
    method=True,
)
