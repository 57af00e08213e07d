"""tapegrad.scipy.stats against scipy.stats: values (float64, 1e-12 relative over
each argument's practical range, tails included), gradients in x and every
continuous parameter against central differences, float32 kept, -inf outside the
support with finite gradients, SciPy's own results on plain input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as ss
from scipy.integrate import quad

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.stats as ts
import tapegrad.special as tapegrad_special
from tapegrad.testing import check_grads

RNG = np.random.default_rng(22)
X = np.concatenate([np.linspace(-40.0, 40.0, 41), RNG.uniform(-3, 3, 20)])
POS = np.concatenate([np.geomspace(1e-3, 50.0, 30), RNG.uniform(0.1, 3, 10)])
UNIT = np.concatenate([np.linspace(0.001, 0.999, 30), RNG.uniform(0, 1, 10)])

# (distribution, method, x values, parameters as positional arguments)
CONTINUOUS = [
    *[("norm", m, X, (0.3, 1.7)) for m in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")],
    *[
        ("expon", m, POS - 0.5, (0.2, 1.3))
        for m in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")
    ],
    *[("laplace", m, X, (0.5, 2.0)) for m in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")],
    *[("cauchy", m, X, (-0.2, 0.8)) for m in ("logpdf", "pdf", "cdf", "logcdf")],
    *[("logistic", m, X, (0.1, 1.5)) for m in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")],
    *[("uniform", m, X / 20, (-0.5, 1.5)) for m in ("logpdf", "pdf", "cdf", "sf")],
    *[
        ("lognorm", m, POS, (0.7, 0.0, 1.4))
        for m in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")
    ],
    ("t", "logpdf", X, (3.5, 0.2, 1.1)),
    ("t", "pdf", X, (7.0,)),
    ("gamma", "logpdf", POS, (2.5, 0.0, 1.5)),
    ("gamma", "pdf", POS, (0.7,)),
    *[("gamma", m, POS, (2.5, 0.1, 1.5)) for m in ("cdf", "sf", "logcdf", "logsf")],
    ("vonmises", "logpdf", X / 10, (2.5, 0.3)),
    ("vonmises", "pdf", X / 10, (0.4,)),
    # (within one turn: a value that crosses 0 by whole turns is 1 - 1 + tiny)
    *[("vonmises", m, X / 13, (2.5, 0.0)) for m in ("cdf", "sf")],
    ("vonmises", "cdf", X / 20, (0.05, -0.4, 1.3)),
    ("vonmises", "cdf", X / 40, (120.0,)),  # SciPy's normal approximation above 50
    ("beta", "logpdf", UNIT, (2.5, 1.5)),
    ("beta", "pdf", UNIT, (0.8, 3.0)),
    # the incomplete beta function: every parameter differentiable
    *[("t", m, X, (3.5, 0.2, 1.1)) for m in ("cdf", "sf", "logcdf", "logsf")],
    ("t", "cdf", X, (0.7,)),
    ("t", "cdf", np.concatenate([-np.geomspace(1e-9, 1, 20), np.geomspace(1e-9, 1, 20)]), (4.0,)),
    *[("beta", m, UNIT, (2.5, 1.5)) for m in ("cdf", "sf", "logcdf", "logsf")],
    ("beta", "cdf", UNIT * 3 - 1, (0.8, 3.0, -0.5, 2.0)),
]


@pytest.mark.parametrize("dist, method, x, params", CONTINUOUS, ids=lambda v: str(v)[:12])
def test_values_match_scipy(dist, method, x, params):
    got = getattr(getattr(ts, dist), method)(tg.tensor(x), *params).numpy()
    want = getattr(getattr(ss, dist), method)(x, *params)
    # vonmises' CDF series cancels near -pi to about 1e-14 absolute, SciPy's as ours
    atol = 2e-14 if dist == "vonmises" and method in ("cdf", "sf") else 1e-300
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=atol)


@pytest.mark.parametrize("dist, method, x, params", CONTINUOUS, ids=lambda v: str(v)[:12])
def test_gradients_in_x_and_parameters(dist, method, x, params):
    f = getattr(getattr(ts, dist), method)
    logpdf = getattr(ss, dist).logpdf
    inside = np.isfinite(logpdf(x - 1e-3, *params)) & np.isfinite(logpdf(x + 1e-3, *params))
    xs = x[inside & (np.abs(x) < 6) & (np.abs(x - 0.5) > 1e-3)]  # away from kinks (laplace)
    xs = xs[(xs > 0.05) | (dist != "lognorm")][:6]
    check_grads(lambda x, *p: tnp.sum(f(x, *p)), [xs, *[np.float64(p) for p in params]])


def test_log_ndtr_tails_and_their_gradients():
    z = np.array([-200.0, -60.0, -37.5, -37.0, -20.0, -1.0, 0.0, 4.9, 5.0, 8.0, 30.0])
    np.testing.assert_allclose(ts.norm.logcdf(tg.tensor(z)).numpy(), ss.norm.logcdf(z), rtol=1e-12)
    x = tg.tensor(z, requires_grad=True)
    tnp.sum(ts.norm.logcdf(x)).backward()
    # d log Phi(z) / dz = phi(z) / Phi(z) (the inverse Mills ratio)
    want = np.exp(ss.norm.logpdf(z) - ss.norm.logcdf(z))
    np.testing.assert_allclose(x.grad, want, rtol=1e-8)


def test_log_ndtr_gradient_far_in_the_lower_tail():
    """phi(z) / Phi(z) where both underflow: as sqrt(2/pi) / erfcx(-z / sqrt 2) (the ratio
    in logs carried |z|^2/2 ulps: 34% off at -1e8, exactly 1 from -1e9); the mpmath
    values are its asymptotic series there, -z - 1/z + 2/z^3 - ...."""
    z = np.array([-1e9, -1e8, -1e5, -1e4])
    x = tg.tensor(z, requires_grad=True)
    tnp.sum(ts.norm.logcdf(x)).backward()
    np.testing.assert_allclose(x.grad, -z - 1 / z + 2 / z**3, rtol=1e-14)
    # second order through the recorded derivative: d/dz (phi / Phi) = -r (z + r)
    ratio = tg.grad(lambda v: tnp.sum(ts.norm.logcdf(v)))
    # far down, d/dz (phi / Phi) = -r (z + r) -> -1 + 1/z^2 (erfcx's derivative cancelled
    # in 2x erfcx(x) - 2/sqrt(pi): 196.8 at -1e9)
    far = np.array([-1e9, -1e8, -1e5])
    got = tg.grad(lambda v: tnp.sum(ratio(v)))(far)
    np.testing.assert_allclose(got, -1 + 1 / far**2, rtol=1e-12)
    z = np.array([-40.0, -3.0, 0.5, 40.0])
    r = np.exp(ss.norm.logpdf(z) - ss.norm.logcdf(z))
    got = tg.grad(lambda v: tnp.sum(ratio(v)))(z)
    np.testing.assert_allclose(got, -r * (z + r), rtol=1e-9, atol=1e-300)


def test_student_t_with_huge_and_infinite_degrees_of_freedom():
    """t.logpdf through betaln (a difference of lgammas gave 1.66 for -1.42 at df =
    1e15); from df = 1e10 the CDF by its expansion in 1/df (betainc's argument rounds
    to 1: t.cdf(2, 1e20) was 0.5); df = inf is the normal distribution, as SciPy's."""
    x = np.array([-38.0, -5.0, -0.5, 1.0, 2.0])
    for df in (1e8, 1e15, 1e20):
        np.testing.assert_allclose(
            ts.t.logpdf(tg.tensor(x), tg.tensor(df)).numpy(), ss.t.logpdf(x, df), rtol=1e-13
        )
        np.testing.assert_allclose(ts.t.logpdf(tg.tensor(x), df).numpy(), ss.t.logpdf(x, df))
    for df in (1e9, 5e9, 1e15, 1e20):
        for method in ("cdf", "sf", "logcdf", "logsf"):
            got = getattr(ts.t, method)(tg.tensor(x[1:]), tg.tensor(df)).numpy()
            want = getattr(ss.t, method)(x[1:], df)
            np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=method)
    for df in (1e15, 1e20):  # (SciPy: -inf at 1e15; the tail 2.9e-316 is subnormal)
        got = ts.t.logcdf(tg.tensor(-38.0), tg.tensor(df)).item()
        assert got == pytest.approx(ss.norm.logcdf(-38.0), rel=1e-10)
    inf = tg.tensor(np.inf)
    for method in ("logpdf", "cdf", "logsf"):
        got = getattr(ts.t, method)(tg.tensor(x), inf).numpy()
        np.testing.assert_allclose(got, getattr(ss.t, method)(x, np.inf), rtol=1e-14)
    check_grads(lambda z: ts.t.cdf(z, 3e10), [np.array([-4.0, 0.7])])
    # the derivative in df: its terms cancel to 1/df^2 (relative error ~df * 1e-16);
    # betaln's digamma difference had it wrong in sign at 1e10
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60

    def logpdf(x, df):
        half = df / 2
        return (
            mpmath.loggamma(half + mpmath.mpf(1) / 2)
            - mpmath.loggamma(half)
            - mpmath.log(df * mpmath.pi) / 2
            - (df + 1) / 2 * mpmath.log1p(x * x / df)
        )

    for df in (1e6, 1e10):
        got = tg.grad(lambda d: ts.t.logpdf(3.0, d))(tg.tensor(df).numpy())
        want = float(mpmath.diff(lambda d: logpdf(mpmath.mpf(3), d), mpmath.mpf(df)))
        assert got == pytest.approx(want, rel=df * 1e-15)
    check_grads(lambda z: ts.t.logpdf(z, 2e15), [np.array([-4.0, 0.7])])


