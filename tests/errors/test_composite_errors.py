"""Bad input to composite functions (several recorded ops in Python), against NumPy and
SciPy as oracles: where they raise, tapegrad raises an error of the same class that
names the function, and records nothing (a failed call leaves the tape as it was);
where they answer, tapegrad gives the same values.

Each case checks its input before its first recorded op; an error found after it
(NumPy's own, from a later op) would leave that op's nodes behind and name another
function.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy as tsc
import tapegrad.special as tsp
from tapegrad.layout import H_ARENA_TOP, H_NLINK, H_NNODES, H_NSHAPE, H_NSLOTS
from tapegrad.tape import current_tape

from ..helpers import central

Y = np.arange(12.0).reshape(3, 4) / 10 + 0.1
V = np.linspace(0.1, 1.0, 4)

# name -> (tapegrad call, oracle call, the name the error must start with); each call
# takes Y, V (tensors for tapegrad, NumPy arrays for the oracle) and parts of them
CASES = {
    "logsumexp list axis": (
        lambda y, v, p: tsp.logsumexp(y, axis=[1]),
        lambda y, v, p: scipy.special.logsumexp(y, axis=[1]),
        "logsumexp",
    ),
    "logsumexp axis out of range": (
        lambda y, v, p: tsp.logsumexp(y, axis=5),
        lambda y, v, p: scipy.special.logsumexp(y, axis=5),
        "logsumexp",
    ),
    "sum list axis": (
        lambda y, v, p: tnp.sum(y, axis=[0]),
        lambda y, v, p: np.sum(y, axis=[0]),
        "sum",
    ),
    "max list axis": (
        lambda y, v, p: tnp.max(y, axis=[0]),
        lambda y, v, p: np.max(y, axis=[0]),
        "max",
    ),
    "var list axis": (
        lambda y, v, p: tnp.var(y, axis=[0, 1]),
        lambda y, v, p: np.var(y, axis=[0, 1]),
        "var",
    ),
    "nansum list axis": (
        lambda y, v, p: tnp.nansum(y, axis=[0]),
        lambda y, v, p: np.nansum(y, axis=[0]),
        "nansum",
    ),
    "norm list axis": (
        lambda y, v, p: tnp.linalg.norm(y, axis=[0, 1]),
        lambda y, v, p: np.linalg.norm(y, axis=[0, 1]),
        "norm",
    ),
    "log_softmax list axis": (
        lambda y, v, p: tsp.log_softmax(y, axis=[1]),
        lambda y, v, p: scipy.special.log_softmax(y, axis=[1]),
        "log_softmax",
    ),
    "softmax list axis": (
        lambda y, v, p: tsp.softmax(y, axis=[1]),
        lambda y, v, p: scipy.special.softmax(y, axis=[1]),
        "softmax",
    ),
    "softmax axis out of range": (
        lambda y, v, p: tsp.softmax(y, axis=2),
        lambda y, v, p: scipy.special.softmax(y, axis=2),
        "softmax",
    ),
    "matrix norm, order 7": (
        lambda y, v, p: tnp.linalg.norm(y, ord=7),
        lambda y, v, p: np.linalg.norm(y, ord=7),
        "norm",
    ),
    "matrix norm, order 'x'": (
        lambda y, v, p: tnp.linalg.norm(y, ord="x"),
        lambda y, v, p: np.linalg.norm(y, ord="x"),
        "norm",
    ),
    "vector norm, order 'fro'": (
        lambda y, v, p: tnp.linalg.norm(v, ord="fro"),
        lambda y, v, p: np.linalg.norm(v, ord="fro"),
        "norm",
    ),
    "trapezoid, x too short": (
        lambda y, v, p: tnp.trapezoid(y, x=np.arange(3.0)),
        lambda y, v, p: np.trapezoid(y, x=np.arange(3.0)),
        "trapezoid",
    ),
    "trapezoid, 2-D x of another shape": (
        lambda y, v, p: tnp.trapezoid(y, x=np.ones((2, 4))),
        lambda y, v, p: np.trapezoid(y, x=np.ones((2, 4))),
        "trapezoid",
    ),
    "var, ddof a string": (
        lambda y, v, p: tnp.var(y, ddof="a"),
        lambda y, v, p: np.var(y, ddof="a"),
        "var",
    ),
    "std, ddof None": (
        lambda y, v, p: tnp.std(y, ddof=None),
        lambda y, v, p: np.std(y, ddof=None),
        "std",
    ),
    "average, weights summing to zero": (
        lambda y, v, p: tnp.average(y, axis=1, weights=np.array([1.0, -1.0, 2.0, -2.0])),
        lambda y, v, p: np.average(y, axis=1, weights=np.array([1.0, -1.0, 2.0, -2.0])),
        "average",
    ),
    "average, full weights summing to zero in a row": (
        lambda y, v, p: tnp.average(y, axis=0, weights=np.eye(3, 4) - np.eye(3, 4, 1)),
        lambda y, v, p: np.average(y, axis=0, weights=np.eye(3, 4) - np.eye(3, 4, 1)),
        "average",
    ),
    "cumulative_trapezoid, empty axis": (
        lambda y, v, p: tsc.integrate.cumulative_trapezoid(p["cols0"]),
        lambda y, v, p: scipy.integrate.cumulative_trapezoid(p["cols0"]),
        "cumulative_trapezoid",
    ),
    "cumulative_trapezoid, x of another length": (
        lambda y, v, p: tsc.integrate.cumulative_trapezoid(y, x=np.ones((3, 3))),
        lambda y, v, p: scipy.integrate.cumulative_trapezoid(y, x=np.ones((3, 3))),
        "cumulative_trapezoid",
    ),
    "cumulative_trapezoid, x of other dimensions": (
        lambda y, v, p: tsc.integrate.cumulative_trapezoid(y, x=np.ones((2, 3, 4))),
        lambda y, v, p: scipy.integrate.cumulative_trapezoid(y, x=np.ones((2, 3, 4))),
        "cumulative_trapezoid",
    ),
    "nanprod axis out of range": (
        lambda y, v, p: tnp.nanprod(y, axis=5),
        lambda y, v, p: np.nanprod(y, axis=5),
        "nanprod",
    ),
    "nanvar bool axis": (
        lambda y, v, p: tnp.nanvar(y, axis=True),
        lambda y, v, p: np.nanvar(y, axis=True),
        "nanvar",
    ),
    "nanstd, ddof None": (
        lambda y, v, p: tnp.nanstd(y, ddof=None),
        lambda y, v, p: np.nanstd(y, ddof=None),
        "nanstd",
    ),
    "nancumsum tuple axis": (
        lambda y, v, p: tnp.nancumsum(y, axis=(0,)),
        lambda y, v, p: np.nancumsum(y, axis=(0,)),
        "nancumsum",
    ),
    "nancumprod axis out of range": (
        lambda y, v, p: tnp.nancumprod(y, axis=-3),
        lambda y, v, p: np.nancumprod(y, axis=-3),
        "nancumprod",
    ),
    "nanmean, integer dtype": (
        lambda y, v, p: tnp.nanmean(y, dtype=int),
        lambda y, v, p: np.nanmean(y, dtype=int),
        "nanmean",
    ),
    "nanvar, integer dtype": (
        lambda y, v, p: tnp.nanvar(y, dtype=int),
        lambda y, v, p: np.nanvar(y, dtype=int),
        "nanvar",
    ),
    "nanmax of nothing": (
        lambda y, v, p: tnp.nanmax(p["rows0"]),
        lambda y, v, p: np.nanmax(p["rows0"]),
        "nanmax",
    ),
    "nanmin, dtype (not an argument of NumPy's)": (
        lambda y, v, p: tnp.nanmin(y, dtype=np.float32),
        lambda y, v, p: np.nanmin(y, dtype=np.float32),
        "",  # Python's own message for an unexpected keyword
    ),
    "sum, a dtype NumPy does not know": (
        lambda y, v, p: tnp.sum(y, dtype="q3"),
        lambda y, v, p: np.sum(y, dtype="q3"),
        "sum",
    ),
    "cov of 3-D data": (
        lambda y, v, p: tnp.cov(p["in3d"]),
        lambda y, v, p: np.cov(p["in3d"]),
        "cov",
    ),
    "cov, ddof not whole": (
        lambda y, v, p: tnp.cov(y, ddof=1.5),
        lambda y, v, p: np.cov(y, ddof=1.5),
        "cov",
    ),
    "cov, integer dtype": (
        lambda y, v, p: tnp.cov(y, dtype=int),
        lambda y, v, p: np.cov(y, dtype=int),
        "cov",
    ),
    "quantile, q NaN": (
        lambda y, v, p: tnp.quantile(y, np.nan),
        lambda y, v, p: np.quantile(y, np.nan),
        "quantile",
    ),
    "percentile, q 110": (
        lambda y, v, p: tnp.percentile(y, 110),
        lambda y, v, p: np.percentile(y, 110),
        "percentile",
    ),
    "quantile of nothing": (
        lambda y, v, p: tnp.quantile(p["rows0"], 0.5),
        lambda y, v, p: np.quantile(p["rows0"], 0.5),
        "quantile",
    ),
    "quantile of bools": (
        lambda y, v, p: tnp.quantile(p["bools"], 0.3),
        lambda y, v, p: np.quantile(p["bools"], 0.3),
        "quantile",
    ),
    "gradient along an axis of one point": (
        lambda y, v, p: tnp.gradient(p["column"]),
        lambda y, v, p: np.gradient(p["column"]),
        "gradient",
    ),
    "gradient, spacing a string": (
        lambda y, v, p: tnp.gradient(y, "a"),
        lambda y, v, p: np.gradient(y, "a"),
        "gradient",
    ),
    "correlate, mode 'x'": (
        lambda y, v, p: tnp.correlate(v, p["first3"], mode="x"),
        lambda y, v, p: np.correlate(v, p["first3"], mode="x"),
        "correlate",
    ),
    "convolve, mode 3": (
        lambda y, v, p: tnp.convolve(v, p["first3"], mode=3),
        lambda y, v, p: np.convolve(v, p["first3"], mode=3),
        "convolve",
    ),
    "vector norm of integers, order 'fro'": (
        lambda y, v, p: tnp.linalg.norm(p["ints"], ord="fro"),
        lambda y, v, p: np.linalg.norm(p["ints"], ord="fro"),
        "norm",
    ),
    "norm over three axes": (
        lambda y, v, p: tnp.linalg.norm(p["in3d"], axis=(0, 1, 2)),
        lambda y, v, p: np.linalg.norm(p["in3d"], axis=(0, 1, 2)),
        "norm",
    ),
    "cumulative_trapezoid, initial 1": (
        lambda y, v, p: tsc.integrate.cumulative_trapezoid(y, initial=1),
        lambda y, v, p: scipy.integrate.cumulative_trapezoid(y, initial=1),
        "cumulative_trapezoid",
    ),
    "logsumexp, b of another shape": (
        lambda y, v, p: tsp.logsumexp(v, b=np.ones(3)),
        lambda y, v, p: scipy.special.logsumexp(v, b=np.ones(3)),
        "logsumexp",
    ),
    "trapezoid, dx a string": (
        lambda y, v, p: tnp.trapezoid(y, dx="a"),
        lambda y, v, p: np.trapezoid(y, dx="a"),
        "trapezoid",
    ),
    "trapezoid, dx an array of another shape": (
        lambda y, v, p: tnp.trapezoid(y, dx=np.ones(2), axis=0),
        lambda y, v, p: np.trapezoid(y, dx=np.ones(2), axis=0),
        "trapezoid",
    ),
    "einsum, output letter no input has": (
        lambda y, v, p: tnp.einsum("ij->ijk", y),
        lambda y, v, p: np.einsum("ij->ijk", y),
        "einsum",
    ),
    "einsum, output letter twice": (
        lambda y, v, p: tnp.einsum("ij->jj", y),
        lambda y, v, p: np.einsum("ij->jj", y),
        "einsum",
    ),
    "einsum, broadcast dimensions dropped from the output": (
        lambda y, v, p: tnp.einsum("i...->", y),
        lambda y, v, p: np.einsum("i...->", y),
        "einsum",
    ),
    "solve, a vector b of another length": (
        lambda y, v, p: tnp.linalg.solve(p["square"], v),
        lambda y, v, p: np.linalg.solve(p["square"], v),
        "solve",
    ),
    "inv of a non-square integer matrix": (
        lambda y, v, p: tnp.linalg.inv(p["intmatrix"]),
        lambda y, v, p: np.linalg.inv(p["intmatrix"]),
        "inv",
    ),
    "multi_dot, sizes not aligned": (
        lambda y, v, p: tnp.linalg.multi_dot([y, p["yT"], y, y]),
        lambda y, v, p: np.linalg.multi_dot([y, p["yT"], y, y]),
        "multi_dot",
    ),
    "cross, batch shapes that do not broadcast": (
        lambda y, v, p: tnp.cross(p["rows2"], p["rows4"]),
        lambda y, v, p: np.cross(p["rows2"], p["rows4"]),
        "cross",
    ),
    "vander, N negative": (
        lambda y, v, p: tnp.vander(v, N=-1),
        lambda y, v, p: np.vander(v, N=-1),
        "vander",
    ),
    "interp, left an array": (
        lambda y, v, p: tnp.interp(v, p["first3"], p["first3"], left=np.ones(2)),
        lambda y, v, p: np.interp(v, p["first3"], p["first3"], left=np.ones(2)),
        "interp",
    ),
    "cho_factor of a vector": (
        lambda y, v, p: tsc.linalg.cho_factor(v),
        lambda y, v, p: scipy.linalg.cho_factor(v),
        "cho_factor",
    ),
    "cho_solve, b of another length": (
        lambda y, v, p: tsc.linalg.cho_solve((p["square"], False), v),
        lambda y, v, p: scipy.linalg.cho_solve((p["square"], False), v),
        "cho_solve",
    ),
    "cho_solve, lower not a bool": (
        lambda y, v, p: tsc.linalg.cho_solve((p["square"], "x"), p["first3"]),
        lambda y, v, p: scipy.linalg.cho_solve((p["square"], "x"), p["first3"]),
        "cho_solve",
    ),
    "lu_solve, b of another length": (
        lambda y, v, p: tsc.linalg.lu_solve((p["square"], np.arange(3, dtype=np.int32)), v),
        lambda y, v, p: scipy.linalg.lu_solve((p["square"], np.arange(3, dtype=np.int32)), v),
        "lu_solve",
    ),
    "lu_solve, trans a string": (
        lambda y, v, p: tsc.linalg.lu_solve(
            (p["square"], np.arange(3, dtype=np.int32)), p["first3"], trans="T"
        ),
        lambda y, v, p: scipy.linalg.lu_solve(
            (p["square"], np.arange(3, dtype=np.int32)), p["first3"], trans="T"
        ),
        "lu_solve",
    ),
    "lu_solve, too few pivots": (
        lambda y, v, p: tsc.linalg.lu_solve((p["square"], np.zeros(1, np.int32)), p["first3"]),
        lambda y, v, p: scipy.linalg.lu_solve((p["square"], np.zeros(1, np.int32)), p["first3"]),
        "lu_solve",
    ),
    "cov, m and y of other observation counts": (
        lambda y, v, p: tnp.cov(y, p["first3"]),
        lambda y, v, p: np.cov(y, p["first3"]),
        "cov",
    ),
    # errors that named another function (the one the composite called)
    "ptp axis out of range": (
        lambda y, v, p: tnp.ptp(y, axis=5),
        lambda y, v, p: np.ptp(y, axis=5),
        "ptp",
    ),
    "ptp of nothing": (
        lambda y, v, p: tnp.ptp(p["rows0"], axis=0),
        lambda y, v, p: np.ptp(p["rows0"], axis=0),
        "ptp",
    ),
    "amax axis out of range": (
        lambda y, v, p: tnp.amax(y, axis=5),
        lambda y, v, p: np.amax(y, axis=5),
        "amax",
    ),
    "amin of nothing": (
        lambda y, v, p: tnp.amin(p["rows0"]),
        lambda y, v, p: np.amin(p["rows0"]),
        "amin",
    ),
    "trace of a vector": (
        lambda y, v, p: tnp.trace(v),
        lambda y, v, p: np.trace(v),
        "trace",
    ),
    "inner, last axes of other lengths": (
        lambda y, v, p: tnp.inner(y, p["first3"]),
        lambda y, v, p: np.inner(y, p["first3"]),
        "inner",
    ),
    "dot, sizes not aligned": (
        lambda y, v, p: tnp.dot(y, p["first3"]),
        lambda y, v, p: np.dot(y, p["first3"]),
        "dot",
    ),
    "dot of 3-D arrays, sizes not aligned": (
        lambda y, v, p: tnp.dot(p["in3d"], p["in3d"]),
        lambda y, v, p: np.dot(p["in3d"], p["in3d"]),
        "dot",
    ),
    "vdot, other sizes": (
        lambda y, v, p: tnp.vdot(y, p["first3"]),
        lambda y, v, p: np.vdot(y, p["first3"]),
        "vdot",
    ),
    "lstsq of a vector": (
        lambda y, v, p: tnp.linalg.lstsq(v, v),
        lambda y, v, p: np.linalg.lstsq(v, v),
        "lstsq",
    ),
    "lstsq of an integer vector (checked before the cast)": (
        lambda y, v, p: tnp.linalg.lstsq(p["ints"], v),
        lambda y, v, p: np.linalg.lstsq(p["ints"], v),
        "lstsq",
    ),
    "lstsq of NaN (the SVD fails)": (
        lambda y, v, p: tnp.linalg.lstsq(p["nans"], p["first3"]),
        lambda y, v, p: np.linalg.lstsq(p["nans"], p["first3"]),
        "lstsq",
    ),
    "svd of an integer vector (checked before the cast)": (
        lambda y, v, p: tnp.linalg.svd(p["ints"]),
        lambda y, v, p: np.linalg.svd(p["ints"]),
        "svd",
    ),
    "scipy.linalg.cholesky of a vector": (
        lambda y, v, p: tsc.linalg.cholesky(v),
        lambda y, v, p: scipy.linalg.cholesky(v),
        "cholesky",
    ),
    # errors found after the first recorded op
    "ptp of bools": (
        lambda y, v, p: tnp.ptp(p["bools"]),
        lambda y, v, p: np.ptp(p["bools"]),
        "ptp",
    ),
    "einsum, an array as a subscript list": (
        lambda y, v, p: tnp.einsum(3, y),
        lambda y, v, p: np.einsum(3, y),
        "einsum",
    ),
    "einsum, a subscript out of range": (
        lambda y, v, p: tnp.einsum(y, [0, 60]),
        lambda y, v, p: np.einsum(y, [0, 60]),
        "einsum",
    ),
    "polyval, shapes that do not broadcast": (
        lambda y, v, p: tnp.polyval(y, p["first3"]),
        lambda y, v, p: np.polyval(y, p["first3"]),
        "polyval",
    ),
    "polyval, a 0-d p": (
        lambda y, v, p: tnp.polyval(p["scalar"], v),
        lambda y, v, p: np.polyval(p["scalar"], v),
        "polyval",
    ),
    # what NumPy and SciPy refuse around what they now accept
    "cumsum of a 0-d array, axis 1": (
        lambda y, v, p: tnp.cumsum(p["scalar"], axis=1),
        lambda y, v, p: np.cumsum(p["scalar"], axis=1),
        "cumsum",
    ),
    "nancumprod of a 0-d array, axis -2": (
        lambda y, v, p: tnp.nancumprod(p["scalar"], axis=-2),
        lambda y, v, p: np.nancumprod(p["scalar"], axis=-2),
        "nancumprod",
    ),
    "tril of a 0-d array": (
        lambda y, v, p: tnp.tril(p["scalar"]),
        lambda y, v, p: np.tril(p["scalar"]),
        "tril",
    ),
    "sort, kind 'x'": (
        lambda y, v, p: tnp.sort(y, kind="x"),
        lambda y, v, p: np.sort(y, kind="x"),
        "sort",
    ),
    "partition, kth out of range": (
        lambda y, v, p: tnp.partition(y, 9, axis=True),
        lambda y, v, p: np.partition(y, 9, axis=True),
        "partition",
    ),
    "interp, no points": (
        lambda y, v, p: tnp.interp(v, p["none"], p["none"]),
        lambda y, v, p: np.interp(v, p["none"], p["none"]),
        "interp",
    ),
    "convolve of a matrix": (
        lambda y, v, p: tnp.convolve(y, v),
        lambda y, v, p: np.convolve(y, v),
        "convolve",
    ),
    "cross of 4-vectors": (
        lambda y, v, p: tnp.cross(y, y),
        lambda y, v, p: np.cross(y, y),
        "cross",
    ),
    "norm, axis a word": (
        lambda y, v, p: tnp.linalg.norm(y, axis="x"),
        lambda y, v, p: np.linalg.norm(y, axis="x"),
        "norm",
    ),
    "norm, axis a tuple of a float": (
        lambda y, v, p: tnp.linalg.norm(y, axis=(1.0,)),
        lambda y, v, p: np.linalg.norm(y, axis=(1.0,)),
        "norm",
    ),
    "expm of a vector": (
        lambda y, v, p: tsc.linalg.expm(v),
        lambda y, v, p: scipy.linalg.expm(v),
        "expm",
    ),
    "multigammaln, d not whole": (
        lambda y, v, p: tsp.multigammaln(p["above2"], 1.5),
        lambda y, v, p: scipy.special.multigammaln(p["above2"], 1.5),
        "multigammaln",
    ),
    "multigammaln, d a whole float": (
        lambda y, v, p: tsp.multigammaln(p["above2"], 2.0),
        lambda y, v, p: scipy.special.multigammaln(p["above2"], 2.0),
        "multigammaln",
    ),
    "solve_ivp, t_eval off equal ends": (
        lambda y, v, p: tsc.integrate.solve_ivp(lambda t, x: -x, (1.0, 1.0), v, t_eval=[2.0]),
        lambda y, v, p: scipy.integrate.solve_ivp(lambda t, x: -x, (1.0, 1.0), v, t_eval=[2.0]),
        "solve_ivp",
    ),
    # bad input that was answered: a minimum of nothing (NumPy's maximum of nothing is 0)
    "norm of a matrix without rows, order -2": (
        lambda y, v, p: tnp.linalg.norm(p["rows0"], ord=-2),
        lambda y, v, p: np.linalg.norm(p["rows0"], ord=-2),
        "norm",
    ),
    "norm of a matrix without rows, order -inf": (
        lambda y, v, p: tnp.linalg.norm(p["rows0"], ord=-np.inf),
        lambda y, v, p: np.linalg.norm(p["rows0"], ord=-np.inf),
        "norm",
    ),
    "norm of a matrix without columns, order -1": (
        lambda y, v, p: tnp.linalg.norm(p["cols0"], ord=-1),
        lambda y, v, p: np.linalg.norm(p["cols0"], ord=-1),
        "norm",
    ),
    "norm of nothing, order -inf": (
        lambda y, v, p: tnp.linalg.norm(p["none"], ord=-np.inf),
        lambda y, v, p: np.linalg.norm(p["none"], ord=-np.inf),
        "norm",
    ),
    "softmax of nothing": (
        lambda y, v, p: tsp.softmax(p["none"]),
        lambda y, v, p: scipy.special.softmax(p["none"]),
        "softmax",
    ),
    "softmax along an empty axis": (
        lambda y, v, p: tsp.softmax(p["cols0"], axis=1),
        lambda y, v, p: scipy.special.softmax(p["cols0"], axis=1),
        "softmax",
    ),
    "log_softmax along an empty axis": (
        lambda y, v, p: tsp.log_softmax(p["cols0"], axis=-1),
        lambda y, v, p: scipy.special.log_softmax(p["cols0"], axis=-1),
        "log_softmax",
    ),
    "log_softmax of nothing": (
        lambda y, v, p: tsp.log_softmax(p["rows0"]),
        lambda y, v, p: scipy.special.log_softmax(p["rows0"]),
        "log_softmax",
    ),
}


def _sp(m: Any) -> Any:
    """SciPy, or tapegrad.scipy next to tapegrad.numpy."""
    return scipy if m is np else tsc


# where the oracle answers, tapegrad must give its values (the checks above must not
# refuse these); each call takes the module (tapegrad.numpy or numpy) and the array
ANSWERS = {
    "trapezoid, two points of x": (lambda m, y: m.trapezoid(y, x=np.array([0.0, 0.5])),),
    "trapezoid, 2-D x broadcast": (lambda m, y: m.trapezoid(y, x=np.arange(4.0)[None, :] ** 2),),
    "average, weights of mixed sign": (
        lambda m, y: m.average(y, axis=1, weights=np.array([1.0, -1.0, 2.0, 3.0])),
    ),
    "quantile list axis": (lambda m, y: m.quantile(y, 0.3, axis=[1, 0]),),
    "median list axis": (lambda m, y: m.median(y, axis=[1]),),
    "average list axis": (lambda m, y: m.average(y, axis=[0]),),
    # input NumPy and SciPy take that tapegrad refused
    "sort, axis True (an int to NumPy's sort)": (lambda m, y: m.sort(y[::-1, ::-1], axis=True),),
    "partition, axis True": (lambda m, y: m.partition(y[:, ::-1], 1, axis=True),),
    "cumsum of a 0-d array, axis 0": (lambda m, y: m.cumsum(y[1, 2], axis=0),),
    "cumprod of a 0-d array, axis -1": (lambda m, y: m.cumprod(y[1, 2], axis=-1),),
    "nancumsum of a 0-d array, axis 0": (lambda m, y: m.nancumsum(y[0, 3], axis=0),),
    "norm, axis 1.0 (numpy.linalg.norm's int(axis))": (lambda m, y: m.linalg.norm(y, axis=1.0),),
    "interp through one point": (
        lambda m, y: m.interp(np.array([0.0, 0.5, 2.0]), y[0, :1], y[1, :1], left=-1.0),
    ),
    "interp, bool fp": (lambda m, y: m.interp(y[0] * 2 + 0.35, y[1], y[2] > 1.05),),
    "convolve of a 0-d array": (lambda m, y: m.convolve(y[0, 1], y[1]),),
    "tril of a vector (its rows)": (lambda m, y: m.tril(y[0]),),
    "triu of a vector, k=1": (lambda m, y: m.triu(y[1], 1),),
    "tril of a vector, k=-2": (lambda m, y: m.tril(y[2], -2),),
    "expm of a 0-d array (1 x 1)": (lambda m, y: _sp(m).linalg.expm(y[0, 1]),),
    "expm of a one-element vector": (lambda m, y: _sp(m).linalg.expm(y[2, 1:2]),),
    "scipy.linalg.cholesky of a 0-d array (1 x 1)": (
        lambda m, y: _sp(m).linalg.cholesky(y[0, 1] + 1.0),
    ),
    "scipy.linalg.cholesky of a one-element vector, lower": (
        lambda m, y: _sp(m).linalg.cholesky(y[2, 1:2], lower=True),
    ),
    "multigammaln, d=0 (no terms)": (lambda m, y: _sp(m).special.multigammaln(y, 0),),
    "multigammaln, d=-1": (lambda m, y: _sp(m).special.multigammaln(y, -1),),
    # NumPy's maximum of nothing in a norm is 0 (initial=0)
    "norm of a matrix without rows, order inf": (lambda m, y: m.linalg.norm(y[:0], ord=np.inf),),
    "norm of a matrix without columns, order 1": (lambda m, y: m.linalg.norm(y[:, :0], ord=1),),
    "norm of a matrix without columns, order -inf": (
        lambda m, y: m.linalg.norm(y[:, :0], ord=-np.inf),
    ),
    "norm of nothing, order inf": (lambda m, y: m.linalg.norm(y[0, :0], ord=np.inf),),
}


def _kind(e: Exception) -> type:
    """The class an error must have to be the oracle's: NumPy's AxisError, else the
    Python class under NumPy's own (``_UFuncNoLoopError`` is a TypeError)."""
    if isinstance(e, np.exceptions.AxisError):
        return np.exceptions.AxisError
    return next(c for c in type(e).__mro__ if c.__module__ == "builtins")


