"""The multivariate distributions: ``multivariate_normal`` (its density, and its
distribution function: exact for dimension up to 2, randomised quasi-Monte Carlo from a
fixed seed above) and ``dirichlet``."""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...forward_mode import jvp
from ...grad_mode import no_grad
from ...recording import as_tensor, tensor
from .branches import (
    LOG_2PI,
    SQRT_2PI,
    absolute,
    asum,
    clip,
    exp,
    gammaln,
    log,
    log_ndtr,
    ndtr,
    tla,
    tnp,
    tsla,
    tsp,
    where,
    xlogy,
)
from .distribution import Distribution

# --- multivariate --------------------------------------------------------------------------


def _mvn_args(name: str, x: Any, mean: Any, cov: Any) -> tuple[Any, Any, int]:
    """(x - mean with the components on the last axis, cov as a (d, d) tensor, d), read
    as SciPy reads them: d from mean when given, else from cov; a variance or a
    diagonal grows into a matrix; for d = 1 a 1-D x is a list of points."""
    cov = as_tensor(cov)
    if cov.ndim > 2 or (cov.ndim == 2 and cov.shape[0] != cov.shape[1]):
        raise ValueError(
            f"{name}: cov must be a variance, a diagonal or a square matrix, got shape "
            f"{cov.shape} {cov.dtype}"
        )
    if mean is not None and np.ndim(mean) > 1:
        raise ValueError(f"{name}: mean must be 1-D, got shape {np.shape(mean)}")
    d = cov.shape[-1] if cov.ndim else (int(np.size(mean)) if mean is not None else 1)
    if mean is not None and np.size(mean) != d:
        raise ValueError(
            f"{name}: mean has shape {np.shape(mean)} but cov {cov.shape} is for {d} components"
        )
    if cov.ndim <= 1:
        cov = cov * np.eye(d)
    xs = as_tensor(x)
    if d == 1 and (xs.ndim == 0 or xs.shape[-1] != 1 or xs.ndim == 1):
        xs = xs.reshape((*xs.shape, 1))  # a list of points on the line
    elif d > 1 and (xs.ndim == 0 or xs.shape[-1] != d):
        raise ValueError(
            f"{name}: x has shape {xs.shape}; its last axis must hold the {d} components"
        )
    return xs - (0.0 if mean is None else mean), cov, d


def _scalar_if_one(out: Any) -> Any:
    return out.reshape(()) if out.size == 1 else out


def _mvn_logpdf(x: Any, mean: Any = None, cov: Any = 1.0) -> Any:
    """log N(x; mean, cov) through the Cholesky factor: ``-(d log 2 pi + log det cov +
    |L^-1 (x - mean)|^2) / 2``; x's last axis holds the components (SciPy squeezes a
    single point to a scalar)."""
    diff, cov, d = _mvn_args("multivariate_normal.logpdf", x, mean, cov)
    low = tla["cholesky"](cov)
    z = tsla["solve_triangular"](low, tnp["moveaxis"](diff.reshape(-1, d), 0, 1), lower=True)
    maha = asum(z * z, axis=0).reshape(diff.shape[:-1])
    logdet = 2.0 * asum(log(tnp["diagonal"](low)))
    return _scalar_if_one(-0.5 * (d * LOG_2PI + logdet + maha))


