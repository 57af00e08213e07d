"""Vectorisable exp, exp2, expm1, tanh, sin, cos and log1p (on [0, 1]) for the
elementwise kernels.

numba calls glibc for ``np.sin`` & co.: one scalar call per element (9-15 ns), which
also keeps LLVM from vectorising the loop around it. NumPy's own SIMD loops cannot be
called from inside a kernel. The functions here are straight-line float64 arithmetic
(range reduction, a polynomial, a few selects), so LLVM inlines them and vectorises the
kernel loop: ~1 ns per element on AVX-512 for each of them.

They are exact only up to rounding on a *range* of finite inputs (``RANGE``): a kernel
uses them for an array only after checking that every element lies in it, and the
libm formulas otherwise (so inf, NaN and huge arguments keep NumPy's results and
special cases). Within range, measured against NumPy on 1e6 random points per function
(``tests/test_vecmath.py`` checks the bounds): exp and sin/cos within 1 ulp, expm1
within 2, tanh within 3 (glibc's tanh is documented at 2). float32 arguments are
computed in float64 and rounded once.

The maths:
- exp/expm1: ``x = k ln2 + r`` with ``k = rint(x / ln2)`` (|r| <= ln2/2, ``ln2`` in two
  parts so ``k * LN2_HI`` is exact), ``e^r - 1`` by its Taylor series to ``r^13``
  (truncation < 3e-18 relative), then ``2^k`` built from its bit pattern.
- exp2: ``x = k + r`` with ``k = rint(x)`` (``r`` exact), then exp's polynomial at
  ``r ln2``.
- log1p on [0, 1] (logaddexp): ``1 + t = 2^k (1 + f)`` with ``k`` 0 or 1 (``f`` exact),
  fdlibm's log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), ``s = f / (2 + f)``, plus the
  rounding error of ``1 + t`` divided by it. The division keeps it at ~2 ns an element,
  which is why ``log`` itself stays NumPy's SIMD loop (0.85 ns); logaddexp's forward
  was NumPy's scalar loop (15 ns).
- tanh: ``u = expm1(2|x|)``, ``tanh = u / (u + 2)``, or ``1 - 2 / (u + 2)`` above 0.55
  where that form is the more accurate; |x| is capped at 20 (tanh(20) rounds to 1).
- sin/cos: ``x = k pi/2 + r`` with ``pi/2`` in three float64 parts (fused multiply-adds:
  each partial difference is rounded once), then fdlibm's minimax polynomials for
  sin and cos on [-pi/4, pi/4], the quadrant ``k mod 4`` picking and negating one.
"""

from __future__ import annotations

import numpy as np

from .._jit import float_from_bits, fma, jit

# x + SHIFT - SHIFT rounds |x| < 2^51 to the nearest integer (ties to even) in two
# vectorisable additions: 1.5 * 2^52 leaves no bits below the units.
SHIFT = 6755399441055744.0
INV_LN2 = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01  # 33 significant bits: k * LN2_HI exact for |k| < 2^20
LN2_LO = 1.90821492927058770002e-10
TWO_OVER_PI = 0.6366197723675814
PIO2_1 = 1.5707963267948966  # pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + O(2^-160)
PIO2_2 = 6.123233995736766e-17
PIO2_3 = -1.4973849048591698e-33
# fdlibm's minimax coefficients: sin(r) = r + r^3 (S1 + r^2 S2 + ...) and
# cos(r) = 1 - r^2/2 + r^4 (C1 + r^2 C2 + ...), each within 2^-58 on [-pi/4, pi/4].
S1 = -1.66666666666666324348e-01
S2 = 8.33333333332248946124e-03
S3 = -1.98412698298579493134e-04
S4 = 2.75573137070700676789e-06
S5 = -2.50507602534068634195e-08
S6 = 1.58969099521155010221e-10
C1 = 4.16666666666666019037e-02
C2 = -1.38888888888741095749e-03
C3 = 2.48015872894767294178e-05
C4 = -2.75573143513906633035e-07
C5 = 2.08757232129817482790e-09
C6 = -1.13596475577881948265e-11
# fdlibm's minimax coefficients for log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)),
# s = f / (2 + f): R(z) = z (LG1 + z LG2 + ... + z^6 LG7), within 2^-58.45 for |s| <= 0.1716.
LG1 = 6.666666666666735130e-01
LG2 = 3.999999999940941908e-01
LG3 = 2.857142874366239149e-01
LG4 = 2.222219843214978396e-01
LG5 = 1.818357216161805012e-01
LG6 = 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01
SQRT2 = 1.4142135623730951

# The finite inputs each function is accurate on (|x| <= RANGE[name]).
RANGE = {
    "exp": 708.0,  # e^x stays a normal number: no overflow or gradual underflow
    "expm1": 708.0,
    "tanh": float(np.finfo(np.float64).max),  # every finite x
    "sin": 1.0e6,  # the three-part reduction keeps 1 ulp up to here (tested)
    "cos": 1.0e6,
    "exp2": 1020.0,  # 2^x stays a normal number
}


@jit(inline="always")
def _pow2(k):
    """2^k for an integral float k in [-1022, 1023], from its bit pattern."""
    return float_from_bits((np.int64(k) + 1023) << 52)


