"""``tapegrad.scipy.stats``: SciPy's distributions, recording on Tensors.

``norm.logpdf(x, loc, scale)`` and the like, with SciPy's names, parameters and values,
differentiable in ``x`` and every continuous parameter. Each method is written in
tapegrad ops (logs of densities in their stable forms: ``special.log_ndtr``, ``xlogy``,
``xlog1py``, ``betaln``); on plain (non-tensor) arguments it is SciPy's own method. Outside the
support a log-density is ``-inf`` (its gradient 0, with no NaN from the branch not
taken), as SciPy's value.

Here: the densities and log-densities of ``norm expon laplace cauchy logistic lognorm
uniform t gamma beta vonmises multivariate_normal dirichlet``, the mass functions of
``poisson bernoulli binom nbinom``, and ``cdf sf logcdf logsf`` of ``norm expon laplace
cauchy logistic lognorm gamma t beta vonmises poisson bernoulli binom nbinom``
(``uniform``: ``cdf sf``). Not here: ``multivariate_normal.cdf`` (SciPy integrates it by
randomised quasi-Monte Carlo).
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
from ..tensors import as_tensor

_np = NAMESPACES["numpy"]
_la = NAMESPACES["numpy.linalg"]
_sp = NAMESPACES["special"]
_sla = NAMESPACES["scipy.linalg"]
where, log, log1p, exp, expm1 = _np["where"], _np["log"], _np["log1p"], _np["exp"], _np["expm1"]
clip, floor, arctan, absolute = _np["clip"], _np["floor"], _np["arctan"], _np["absolute"]
maximum, minimum, asum = _np["maximum"], _np["minimum"], _np["sum"]
gammaln, xlogy, xlog1py = _sp["gammaln"], _sp["xlogy"], _sp["xlog1py"]
ndtr, log_ndtr, betaln = _sp["ndtr"], _sp["log_ndtr"], _sp["betaln"]
gammainc, gammaincc, i0e = _sp["gammainc"], _sp["gammaincc"], _sp["i0e"]
betainc = _sp["betainc"]

_LOG_2PI = math.log(2.0 * math.pi)


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


def _and(a: Any, b: Any) -> Any:
    """Elementwise ``a and b`` of boolean tensors (or Python bools)."""
    if isinstance(a, bool):
        return b if a else False
    return where(a, b, False)


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
# SciPy's own formulas (its values in the tails are these)
_CAUCHY = _location_scale(
    lambda z: -log(math.pi * (1.0 + z * z)),
    lambda z: 0.5 + arctan(z) / math.pi,
    lambda z: log(0.5 + arctan(z) / math.pi),
)
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


def _shaped(log_density: Callable, support: Callable, nshape: int) -> dict[str, Callable]:
    """logpdf / pdf of a family with ``nshape`` shape parameters before loc and scale:
    ``log_density(z, *shapes)`` on the standardised variable inside ``support(z)``."""

    def logpdf(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        shapes, rest = args[:nshape], args[nshape:]
        if len(shapes) < nshape:
            raise TypeError(f"logpdf: needs {nshape} shape parameter(s), got {len(shapes)}")
        if rest:  # loc and scale given by position, as SciPy allows
            loc = rest[0]
            scale = rest[1] if len(rest) > 1 else scale
        z = _standard(x, loc, scale)
        inside = support(z)
        safe = where(inside, z, 0.5)
        value = _inside(inside, log_density(safe, *shapes), -np.inf) - _log_scale(scale)
        ok = scale > 0
        for p in shapes:  # every shape parameter positive
            ok = _and(ok, p > 0)
        return _valid(value, ok)

    def pdf(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return exp(logpdf(x, *args, loc=loc, scale=scale))

    return {"logpdf": logpdf, "pdf": pdf}


def _t_log_density(z: Any, df: Any) -> Any:
    if type(df) in (int, float) and df > 0:  # a Python number stays one (float32 stays)
        norm = math.lgamma(0.5 * (df + 1.0)) - math.lgamma(0.5 * df) - 0.5 * math.log(df * math.pi)
    else:
        norm = gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * log(df * math.pi)
    return norm - 0.5 * (df + 1.0) * log1p(z * z / df)


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


def _with_tails(methods: dict[str, Callable], tails: Callable, nshape: int) -> dict:
    """Add ``cdf sf logcdf logsf`` to a shaped family: ``tails(z, *shapes) -> (lower,
    upper)``, each accurate where it is small (see :func:`_from_tails`)."""

    def method(which: str) -> Callable:
        def f(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            shapes, rest = args[:nshape], args[nshape:]
            if len(shapes) < nshape:
                raise TypeError(f"{which}: needs {nshape} shape parameter(s), got {len(shapes)}")
            if rest:
                loc = rest[0]
                scale = rest[1] if len(rest) > 1 else scale
            lower, upper = _complement(*tails(_standard(x, loc, scale), *shapes))
            value = _from_tails(which, lower, upper)
            ok = scale > 0
            for p in shapes:
                ok = _and(ok, p > 0)
            return _valid(value, ok)

        return f

    return {**methods, **{m: method(m) for m in ("cdf", "sf", "logcdf", "logsf")}}


def _t_tails(z: Any, df: Any) -> tuple[Any, Any]:
    """The small tail P(T < -|z|): 1/2 - I_u(1/2, df/2) / 2 with u = z^2 / (df + z^2)
    while that is above 0.1 (no cancellation to speak of, and no 1 - w), else
    I_w(df/2, 1/2) / 2 with w = df / (df + z^2) (small tails to full relative accuracy);
    the other tail is 1 minus it. Near 0 (|z| < 1e-100, where u is denormal or 0 and the
    fraction's derivative in u infinite) ``1/2 +- pdf(0) z``: the value and its
    derivative."""
    zero = z * z < 1e-200  # |z| < 1e-100: 1/2 + pdf(0) z is exact to 1e-300
    zs = where(zero, 1.0, z)
    z2 = zs * zs
    near_tail = 0.5 - 0.5 * betainc(0.5, 0.5 * df, z2 / (df + z2))
    use_near = near_tail > 0.1
    far_tail = 0.5 * betainc(0.5 * df, 0.5, where(use_near, 0.5, df / (df + z2)))
    small = where(use_near, near_tail, far_tail)
    lower, upper = where(zs < 0, small, 1.0 - small), where(zs < 0, 1.0 - small, small)
    slope = exp(_t_log_density(0.0 * zs, df)) * z
    return where(zero, 0.5 + slope, lower), where(zero, 0.5 - slope, upper)


def _beta_tails(z: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """I_z(a, b) and I_(1-z)(b, a), 0 and 1 outside [0, 1]."""
    zs = clip(z, 0.0, 1.0)
    lower = where(z <= 0, 0.0, where(z >= 1, 1.0, betainc(a, b, zs)))
    upper = where(z <= 0, 1.0, where(z >= 1, 0.0, betainc(b, a, 1.0 - zs)))
    return lower, upper


def _gamma_log_density(z: Any, a: Any) -> Any:
    return xlogy(a - 1.0, z) - z - gammaln(a)


def _gamma_tails(z: Any, a: Any) -> tuple[Any, Any]:
    """The regularized incomplete gamma functions; 0 and 1 below 0."""
    zs = _at_least(z, 0.0)
    return where(z > 0, gammainc(a, zs), 0.0), where(z > 0, gammaincc(a, zs), 1.0)


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
    return xlogy(a - 1.0, z) + xlog1py(b - 1.0, -z) - betaln(a, b)


# --- multivariate --------------------------------------------------------------------------


def _mvn_logpdf(x: Any, mean: Any = None, cov: Any = 1.0) -> Any:
    """log N(x; mean, cov) through the Cholesky factor: ``-(d log 2 pi + log det cov +
    |L^-1 (x - mean)|^2) / 2``; x's last axis holds the components (SciPy squeezes a
    single point to a scalar)."""
    cov = as_tensor(cov)
    d = 1 if np.ndim(cov) == 0 else cov.shape[-1]
    if np.ndim(cov) <= 1:  # a variance or the diagonal
        cov = cov * np.eye(d)
    xs = as_tensor(x)
    pts = xs if np.ndim(xs) >= 1 and xs.shape[-1] == d else xs.reshape((*np.shape(xs), 1))
    diff = pts - (0.0 if mean is None else mean)
    low = _la["cholesky"](cov)
    z = _sla["solve_triangular"](low, _np["moveaxis"](diff.reshape(-1, d), 0, 1), lower=True)
    maha = asum(z * z, axis=0).reshape(diff.shape[:-1])
    logdet = 2.0 * asum(log(_np["diagonal"](low)))
    out = -0.5 * (d * _LOG_2PI + logdet + maha)
    return out.reshape(()) if out.size == 1 else out


def _dirichlet_logpdf(x: Any, alpha: Any) -> Any:
    """Components on the first axis, as SciPy's ``dirichlet.logpdf``."""
    a = as_tensor(alpha)
    xs = as_tensor(x)
    shape = (a.shape[0],) + (1,) * (xs.ndim - 1)
    terms = asum(xlogy(a.reshape(shape) - 1.0, xs), axis=0)
    return terms + gammaln(asum(a)) - asum(gammaln(a))


