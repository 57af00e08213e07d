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

from .continuous import (
    beta,
    cauchy,
    expon,
    gamma,
    laplace,
    logistic,
    lognorm,
    norm,
    t,
    uniform,
    vonmises,
)
from .discrete import bernoulli, binom, nbinom, poisson
from .distribution import Distribution as Distribution
from .multivariate import dirichlet, multivariate_normal

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