def test_cauchy_in_its_tails():
    """arctan(-1/z) / pi below -1 (1/2 + arctan(z) / pi cancelled: 2e-7 off at -1e10,
    0 at -1e300); log1p(1/z^2) past |z| = 1 (z^2 overflows from 1.3e154)."""
    z = np.array([-1e300, -1e155, -1e10, -1.5, -1.0, -0.3, 0.0, 2.0, 1e10, 1e300])
    for method in ("logpdf", "cdf", "sf", "logcdf", "logsf"):
        got = getattr(ts.cauchy, method)(tg.tensor(z)).numpy()
        np.testing.assert_allclose(got, getattr(ss.cauchy, method)(z), rtol=1e-14)
    check_grads(lambda v: ts.cauchy.logcdf(v), [np.array([-1e3, -1.2, -0.8, 0.4, 30.0])])
    check_grads(lambda v: ts.cauchy.logpdf(v), [np.array([-1e3, -1.2, -0.8, 0.4, 30.0])])


def test_discrete_families_at_infinity_and_outside_their_parameters():
    for dist, params in ((ts.poisson, (3.0,)), (ts.binom, (10.0, 0.3)), (ts.nbinom, (3.0, 0.5))):
        for method in ("cdf", "sf", "logcdf", "logsf"):
            got = getattr(dist, method)(tg.tensor(np.inf), *map(tg.tensor, params)).item()
            assert got == getattr(getattr(ss, dist.name), method)(np.inf, *params)
    # (binom's non-integer n is the continuous extension, so that n has a derivative)
    assert np.isfinite(ts.binom.pmf(tg.tensor(2.0), tg.tensor(2.5), 0.3).item())
    bad = [(ts.binom, (-1.0, 0.3)), (ts.binom, (10.0, -0.1)), (ts.binom, (10.0, 1.5))]
    bad += [(ts.nbinom, (0.0, 0.3)), (ts.nbinom, (-1.0, 0.3)), (ts.nbinom, (2.0, 0.0))]
    bad += [(ts.nbinom, (10.0, 1.5))]
    for dist, params in bad:
        for method in ("pmf", "cdf", "sf"):
            want = getattr(getattr(ss, dist.name), method)(2.0, *params)
            got = getattr(dist, method)(tg.tensor(2.0), *map(tg.tensor, params)).item()
            assert np.isnan(want) and np.isnan(got), (dist.name, params, method)


def test_outside_the_support():
    x = tg.tensor(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    lp = ts.gamma.logpdf(x, 2.0) + ts.beta.logpdf(x, 2.0, 2.0) + ts.expon.logpdf(x)
    assert lp.numpy()[0] == -np.inf and lp.numpy()[2] == -np.inf
    tnp.sum(tnp.where(tnp.isfinite(lp), lp, 0.0)).backward()
    assert np.all(np.isfinite(x.grad))
    np.testing.assert_array_equal(
        ts.norm.logpdf(tg.tensor([0.0]), 0.0, -1.0).numpy(), ss.norm.logpdf([0.0], 0.0, -1.0)
    )


@pytest.mark.parametrize(
    "dist, k, params",
    [
        ("poisson", np.array([0.0, 1, 2, 5, 30, 2.5, -1]), (3.2,)),
        ("bernoulli", np.array([0.0, 1, 2, 0.5]), (0.3,)),
        ("binom", np.array([0.0, 1, 4, 10, 11, 3.5]), (10, 0.35)),
        ("nbinom", np.array([0.0, 1, 4, 20, -2]), (3.5, 0.4)),
    ],
)
def test_discrete_match_scipy_and_differentiate_in_parameters(dist, k, params):
    for method in ("logpmf", "pmf"):
        got = getattr(getattr(ts, dist), method)(tg.tensor(k), *params).numpy()
        want = getattr(getattr(ss, dist), method)(k, *params)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    f = getattr(ts, dist).logpmf
    ks = k[(k >= 0) & (k == np.floor(k)) & (k <= 10)]
    if dist == "bernoulli":
        ks = ks[ks <= 1]
    cont = [i for i, p in enumerate(params) if isinstance(p, float)]

    def loss(*p):
        full = list(params)
        for i, v in zip(cont, p, strict=True):
            full[i] = v
        return tnp.sum(f(ks, *full))

    check_grads(loss, [np.float64(params[i]) for i in cont])


@pytest.mark.parametrize(
    "dist, k, params",
    [
        ("poisson", np.array([-1.0, 0.0, 2.0, 2.7, 10.0, 40.0]), (3.2,)),
        ("binom", np.array([-1.0, 0.0, 1.0, 3.5, 9.0, 10.0, 12.0]), (10.0, 0.35)),
        ("binom", np.array([0.0, 40.0, 150.0, 199.0]), (200.0, 0.7)),
        ("nbinom", np.array([-2.0, 0.0, 1.0, 4.0, 20.0, 80.0]), (3.5, 0.4)),
        ("bernoulli", np.array([-1.0, 0.0, 0.5, 1.0, 3.0]), (0.3,)),
    ],
)
def test_discrete_distribution_functions(dist, k, params):
    """cdf sf logcdf logsf against SciPy; gradients in the continuous parameters (binom's
    n too: the incomplete beta function is differentiable in it)."""
    top = {"binom": params[0], "bernoulli": 1.0}.get(dist, np.inf)
    inside = k[(k >= 0) & (k < top)]  # where it is not constant (nor a log of 0)
    for method in ("cdf", "sf", "logcdf", "logsf"):
        got = getattr(getattr(ts, dist), method)(tg.tensor(k), *params).numpy()
        want = getattr(getattr(ss, dist), method)(k, *params)
        # (logs near 0: SciPy's log(cdf) rounds to 0 where log1p(-sf) keeps -1e-31)
        atol = 1e-15 if method.startswith("log") else 1e-300
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=atol, err_msg=method)
        f = getattr(getattr(ts, dist), method)
        check_grads(lambda *p, f=f: tnp.sum(f(inside, *p)), [np.float64(p) for p in params])


def test_multivariate_normal_and_dirichlet():
    a = RNG.standard_normal((3, 3))
    cov = a @ a.T + 3 * np.eye(3)
    mean = RNG.standard_normal(3)
    x = RNG.standard_normal((5, 3))
    for pts in (x, x[0]):
        np.testing.assert_allclose(
            ts.multivariate_normal.logpdf(tg.tensor(pts), tg.tensor(mean), tg.tensor(cov)).numpy(),
            ss.multivariate_normal.logpdf(pts, mean, cov),
            rtol=1e-12,
        )
    check_grads(
        lambda x, m, c: tnp.sum(ts.multivariate_normal.logpdf(x, m, c @ c.T + 3 * np.eye(3))),
        [x, mean, a],
    )
    alpha = np.array([1.5, 2.0, 0.7])
    p = RNG.dirichlet(alpha, 4).T  # components on the first axis, as SciPy
    np.testing.assert_allclose(
        ts.dirichlet.logpdf(tg.tensor(p), tg.tensor(alpha)).numpy(),
        ss.dirichlet.logpdf(p, alpha),
        rtol=1e-12,
    )
    check_grads(lambda a: tnp.sum(ts.dirichlet.logpdf(p, a)), [alpha])