def _counts() -> tuple:
    h = current_tape().h
    return (h[H_NNODES], h[H_NSLOTS], h[H_NLINK], h[H_NSHAPE], h[H_ARENA_TOP])


def _with_parts(make: Any, const: Any) -> tuple:
    """Y and V made by ``make``, and the parts some cases take (integer and bool ones by
    ``const``), made before the tape is looked at (slicing a tensor records an op)."""
    y, v = make(Y), make(V)
    parts = {"cols0": y[:, :0], "rows0": y[:0], "in3d": y.reshape(1, 3, 4), "first3": v[:3]}
    parts["column"] = y[:, :1]
    parts["bools"] = const(Y > 0.5)
    parts["ints"] = const(np.arange(4))
    parts["intmatrix"] = const(np.arange(6).reshape(2, 3))
    parts["square"] = make(np.eye(3) + Y[:, :3])
    parts["rows2"], parts["rows4"] = make(Y[:2, :3]), make(Y[:, 1:].T)
    parts["yT"] = make(Y.T)
    parts["none"], parts["scalar"] = v[:0], make(np.array(2.0))
    parts["nans"], parts["above2"] = make(np.full((3, 2), np.nan)), make(Y + 2.0)
    return y, v, parts


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_raises_as_the_oracle_and_records_nothing(name):
    ours, oracle, fn = CASES[name]
    with pytest.raises(Exception) as want:
        oracle(*_with_parts(np.array, np.array))
    y, v, parts = _with_parts(lambda a: tg.tensor(a, requires_grad=True) * 1.0, tg.tensor)
    tape = current_tape()
    before = _counts()
    with pytest.raises(_kind(want.value), match=f"^{fn}: " if fn else None):
        ours(y, v, parts)
    assert current_tape() is tape and _counts() == before  # nothing recorded