# The normal distribution function.
#
# d = 1: ndtr of the standardised limits, exactly.
#
# d = 2: exactly (~1e-12 relative in every tail, down to 1e-300), in tapegrad ops, so
# its gradient is exact too. With standardised limits and correlation r, by Plackett's
# identity dPhi2/dr = phi2 and r = sin(t) (Sheppard; Drezner & Wesolowsky 1990):
#   Phi2(h, k; r) = Phi(h) Phi(k) + 1/(2 pi) int_0^asin(r) exp(-(h^2 + k^2 - 2hk sin t)
#                   / (2 cos^2 t)) dt,
# by 20-point Gauss-Legendre on 8 panels for |r| <= 0.925 (for r < 0 and h + k < -1,
# where the two terms would cancel, the same integral from t = -pi/2, where Phi2 = 0,
# instead). Nearer 1 (r > 0; r < 0 through Phi2(h, k; r) = Phi(h) - Phi2(h, -k; -r),
# the Phi(h)'s cancelled by hand) the integrand sharpens, and
#   Phi2 = Phi(min(h, k)) - 1/(2 pi) int_0^a exp(-b^2 / (2x^2)) g(x) dx,
#   x = sqrt(1 - s^2) for s in [r, 1], a = sqrt(1 - r^2), b = |h - k|,
#   g(x) = exp(-hk / (1 + s)) / s = e^(-hk/2) (1 + c x^2 + c e x^4 + O(x^6)),
#   c = (4 - hk) / 8, e = (12 - hk) / 16,
# whose three leading terms integrate in closed form against exp(-b^2 / 2x^2)
# (J_n = int_0^a x^2n exp(-b^2/2x^2) dx by parts, in forms with no division by b) and
# whose O(x^6) rest, smooth even where the exponential is sharp, by the same rule (the
# splitting of Genz 2004, derived here). A rectangle is four such corners, after each
# coordinate whose interval lies above 0 is mirrored (so upper tails do not cancel).
#
# d >= 3: Genz's separation of variables (Genz 1992): with cov = L L^T,
#   P(a <= X <= b) = integral over w in [0,1]^(d-1) of  prod_i (e_i - c_i),
#   c_i, e_i = ndtr((a_i or b_i - sum_{j<i} L_ij y_j) / L_ii),
#   y_j = ndtri(c_j + w_j (e_j - c_j)),
# each difference taken in the upper tail's mirror image when a_i lies above the mean
# (no cancellation), integrated by randomised quasi-Monte Carlo: _SCRAMBLES
# independently scrambled Sobol' point sets, whose spread estimates the error (three
# standard errors, as SciPy). The points double until the error of the value and of a
# random directional derivative (forward mode through the same integrand) meets
# max(abseps, releps * |value|), or maxpts is reached (SciPy's defaults). Variables are
# ordered by Genz and Bretz's greedy rule (the smallest conditional probability first),
# which cuts the variance most. The scrambles come from a fixed seed unless rng is
# given, so the value is a deterministic smooth function of x, mean and cov, and its
# recorded gradient (to any order) is that function's exact derivative. (Scrambled
# Sobol' points needed about a quarter of the points of a shifted Richtmyer lattice.)
_SCRAMBLES = 10
_MVN_SEED = 20261205
_MVN_CHUNK = 1 << 21  # rows x points evaluated at once
_FAR = 40.0  # a standardised limit beyond this is infinite: ndtr(+-40) is 1, 0 exactly
_GL_T, _GL_W = np.polynomial.legendre.leggauss(20)
_GL_T, _GL_W = (_GL_T + 1.0) / 2.0, _GL_W / 2.0  # on [0, 1]
_PANELS = 8  # the same rule on 8 equal panels of [0, 1]
_GL_PANELS_T = ((np.arange(_PANELS)[:, None] + _GL_T) / _PANELS).ravel()
_GL_PANELS_W = np.tile(_GL_W / _PANELS, _PANELS)
# and on 8 panels halving towards 1, [0, 1/2], [1/2, 3/4], ..., [1 - 2^-7, 1]: for an
# integrand that peaks sharply at its upper end
_EDGES = np.append(1.0 - 0.5 ** np.arange(_PANELS), 1.0)
_GL_GRADED_T = (_EDGES[:-1, None] + np.diff(_EDGES)[:, None] * _GL_T).ravel()
_GL_GRADED_W = (np.diff(_EDGES)[:, None] * _GL_W).ravel()


