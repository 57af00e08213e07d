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

from .._jit import jit, jitable
from ..kernels import vecmath as vm
from ..kernels.loops import ux
from ..kernels.reduce import log_softmax_bwd, log_softmax_fwd
from ..layout import OK, header, in_data, in_grad, needs_grad, node_ip, out_data, out_grad
from .table import ROWS, Kind, Op
from .vocabulary import first_order, row_function, select

SQRT_PI_INV2 = 1.1283791670955126  # 2 / sqrt(pi)
SQRT_2_OVER_PI = 0.7978845608028654  # sqrt(2 / pi)


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


# Vector backward formulas of the Gaussian rows: the same expressions with the
# vectorisable exp (kernels/vecmath.py), for |x| up to where the argument of exp stays
# above -708 (beyond, a block takes the libm formulas, which underflow gradually). The
# forwards stay the libm erf/erfc: a vectorised erf to an ulp is a libm of its own.
ERF_VECTOR_RANGE = 26.0  # x^2 <= 676
NDTR_VECTOR_RANGE = 37.0  # x^2 / 2 + log(2 pi) / 2 <= 685.4


@jit
def erf_bwd_vec(g, x, out):
    return g * SQRT_PI_INV2 * vm.exp(-x * x)


@jit
def erfc_fwd(x):
    return math.erfc(x)


@jit
def erfc_bwd(g, x, out):
    return -g * SQRT_PI_INV2 * np.exp(-x * x)


@jit
def erfc_bwd_vec(g, x, out):
    return -g * SQRT_PI_INV2 * vm.exp(-x * x)


@jit
def gammaln_fwd(x):
    # SciPy's gammaln(-inf) is -inf (C's lgamma says +inf): |Gamma| between the poles
    # tends to 0 as x -> -inf
    if x == -np.inf:
        return -np.inf
    return math.lgamma(x)


# B_2k / 2k, the coefficients of digamma's asymptotic series (digamma_fwd and, term by
# term, _digamma_difference)
_PSI_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


@jit
def digamma_fwd(x):
    """psi(x) = d/dx log|Gamma(x)|: reflection for x < 1/2, recurrence up to x >= 10,
    then the asymptotic series (error below 1e-15 there)."""
    if x == 0.0:  # the pole at 0, approached from 0's side (SciPy's values)
        return -math.copysign(np.inf, x)
    if x < 0 and x == np.floor(x):
        return np.nan
    shift = 0.0
    if x < 0.5:  # psi(x) = psi(1 - x) - pi / tan(pi x)
        shift = -np.pi / np.tan(np.pi * x)
        x = 1.0 - x
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    # sum_k B_2k / (2k x^2k), seven terms: the next is below 1e-16 at x >= 10 (Horner)
    f = 1.0 / (x * x)
    series = 0.0
    for k in range(len(_PSI_SERIES) - 1, -1, -1):
        series = (series + _PSI_SERIES[k]) * f
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
    # 0 where x == 0, for every y but NaN (SciPy's values: xlogy(0, inf) is 0)
    if x == 0:
        return y if y != y else 0.0 * x
    return x * np.log(y)


@jit
def xlogy_bwd_x(g, x, y, out):
    # log(y); at x == 0 and y == 0 the product is 0 whatever x: gradient 0, not -inf
    d = g * np.log(y)
    return select(y == 0, select(x == 0, 0.0 * g, d), d)


@jit
def xlogy_bwd_y(g, x, y, out):
    # x / y, 0 where both are 0; at x == 0 alone x / y is 0 by itself, and its
    # derivative in x (the mixed second derivative, 1 / y) must survive
    return select((x == 0) & (y == 0), 0.0 * g, g * x / y)


# --- normal distribution functions, inverses, gamma and beta ----------------------

SQRT2 = 1.4142135623730951
LOG_SQRT_2PI = 0.9189385332046728  # log(2 pi) / 2
SQRT_2PI = 2.5066282746310002
SQRT_PI_HALF = 0.886226925452758  # sqrt(pi) / 2


@jit
def ndtr_fwd(x):
    """The standard normal CDF, erfc(-x / sqrt 2) / 2: relative accuracy in both tails."""
    return 0.5 * math.erfc(-x / SQRT2)


@jit
def ndtr_bwd(g, x, out):
    return g * np.exp(-0.5 * x * x - LOG_SQRT_2PI)


@jit
def ndtr_bwd_vec(g, x, out):
    return g * vm.exp(-0.5 * x * x - LOG_SQRT_2PI)


@jit
def log_ndtr_fwd(x):
    """log ndtr(x): log1p(-ndtr(-x)) above 0 (log near 1 would lose digits), log(ndtr(x))
    down to -37, and below, where ndtr underflows, -x^2/2 - log(-x) - log(2 pi)/2 +
    log(sum_k (-1)^k (2k-1)!! / x^2k), six terms (1e-16 relative at -37)."""
    if x != x:
        return x
    if x >= 0.0:
        return math.log1p(-0.5 * math.erfc(x / SQRT2))
    if x > -37.0:
        return math.log(0.5 * math.erfc(-x / SQRT2))
    r2 = 1.0 / (x * x)
    series = 1.0
    term = 1.0
    for k in range(1, 7):
        term *= -(2.0 * k - 1.0) * r2
        series += term
    return -0.5 * x * x - math.log(-x) - LOG_SQRT_2PI + math.log(series)


@jit
def log_ndtr_bwd(g, x, out):
    # phi(x) / ndtr(x). Below 0 as sqrt(2/pi) / erfcx(-x / sqrt 2), the ratio with
    # e^(-x^2/2) cancelled: formed in logs, phi and ndtr each carry |x^2/2| ulps (34%
    # off at -1e8, exactly 1 from -1e9). Each branch's argument stays finite where the
    # other is taken, so the recorded (second) derivative has no inf times 0.
    neg = x < 0.0
    tail = SQRT_2_OVER_PI / erfcx(select(neg, -x, 0.0 * x) / SQRT2)
    near = np.exp(select(neg, 0.0 * x, -0.5 * x * x - LOG_SQRT_2PI - out))
    return g * select(neg, tail, near)


@jit
def ndtri_fwd(p):
    """The inverse of ndtr: for p <= 1/2 Newton's method on log ndtr(x) = log p (exact
    in the far tail, quadratic from Abramowitz and Stegun 26.2.23's start, |error| <
    4.5e-4); ndtri(p) = -ndtri(1 - p) above (1 - p is exact there)."""
    if p != p or p < 0.0 or p > 1.0:
        return np.nan
    if p == 0.0:
        return -np.inf
    if p == 1.0:
        return np.inf
    if p == 0.5:
        return 0.0
    sign = -1.0
    if p > 0.5:
        p = 1.0 - p
        sign = 1.0
    t = math.sqrt(-2.0 * math.log(p))
    x = -(
        t
        - (2.515517 + t * (0.802853 + t * 0.010328))
        / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)))
    )
    target = math.log(p)
    for _ in range(12):
        lp = log_ndtr_fwd(x)
        step = (lp - target) / math.exp(-0.5 * x * x - LOG_SQRT_2PI - lp)
        x -= step
        if abs(step) <= 1e-16 * max(1.0, abs(x)):
            break
    return -sign * x if sign > 0 else x


