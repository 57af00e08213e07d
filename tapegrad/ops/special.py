"""``tapegrad.special``: SciPy's special functions (scipy.special names).

Primitives with stable formulas (``expit`` never overflows, ``xlogy`` is 0 where
``x == 0``) and composites written in terms of other ops (``logsumexp`` shifts by the
max, ``softmax`` goes through ``log_softmax``, a row of its own: one node for the
classifier's loss instead of ten).
"""

from __future__ import annotations

import math
import types
from typing import Any

import numpy as np

from .._jit import jit
from ..kernels import vecmath as vm
from ..kernels.reduce import log_softmax_bwd, log_softmax_fwd
from .table import ROWS, Kind, Op
from .vocabulary import row_function, select

SQRT_PI_INV2 = 1.1283791670955126  # 2 / sqrt(pi)


@jit
def expit_fwd(x):
    # 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) for x < 0: no overflow either way
    if x >= 0:
        return 1 / (1 + np.exp(-x))
    e = np.exp(x)
    return e / (1 + e)


@jit
def expit_fwd_vec(x):
    return 1 / (1 + vm.exp(-x))


@jit
def expit_bwd(g, x, out):
    return g * out * (1 - out)


@jit
def logit_fwd(x):
    return np.log(x) - np.log1p(-x)


@jit
def logit_bwd(g, x, out):
    return g / (x * (1 - x))


@jit
def erf_fwd(x):
    return math.erf(x)


@jit
def erf_bwd(g, x, out):
    return g * SQRT_PI_INV2 * np.exp(-x * x)


@jit
def erfc_fwd(x):
    return math.erfc(x)


@jit
def erfc_bwd(g, x, out):
    return -g * SQRT_PI_INV2 * np.exp(-x * x)


@jit
def gammaln_fwd(x):
    return math.lgamma(x)


@jit
def digamma_fwd(x):
    """psi(x) = d/dx log|Gamma(x)|: reflection for x < 1/2, recurrence up to x >= 10,
    then the asymptotic series (error below 1e-15 there)."""
    if x <= 0 and x == np.floor(x):
        return np.nan
    shift = 0.0
    if x < 0.5:  # psi(x) = psi(1 - x) - pi / tan(pi x)
        shift = -np.pi / np.tan(np.pi * x)
        x = 1.0 - x
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    # sum_k B_2k / (2k x^2k), seven terms: the next is below 1e-16 at x >= 10
    f = 1.0 / (x * x)
    series = f * (
        1 / 12
        - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f * (1 / 132 - f * (691 / 32760 - f / 12)))))
    )
    return shift + acc + np.log(x) - 0.5 / x - series


# Bernoulli numbers B_2j / (2j)! for the Euler-Maclaurin tail of the Hurwitz zeta below
_EM = (
    1 / 12,
    -1 / 720,
    1 / 30240,
    -1 / 1209600,
    1 / 47900160,
    -691 / 1307674368000,
    1 / 74724249600,
    -3617 / 10670622842880000,
    43867 / 5109094217170944000,
    -174611 / 802857662698291200000,
)


