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
def digamma(x):
    """psi(x) = d/dx log|Gamma(x)|: reflection for x < 1/2, recurrence up to x >= 6,
    then the asymptotic series (error below 1e-12 there)."""
    if x <= 0 and x == np.floor(x):
        return np.nan
    shift = 0.0
    if x < 0.5:  # psi(x) = psi(1 - x) - pi / tan(pi x)
        shift = -np.pi / np.tan(np.pi * x)
        x = 1.0 - x
    acc = 0.0
    while x < 6.0:
        acc -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))))
    return shift + acc + np.log(x) - 0.5 / x - series


@jit
def gammaln_bwd(g, x, out):
    return g * digamma(x)


@jit
def xlogy_fwd(x, y):
    return 0.0 * y if x == 0 else x * np.log(y)


@jit
def xlogy_bwd_x(g, x, y, out):
    # log(y); at x == 0 and y == 0 the product is 0 whatever x: gradient 0, not -inf
    if x == 0 and y == 0:
        return 0.0 * g
    return g * np.log(y)


@jit
def xlogy_bwd_y(g, x, y, out):
    return 0.0 * g if x == 0 else g * x / y


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
