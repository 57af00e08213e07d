"""The discrete distributions: ``poisson bernoulli binom nbinom``, their mass functions
in Loader's saddle-point form for large counts, their distribution functions from the
incomplete gamma and beta functions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops.special.gamma import stirling_correction
from ...tensors import values_of
from .branches import (
    LOG_2PI,
    absolute,
    anywhere,
    at_least,
    betainc,
    betaln,
    both,
    complement,
    constant,
    either,
    exp,
    floor,
    from_tails,
    gammainc,
    gammaincc,
    gammaln,
    in_dtype_of,
    inside_support,
    log,
    log1p,
    nan_where_invalid,
    positive,
    power_slope,
    select,
    unless,
    vanishing_at_edge,
    where,
    xlog1py,
    xlogy,
)
from .distribution import Distribution

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
        integer = both(kk == floor(kk), kk >= 0)
        # a NaN k is NaN, as SciPy's (not the -inf of a k outside the support)
        return params, integer, where(integer, kk, 0.0), kk == kk

    def support(integer: Any, mass: Any, params: tuple) -> Any:
        """``mass`` (the log-mass at the safe k) where k is an integer in the support,
        else -inf; NaN where ``ok`` says the parameters are invalid, as SciPy's
        whatever k is (a k outside the support gave -inf: poisson.pmf(2.5, -1) was 0)."""
        outside = inside_support(integer, mass, -np.inf)
        return outside if ok is None else nan_where_invalid(outside, ok(*params))

    def logpmf(k: Any, *args: Any, loc: Any = 0) -> Any:
        params, integer, safe, known = parts(k, args, loc)
        return nan_where_invalid(support(integer, log_mass(safe, *params), params), known)

    def pmf(k: Any, *args: Any, loc: Any = 0) -> Any:
        params, integer, safe, known = parts(k, args, loc)
        if edges is None or not anywhere(touches(*params)):
            return nan_where_invalid(exp(support(integer, log_mass(safe, *params), params)), known)
        found, safe_params = edges(safe, *params)
        special, value = False, 0.0
        for at, t, m, log_rest in found:
            at = both(integer, at)
            special = either(special, at)
            value = value + vanishing_at_edge(at, t, power_slope(m, log_rest), m)
        mass = inside_support(integer, log_mass(safe, *safe_params), -np.inf)
        return nan_where_invalid(where(special, value, exp(mass)), known)

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
    direct = gammaln(ns + 1.0) - (ns + 0.5) * log(ns) + ns - 0.5 * LOG_2PI
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
        return nan_where_invalid(edge, mu >= 0)
    inner = both(k > 0, mu > 0)
    ks, mus = where(inner, k, 1.0), select(inner, mu, 1.0, k)
    saddle = -_stirlerr(ks) - _bd0(ks, mus) - 0.5 * (LOG_2PI + log(ks))
    return nan_where_invalid(where(inner, saddle, edge), mu >= 0)


def _poisson_edges(k: Any, mu: Any) -> tuple:
    """mu = 0 < k: the mass mu^k e^-mu / k! is 0 (derivative 1 at k = 1, else 0)."""
    at = both(mu == 0, k > 0)
    return [(at, mu, k, -gammaln(k + 1.0))], (unless(at, mu, 1.0, k),)


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
            kk = constant(step)
            finite = where(kk == np.inf, 0.0, kk)  # (a safe argument, as below 0)
            lower, upper = complement(*tails(at_least(finite, 0.0), *params))
            lower, upper = lower + 0.0 * step, upper + 0.0 * step
            lower, upper = where(kk >= 0, lower, 0.0), where(kk >= 0, upper, 1.0)
            # k = inf: everything is below it (the tails' formulas give NaN there)
            lower, upper = where(kk == np.inf, 1.0, lower), where(kk == np.inf, 0.0, upper)
            return nan_where_invalid(from_tails(which, lower, upper), kk == kk)  # a NaN k: NaN

        return f

    return {**methods, **{m: method(m) for m in ("cdf", "sf", "logcdf", "logsf")}}


def _binom_ok(n: Any, p: Any) -> Any:
    """binom's n at least 0 and 0 <= p <= 1 (else NaN, as SciPy). A non-integer n is
    the continuous extension (SciPy: NaN), so that n has a derivative."""
    return both(both(n >= 0, p >= 0), p <= 1)


def _betainc_1m(a: Any, b: Any, p: Any) -> Any:
    """I_(1-p)(a, b) to full accuracy for tiny p too: betainc at x = 1 - p rounded (which
    is off by up to 1.1e-16 absolute, so n p 1e-16 relative with a ~ n: 6e-8 at binom's
    n = 1e9, p = 1e-8) plus the exact rest, d times the beta density at the midpoint of
    the step (d = (1 - x) - p exactly, by Sterbenz; the midpoint rule's error is d^3:
    nothing). d carries no gradient (its derivative is 0); the density's does, so the
    derivative in p is the density at 1 - p, not at x, to first order too."""
    x = 1.0 - p
    d = in_dtype_of(constant((1.0 - x) - p), a)  # (a Python p: float32 counts stay float32)
    moved = d != 0
    mid = in_dtype_of(where(moved, p + 0.5 * d, 0.5), a)  # 1 - the midpoint (safe where no step)
    log_density = xlog1py(a - 1.0, -mid) + xlogy(b - 1.0, mid) - betaln(a, b)
    return betainc(a, b, x) + where(moved, d * exp(log_density), 0.0)


def _binom_tails(kk: Any, n: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = I_(1-p)(n - k, k + 1), P(K > k) = I_p(k + 1, n - k); 1 and 0 from
    k = n on."""
    below = kk < n
    rest = positive(n - kk)
    lower = where(below, _betainc_1m(rest, kk + 1.0, p), 1.0)
    upper = where(below, betainc(kk + 1.0, rest, p), 0.0)
    ok = _binom_ok(n, p)
    return nan_where_invalid(lower, ok), nan_where_invalid(upper, ok)


