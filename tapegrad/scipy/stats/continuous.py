"""The continuous distributions of one variable: those with a location and a scale
(``norm laplace cauchy logistic expon uniform lognorm``) and those with shape parameters
(``t gamma beta vonmises``), with the distribution functions from the incomplete beta and
gamma functions."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .branches import (
    LOG_2PI,
    absolute,
    anywhere,
    arctan,
    at_least,
    at_most,
    betainc,
    betaln,
    both,
    clip,
    complement,
    constant,
    either,
    exp,
    expm1,
    from_tails,
    gammainc,
    gammaincc,
    gammaln,
    i0e,
    in_dtype_of,
    inside_support,
    log,
    log1p,
    log_expit,
    log_ndtr,
    log_scale,
    nan_where_invalid,
    ndtr,
    positive,
    power_at_0,
    power_slope,
    standard_cut,
    standardised,
    tnp,
    tsp,
    vanishing_at_edge,
    where,
    xlog1py,
    xlogy,
)
from .distribution import Distribution

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
        z = standardised(x, loc, scale)
        if support is None:
            value = log_density(z) - log_scale(scale)
        else:
            inside = support(z)
            safe = where(inside, z, 0.5)
            value = inside_support(inside, log_density(safe), -np.inf) - log_scale(scale)
        return nan_where_invalid(value, scale > 0)

    def pdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return exp(logpdf(x, loc, scale))

    methods = {"logpdf": logpdf, "pdf": pdf}
    if cdf is not None:

        def cdf_(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            return nan_where_invalid(cdf(standardised(x, loc, scale)), scale > 0)

        def logcdf_(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            return nan_where_invalid(logcdf(standardised(x, loc, scale)), scale > 0)

        methods.update(cdf=cdf_, logcdf=logcdf_)
        if flip:

            def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
                return nan_where_invalid(cdf(-standardised(x, loc, scale)), scale > 0)

            def logsf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
                return nan_where_invalid(logcdf(-standardised(x, loc, scale)), scale > 0)

            methods.update(sf=sf, logsf=logsf)
    return methods


def _laplace_logcdf(z: Any) -> Any:
    neg = at_most(z, 0.0)
    pos = at_least(z, 0.0)
    return where(z < 0, math.log(0.5) + neg, log1p(-0.5 * exp(-pos)))


def _laplace_cdf(z: Any) -> Any:
    return where(z < 0, 0.5 * exp(at_most(z, 0.0)), 1.0 - 0.5 * exp(-at_least(z, 0.0)))


_NORM = _location_scale(lambda z: -0.5 * z * z - 0.5 * LOG_2PI, ndtr, log_ndtr)
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
    lambda z: tsp["expit"](z),
    log_expit,
)


def _expon_methods() -> dict[str, Callable]:
    def cdf(z: Any) -> Any:
        return where(z > 0, -expm1(-at_least(z, 0.0)), 0.0)

    def logcdf(z: Any) -> Any:
        # log(1 - exp(-z)): log(-expm1(-z)) for small z, log1p(-exp(-z)) past log 2
        zs = positive(z)
        small = log(-expm1(-at_most(zs, math.log(2.0))))
        large = log1p(-exp(-at_least(zs, math.log(2.0))))
        return where(z > 0, where(z < math.log(2.0), small, large), -np.inf)

    methods = _location_scale(lambda z: -z, cdf, logcdf, support=lambda z: z >= 0, flip=False)

    def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = standardised(x, loc, scale)
        return nan_where_invalid(where(z > 0, exp(-at_least(z, 0.0)), 1.0), scale > 0)

    def logsf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = standardised(x, loc, scale)
        return nan_where_invalid(where(z > 0, -z, 0.0), scale > 0)

    methods.update(sf=sf, logsf=logsf)
    return methods


def _uniform_methods() -> dict[str, Callable]:
    def inside(z: Any) -> Any:
        return both(z >= 0, z <= 1)

    methods = _location_scale(lambda z: 0.0 * z, support=inside)

    def cdf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return nan_where_invalid(clip(standardised(x, loc, scale), 0.0, 1.0), scale > 0)

    def sf(x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        return nan_where_invalid(1.0 - clip(standardised(x, loc, scale), 0.0, 1.0), scale > 0)

    methods.update(cdf=cdf, sf=sf)
    return methods


def _lognorm_methods() -> dict[str, Callable]:
    def logpdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = standardised(x, loc, scale)
        inside = y > 0
        ly = log(positive(y))
        value = -0.5 * (ly / s) ** 2 - ly - log(positive(s)) - 0.5 * LOG_2PI
        return nan_where_invalid(
            inside_support(inside, value, -np.inf) - log_scale(scale), both(scale > 0, s > 0)
        )

    def cdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = standardised(x, loc, scale)
        return nan_where_invalid(
            where(y > 0, ndtr(log(positive(y)) / s), 0.0), both(scale > 0, s > 0)
        )

    def sf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = standardised(x, loc, scale)
        return nan_where_invalid(
            where(y > 0, ndtr(-log(positive(y)) / s), 1.0), both(scale > 0, s > 0)
        )

    def logcdf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = standardised(x, loc, scale)
        return nan_where_invalid(
            where(y > 0, log_ndtr(log(positive(y)) / s), -np.inf), both(scale > 0, s > 0)
        )

    def logsf(x: Any, s: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        y = standardised(x, loc, scale)
        return nan_where_invalid(
            where(y > 0, log_ndtr(-log(positive(y)) / s), 0.0), both(scale > 0, s > 0)
        )

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
            ok = both(ok, p > 0)
        return nan_where_invalid(value, ok)

    def log_pdf(z: Any, shapes: tuple, scale: Any) -> Any:
        inside = support(z)
        safe = where(inside, z, 0.5)
        value = inside_support(inside, log_density(safe, *shapes), -np.inf) - log_scale(scale)
        return valid(value, shapes, scale)

    def logpdf(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        shapes, loc, scale = _shape_args("logpdf", args, nshape, loc, scale)
        return log_pdf(standardised(x, loc, scale), shapes, scale)

    def pdf(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        shapes, loc, scale = _shape_args("pdf", args, nshape, loc, scale)
        z = standardised(x, loc, scale)
        if edges is None or not anywhere(touches(z)):
            return exp(log_pdf(z, shapes, scale))
        z = standard_cut(x, loc, scale)
        special, value = False, 0.0
        for at, t, m, log_rest in edges(z, *shapes):
            zero, pole = both(at, m > 0), both(at, m < 0)
            special = either(special, either(zero, pole))
            # an infinite density: the power's derivatives (-inf in t, and in the shape
            # through m, as the limits from inside; the other factor held constant)
            t0, ms = where(pole, t, 1.0), where(pole, in_dtype_of(m, z), -1.0)
            infinite = t0**ms * in_dtype_of(exp(constant(log_rest)), z)
            slope = power_slope(m, log_rest)
            value = value + where(pole, infinite, vanishing_at_edge(zero, t, slope, m))
        dens = exp(log_pdf(where(special, 0.5, z), shapes, scale))
        return where(special, valid(value / scale, shapes, scale), dens)

    return {"logpdf": logpdf, "pdf": pdf}


def _t_log_density(z: Any, df: Any) -> Any:
    """log of Student's t density, -log(sqrt(df) B(df/2, 1/2)) - (df + 1)/2 log1p(z^2/df):
    betaln keeps lgamma((df+1)/2) - lgamma(df/2) from cancelling (t.logpdf(1, 1e15)
    was 1.66, not -1.42); an infinite df is the normal density, as SciPy's."""
    if type(df) in (int, float) and df > 0:  # a Python number stays one (float32 stays)
        if df == math.inf:
            return -0.5 * z * z - 0.5 * LOG_2PI
        norm = -float(betaln(0.5 * df, 0.5)) - 0.5 * math.log(df)
        return norm - 0.5 * (df + 1.0) * log1p(z * z / df)
    infinite = df == np.inf
    dfs = where(infinite, 1.0, df)  # (a safe argument for the branch not taken)
    t = -betaln(0.5 * dfs, 0.5) - 0.5 * log(dfs) - 0.5 * (dfs + 1.0) * log1p(z * z / dfs)
    return where(infinite, -0.5 * z * z - 0.5 * LOG_2PI, t)