@pytest.mark.parametrize("name", list(ANSWERS))
def test_what_the_oracle_answers_is_answered(name):
    (call,) = ANSWERS[name]
    want = call(np, Y.copy())
    y = tg.tensor(Y, requires_grad=True) * 1.0  # a recorded result: the ops' fast paths
    np.testing.assert_allclose(call(tnp, y).numpy(), want, rtol=1e-12, atol=1e-12)
    # and its gradient, in float64 against central differences
    w = np.random.default_rng(2).standard_normal(np.shape(want))
    g = tg.grad(lambda a: tnp.sum(call(tnp, a) * w))(Y)
    eps, fd = 1e-6, np.zeros_like(Y)
    for i in np.ndindex(Y.shape):
        d = np.zeros_like(Y)
        d[i] = eps
        fd[i] = (np.sum(call(np, Y + d) * w) - np.sum(call(np, Y - d) * w)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


NAN = np.array([[np.nan, 1.0, np.nan], [np.nan, np.nan, np.nan]])
SOME_NAN = np.array([[1.5, np.nan, 2.5], [4.0, 1.0, np.nan]])

# values NumPy gives that tapegrad gave otherwise, silently: name -> (call on module and
# array, the array)
VALUES = {
    "sum, dtype=int: the elements truncated first": (lambda m, a: m.sum(a * 10, dtype=int), Y),
    "prod, dtype=int": (lambda m, a: m.prod(a * 10 + 1, dtype=int), Y),
    "mean, dtype=int (truncated)": (lambda m, a: m.mean(a * 10 + 0.5, dtype=int), Y),
    "cumsum, dtype=int": (lambda m, a: m.cumsum(a * 3, dtype=int), Y),
    "cumprod, dtype=int": (lambda m, a: m.cumprod(a * 3 + 1, axis=1, dtype=int), Y),
    "nanprod, dtype=int": (lambda m, a: m.nanprod(a * 10 + 1, dtype=int), Y),
    "nancumsum, dtype=int": (lambda m, a: m.nancumsum(a * 3, dtype=int), Y),
    "sum, float32 data added in float64": (
        lambda m, a: m.sum((a * 1e7 + 0.1).astype(np.float32), dtype=np.float64),
        Y,
    ),
    "nansum, dtype=float32": (lambda m, a: m.nansum(a, dtype=np.float32), NAN),
    "nanmax of NaN-only slices": (lambda m, a: m.nanmax(a, axis=0), NAN),
    "nanmin of NaN only": (lambda m, a: m.nanmin(a[1]), NAN),
    "nanmax of integers": (lambda m, a: m.nanmax(a.astype(np.int64) * 0 + 3), Y),
    "nanvar, ddof past the count": (lambda m, a: m.nanvar(a, axis=1, ddof=2), NAN),
    "nanstd, ddof past the count": (lambda m, a: m.nanstd(a, axis=0, ddof=1), NAN),
    "nansum, dtype=int: NaN replaced before the cast": (
        lambda m, a: m.nansum(a, axis=1, dtype=int),
        SOME_NAN,
    ),
    "nanprod, dtype=int, with NaN": (lambda m, a: m.nanprod(a, axis=1, dtype=int), SOME_NAN),
    "nancumsum, dtype=int, with NaN": (lambda m, a: m.nancumsum(a, axis=1, dtype=int), SOME_NAN),
    "nancumprod, dtype=int, with NaN": (
        lambda m, a: m.nancumprod(a, axis=1, dtype=int),
        SOME_NAN,
    ),
    "nanmean, dtype=float32": (lambda m, a: m.nanmean(a, axis=1, dtype=np.float32), SOME_NAN),
    "nanvar of integers past the count (inf: NumPy's var)": (
        lambda m, a: m.nanvar((a * 10).astype(np.int64), axis=1, ddof=4),
        Y,
    ),
    "var of float64 data, dtype=float32 (no cancellation)": (
        lambda m, a: m.var(a + 1e8, dtype=np.float32),
        Y,
    ),
    "std along an axis, dtype=float32": (lambda m, a: m.std(a + 1e8, axis=0, dtype=np.float32), Y),
    "gradient, a 0-d array spacing": (lambda m, a: m.gradient(a[0], np.array(0.5)), Y),
    "cov of one row, rowvar=False": (lambda m, a: m.cov(a[:1], rowvar=False), Y),
    "cov without observations": (lambda m, a: m.cov(a[:, :0]), Y),
    "cov of no variables": (lambda m, a: m.cov(a[:0]), Y),
    "median of nothing": (lambda m, a: m.median(a[:0]), Y),
    "median of bools": (lambda m, a: m.median(a[:, :2] > 0.5, axis=1), Y),
    "median of empty rows": (lambda m, a: m.median(a[:, :0], axis=1), Y),
    "correlate, mode 0 (NumPy's 'valid')": (lambda m, a: m.correlate(a[0], a[1, :2], mode=0), Y),
    "convolve, mode 1 (NumPy's 'same')": (lambda m, a: m.convolve(a[0], a[1, :3], mode=1), Y),
    "einsum, ellipsis moved in the output": (lambda m, a: m.einsum("...j->j...", a), Y),
    "trapezoid, dx an array": (lambda m, a: m.trapezoid(a, dx=np.arange(1.0, 5.0), axis=0), Y),
    "norm of a matrix without rows, order 2 (a constant: nothing to differentiate)": (
        lambda m, a: m.linalg.norm(a[:0], ord=2),
        Y,
    ),
    "diff of bools (not_equal)": (lambda m, a: m.diff(a > 0.5, axis=1), Y),
    "diff of bools, twice": (lambda m, a: m.diff(a > 0.5, n=2, axis=0), Y),
    "interp of float32 data, in float64": (
        lambda m, a: m.interp(
            a[0].astype(np.float32) * 2 + 0.35, a[1].astype(np.float32), a[2].astype(np.float32)
        ),
        Y,
    ),
    "polyval at infinity (NaN: NumPy's 0 * x first)": (lambda m, a: m.polyval(a[0], a[1] / 0), Y),
    "polyval of no coefficients": (lambda m, a: m.polyval(a[0, :0], a[1]), Y),
    "softmax along the non-empty axis of an empty array": (
        lambda m, a: _sp(m).special.softmax(a[:, :0], axis=0),
        Y,
    ),
}


@pytest.mark.parametrize("name", list(VALUES))
def test_values_as_numpy_gives_them(name):
    call, a = VALUES[name]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy warns on NaN-only slices
        want = np.asarray(call(np, a.copy()))
    got = call(tnp, tg.tensor(a, requires_grad=True) * 1.0).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
    else:  # (NaN and inf where NumPy has them; numbers to the dtype's rounding)
        rtol = 1e-6 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


@pytest.mark.parametrize("shapes", [((2,), (2,)), ((4, 2), (3,)), ((3,), (2, 2)), ((4, 3), (2,))])
def test_cross_takes_2_vectors_as_numpy_2_with_its_warning(shapes):
    """NumPy 2 deprecates 2-vectors in cross (it warns) but still computes: the z
    component of two of them, a 3-vector with a 3-vector. tapegrad gives the same, with
    the same warning, and differentiates it (central differences in float64)."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(shapes[0]), rng.standard_normal(shapes[1])
    with pytest.warns(DeprecationWarning, match="2-dimensional vectors are deprecated"):
        want = np.cross(a, b)
    w = rng.standard_normal(np.shape(want))
    with pytest.warns(DeprecationWarning, match="^cross: Arrays of 2-dimensional vectors"):
        got = tnp.cross(tg.tensor(a), tg.tensor(b))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ga, gb = tg.grad(lambda x, y: tnp.sum(tnp.cross(x, y) * w), argnums=(0, 1))(a, b)
        np.testing.assert_allclose(ga, central(lambda x: np.sum(np.cross(x, b) * w), a))
        np.testing.assert_allclose(gb, central(lambda y: np.sum(np.cross(a, y) * w), b))


def test_nan_reductions_differentiate_where_numbers_are():
    """NaN-only slices give NaN and no gradient; the others differentiate as their
    numbers' reduction (central differences in float64)."""
    a = np.array([[np.nan, 1.0, 0.5], [2.0, np.nan, 3.0], [np.nan, np.nan, 4.0]])
    w = np.array([1.0, 2.0, -1.0])
    for f in (tnp.nanmax, tnp.nanmin, tnp.nansum, tnp.nanmean, tnp.nanvar, tnp.nanstd):
        g = tg.grad(lambda t, f=f: tnp.sum(f(t, axis=1) * w))(a)
        want = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            if np.isnan(a[i]):
                continue
            d = np.zeros_like(a)
            d[i] = 1e-6
            up = getattr(np, f.__name__)(a + d, axis=1)
            down = getattr(np, f.__name__)(a - d, axis=1)
            want[i] = np.sum((up - down) * w) / 2e-6
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8, err_msg=f.__name__)


