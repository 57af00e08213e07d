"""What the densities share: tapegrad's functions by their NumPy names, and the pieces
that keep a density written with ``where`` exact and free of NaN: clamps, boolean masks
combined through floats (they replay under ``tg.compile``), safe arguments for the
branch not taken, SciPy's NaN for invalid parameters, and the derivative at an edge of
a support."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...numpy_protocols import holds_tensor
from ...surface import NAMESPACES

tnp = NAMESPACES["numpy"]
tla = NAMESPACES["numpy.linalg"]
tsp = NAMESPACES["special"]
tsla = NAMESPACES["scipy.linalg"]
where, log, log1p, exp, expm1 = tnp["where"], tnp["log"], tnp["log1p"], tnp["exp"], tnp["expm1"]
clip, floor, arctan, absolute = tnp["clip"], tnp["floor"], tnp["arctan"], tnp["absolute"]
sqrt = tnp["sqrt"]
maximum, minimum, asum = tnp["maximum"], tnp["minimum"], tnp["sum"]
gammaln, xlogy, xlog1py = tsp["gammaln"], tsp["xlogy"], tsp["xlog1py"]
ndtr, log_ndtr, betaln = tsp["ndtr"], tsp["log_ndtr"], tsp["betaln"]
gammainc, gammaincc, i0e = tsp["gammainc"], tsp["gammaincc"], tsp["i0e"]
betainc = tsp["betainc"]

LOG_2PI = math.log(2.0 * math.pi)
SQRT_2PI = math.sqrt(2.0 * math.pi)


# --- pieces ---------------------------------------------------------------------------------


def at_least(z: Any, lo: float) -> Any:
    """``max(z, lo)`` as a clip: the full gradient reaches z at z == lo (``maximum``
    would split it with the constant), for the safe inputs of branches."""
    return clip(z, lo, np.inf)


def at_most(z: Any, hi: float) -> Any:
    return clip(z, -np.inf, hi)


def log_expit(z: Any) -> Any:
    """``log(1 / (1 + exp(-z)))`` without overflow: ``-(max(-z, 0) + log1p(exp(-|z|)))``."""
    return -(maximum(-z, 0.0) + log1p(exp(-absolute(z))))


def standardised(x: Any, loc: Any, scale: Any) -> Any:
    return (x - loc) / scale


# Boolean masks are combined through floats and a comparison: a comparison replays under
# tg.compile, while a where of booleans is read at capture (a guard: every change of the
# mask captured again).


def both(a: Any, b: Any) -> Any:
    """Elementwise ``a and b`` of boolean tensors (or Python bools)."""
    if isinstance(a, bool):
        return b if a else False
    if isinstance(b, bool):
        return a if b else False
    return where(a, where(b, 1.0, 0.0), 0.0) > 0.5


def either(a: Any, b: Any) -> Any:
    """Elementwise ``a or b`` of boolean tensors (or Python bools)."""
    if isinstance(a, bool):
        return True if a else b
    if isinstance(b, bool):
        return True if b else a
    return where(a, 1.0, where(b, 1.0, 0.0)) > 0.5


def log_scale(scale: Any) -> Any:
    """log(scale), 0 where scale is not positive (those results become NaN anyway); a
    Python number stays one (weak: float32 data stays float32)."""
    if type(scale) in (int, float):
        return math.log(scale) if scale > 0 else 0.0
    return log(positive(scale))


def inside_support(cond: Any, value: Any, outside: float) -> Any:
    """``value`` where ``cond``, else the constant ``outside`` (a where: the branch not
    taken gets no gradient)."""
    return where(cond, value, outside)


def positive(v: Any, fallback: float = 1.0) -> Any:
    """``v`` where positive, else ``fallback``: a safe argument for logs in branches
    that a where discards."""
    return where(v > 0, v, fallback)


def nan_where_invalid(value: Any, ok: Any) -> Any:
    """SciPy's NaN for invalid parameters (a scale that is not positive...)."""
    if isinstance(ok, bool | np.bool_):
        return value if ok else value * np.nan
    return where(ok, value, np.nan)