@jit(inline="always")
def _expm1_reduced(r):
    """e^r - 1 for |r| <= ln2/2 (Horner, fused)."""
    p = 1.0 / 6227020800.0
    p = fma(p, r, 1.0 / 479001600.0)
    p = fma(p, r, 1.0 / 39916800.0)
    p = fma(p, r, 1.0 / 3628800.0)
    p = fma(p, r, 1.0 / 362880.0)
    p = fma(p, r, 1.0 / 40320.0)
    p = fma(p, r, 1.0 / 5040.0)
    p = fma(p, r, 1.0 / 720.0)
    p = fma(p, r, 1.0 / 120.0)
    p = fma(p, r, 1.0 / 24.0)
    p = fma(p, r, 1.0 / 6.0)
    p = fma(p, r, 0.5)
    return fma(r * r, p, r)


@jit(inline="always")
def _reduce_ln2(x):
    """(2^k, r) with x = k ln2 + r, |r| <= ln2/2."""
    x = float(x)
    k = (x * INV_LN2 + SHIFT) - SHIFT
    r = fma(-k, LN2_LO, fma(-k, LN2_HI, x))
    return _pow2(k), r


@jit(inline="always")
def exp(x):
    """e^x for |x| <= 708."""
    s, r = _reduce_ln2(x)
    return fma(s, _expm1_reduced(r), s)


@jit(inline="always")
def expm1(x):
    """e^x - 1 for |x| <= 708: 2^k (e^r - 1) + (2^k - 1), one rounding at the end; a
    zero is returned as it is (the formula gives +0 for -0, NumPy -0)."""
    s, r = _reduce_ln2(x)
    v = fma(s, _expm1_reduced(r), s - 1.0)
    return v if x != 0 else np.float64(x)


@jit(inline="always")
def exp2(x):
    """2^x for |x| <= 1020: ``x = k + r`` with ``k = rint(x)``, ``r`` exact (|r| <= 1/2),
    ``2^r = e^(r ln2)`` with |r ln2| <= ln2/2 (ln2 in two parts: one rounding)."""
    x = np.float64(x)
    k = (x + SHIFT) - SHIFT
    r = x - k
    s = _pow2(k)
    return fma(s, _expm1_reduced(fma(r, LN2_HI, r * LN2_LO)), s)


@jit(inline="always")
def log1p_unit(t):
    """log(1 + t) for 0 <= t <= 1 (logaddexp's e^-|x - y|): ``1 + t = 2^k (1 + f)``
    with ``k`` 0 or 1 and ``f`` exact, the rounding error of ``1 + t`` carried as
    ``c``, then fdlibm's log(1 + f) on |f| <= sqrt(2) - 1."""
    t = np.float64(t)
    u = 1.0 + t
    c = (t - (u - 1.0)) / u  # log(1 + t) = log(u) + c to first order
    big = u > SQRT2
    f = 0.5 * u - 1.0 if big else u - 1.0  # exact (Sterbenz): -0.293 <= f <= 0.415
    k = 1.0 if big else 0.0
    s = f / (2.0 + f)
    z = s * s
    r = z * fma(z, fma(z, fma(z, fma(z, fma(z, fma(z, LG7, LG6), LG5), LG4), LG3), LG2), LG1)
    hf = 0.5 * f * f
    return fma(k, LN2_HI, f - (hf - (s * (hf + r) + fma(k, LN2_LO, c))))


@jit(inline="always")
def tanh(x):
    """tanh(x) for finite x."""
    x = float(x)
    a = min(abs(x), 20.0)
    u = expm1(2.0 * a)
    t = 1.0 - 2.0 / (u + 2.0) if a > 0.55 else u / (u + 2.0)
    if x < 0:
        return -t
    return t if x > 0 else x  # keeps the sign of a zero


@jit(inline="always")
def _reduce_pio2(x):
    """(k mod 4, r) with x = k pi/2 + r, |r| <= pi/4 (up to rounding)."""
    k = (x * TWO_OVER_PI + SHIFT) - SHIFT
    r = fma(-k, PIO2_1, x)
    r = fma(-k, PIO2_2, r)
    r = fma(-k, PIO2_3, r)
    return np.int64(k) & 3, r


@jit(inline="always")
def _sin_poly(r):
    z = r * r
    p = S5 + z * S6
    p = S4 + z * p
    p = S3 + z * p
    p = S2 + z * p
    return r + r * z * (S1 + z * p)


@jit(inline="always")
def _cos_poly(r):
    # 1 - z/2 rounds badly near r = pi/4; w + ((1 - w) - z/2) recovers what it dropped.
    z = r * r
    p = C5 + z * C6
    p = C4 + z * p
    p = C3 + z * p
    p = C2 + z * p
    p = C1 + z * p
    hz = 0.5 * z
    w = 1.0 - hz
    return w + (((1.0 - w) - hz) + z * z * p)


@jit(inline="always")
def sin(x):
    """sin(x) for |x| <= 1e6."""
    x = float(x)
    q, r = _reduce_pio2(x)
    # quadrant q: sin r, cos r, -sin r, -cos r (both polynomials, then selects)
    v = _cos_poly(r) if q & 1 else _sin_poly(r)
    v = -v if q & 2 else v
    return x if x == 0 else v  # sin(-0.0) is -0.0


@jit(inline="always")
def cos(x):
    """cos(x) for |x| <= 1e6."""
    x = float(x)
    q, r = _reduce_pio2(x)
    # quadrant q: cos r, -sin r, -cos r, sin r
    v = _sin_poly(r) if q & 1 else _cos_poly(r)
    return -v if (q + 1) & 2 else v