def _mvn_case(d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    a = g.standard_normal((d, d))
    return a, a @ a.T + 0.5 * np.eye(d), g.standard_normal(d)


def _mvn_reference(x, mean, cov, **kw):
    """SciPy's value with a tolerance 100 times tighter than its default."""
    return ss.multivariate_normal.cdf(
        x, mean, cov, abseps=1e-7, releps=1e-7, maxpts=10**7, rng=0, **kw
    )


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
def test_multivariate_normal_cdf_matches_scipy(d):
    """Within SciPy's own default tolerance (abseps = releps = 1e-5) of a tight SciPy
    value, with and without lower limits, limits swapped (negative mass, as SciPy),
    infinite limits, and a batch whose rows take different variable orders."""
    _, cov, mean = _mvn_case(d, d)
    x = RNG.standard_normal((6, d)) + 0.5
    x[1, 0] = np.inf  # that variable integrates out
    x[2, -1] = -np.inf  # no mass
    got = ts.multivariate_normal.cdf(tg.tensor(x), tg.tensor(mean), cov).numpy()
    np.testing.assert_allclose(got, _mvn_reference(x, mean, cov), atol=1.5e-5)
    assert got[2] == 0.0
    lower = x - RNG.uniform(0.5, 2.0, x.shape)
    lower[3, 0] = x[3, 0] + 1.0  # one swapped pair: the mass counts negatively
    lower[1, 0] = -np.inf
    got = ts.multivariate_normal.cdf(tg.tensor(x), mean, cov, lower_limit=lower).numpy()
    want = _mvn_reference(x, mean, cov, lower_limit=lower)
    np.testing.assert_allclose(got, want, atol=1.5e-5)
    assert got[3] <= 0.0
    one = ts.multivariate_normal.cdf(tg.tensor(x[0]), mean, cov)
    assert one.shape == () and abs(one.numpy() - _mvn_reference(x[0], mean, cov)) < 1.5e-5
    np.testing.assert_allclose(  # each row alone is the same as in the batch
        ts.multivariate_normal.cdf(tg.tensor(x[4]), mean, cov).numpy(),
        ts.multivariate_normal.cdf(tg.tensor(x), mean, cov).numpy()[4],
        rtol=1e-13,
    )


def test_multivariate_normal_cdf_exact_cases():
    """Independent components multiply; d = 1 is ndtr exactly; a scalar or diagonal cov
    as logpdf reads them; the log is logcdf; the same inputs give the same bits."""
    # d = 2 in closed form: SciPy's bivariate routine (Genz's) to rounding, across the
    # switch at |r| = 0.925 and near +-1, limits anywhere
    h = np.concatenate([RNG.uniform(-5, 5, (40, 2)), [[0, 0], [1, 1], [-3, -3], [0.5, 0.5001]]])
    for r in (0.0, 0.4, -0.7, 0.925, 0.93, -0.95, 0.999, -0.99999):
        cov2 = np.array([[2.0, r * np.sqrt(2.0) * 0.5], [r * np.sqrt(2.0) * 0.5, 0.25]])
        np.testing.assert_allclose(
            ts.multivariate_normal.cdf(tg.tensor(h), [0.1, -0.2], cov2).numpy(),
            ss.multivariate_normal.cdf(h, [0.1, -0.2], cov2),
            atol=2e-15,
        )
    x = np.array([0.3, -0.7, 1.2])
    sd = np.array([1.0, 2.0, 0.5])
    got = ts.multivariate_normal.cdf(tg.tensor(x), None, sd**2).numpy()
    np.testing.assert_allclose(got, np.prod(ss.norm.cdf(x / sd)), atol=1e-6)
    xs = np.linspace(-3, 3, 7)
    np.testing.assert_allclose(
        ts.multivariate_normal.cdf(tg.tensor(xs), 0.2, 2.0).numpy(),
        ss.norm.cdf(xs, 0.2, np.sqrt(2.0)),
        rtol=1e-14,
    )
    _, cov, mean = _mvn_case(4, 7)
    xt = tg.tensor(np.array([0.1, 0.4, -0.3, 1.0]))
    first = ts.multivariate_normal.cdf(xt, mean, cov).numpy()
    assert ts.multivariate_normal.cdf(xt, mean, cov).numpy() == first
    np.testing.assert_allclose(
        ts.multivariate_normal.logcdf(xt, mean, cov).numpy(), np.log(first), rtol=1e-14
    )
    assert abs(ts.multivariate_normal.cdf(xt, mean, cov, rng=5).numpy() - first) < 3e-5


def test_multivariate_normal_cdf_gradients():
    """Exact derivatives of the deterministic estimate, to second order, in x, mean,
    cov (through a factor) and the lower limit; close to the true bivariate
    derivatives: d/dh = phi(h) ndtr((k - r h) / sqrt(1 - r^2)), d/dr = the density."""
    a, _, mean = _mvn_case(3, 3)
    x = RNG.standard_normal((2, 3))
    lower = x - 1.5

    def f(x, m, a, lower):
        cov = a @ a.T + 0.5 * np.eye(3)
        return tnp.sum(ts.multivariate_normal.cdf(x, m, cov, lower_limit=lower))

    check_grads(f, [x, mean, a, lower])
    check_grads(lambda x, a: f(x, mean, a, lower), [x, a], order=2, rtol=1e-5)
    check_grads(lambda x: tnp.sum(ts.multivariate_normal.logcdf(x, mean, a @ a.T + np.eye(3))), [x])
    for r, h, k in ((0.6, 0.3, -0.4), (0.0, 0.0, 0.0), (0.97, 1.1, 1.3), (-0.99, 2.0, -1.5)):
        xt = tg.tensor(np.array([h, k]), requires_grad=True)
        ct = tg.tensor(np.array([[1.0, r], [r, 1.0]]), requires_grad=True)
        ts.multivariate_normal.cdf(xt, None, ct).backward()
        s = np.sqrt(1 - r * r)
        want = ss.norm.pdf([h, k]) * ss.norm.cdf([(k - r * h) / s, (h - r * k) / s])
        np.testing.assert_allclose(xt.grad, want, rtol=1e-12, atol=1e-15)
        density = ss.multivariate_normal.pdf([h, k], None, [[1.0, r], [r, 1.0]])
        np.testing.assert_allclose(ct.grad[0, 1] + ct.grad[1, 0], density, rtol=1e-11)


def _bvn_quad(h, k, r):
    """Phi2(h, k; r) as one quadrature with no cancellation: int_-inf^h phi(x)
    Phi((k - r x) / sqrt(1 - r^2)) dx, to 1e-13 relative however small."""
    s = np.sqrt(1 - r * r)
    integrand = lambda x: ss.norm.pdf(x) * ss.norm.cdf((k - r * x) / s)  # noqa: E731
    return quad(integrand, -np.inf, h, epsabs=0, epsrel=1e-13, limit=200)[0]


def test_bivariate_normal_in_hard_places():
    """Deep tails (the Sheppard integrand peaks narrowly inside its interval), negative
    correlation in the joint lower tail (Phi(h) Phi(k) less an integral would cancel to
    nothing: integrated from r = -1 instead), correlations rounding to 1, and second
    derivatives at h == k above |r| = 0.925, where min(h, k) and |h - k| would lose
    them. The reference has no cancellation anywhere."""
    mvn = ts.multivariate_normal

    def cdf(h, k, r, **kw):
        return mvn.cdf(tg.tensor([float(h), float(k)]), None, [[1.0, r], [r, 1.0]], **kw)

    for h, k, r in ((-30, -20, 0.925), (-20, -8, 0.9), (-15, -10, 0.5), (-25, -25, 0.8),
                    (-2, -1, -0.5), (-30, -8, 0.99), (-4, 3, -0.95), (-3, -8, -0.9),
                    (-3, -3, -0.925), (-8, -30, -0.3), (-2, -5, -0.99), (1, -5, -0.97),
                    (-6, 2, -0.6)):  # fmt: skip
        np.testing.assert_allclose(cdf(h, k, r).numpy(), _bvn_quad(h, k, r), rtol=2e-12)
    far = [[1, -0.5], [-0.5, 1]]  # P ~ e^-1800: 0 in float64, as SciPy
    assert mvn.logcdf(tg.tensor([-30.0, -30.0]), None, far).numpy() == -np.inf
    with pytest.raises(ValueError, match="underflows"):
        mvn.logcdf(tg.tensor([-30.0, -30.0], requires_grad=True), None, far)
    with pytest.raises(ValueError, match="rounds to"):
        mvn.cdf(tg.tensor([0.3, 0.5]), None, [[1.0, 1.0], [1.0, 1.0 + 2.0**-52]])
    for h, k, r in ((0.0, 0.0, 0.95), (-1.0, -1.0, 0.99), (-1.0, 1.0, -0.95), (0.7, 0.7, 0.5)):
        cov = np.array([[1.0, r], [r, 1.0]])
        got = tg.hessian(lambda x, cov=cov: mvn.cdf(x, None, cov))(np.array([h, k]))
        s = np.sqrt(1 - r * r)
        want = np.empty((2, 2))
        for i, (u, v) in enumerate(((h, k), (k, h))):  # d2/du2 = -u phi Phi - phi phi r / s
            z = (v - r * u) / s
            want[i, i] = (
                -u * ss.norm.pdf(u) * ss.norm.cdf(z) - ss.norm.pdf(u) * ss.norm.pdf(z) * r / s
            )
        want[0, 1] = want[1, 0] = ss.multivariate_normal.pdf([h, k], None, cov)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


def test_multivariate_normal_cdf_gradient_accuracy_in_three_dimensions():
    """The points grow until a directional derivative meets the tolerance too: at an
    identity cov the value's integrand is constant (exact at any size) but not its
    derivative. Plackett: dP/dcov_ij = phi(b_i) phi(b_j) prod_(k != i, j) Phi(b_k)."""
    b = np.array([0.3, -0.2, 0.8])
    c = tg.tensor(np.eye(3), requires_grad=True)
    ts.multivariate_normal.cdf(tg.tensor(b), None, c).backward()
    pdf, cdf = ss.norm.pdf(b), ss.norm.cdf(b)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        want = pdf[i] * pdf[j] * cdf[3 - i - j]
        assert abs(c.grad[i, j] + c.grad[j, i] - want) < 1e-4 * want


def test_multivariate_normal_cdf_tails_and_forward_mode():
    """Upper tails to full relative precision (each coordinate above the mean mirrored),
    where 1 - (1 - tiny) would leave nothing; second derivatives by forward mode with
    infinite limits finite and right."""
    sf8 = ss.norm.sf(8.0)
    for d in (1, 2, 3):
        got = ts.multivariate_normal.cdf(
            tg.tensor(np.full(d, np.inf)), None, np.eye(d), lower_limit=np.full(d, 8.0)
        )
        np.testing.assert_allclose(got.numpy(), sf8**d, rtol=1e-9)
    # P(X > 5, Y > 6) at r = 0.7 by one quadrature: int_-inf^-5 phi(x) Phi((-6 - r x)/s)
    r = 0.7
    want = quad(lambda x: ss.norm.pdf(x) * ss.norm.cdf((-6 - r * x) / np.sqrt(1 - r * r)),
                -np.inf, -5.0, epsabs=0, epsrel=1e-13)[0]  # fmt: skip
    cov = np.array([[1.0, r], [r, 1.0]])
    mvn = ts.multivariate_normal
    upper = mvn.cdf(tg.tensor([np.inf, np.inf]), None, cov, lower_limit=[5.0, 6.0])
    np.testing.assert_allclose(upper.numpy(), want, rtol=1e-12)  # SciPy: 2e-7 off
    np.testing.assert_allclose(
        mvn.cdf(tg.tensor([-5.0, -6.0]), None, cov).numpy(), want, rtol=1e-12
    )
    for d in (1, 2, 3):
        a = np.eye(d) + 0.3
        check_grads(
            lambda x, a: ts.multivariate_normal.cdf(x, None, a @ a.T),
            [np.linspace(-0.5, 0.7, d), a],
            order=2,
            modes=("fwd", "rev"),
            rtol=1e-5,
        )


def test_multivariate_normal_cdf_bad_input():
    """SciPy's reading of the arguments, and a clear error naming the function, the
    shapes and dtypes for anything else."""
    mvn = ts.multivariate_normal
    got = mvn.cdf(tg.tensor([0.2, -0.1]), [0.1, 0.3], 2.0)  # d from mean
    np.testing.assert_allclose(
        got.numpy(), ss.multivariate_normal.cdf([0.2, -0.1], [0.1, 0.3], 2.0), rtol=1e-12
    )
    np.testing.assert_allclose(
        mvn.logpdf(tg.tensor([0.2, -0.1]), [0.1, 0.3], 2.0).numpy(),
        ss.multivariate_normal.logpdf([0.2, -0.1], [0.1, 0.3], 2.0),
        rtol=1e-12,
    )
    eye = np.eye(2)
    bad = [
        (dict(x=tg.tensor([0.1, 0.2, 0.3]), cov=eye), r"cdf: x has shape \(3,\)"),
        (dict(x=tg.tensor(0.5), cov=eye), r"x has shape \(\)"),
        (dict(x=tg.tensor([0.1, 0.2]), mean=[0.0, 0.0, 0.0], cov=eye), r"mean has shape \(3,\)"),
        (dict(x=tg.tensor([0.1, 0.2]), cov=np.ones((2, 3))), r"cov must be .* \(2, 3\)"),
        (dict(x=tg.tensor([0.1, 0.2]), cov=np.ones((2, 2, 2))), r"cov must be"),
        (dict(x=tg.tensor([0.1, 0.2]), cov=[[1.0, 0.9], [-0.5, 1.0]]), r"symmetric"),
        (dict(x=tg.tensor([0.1, 0.2]), cov=[[1.0, np.nan], [np.nan, 1.0]]), r"finite"),
    ]
    for kwargs, message in bad:
        with pytest.raises(
            ValueError, match="multivariate_normal.cdf: " + ".*" + message.split(": ")[-1]
        ):
            mvn.cdf(**kwargs)
    assert mvn.cdf(tg.tensor(np.zeros((0, 3))), None, np.eye(3)).shape == (0,)
    x = tg.tensor(np.array([[0.1, np.nan, 0.2], [0.3, 0.1, -0.2]]), requires_grad=True)
    out = mvn.cdf(x, None, np.eye(3) + 0.2, maxpts=10**9)  # NaN: no integration at all
    assert np.isnan(out.numpy()[0]) and np.isfinite(out.numpy()[1])
    out[1].backward()
    assert np.all(x.grad[0] == 0) and np.all(np.isfinite(x.grad[1]))
    deep = tg.tensor([-40.0, -40.0], requires_grad=True)
    assert mvn.logcdf(deep.detach(), None, eye).numpy() == -np.inf  # SciPy's value
    with pytest.raises(ValueError, match="logcdf: the probability underflows"):
        mvn.logcdf(deep, None, eye)
    assert np.isfinite(mvn.cdf(tg.tensor([0.1, 0.2, 0.3]), None, np.eye(3) + 0.1, maxpts=1).numpy())


def test_multivariate_normal_cdf_hostile():
    """Infinite limits leave finite gradients, float32 stays float32, a singular cov
    raises by name, plain input is SciPy's own method."""
    _, cov, mean = _mvn_case(3, 4)
    x = tg.tensor(np.array([[np.inf, 0.2, -0.1], [np.inf, np.inf, np.inf]]), requires_grad=True)
    m = tg.tensor(mean, requires_grad=True)
    c = tg.tensor(cov, requires_grad=True)
    out = ts.multivariate_normal.cdf(x, m, c)
    np.testing.assert_allclose(out.numpy()[1], 1.0, rtol=1e-15)
    tnp.sum(out).backward()
    for g in (x.grad, m.grad, c.grad):
        assert np.all(np.isfinite(g))
    assert np.all(x.grad[:, 0] == 0) and np.all(x.grad[1] == 0)
    x32 = tg.tensor(np.array([0.1, 0.5, -0.2], np.float32), requires_grad=True)
    out = ts.multivariate_normal.cdf(x32, mean.astype(np.float32), cov.astype(np.float32))
    assert out.dtype == np.float32
    out.backward()
    assert x32.grad.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), _mvn_reference(x32.numpy(), mean, cov), atol=1e-4)
    with pytest.raises(ValueError, match=r"multivariate_normal.cdf: cov \(2, 2\).*positive"):
        ts.multivariate_normal.cdf(tg.tensor([0.0, 1.0]), None, np.ones((2, 2)))
    plain = ts.multivariate_normal.cdf(np.array([0.1, 0.5, -0.2]), mean, cov, rng=3)
    assert plain == ss.multivariate_normal.cdf(np.array([0.1, 0.5, -0.2]), mean, cov, rng=3)