def vanishing_at_edge(at: Any, t: Any, slope: Any, power: Any) -> Any:
    """0 where ``at`` (where ``t`` is 0: the distance into the support from an edge at
    which the value is 0, as ``t^power`` times a smooth factor), with the derivative
    ``slope`` in t there (>= 0, +inf allowed; a constant): the one-sided derivative from
    inside the support, as the limit of the derivative inside. Elsewhere 0 with no
    gradient. An infinite slope comes from sqrt(t) (a product with inf would make the
    value NaN; its higher derivatives are infinite, as the true ones).

    Higher derivatives are not computed here: ``slope * t`` alone would give 0 for the
    second (poisson.pmf(1, mu) at mu = 0 has -2, gamma(3).pdf at 0 has 1), a silent wrong
    number. Where ``power >= 1``, the term ``0 * t^q``, q = max(ceil(power) - 1/2, 3/2), adds
    0 to the value and to the first derivative and 0 * inf = NaN to the derivative of
    order ceil(q) and up, from the first one the true value need not be 0 at (a
    derivative of order below ``power`` is 0, as computed). The price: a log of the 0
    (``logcdf`` there) sends an infinite cotangent, and its derivative is NaN, not inf."""
    if not holds_tensor(t):  # a plain t: no gradient to give
        return 0.0
    t0 = where(at, t, 0.0)  # (the gradient of every other point stops here)
    slope = in_dtype_of(constant(slope), t0)
    infinite = slope == np.inf
    finite = where(both(slope > 0, slope < np.inf), slope, 0.0)
    root = sqrt(where(infinite, t0, 1.0))
    value = where(infinite, root, where(finite > 0, finite * t0, 0.0))
    power = in_dtype_of(constant(power), t0)
    smooth = both(power >= 1, power < np.inf)
    # (ceil: t^2.2's second derivative is 0 at t = 0, and t^1.7's would be NaN)
    q = where(smooth, maximum(-floor(-power) - 0.5, 1.5), 1.5)
    return value + 0.0 * where(smooth, t0, 0.0) ** q


def anywhere(mask: Any) -> bool:
    """Whether boolean ``mask`` (a tensor, an array or a Python bool) holds anywhere,
    read in Python: for a tensor through one recorded sum, so that under ``tg.compile``
    the guard is on one number (a replay where it changes captures again)."""
    if isinstance(mask, bool | np.bool_):
        return bool(mask)
    if holds_tensor(mask):
        return float(asum(where(mask, 1.0, 0.0))) > 0
    return bool(np.any(mask))


def in_dtype_of(v: Any, like: Any) -> Any:
    """``v`` in ``like``'s floating dtype where ``v`` is a constant: SciPy's float64 from
    Python shapes (or a detached tensor) would make float32 data float64."""
    dtype = getattr(like, "dtype", None)
    if dtype is None or not np.issubdtype(dtype, np.floating):
        return v
    if hasattr(v, "detach"):
        return v if v.requires_grad or v.dtype == dtype else tnp["astype"](v, dtype)
    return np.asarray(v).astype(dtype)


def select(cond: Any, v: Any, fallback: Any, like: Any) -> Any:
    """``where(cond, v, fallback)``, a safe argument; a plain ``v`` (a Python number)
    stays in ``like``'s dtype (a where of two numbers is float64)."""
    out = where(cond, v, fallback)
    return out if holds_tensor(v) else in_dtype_of(out, like)


def unless(at: Any, v: Any, safe: float, like: Any) -> Any:
    """``v``, but ``safe`` where ``at`` (see :func:`select`)."""
    return select(where(at, 0.0, 1.0) > 0.5, v, safe, like)


def power_at_0(m: Any, log_rest: Any) -> Any:
    """t^m exp(log_rest) at t = 0: inf for m < 0, exp(log_rest) for m = 0, 0 for m > 0
    (``xlogy(m, 0)`` is +inf, 0 or -inf)."""
    return exp(xlogy(m, 0.0 * m) + log_rest)


def power_slope(m: Any, log_rest: Any) -> Any:
    """The derivative at t = 0+ of t^m exp(log_rest) (m > 0): m t^(m - 1) exp(log_rest),
    inf for m < 1, exp(log_rest) for m = 1 and 0 for m > 1."""
    ms = where(m > 0, m, 1.0)
    return power_at_0(ms - 1.0, log(ms) + log_rest)


def standard_cut(x: Any, loc: Any, scale: Any) -> Any:
    """(x - loc) / scale with no gradient to a tensor scale where x == loc: there its
    derivative -z / scale is 0, and an edge's infinite derivative in z at z = 0 times
    that 0 would be NaN."""
    if not hasattr(scale, "detach"):
        return standardised(x, loc, scale)
    return (x - loc) / where(x == loc, constant(scale), scale)


def complement(lower: Any, upper: Any) -> tuple[Any, Any]:
    """The smaller tail as computed (each formula is accurate where its tail is small),
    the larger as 1 minus it: ``beta.sf`` at z = 1e-10 would otherwise go through 1 - z."""
    first = lower <= upper
    return where(first, lower, 1.0 - upper), where(first, 1.0 - lower, upper)


def from_tails(which: str, lower: Any, upper: Any) -> Any:
    """cdf, sf, logcdf or logsf from the two tails: a log is taken of the smaller tail,
    and log1p of minus the other where it is the larger (the logs keep their digits)."""
    this, other = (upper, lower) if which in ("sf", "logsf") else (lower, upper)
    if not which.startswith("log"):
        return this
    return where(this < 0.5, log(this), log1p(-at_most(other, 0.5)))


def constant(v: Any) -> Any:
    """``v`` without a gradient (a tensor detached; anything else as it is)."""
    return v.detach() if hasattr(v, "detach") else v