# --- discrete ----------------------------------------------------------------------------


def _discrete(log_mass: Callable, nparams: int) -> dict[str, Callable]:
    """logpmf / pmf from ``log_mass(k, *params)`` at integers ``k >= 0`` (``loc``
    shifts); ``-inf`` elsewhere."""

    def logpmf(k: Any, *args: Any, loc: Any = 0) -> Any:
        params, rest = args[:nparams], args[nparams:]
        if rest:
            loc = rest[0]
        kk = k - loc
        integer = _and(kk == floor(kk), kk >= 0)
        safe = where(integer, kk, 0.0)
        return _inside(integer, log_mass(safe, *params), -np.inf)

    def pmf(k: Any, *args: Any, loc: Any = 0) -> Any:
        return exp(logpmf(k, *args, loc=loc))

    return {"logpmf": logpmf, "pmf": pmf}


def _poisson(k: Any, mu: Any) -> Any:
    return xlogy(k, mu) - mu - gammaln(k + 1.0)


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
            lower, upper = _complement(*tails(_at_least(kk, 0.0), *params))
            lower, upper = lower + 0.0 * step, upper + 0.0 * step
            lower, upper = where(kk >= 0, lower, 0.0), where(kk >= 0, upper, 1.0)
            return _from_tails(which, lower, upper)

        return f

    return {**methods, **{m: method(m) for m in ("cdf", "sf", "logcdf", "logsf")}}


