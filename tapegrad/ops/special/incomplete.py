"""Scalar formulas and kernels of scipy.special: the regularized incomplete gamma and
beta functions, with their derivatives in the shape parameters."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import jit, jitable
from ...kernels.loops import ux
from ...layout import OK, header, in_data, in_grad, needs_grad, node_ip, out_data, out_grad
from ..vocabulary import first_order, row_function, select
from .gamma import betaln_fwd, digamma_fwd, gammaln_fwd, stirling_correction


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