def _bvn(h: Any, k: Any, r: Any) -> Any:
    """Phi2(h, k; r), elementwise over same-shape h, k, r with |r| < 1 and |h|, |k| <=
    _FAR (see above)."""
    r_v = np.asarray(_value(r))
    near = np.abs(r_v) > 0.925
    # |r| <= 0.925: Sheppard's integral in t (a safe r on the other side), by composite
    # Gauss-Legendre: in deep tails the integrand peaks narrowly, inside the interval
    rm = where(near, 0.0, r)
    top = tnp["arcsin"](rm)[..., None]
    t = top * _GL_PANELS_T
    hh, kk = h[..., None], k[..., None]
    cos2 = tnp["cos"](t) ** 2
    body = exp(-(hh * hh + kk * kk - 2.0 * hh * kk * tnp["sin"](t)) / (2.0 * cos2))
    product = ndtr(h) * ndtr(k)
    sheppard = asum(body * _GL_PANELS_W, axis=-1) * top[..., 0] / (2 * math.pi)
    moderate = product + sheppard
    # r < 0 and h + k < -1: Phi(h) Phi(k) less the integral (or, nearer -1, Phi(h) less
    # Phi2(h, -k; -r)) cancels in the joint lower tail; from r = -1 instead, where Phi2
    # is 0 for h + k <= 0, every term is positive, and the integrand grows towards
    # asin(r) (graded panels; h + k bounded away from 0 keeps it smooth at -pi/2)
    h_v, k_v = np.asarray(_value(h)), np.asarray(_value(k))
    neg = r_v < 0
    low_left = neg & (h_v + k_v < -1.0)
    bottom = tnp["arcsin"](where(low_left, r, -0.5))[..., None] + math.pi / 2
    t = bottom * _GL_GRADED_T - math.pi / 2
    cos2 = tnp["cos"](t) ** 2
    body = exp(-(hh * hh + kk * kk - 2.0 * hh * kk * tnp["sin"](t)) / (2.0 * cos2))
    from_minus_one = asum(body * _GL_GRADED_W, axis=-1) * bottom[..., 0] / (2 * math.pi)
    # |r| > 0.925: Phi(min) minus the split integral, for r > 0; for r < 0 through
    # Phi2(h, k; r) = Phi(h) - Phi2(h, -k; -r) = [Phi(h) - Phi(-k)]_+ + the integral,
    # the Phi(h)'s cancelled exactly. b = |h - k| and min(h, k) are written with the
    # sign of h - k read off the values (+1 at a tie): each side's formula is analytic
    # and the function smooth, so derivatives of every order at h == k are right (|.|
    # and min would lose them).
    k2 = where(neg, -k, k)
    side = np.where(h_v >= np.where(neg, -k_v, k_v), 1.0, -1.0)
    rn = where(near, absolute(r), 0.95)
    a2 = (1.0 - rn) * (1.0 + rn)
    a = tnp["sqrt"](a2)
    hk = h * k2
    b = side * (h - k2)
    b2 = b * b
    c = (4.0 - hk) / 8.0
    ce = c * (12.0 - hk) / 16.0
    # e^(-hk/2) (J0 + c J1 + c e J2), exponents kept <= 0 (no overflow)
    closed = a * exp(-(b2 / a2 + hk) / 2.0) * (
        1.0 + c * (a2 - b2) / 3.0 + ce * (a2 * a2 / 5.0 - b2 * (a2 - b2) / 15.0)
    ) - math.sqrt(2 * math.pi) * b * exp(-hk / 2.0 + log_ndtr(-b / a)) * (
        1.0 - c * b2 / 3.0 + ce * b2 * b2 / 15.0
    )
    x = a[..., None] * _GL_T
    x2 = x * x
    s = tnp["sqrt"]((1.0 - x) * (1.0 + x))
    hk_, b2_ = hk[..., None], b2[..., None]
    rest = exp(-(b2_ / (2.0 * x2) + hk_ / (1.0 + s))) / s - exp(-(b2_ / x2 + hk_) / 2.0) * (
        1.0 + c[..., None] * x2 + ce[..., None] * x2 * x2
    )
    integral = (closed + a * asum(rest * _GL_W, axis=-1)) / (2 * math.pi)
    # Phi(h) - Phi(-k) where h > -k, in the form of the two smaller tails
    excess = where(k_v < 0, ndtr(k) - ndtr(-h), ndtr(h) - ndtr(-k))
    high = where(neg, where(side > 0, excess, 0.0) + integral,
                 ndtr((h + k2 - b) / 2.0) - integral)  # fmt: skip
    # (only where the usual form would lose more than 3 digits: the two agree to ~1e-12,
    # and no switch at r = 0)
    lossy = near | (np.asarray(_value(moderate)) < 1e-3 * np.asarray(_value(product)))
    value = where(low_left & lossy, from_minus_one, where(near, high, moderate))
    # rounding (or, for -0.925 <= r < 0 off the joint lower tail, ~1e-16 of the terms)
    # never leaves a negative probability
    return where(np.asarray(_value(value)) < 0.0, 0.0, value)


