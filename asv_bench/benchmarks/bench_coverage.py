"""Eager cost of linear algebra and array functions against the NumPy / SciPy call that
computes the same values: (64, 64) linear algebra, 1e5-element array functions. Target:
within 2x. The forward is recorded on a tensor that requires grad (what a model pays).

``python -m asv_bench.benchmarks.bench_coverage`` prints the medians of interleaved
rounds and their ratios.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import scipy.linalg as sla

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.linalg as tsla

_RNG = np.random.default_rng(0)
_A = _RNG.standard_normal((64, 64))
_SPD = _A @ _A.T + 64 * np.eye(64)
_SYM = _A + _A.T
_REAL = np.triu(_A) + np.diag(np.arange(64.0) * 4)  # real eigenvalues
_TALL = _RNG.standard_normal((96, 64))
_B = _RNG.standard_normal((64, 8))
_V = _RNG.standard_normal(100_000)
_LU = sla.lu_factor(_SPD)
_CHO = sla.cho_factor(_SPD)

# name: (tapegrad call on the tensors, NumPy/SciPy call on the arrays, the arrays)
WORKLOADS: dict[str, tuple[Callable, Callable, tuple]] = {
    "eigh": (tnp.linalg.eigh, np.linalg.eigh, (_SYM,)),
    "eigvalsh": (tnp.linalg.eigvalsh, np.linalg.eigvalsh, (_SYM,)),
    "svd": (
        lambda a: tnp.linalg.svd(a, full_matrices=False),
        lambda a: np.linalg.svd(a, full_matrices=False),
        (_A,),
    ),
    "svdvals": (tnp.linalg.svdvals, np.linalg.svdvals, (_A,)),
    "qr": (tnp.linalg.qr, np.linalg.qr, (_TALL,)),
    "eig": (tnp.linalg.eig, np.linalg.eig, (_REAL,)),
    "pinv": (tnp.linalg.pinv, np.linalg.pinv, (_TALL,)),
    "lstsq": (tnp.linalg.lstsq, np.linalg.lstsq, (_TALL, _RNG.standard_normal((96, 8)))),
    "matrix_power 5": (
        lambda a: tnp.linalg.matrix_power(a, 5),
        lambda a: np.linalg.matrix_power(a, 5),
        (_A,),
    ),
    "multi_dot": (
        lambda a, b: tnp.linalg.multi_dot([a, a, b]),
        lambda a, b: np.linalg.multi_dot([a, a, b]),
        (_A, _B),
    ),
    "norm nuc": (
        lambda a: tnp.linalg.norm(a, "nuc"),
        lambda a: np.linalg.norm(a, "nuc"),
        (_A,),
    ),
    "expm": (tsla.expm, sla.expm, (_A / 8,)),
    "solve_triangular": (
        lambda a, b: tsla.solve_triangular(a, b, lower=True),
        lambda a, b: sla.solve_triangular(a, b, lower=True),
        (_SPD, _B),
    ),
    "lu_factor": (tsla.lu_factor, sla.lu_factor, (_SPD,)),
    "lu_solve": (
        lambda lu, b: tsla.lu_solve((lu, _LU[1]), b),
        lambda lu, b: sla.lu_solve((lu, _LU[1]), b),
        (_LU[0], _B),
    ),
    "cho_factor": (tsla.cho_factor, sla.cho_factor, (_SPD,)),
    "cho_solve": (
        lambda c, b: tsla.cho_solve((c, False), b),
        lambda c, b: sla.cho_solve((c, False), b),
        (np.triu(_CHO[0]), _B),
    ),
    "sort 1e5": (tnp.sort, np.sort, (_V,)),
    "median 1e5": (tnp.median, np.median, (_V,)),
    "diff 1e5": (tnp.diff, np.diff, (_V,)),
    "sinc 1e5": (tnp.sinc, np.sinc, (_V,)),
    "nansum 1e5": (tnp.nansum, np.nansum, (_V,)),
    "trapezoid 1e5": (tnp.trapezoid, np.trapezoid, (_V,)),
    "interp 1e5": (
        lambda x: tnp.interp(x, np.linspace(-5, 5, 100), np.sin(np.linspace(-5, 5, 100))),
        lambda x: np.interp(x, np.linspace(-5, 5, 100), np.sin(np.linspace(-5, 5, 100))),
        (_V,),
    ),
    "convolve 1e5 with 5": (
        lambda x: tnp.convolve(x, np.ones(5) / 5, "same"),
        lambda x: np.convolve(x, np.ones(5) / 5, "same"),
        (_V,),
    ),
    "cross 1e5x3": (
        lambda a, b: tnp.cross(a, b),
        lambda a, b: np.cross(a, b),
        (_V[:99999].reshape(-1, 3), _V[1:].reshape(-1, 3)),
    ),
}


def _tensors(arrays: tuple) -> list:
    return [tg.tensor(a, requires_grad=True) for a in arrays]


def _release(out: object) -> None:
    """Backward from the float results (untimed): frees the graph, as a training step
    does, so that every timed forward records into a rewound tape."""
    parts = out if isinstance(out, tuple | list) else (out,)
    loss = None
    for p in parts:
        if isinstance(p, tg.Tensor) and p.requires_grad:
            term = tnp.sum(p)
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()


def _forward_seconds(f: Callable, arrays: tuple) -> float:
    tensors = _tensors(arrays)
    t0 = time.perf_counter()
    out = f(*tensors)
    seconds = time.perf_counter() - t0
    _release(out)
    return seconds


def _numpy_seconds(ref: Callable, arrays: tuple) -> float:
    t0 = time.perf_counter()
    ref(*arrays)
    return time.perf_counter() - t0


class CoverageEager:
    params = list(WORKLOADS)
    param_names = ["function"]

    def setup(self, name):
        self.f, self.ref, self.arrays = WORKLOADS[name]
        _release(self.f(*_tensors(self.arrays)))  # compile / load kernels

    def time_tapegrad(self, name):
        _release(self.f(*_tensors(self.arrays)))

    def time_numpy(self, name):
        self.ref(*self.arrays)

    def track_ratio(self, name):
        return ratio(name, rounds=15)


def medians(name: str, rounds: int = 21) -> tuple[float, float]:
    """Median seconds of one recorded forward (tensors that require grad; the graph
    freed, untimed, after each) and of the NumPy call, over interleaved rounds."""
    f, ref, arrays = WORKLOADS[name]
    _release(f(*_tensors(arrays)))
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(_forward_seconds(f, arrays))
        theirs.append(_numpy_seconds(ref, arrays))
    return statistics.median(ours), statistics.median(theirs)


def ratio(name: str, rounds: int = 21) -> float:
    """tapegrad's median time over NumPy's."""
    a, b = medians(name, rounds)
    return a / b


def main(argv: list[str]) -> None:
    rounds = int(argv[0]) if argv else 21
    print(f"{'function':<22} {'tapegrad us':>12} {'NumPy us':>10} {'ratio':>6}")
    for name in WORKLOADS:
        a, b = medians(name, rounds)
        print(f"{name:<22} {a * 1e6:>12.1f} {b * 1e6:>10.1f} {a / b:>6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