def test_float32_stays_float32_and_plain_input_is_scipys():
    x = tg.tensor(np.linspace(-2, 2, 5).astype(np.float32), requires_grad=True)
    for f in (ts.norm.logpdf, ts.norm.logcdf, ts.logistic.cdf, ts.laplace.logsf):
        out = f(x)
        assert out.dtype == np.float32
        tnp.sum(out).backward()
        assert x.grad.dtype == np.float32
    got = ts.norm.logpdf(np.array([0.5, 1.0]), 0.1)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, ss.norm.logpdf(np.array([0.5, 1.0]), 0.1))
    assert ts.poisson.logpmf(3, 2.0) == ss.poisson.logpmf(3, 2.0)


def test_a_likelihood_fit_recovers_the_parameters():
    data = RNG.normal(1.5, 0.7, 2000)

    def nll(p):
        return -tnp.sum(ts.norm.logpdf(data, p[0], tnp.exp(p[1])))

    p = np.array([0.0, 0.0])
    for _ in range(300):
        p = p - 2e-4 * tg.grad(nll)(p)
    np.testing.assert_allclose([p[0], np.exp(p[1])], [data.mean(), data.std()], rtol=1e-3)


@pytest.mark.parametrize(
    "f, args",
    [
        (lambda x, m, s: ts.norm.logcdf(x, m, s), [np.array([-3.0, 0.2, 2.0]), 0.3, 1.2]),
        (lambda x, m, s: ts.logistic.logsf(x, m, s), [np.array([-3.0, 0.2, 2.0]), 0.3, 1.2]),
        (lambda x, a, s: ts.gamma.logpdf(x, a, scale=s), [np.array([0.5, 2.0]), 2.5, 1.3]),
        (lambda x, s: ts.gamma.logcdf(x, 2.5, scale=s), [np.array([0.5, 2.0]), 1.3]),
        (lambda x, k: ts.vonmises.logpdf(x, k), [np.array([-1.0, 0.4]), 2.0]),
        (lambda mu: ts.poisson.logpmf(np.array([0.0, 3.0]), mu), [2.5]),
        (lambda x, d: ts.t.logpdf(x, d), [np.array([-1.0, 0.4]), 4.5]),
        (lambda x, s: ts.t.cdf(x, 4.5, scale=s), [np.array([-1.0, 0.4]), 1.3]),
        (lambda x: ts.beta.logcdf(x, 2.5, 1.5), [np.array([0.2, 0.7])]),
    ],
)
def test_second_order_and_forward_mode(f, args):
    args = [np.float64(a) if np.ndim(a) == 0 else a for a in args]
    check_grads(lambda *a: tnp.sum(f(*a)), args, order=2, modes=("fwd", "rev"))