def _bvn_rect(lo: Any, hi: Any, cov: Any) -> Any:
    """P(lo <= X <= hi) for X ~ N(0, cov), d = 2, rows of limits (rows, 2) with lo <= hi,
    exactly: four corners of Phi2, each coordinate whose interval lies above 0 mirrored
    to [-hi, -lo] first (the correlation changes sign when one of the two is)."""
    sd = tnp["sqrt"](tnp["diagonal"](cov))
    r = cov[0, 1] / (sd[0] * sd[1])
    if abs(float(_value(r))) >= 1.0:
        raise ValueError(
            "multivariate_normal.cdf: the correlation of cov rounds to +-1 (singular to "
            f"working precision): cov = {np.asarray(_value(cov)).tolist()}"
        )
    z = []
    for lim in (lo, hi):  # standardised, an infinite limit at +-_FAR
        v = np.asarray(_value(lim))
        inf = np.isinf(v)
        z.append(clip(where(inf, np.sign(v) * _FAR, where(inf, 0.0, lim) / sd), -_FAR, _FAR))
    up = np.asarray(_value(z[0])) > 0
    low, high = where(up, -z[1], z[0]), where(up, -z[0], z[1])
    rr = r * np.where(up[:, 0] != up[:, 1], -1.0, 1.0)
    hs = tnp["concatenate"]([high[:, 0], low[:, 0], high[:, 0], low[:, 0]])
    ks = tnp["concatenate"]([high[:, 1], high[:, 1], low[:, 1], low[:, 1]])
    corners = _bvn(hs, ks, tnp["concatenate"]([rr, rr, rr, rr])).reshape(4, -1)
    p = corners[0] - corners[1] - corners[2] + corners[3]
    return where(np.asarray(_value(p)) < 0.0, 0.0, p)  # rounding, never below 0


@functools.lru_cache(maxsize=16)
def _seeded_sobol(dim: int, log2n: int) -> np.ndarray:
    return _sobol(dim, log2n, np.random.default_rng(_MVN_SEED))


def _sobol(dim: int, log2n: int, gen: np.random.Generator) -> np.ndarray:
    """(dim, _SCRAMBLES * 2**log2n) points: _SCRAMBLES scrambled Sobol' sets, one after
    the other."""
    qmc = importlib.import_module("scipy.stats.qmc")
    seeds = gen.integers(0, 2**63, _SCRAMBLES)
    sets = [qmc.Sobol(dim, scramble=True, seed=int(s)).random_base2(log2n) for s in seeds]
    return np.concatenate(sets).T


def _sov_integrand(lo: Any, hi: Any, low: Any, w: np.ndarray, dtype: Any) -> Any:
    """prod_i (e_i - c_i) at each point: (rows, points). lo, hi are (rows, d) limits
    with lo <= hi (infinite ones allowed), low the Cholesky factor. Where a standardised
    lower limit lies above 0 the variable is taken in its mirror image, -X, so that
    e_i - c_i is a difference of small upper-tail numbers."""
    tiny, top = np.finfo(dtype).tiny, 1.0 - np.finfo(dtype).epsneg
    ys: list[Any] = []
    f: Any = 1.0
    for i in range(low.shape[0]):
        s: Any = 0.0
        for j, y in enumerate(ys):
            s = s + low[i, j] * y
        z = []
        for lim in (lo[:, i : i + 1], hi[:, i : i + 1]):  # an infinite limit at +-_FAR
            v = np.asarray(_value(lim))
            inf = np.isinf(v)
            z.append(where(inf, np.sign(v) * _FAR, (where(inf, 0.0, lim) - s) / low[i, i]))
        # mirror: P(-X <= -lo) - P(-X <= -hi)
        sign = where(z[0] > 0.0, np.asarray(-1.0, dtype), np.asarray(1.0, dtype))
        c, e = ndtr(sign * z[0]), ndtr(sign * z[1])
        f = f * (sign * (e - c))
        if i + 1 < low.shape[0]:
            u = clip(c + w[i].astype(dtype) * (e - c), tiny, top)
            ys.append(sign * tsp["ndtri"](u))
    return f


