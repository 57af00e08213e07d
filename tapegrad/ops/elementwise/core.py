"""Elementwise rows: NumPy's operators (``+ - * / **``, comparisons) and the functions
most models use (``exp log sin cos tanh sqrt abs``...), each as scalar formulas and a
row.

Each backward formula has the full signature ``(g, x, out)`` (unary) or
``(g, x, y, out)`` (binary) and returns the contribution to *one* input's gradient;
the adapter accumulates it, reducing over broadcast axes. Unused arguments cost
nothing (LLVM drops them) and tell the table what the op saves.
"""

from __future__ import annotations

import numpy as np

from ..._jit import jit
from ...kernels import vecmath as vm
from ..table import Kind, Op
from ..vocabulary import power_less_one, select


@jit
def add_fwd(x, y):
    return x + y


@jit
def add_bwd_x(g, x, y, out):
    return g


@jit
def add_bwd_y(g, x, y, out):
    return g


@jit
def sub_fwd(x, y):
    return x - y


@jit
def sub_bwd_y(g, x, y, out):
    return -g


@jit
def mul_fwd(x, y):
    return x * y


@jit
def mul_bwd_x(g, x, y, out):
    return g * y


@jit
def mul_bwd_y(g, x, y, out):
    return g * x


@jit
def truediv_fwd(x, y):
    return x / y


@jit
def truediv_bwd_x(g, x, y, out):
    return g / y


@jit
def truediv_bwd_y(g, x, y, out):
    return -g * out / y


@jit
def pow_fwd(x, y):
    # x ** 2 (the squares of every loss) as a product: the same correctly rounded value,
    # without a libm pow call that keeps the loop scalar (~20 ns an element)
    if y == 2:
        return x * x
    return x**y


@jit
def pow_bwd_x(g, x, y, out):
    # d/dx x^y = y x^(y-1); 0 at y == 0 and x == 0 (not 0 * inf), as in PyTorch. Only
    # there: at y == 0 elsewhere the product is 0 by itself, and its derivative in y,
    # x^(y-1) (the mixed second derivative), must survive.
    return select((y == 0) & (x == 0), 0.0 * g, g * y * power_less_one(x, y, out))


@jit
def pow_bwd_y(g, x, y, out):
    # d/dy x^y = x^y log x. At x == 0 with y >= 0 the limit is 0 (not 0 * -inf); for
    # x < 0 the log is NaN, as it is in PyTorch: a real power of a negative base has
    # no derivative in y.
    d = g * out * np.log(x)
    return select(x == 0, select(y >= 0, 0.0 * g, d), d)


@jit
def maximum_fwd(x, y):
    return x if (x > y or x != x) else y


@jit
def maximum_bwd_x(g, x, y, out):
    return select(x > y, g, select(x == y, 0.5 * g, 0.0 * g))


@jit
def maximum_bwd_y(g, x, y, out):
    return select(y > x, g, select(x == y, 0.5 * g, 0.0 * g))


@jit
def minimum_fwd(x, y):
    return x if (x < y or x != x) else y


@jit
def minimum_bwd_x(g, x, y, out):
    return select(x < y, g, select(x == y, 0.5 * g, 0.0 * g))


@jit
def minimum_bwd_y(g, x, y, out):
    return select(y < x, g, select(x == y, 0.5 * g, 0.0 * g))


ADD = Op(
    "add",
    Kind.BINARY,
    add_fwd,
    (add_bwd_x, add_bwd_y),
    "x + y",
    dunder=("__add__", "__radd__"),
    arith=True,
    passes=(0, 1),
    scalar_parallel=True,
)


SUB = Op(
    "subtract",
    Kind.BINARY,
    sub_fwd,
    (add_bwd_x, sub_bwd_y),
    "x - y",
    dunder=("__sub__", "__rsub__"),
    arith=True,
    passes=(0,),
    scalar_parallel=True,
)


MUL = Op(
    "multiply",
    Kind.BINARY,
    mul_fwd,
    (mul_bwd_x, mul_bwd_y),
    "x * y",
    dunder=("__mul__", "__rmul__"),
    arith=True,
    scalar_parallel=True,
)


TRUEDIV = Op(
    "true_divide",
    Kind.BINARY,
    truediv_fwd,
    (truediv_bwd_x, truediv_bwd_y),
    "x / y",
    domain=((-2.0, 2.0), (0.5, 2.0)),
    aliases=("divide",),
    dunder=("__truediv__", "__rtruediv__"),
    arith=True,
    scalar_parallel=True,
)


POW = Op(
    "power",
    Kind.BINARY,
    pow_fwd,
    (pow_bwd_x, pow_bwd_y),
    "x ** y (tensor**scalar, scalar**tensor, tensor**tensor)",
    domain=((0.5, 2.0), (-1.5, 1.5)),
    aliases=("pow",),
    dunder=("__pow__", "__rpow__"),
    scalar_parallel=True,
)


MAXIMUM = Op(
    "maximum",
    Kind.BINARY,
    maximum_fwd,
    (maximum_bwd_x, maximum_bwd_y),
    "elementwise max; ties split the gradient equally",
    scalar_parallel=True,
)


MINIMUM = Op(
    "minimum",
    Kind.BINARY,
    minimum_fwd,
    (minimum_bwd_x, minimum_bwd_y),
    "elementwise min; ties split the gradient equally",
    scalar_parallel=True,
)


@jit
def neg_fwd(x):
    return -x


@jit
def neg_bwd(g, x, out):
    return -g