@jit
def polygamma_fwd(n, x):
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for integer n >= 1 (digamma for n == 0).

    The Hurwitz zeta sum_k (x + k)^-s is summed directly until x + k >= 12 (this also
    covers negative non-integer x), then its tail by Euler-Maclaurin with ten Bernoulli
    terms: at a >= 12 the next term is below 1e-20 relative for s <= 12.
    """
    if n != np.floor(n) or n < 0:
        return np.nan
    if n == 0:
        return digamma_fwd(x)
    if x <= 0 and x == np.floor(x):  # a pole
        return np.inf if n % 2 == 1 else np.nan
    s = n + 1.0
    head = 0.0
    while x < 12.0:
        head += x**-s
        x += 1.0
    tail = x ** (1.0 - s) / (n) + 0.5 * x**-s
    rising = s  # s (s + 1) ... (s + 2j - 2)
    power = x ** (-s - 1.0)
    for j in range(10):
        tail += _EM[j] * rising * power
        rising *= (s + 2 * j + 1) * (s + 2 * j + 2)
        power /= x * x
    factorial = 1.0
    for k in range(2, int(n) + 1):
        factorial *= k
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * factorial * (head + tail)


polygamma = row_function("polygamma", polygamma_fwd, 2)
digamma = row_function("digamma", digamma_fwd, 1)


@jit
def digamma_bwd(g, x, out):
    return g * polygamma(1.0, x)


@jit
def polygamma_bwd_x(g, x, y, out):
    # x is the order n, an integer: no derivative (NaN, so that asking for one shows)
    return g * np.nan


@jit
def polygamma_bwd_y(g, x, y, out):
    return g * polygamma(x + 1.0, y)


@jit
def gammaln_bwd(g, x, out):
    return g * digamma(x)


@jit
def xlogy_fwd(x, y):
    return 0.0 * y if x == 0 else x * np.log(y)


@jit
def xlogy_bwd_x(g, x, y, out):
    # log(y); at x == 0 and y == 0 the product is 0 whatever x: gradient 0, not -inf
    d = g * np.log(y)
    return select(y == 0, select(x == 0, 0.0 * g, d), d)


@jit
def xlogy_bwd_y(g, x, y, out):
    return select(x == 0, 0.0 * g, g * x / y)


EXPIT = Op(
    "expit",
    Kind.UNARY,
    expit_fwd,
    expit_bwd,
    "logistic sigmoid 1 / (1 + exp(-x))",
    domain=(-4.0, 4.0),
    namespace="special",
    vector=(expit_fwd_vec, expit_bwd),
    vector_range=vm.RANGE["exp"],
)


LOGIT = Op(
    "logit",
    Kind.UNARY,
    logit_fwd,
    logit_bwd,
    "log(x / (1 - x))",
    domain=(0.1, 0.9),
    namespace="special",
)


ERF = Op("erf", Kind.UNARY, erf_fwd, erf_bwd, "error function", namespace="special")


ERFC = Op(
    "erfc", Kind.UNARY, erfc_fwd, erfc_bwd, "complementary error function", namespace="special"
)


GAMMALN = Op(
    "gammaln",
    Kind.UNARY,
    gammaln_fwd,
    gammaln_bwd,
    "log|Gamma(x)|; gradient digamma(x)",
    domain=(0.3, 4.0),
    namespace="special",
    cuda=None,  # digamma's series helper is not a CUDA device function
)


DIGAMMA = Op(
    "digamma",
    Kind.UNARY,
    digamma_fwd,
    digamma_bwd,
    "psi(x) = d/dx log|Gamma(x)|; gradient polygamma(1, x)",
    domain=(0.3, 4.0),
    namespace="special",
    aliases=("psi",),
    cuda=None,
)


def _polygamma_cases() -> list:
    f = lambda m: _special(m).polygamma  # noqa: E731
    return [
        ("n=1", lambda m, x: f(m)(1, x), [(5,)], {}),
        ("n=2, 2-D", lambda m, x: f(m)(2, x), [(2, 3)], {}),
        ("n=3, negative x", lambda m, x: f(m)(3, x * 0.1 - 1.5), [(4,)], {}),
        ("n as an array", lambda m, x: f(m)(np.array([1.0, 2.0], x.dtype), x), [(3, 2)], {}),
    ]


POLYGAMMA = Op(
    "polygamma",
    Kind.BINARY,
    polygamma_fwd,
    (polygamma_bwd_x, polygamma_bwd_y),
    "psi^(n)(x), the n-th derivative of digamma (integer n >= 0; no gradient in n)",
    domain=((1.0, 1.0), (0.3, 4.0)),
    namespace="special",
    cases=_polygamma_cases,
    cuda=None,
)


XLOGY = Op(
    "xlogy",
    Kind.BINARY,
    xlogy_fwd,
    (xlogy_bwd_x, xlogy_bwd_y),
    "x * log(y), 0 where x == 0",
    domain=((-2.0, 2.0), (0.3, 3.0)),
    namespace="special",
)


def _special(m: Any) -> Any:
    """scipy.special next to numpy; next to tapegrad.numpy, the public functions of the
    special rows this family's cases call (each row's front end)."""
    if m is np:
        import scipy.special

        return scipy.special
    return types.SimpleNamespace(
        **{op.name: op.front for op in ROWS if op.namespace == "special" and op.front}
    )


def _lse_cases() -> list:
    return [
        ("vector", lambda m, x: _special(m).logsumexp(x), [(5,)], {}),
        ("axis=1", lambda m, x: _special(m).logsumexp(x, axis=1), [(3, 4)], {}),
        (
            "axis=0 keepdims",
            lambda m, x: _special(m).logsumexp(x, axis=0, keepdims=True),
            [(3, 4)],
            {},
        ),
        (
            "weights b",
            lambda m, x, b: _special(m).logsumexp(x, axis=-1, b=b + 3.0),
            [(2, 3), (3,)],
            {},
        ),
        ("large values", lambda m, x: _special(m).logsumexp(x * 400.0), [(4,)], {}),
    ]


def _softmax_cases(name: str) -> Any:
    def cases() -> list:
        f = lambda m: getattr(_special(m), name)  # noqa: E731
        return [
            ("vector", lambda m, x: f(m)(x), [(5,)], {}),
            ("axis=-1", lambda m, x: f(m)(x, axis=-1), [(3, 4)], {}),
            ("axis=0", lambda m, x: f(m)(x, axis=0), [(3, 4)], {}),
            ("large values", lambda m, x: f(m)(x * 300.0, axis=-1), [(2, 3)], {}),
        ]

    return cases


LOGSUMEXP = Op(
    "logsumexp",
    Kind.COMPOSITE,
    None,
    None,
    "log of summed exponentials, shifted by the max (axis, b, keepdims)",
    cases=_lse_cases,
    namespace="special",
)


SOFTMAX = Op(
    "softmax",
    Kind.COMPOSITE,
    None,
    None,
    "exp(x) / sum(exp(x)) along axis",
    cases=_softmax_cases("softmax"),
    namespace="special",
)


LOG_SOFTMAX = Op(
    "log_softmax",
    Kind.ARRAY,
    log_softmax_fwd,
    log_softmax_bwd,
    "x - logsumexp(x) along axis, one node",
    array_saves=("out",),
    cases=_softmax_cases("log_softmax"),
    namespace="special",
)