def _with_tails(
    methods: dict[str, Callable], tails: Callable, nshape: int, standard: Callable = standardised
) -> dict:
    """Add ``cdf sf logcdf logsf`` to a shaped family: ``tails(z, *shapes) -> (lower,
    upper)``, each accurate where it is small (see :func:`from_tails`); ``standard``
    makes z (:func:`standard_cut` for a support that starts at z = 0)."""

    def method(which: str) -> Callable:
        def f(x: Any, *args: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
            shapes, loc, scale = _shape_args(which, args, nshape, loc, scale)
            lower, upper = complement(*tails(standard(x, loc, scale), *shapes))
            value = from_tails(which, lower, upper)
            ok = scale > 0
            for p in shapes:
                ok = both(ok, p > 0)
            return nan_where_invalid(value, ok)

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
    log_w = in_dtype_of(log(df), z) - 2.0 * log(za) - log1p(df / (za * za))
    half = 0.5 * df
    farthest = 0.5 * exp(half * log_w - in_dtype_of(log(half) + betaln(half, 0.5), z))
    return where(far, farthest, where(use_near, near_tail, far_tail))


def _t_normal_tail(z: Any, df: Any) -> Any:
    """P(T < -|z|) from df = 1e9 on, where betainc's argument df / (df + z^2) rounds
    towards 1 and the tail with it (t.cdf(2, 1e20) was 0.5; 3e-7 off at 5e9): the
    expansion in 1/df, Phi(-|z|) + phi(z) (|z|^3 + |z|) / (4 df), whose next term is
    1.4e-7 relative at |z| = 38 and 3e-12 at 10 there (an infinite df: the normal tail).
    |z| is held at 1e3, where all is 0 (|z|^3 overflowed: 0 * inf)."""
    a = at_most(absolute(z), 1e3)
    return ndtr(-a) + exp(-0.5 * a * a - 0.5 * LOG_2PI) * (a * a * a + a) / (4.0 * df)


def _t_tails(z: Any, df: Any) -> tuple[Any, Any]:
    """The small tail P(T < -|z|) (``_t_beta_tail``, from df = 1e9 ``_t_normal_tail``);
    the other tail is 1 minus it. Near 0 (|z| < 1e-100, where u is denormal or 0 and the
    fraction's derivative in u infinite) ``1/2 +- pdf(0) z``: the value and its
    derivative; at z = +-inf 0 and 1 (the tails' logs would meet 0 * inf)."""
    zero = z * z < 1e-200  # |z| < 1e-100: 1/2 + pdf(0) z is exact to 1e-300
    infinite = absolute(z) == np.inf
    zs = where(either(zero, infinite), in_dtype_of(where(z < 0, -1.0, 1.0), z), z)
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
# one at an edge carries the edge's derivative (:func:`complement` takes 1 minus it for
# the other).


def _beta_tails(z: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """I_z(a, b) and I_(1-z)(b, a), 0 and 1 outside [0, 1]."""
    inside = both(z > 0, z < 1)
    zs = where(inside, z, 0.5)
    at_0 = vanishing_at_edge(z == 0, z, power_at_0(a - 1.0, -betaln(a, b)), a)  # the density at 0
    at_1 = vanishing_at_edge(z == 1, 1.0 - z, power_at_0(b - 1.0, -betaln(a, b)), b)
    lower = where(inside, betainc(a, b, zs), where(z >= 1, 1.0, at_0))
    upper = where(inside, betainc(b, a, 1.0 - zs), where(z <= 0, 1.0, at_1))
    return lower, upper


def _beta_edges(z: Any, a: Any, b: Any) -> list:
    """The density is z^(a-1) (1-z)^(b-1) / B(a, b)."""
    return [(z == 0, z, a - 1.0, -betaln(a, b)), (z == 1, 1.0 - z, b - 1.0, -betaln(a, b))]


def _gamma_log_density(z: Any, a: Any) -> Any:
    return xlogy(a - 1.0, z) - z - in_dtype_of(gammaln(a), z)


def _gamma_tails(z: Any, a: Any) -> tuple[Any, Any]:
    """The regularized incomplete gamma functions; 0 and 1 below 0."""
    inside = z > 0
    zs = where(inside, z, 1.0)
    at_0 = vanishing_at_edge(z == 0, z, power_at_0(a - 1.0, -gammaln(a)), a)  # the density at 0
    return where(inside, gammainc(a, zs), at_0), where(inside, gammaincc(a, zs), 1.0)


def _gamma_edges(z: Any, a: Any) -> list:
    """The density is z^(a-1) e^-z / Gamma(a)."""
    return [(z == 0, z, a - 1.0, -gammaln(a))]


def _vonmises_methods() -> dict[str, Callable]:
    """von Mises on the circle: kappa cos(x - loc) - log(2 pi I0(kappa)), with I0 in its
    scaled form (log I0(kappa) = log i0e(kappa) + kappa: no overflow)."""

    def logpdf(x: Any, kappa: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        z = standardised(x, loc, scale)
        value = kappa * (tnp["cos"](z) - 1.0) - LOG_2PI - log(i0e(kappa)) - log_scale(scale)
        return nan_where_invalid(value, both(scale > 0, kappa > 0))

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
    turns = constant(tnp["round"](z / (2.0 * math.pi)))
    x = z - turns * (2.0 * math.pi)
    ratio, total = 0.0, 0.0
    for n in range(_VONMISES_TERMS - 1, 0, -1):
        ratio = kappa / (2.0 * n + kappa * ratio)
        total = ratio * (tnp["sin"](n * x) / n + total)
    series = clip(0.5 + x / (2.0 * math.pi) + total / math.pi, 0.0, 1.0)
    normal = ndtr(math.sqrt(2.0 / math.pi) / i0e(kappa) * tnp["sin"](x / 2.0))
    return where(kappa < _VONMISES_NORMAL, series, normal) + turns


def _complement_of(cdf: Any) -> tuple[Any, Any]:
    return cdf, 1.0 - cdf


def _beta_log_density(z: Any, a: Any, b: Any) -> Any:
    return xlogy(a - 1.0, z) + xlog1py(b - 1.0, -z) - in_dtype_of(betaln(a, b), z)


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
        standard_cut,
    ),
)
vonmises = Distribution("vonmises", _vonmises_methods())
beta = Distribution(
    "beta",
    _with_tails(
        _shaped(
            _beta_log_density,
            lambda z: both(z >= 0, z <= 1),
            2,
            _beta_edges,
            lambda z: either(z == 0, z == 1),
        ),
        _beta_tails,
        2,
        standard_cut,
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