@jit
def ndtri_bwd(g, x, out):
    return g * SQRT_2PI * np.exp(0.5 * out * out)


@jit
def erfinv_fwd(y):
    """The inverse of erf: Newton's method on erf itself for |y| < 1/2 (from y sqrt(pi)/2,
    below the root: erf is concave there, so the steps increase monotonically), and
    -ndtri((1 - |y|) / 2) / sqrt 2 beyond (1 - |y| is exact there)."""
    if y != y or y < -1.0 or y > 1.0:
        return np.nan
    if y == 1.0 or y == -1.0:
        return y * np.inf
    ay = abs(y)
    if ay >= 0.5:
        x = -ndtri_fwd(0.5 * (1.0 - ay)) / SQRT2
    else:
        x = ay * SQRT_PI_HALF
        for _ in range(30):
            step = (math.erf(x) - ay) * SQRT_PI_HALF * math.exp(x * x)
            x -= step
            if abs(step) <= 1e-17 * x:
                break
    return x if y >= 0.0 else -x


@jit
def erfinv_bwd(g, x, out):
    return g * SQRT_PI_HALF * np.exp(out * out)


@jit
def erfcinv_fwd(z):
    """The inverse of erfc: -ndtri(z / 2) / sqrt 2 in the tails (z < 1/2, and by
    symmetry z > 3/2 with 2 - z exact), erfinv(1 - z) between (1 - z exact)."""
    if z != z or z < 0.0 or z > 2.0:
        return np.nan
    if z == 0.0:
        return np.inf
    if z == 2.0:
        return -np.inf
    if z < 0.5:
        return -ndtri_fwd(0.5 * z) / SQRT2
    if z > 1.5:
        return ndtri_fwd(0.5 * (2.0 - z)) / SQRT2
    return erfinv_fwd(1.0 - z)


@jit
def erfcinv_bwd(g, x, out):
    return -g * SQRT_PI_HALF * np.exp(out * out)


@jit
def erfcx_fwd(x):
    """exp(x^2) erfc(x), in float64 (exp(x^2) overflows float32 from x = 9.4): the
    product below 25 (7e-14 relative at most from exp's argument), the asymptotic
    series 1 / (x sqrt pi) sum_k (-1)^k (2k-1)!! / (2x^2)^k above (eight terms: 3e-17
    at 25)."""
    xd = np.float64(x)
    if xd < 25.0:
        return math.exp(xd * xd) * math.erfc(xd)
    r = 0.5 / (xd * xd)
    series = 1.0
    term = 1.0
    for k in range(1, 9):
        term *= -(2.0 * k - 1.0) * r
        series += term
    return series / (xd * 1.7724538509055159)


erfcx = row_function("erfcx", erfcx_fwd, 1)


@jit
def erfcx_bwd(g, x, out):
    # 2 x erfcx(x) - 2/sqrt(pi); past 10 by the derivative of erfcx's asymptotic series,
    # -1/(x^2 sqrt pi) sum_k (-1)^k (2k-1)!! (2k+1) / (2x^2)^k (24 terms: the 25th is
    # below 1e-25 at 10): the difference cancels there, 2x^2 times erfcx's own error
    # (log_ndtr's second derivative at -1e9 was 196.8 for -1; 6e-11 off at 24.9)
    big = x > 10.0
    xs = select(big, x, 10.0 + 0.0 * x)  # (a safe argument for the branch not taken)
    r = 0.5 / (xs * xs)
    term = 1.0 + 0.0 * xs
    total = term
    for k in range(1, 25):
        term = term * (-(2.0 * k - 1.0) * r)
        total = total + (2.0 * k + 1.0) * term
    far = -total * SQRT_PI_INV2 / (2.0 * xs * xs)
    return g * select(big, far, 2.0 * x * out - SQRT_PI_INV2)


@jit
def gamma_fwd(x):
    """Gamma(x); SciPy's values at the poles (inf at +-0 with 0's sign, NaN at the
    negative integers)."""
    if x == 0.0:
        return math.copysign(np.inf, x)
    if x < 0.0 and x == np.floor(x):
        return np.nan
    if x > 171.7:
        return np.inf
    return math.gamma(x)


@jit
def gamma_bwd(g, x, out):
    return g * out * digamma(x)


@jitable
def stirling_correction(x):
    """lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2) for x >= 10: the Stirling series
    1/(12x) - 1/(360x^3) + 1/(1260x^5) - 1/(1680x^7) + 1/(1188x^9), truncated below 2e-14."""
    r = 1.0 / (x * x)
    return (1.0 / 12 - r * (1.0 / 360 - r * (1.0 / 1260 - r * (1.0 / 1680 - r / 1188)))) / x


@jit
def _lgamma_ratio(a, b):
    """lgamma(b) - lgamma(a + b) for b >= 10 and a + b >= 10 (a of either sign), by
    Stirling's form with the log of the ratio as log1p: nothing cancels (the plain
    difference of lgammas is off by 13 for b = 1e15 in the t distribution's CDF)."""
    return (
        -(b - 0.5) * math.log1p(a / b)
        - a * math.log(a + b)
        + a
        + stirling_correction(b)
        - stirling_correction(a + b)
    )


@jit
def _beta_pole(a, b):
    """(log|B(a, b)|, sign of B) where a Gamma in B(a, b) has a pole (a, b or a + b a
    non-positive integer), as SciPy gives them: inf where a or b is 0; at a negative
    integer a (one that fits an int), the limit (-1)^b B(1 - a - b, b) where b is a
    positive integer below 1 - a (the two poles' residues), else inf; B = 0 where only
    a + b is a pole. (0.0, 0.0) where there is no pole."""
    if a == 0.0 or b == 0.0:
        return np.inf, 1.0
    if b < 0.0 and b == math.floor(b):
        a, b = b, a
    if a < 0.0 and a == math.floor(a):
        if a > -2147483648.0 and b > 0.0 and b == math.floor(b) and 1.0 - a - b > 0.0:
            return _betaln_positive(1.0 - a - b, b), (-1.0 if b % 2.0 == 1.0 else 1.0)
        return np.inf, 1.0
    if a + b <= 0.0 and a + b == math.floor(a + b):
        return -np.inf, 0.0
    return 0.0, 0.0


@jit
def _gamma_sign(x):
    """The sign of Gamma(x) off its poles: negative between -(2k+1) and -2k."""
    return -1.0 if x < 0.0 and math.floor(x) % 2.0 != 0.0 else 1.0


