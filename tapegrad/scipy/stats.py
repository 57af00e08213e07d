"""``tapegrad.scipy.stats``: SciPy's distributions, recording on Tensors.

``norm.logpdf(x, loc, scale)`` and the like, with SciPy's names, parameters and values,
differentiable in ``x`` and every continuous parameter. Each method is written in
tapegrad ops (logs of densities in their stable forms: ``special.log_ndtr``, ``xlogy``,
``xlog1py``, ``betaln``); on plain (non-tensor) arguments it is SciPy's own method. Outside the
support a log-density is ``-inf`` (its gradient 0, with no NaN from the branch not
taken), as SciPy's value.

Here: the densities and log-densities of ``norm expon laplace cauchy logistic lognorm
uniform t gamma beta vonmises multivariate_normal dirichlet``, the mass functions of
``poisson bernoulli binom nbinom``, ``cdf sf logcdf logsf`` of ``norm expon laplace
cauchy logistic lognorm gamma t beta vonmises poisson bernoulli binom nbinom``
(``uniform``: ``cdf sf``) and ``cdf logcdf`` of ``multivariate_normal`` (exact for
d <= 2; randomised quasi-Monte Carlo from a fixed seed above, as described before
``_bvn``).
The distribution functions of ``t beta binom nbinom`` are the regularized incomplete
beta function (``special.betainc``), those of ``gamma`` and ``poisson`` the incomplete
gamma function: both differentiable in every argument (in the shape parameters to first
order; a second derivative there raises).
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._namespace import NAMESPACES
from .._protocols import holds_tensor
from ..higher import jvp
from ..ops.special import stirling_correction
from ..tensors import as_tensor, no_grad, tensor, values_of

_np = NAMESPACES["numpy"]
_la = NAMESPACES["numpy.linalg"]
_sp = NAMESPACES["special"]
_sla = NAMESPACES["scipy.linalg"]
where, log, log1p, exp, expm1 = _np["where"], _np["log"], _np["log1p"], _np["exp"], _np["expm1"]
clip, floor, arctan, absolute = _np["clip"], _np["floor"], _np["arctan"], _np["absolute"]
sqrt = _np["sqrt"]
maximum, minimum, asum = _np["maximum"], _np["minimum"], _np["sum"]
gammaln, xlogy, xlog1py = _sp["gammaln"], _sp["xlogy"], _sp["xlog1py"]
ndtr, log_ndtr, betaln = _sp["ndtr"], _sp["log_ndtr"], _sp["betaln"]
gammainc, gammaincc, i0e = _sp["gammainc"], _sp["gammaincc"], _sp["i0e"]
betainc = _sp["betainc"]

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# --- pieces ---------------------------------------------------------------------------------


def _at_least(z: Any, lo: float) -> Any:
    """``max(z, lo)`` as a clip: the full gradient reaches z at z == lo (``maximum``
    would split it with the constant), for the safe inputs of branches."""
    return clip(z, lo, np.inf)


def _at_most(z: Any, hi: float) -> Any:
    return clip(z, -np.inf, hi)


def _log_expit(z: Any) -> Any:
    """``log(1 / (1 + exp(-z)))`` without overflow: ``-(max(-z, 0) + log1p(exp(-|z|)))``."""
    return -(maximum(-z, 0.0) + log1p(exp(-absolute(z))))


def _standard(x: Any, loc: Any, scale: Any) -> Any:
    return (x - loc) / scale


# Boolean masks are combined through floats and a comparison: a comparison replays under
# tg.compile, while a where of booleans is read at capture (a guard: every change of the
# mask captured again).


def _and(a: Any, b: Any) -> Any:
    """Elementwise ``a and b`` of boolean tensors (or Python bools)."""
    if isinstance(a, bool):
        return b if a else False
    if isinstance(b, bool):
        return a if b else False
    return where(a, where(b, 1.0, 0.0), 0.0) > 0.5


def _or(a: Any, b: Any) -> Any:
    """Elementwise ``a or b`` of boolean tensors (or Python bools)."""
    if isinstance(a, bool):
        return True if a else b
    if isinstance(b, bool):
        return True if b else a
    return where(a, 1.0, where(b, 1.0, 0.0)) > 0.5


def _log_scale(scale: Any) -> Any:
    """log(scale), 0 where scale is not positive (those results become NaN anyway); a
    Python number stays one (weak: float32 data stays float32)."""
    if type(scale) in (int, float):
        return math.log(scale) if scale > 0 else 0.0
    return log(_positive(scale))


def _inside(cond: Any, value: Any, outside: float) -> Any:
    """``value`` where ``cond``, else the constant ``outside`` (a where: the branch not
    taken gets no gradient)."""
    return where(cond, value, outside)


def _positive(v: Any, fallback: float = 1.0) -> Any:
    """``v`` where positive, else ``fallback``: a safe argument for logs in branches
    that a where discards."""
    return where(v > 0, v, fallback)


def _valid(value: Any, ok: Any) -> Any:
    """SciPy's NaN for invalid parameters (a scale that is not positive...)."""
    if isinstance(ok, bool | np.bool_):
        return value if ok else value * np.nan
    return where(ok, value, np.nan)


def _edge(at: Any, t: Any, slope: Any, power: Any) -> Any:
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
    slope = _as(_constant(slope), t0)
    infinite = slope == np.inf
    finite = where(_and(slope > 0, slope < np.inf), slope, 0.0)
    root = sqrt(where(infinite, t0, 1.0))
    value = where(infinite, root, where(finite > 0, finite * t0, 0.0))
    power = _as(_constant(power), t0)
    smooth = _and(power >= 1, power < np.inf)
    # (ceil: t^2.2's second derivative is 0 at t = 0, and t^1.7's would be NaN)
    q = where(smooth, maximum(-floor(-power) - 0.5, 1.5), 1.5)
    return value + 0.0 * where(smooth, t0, 0.0) ** q


def _anywhere(mask: Any) -> bool:
    """Whether boolean ``mask`` (a tensor, an array or a Python bool) holds anywhere,
    read in Python: for a tensor through one recorded sum, so that under ``tg.compile``
    the guard is on one number (a replay where it changes captures again)."""
    if isinstance(mask, bool | np.bool_):
        return bool(mask)
    if holds_tensor(mask):
        return float(asum(where(mask, 1.0, 0.0))) > 0
    return bool(np.any(mask))


def _as(v: Any, like: Any) -> Any:
    """``v`` in ``like``'s floating dtype where ``v`` is a constant: SciPy's float64 from
    Python shapes (or a detached tensor) would make float32 data float64."""
    dtype = getattr(like, "dtype", None)
    if dtype is None or not np.issubdtype(dtype, np.floating):
        return v
    if hasattr(v, "detach"):
        return v if v.requires_grad or v.dtype == dtype else _np["astype"](v, dtype)
    return np.asarray(v).astype(dtype)


def _select(cond: Any, v: Any, fallback: Any, like: Any) -> Any:
    """``where(cond, v, fallback)``, a safe argument; a plain ``v`` (a Python number)
    stays in ``like``'s dtype (a where of two numbers is float64)."""
    out = where(cond, v, fallback)
    return out if holds_tensor(v) else _as(out, like)


def _unless(at: Any, v: Any, safe: float, like: Any) -> Any:
    """``v``, but ``safe`` where ``at`` (see :func:`_select`)."""
    return _select(where(at, 0.0, 1.0) > 0.5, v, safe, like)


def _power_at_0(m: Any, log_rest: Any) -> Any:
    """t^m exp(log_rest) at t = 0: inf for m < 0, exp(log_rest) for m = 0, 0 for m > 0
    (``xlogy(m, 0)`` is +inf, 0 or -inf)."""
    return exp(xlogy(m, 0.0 * m) + log_rest)


def _power_slope(m: Any, log_rest: Any) -> Any:
    """The derivative at t = 0+ of t^m exp(log_rest) (m > 0): m t^(m - 1) exp(log_rest),
    inf for m < 1, exp(log_rest) for m = 1 and 0 for m > 1."""
    ms = where(m > 0, m, 1.0)
    return _power_at_0(ms - 1.0, log(ms) + log_rest)