@jit
def exp_fwd(x):
    return np.exp(x)


@jit
def exp_bwd(g, x, out):
    return g * out


@jit
def log_fwd(x):
    return np.log(x)


@jit
def log_bwd(g, x, out):
    return g / x


@jit
def sin_fwd(x):
    return np.sin(x)


@jit
def sin_bwd(g, x, out):
    return g * np.cos(x)


@jit
def cos_fwd(x):
    return np.cos(x)


@jit
def cos_bwd(g, x, out):
    return -g * np.sin(x)


@jit
def tanh_fwd(x):
    return np.tanh(x)


@jit
def tanh_bwd(g, x, out):
    return g * (1 - out * out)


@jit
def sqrt_fwd(x):
    return np.sqrt(x)


@jit
def sqrt_bwd(g, x, out):
    return g * 0.5 / out  # inf at 0, the derivative's limit (as in PyTorch)


@jit
def abs_fwd(x):
    return np.abs(x)


@jit
def abs_bwd(g, x, out):
    # sign(0) = 0: the subgradient 0 at the kink, as PyTorch and JAX choose.
    return g * np.sign(x)


@jit
def exp_fwd_vec(x):
    return vm.exp(x)


@jit
def sin_fwd_vec(x):
    return vm.sin(x)


@jit
def sin_bwd_vec(g, x, out):
    return g * vm.cos(x)


@jit
def cos_fwd_vec(x):
    return vm.cos(x)


@jit
def cos_bwd_vec(g, x, out):
    return -g * vm.sin(x)


@jit
def tanh_fwd_vec(x):
    return vm.tanh(x)


@jit
def expm1_fwd_vec(x):
    return vm.expm1(x)


RANGE = vm.RANGE


NEG = Op("negative", Kind.UNARY, neg_fwd, neg_bwd, "-x", dunder=("__neg__",))


EXP = Op(
    "exp",
    Kind.UNARY,
    exp_fwd,
    exp_bwd,
    "e ** x",
    vector=(exp_fwd_vec, exp_bwd),
    vector_range=RANGE["exp"],
)


LOG = Op("log", Kind.UNARY, log_fwd, log_bwd, "natural logarithm", domain=(0.2, 3.0))


SIN = Op(
    "sin",
    Kind.UNARY,
    sin_fwd,
    sin_bwd,
    "sine",
    vector=(sin_fwd_vec, sin_bwd_vec),
    vector_range=min(RANGE["sin"], RANGE["cos"]),
)


COS = Op(
    "cos",
    Kind.UNARY,
    cos_fwd,
    cos_bwd,
    "cosine",
    vector=(cos_fwd_vec, cos_bwd_vec),
    vector_range=min(RANGE["sin"], RANGE["cos"]),
)


TANH = Op(
    "tanh",
    Kind.UNARY,
    tanh_fwd,
    tanh_bwd,
    "hyperbolic tangent",
    vector=(tanh_fwd_vec, tanh_bwd),
    vector_range=RANGE["tanh"],
)


SQRT = Op("sqrt", Kind.UNARY, sqrt_fwd, sqrt_bwd, "square root", domain=(0.2, 3.0))


@jit
def safe_sqrt_bwd(g, x, out):
    # 0 where x == 0 (the subgradient norms take at the origin) instead of g * inf.
    # Written so that it also holds recorded (higher order): 1 / (out + [x == 0]) is
    # finite everywhere and the mask multiplies, so no inf meets a zero (a where()
    # would still send 0 * inf = NaN back through the branch it did not take).
    return g * 0.5 / (out + (x == 0)) * (x != 0)


SAFE_SQRT = Op(
    "safe_sqrt",
    Kind.UNARY,
    sqrt_fwd,
    safe_sqrt_bwd,
    "square root whose gradient at 0 is 0 (the 2-norm's, one node)",
    domain=(0.2, 3.0),
    namespace="internal",
)


ABS = Op(
    "absolute",
    Kind.UNARY,
    abs_fwd,
    abs_bwd,
    "|x|; gradient 0 at x == 0",
    aliases=("abs", "fabs"),
    dunder=("__abs__",),
)


@jit
def less_fwd(x, y):
    return x < y


@jit
def less_equal_fwd(x, y):
    return x <= y


@jit
def greater_fwd(x, y):
    return x > y


@jit
def greater_equal_fwd(x, y):
    return x >= y


@jit
def equal_fwd(x, y):
    return x == y


@jit
def not_equal_fwd(x, y):
    return x != y


LESS = Op("less", Kind.COMPARE, less_fwd, None, "x < y", differentiable=False, dunder=("__lt__",))


LESS_EQUAL = Op(
    "less_equal",
    Kind.COMPARE,
    less_equal_fwd,
    None,
    "x <= y",
    differentiable=False,
    dunder=("__le__",),
)


GREATER = Op(
    "greater", Kind.COMPARE, greater_fwd, None, "x > y", differentiable=False, dunder=("__gt__",)
)


GREATER_EQUAL = Op(
    "greater_equal",
    Kind.COMPARE,
    greater_equal_fwd,
    None,
    "x >= y",
    differentiable=False,
    dunder=("__ge__",),
)


EQUAL = Op(
    "equal", Kind.COMPARE, equal_fwd, None, "x == y", differentiable=False, dunder=("__eq__",)
)


NOT_EQUAL = Op(
    "not_equal",
    Kind.COMPARE,
    not_equal_fwd,
    None,
    "x != y",
    differentiable=False,
    dunder=("__ne__",),
)