def test_distribution_functions_in_hard_places():
    """Tails that cancel, huge degrees of freedom, 1 - z for tiny z, no NaN leaking
    from the integer part of k, float32 kept."""
    t = ts.t
    np.testing.assert_allclose(
        t.sf(tg.tensor(15.81), 1000.0).numpy(), ss.t.sf(15.81, 1000.0), rtol=1e-10
    )
    np.testing.assert_allclose(
        t.logcdf(tg.tensor(-15.81), 1000.0).numpy(), ss.t.logcdf(-15.81, 1000.0), rtol=1e-12
    )
    np.testing.assert_allclose(t.sf(tg.tensor(9.0), 100.0).numpy(), ss.t.sf(9.0, 100.0), rtol=1e-10)
    np.testing.assert_allclose(t.cdf(tg.tensor(1.0), 1e15).numpy(), ss.norm.cdf(1.0), rtol=1e-12)
    np.testing.assert_allclose(
        ts.beta.sf(tg.tensor(1e-10), 0.05, 1.0).numpy(), -np.expm1(0.05 * np.log(1e-10)), rtol=1e-13
    )
    z = tg.tensor(np.array([1e-170, -1e-160, 1e-100]), requires_grad=True)
    tnp.sum(t.cdf(z, 3.0)).backward()
    np.testing.assert_allclose(z.grad, ss.t.pdf(0.0, 3.0), rtol=1e-12)
    loc = tg.tensor(0.3, requires_grad=True)
    tnp.sum(ts.poisson.cdf(np.array([1.0, 4.0]), 3.2, loc)).backward()
    assert loc.grad == 0.0
    x32 = np.array([0.2, 0.5], np.float32)
    for got in (ts.beta.cdf(tg.tensor(x32), 2.0, 3.0), ts.t.cdf(tg.tensor(x32), 3.0)):
        assert got.dtype == np.float32
    got = tapegrad_special.betainc(np.float32(300), np.float32(300), tg.tensor(np.float32(0.5)))
    assert got.dtype == np.float32 and abs(float(got) - 0.5) < 1e-6


# --- edges of the support, far tails and huge counts -----------------------------------------


def _grad(f, args, i):
    """(value, derivative in args[i]) of a scalar f, recorded eagerly."""
    args = [tg.tensor(np.float64(a), requires_grad=j == i) for j, a in enumerate(args)]
    out = f(*args)
    out.backward()
    return out.item(), float(args[i].grad)


def _gamma_cdf_scaled(x, scale, a=1.0):
    return ts.gamma.cdf(x, a, 1.0, scale)


# (method, arguments, which is differentiated, the direction into the support, want)
EDGES = [
    # d/dx of a distribution function at the edge of the support is the density's limit
    # from inside: inf, finite or 0 by the shape (gammainc's derivative at 0 met a
    # where's 0: NaN)
    (ts.gamma.cdf, (0.0, 0.5), 0, 1, np.inf),
    (ts.gamma.cdf, (0.0, 1.0), 0, 1, 1.0),
    (ts.gamma.cdf, (0.0, 2.0), 0, 1, 0.0),
    (ts.gamma.sf, (0.0, 0.5), 0, 1, -np.inf),
    (ts.gamma.cdf, (-1.0, 0.5), 0, 1, 0.0),
    (ts.gamma.cdf, (0.0, 0.5), 1, 1, 0.0),
    (_gamma_cdf_scaled, (1.0, 2.0), 0, 1, 0.5),
    (_gamma_cdf_scaled, (1.0, 2.0), 1, 1, 0.0),  # x = loc: no inf * 0 through the scale
    (ts.beta.cdf, (0.0, 0.5, 2.0), 0, 1, np.inf),
    (ts.beta.cdf, (1.0, 2.0, 1.0), 0, -1, 2.0),
    (ts.beta.sf, (1.0, 2.0, 0.5), 0, -1, -np.inf),
    # a density that is 0 at the edge: d/dx from inside (exp of -inf gave 0 * inf)
    (ts.gamma.pdf, (0.0, 2.0), 0, 1, 1.0),
    (ts.gamma.pdf, (0.0, 1.5), 0, 1, np.inf),
    (ts.gamma.pdf, (0.0, 3.0), 0, 1, 0.0),
    (ts.gamma.pdf, (0.0, 2.0), 1, 1, 0.0),
    (ts.gamma.pdf, (0.0, 1.0), 0, 1, -1.0),
    (ts.gamma.pdf, (0.0, 0.5), 0, 1, -np.inf),  # an infinite density: -inf in x and a
    (ts.gamma.pdf, (0.0, 0.5), 1, 1, -np.inf),
    (ts.beta.pdf, (0.0, 2.0, 3.0), 0, 1, 12.0),
    (ts.beta.pdf, (1.0, 2.0, 2.0), 0, -1, -6.0),
    (ts.beta.pdf, (1.0, 2.0, 3.0), 1, -1, 0.0),
    # a mass that is 0 at an end of a parameter's range: the derivative from inside
    (ts.poisson.pmf, (5.0, 0.0), 1, 1, 0.0),
    (ts.poisson.pmf, (1.0, 0.0), 1, 1, 1.0),
    (ts.poisson.pmf, (0.0, 0.0), 1, 1, -1.0),
    (ts.binom.pmf, (10.0, 10.0, 0.0), 2, 1, 0.0),
    (ts.binom.pmf, (1.0, 10.0, 0.0), 2, 1, 10.0),
    (ts.binom.pmf, (0.0, 10.0, 1.0), 2, -1, 0.0),
    (ts.binom.pmf, (9.0, 10.0, 1.0), 2, -1, -10.0),
    (ts.binom.pmf, (10.0, 10.0, 1.0), 2, -1, 10.0),
    (ts.binom.pmf, (2.0, 2.5, 1.0), 2, -1, -np.inf),  # (1 - p)^0.5 (a non-integer n)
    (ts.binom.pmf, (3.0, 10.0, 0.0), 1, 1, 0.0),
    (ts.nbinom.pmf, (5.0, 3.0, 1.0), 2, -1, 0.0),
    (ts.nbinom.pmf, (1.0, 3.0, 1.0), 2, -1, -3.0),
    (ts.nbinom.pmf, (0.0, 3.0, 1.0), 2, -1, 3.0),
    # log-masses there: -inf, the derivative +-inf (as before)
    (ts.poisson.logpmf, (5.0, 0.0), 1, 1, np.inf),
    (ts.binom.logpmf, (3.0, 10.0, 0.0), 2, 1, np.inf),
]