@jit
def _betaln_positive(a, b):
    """log B(a, b) for a, b > 0: lgamma(a) + lgamma(b) - lgamma(a + b) for small
    arguments; from 10 on, Stirling's form (``_lgamma_ratio``); SciPy's values at inf.
    (Its own function: ``_beta_pole`` needs it, and numba's cache cannot link a pair of
    functions that call each other.)"""
    if a > b:
        a, b = b, a
    if b == np.inf:  # (SciPy's NaN at a = b = inf)
        return -np.inf if a < np.inf else np.nan
    if b < 10.0:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    if a < 10.0:
        return math.lgamma(a) + _lgamma_ratio(a, b)
    return (
        0.5 * math.log(2.0 * math.pi)
        - (a - 0.5) * math.log1p(b / a)
        - (b - 0.5) * math.log1p(a / b)
        - 0.5 * math.log(a + b)
        + stirling_correction(a)
        + stirling_correction(b)
        - stirling_correction(a + b)
    )


@jit
def betaln_fwd(a, b):
    """log|B(a, b)|: ``_betaln_positive`` for positive arguments; SciPy's values at the
    poles (``_beta_pole``) and at infinite arguments; NaN wherever an argument is NaN."""
    if a != a or b != b:
        return np.nan
    if a > b:
        a, b = b, a
    if a > 0.0:
        return _betaln_positive(a, b)
    lb, sign = _beta_pole(a, b)
    if lb != 0.0 or sign != 0.0:
        return lb
    if b == np.inf:  # a < 0, not an integer: |B| grows without bound
        return np.inf
    if b >= 10.0 and a + b >= 10.0:
        return math.lgamma(a) + _lgamma_ratio(a, b)
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@jitable
def _digamma_difference(u, v):
    """digamma(u) - digamma(u + v). Where u and u + v are at least 10, from the asymptotic
    series term by term: -log1p(v/u) - v / (2 u (u + v)) - sum_k B_2k/2k u^-2k (1 - (1 +
    v/u)^-2k), each difference formed without cancelling (the two digammas are near
    log u: betaln's derivative in df/2 for t's df = 1e10 had the wrong sign). Plain
    arithmetic and words, so the recorded (second) derivative is this formula too."""
    w = u + v
    big = np.minimum(u, w) >= 10.0
    us = select(big, u, 10.0 + 0.0 * u)  # (safe arguments for the branch not taken)
    vs = select(big, v, 10.0 + 0.0 * v)
    lr = np.log1p(vs / us)
    inv2 = 1.0 / (us * us)
    power = inv2
    series = 0.0 * us
    for k in range(len(_PSI_SERIES)):
        series = series - _PSI_SERIES[k] * power * np.expm1(-2.0 * (k + 1) * lr)
        power = power * inv2
    far = -lr - vs / (2.0 * us * (us + vs)) - series
    return select(big, far, digamma(u) - digamma(w))


@jit
def betaln_bwd_x(g, x, y, out):
    return g * _digamma_difference(x, y)


@jit
def betaln_bwd_y(g, x, y, out):
    return g * _digamma_difference(y, x)


@jit
def beta_fwd(a, b):
    """B(a, b): exp(betaln) for positive arguments; otherwise the gamma ratio while the
    gammas are finite, else the sign of the ratio times exp(betaln). SciPy's values at
    the poles (``_beta_pole``); NaN wherever an argument is NaN."""
    if a != a or b != b:
        return np.nan
    if a > 0.0 and b > 0.0:
        return math.exp(_betaln_positive(a, b))
    lb, sign = _beta_pole(a, b)
    if lb != 0.0 or sign != 0.0:
        return sign * math.exp(lb)
    if abs(a) < 170.0 and abs(b) < 170.0 and abs(a + b) < 170.0:
        return gamma_fwd(a) * gamma_fwd(b) / gamma_fwd(a + b)
    sign = _gamma_sign(a) * _gamma_sign(b) * _gamma_sign(a + b)
    return sign * math.exp(betaln_fwd(a, b))


@jit
def beta_bwd_x(g, x, y, out):
    return g * out * _digamma_difference(x, y)


@jit
def beta_bwd_y(g, x, y, out):
    return g * out * _digamma_difference(y, x)


@jit
def xlog1py_fwd(x, y):
    if x == 0:  # as xlogy
        return y if y != y else 0.0 * x
    return x * np.log1p(y)


@jit
def xlog1py_bwd_x(g, x, y, out):
    # log1p(y); 0 where x == 0 and y == -1 (the product is 0 whatever x), as xlogy
    d = g * np.log1p(y)
    return select(y == -1, select(x == 0, 0.0 * g, d), d)


@jit
def xlog1py_bwd_y(g, x, y, out):
    return select((x == 0) & (y == -1), 0.0 * g, g * x / (1 + y))  # as xlogy's


# --- modified Bessel functions of orders 0 and 1, incomplete gamma ------------------


@jit
def _bessel_series(x, order):
    """I_order(|x|) for order 0 or 1 by its power series sum_k (x/2)^(2k+order) /
    (k! (k+order)!): every term positive (no cancellation), so the relative error is a
    few ulp per term; used below 30."""
    h = 0.5 * abs(x)
    q = h * h
    term = 1.0 if order == 0 else h
    total = term
    for k in range(1, 1000):  # about x terms; at x = 0 the first is all (I1(0) = 0)
        term *= q / (k * (k + order))
        total += term
        if term <= 1e-17 * total:
            break
    return total


@jit
def _bessel_scaled_asymptotic(x, order):
    """exp(-x) I_order(x) for x >= 30: 1 / sqrt(2 pi x) sum_k (-1)^k a_k / x^k with
    a_k = prod_{j<=k} (4 order^2 - (2j - 1)^2) / (k! 8^k); the terms shrink until k ~ 2x,
    below 1e-17 long before."""
    mu = 4.0 * order * order
    term = 1.0
    total = 1.0
    for k in range(1, 60):
        term *= -(mu - (2.0 * k - 1.0) ** 2) / (k * 8.0 * x)
        total += term
        if abs(term) < 1e-17 * abs(total):
            break
    return total / math.sqrt(2.0 * math.pi * x)


@jit
def i0e_fwd(x):
    """exp(-|x|) I0(x)."""
    ax = abs(x)
    if ax != ax:
        return x
    if ax < 30.0:
        return math.exp(-ax) * _bessel_series(ax, 0)
    return _bessel_scaled_asymptotic(ax, 0)


@jit
def i1e_fwd(x):
    """exp(-|x|) I1(x) (odd)."""
    ax = abs(x)
    if ax != ax:
        return x
    if ax < 30.0:
        r = math.exp(-ax) * _bessel_series(ax, 1)
    else:
        r = _bessel_scaled_asymptotic(ax, 1)
    return r if x >= 0 else -r


@jit
def i0_fwd(x):
    """I0(x); inf past ~713, as SciPy."""
    ax = abs(x)
    if ax < 30.0:
        return _bessel_series(ax, 0)
    if ax > 713.99:
        return np.inf
    return _bessel_scaled_asymptotic(ax, 0) * math.exp(ax)