def test_out_is_refused_by_name():
    """``out=`` (NumPy writes into it) is refused, never ignored: tensors are immutable."""
    buf = np.zeros(4)
    y = tg.tensor(Y, requires_grad=True) * 1.0
    for f in (tnp.nansum, tnp.nanmean, tnp.nanmax, tnp.nanprod, tnp.nanvar):
        with pytest.raises(TypeError, match=f"^{f.__name__}: out= is not supported"):
            f(y, axis=0, out=buf)
    assert not buf.any()


def test_var_refuses_an_integer_dtype():
    """NumPy's integer variance is integer arithmetic throughout; a float one cast at
    the end gives another number, so tapegrad refuses it."""
    with pytest.raises(TypeError, match=r"^var: dtype must be a float dtype"):
        tnp.var(tg.tensor(Y), dtype=int)


def test_an_integer_constant_indexed_to_a_scalar_takes_part_in_ops():
    c = tg.tensor(np.array([3, 4]))
    b = tg.tensor(np.array([True, False]))
    x = tg.tensor(2.0, requires_grad=True)
    y = c[0] * x + b[0] * x * x + tnp.polyval(c, x)
    y.backward()
    assert float(y) == 3 * 2.0 + 4.0 + (3 * 2.0 + 4)
    assert float(x.grad) == 3 + 2 * 2.0 + 3


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_det_of_a_matrix_with_nan_or_inf_is_numpys(bad, capfd):
    """numba's LAPACK wrapper raises for such a matrix, and an exception cannot leave a
    kernel: it was printed ("Exception ignored") and det came back 0. Now an LU of
    tapegrad's own (LAPACK's pivoting) gives NumPy's numbers here; nothing is printed.
    (Where the order of LAPACK's blocked operations decides between inf and NaN, the
    two can differ: NaN here for NumPy's inf; never a finite number.)"""
    m = np.eye(3) + Y[:, :3]
    m[1, 2] = bad
    for a in (m, np.array([[bad, 1.0], [0.0, 2.0]])):
        with np.errstate(all="ignore"):
            want_det, (want_sign, want_log) = np.linalg.det(a), np.linalg.slogdet(a)
        for batch in ((), (2,)):
            stack = np.broadcast_to(a, (*batch, *a.shape))
            det = tnp.linalg.det(tg.tensor(stack)).numpy()
            sign, logdet = (r.numpy() for r in tnp.linalg.slogdet(tg.tensor(stack)))
            assert det.shape == batch
            np.testing.assert_array_equal(det, np.broadcast_to(want_det, batch))
            np.testing.assert_array_equal(logdet, np.broadcast_to(want_log, batch))
            if not np.isnan(want_log):
                np.testing.assert_array_equal(sign, np.broadcast_to(want_sign, batch))
    good = np.eye(3) + Y[:, :3]  # and a finite matrix is as before
    np.testing.assert_allclose(float(tnp.linalg.det(tg.tensor(good))), np.linalg.det(good))
    assert "Exception ignored" not in capfd.readouterr().err


