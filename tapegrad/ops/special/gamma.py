"""Scalar formulas of scipy.special: the logistic and error functions, gamma, digamma
and polygamma, beta, xlogy, the normal distribution function and its inverse."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import jit, jitable
from ...kernels import vecmath as vm
from ..vocabulary import row_function, select

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