@jit
def i1_fwd(x):
    ax = abs(x)
    if ax < 30.0:
        r = _bessel_series(ax, 1)
    elif ax > 713.99:
        r = np.inf
    else:
        r = _bessel_scaled_asymptotic(ax, 1) * math.exp(ax)
    return r if x >= 0 else -r


i1 = row_function("i1", i1_fwd, 1)
i0 = row_function("i0", i0_fwd, 1)
i1e = row_function("i1e", i1e_fwd, 1)
i0e = row_function("i0e", i0e_fwd, 1)


@jit
def i0_bwd(g, x, out):
    return g * i1(x)


@jit
def i1_bwd(g, x, out):
    # I1' = I0 - I1 / x, 1/2 at 0
    return g * select(x == 0, 0.5 + 0.0 * x, i0(x) - out / select(x == 0, 1.0 + 0.0 * x, x))


@jit
def i0e_bwd(g, x, out):
    # (e^-|x| I0)' = e^-|x| I1 - sign(x) e^-|x| I0
    return g * (i1e(x) - np.sign(x) * out)


@jit
def i1e_bwd(g, x, out):
    # (e^-|x| I1)' = e^-|x| I0 - e^-|x| I1 (1 / x + sign(x)), 1/2 at 0
    safe = select(x == 0, 1.0 + 0.0 * x, x)
    return g * select(x == 0, 0.5 + 0.0 * x, i0e(x) - out * (1.0 / safe + np.sign(x)))


@jit
def _ive_series(v, z):
    """exp(-z) I_v(z), z > 0, by the power series sum_k (z/2)^(2k+v) / (k! Gamma(k+v+1)):
    positive terms (no cancellation), summed from 1 and scaled at the end in logs; the
    partial sum is rescaled when it grows past 1e250 (large z), so nothing overflows."""
    q = 0.25 * z * z
    log_scale = v * math.log(0.5 * z) - math.lgamma(v + 1.0) - z
    term = 1.0
    total = 1.0
    for k in range(1, 1000000):
        term *= q / (k * (k + v))
        total += term
        if term < 1e-17 * total:
            break
        if total > 1e250:
            term *= 1e-250
            total *= 1e-250
            log_scale += 250.0 * math.log(10.0)
    return math.exp(math.log(total) + log_scale)


@jit
def _ive_debye(v, z):
    """exp(-z) I_v(z) for large v by Debye's uniform expansion: with p = z / v,
    s = sqrt(1 + p^2), t = 1 / s, eta = s + log(p / (1 + s)),
    I_v(v p) ~ exp(v eta) / (sqrt(2 pi v) s^(1/2)) sum_k u_k(t) / v^k
    (Abramowitz & Stegun 9.7.7; u_0..u_4, so the error is about u_5 / v^5, below 1e-13 for
    v >= 50). The exponent v (eta - p) is formed before exp: nothing overflows."""
    p = z / v
    s = math.sqrt(1.0 + p * p)
    t = 1.0 / s
    t2 = t * t
    u1 = t * (3.0 - 5.0 * t2) / 24.0
    u2 = t2 * (81.0 - 462.0 * t2 + 385.0 * t2 * t2) / 1152.0
    u3 = t * t2 * (30375.0 - 369603.0 * t2 + 765765.0 * t2**2 - 425425.0 * t2**3) / 414720.0
    u4 = (
        t2
        * t2
        * (4465125.0 - 94121676.0 * t2 + 349922430.0 * t2**2 - 446185740.0 * t2**3
           + 185910725.0 * t2**4)
        / 39813120.0
    )  # fmt: skip
    series = 1.0 + u1 / v + u2 / v**2 + u3 / v**3 + u4 / v**4
    # v eta - z = v (s - p + log(p / (1 + s))), with s - p = 1 / (s + p) (no cancellation)
    exponent = v * (1.0 / (s + p) + math.log(p / (1.0 + s)))
    return math.exp(exponent) / math.sqrt(2.0 * math.pi * v * s) * series


@jit
def ive_fwd(v, z):
    """exp(-|z|) I_v(z), SciPy's ive, for real orders v >= 0 (and negative integers, I_-n
    = I_n); z < 0 only for integer v (I_n(-z) = (-1)^n I_n(z)); NaN elsewhere (SciPy
    gives complex or K-function terms there). The series up to z = 700, beyond it the
    asymptotic expansion while it converges fast (z > 2 v^2), else the rescaled series."""
    if v != v or z != z:
        return np.nan
    integer = v == math.floor(v)
    if v < 0.0:
        if not integer:
            return np.nan
        v = -v
    sign = 1.0
    if z < 0.0:
        if not integer:
            return np.nan
        z = -z
        sign = -1.0 if v % 2.0 == 1.0 else 1.0
    if z == 0.0:
        return sign * (1.0 if v == 0.0 else 0.0)
    if z == np.inf:
        return 0.0
    if z > 700.0 and z > 2.0 * v * v:
        return sign * _bessel_scaled_asymptotic(z, v)
    if z > 700.0 and v >= 50.0:
        return sign * _ive_debye(v, z)
    return sign * _ive_series(v, z)


ive = row_function("ive", ive_fwd, 2)


@jit
def _ive_series_dv(v, z):
    """d/dv of :func:`_ive_series`: each term (z/2)^(2k+v) / (k! Gamma(k+v+1)) carried
    with its derivative (the ratio q / (k (k + v)) has derivative -ratio / (k + v)), the
    scale's log-derivative log(z/2) - digamma(v + 1)."""
    q = 0.25 * z * z
    log_scale = v * math.log(0.5 * z) - math.lgamma(v + 1.0) - z
    dlog_scale = math.log(0.5 * z) - digamma_fwd(v + 1.0)
    term, dterm = 1.0, 0.0
    total, dtotal = 1.0, 0.0
    for k in range(1, 1000000):
        r = q / (k * (k + v))
        dterm = dterm * r - term * r / (k + v)
        term *= r
        total += term
        dtotal += dterm
        if term < 1e-17 * total and abs(dterm) <= 1e-17 * abs(dtotal):
            break
        if total > 1e250:
            term *= 1e-250
            dterm *= 1e-250
            total *= 1e-250
            dtotal *= 1e-250
            log_scale += 250.0 * math.log(10.0)
    value = math.exp(math.log(total) + log_scale)
    return value * (dlog_scale + dtotal / total)


@jit
def _ive_hankel_dv(v, z):
    """d/dv of Hankel's series: term_k = term_(k-1) c_k with c_k = -(4v^2 - (2k-1)^2) /
    (8kz), so dc_k / dv = -v / (kz)."""
    mu = 4.0 * v * v
    term, dterm = 1.0, 0.0
    total, dtotal = 1.0, 0.0
    for k in range(1, 60):
        c = -(mu - (2.0 * k - 1.0) ** 2) / (k * 8.0 * z)
        dterm = dterm * c - term * v / (k * z)
        term *= c
        total += term
        dtotal += dterm
        if abs(term) < 1e-17 * abs(total) and abs(dterm) <= 1e-17 * (abs(dtotal) + 1e-300):
            break
    return dtotal / math.sqrt(2.0 * math.pi * z)