def _nbinom_ok(n: Any, p: Any) -> Any:
    """SciPy's nbinom parameters: n > 0 and 0 < p <= 1 (else NaN)."""
    return both(both(n > 0, p > 0), p <= 1)


def _nbinom_tails(kk: Any, n: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = I_p(n, k + 1), P(K > k) = I_(1-p)(k + 1, n)."""
    ok = _nbinom_ok(n, p)
    return nan_where_invalid(betainc(n, kk + 1.0, p), ok), nan_where_invalid(
        _betainc_1m(kk + 1.0, n, p), ok
    )


def _bernoulli_tails(kk: Any, p: Any) -> tuple[Any, Any]:
    """P(K <= k) = 1 - p below 1, then 1."""
    return where(kk >= 1, 1.0, 1.0 - p), where(kk >= 1, 0.0, p)


def _bernoulli(k: Any, p: Any) -> Any:
    return where(k <= 1, xlogy(k, p) + xlog1py(1.0 - k, -p), -np.inf)


def _binom_comb(k: Any, n: Any) -> tuple[Any, Any, Any]:
    """(k <= n, n or a safe k where n is below k, log C(n, k) by lgammas)."""
    below = k <= n
    nk = select(below, n, k, k)
    return below, nk, gammaln(nk + 1.0) - gammaln(k + 1.0) - gammaln(nk - k + 1.0)


def _nbinom_comb(k: Any, n: Any) -> Any:
    """log C(n + k - 1, k) by lgammas; exactly 0 at k = 0, where a Python n's gammaln
    (SciPy's) and the kernel's of n + k differ by an ulp (nbinom.logpmf(0, 10, 1) was
    1.8e-15 > 0)."""
    return where(k == 0, 0.0, gammaln(n + k) - gammaln(k + 1.0) - in_dtype_of(gammaln(n), k))


def _binom(k: Any, n: Any, p: Any) -> Any:
    ok = _binom_ok(n, p)
    # k = 0 or n (the lgammas cancel exactly), p = 0 or 1 (-inf, the derivative in p
    # +-inf from xlogy); n below k (-inf) through a safe n
    below, nk, comb = _binom_comb(k, n)
    edge = comb + xlogy(k, p) + xlog1py(nk - k, -p)
    if _small_counts(n):
        return nan_where_invalid(where(below, edge, -np.inf), ok)
    inner = both(both(k > 0, k < n), both(p > 0, p < 1))
    ks, ns, ps = where(inner, k, 1.0), select(inner, n, 2.0, k), select(inner, p, 0.5, k)
    saddle = (
        _stirlerr(ns)
        - _stirlerr(ks)
        - _stirlerr(ns - ks)
        - _bd0(ks, ns * ps)
        - _bd0(ns - ks, ns * (1.0 - ps))
        - 0.5 * (LOG_2PI + log(ks) + log1p(-ks / ns))
    )
    return nan_where_invalid(where(below, where(inner, saddle, edge), -np.inf), ok)


def _binom_edges(k: Any, n: Any, p: Any) -> tuple:
    """p = 0 < k and p = 1 > k / n: the mass C(n, k) p^k (1 - p)^(n - k) is 0; its
    derivative in p is n where the power is 1, else 0 (or -inf at p = 1 for a
    non-integer n with n - k < 1)."""
    below, nk, comb = _binom_comb(k, n)
    at_0 = both(both(p == 0, k > 0), below)
    at_1 = both(p == 1, k < n)
    found = [(at_0, p, k, comb), (at_1, 1.0 - p, nk - k, comb)]
    return found, (n, unless(either(at_0, at_1), p, 0.5, k))


def _nbinom(k: Any, n: Any, p: Any) -> Any:
    """As the binomial's x = n of n + k trials, times n / (n + k) (R's dnbinom)."""
    # k = 0: n log p exactly; p = 1 < k: -inf (the derivative in p -inf)
    edge = _nbinom_comb(k, n) + xlogy(n, p) + xlog1py(k, -p)
    if _small_counts(n + k):
        return nan_where_invalid(edge, _nbinom_ok(n, p))
    inner = both(both(k > 0, n > 0), both(p > 0, p < 1))
    ks, ns, ps = where(inner, k, 1.0), select(inner, n, 1.0, k), select(inner, p, 0.5, k)
    total = ns + ks
    saddle = (
        _stirlerr(total)
        - _stirlerr(ns)
        - _stirlerr(ks)
        - _bd0(ns, total * ps)
        - _bd0(ks, total * (1.0 - ps))
        - 0.5 * (LOG_2PI + log(ks) + log1p(ks / ns))
    )
    return nan_where_invalid(where(inner, saddle, edge), _nbinom_ok(n, p))


def _nbinom_edges(k: Any, n: Any, p: Any) -> tuple:
    """p = 1, k > 0: the mass C(n + k - 1, k) p^n (1 - p)^k is 0 (derivative in p -n at
    k = 1, else 0)."""
    at = both(both(p == 1, k > 0), n > 0)
    return [(at, 1.0 - p, k, _nbinom_comb(k, n))], (n, unless(at, p, 0.5, k))


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
        _discrete(_bernoulli, 1, ok=lambda p: both(p >= 0, p <= 1)), _bernoulli_tails, 1
    ),
)
binom = Distribution(
    "binom",
    _discrete_tails(
        _discrete(_binom, 2, _binom_edges, lambda n, p: either(p == 0, p == 1), _binom_ok),
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