def _binom_tails(kk: Any, n: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = I_(1-p)(n - k, k + 1), P(K > k) = I_p(k + 1, n - k); 1 and 0 from
    k = n on."""
    below = kk < n
    rest = _positive(n - kk)
    lower = where(below, betainc(rest, kk + 1.0, 1.0 - p), 1.0)
    upper = where(below, betainc(kk + 1.0, rest, p), 0.0)
    return lower, upper


def _nbinom_tails(kk: Any, n: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = I_p(n, k + 1), P(K > k) = I_(1-p)(k + 1, n)."""
    return betainc(n, kk + 1.0, p), betainc(kk + 1.0, n, 1.0 - p)


def _bernoulli_tails(kk: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = 1 - p below 1, then 1."""
    return where(kk >= 1, 1.0, 1.0 - p), where(kk >= 1, 0.0, p)


def _bernoulli(k: Any, p: Any) -> Any:
    return where(k <= 1, xlogy(k, p) + xlog1py(1.0 - k, -p), -np.inf)


def _binom(k: Any, n: Any, p: Any) -> Any:
    comb = gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)
    return where(k <= n, comb + xlogy(k, p) + xlog1py(n - k, -p), -np.inf)


def _nbinom(k: Any, n: Any, p: Any) -> Any:
    comb = gammaln(n + k) - gammaln(k + 1.0) - gammaln(n)
    return comb + xlogy(n, p) + xlog1py(k, -p)


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
    """A SciPy distribution's methods (``logpdf``, ``cdf``...) on tensors; SciPy's own
    on plain arguments."""

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
    "gamma", _with_tails(_shaped(_gamma_log_density, lambda z: z >= 0, 1), _gamma_tails, 1)
)
vonmises = Distribution("vonmises", _vonmises_methods())
beta = Distribution(
    "beta",
    _with_tails(_shaped(_beta_log_density, lambda z: _and(z >= 0, z <= 1), 2), _beta_tails, 2),
)
multivariate_normal = Distribution(
    "multivariate_normal",
    {"logpdf": _mvn_logpdf, "pdf": lambda x, mean=None, cov=1.0: exp(_mvn_logpdf(x, mean, cov))},
)
dirichlet = Distribution(
    "dirichlet",
    {"logpdf": _dirichlet_logpdf, "pdf": lambda x, alpha: exp(_dirichlet_logpdf(x, alpha))},
)
poisson = Distribution("poisson", _discrete_tails(_discrete(_poisson, 1), _poisson_tails, 1))
bernoulli = Distribution(
    "bernoulli", _discrete_tails(_discrete(_bernoulli, 1), _bernoulli_tails, 1)
)
binom = Distribution("binom", _discrete_tails(_discrete(_binom, 2), _binom_tails, 2))
nbinom = Distribution("nbinom", _discrete_tails(_discrete(_nbinom, 2), _nbinom_tails, 2))

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