@jit
def _ive_debye_dv(v, z):
    """d/dv of :func:`_ive_debye` at fixed z: with p = z / v, the exponent's derivative is
    log(p / (1 + s)) (d eta / dp = s / p), the prefactor's -1/(2v) + p^2 / (2 v s^2), and
    the series' terms u_k(t) / v^k with dt/dv = p^2 t^3 / v."""
    p = z / v
    s = math.sqrt(1.0 + p * p)
    t = 1.0 / s
    t2 = t * t
    u = (
        1.0,
        t * (3.0 - 5.0 * t2) / 24.0,
        t2 * (81.0 - 462.0 * t2 + 385.0 * t2 * t2) / 1152.0,
        t * t2 * (30375.0 - 369603.0 * t2 + 765765.0 * t2**2 - 425425.0 * t2**3) / 414720.0,
        t2 * t2 * (4465125.0 - 94121676.0 * t2 + 349922430.0 * t2**2 - 446185740.0 * t2**3
                   + 185910725.0 * t2**4) / 39813120.0,
    )  # fmt: skip
    du = (
        0.0,
        (3.0 - 15.0 * t2) / 24.0,
        t * (162.0 - 1848.0 * t2 + 2310.0 * t2 * t2) / 1152.0,
        t2 * (91125.0 - 1848015.0 * t2 + 5360355.0 * t2**2 - 3828825.0 * t2**3) / 414720.0,
        t * t2 * (17860500.0 - 564730056.0 * t2 + 2799379440.0 * t2**2 - 4461857400.0 * t2**3
                  + 2230928700.0 * t2**4) / 39813120.0,
    )  # fmt: skip
    dt = p * p * t * t2 / v
    series, dseries = 0.0, 0.0
    vk = 1.0
    for k in range(5):
        series += u[k] / vk
        dseries += du[k] * dt / vk - k * u[k] / (vk * v)
        vk *= v
    exponent = v * (1.0 / (s + p) + math.log(p / (1.0 + s)))
    pre = math.exp(exponent) / math.sqrt(2.0 * math.pi * v * s)
    dlog_pre = math.log(p / (1.0 + s)) - 0.5 / v + 0.5 * p * p / (v * s * s)
    return pre * (series * dlog_pre + dseries)


@jit
def ive_dv_scalar(v, z):
    """d ive(v, z) / dv for v >= 0 and z >= 0 (the regimes of :func:`ive_fwd`); NaN for
    negative orders or arguments, where the real function is not smooth in v."""
    if v != v or z != z or v < 0.0 or z < 0.0:
        return np.nan
    if z == 0.0 or z == np.inf:
        return 0.0
    if z > 700.0 and z > 2.0 * v * v:
        return _ive_hankel_dv(v, z)
    if z > 700.0 and v >= 50.0:
        return _ive_debye_dv(v, z)
    return _ive_series_dv(v, z)


ive_dv = first_order("ive_dv", ive_dv_scalar, 2, "the derivative of ive in its order v")


@jit
def ive_bwd_x(g, x, y, out):
    # d/dv: the differentiated series (x is the order here)
    return g * ive_dv(x, y)


@jit
def ive_bwd_y(g, x, y, out):
    # (e^-|z| I_v)' = e^-|z| (I_{v+1} + (v / z) I_v) - sign(z) e^-|z| I_v; at z = 0 the
    # limit: 1/2 for v = 1, 0 for v = 0 or v > 1, inf for 0 < v < 1
    # (a negative integer order -n is I_n: the formula with |v|)
    v = np.abs(x)
    safe = select(y == 0, 1.0 + 0.0 * y, y)
    inner = ive(v + 1.0, y) + (v / safe - np.sign(y)) * out
    at0 = select(
        v == 1, 0.5 + 0.0 * y, select(v < 1, select(v == 0, 0.0 * y, np.inf + 0.0 * y), 0.0 * y)
    )
    return g * select(y == 0, at0, inner)


@jitable
def _log_gamma_density(a, x):
    """log(x^(a-1) e^-x / Gamma(a)), the derivative of P(a, x) in x. From a = 10 on,
    Stirling's form (a - 1) log1p(t) - a t - log(2 pi a) / 2 - stirling_correction(a)
    with t = (x - a) / a: the direct (a - 1) log x - x - lgamma(a) subtracts numbers
    near a log a and loses a log(a) ulps (2e-7 relative at a = 1e8). Plain arithmetic
    and ufuncs, so that the recorded derivative of ``gammainc_bwd_y`` (Python, on
    tensors) is this formula too."""
    t = (x - a) / a
    # log(x / a) as log1p(t) near 1 (it is the difference that matters there), as a log
    # of the ratio away from it (1 + t rounds: 1e-11 off at x = 1e-3, a = 11); each
    # log's argument is safe where the other is taken (log1p(-1) made the recorded
    # second derivative NaN at x < 1e-16 a)
    near = np.abs(t) < 0.5
    log_ratio = select(near, np.log1p(select(near, t, 0.0 * t)), np.log(select(near, a, x) / a))
    stirling = (
        (a - 1.0) * log_ratio - a * t - 0.5 * np.log(2.0 * np.pi * a) - stirling_correction(a)
    )
    return select(a < 10.0, (a - 1.0) * np.log(x) - x - gammaln(a), stirling)


@jit
def _gamma_prefactor(a, x):
    """x^a e^-x / Gamma(a), for x > 0."""
    return math.exp(_log_gamma_density(a, x) + math.log(x))


# Temme's uniform asymptotic expansion (DLMF 8.12.3-8.12.10) for large a:
#   Q(a, x) = erfc(eta sqrt(a/2)) / 2 + e^(-a eta^2 / 2) / sqrt(2 pi a) (C0(eta) + C1(eta)/a + ...)
# with mu = (x - a) / a and eta = sign(mu) sqrt(2 (mu - log(1 + mu))). Closed forms
#   C0 = 1/mu - 1/eta,  C1 = 1/eta^3 - 1/mu^3 - 1/mu^2 - 1/(12 mu)
# cancel near eta = 0; there their Taylor series in eta, whose coefficients come from
# reverting eta(mu) in rational arithmetic. The next term, C2/a^2 with C2(0) = 25/6048,
# is below 5e-15 relative from a = 1e6 on, where the series and continued fraction need
# thousands of terms (they stopped at 10000 and gave P(1e8, 1e8) = 0.34, not 0.50001).
TEMME_A = 1e6
_TEMME_C0 = (
    -1 / 3, 1 / 12, -2 / 135, 1 / 864, 1 / 2835, -139 / 777600, 1 / 25515,
    -571 / 261273600, -281 / 151559100, 163879 / 197522841600,
)  # fmt: skip
_TEMME_C1 = (
    -1 / 540, -1 / 288, 1 / 378, -77 / 77760, 1 / 4860, -1 / 2488320,
    -2743 / 151559100, 41969 / 5486745600, -11 / 6823440,
)  # fmt: skip