def _standard_cut(x: Any, loc: Any, scale: Any) -> Any:
    """(x - loc) / scale with no gradient to a tensor scale where x == loc: there its
    derivative -z / scale is 0, and an edge's infinite derivative in z at z = 0 times
    that 0 would be NaN."""
    if not hasattr(scale, "detach"):
        return _standard(x, loc, scale)
    return (x - loc) / where(x == loc, _constant(scale), scale)


# --- continuous distributions with a location and a scale ------------------------------------


def _location_scale(
    log_density: Callable,
    cdf: Callable | None = None,
    logcdf: Callable | None = None,
    support: Callable | None = None,
    flip: bool = True,
) -> dict[str, Callable]:
    """The methods of a location-scale family from its standard log-density (and CDF,
    log-CDF; the survival functions as the CDF of -z when the density is symmetric,
    ``flip``). ``support(z)``: where the density is positive."""

    def logpdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = _standard(x, loc, scale)
        if support is None:
            value = log_density(z) - _log_scale(scale)
        else:
            inside = support(z)
            safe = where(inside, z, 0.5)
            value = _inside(inside, log_density(safe), -np.inf) - _log_scale(scale)
        return _valid(value, scale > 0)

    def pdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return exp(logpdf(x, loc, scale))

    methods = {"logpdf": logpdf, "pdf": pdf}
    if cdf is not None:

        def cdf_(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            return _valid(cdf(_standard(x, loc, scale)), scale > 0)

        def logcdf_(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            return _valid(logcdf(_standard(x, loc, scale)), scale > 0)

        methods.update(cdf=cdf_, logcdf=logcdf_)
        if flip:

            def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
                return _valid(cdf(-_standard(x, loc, scale)), scale > 0)

            def logsf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
                return _valid(logcdf(-_standard(x, loc, scale)), scale > 0)

            methods.update(sf=sf, logsf=logsf)
    return methods


def _laplace_logcdf(z: Any) -> Any:
    neg = _at_most(z, 0.0)
    pos = _at_least(z, 0.0)
    return where(z < 0, math.log(0.5) + neg, log1p(-0.5 * exp(-pos)))


def _laplace_cdf(z: Any) -> Any:
    return where(z < 0, 0.5 * exp(_at_most(z, 0.0)), 1.0 - 0.5 * exp(-_at_least(z, 0.0)))


_NORM = _location_scale(lambda z: -0.5 * z * z - 0.5 * _LOG_2PI, ndtr, log_ndtr)
_LAPLACE = _location_scale(lambda z: -absolute(z) - math.log(2.0), _laplace_cdf, _laplace_logcdf)


def _cauchy_logpdf(z: Any) -> Any:
    """-log(pi (1 + z^2)); past |z| = 1 as -log(pi) - 2 log|z| - log1p(1/z^2), which
    does not overflow (z^2 does from 1.3e154)."""
    big = absolute(z) > 1.0
    zb = where(big, z, 2.0)  # (safe arguments for the branch a where discards)
    zs = where(big, 0.0, z)
    far = -math.log(math.pi) - 2.0 * log(absolute(zb)) - log1p(1.0 / (zb * zb))
    return where(big, far, -log(math.pi * (1.0 + zs * zs)))


def _cauchy_cdf(z: Any) -> Any:
    """1/2 + arctan(z) / pi, below z = -1 as arctan(-1/z) / pi: the lower tail to full
    relative accuracy (the sum cancelled: 2e-7 off at -1e10, 0 at -1e300)."""
    low = z < -1.0
    zl = where(low, z, -2.0)
    return where(low, arctan(-1.0 / zl) / math.pi, 0.5 + arctan(where(low, 0.0, z)) / math.pi)


def _cauchy_logcdf(z: Any) -> Any:
    """log of the CDF; above 0 as log1p(-cdf(-z)) (a log near 1 kept nothing of the
    upper tail's 3e-11 at 1e10)."""
    up = z > 0.0
    return where(up, log1p(-_cauchy_cdf(-where(up, z, 1.0))), log(_cauchy_cdf(where(up, 0.0, z))))


_CAUCHY = _location_scale(_cauchy_logpdf, _cauchy_cdf, _cauchy_logcdf)
_LOGISTIC = _location_scale(
    lambda z: -absolute(z) - 2.0 * log1p(exp(-absolute(z))),
    lambda z: _sp["expit"](z),
    _log_expit,
)


def _expon_methods() -> dict[str, Callable]:
    def cdf(z: Any) -> Any:
        return where(z > 0, -expm1(-_at_least(z, 0.0)), 0.0)

    def logcdf(z: Any) -> Any:
        # log(1 - exp(-z)): log(-expm1(-z)) for small z, log1p(-exp(-z)) past log 2
        zs = _positive(z)
        small = log(-expm1(-_at_most(zs, math.log(2.0))))
        large = log1p(-exp(-_at_least(zs, math.log(2.0))))
        return where(z > 0, where(z < math.log(2.0), small, large), -np.inf)

    methods = _location_scale(lambda z: -z, cdf, logcdf, support=lambda z: z >= 0, flip=False)

    def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = _standard(x, loc, scale)
        return _valid(where(z > 0, exp(-_at_least(z, 0.0)), 1.0), scale > 0)

    def logsf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = _standard(x, loc, scale)
        return _valid(where(z > 0, -z, 0.0), scale > 0)

    methods.update(sf=sf, logsf=logsf)
    return methods


def _uniform_methods() -> dict[str, Callable]:
    def inside(z: Any) -> Any:
        return _and(z >= 0, z <= 1)

    methods = _location_scale(lambda z: 0.0 * z, support=inside)

    def cdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return _valid(clip(_standard(x, loc, scale), 0.0, 1.0), scale > 0)

    def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return _valid(1.0 - clip(_standard(x, loc, scale), 0.0, 1.0), scale > 0)

    methods.update(cdf=cdf, sf=sf)
    return methods


def _lognorm_methods() -> dict[str, Callable]:
    def logpdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = _standard(x, loc, scale)
        inside = y > 0
        ly = log(_positive(y))
        value = -0.5 * (ly / s) ** 2 - ly - log(_positive(s)) - 0.5 * _LOG_2PI
        return _valid(_inside(inside, value, -np.inf) - _log_scale(scale), _and(scale > 0, s > 0))

    def cdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = _standard(x, loc, scale)
        return _valid(where(y > 0, ndtr(log(_positive(y)) / s), 0.0), _and(scale > 0, s > 0))

    def sf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = _standard(x, loc, scale)
        return _valid(where(y > 0, ndtr(-log(_positive(y)) / s), 1.0), _and(scale > 0, s > 0))

    def logcdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = _standard(x, loc, scale)
        return _valid(
            where(y > 0, log_ndtr(log(_positive(y)) / s), -np.inf), _and(scale > 0, s > 0)
        )

    def logsf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = _standard(x, loc, scale)
        return _valid(where(y > 0, log_ndtr(-log(_positive(y)) / s), 0.0), _and(scale > 0, s > 0))

    def pdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return exp(logpdf(x, s, loc, scale))

    return {"logpdf": logpdf, "pdf": pdf, "cdf": cdf, "sf": sf, "logcdf": logcdf, "logsf": logsf}


def _shape_args(name: str, args: tuple, nshape: int, loc: Any, scale: Any) -> tuple:
    """(shapes, loc, scale) from a shaped family's arguments: loc and scale may follow
    the shapes by position, as SciPy allows."""
    shapes, rest = args[:nshape], args[nshape:]
    if len(shapes) < nshape:
        raise TypeError(f"{name}: needs {nshape} shape parameter(s), got {len(shapes)}")
    if rest:
        loc = rest[0]
        scale = rest[1] if len(rest) > 1 else scale
    return shapes, loc, scale


def _shaped(
    log_density: Callable,
    support: Callable,
    nshape: int,
    edges: Callable | None = None,
    touches: Callable | None = None,
) -> dict[str, Callable]:
    """logpdf / pdf of a family with ``nshape`` shape parameters before loc and scale:
    ``log_density(z, *shapes)`` on the standardised variable inside ``support(z)``.
    ``edges(z, *shapes)``: the edges of the support, as ``[(at, t, m, log_rest)]`` for
    a density ``t^m exp(log_rest)`` near ``t = 0`` (``t`` the distance into the support,
    0 where ``at``): where that is 0 or infinite the pdf's derivatives are the limits
    from inside (``exp`` of the log-density would give 0 * inf or inf - inf).
    ``touches(z)``: a mask that holds wherever an edge may be met; where it holds
    nowhere (the common case) the pdf is ``exp`` of the log-density, five ops, not the
    edges' thirty."""

    def valid(value: Any, shapes: tuple, scale: Any) -> Any:
        ok = scale > 0
        for p in shapes:  # every shape parameter positive
            ok = _and(ok, p > 0)
        return _valid(value, ok)

    def log_pdf(z: Any, shapes: tuple, scale: Any) -> Any:
        inside = support(z)
        safe = where(inside, z, 0.5)
        value = _inside(inside, log_density(safe, *shapes), -np.inf) - _log_scale(scale)
        return valid(value, shapes, scale)

    def logpdf(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        shapes, loc, scale = _shape_args("logpdf", args, nshape, loc, scale)
        return log_pdf(_standard(x, loc, scale), shapes, scale)

    def pdf(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        shapes, loc, scale = _shape_args("pdf", args, nshape, loc, scale)
        z = _standard(x, loc, scale)
        if edges is None or not _anywhere(touches(z)):
            return exp(log_pdf(z, shapes, scale))
        z = _standard_cut(x, loc, scale)
        special, value = False, 0.0
        for at, t, m, log_rest in edges(z, *shapes):
            zero, pole = _and(at, m > 0), _and(at, m < 0)
            special = _or(special, _or(zero, pole))
            # an infinite density: the power's derivatives (-inf in t, and in the shape
            # through m, as the limits from inside; the other factor held constant)
            t0, ms = where(pole, t, 1.0), where(pole, _as(m, z), -1.0)
            infinite = t0**ms * _as(exp(_constant(log_rest)), z)
            slope = _power_slope(m, log_rest)
            value = value + where(pole, infinite, _edge(zero, t, slope, m))
        dens = exp(log_pdf(where(special, 0.5, z), shapes, scale))
        return where(special, valid(value / scale, shapes, scale), dens)

    return {"logpdf": logpdf, "pdf": pdf}


def _t_log_density(z: Any, df: Any) -> Any:
    """log of Student's t density, -log(sqrt(df) B(df/2, 1/2)) - (df + 1)/2 log1p(z^2/df):
    betaln keeps lgamma((df+1)/2) - lgamma(df/2) from cancelling (t.logpdf(1, 1e15)
    was 1.66, not -1.42); an infinite df is the normal density, as SciPy's."""
    if type(df) in (int, float) and df > 0:  # a Python number stays one (float32 stays)
        if df == math.inf:
            return -0.5 * z * z - 0.5 * _LOG_2PI
        norm = -float(betaln(0.5 * df, 0.5)) - 0.5 * math.log(df)
        return norm - 0.5 * (df + 1.0) * log1p(z * z / df)
    infinite = df == np.inf
    dfs = where(infinite, 1.0, df)  # (a safe argument for the branch not taken)
    t = -betaln(0.5 * dfs, 0.5) - 0.5 * log(dfs) - 0.5 * (dfs + 1.0) * log1p(z * z / dfs)
    return where(infinite, -0.5 * z * z - 0.5 * _LOG_2PI, t)


def _complement(lower: Any, upper: Any) -> tuple[Any, Any]:
    """The smaller tail as computed (each formula is accurate where its tail is small),
    the larger as 1 minus it: ``beta.sf`` at z = 1e-10 would otherwise go through 1 - z."""
    first = lower <= upper
    return where(first, lower, 1.0 - upper), where(first, 1.0 - lower, upper)


def _from_tails(which: str, lower: Any, upper: Any) -> Any:
    """cdf, sf, logcdf or logsf from the two tails: a log is taken of the smaller tail,
    and log1p of minus the other where it is the larger (the logs keep their digits)."""
    this, other = (upper, lower) if which in ("sf", "logsf") else (lower, upper)
    if not which.startswith("log"):
        return this
    return where(this < 0.5, log(this), log1p(-_at_most(other, 0.5)))


def _constant(v: Any) -> Any:
    """``v`` without a gradient (a tensor detached; anything else as it is)."""
    return v.detach() if hasattr(v, "detach") else v


def _with_tails(
    methods: dict[str, Callable], tails: Callable, nshape: int, standard: Callable = _standard
) -> dict:
    """Add ``cdf sf logcdf logsf`` to a shaped family: ``tails(z, *shapes) -> (lower,
    upper)``, each accurate where it is small (see :func:`_from_tails`); ``standard``
    makes z (:func:`_standard_cut` for a support that starts at z = 0)."""

    def method(which: str) -> Callable:
        def f(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            shapes, loc, scale = _shape_args(which, args, nshape, loc, scale)
            lower, upper = _complement(*tails(standard(x, loc, scale), *shapes))
            value = _from_tails(which, lower, upper)
            ok = scale > 0
            for p in shapes:
                ok = _and(ok, p > 0)
            return _valid(value, ok)

        return f

    return {**methods, **{m: method(m) for m in ("cdf", "sf", "logcdf", "logsf")}}


_T_NORMAL = 1e9  # the df from which the t CDF is the normal one with its 1/df term


_T_FAR = 1e17  # z^2 / df beyond which I_w(df/2, 1/2) is its leading term (w < 1e-17)


def _t_beta_tail(z: Any, df: Any) -> Any:
    """P(T < -|z|) through betainc: 1/2 - I_u(1/2, df/2) / 2 with u = z^2 / (df + z^2)
    while that is above 0.1 (no cancellation to speak of, and no 1 - w), else
    I_w(df/2, 1/2) / 2 with w = df / (df + z^2) (small tails to full relative accuracy);
    past z^2 = 1e17 df, w^(df/2) / (df B(df/2, 1/2)) in logs (w underflows from |z| ~
    1e154, and z^2 overflows: SciPy's value is 0 there, the true one |z|^-df-ish).
    Each betainc takes a safe argument where it is not used: u = 1 exactly (|z| = 1e8 at
    df = 1) has an infinite derivative, which a where times 0 made NaN."""
    far = z * z > _T_FAR * df
    zb = where(far, 1.0, z)  # (safe arguments for the branches not taken)
    z2 = zb * zb
    u = z2 / (df + z2)
    # u = 1: the near tail is 0, never the one taken; the double below 1 keeps it so
    near_tail = 0.5 - 0.5 * betainc(0.5, 0.5 * df, where(u < 1.0, u, 1.0 - 2.0**-53))
    use_near = near_tail > 0.1
    far_tail = 0.5 * betainc(0.5 * df, 0.5, where(use_near, 0.5, df / (df + z2)))
    za = absolute(where(far, z, 1.0))
    log_w = _as(log(df), z) - 2.0 * log(za) - log1p(df / (za * za))
    half = 0.5 * df
    farthest = 0.5 * exp(half * log_w - _as(log(half) + betaln(half, 0.5), z))
    return where(far, farthest, where(use_near, near_tail, far_tail))


def _t_normal_tail(z: Any, df: Any) -> Any:
    """P(T < -|z|) from df = 1e9 on, where betainc's argument df / (df + z^2) rounds
    towards 1 and the tail with it (t.cdf(2, 1e20) was 0.5; 3e-7 off at 5e9): the
    expansion in 1/df, Phi(-|z|) + phi(z) (|z|^3 + |z|) / (4 df), whose next term is
    1.4e-7 relative at |z| = 38 and 3e-12 at 10 there (an infinite df: the normal tail).
    |z| is held at 1e3, where all is 0 (|z|^3 overflowed: 0 * inf)."""
    a = _at_most(absolute(z), 1e3)
    return ndtr(-a) + exp(-0.5 * a * a - 0.5 * _LOG_2PI) * (a * a * a + a) / (4.0 * df)


def _t_tails(z: Any, df: Any) -> tuple[Any, Any]:
    """The small tail P(T < -|z|) (``_t_beta_tail``, from df = 1e9 ``_t_normal_tail``);
    the other tail is 1 minus it. Near 0 (|z| < 1e-100, where u is denormal or 0 and the
    fraction's derivative in u infinite) ``1/2 +- pdf(0) z``: the value and its
    derivative; at z = +-inf 0 and 1 (the tails' logs would meet 0 * inf)."""
    zero = z * z < 1e-200  # |z| < 1e-100: 1/2 + pdf(0) z is exact to 1e-300
    infinite = absolute(z) == np.inf
    zs = where(_or(zero, infinite), _as(where(z < 0, -1.0, 1.0), z), z)
    big = df >= _T_NORMAL
    if isinstance(big, bool):  # a Python df: only its branch is recorded (and no where()
        # of Python numbers, NumPy's float64, makes float32 data float64)
        small = _t_normal_tail(zs, df) if big else _t_beta_tail(zs, df)
    else:  # (safe arguments for the branch not taken)
        normal = _t_normal_tail(zs, where(big, df, _T_NORMAL))
        small = where(big, normal, _t_beta_tail(zs, where(big, 1.0, df)))
    small = where(infinite, 0.0, small)
    lower, upper = where(zs < 0, small, 1.0 - small), where(zs < 0, 1.0 - small, small)
    slope = exp(_t_log_density(0.0 * zs, df)) * z
    return where(zero, 0.5 + slope, lower), where(zero, 0.5 - slope, upper)


# At the edges of gamma's and beta's supports the distribution functions' derivative in
# x is the density's limit from inside (inf, finite or 0 by the shape), the value 0 or
# 1 exactly; each betainc / gammainc takes a safe argument inside, so that the branch
# not taken (0 * inf in its derivative) gives no NaN. Only the tail that is the smaller
# one at an edge carries the edge's derivative (:func:`_complement` takes 1 minus it for
# the other).


def _beta_tails(z: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """I_z(a, b) and I_(1-z)(b, a), 0 and 1 outside [0, 1]."""
    inside = _and(z > 0, z < 1)
    zs = where(inside, z, 0.5)
    at_0 = _edge(z == 0, z, _power_at_0(a - 1.0, -betaln(a, b)), a)  # the density at 0
    at_1 = _edge(z == 1, 1.0 - z, _power_at_0(b - 1.0, -betaln(a, b)), b)
    lower = where(inside, betainc(a, b, zs), where(z >= 1, 1.0, at_0))
    upper = where(inside, betainc(b, a, 1.0 - zs), where(z <= 0, 1.0, at_1))
    return lower, upper


def _beta_edges(z: Any, a: Any, b: Any) -> list:
    """The density is z^(a-1) (1-z)^(b-1) / B(a, b)."""
    return [(z == 0, z, a - 1.0, -betaln(a, b)), (z == 1, 1.0 - z, b - 1.0, -betaln(a, b))]


def _gamma_log_density(z: Any, a: Any) -> Any:
    return xlogy(a - 1.0, z) - z - _as(gammaln(a), z)


def _gamma_tails(z: Any, a: Any) -> tuple[Any, Any]:
    """The regularized incomplete gamma functions; 0 and 1 below 0."""
    inside = z > 0
    zs = where(inside, z, 1.0)
    at_0 = _edge(z == 0, z, _power_at_0(a - 1.0, -gammaln(a)), a)  # the density at 0
    return where(inside, gammainc(a, zs), at_0), where(inside, gammaincc(a, zs), 1.0)


def _gamma_edges(z: Any, a: Any) -> list:
    """The density is z^(a-1) e^-z / Gamma(a)."""
    return [(z == 0, z, a - 1.0, -gammaln(a))]


def _vonmises_methods() -> dict[str, Callable]:
    """von Mises on the circle: kappa cos(x - loc) - log(2 pi I0(kappa)), with I0 in its
    scaled form (log I0(kappa) = log i0e(kappa) + kappa: no overflow)."""

    def logpdf(x: Any, kappa: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = _standard(x, loc, scale)
        value = kappa * (_np["cos"](z) - 1.0) - _LOG_2PI - log(i0e(kappa)) - _log_scale(scale)
        return _valid(value, _and(scale > 0, kappa > 0))

    def pdf(x: Any, kappa: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return exp(logpdf(x, kappa, loc, scale))

    methods = {"logpdf": logpdf, "pdf": pdf}
    return _with_tails(methods, lambda z, kappa: _complement_of(_vonmises_cdf(z, kappa)), 1)


_VONMISES_TERMS = 54  # enough for every kappa below _VONMISES_NORMAL (SciPy's bound: 53)
_VONMISES_NORMAL = 50.0


def _vonmises_cdf(z: Any, kappa: Any) -> Any:
    """F(x; kappa) = 1/2 + x / (2 pi) + sum_n I_n(kappa) / I_0(kappa) sin(n x) / (n pi)
    for x in [-pi, pi] (whole turns add 1 each, as SciPy counts them), the Bessel ratios
    by their backward recurrence r_n = kappa / (2n + kappa r_(n+1)); for kappa >= 50 the
    normal approximation SciPy uses, ndtr(sqrt(2 / pi) / i0e(kappa) sin(x / 2)).
    Differentiable in x and kappa (the turn count is piecewise constant)."""
    turns = _constant(_np["round"](z / (2.0 * math.pi)))
    x = z - turns * (2.0 * math.pi)
    ratio, total = 0.0, 0.0
    for n in range(_VONMISES_TERMS - 1, 0, -1):
        ratio = kappa / (2.0 * n + kappa * ratio)
        total = ratio * (_np["sin"](n * x) / n + total)
    series = clip(0.5 + x / (2.0 * math.pi) + total / math.pi, 0.0, 1.0)
    normal = ndtr(math.sqrt(2.0 / math.pi) / i0e(kappa) * _np["sin"](x / 2.0))
    return where(kappa < _VONMISES_NORMAL, series, normal) + turns


def _complement_of(cdf: Any) -> tuple[Any, Any]:
    return cdf, 1.0 - cdf


def _beta_log_density(z: Any, a: Any, b: Any) -> Any:
    return xlogy(a - 1.0, z) + xlog1py(b - 1.0, -z) - _as(betaln(a, b), z)


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
    low = _la["cholesky"](cov)
    z = _sla["solve_triangular"](low, _np["moveaxis"](diff.reshape(-1, d), 0, 1), lower=True)
    maha = asum(z * z, axis=0).reshape(diff.shape[:-1])
    logdet = 2.0 * asum(log(_np["diagonal"](low)))
    return _scalar_if_one(-0.5 * (d * _LOG_2PI + logdet + maha))


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
    top = _np["arcsin"](rm)[..., None]
    t = top * _GL_PANELS_T
    hh, kk = h[..., None], k[..., None]
    cos2 = _np["cos"](t) ** 2
    body = exp(-(hh * hh + kk * kk - 2.0 * hh * kk * _np["sin"](t)) / (2.0 * cos2))
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
    bottom = _np["arcsin"](where(low_left, r, -0.5))[..., None] + math.pi / 2
    t = bottom * _GL_GRADED_T - math.pi / 2
    cos2 = _np["cos"](t) ** 2
    body = exp(-(hh * hh + kk * kk - 2.0 * hh * kk * _np["sin"](t)) / (2.0 * cos2))
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
    a = _np["sqrt"](a2)
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
    s = _np["sqrt"]((1.0 - x) * (1.0 + x))
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
    sd = _np["sqrt"](_np["diagonal"](cov))
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
    hs = _np["concatenate"]([high[:, 0], low[:, 0], high[:, 0], low[:, 0]])
    ks = _np["concatenate"]([high[:, 1], high[:, 1], low[:, 1], low[:, 1]])
    corners = _bvn(hs, ks, _np["concatenate"]([rr, rr, rr, rr])).reshape(4, -1)
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
            ys.append(sign * _sp["ndtri"](u))
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
                y[i] = (math.exp(-0.5 * al * al) - math.exp(-0.5 * be * be)) / (_SQRT_2PI * p)
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
    hi, lo = _np["broadcast_to"](hi, shape), _np["broadcast_to"](lo, shape)
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
    cov = (cov + _np["swapaxes"](cov, 0, 1)) / 2.0  # either triangle, whatever the order
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
        low = _la["cholesky"](cov[p][:, p])
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
                parts.append(_np["mean"](f, axis=-1) * sign[chunk].astype(dtype))
                rows.append(chunk)
    out = parts[0] if len(parts) == 1 else _np["concatenate"](parts)
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


# --- discrete ----------------------------------------------------------------------------


def _discrete(
    log_mass: Callable,
    nparams: int,
    edges: Callable | None = None,
    touches: Callable | None = None,
    ok: Callable | None = None,
) -> dict:
    """logpmf / pmf from ``log_mass(k, *params)`` at integers ``k >= 0`` (``loc``
    shifts); ``-inf`` elsewhere. ``edges(k, *params) -> ([(at, t, m, log_rest)],
    safe_params)``: where a parameter sits at an end of its range and the mass is 0 there
    as ``t^m exp(log_rest)`` (``t`` the parameter's distance from that end, 0 where
    ``at``), the pmf's derivative is the limit from inside (``exp`` of the log-mass would
    give 0 * inf); ``safe_params`` replace the parameters there in the log-mass.
    ``touches(*params)``: a mask that holds wherever a parameter may be at an end; where
    it holds nowhere the pmf is ``exp`` of the log-mass. ``ok(*params)``: where the
    parameters are valid (SciPy's argument check); elsewhere NaN at every k."""

    def parts(k: Any, args: tuple, loc: Any) -> tuple:
        params, rest = args[:nparams], args[nparams:]
        if rest:
            loc = rest[0]
        kk = k - loc
        integer = _and(kk == floor(kk), kk >= 0)
        # a NaN k is NaN, as SciPy's (not the -inf of a k outside the support)
        return params, integer, where(integer, kk, 0.0), kk == kk

    def support(integer: Any, mass: Any, params: tuple) -> Any:
        """``mass`` (the log-mass at the safe k) where k is an integer in the support,
        else -inf; NaN where ``ok`` says the parameters are invalid, as SciPy's
        whatever k is (a k outside the support gave -inf: poisson.pmf(2.5, -1) was 0)."""
        outside = _inside(integer, mass, -np.inf)
        return outside if ok is None else _valid(outside, ok(*params))

    def logpmf(k: Any, *args: Any, loc: Any = 0) -> Any:
        params, integer, safe, known = parts(k, args, loc)
        return _valid(support(integer, log_mass(safe, *params), params), known)

    def pmf(k: Any, *args: Any, loc: Any = 0) -> Any:
        params, integer, safe, known = parts(k, args, loc)
        if edges is None or not _anywhere(touches(*params)):
            return _valid(exp(support(integer, log_mass(safe, *params), params)), known)
        found, safe_params = edges(safe, *params)
        special, value = False, 0.0
        for at, t, m, log_rest in found:
            at = _and(integer, at)
            special = _or(special, at)
            value = value + _edge(at, t, _power_slope(m, log_rest), m)
        mass = _inside(integer, log_mass(safe, *safe_params), -np.inf)
        return _valid(where(special, value, exp(mass)), known)

    return {"logpmf": logpmf, "pmf": pmf}


# The mass functions by Loader's saddle-point form (Loader 2000, "Fast and accurate
# computation of binomial probabilities"; R's dbinom, dpois, dnbinom):
#   log P(K = x) = stirlerr(n) - stirlerr(x) - stirlerr(n - x) - bd0(x, n p)
#                  - bd0(n - x, n q) - log(2 pi x (n - x) / n) / 2      (binomial),
#   log P(K = x) = -stirlerr(x) - bd0(x, mu) - log(2 pi x) / 2          (Poisson),
# stirlerr(n) = log n! - log(sqrt(2 pi n) (n/e)^n) and bd0(x, M) = x log(x/M) + M - x the
# deviance, each small and accurate where a difference of lgammas (each ~ x log x)
# cancelled (1e-6 relative off at counts of 1e9, 1e-2 at 1e13). Every piece is a
# tapegrad op, so p, mu and (binom's continuous extension) n differentiate through it.
_BD0_TERMS = 12  # |v| < 0.1: the series' rest below 1e-22 relative
# Below this many counts (k, binom's n, nbinom's n + k) the difference of lgammas is
# kept: it loses at most ~k log k ulps, 2e-12 relative at 1000, and costs five ops where
# the saddle point costs about sixty (poisson.logpmf of 1e5 counts with its gradient:
# 2.2 ms against 12 ms).
_SADDLE_MIN = 1000.0


def _small_counts(*counts: Any) -> bool:
    """Whether every one of ``counts`` (data, or binom's trials) is below ``_SADDLE_MIN``
    (NaN counts too: they give NaN either way). Decided on the values in Python, like
    ``if x.sum() > 0`` in user code (under ``tg.compile`` a guard: a replay whose counts
    cross it captures again)."""
    for c in counts:
        v = np.asarray(values_of(c), dtype=float)
        if v.size and not np.all(np.abs(v[v == v]) < _SADDLE_MIN):
            return False
    return True


def _stirlerr(n: Any) -> Any:
    """log n! - log(sqrt(2 pi n) (n/e)^n) for n > 0: Stirling's series past 15 (the next
    term 1e-16 there), below by lgamma (the cancellation costs ~3e-15 absolute)."""
    big = n > 15
    series = stirling_correction(where(big, n, 16.0))  # (the kernels' series, to n^-9)
    ns = where(big, 1.0, n)
    direct = gammaln(ns + 1.0) - (ns + 0.5) * log(ns) + ns - 0.5 * _LOG_2PI
    return where(big, series, direct)


def _bd0(x: Any, m: Any) -> Any:
    """x log(x / m) + m - x for x, m > 0 without cancellation: for |x - m| < (x + m) / 10
    as (x - m) v + 2x (v^3/3 + v^5/5 + ...), v = (x - m) / (x + m) (Loader)."""
    d = x - m
    near = absolute(d) < 0.1 * (x + m)
    v = where(near, d / (x + m), 0.0)
    v2 = v * v
    series = 1.0 / (2 * _BD0_TERMS + 1)
    for j in range(_BD0_TERMS - 1, 0, -1):
        series = 1.0 / (2 * j + 1) + v2 * series
    close = d * v + 2.0 * x * v * v2 * series
    ratio = where(near, 1.0, x / m)
    return where(near, close, x * log(ratio) + m - x)


def _poisson(k: Any, mu: Any) -> Any:
    # k = 0: -mu; mu = 0 < k: -inf, the derivative in mu +inf (xlogy's k / mu)
    edge = xlogy(k, mu) - mu - gammaln(k + 1.0)
    if _small_counts(k):
        return _valid(edge, mu >= 0)
    inner = _and(k > 0, mu > 0)
    ks, mus = where(inner, k, 1.0), _select(inner, mu, 1.0, k)
    saddle = -_stirlerr(ks) - _bd0(ks, mus) - 0.5 * (_LOG_2PI + log(ks))
    return _valid(where(inner, saddle, edge), mu >= 0)


def _poisson_edges(k: Any, mu: Any) -> tuple:
    """mu = 0 < k: the mass mu^k e^-mu / k! is 0 (derivative 1 at k = 1, else 0)."""
    at = _and(mu == 0, k > 0)
    return [(at, mu, k, -gammaln(k + 1.0))], (_unless(at, mu, 1.0, k),)


def _poisson_tails(kk: Any, mu: Any) -> tuple[Any, Any]:
    """P(K <= k) = Q(k + 1, mu) (the upper incomplete gamma), P(K > k) = P(k + 1, mu);
    differentiable in mu."""
    return gammaincc(kk + 1.0, mu), gammainc(kk + 1.0, mu)


def _discrete_tails(methods: dict[str, Callable], tails: Callable, nparams: int) -> dict:
    """Add ``cdf sf logcdf logsf`` to a discrete family: ``tails(kk, *params) ->
    (lower, upper)`` for the integer ``kk = floor(k - loc) >= 0`` (the CDF is 0 below)."""

    def method(which: str) -> Callable:
        def f(k: Any, *args: Any, loc: Any = 0) -> Any:
            params, rest = args[:nparams], args[nparams:]
            if rest:
                loc = rest[0]
            # floor is piecewise constant: its gradient is 0, so the integer part enters
            # the special functions as a constant (their derivative in the order never
            # meets that 0); the graph keeps k and loc, with that zero gradient
            step = floor(k - loc)
            kk = _constant(step)
            finite = where(kk == np.inf, 0.0, kk)  # (a safe argument, as below 0)
            lower, upper = _complement(*tails(_at_least(finite, 0.0), *params))
            lower, upper = lower + 0.0 * step, upper + 0.0 * step
            lower, upper = where(kk >= 0, lower, 0.0), where(kk >= 0, upper, 1.0)
            # k = inf: everything is below it (the tails' formulas give NaN there)
            lower, upper = where(kk == np.inf, 1.0, lower), where(kk == np.inf, 0.0, upper)
            return _valid(_from_tails(which, lower, upper), kk == kk)  # a NaN k: NaN

        return f

    return {**methods, **{m: method(m) for m in ("cdf", "sf", "logcdf", "logsf")}}


def _binom_ok(n: Any, p: Any) -> Any:
    """binom's n at least 0 and 0 <= p <= 1 (else NaN, as SciPy). A non-integer n is
    the continuous extension (SciPy: NaN), so that n has a derivative."""
    return _and(_and(n >= 0, p >= 0), p <= 1)


def _betainc_1m(a: Any, b: Any, p: Any) -> Any:
    """I_(1-p)(a, b) to full accuracy for tiny p too: betainc at x = 1 - p rounded (which
    is off by up to 1.1e-16 absolute, so n p 1e-16 relative with a ~ n: 6e-8 at binom's
    n = 1e9, p = 1e-8) plus the exact rest, d times the beta density at the midpoint of
    the step (d = (1 - x) - p exactly, by Sterbenz; the midpoint rule's error is d^3:
    nothing). d carries no gradient (its derivative is 0); the density's does, so the
    derivative in p is the density at 1 - p, not at x, to first order too."""
    x = 1.0 - p
    d = _as(_constant((1.0 - x) - p), a)  # (a Python p: float32 counts stay float32)
    moved = d != 0
    mid = _as(where(moved, p + 0.5 * d, 0.5), a)  # 1 - the midpoint (safe where no step)
    log_density = xlog1py(a - 1.0, -mid) + xlogy(b - 1.0, mid) - betaln(a, b)
    return betainc(a, b, x) + where(moved, d * exp(log_density), 0.0)


def _binom_tails(kk: Any, n: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = I_(1-p)(n - k, k + 1), P(K > k) = I_p(k + 1, n - k); 1 and 0 from
    k = n on."""
    below = kk < n
    rest = _positive(n - kk)
    lower = where(below, _betainc_1m(rest, kk + 1.0, p), 1.0)
    upper = where(below, betainc(kk + 1.0, rest, p), 0.0)
    ok = _binom_ok(n, p)
    return _valid(lower, ok), _valid(upper, ok)


def _nbinom_ok(n: Any, p: Any) -> Any:
    """SciPy's nbinom parameters: n > 0 and 0 < p <= 1 (else NaN)."""
    return _and(_and(n > 0, p > 0), p <= 1)


def _nbinom_tails(kk: Any, n: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = I_p(n, k + 1), P(K > k) = I_(1-p)(k + 1, n)."""
    ok = _nbinom_ok(n, p)
    return _valid(betainc(n, kk + 1.0, p), ok), _valid(_betainc_1m(kk + 1.0, n, p), ok)


def _bernoulli_tails(kk: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = 1 - p below 1, then 1."""
    return where(kk >= 1, 1.0, 1.0 - p), where(kk >= 1, 0.0, p)


def _bernoulli(k: Any, p: Any) -> Any:
    return where(k <= 1, xlogy(k, p) + xlog1py(1.0 - k, -p), -np.inf)


def _binom_comb(k: Any, n: Any) -> tuple[Any, Any, Any]:
    """(k <= n, n or a safe k where n is below k, log C(n, k) by lgammas)."""
    below = k <= n
    nk = _select(below, n, k, k)
    return below, nk, gammaln(nk + 1.0) - gammaln(k + 1.0) - gammaln(nk - k + 1.0)


def _nbinom_comb(k: Any, n: Any) -> Any:
    """log C(n + k - 1, k) by lgammas; exactly 0 at k = 0, where a Python n's gammaln
    (SciPy's) and the kernel's of n + k differ by an ulp (nbinom.logpmf(0, 10, 1) was
    1.8e-15 > 0)."""
    return where(k == 0, 0.0, gammaln(n + k) - gammaln(k + 1.0) - _as(gammaln(n), k))


def _binom(k: Any, n: Any, p: Any) -> Any:
    ok = _binom_ok(n, p)
    # k = 0 or n (the lgammas cancel exactly), p = 0 or 1 (-inf, the derivative in p
    # +-inf from xlogy); n below k (-inf) through a safe n
    below, nk, comb = _binom_comb(k, n)
    edge = comb + xlogy(k, p) + xlog1py(nk - k, -p)
    if _small_counts(n):
        return _valid(where(below, edge, -np.inf), ok)
    inner = _and(_and(k > 0, k < n), _and(p > 0, p < 1))
    ks, ns, ps = where(inner, k, 1.0), _select(inner, n, 2.0, k), _select(inner, p, 0.5, k)
    saddle = (
        _stirlerr(ns)
        - _stirlerr(ks)
        - _stirlerr(ns - ks)
        - _bd0(ks, ns * ps)
        - _bd0(ns - ks, ns * (1.0 - ps))
        - 0.5 * (_LOG_2PI + log(ks) + log1p(-ks / ns))
    )
    return _valid(where(below, where(inner, saddle, edge), -np.inf), ok)


def _binom_edges(k: Any, n: Any, p: Any) -> tuple:
    """p = 0 < k and p = 1 > k / n: the mass C(n, k) p^k (1 - p)^(n - k) is 0; its
    derivative in p is n where the power is 1, else 0 (or -inf at p = 1 for a
    non-integer n with n - k < 1)."""
    below, nk, comb = _binom_comb(k, n)
    at_0 = _and(_and(p == 0, k > 0), below)
    at_1 = _and(p == 1, k < n)
    found = [(at_0, p, k, comb), (at_1, 1.0 - p, nk - k, comb)]
    return found, (n, _unless(_or(at_0, at_1), p, 0.5, k))


def _nbinom(k: Any, n: Any, p: Any) -> Any:
    """As the binomial's x = n of n + k trials, times n / (n + k) (R's dnbinom)."""
    # k = 0: n log p exactly; p = 1 < k: -inf (the derivative in p -inf)
    edge = _nbinom_comb(k, n) + xlogy(n, p) + xlog1py(k, -p)
    if _small_counts(n + k):
        return _valid(edge, _nbinom_ok(n, p))
    inner = _and(_and(k > 0, n > 0), _and(p > 0, p < 1))
    ks, ns, ps = where(inner, k, 1.0), _select(inner, n, 1.0, k), _select(inner, p, 0.5, k)
    total = ns + ks
    saddle = (
        _stirlerr(total)
        - _stirlerr(ns)
        - _stirlerr(ks)
        - _bd0(ns, total * ps)
        - _bd0(ks, total * (1.0 - ps))
        - 0.5 * (_LOG_2PI + log(ks) + log1p(ks / ns))
    )
    return _valid(where(inner, saddle, edge), _nbinom_ok(n, p))


def _nbinom_edges(k: Any, n: Any, p: Any) -> tuple:
    """p = 1, k > 0: the mass C(n + k - 1, k) p^n (1 - p)^k is 0 (derivative in p -n at
    k = 1, else 0)."""
    at = _and(_and(p == 1, k > 0), n > 0)
    return [(at, 1.0 - p, k, _nbinom_comb(k, n))], (n, _unless(at, p, 0.5, k))


# --- the published objects ------------------------------------------------------------------


def _dropin(f: Callable, dist: str, method: str) -> Callable:
    """``f`` when an argument holds a tensor, else ``scipy.stats.<dist>.<method>``."""
    plain: list[Callable] = []

    @functools.wraps(f)
    def method_(*args: Any, **kwargs: Any) -> Any:
        if holds_tensor(args) or (kwargs and holds_tensor(kwargs)):
            return f(*args, **kwargs)
        if not plain:
            plain.append(getattr(getattr(importlib.import_module("scipy.stats"), dist), method))
        return plain[0](*args, **kwargs)

    method_.__name__ = method_.__qualname__ = method
    method_.__doc__ = f"``scipy.stats.{dist}.{method}``, recording on tensors."
    return method_


class Distribution:
    """A SciPy distribution's methods (``logpdf``, ``cdf``...) on tensors.

    Each public object of :mod:`tapegrad.scipy.stats` (``norm``, ``gamma``...) is one.
    Its methods take SciPy's arguments and give SciPy's values: written in tapegrad
    ops when an argument holds a tensor, so that they record and are differentiable in
    ``x`` and every continuous parameter; SciPy's own method on plain arguments. As in
    SciPy, a point outside the support has log-density ``-inf`` (its gradient 0, with
    no NaN from the branch not taken) and invalid parameters give NaN; shapes that do
    not broadcast raise ``ValueError``, a missing shape parameter ``TypeError``.

    Parameters
    ----------
    name : str
        SciPy's name of the distribution (``"norm"``): its plain-argument methods are
        ``scipy.stats.<name>``'s.
    methods : dict of str to callable
        The methods written in tapegrad ops, by name.

    Attributes
    ----------
    name : str
        As given.
    methods : tuple of str
        The methods' names, sorted.

    Raises
    ------
    AttributeError
        A method the distribution does not have here (``norm.ppf``).

    Examples
    --------
    >>> from tapegrad.scipy import stats
    >>> stats.norm
    <tapegrad.scipy.stats.norm: cdf, logcdf, logpdf, logsf, pdf, sf>
    >>> stats.norm.name, stats.norm.methods[:2]
    ('norm', ('cdf', 'logcdf'))
    """

    def __init__(self, name: str, methods: dict[str, Callable]) -> None:
        self.name = name
        self.methods = tuple(sorted(methods))
        for method, f in methods.items():
            setattr(self, method, _dropin(f, name, method))

    def __repr__(self) -> str:
        return f"<tapegrad.scipy.stats.{self.name}: {', '.join(self.methods)}>"


norm = Distribution("norm", _NORM)
expon = Distribution("expon", _expon_methods())
laplace = Distribution("laplace", _LAPLACE)
cauchy = Distribution("cauchy", _CAUCHY)
logistic = Distribution("logistic", _LOGISTIC)
uniform = Distribution("uniform", _uniform_methods())
lognorm = Distribution("lognorm", _lognorm_methods())
t = Distribution("t", _with_tails(_shaped(_t_log_density, lambda z: z == z, 1), _t_tails, 1))
gamma = Distribution(
    "gamma",
    _with_tails(
        _shaped(_gamma_log_density, lambda z: z >= 0, 1, _gamma_edges, lambda z: z == 0),
        _gamma_tails,
        1,
        _standard_cut,
    ),
)
vonmises = Distribution("vonmises", _vonmises_methods())
beta = Distribution(
    "beta",
    _with_tails(
        _shaped(
            _beta_log_density,
            lambda z: _and(z >= 0, z <= 1),
            2,
            _beta_edges,
            lambda z: _or(z == 0, z == 1),
        ),
        _beta_tails,
        2,
        _standard_cut,
    ),
)
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
poisson = Distribution(
    "poisson",
    _discrete_tails(
        _discrete(_poisson, 1, _poisson_edges, lambda mu: mu == 0, lambda mu: mu >= 0),
        _poisson_tails,
        1,
    ),
)
bernoulli = Distribution(
    "bernoulli",
    _discrete_tails(
        _discrete(_bernoulli, 1, ok=lambda p: _and(p >= 0, p <= 1)), _bernoulli_tails, 1
    ),
)
binom = Distribution(
    "binom",
    _discrete_tails(
        _discrete(_binom, 2, _binom_edges, lambda n, p: _or(p == 0, p == 1), _binom_ok),
        _binom_tails,
        2,
    ),
)
nbinom = Distribution(
    "nbinom",
    _discrete_tails(
        _discrete(_nbinom, 2, _nbinom_edges, lambda n, p: p == 1, _nbinom_ok), _nbinom_tails, 2
    ),
)

# --- what each object is (its own docstring; the class's is shared) -------------------------

norm.__doc__ = """The normal distribution, recording on tensors.

SciPy's ``scipy.stats.norm``: the methods ``cdf logcdf logpdf logsf pdf sf``, called as
``norm.logpdf(x, loc=0, scale=1)``, with SciPy's parameters and values, differentiable
in ``x``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is SciPy's own
method. ``logcdf`` and ``logsf`` use ``special.log_ndtr``: accurate far in the tails.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> x = np.array([-1.0, 0.0, 2.0])
>>> mu = tg.tensor(0.5, requires_grad=True)
>>> loglik = tnp.sum(stats.norm.logpdf(x, mu, 2.0))
>>> loglik.backward()
>>> mu.grad  # sum(x - mu) / scale**2
array(-0.125)
>>> import scipy.stats
>>> np.allclose(loglik.item(), scipy.stats.norm.logpdf(x, 0.5, 2.0).sum())
True
"""

expon.__doc__ = """The exponential distribution, recording on tensors.

SciPy's ``scipy.stats.expon``: the methods ``cdf logcdf logpdf logsf pdf sf``, called as
``expon.logpdf(x, loc=0, scale=1)``, with SciPy's parameters and values, differentiable
in ``x``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is SciPy's own
method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats

The derivative of the log-likelihood in ``scale`` vanishes at the sample mean:

>>> x = np.array([1.0, 3.0])
>>> scale = tg.tensor(2.0, requires_grad=True)
>>> tnp.sum(stats.expon.logpdf(x, scale=scale)).backward()
>>> np.allclose(scale.grad, 0.0)
True
"""

laplace.__doc__ = """The Laplace distribution, recording on tensors.

SciPy's ``scipy.stats.laplace``: the methods ``cdf logcdf logpdf logsf pdf sf``, called
as ``laplace.logpdf(x, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is
SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> loc = tg.tensor(3.0, requires_grad=True)
>>> tnp.sum(stats.laplace.logpdf(np.array([1.0, 2.0, 4.0]), loc)).backward()
>>> loc.grad  # sum(sign(x - loc)) / scale
array(-1.)
"""

cauchy.__doc__ = """The Cauchy distribution, recording on tensors.

SciPy's ``scipy.stats.cauchy``: the methods ``cdf logcdf logpdf logsf pdf sf``, called
as ``cauchy.logpdf(x, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is
SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> stats.cauchy.cdf(tg.tensor([0.0, 1.0]))
tensor([0.5 , 0.75])
>>> np.allclose(stats.cauchy.logpdf(tg.tensor(0.0)).item(), -np.log(np.pi))
True
"""

logistic.__doc__ = """The logistic distribution, recording on tensors.

SciPy's ``scipy.stats.logistic``: the methods ``cdf logcdf logpdf logsf pdf sf``, called
as ``logistic.logpdf(x, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is
SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> x = tg.tensor(0.0, requires_grad=True)
>>> stats.logistic.pdf(x)
tensor(0.25, requires_grad=True)
>>> stats.logistic.logcdf(x).backward()
>>> x.grad  # d/dx log(cdf) = 1 - cdf
array(0.5)
"""

uniform.__doc__ = """The uniform distribution, recording on tensors.

SciPy's ``scipy.stats.uniform``: the methods ``cdf logpdf pdf sf``, called as
``uniform.pdf(x, loc=0, scale=1)``, with SciPy's parameters and values, differentiable
in ``x``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is SciPy's own
method. The support is ``[loc, loc + scale]``.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> stats.uniform.pdf(tg.tensor([0.5, 2.0]))
tensor([1., 0.])
>>> stats.uniform.cdf(tg.tensor([0.25, 2.0]), 0.0, 2.0)
tensor([0.125, 1.   ])
"""

lognorm.__doc__ = """The log-normal distribution, recording on tensors.

SciPy's ``scipy.stats.lognorm``: the methods ``cdf logcdf logpdf logsf pdf sf``, called
as ``lognorm.logpdf(x, s, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``s``, ``loc`` and ``scale``. On plain (non-tensor) arguments
each is SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> import scipy.stats
>>> x = np.array([0.5, 1.0, 2.0])
>>> lp = stats.lognorm.logpdf(tg.tensor(x), 1.0)
>>> np.allclose(lp.numpy(), scipy.stats.lognorm.logpdf(x, 1.0))
True
"""

t.__doc__ = """Student's t distribution, recording on tensors.

SciPy's ``scipy.stats.t``: the methods ``cdf logcdf logpdf logsf pdf sf``, called as
``t.logpdf(x, df, loc=0, scale=1)``, with SciPy's parameters and values, differentiable
in ``x``, ``df``, ``loc`` and ``scale``. On plain (non-tensor) arguments each is SciPy's
own method. The distribution functions are the regularized incomplete beta function
(``special.betainc``): second derivatives in ``df`` raise.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats

The derivative of the distribution function is the density:

>>> import scipy.stats
>>> x = tg.tensor([-1.0, 0.0, 2.0], requires_grad=True)
>>> tnp.sum(stats.t.cdf(x, 3.0)).backward()
>>> np.allclose(x.grad, scipy.stats.t.pdf([-1.0, 0.0, 2.0], 3.0))
True
"""

gamma.__doc__ = """The gamma distribution, recording on tensors.

SciPy's ``scipy.stats.gamma``: the methods ``cdf logcdf logpdf logsf pdf sf``, called as
``gamma.logpdf(x, a, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``a``, ``loc`` and ``scale``. On plain (non-tensor) arguments
each is SciPy's own method. The distribution functions are the regularized incomplete
gamma functions (``special.gammainc``, ``gammaincc``): second derivatives in ``a``
raise.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> x = tg.tensor(2.0, requires_grad=True)
>>> stats.gamma.logpdf(x, 2.0).backward()
>>> x.grad  # (a - 1) / x - 1
array(-0.5)

Differentiable in the shape parameter too (compared with central differences):

>>> import scipy.stats
>>> a = tg.tensor(2.0, requires_grad=True)
>>> stats.gamma.cdf(1.0, a).backward()
>>> h = 1e-6
>>> fd = (scipy.stats.gamma.cdf(1.0, 2.0 + h) - scipy.stats.gamma.cdf(1.0, 2.0 - h)) / (2 * h)
>>> np.allclose(a.grad, fd)
True
"""

vonmises.__doc__ = """The von Mises distribution, recording on tensors.

SciPy's ``scipy.stats.vonmises``: the methods ``cdf logcdf logpdf logsf pdf sf``, called
as ``vonmises.logpdf(x, kappa, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``kappa``, ``loc`` and ``scale``. On plain (non-tensor)
arguments each is SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> import scipy.stats
>>> kappa = tg.tensor(1.0, requires_grad=True)
>>> lp = stats.vonmises.logpdf(0.0, kappa)
>>> np.allclose(lp.item(), scipy.stats.vonmises.logpdf(0.0, 1.0))
True
"""

beta.__doc__ = """The beta distribution, recording on tensors.

SciPy's ``scipy.stats.beta``: the methods ``cdf logcdf logpdf logsf pdf sf``, called as
``beta.logpdf(x, a, b, loc=0, scale=1)``, with SciPy's parameters and values,
differentiable in ``x``, ``a``, ``b``, ``loc`` and ``scale``. On plain (non-tensor)
arguments each is SciPy's own method. The distribution functions are the regularized
incomplete beta function (``special.betainc``): second derivatives in ``a`` and ``b``
raise.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> x = tg.tensor(0.5, requires_grad=True)
>>> p = stats.beta.pdf(x, 2.0, 2.0)
>>> p
tensor(1.5, requires_grad=True)
>>> p.backward()
>>> np.allclose(x.grad, 0.0)  # the mode of beta(2, 2)
True
"""

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

poisson.__doc__ = """The Poisson distribution, recording on tensors.

SciPy's ``scipy.stats.poisson``: the methods ``cdf logcdf logpmf logsf pmf sf``, called
as ``poisson.logpmf(k, mu, loc=0)``, with SciPy's parameters and values, differentiable
in ``mu``. On plain (non-tensor) arguments each is SciPy's own method. The distribution
functions are the regularized incomplete gamma functions (``special.gammaincc``,
``gammainc``).

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats

The derivative of the log-likelihood in ``mu`` vanishes at the sample mean:

>>> mu = tg.tensor(2.0, requires_grad=True)
>>> tnp.sum(stats.poisson.logpmf(np.array([1, 3]), mu)).backward()
>>> np.allclose(mu.grad, 0.0)
True
"""

bernoulli.__doc__ = """The Bernoulli distribution, recording on tensors.

SciPy's ``scipy.stats.bernoulli``: the methods ``cdf logcdf logpmf logsf pmf sf``,
called as ``bernoulli.logpmf(k, p, loc=0)``, with SciPy's parameters and values,
differentiable in ``p``. On plain (non-tensor) arguments each is SciPy's own method.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> p = tg.tensor(0.5, requires_grad=True)
>>> tnp.sum(stats.bernoulli.logpmf(np.array([0, 1, 1]), p)).backward()
>>> p.grad  # sum(k) / p - sum(1 - k) / (1 - p)
array(2.)
"""

binom.__doc__ = """The binomial distribution, recording on tensors.

SciPy's ``scipy.stats.binom``: the methods ``cdf logcdf logpmf logsf pmf sf``, called as
``binom.logpmf(k, n, p, loc=0)``, with SciPy's parameters and values, differentiable in
``n`` and ``p``. On plain (non-tensor) arguments each is SciPy's own method. The
distribution functions are the regularized incomplete beta function
(``special.betainc``): their second derivatives in ``n`` raise.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> p = tg.tensor(0.5, requires_grad=True)
>>> pmf = stats.binom.pmf(2, 4, p)
>>> pmf
tensor(0.375, requires_grad=True)
>>> pmf.backward()
>>> np.allclose(p.grad, 0.0)  # 2 successes in 4: p = 0.5 is the most likely
True
"""

nbinom.__doc__ = """The negative binomial distribution, recording on tensors.

SciPy's ``scipy.stats.nbinom``: the methods ``cdf logcdf logpmf logsf pmf sf``, called
as ``nbinom.logpmf(k, n, p, loc=0)``, with SciPy's parameters and values, differentiable
in ``n`` and ``p``. On plain (non-tensor) arguments each is SciPy's own method. The
distribution functions are the regularized incomplete beta function
(``special.betainc``): their second derivatives in ``n`` raise.

See Also
--------
Distribution : What the methods share.

Examples
--------
>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import stats
>>> p = tg.tensor(0.5, requires_grad=True)
>>> pmf = stats.nbinom.pmf(0, 2, p)  # p**n
>>> pmf
tensor(0.25, requires_grad=True)
>>> pmf.backward()
>>> np.allclose(p.grad, 1.0)  # n p**(n - 1)
True
"""

__all__ = [
    "bernoulli",
    "beta",
    "binom",
    "cauchy",
    "dirichlet",
    "expon",
    "gamma",
    "laplace",
    "logistic",
    "lognorm",
    "multivariate_normal",
    "nbinom",
    "norm",
    "poisson",
    "t",
    "uniform",
    "vonmises",
]