def _value(x: Any) -> Any:
    return x.numpy() if hasattr(x, "numpy") else x


def _genz_order(a: np.ndarray, b: np.ndarray, cov: np.ndarray) -> tuple[int, ...]:
    """Genz-Bretz variable order for one pair of limits: at each step the variable of
    smallest conditional probability, its value then set to its truncated mean."""
    d = len(a)
    perm, a, b, c = np.arange(d), a.copy(), b.copy(), cov.copy()
    low, y = np.zeros((d, d)), np.zeros(d)
    sp = importlib.import_module("scipy.special")
    with np.errstate(all="ignore"):
        for i in range(d):
            shift = low[i:, :i] @ y[:i]
            sd = np.sqrt(np.maximum(np.diag(c)[i:] - np.sum(low[i:, :i] ** 2, axis=1), 0.0))
            alpha, beta = (a[i:] - shift) / sd, (b[i:] - shift) / sd
            j = i + int(np.argmin(np.nan_to_num(sp.ndtr(beta) - sp.ndtr(alpha), nan=2.0)))
            for arr in (perm, a, b, low):
                arr[[i, j]] = arr[[j, i]]
            c[[i, j]] = c[[j, i]]
            c[:, [i, j]] = c[:, [j, i]]
            al, be, low[i, i] = alpha[j - i], beta[j - i], sd[j - i]
            low[i + 1 :, i] = (c[i + 1 :, i] - low[i + 1 :, :i] @ low[i, :i]) / low[i, i]
            p = sp.ndtr(be) - sp.ndtr(al)
            if p > 1e-300:  # E[Z | al <= Z <= be] = (phi(al) - phi(be)) / p
                y[i] = (math.exp(-0.5 * al * al) - math.exp(-0.5 * be * be)) / (SQRT_2PI * p)
            else:  # no mass: the nearer limit, if finite
                y[i] = np.clip(be if be < 0 else al, -40.0, 40.0)
    return tuple(int(k) for k in perm)