@jit
def _temme(a, x):
    """(P(a, x), Q(a, x), dQ/da at fixed x) by Temme's expansion to C1 (a >= TEMME_A,
    0 < x < inf). P is Q's mirror, erfc(-eta sqrt(a/2)) / 2 minus the same series: each
    is formed directly, so the smaller keeps its relative accuracy.

    dQ/da = dT/da + dT/deta * deta/dmu * dmu/da with dmu/da = -x / a^2 and
    deta/dmu = mu / ((1 + mu) eta) (= 1 / ((1 + mu)(1 + eta C0)), which has no 0/0)."""
    mu = (x - a) / a
    eta = math.copysign(math.sqrt(2.0 * (mu - math.log1p(mu))), mu)
    if abs(eta) < 0.1:
        c0, d0 = 0.0, 0.0
        for k in range(len(_TEMME_C0) - 1, 0, -1):
            c0 = c0 * eta + _TEMME_C0[k]
            d0 = d0 * eta + k * _TEMME_C0[k]
        c0 = c0 * eta + _TEMME_C0[0]
        c1, d1 = 0.0, 0.0
        for k in range(len(_TEMME_C1) - 1, 0, -1):
            c1 = c1 * eta + _TEMME_C1[k]
            d1 = d1 * eta + k * _TEMME_C1[k]
        c1 = c1 * eta + _TEMME_C1[0]
    else:
        dmu = (1.0 + mu) * eta / mu  # dmu/deta
        c0 = 1.0 / mu - 1.0 / eta
        c1 = 1.0 / eta**3 - 1.0 / mu**3 - 1.0 / mu**2 - 1.0 / (12.0 * mu)
        d0 = 1.0 / (eta * eta) - dmu / (mu * mu)
        d1 = (3.0 / mu**4 + 2.0 / mu**3 + 1.0 / (12.0 * mu * mu)) * dmu - 3.0 / eta**4
    e = math.exp(-0.5 * a * eta * eta) / math.sqrt(2.0 * math.pi * a)
    series = c0 + c1 / a
    q = 0.5 * math.erfc(eta * math.sqrt(0.5 * a)) + e * series
    p = 0.5 * math.erfc(-eta * math.sqrt(0.5 * a)) - e * series
    # d/da at fixed eta: the erfc term gives -e eta / 2; e * series gives
    # e (-eta^2 series / 2 - series / (2a) - C1 / a^2)
    da = -e * (0.5 * eta + 0.5 * eta * eta * series + 0.5 * series / a + c1 / (a * a))
    # d/deta at fixed a: -e a from the erfc term, e (-a eta series + C0' + C1'/a)
    deta = e * (d0 + d1 / a - a - a * eta * series)
    return p, q, da - deta * x / (a * a * (1.0 + mu) * (1.0 + eta * c0))


@jit
def _gammainc_series(a, x):
    """P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a+1)...(a+n)), for x < a + 1."""
    term = 1.0 / a
    total = term
    n = 1
    while n < 100000:
        term *= x / (a + n)
        total += term
        if term < 1e-17 * total:
            break
        n += 1
    return total * _gamma_prefactor(a, x)


@jit
def _gammaincc_fraction(a, x):
    """Q(a, x) by its continued fraction (modified Lentz), for x >= a + 1."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < tiny:
            d = tiny
        c = b + an / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h * _gamma_prefactor(a, x)


EULER = 0.5772156649015329
# zeta(2), ..., zeta(27): the Taylor series of lgamma(1 + a) at 0
_ZETA = (
    1.6449340668482264, 1.2020569031595942, 1.0823232337111381, 1.03692775514337,
    1.0173430619844492, 1.008349277381923, 1.0040773561979444, 1.0020083928260821,
    1.000994575127818, 1.0004941886041194, 1.000246086553308, 1.0001227133475785,
    1.0000612481350588, 1.000030588236307, 1.0000152822594086, 1.0000076371976379,
    1.000003817293265, 1.0000019082127165, 1.0000009539620338, 1.0000004769329869,
    1.0000002384505027, 1.000000119219926, 1.000000059608189, 1.0000000298035034,
    1.0000000149015549, 1.0000000074507118,
)  # fmt: skip


@jit
def _lgamma1p(a):
    """lgamma(1 + a) with relative accuracy near a = 0, where math.lgamma(1 + a) rounds
    1 + a: below |a| = 0.2 the series -gamma a + sum_k>=2 (-1)^k zeta(k) a^k / k (its
    27th term is below 1e-19)."""
    if abs(a) >= 0.2:
        return math.lgamma(1.0 + a)
    s = 0.0
    for j in range(len(_ZETA) - 1, -1, -1):
        s = s * -a + _ZETA[j] / (j + 2)
    return a * (a * s - EULER)


@jit
def _gammaincc_small(a, x):
    """(Q(a, x), dP/da) for a < 1 and 0 < x < a + 1, from P = x^a / Gamma(a+1) (1 + a S),
    S = sum_k>=1 (-x)^k / (k! (a + k)): Q = -expm1(u) - e^u a S with
    u = a log x - lgamma(1 + a). The series of P gives Q only as 1 - P, which for tiny
    a is 1 - (nearly 1): Q(1e-20, 1e-20) = 4.5e-19 came out 7.8e-16, and dQ/da 0 for
    E1(x). dP/da = e^u (u' (1 + a S) + S + a S') with u' = log x - digamma(1 + a) and
    S' = -sum_k (-x)^k / (k! (a + k)^2): nothing cancels as a -> 0."""
    s = 0.0
    ds = 0.0
    term = 1.0
    for k in range(1, 200):
        term *= -x / k
        s += term / (a + k)
        ds -= term / ((a + k) * (a + k))
        if abs(term) < 1e-17 * abs(s):
            break
    lx = math.log(x)
    u = a * lx - _lgamma1p(a)
    eu = math.exp(u)
    q = -math.expm1(u) - eu * a * s
    dp = eu * ((lx - digamma_fwd(1.0 + a)) * (1.0 + a * s) + s + a * ds)
    return q, dp