def test_quantile_of_a_tensor_q():
    """q may be a tensor (its values are read: quantiles are not differentiated in q);
    one that requires grad is refused rather than left silently."""
    a = tg.tensor(np.arange(5.0), requires_grad=True)
    q = tg.tensor(np.array([0.5, 0.2]))
    np.testing.assert_allclose(tnp.quantile(a, q).numpy(), np.quantile(np.arange(5.0), [0.5, 0.2]))
    np.testing.assert_allclose(float(tnp.percentile(a, q[0] * 100)), 2.0)
    with pytest.raises(TypeError, match=r"^quantile: q requires grad"):
        tnp.quantile(a, tg.tensor(0.5, requires_grad=True))
    with pytest.raises(TypeError, match=r"^percentile: q requires grad"):
        tnp.percentile(a, tg.tensor(50.0, requires_grad=True))


def test_nan_reductions_replay_when_the_nan_move():
    """Which values are NaN is found by recorded ops, not by reading them: a tg.compile
    program replays as the NaN move (no guard), with eager's values and gradients."""

    def loss(a):
        return (
            tnp.sum(tnp.nanmax(a, axis=1))
            + tnp.sum(tnp.nanmin(a, axis=0))
            + tnp.sum(tnp.nanmean(a, axis=1))
            + tnp.sum(tnp.nansum(a * a, axis=0))
        )

    step = tg.compile(loss, argnums=0)
    rng = np.random.default_rng(3)
    for k in range(3):
        a = rng.standard_normal((4, 5))
        a[k, k + 1] = a[k + 1, 0] = np.nan  # (never a whole row or column)
        value, grad = step.value_and_grad(a)
        want, want_grad = tg.value_and_grad(loss)(a)
        np.testing.assert_allclose(value, want, rtol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    assert step.stats["captures"] == 1 and step.stats["guard_failures"] == 0


def test_softmax_of_a_list_of_tensors_with_an_axis():
    """The softmax-named axis check looks at arrays only: a list of tensors goes on to
    log_softmax, which stacks it (reading it for its dimensions would leave the graph)."""
    a, b = tg.tensor(1.0, requires_grad=True), tg.tensor(2.0, requires_grad=True)
    p = tsp.softmax([a, b], axis=0)
    np.testing.assert_allclose(p.numpy(), scipy.special.softmax([1.0, 2.0]), rtol=1e-12)
    p[0].backward()
    s = scipy.special.softmax([1.0, 2.0])
    np.testing.assert_allclose([float(a.grad), float(b.grad)], [s[0] * s[1], -s[0] * s[1]])


def test_solve_triangular_refuses_an_unknown_trans_before_recording():
    """SciPy 1.17 reads any trans it does not know as 'T'; tapegrad refuses it (a
    transposed solve nobody asked for is a plausible wrong answer), recording nothing."""
    a = tg.tensor(np.triu(np.eye(3) + Y[:, :3]), requires_grad=True) * 1.0
    b = tg.tensor(V[:3])
    before = _counts()
    for trans in ("x", 3, "t"):
        with pytest.raises(ValueError, match=r"^solve_triangular: incorrect trans value"):
            tsc.linalg.solve_triangular(a, b, trans=trans)
    assert _counts() == before