@pytest.mark.parametrize("f, args, i, inward, want", EDGES, ids=lambda v: str(v)[:14])
def test_derivatives_at_the_edges(f, args, i, inward, want):
    """Where the value is finite at an edge (0 or 1 exactly), the derivative is the
    one-sided one from inside (a one-sided difference agrees), never NaN."""
    value, got = _grad(f, args, i)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-300), (value, got)
    if np.isfinite(want):
        h = inward * 1e-7
        moved = np.array(args)
        moved[i] += h
        with tg.no_grad():
            near = f(*[tg.tensor(a) for a in moved]).item()
        assert (near - value) / h == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_edges_keep_values_and_dtypes():
    """The edges' values are SciPy's; float32 stays float32, a vector of points with an
    edge among them gets no NaN in any gradient."""
    x = np.array([-1.0, 0.0, 0.5, 3.0])
    for a in (0.5, 1.0, 2.0):
        for method in ("pdf", "cdf", "sf", "logpdf"):
            got = getattr(ts.gamma, method)(tg.tensor(x), a).numpy()
            np.testing.assert_allclose(got, getattr(ss.gamma, method)(x, a), rtol=1e-13)
    for a, b in ((0.5, 2.0), (2.0, 0.5), (2.0, 3.0)):
        u = np.array([0.0, 0.3, 1.0])
        for method in ("pdf", "cdf", "sf"):
            got = getattr(ts.beta, method)(tg.tensor(u), a, b).numpy()
            np.testing.assert_allclose(got, getattr(ss.beta, method)(u, a, b), rtol=1e-13)
    k = np.array([0.0, 1.0, 3.0, 10.0])
    for dist, params in (("poisson", (0.0,)), ("binom", (10.0, 0.0)), ("binom", (10.0, 1.0))):
        got = getattr(ts, dist).pmf(tg.tensor(k), *params).numpy()
        np.testing.assert_array_equal(got, getattr(ss, dist).pmf(k, *params))
    np.testing.assert_array_equal(
        ts.nbinom.pmf(tg.tensor(k), 3.0, 1.0).numpy(), ss.nbinom.pmf(k, 3.0, 1.0)
    )
    x32 = tg.tensor(np.array([0.0, 0.5, 2.0], np.float32), requires_grad=True)
    for f in (
        lambda v: ts.gamma.cdf(v, 0.5),
        lambda v: ts.gamma.pdf(v, 2.0),
        lambda v: ts.beta.cdf(v / 2.0, 2.0, 3.0),
        lambda v: ts.beta.pdf(v / 2.0, 2.0, 3.0),
    ):
        out = f(x32)
        assert out.dtype == np.float32
        tnp.sum(out).backward()
        assert x32.grad.dtype == np.float32 and not np.isnan(x32.grad).any()
        x32.grad = None
    k32 = tg.tensor(np.array([0.0, 1.0, 3.0], np.float32))
    for p in (0.0, 0.3, 1.0):
        p32 = tg.tensor(np.float32(p), requires_grad=True)
        out = tnp.sum(ts.binom.pmf(k32, 10.0, p32) + ts.poisson.pmf(k32, 3.0 * p32))
        assert out.dtype == np.float32
        out.backward()
        assert p32.grad.dtype == np.float32 and np.isfinite(p32.grad)


def _mp_t_cdf(mpmath, x, df):
    """P(T <= x) for x < 0: I_w(df/2, 1/2) / 2, w = df / (df + x^2)."""
    x, df = mpmath.mpf(x), mpmath.mpf(df)
    return mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + x * x), regularized=True) / 2


def test_student_t_far_in_its_tails():
    """Small df, huge |x|: u = x^2 / (df + x^2) rounds to 1 in the betainc branch not
    taken (its infinite derivative times a where's 0 was NaN); past x^2 = 1e17 df the
    tail is the leading term in logs (SciPy's value, and ours, was 0 from |x| ~ 1e154)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for x, df in ((-1e8, 1.0), (-1e8, 0.5), (-1e20, 1.0), (-3e9, 2.5), (-1e160, 0.5)):
        value, dx = _grad(ts.t.cdf, (x, df), 0)
        _, ddf = _grad(ts.t.cdf, (x, df), 1)
        assert value == pytest.approx(float(_mp_t_cdf(mpmath, x, df)), rel=1e-13)
        want = mpmath.diff(lambda v, df=df: _mp_t_cdf(mpmath, v, df), x)
        assert dx == pytest.approx(float(want))
        want = mpmath.diff(lambda v, x=x: _mp_t_cdf(mpmath, x, v), df)
        assert ddf == pytest.approx(float(want), rel=1e-9)
        _, dlog = _grad(ts.t.logcdf, (x, df), 0)
        assert dlog == pytest.approx(dx / value, rel=1e-12)
    for x in (-np.inf, np.inf):
        for method, want in (("cdf", x > 0), ("sf", x < 0)):
            value, dx = _grad(getattr(ts.t, method), (x, 1.5), 0)
            assert value == want and dx == 0.0
    # |x|^3 overflowed in the normal branch's 1/df term (NaN from 5.6e102)
    value, dx = _grad(ts.t.cdf, (-1e110, 1e12), 0)
    assert value == 0.0 and dx == 0.0
    # through a where both branches of a tensor df; a float32 x stays float32
    check_grads(lambda v, d: ts.t.cdf(v, d), [np.array([-1e8, -1e12, -4.0]), np.float64(1.3)])
    got = ts.t.cdf(tg.tensor(np.float32(-1e8)), 1.0)
    assert got.dtype == np.float32 and got.item() == pytest.approx(1 / (np.pi * 1e8), rel=1e-6)


def test_binomial_tails_with_a_tiny_p():
    """I_(1-p)(a, b) took 1 - p rounded (1.1e-16 absolute: n p 1e-16 relative, 2e-5 at
    n = 1e12, p = 1e-12); now the rounded point's rest is added exactly."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    mpf = mpmath.mpf

    def binom_cdf(k, n, p):
        return mpmath.betainc(mpf(n) - k, k + 1, 0, 1 - mpf(p), regularized=True)

    def nbinom_sf(k, n, p):
        return mpmath.betainc(mpf(k) + 1, n, 0, 1 - mpf(p), regularized=True)

    for k, n, p in ((0, 1e12, 1e-12), (0, 1e10, 5e-10), (0, 1e6, 3e-5), (0, 1e8, 1e-8)):
        got = ts.binom.cdf(tg.tensor(float(k)), n, p).item()
        assert got == pytest.approx(float(binom_cdf(k, n, p)), rel=2e-14)
        got = ts.binom.logsf(tg.tensor(float(k)), n, tg.tensor(p)).item()
        assert got == pytest.approx(float(mpmath.log1p(-binom_cdf(k, n, p))), rel=2e-14)
    got = ts.nbinom.sf(tg.tensor(1e9), 10.0, 1e-8).item()
    assert got == pytest.approx(float(nbinom_sf(1e9, 10, 1e-8)), rel=1e-13)
    # the derivative in p is the density at 1 - p (to first order in the step as well)
    _, dp = _grad(lambda p: ts.binom.cdf(0.0, 1e12, p), (1e-12,), 0)
    want = mpmath.diff(lambda v: binom_cdf(0, 1e12, v), mpf(1e-12))
    assert dp == pytest.approx(float(want), rel=1e-12)
    check_grads(lambda p, n: ts.binom.cdf(3.0, n, p), [np.float64(0.01), np.float64(1e3)])
    k32 = tg.tensor(np.array([0.0, 3.0], np.float32))
    for got in (ts.binom.cdf(k32, 1e4, 3e-4), ts.nbinom.sf(k32, 3.0, 0.3)):
        assert got.dtype == np.float32
    check_grads(lambda p, n: ts.nbinom.sf(80.0, n, p), [np.float64(0.01), np.float64(2.5)])


