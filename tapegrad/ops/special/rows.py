"""The rows of scipy.special's functions (formulas in ``gamma``, ``bessel``,
``incomplete``), and ``log_softmax``/``logsumexp``'s rows over the reduction kernels."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from ...kernels import vecmath as vm
from ..reduce.kernels import log_softmax_bwd, log_softmax_fwd
from ..table import ROWS, Kind, Op
from .bessel import (
    i0_bwd,
    i0_fwd,
    i0e_bwd,
    i0e_fwd,
    i1_bwd,
    i1_fwd,
    i1e_bwd,
    i1e_fwd,
    ive_bwd_x,
    ive_bwd_y,
    ive_fwd,
)
from .gamma import (
    ERF_VECTOR_RANGE,
    NDTR_VECTOR_RANGE,
    beta_bwd_x,
    beta_bwd_y,
    beta_fwd,
    betaln_bwd_x,
    betaln_bwd_y,
    betaln_fwd,
    digamma_bwd,
    digamma_fwd,
    erf_bwd,
    erf_bwd_vec,
    erf_fwd,
    erfc_bwd,
    erfc_bwd_vec,
    erfc_fwd,
    erfcinv_bwd,
    erfcinv_fwd,
    erfcx_bwd,
    erfcx_fwd,
    erfinv_bwd,
    erfinv_fwd,
    expit_bwd,
    expit_fwd,
    expit_fwd_vec,
    gamma_bwd,
    gamma_fwd,
    gammaln_bwd,
    gammaln_fwd,
    log_ndtr_bwd,
    log_ndtr_fwd,
    logit_bwd,
    logit_fwd,
    ndtr_bwd,
    ndtr_bwd_vec,
    ndtr_fwd,
    ndtri_bwd,
    ndtri_fwd,
    polygamma_bwd_x,
    polygamma_bwd_y,
    polygamma_fwd,
    xlog1py_bwd_x,
    xlog1py_bwd_y,
    xlog1py_fwd,
    xlogy_bwd_x,
    xlogy_bwd_y,
    xlogy_fwd,
)
from .incomplete import (
    betainc_bwd,
    betainc_fwd,
    gammainc_bwd_x,
    gammainc_bwd_y,
    gammainc_fwd,
    gammaincc_bwd_x,
    gammaincc_bwd_y,
    gammaincc_fwd,
)

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


ERF = Op(
    "erf",
    Kind.UNARY,
    erf_fwd,
    erf_bwd,
    "error function",
    namespace="special",
    vector=(erf_fwd, erf_bwd_vec),
    vector_range=ERF_VECTOR_RANGE,
)


ERFC = Op(
    "erfc",
    Kind.UNARY,
    erfc_fwd,
    erfc_bwd,
    "complementary error function",
    namespace="special",
    vector=(erfc_fwd, erfc_bwd_vec),
    vector_range=ERF_VECTOR_RANGE,
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


NDTR = Op(
    "ndtr",
    Kind.UNARY,
    ndtr_fwd,
    ndtr_bwd,
    "standard normal CDF",
    domain=(-6.0, 6.0),
    namespace="special",
    cuda=None,
    vector=(ndtr_fwd, ndtr_bwd_vec),
    vector_range=NDTR_VECTOR_RANGE,
)
LOG_NDTR = Op(
    "log_ndtr",
    Kind.UNARY,
    log_ndtr_fwd,
    log_ndtr_bwd,
    "log of the standard normal CDF, accurate in both tails",
    domain=(-45.0, 8.0),
    namespace="special",
    cuda=None,
)
NDTRI = Op(
    "ndtri",
    Kind.UNARY,
    ndtri_fwd,
    ndtri_bwd,
    "inverse of ndtr",
    domain=(0.001, 0.999),
    namespace="special",
    cuda=None,
)
ERFINV = Op(
    "erfinv",
    Kind.UNARY,
    erfinv_fwd,
    erfinv_bwd,
    "inverse of erf",
    domain=(-0.99, 0.99),
    namespace="special",
    cuda=None,
)
ERFCINV = Op(
    "erfcinv",
    Kind.UNARY,
    erfcinv_fwd,
    erfcinv_bwd,
    "inverse of erfc",
    domain=(0.01, 1.99),
    namespace="special",
    cuda=None,
)
ERFCX = Op(
    "erfcx",
    Kind.UNARY,
    erfcx_fwd,
    erfcx_bwd,
    "scaled complementary error function exp(x^2) erfc(x)",
    domain=(-3.0, 40.0),
    namespace="special",
    cuda=None,
)
GAMMA = Op(
    "gamma",
    Kind.UNARY,
    gamma_fwd,
    gamma_bwd,
    "Gamma(x); gradient Gamma(x) digamma(x)",
    domain=(0.3, 6.0),
    namespace="special",
    cuda=None,
)
BETALN = Op(
    "betaln",
    Kind.BINARY,
    betaln_fwd,
    (betaln_bwd_x, betaln_bwd_y),
    "log|B(a, b)|",
    domain=(0.3, 8.0),
    namespace="special",
    cuda=None,
)
BETA = Op(
    "beta",
    Kind.BINARY,
    beta_fwd,
    (beta_bwd_x, beta_bwd_y),
    "the beta function B(a, b)",
    domain=(0.3, 5.0),
    namespace="special",
    cuda=None,
)
XLOG1PY = Op(
    "xlog1py",
    Kind.BINARY,
    xlog1py_fwd,
    (xlog1py_bwd_x, xlog1py_bwd_y),
    "x * log1p(y), 0 where x == 0",
    domain=((-2.0, 2.0), (-0.7, 3.0)),
    namespace="special",
    cuda=None,
)


I0 = Op(
    "i0",
    Kind.UNARY,
    i0_fwd,
    i0_bwd,
    "modified Bessel function of order 0",
    domain=(-5.0, 5.0),
    namespace="special",
    cuda=None,
)
I1 = Op(
    "i1",
    Kind.UNARY,
    i1_fwd,
    i1_bwd,
    "modified Bessel function of order 1",
    domain=(-5.0, 5.0),
    namespace="special",
    cuda=None,
)
I0E = Op(
    "i0e",
    Kind.UNARY,
    i0e_fwd,
    i0e_bwd,
    "exponentially scaled I0: exp(-|x|) I0(x)",
    domain=(-40.0, 40.0),
    namespace="special",
    cuda=None,
)
I1E = Op(
    "i1e",
    Kind.UNARY,
    i1e_fwd,
    i1e_bwd,
    "exponentially scaled I1: exp(-|x|) I1(x)",
    domain=(-40.0, 40.0),
    namespace="special",
    cuda=None,
)
GAMMAINC = Op(
    "gammainc",
    Kind.BINARY,
    gammainc_fwd,
    (gammainc_bwd_x, gammainc_bwd_y),
    "regularized lower incomplete gamma P(a, x); differentiable in a (first order) and x",
    domain=((0.5, 6.0), (0.1, 8.0)),
    namespace="special",
    cuda=None,
    cases=lambda: _incomplete_gamma_cases("gammainc"),
)
GAMMAINCC = Op(
    "gammaincc",
    Kind.BINARY,
    gammaincc_fwd,
    (gammaincc_bwd_x, gammaincc_bwd_y),
    "regularized upper incomplete gamma Q(a, x); differentiable in a (first order) and x",
    domain=((0.5, 6.0), (0.1, 8.0)),
    namespace="special",
    cuda=None,
    cases=lambda: _incomplete_gamma_cases("gammaincc"),
)


IVE = Op(
    "ive",
    Kind.BINARY,
    ive_fwd,
    (ive_bwd_x, ive_bwd_y),
    "exponentially scaled modified Bessel function exp(-|z|) I_v(z) of real order v >= 0; "
    "differentiable in v (first order) and z",
    domain=((0.5, 6.0), (0.2, 40.0)),
    namespace="special",
    cuda=None,
    cases=lambda: _ive_cases(),
)
BETAINC = Op(
    "betainc",
    Kind.ARRAY,
    betainc_fwd,
    betainc_bwd,
    "regularized incomplete beta function I_x(a, b); differentiable in a, b and x",
    namespace="special",
    cases=lambda: _betainc_cases(),
)


def _ive_cases() -> list:
    """The order a constant (these run at every order): integer, fractional, an array;
    v and z both differentiated (first order only)."""
    f = lambda m: _special(m).ive  # noqa: E731
    return [
        ("v=0", lambda m, x: f(m)(0.0, x * 3.0 + 4.0), [(5,)], {}),
        ("v=2.5, 2-D", lambda m, x: f(m)(2.5, x + 2.0), [(2, 3)], {}),
        ("v=1, negative z", lambda m, x: f(m)(1.0, x - 3.0), [(4,)], {}),
        ("v array", lambda m, x: f(m)(np.array([0.3, 1.0, 7.5], x.dtype), x + 2.5), [(2, 3)], {}),
        ("v and z, first order", lambda m, v, z: f(m)(v, z), [(4,), (4,)], {}),
    ]


def _betainc_cases() -> list:
    """a, b and x all differentiated; both sides of the switch to 1 - I_(1-x)(b, a)."""
    f = lambda m: _special(m).betainc  # noqa: E731
    return [
        (
            "a, b, x",
            lambda m, a, b, x: f(m)(a * a + 0.5, b * b + 0.8, 0.5 + 0.4 * m.tanh(x)),
            [(5,), (5,), (5,)],
            {},
        ),
        (
            "broadcast, near 1",
            lambda m, a, b, x: f(m)(a * a + 2.0, b * b + 0.3, 0.9 + 0.05 * m.tanh(x)),
            [(2, 1), (3,), (2, 3)],
            {},
        ),
    ]


def _incomplete_gamma_cases(name: str) -> list:
    """The series side, the fraction side, an array of orders (a constant: these run at
    every order); a and x both differentiated (first order only: tests/test_higher.py
    leaves out the cases labelled so)."""
    f = lambda m: getattr(_special(m), name)  # noqa: E731
    return [
        ("a=2.5", lambda m, x: f(m)(2.5, x * 2.0 + 4.5), [(5,)], {}),
        ("a=0.7, 2-D", lambda m, x: f(m)(0.7, x + 2.5), [(2, 3)], {}),
        ("a array", lambda m, x: f(m)(np.array([0.5, 3.0, 9.0], x.dtype), x + 2.5), [(2, 3)], {}),
        ("a and x, first order", lambda m, a, x: f(m)(a, x * 2.0), [(4,), (4,)], {}),
    ]


def _special(m: Any) -> Any:
    """scipy.special next to numpy; next to tapegrad.numpy, the public functions of the
    special rows this family's cases call (each row's front end)."""
    if m is np:
        import scipy.special

        return scipy.special
    return types.SimpleNamespace(
        **{op.name: op.front for op in ROWS if op.namespace == "special" and op.front}
    )


MULTIGAMMALN = Op(
    "multigammaln",
    Kind.COMPOSITE,
    None,
    None,
    "log of the multivariate gamma function of dimension d (NaN where a <= (d - 1) / 2)",
    namespace="special",
    domain=(0.5, 4.0),
    cases=lambda: [
        ("d=3", lambda m, x: _special(m).multigammaln(x + 1.5, 3), [(4,)], {}),
        ("d=1, 2-D", lambda m, x: _special(m).multigammaln(x, 1), [(2, 3)], {}),
    ],
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
    assigns=True,
    cases=_softmax_cases("log_softmax"),
    namespace="special",
)
