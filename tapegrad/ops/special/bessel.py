"""Scalar formulas of scipy.special: modified Bessel functions of orders 0 and 1 and of
real order (``ive``), with the derivative in the order."""

from __future__ import annotations

import math

import numpy as np

from ..._jit import jit
from ..vocabulary import first_order, row_function, select
from .gamma import digamma_fwd

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