def _mp_logpmf(mpmath, dist, k, *params):
    k, params = mpmath.mpf(k), [mpmath.mpf(v) for v in params]
    lg = mpmath.loggamma
    if dist == "poisson":
        (mu,) = params
        return k * mpmath.log(mu) - mu - lg(k + 1)
    n, p = params
    if dist == "binom":
        comb = lg(n + 1) - lg(k + 1) - lg(n - k + 1)
        return comb + k * mpmath.log(p) + (n - k) * mpmath.log1p(-p)
    return lg(n + k) - lg(k + 1) - lg(n) + n * mpmath.log(p) + k * mpmath.log1p(-p)


def _mp_logpmf_derivatives(mpmath, dist, k, *params):
    """The log-mass's derivatives in each parameter, in closed form (digammas)."""
    k, params = mpmath.mpf(k), [mpmath.mpf(v) for v in params]
    psi = mpmath.digamma
    if dist == "poisson":
        return [k / params[0] - 1]
    n, p = params
    if dist == "binom":
        return [psi(n + 1) - psi(n - k + 1) + mpmath.log1p(-p), k / p - (n - k) / (1 - p)]
    return [psi(n + k) - psi(n) + mpmath.log(p), n / p - k / (1 - p)]


@pytest.mark.parametrize(
    "dist, k, params",
    [
        ("binom", 5e12, (1e13, 0.5)),  # SciPy: 1e-2 off
        ("binom", 5e12 + 3e6, (1e13, 0.5)),
        ("binom", 5e8 + 3e4, (1e9, 0.5)),  # SciPy and ours: 1e-6 off
        ("binom", 2.5e8 - 2e4, (1e9, 0.25)),
        ("binom", 3.0, (10.0, 0.35)),
        ("binom", 2.0, (2.5, 0.35)),  # the continuous extension in n
        ("poisson", 1e9 + 3e4, (1e9,)),
        ("poisson", 1e13 - 4e6, (1e13,)),
        ("poisson", 3.0, (2.5,)),
        ("nbinom", 1e9 + 3e4, (1e9, 0.5)),
        ("nbinom", 2e12, (3e12, 0.6)),
        ("nbinom", 4.0, (0.3, 0.4)),
    ],
)
def test_mass_functions_at_huge_counts(dist, k, params):
    """Loader's saddle-point form: stirlerr and the deviance bd0 keep the mass to ~1e-15
    where a difference of lgammas ~ k log k lost k 1e-16 relative; its derivatives in
    every parameter (binom's n too) against mpmath's."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    want = _mp_logpmf(mpmath, dist, k, *params)
    got = getattr(ts, dist).pmf(tg.tensor(k), *params).item()
    assert got == pytest.approx(float(mpmath.exp(want)), rel=2e-14)
    logpmf = getattr(ts, dist).logpmf
    for i, want in enumerate(_mp_logpmf_derivatives(mpmath, dist, k, *params)):
        _, d = _grad(lambda *a: logpmf(k, *a), params, i)
        # (near the mode the derivative in p is a difference of terms ~ n / p: an ulp of
        # them is all its input determines)
        p = params[-1] if dist != "poisson" else 0.5
        terms = max(k, params[0]) / min(p, 1.0 - p)
        assert d == pytest.approx(float(want), rel=1e-11, abs=2e-16 * terms)
    if k < 100:  # (central differences: a step of 1e-6 is small only for small counts)
        check_grads(lambda *a: logpmf(k, *a), [np.float64(v) for v in params])


def test_stats_edges_and_tails_replay_under_compile():
    """A tg.compile program through the new branches replays with eager's numbers."""
    k = np.array([0.0, 1.0, 5e8 + 3e4, 3.0])

    def loss(p, x, df):
        return (
            tnp.sum(ts.binom.logpmf(k, 1e9, p))
            + tnp.sum(ts.poisson.pmf(k[:2], 0.0 * p))
            + tnp.sum(ts.gamma.cdf(x, 2.0))
            + tnp.sum(ts.t.cdf(-1e8 * x - 1.0, df))
            + ts.binom.cdf(0.0, 1e12, p * 2e-12)
        )

    step = tg.compile(loss, argnums=(0, 1, 2))
    for scale in (1.0, 0.9, 1.1):
        args = (0.5 * scale, np.array([0.0, 1.0, 2.5]) * scale, 1.0 * scale)
        value, grads = step.value_and_grad(*args)
        want, want_grads = tg.value_and_grad(loss, argnums=(0, 1, 2))(*args)
        assert value == want
        for g, w in zip(grads, want_grads, strict=True):
            np.testing.assert_array_equal(g, w)
            assert np.all(np.isfinite(g))
    # (masks are combined through floats and a comparison: no guard on their values)
    assert step.stats["captures"] == 1 and step.stats["guard_failures"] == 0


@pytest.mark.parametrize("dist, params", [("poisson", (950.0,)), ("binom", (1980.0, 0.5))])
def test_mass_functions_either_side_of_the_saddle_point_switch(dist, params):
    """Counts below ``_SADDLE_MIN`` keep the difference of lgammas (five ops), from it on
    Loader's form: both agree with mpmath, in value and in every parameter's derivative,
    and a compiled program whose counts cross the switch captures again and keeps
    eager's numbers."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    from tapegrad.scipy.stats.discrete import _SADDLE_MIN

    logpmf = getattr(ts, dist).logpmf
    for k in (_SADDLE_MIN - 40.0, _SADDLE_MIN - 1.0, _SADDLE_MIN, _SADDLE_MIN + 7.0):
        want = float(_mp_logpmf(mpmath, dist, k, *params))
        assert logpmf(tg.tensor(k), *params).item() == pytest.approx(want, rel=1e-13)
        for i, d_want in enumerate(_mp_logpmf_derivatives(mpmath, dist, k, *params)):
            _, d = _grad(lambda *a, k=k: logpmf(k, *a), params, i)
            assert d == pytest.approx(float(d_want), rel=1e-9, abs=1e-12)

    def loss(*args):
        *ps, counts = args
        return tnp.sum(logpmf(counts, *ps))

    nums = tuple(range(len(params)))
    step = tg.compile(loss, argnums=nums)
    # the switch is on the counts (poisson) or on binom's n
    calls = [
        (params, [900.0, 950.0]),
        (params, [900.0, 1200.0]),
        (params, [990.0, 10.0]),
        (params, [2000.0, 1500.0]) if dist == "poisson" else ((980.0, 0.5), [900.0, 10.0]),
    ]
    for params, counts in calls:
        counts = np.array(counts) if dist == "poisson" else np.minimum(counts, params[0])
        value, grads = step.value_and_grad(*params, counts)
        want, want_grads = tg.value_and_grad(loss, argnums=nums)(*params, counts)
        assert value == want
        np.testing.assert_array_equal(np.ravel(grads), np.ravel(want_grads))
    assert step.stats["captures"] >= 2  # the switch was crossed and re-crossed


def test_pmf_and_pdf_take_the_edge_path_only_where_an_edge_is_met():
    """Away from the edges pmf and pdf are exp of the log-mass / log-density (the edge
    formulas cost ~30 ops); a compiled program whose parameter moves onto an edge
    captures again and gives the edge's finite derivative, not NaN."""

    def loss(mu, x):
        return tnp.sum(ts.poisson.pmf(np.array([0.0, 1.0, 3.0]), mu)) + tnp.sum(
            ts.gamma.pdf(x, 2.0)
        )

    step = tg.compile(loss, argnums=(0, 1))
    eager = tg.value_and_grad(loss, argnums=(0, 1))
    for mu, x in ((0.7, [0.5, 2.0]), (0.0, [0.5, 2.0]), (0.7, [0.0, 2.0]), (0.3, [1.0, 3.0])):
        x = np.array(x)
        value, (g_mu, g_x) = step.value_and_grad(mu, x)
        want, (w_mu, w_x) = eager(mu, x)
        assert value == want and g_mu == w_mu
        np.testing.assert_array_equal(g_x, w_x)
        assert np.isfinite(g_mu) and np.all(np.isfinite(g_x))
        want = ss.poisson.pmf([0, 1, 3], mu).sum() + ss.gamma.pdf(x, 2.0).sum()
        assert value == pytest.approx(want, rel=1e-13)
    # at mu = 0: d/dmu of e^-mu (1 + mu + mu^3/6) is 0; gamma(2).pdf = x e^-x, slope 1 at 0
    assert eager(0.0, np.array([0.0, 2.0]))[1][0] == 0.0
    assert eager(0.5, np.array([0.0, 2.0]))[1][1][0] == 1.0
    assert step.stats["captures"] >= 3