@jit
def gammainc_da_scalar(a, x):
    """dP(a, x)/da (= -dQ/da), differentiating the series (below x = a + 1) or the
    continued fraction (above) term by term as (value, d/da) pairs, with the prefactor's
    log-derivative log x - digamma(a); the series and the fraction stop when both the
    value and the derivative have converged (as for betainc)."""
    if a != a or x != x or a <= 0.0 or x < 0.0:
        return np.nan
    if x == 0.0 or x == np.inf or a == np.inf:
        return 0.0
    if a >= TEMME_A:
        return -_temme(a, x)[2]
    if a < 1.0 and x < a + 1.0:
        return _gammaincc_small(a, x)[1]
    pre = _gamma_prefactor(a, x)
    la = math.log(x) - digamma_fwd(a)
    if x < a + 1.0:
        term, dterm = 1.0 / a, -1.0 / (a * a)
        total, dtotal = term, dterm
        for n in range(1, 100000):
            r = x / (a + n)
            dterm = (dterm - term / (a + n)) * r
            term *= r
            total += term
            dtotal += dterm
            if term < 1e-17 * total and abs(dterm) <= 1e-17 * abs(dtotal):
                break
        return pre * (la * total + dtotal)
    tiny = 1e-300
    b, b_a = x + 1.0 - a, -1.0
    c, c_a = 1.0 / tiny, 0.0
    d, d_a = 1.0 / b, 1.0 / (b * b)
    h, h_a = d, d_a
    for i in range(1, 100000):
        an, an_a = -i * (i - a), float(i)
        b += 2.0
        nd = an * d + b
        nd_a = an_a * d + an * d_a + b_a
        if abs(nd) < tiny:
            nd = tiny
        nc = b + an / c
        nc_a = b_a + an_a / c - an * c_a / (c * c)
        if abs(nc) < tiny:
            nc = tiny
        c, c_a = nc, nc_a
        d, d_a = 1.0 / nd, -nd_a / (nd * nd)
        delta, delta_a = d * c, d_a * c + d * c_a
        h_a = h_a * delta + h * delta_a
        h *= delta
        if abs(delta - 1.0) < 1e-16 and abs(delta_a * h) <= 1e-16 * (abs(h_a) + tiny):
            break
    return -pre * (la * h + h_a)


@jit
def gammainc_fwd(a, x):
    """The regularized lower incomplete gamma function P(a, x), SciPy's gammainc: the
    series below x = a + 1, 1 - Q by the continued fraction above."""
    if a != a or x != x or a < 0.0 or x < 0.0:
        return np.nan
    if a == np.inf:  # SciPy's values: P(inf, x) = 0 for finite x
        return 0.0 if x < np.inf else np.nan
    if a == 0.0:
        return 1.0 if x > 0 else np.nan
    if x == 0.0:
        return 0.0
    if x == np.inf:
        return 1.0
    if a >= TEMME_A:
        return _temme(a, x)[0]
    if x < a + 1.0:
        return _gammainc_series(a, x)
    # 1 - Q rounds above 1 where Q is below an ulp of 1: a probability stays in [0, 1]
    return max(0.0, 1.0 - _gammaincc_fraction(a, x))


@jit
def gammaincc_fwd(a, x):
    """Q(a, x) = 1 - P(a, x), SciPy's gammaincc: the continued fraction above x = a + 1,
    1 - P by the series below (each where it is accurate)."""
    if a != a or x != x or a < 0.0 or x < 0.0:
        return np.nan
    if a == np.inf:
        return 1.0 if x < np.inf else np.nan
    if a == 0.0:
        return 0.0 if x > 0 else np.nan
    if x == 0.0:
        return 1.0
    if x == np.inf:
        return 0.0
    if a >= TEMME_A:
        return _temme(a, x)[1]
    if x < a + 1.0:
        if a < 1.0:
            return max(0.0, _gammaincc_small(a, x)[0])
        return 1.0 - _gammainc_series(a, x)
    return _gammaincc_fraction(a, x)


gammaln = row_function("gammaln", gammaln_fwd, 1)
gammainc_da = first_order(
    "gammainc_da", gammainc_da_scalar, 2, "the derivative of gammainc / gammaincc in a"
)


@jit
def gammainc_bwd_x(g, x, y, out):
    # dP/da: the differentiated series / continued fraction (x is a here)
    return g * gammainc_da(x, y)


@jit
def gammaincc_bwd_x(g, x, y, out):
    return -g * gammainc_da(x, y)


@jit
def gammainc_bwd_y(g, x, y, out):
    # dP/dx = x^(a-1) e^-x / Gamma(a), in logs (x is y here: a is the first argument)
    return g * np.exp(_log_gamma_density(x, y))


@jit
def gammaincc_bwd_y(g, x, y, out):
    return -g * np.exp(_log_gamma_density(x, y))


# --- the regularized incomplete beta function ------------------------------
# The regularized incomplete beta function ``I_x(a, b)`` (SciPy's ``betainc``) and its
# derivatives in all three arguments, as array kernels (three same-shape inputs).
#
# Value: ``I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * F`` with ``F`` the continued fraction
#
#     F = 1 / (1 + d1 / (1 + d2 / (1 + ...))),
#     d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),
#     d_{2m}   =  m (b - m) x / ((a + 2m - 1)(a + 2m)),
#
# evaluated by the modified Lentz method, and ``1 - I_{1-x}(b, a)`` above
# ``x = (a + 1) / (a + b + 2)``, where the fraction converges fast.
#
# Derivatives: in ``x`` the density ``x^(a-1) (1-x)^(b-1) / B(a, b)``; in ``a`` and ``b``
# there is no closed form, so the Lentz recurrence carries each quantity as a triple
# (value, d/da, d/db): every step is a sum, product or reciprocal, differentiated exactly
# (forward mode through the fraction, as Boik & Robison-Cox 1998 do), and the logarithm of
# the prefactor contributes ``log x - 1/a - (digamma(a) - digamma(a + b))`` and
# ``log(1-x) - (digamma(b) - digamma(a + b))``. The iteration stops when the fraction and
# both derivatives have converged.

BETAINC_TINY = 1e-300
BETAINC_EPS = 1e-16
BETAINC_MAX_ITER = 100000