def _lattice_sizes(
    lo: np.ndarray, hi: np.ndarray, cov: np.ndarray, points: Callable, n_max: int, tol: tuple
) -> np.ndarray:
    """log2 of the points per scramble at which each row of limits (already in the
    integration order) meets the tolerance in its value and in a random directional
    derivative (the gradient's error, which the value's alone does not bound: at a
    diagonal cov the value's integrand is constant but not its derivatives), doubling
    from 64 (or n_max) up to n_max."""
    abseps, releps = tol
    low = np.linalg.cholesky(cov)
    gen = np.random.default_rng(_MVN_SEED)
    finite = lambda v: np.where(np.isfinite(v), gen.standard_normal(v.shape), 0.0)  # noqa: E731
    direction = (finite(lo), finite(hi), np.tril(gen.standard_normal(low.shape)))
    sizes = np.zeros(len(lo), dtype=int)
    log2n = min(6, max(0, n_max.bit_length() - 1))
    pending = np.arange(len(lo))
    while len(pending):
        n = 1 << log2n
        w = points(log2n)
        step = max(1, _MVN_CHUNK // w.shape[1])
        left = []
        for k in range(0, len(pending), step):
            rows = pending[k : k + step]
            done = np.full(len(rows), 2 * n > n_max)
            with no_grad():  # values only, inside any outer recording
                outs = jvp(
                    functools.partial(_sov_integrand, w=w, dtype=np.float64),
                    (lo[rows], hi[rows], low),
                    (direction[0][rows], direction[1][rows], direction[2]),
                )
            ok = np.ones(len(rows), dtype=bool)
            for f in outs:  # the value, then the directional derivative
                means = np.asarray(_value(f)).reshape(len(rows), _SCRAMBLES, n).mean(axis=2)
                err = 3.0 * means.std(axis=1, ddof=1) / math.sqrt(_SCRAMBLES)
                ok &= err <= np.maximum(abseps, releps * np.abs(means.mean(axis=1)))
            done |= ok
            sizes[rows[done]] = log2n
            left.append(rows[~done])
        pending = np.concatenate(left)
        log2n += 1
    return sizes


def _mvn_cdf(
    x: Any,
    mean: Any = None,
    cov: Any = 1.0,
    allow_singular: bool = False,
    maxpts: int | None = None,
    abseps: float = 1e-5,
    releps: float = 1e-5,
    *,
    lower_limit: Any = None,
    rng: Any = None,
) -> Any:
    """P(lower_limit <= X <= x) for X ~ N(mean, cov) (see above); a limit above x counts
    negatively, as SciPy's."""
    name = "multivariate_normal.cdf"
    hi, cov, d = _mvn_args(name, x, mean, cov)
    if lower_limit is None:  # -inf in x's own precision, so float32 stays float32
        lower_limit = np.full(d, -np.inf, np.result_type(hi.dtype, np.float32))
    lo = _mvn_args(name, lower_limit, mean, cov)[0]
    shape = np.broadcast_shapes(hi.shape, lo.shape)
    hi, lo = tnp["broadcast_to"](hi, shape), tnp["broadcast_to"](lo, shape)
    hi, lo = hi.reshape(-1, d), lo.reshape(-1, d)
    hi_v, lo_v, cov_v = np.asarray(_value(hi)), np.asarray(_value(lo)), _value(cov)
    dtype = np.result_type(hi_v.dtype, cov_v.dtype, np.float32)
    asym = np.abs(cov_v - cov_v.T).max()
    if not np.all(np.isfinite(cov_v)) or asym > 1e-8 * np.abs(cov_v).max():
        raise ValueError(
            f"{name}: cov {cov_v.shape} {cov_v.dtype} must be finite and symmetric "
            f"(largest asymmetry {asym:.3g})"
        )
    try:
        np.linalg.cholesky(cov_v)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"{name}: cov {cov_v.shape} {cov_v.dtype} is not positive definite; a "
            "singular normal's distribution function is not supported (allow_singular)"
        ) from None
    cov = (cov + tnp["swapaxes"](cov, 0, 1)) / 2.0  # either triangle, whatever the order
    if hi_v.shape[0] == 0:
        return tensor(np.zeros(shape[:-1], dtype))
    swap = hi_v < lo_v  # integrate over [min, max], the sign says how often swapped
    lo, hi = where(swap, hi, lo), where(swap, lo, hi)
    lo_v, hi_v = np.where(swap, hi_v, lo_v), np.where(swap, lo_v, hi_v)
    sign = (-1.0) ** swap.sum(axis=-1)
    nan = np.isnan(lo_v).any(axis=1) | np.isnan(hi_v).any(axis=1)
    if rng is None:
        points = functools.partial(_seeded_sobol, d - 1)
    else:  # the caller's generator: new scrambles on every call, as SciPy's
        gen = np.random.default_rng(rng)
        points = functools.lru_cache()(lambda log2n: _sobol(d - 1, log2n, gen))
    n_max = max(1, int(maxpts or 1_000_000 * d) // _SCRAMBLES)
    parts, rows = [], []
    if nan.any():  # NaN limits: NaN, and nothing to integrate
        parts.append(tensor(np.full(int(nan.sum()), np.nan, dtype)))
        rows.append(np.flatnonzero(nan))
    valid = np.flatnonzero(~nan)
    if d == 2 and len(valid):  # exactly, all rows at once
        p2 = _bvn_rect(lo[valid], hi[valid], cov) * sign[valid]  # in float64
        parts.append(p2.astype(dtype) if p2.dtype != dtype else p2)
        rows.append(valid)
        valid = valid[:0]
    orders: dict[tuple, list[int]] = {}
    for r in valid:  # Genz-Bretz order for each pair of limits
        orders.setdefault(_genz_order(lo_v[r], hi_v[r], cov_v) if d > 1 else (0,), []).append(r)
    for perm, members in orders.items():
        p, idx = list(perm), np.asarray(members)
        low = tla["cholesky"](cov[p][:, p])
        if d == 1:  # ndtr of the limits, exactly
            sizes = np.zeros(len(idx), dtype=int)
        else:
            args = lo_v[idx][:, p], hi_v[idx][:, p], cov_v[np.ix_(p, p)], points, n_max
            sizes = _lattice_sizes(*args, (abseps, releps))
        for log2n in np.unique(sizes):
            w = points(int(log2n)) if d > 1 else np.zeros((0, 1))
            same = idx[sizes == log2n]
            step = max(1, _MVN_CHUNK // w.shape[1])
            for k in range(0, len(same), step):
                chunk = same[k : k + step]
                f = _sov_integrand(lo[chunk][:, p], hi[chunk][:, p], low, w, dtype)
                parts.append(tnp["mean"](f, axis=-1) * sign[chunk].astype(dtype))
                rows.append(chunk)
    out = parts[0] if len(parts) == 1 else tnp["concatenate"](parts)
    if len(parts) > 1:
        out = out[np.argsort(np.concatenate(rows))]
    return _scalar_if_one(out.reshape(shape[:-1]))


def _mvn_logcdf(*args: Any, **kwargs: Any) -> Any:
    """log of :func:`_mvn_cdf`; where the probability underflows to 0 that is -inf (as
    SciPy's), and a gradient there, which would be wrong, raises."""
    p = _mvn_cdf(*args, **kwargs)
    zero = np.asarray(_value(p)) == 0.0
    if zero.any() and getattr(p, "requires_grad", False):
        raise ValueError(
            "multivariate_normal.logcdf: the probability underflows to 0 at "
            f"{int(zero.sum())} of {zero.size} points (first at index "
            f"{np.unravel_index(int(np.argmax(zero)), zero.shape)}); its logarithm is -inf "
            "there and has no gradient"
        )
    return log(p)


def _dirichlet_logpdf(x: Any, alpha: Any) -> Any:
    """Components on the first axis, as SciPy's ``dirichlet.logpdf``."""
    a = as_tensor(alpha)
    xs = as_tensor(x)
    shape = (a.shape[0],) + (1,) * (xs.ndim - 1)
    terms = asum(xlogy(a.reshape(shape) - 1.0, xs), axis=0)
    return terms + gammaln(asum(a)) - asum(gammaln(a))


multivariate_normal = Distribution(
    "multivariate_normal",
    {
        "logpdf": _mvn_logpdf,
        "pdf": lambda x, mean=None, cov=1.0: exp(_mvn_logpdf(x, mean, cov)),
        "cdf": _mvn_cdf,
        "logcdf": _mvn_logcdf,
    },
)
dirichlet = Distribution(
    "dirichlet",
    {"logpdf": _dirichlet_logpdf, "pdf": lambda x, alpha: exp(_dirichlet_logpdf(x, alpha))},
)
multivariate_normal.__doc__ = """The multivariate normal distribution, recording on tensors.

SciPy's ``scipy.stats.multivariate_normal``: the methods ``cdf logcdf logpdf pdf``,
called as ``multivariate_normal.logpdf(x, mean=None, cov=1)``, with SciPy's parameters
and values, differentiable in ``x``, ``mean`` and ``cov``. On plain (non-tensor)
arguments each is SciPy's own method. ``cdf`` and ``logcdf`` are exact for dimension up
to 2, and randomised quasi-Monte Carlo from a fixed seed above.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats

The gradient in the mean is ``inv(cov) @ (x - mean)``:

>>> mean = tg.tensor([0.0, 0.0], requires_grad=True)
>>> cov = np.array([[2.0, 0.0], [0.0, 0.5]])
>>> stats.multivariate_normal.logpdf(np.array([1.0, 1.0]), mean, cov).backward()
>>> mean.grad
array([0.5, 2. ])
>>> stats.multivariate_normal.cdf(tg.tensor([0.0, 0.0]), np.zeros(2), np.eye(2))
tensor(0.25)
"""

dirichlet.__doc__ = """The Dirichlet distribution, recording on tensors.

SciPy's ``scipy.stats.dirichlet``: the methods ``logpdf pdf``, called as
``dirichlet.logpdf(x, alpha)``, with SciPy's parameters and values, differentiable in
``x`` and ``alpha``. On plain (non-tensor) arguments each is SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> alpha = tg.tensor([1.0, 1.0, 1.0], requires_grad=True)
>>> stats.dirichlet.pdf(np.array([0.2, 0.3, 0.5]), alpha)  # uniform on the simplex
tensor(2., requires_grad=True)
"""