def test_a_nan_count_is_nan():
    """A NaN k gives NaN in every mass and distribution function (as SciPy), not the
    0 / -inf of a k outside the support; the other elements and their gradients keep
    their values, and float32 stays float32."""
    k = np.array([np.nan, 1.0, 3.0])
    cases = [
        ("poisson", (2.0,)),
        ("poisson", (0.0,)),
        ("binom", (10.0, 0.3)),
        ("nbinom", (4.0, 0.6)),
    ]
    for dist, params in cases:
        for method in ("pmf", "logpmf", "cdf", "sf", "logcdf", "logsf"):
            got = getattr(getattr(ts, dist), method)(tg.tensor(k), *params).numpy()
            want = getattr(getattr(ss, dist), method)(k, *params)
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    mu = tg.tensor(np.float32(2.0), requires_grad=True)
    out = ts.poisson.pmf(tg.tensor(k.astype(np.float32)), mu)
    assert out.dtype == np.float32 and np.isnan(out.numpy()[0])
    tnp.sum(out[1:]).backward()
    assert np.isfinite(mu.grad)


@pytest.mark.parametrize(
    "n, p, dk", [(1e12, 0.3, 0.0), (1e12, 0.5, -1e6), (1e10, 0.3, 0.0), (1e8, 0.5, 100.0)]
)
def test_binomial_cdf_derivative_at_huge_n(n, p, dk):
    """d/dp P(K <= k) = -n pmf(k; n - 1, p): betainc's density in x was a difference of
    ~1e11-sized logs (a log x, log B) at n = 1e12, 1e-4 relative off; now in the
    prefactor's Stirling form, as SciPy's pmf."""
    k = np.floor(n * p + dk)
    _, d = _grad(lambda p: ts.binom.cdf(k, n, p), (p,), 0)
    # (two standard deviations out at n = 1e12, the prefactor's a log1p(d / a) carries
    # a * ulp(d / a) ~ 1e-10: 2.4e-10 off; SciPy's is exact)
    rel = 1e-12 if dk == 0 or n < 1e11 else 1e-9
    assert d == pytest.approx(-n * ss.binom.pmf(k, n - 1, p), rel=rel)
    # the same density through beta.cdf's derivative in x, at large shapes
    a, b = n - k, k + 1.0
    _, dx = _grad(lambda x: ts.beta.cdf(x, a, b), (1.0 - p,), 0)
    assert dx == pytest.approx(ss.beta.pdf(1.0 - p, a, b), rel=rel)


@pytest.mark.parametrize(
    "f, x0, order, want",
    [
        # second derivatives the edge formulas do not compute: NaN, not a silent 0
        (lambda mu: ts.poisson.pmf(2.0, mu), 0.0, 2, "nan"),  # true 1
        (lambda mu: ts.poisson.pmf(1.0, mu), 0.0, 2, "nan"),  # true -2
        (lambda x: ts.gamma.pdf(x, 3.0), 0.0, 2, "nan"),  # true 1
        (lambda x: ts.gamma.cdf(x, 2.0), 0.0, 2, "nan"),  # true 1
        (lambda x: ts.beta.pdf(x, 3.0, 2.0), 0.0, 2, "nan"),  # true 24
        (lambda x: ts.beta.cdf(x, 2.0, 2.0), 0.0, 2, "nan"),  # true 6
        (lambda p: ts.binom.pmf(2.0, 10.0, p), 0.0, 2, "nan"),  # true 90
        (lambda p: ts.nbinom.pmf(2.0, 3.0, p), 1.0, 2, "nan"),  # true 12
        (lambda mu: ts.poisson.pmf(3.0, mu), 0.0, 3, "nan"),  # true 1
        # below the edge's power the derivatives are 0, and computed so
        (lambda mu: ts.poisson.pmf(3.0, mu), 0.0, 2, 0.0),
        (lambda mu: ts.poisson.pmf(5.0, mu), 0.0, 2, 0.0),
        (lambda x: ts.gamma.pdf(x, 5.0), 0.0, 2, 0.0),
        # a power between integers n and n + 1/2: order n is still 0 (was NaN), n + 1 inf
        (lambda x: ts.gamma.pdf(x, 3.2), 0.0, 2, 0.0),  # t^2.2
        (lambda x: ts.gamma.pdf(x, 3.2), 0.0, 3, "nan"),  # true +inf
        (lambda x: ts.gamma.cdf(x, 2.3), 0.0, 2, 0.0),
        (lambda x: ts.beta.pdf(x, 3.4, 2.0), 0.0, 2, 0.0),
        (lambda p: ts.binom.pmf(8.0, 10.3, p), 1.0, 2, 0.0),  # (1 - p)^2.3
        # first derivatives as before
        (lambda mu: ts.poisson.pmf(1.0, mu), 0.0, 1, 1.0),
        (lambda x: ts.gamma.pdf(x, 2.0), 0.0, 1, 1.0),
        (lambda p: ts.binom.pmf(1.0, 10.0, p), 0.0, 1, 10.0),
    ],
)
def test_higher_derivatives_at_edges_are_nan_where_not_computed(f, x0, order, want):
    """The edge formulas give the first derivative from inside the support; the higher
    ones they do not compute come back NaN (not 0, which was silent and wrong), while
    those that are 0 below the edge's power stay 0."""
    g = f
    for _ in range(order):
        g = tg.grad(g)
    got = g(np.float64(x0))
    if want == "nan":
        assert np.isnan(got)
    else:
        assert got == pytest.approx(want, rel=1e-14, abs=0.0)


@pytest.mark.parametrize("n, dk", [(1e12, 1e6), (1e10, 1e5), (1e8, 100.0), (300.0, 3.0)])
def test_binomial_cdf_forward_mode_and_second_derivative_at_huge_n(n, dk):
    """The recorded density (forward mode, second order) in the kernel's Stirling form:
    tg.jvp of binom.cdf in p at n = 1e12 was 1e-4 off (the plain logs cancel); the
    second derivative -n pmf(k; n - 1, p) (k / p - (n - 1 - k) / (1 - p)) to 1e-9."""
    p = 0.3
    k = np.floor(n * p + dk)
    want = -n * ss.binom.pmf(k, n - 1, p)
    _, tangent = tg.jvp(lambda p: ts.binom.cdf(k, n, p), (np.float64(p),), (np.float64(1.0),))
    rel = 1e-12 if n < 1e9 else 1e-9  # (as in the test above: sd out at huge n)
    assert tangent == pytest.approx(want, rel=rel)
    second = tg.grad(tg.grad(lambda p: ts.binom.cdf(k, n, p)))(np.float64(p))
    assert second == pytest.approx(want * (k / p - (n - 1 - k) / (1 - p)), rel=1e-9)


def test_discrete_invalid_parameters_are_nan_at_every_k():
    """Parameters SciPy's argument check refuses give NaN whatever k is (a k outside
    the support gave 0 / -inf: poisson.pmf(2.5, -1) was 0); valid ones keep 0 / -inf
    outside the support; nbinom's log-mass at k = 0 and p = 1 is exactly 0."""
    cases = [
        ("binom", (10.0, np.nan)),
        ("binom", (-2.0, 0.3)),
        ("binom", (10.0, 1.5)),
        ("binom", (np.inf, 0.3)),
        ("binom", (10.0, 0.3)),
        ("poisson", (-1.0,)),
        ("poisson", (np.inf,)),
        ("poisson", (2.0,)),
        ("nbinom", (-2.0, 0.3)),
        ("nbinom", (3.0, 0.3)),
        ("bernoulli", (1.5,)),
        ("bernoulli", (0.3,)),
    ]
    k = np.array([-1.0, 0.0, 1.0, 2.5, 3.0, 12.0, np.inf])
    with np.errstate(all="ignore"):
        for dist, params in cases:
            for method in ("pmf", "logpmf"):
                got = getattr(getattr(ts, dist), method)(tg.tensor(k), *params).numpy()
                want = getattr(getattr(ss, dist), method)(k, *params)
                np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    assert ts.nbinom.logpmf(tg.tensor([0.0]), 10.0, 1.0).numpy()[0] == 0.0
    assert ts.nbinom.pmf(tg.tensor([0.0]), 10.0, 1.0).numpy()[0] == 1.0