@jit
def _betainc_fraction(a, b, x, derivs):
    """The continued fraction ``F`` and (``derivs``) its derivatives in a and b."""
    # triples: value, d/da, d/db
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    # c = 1; d = 1 / (1 - qab x / qap)
    d = 1.0 - qab * x / qap
    d_a = -(x / qap - qab * x / (qap * qap))  # d/da of -(a+b) x / (a+1)
    d_b = -x / qap
    if abs(d) < BETAINC_TINY:
        d = BETAINC_TINY
    inv = 1.0 / d
    d, d_a, d_b = inv, -d_a * inv * inv, -d_b * inv * inv
    c, c_a, c_b = 1.0, 0.0, 0.0
    h, h_a, h_b = d, d_a, d_b
    for m in range(1, BETAINC_MAX_ITER):
        m2 = 2.0 * m
        for even in (True, False):
            if even:
                # aa = m (b - m) x / ((a + m2 - 1)(a + m2))
                num = m * (b - m) * x
                den = (qam + m2) * (a + m2)
                aa = num / den
                aa_a = -num * ((a + m2) + (qam + m2)) / (den * den)
                aa_b = m * x / den
            else:
                # aa = -(a + m)(a + b + m) x / ((a + m2)(a + 1 + m2))
                num = -(a + m) * (qab + m) * x
                den = (a + m2) * (qap + m2)
                num_a = -((qab + m) + (a + m)) * x
                num_b = -(a + m) * x
                den_a = (qap + m2) + (a + m2)
                aa = num / den
                aa_a = (num_a * den - num * den_a) / (den * den)
                aa_b = num_b / den
            # d = 1 / (1 + aa d)
            nd = 1.0 + aa * d
            nd_a = aa_a * d + aa * d_a
            nd_b = aa_b * d + aa * d_b
            if abs(nd) < BETAINC_TINY:
                nd = BETAINC_TINY
            inv = 1.0 / nd
            d, d_a, d_b = inv, -nd_a * inv * inv, -nd_b * inv * inv
            # c = 1 + aa / c
            ic = 1.0 / c
            nc = 1.0 + aa * ic
            nc_a = aa_a * ic - aa * c_a * ic * ic
            nc_b = aa_b * ic - aa * c_b * ic * ic
            if abs(nc) < BETAINC_TINY:
                nc = BETAINC_TINY
            c, c_a, c_b = nc, nc_a, nc_b
            # h *= d c
            delta = d * c
            delta_a = d_a * c + d * c_a
            delta_b = d_b * c + d * c_b
            h_a = h_a * delta + h * delta_a
            h_b = h_b * delta + h * delta_b
            h *= delta
        done = abs(delta - 1.0) < BETAINC_EPS
        if derivs:
            # the derivatives' last change: delta_a h + (delta - 1) h_a, relative
            done = (
                done
                and abs(delta_a * h) <= BETAINC_EPS * (abs(h_a) + BETAINC_TINY)
                and abs(delta_b * h) <= BETAINC_EPS * (abs(h_b) + BETAINC_TINY)
            )
        if done:
            break
    return h, h_a, h_b


@jit
def _betainc_log_power(a, b, x):
    """log(x^a (1-x)^b / B(a, b)). For a, b >= 10 in Stirling's form (DiDonato & Morris):
    log(sqrt(ab / (2 pi (a+b)))) + a log1p(d/a) + b log1p(-d/b) + corrections, with
    d = x b - (1-x) a, so that the large terms a log x and log B do not cancel."""
    if a < 10.0 or b < 10.0:
        return a * math.log(x) + b * math.log1p(-x) - betaln_fwd(a, b)
    d = x * b - (1.0 - x) * a
    corr = stirling_correction(a + b) - stirling_correction(a) - stirling_correction(b)
    return (
        0.5 * math.log(a * b / (2.0 * math.pi * (a + b)))
        + a * math.log1p(d / a)
        + b * math.log1p(-d / b)
        + corr
    )


@jit
def _betainc_left(a, b, x, derivs):
    """``I_x(a, b)`` by the fraction (for x below the switch) with d/da, d/db."""
    pre = math.exp(_betainc_log_power(a, b, x) - math.log(a))
    h, h_a, h_b = _betainc_fraction(a, b, x, derivs)
    value = pre * h
    if not derivs:
        return value, 0.0, 0.0
    psi_ab = digamma_fwd(a + b)
    l_a = math.log(x) - 1.0 / a - (digamma_fwd(a) - psi_ab)
    l_b = math.log1p(-x) - (digamma_fwd(b) - psi_ab)
    return value, pre * (l_a * h + h_a), pre * (l_b * h + h_b)


@jit
def betainc_scalar(a, b, x, derivs):
    """``(I_x(a, b), dI/da, dI/db)``; NaN outside a, b > 0 and 0 <= x <= 1."""
    if not (a > 0.0 and b > 0.0 and 0.0 <= x <= 1.0):
        return np.nan, np.nan, np.nan
    if x == 0.0:
        return 0.0, 0.0, 0.0
    if x == 1.0:
        return 1.0, 0.0, 0.0
    if x < (a + 1.0) / (a + b + 2.0):
        return _betainc_left(a, b, x, derivs)
    # I_x(a, b) = 1 - I_{1-x}(b, a): the roles of a and b swap in the derivatives
    v, d_b, d_a = _betainc_left(b, a, 1.0 - x, derivs)
    return 1.0 - v, -d_a, -d_b


@jit
def betainc_density(a, b, x):
    """dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b), in logs; 0 outside (0, 1)."""
    if not (a > 0.0 and b > 0.0):
        return np.nan
    if x <= 0.0 or x >= 1.0:
        if (x == 0.0 and a < 1.0) or (x == 1.0 and b < 1.0):
            return np.inf
        if (x == 0.0 and a == 1.0) or (x == 1.0 and b == 1.0):
            return math.exp(-betaln_fwd(a, b))
        return 0.0 if 0.0 <= x <= 1.0 else np.nan
    # x^a (1-x)^b / B(a, b) in the prefactor's form (Stirling's for a, b >= 10: a log x
    # and log B are ~1e11 for binom.cdf at n = 1e12, and their difference lost 1e-4 of
    # the derivative in p), over x (1 - x)
    return math.exp(_betainc_log_power(a, b, x) - math.log(x) - math.log1p(-x))


@jit
def betainc_fwd(dt, node, tp):
    """``out = I_x(a, b)`` elementwise over three same-shape inputs (size in ip[0])."""
    h = header(tp)
    a = in_data(h, node, 0, dt)
    b = in_data(h, node, 1, dt)
    x = in_data(h, node, 2, dt)
    out = out_data(h, node, 0, dt)
    for i in range(node_ip(h, node)[0]):
        out[ux(i)] = betainc_scalar(
            np.float64(a[ux(i)]), np.float64(b[ux(i)]), np.float64(x[ux(i)]), False
        )[0]
    return OK


@jit
def betainc_bwd(dt, node, tp):
    """``ga += g dI/da``, ``gb += g dI/db`` (the differentiated fraction), ``gx += g
    density``; the fraction runs only where a or b needs a gradient."""
    h = header(tp)
    a = in_data(h, node, 0, dt)
    b = in_data(h, node, 1, dt)
    x = in_data(h, node, 2, dt)
    g = out_grad(h, node, 0, dt)
    want_a, want_b, want_x = needs_grad(h, node, 0), needs_grad(h, node, 1), needs_grad(h, node, 2)
    ga = in_grad(h, node, 0, dt) if want_a else a
    gb = in_grad(h, node, 1, dt) if want_b else b
    gx = in_grad(h, node, 2, dt) if want_x else x
    for i in range(node_ip(h, node)[0]):
        ai, bi = np.float64(a[ux(i)]), np.float64(b[ux(i)])
        xi, gi = np.float64(x[ux(i)]), np.float64(g[ux(i)])
        if want_a or want_b:
            _, da, db = betainc_scalar(ai, bi, xi, True)
            if want_a:
                ga[ux(i)] += gi * da
            if want_b:
                gb[ux(i)] += gi * db
        if want_x:
            gx[ux(i)] += gi * betainc_density(ai, bi, xi)
    return OK


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
