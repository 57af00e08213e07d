"""Small helpers shared by the test modules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tapegrad as tg

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, **env: str) -> str:
    """What ``code`` (dedented) prints, run in a new Python process from the repository
    root with ``env`` added to the environment; fails the test if the process does."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def numeric_grad(f: Callable, x, eps: float = 1e-6) -> np.ndarray:
    """Central differences of scalar ``f`` (evaluated without grad) at ``x``."""
    x = np.asarray(x, dtype=np.float64)

    def value(v):
        with tg.no_grad():
            out = f(tg.tensor(v) if v.ndim else float(v))
        return float(out.item() if isinstance(out, tg.Tensor) else out)

    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        g[idx] = (value(hi) - value(lo)) / (2 * eps)
    return g


def central(fn: Callable, x, eps: float = 1e-6) -> np.ndarray:
    """Central differences of scalar ``fn`` at ``x``, on plain arrays (an oracle's
    function: NumPy's, SciPy's)."""
    x = np.asarray(x, float)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros(x.shape)
        e[i] = eps
        out[i] = (fn(x + e) - fn(x - e)) / (2 * eps)
    return out


def central_jacobian(fn: Callable, x, eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``fn`` (array -> array) at ``x``: shape
    ``fn(x).shape + x.shape``."""
    x = np.asarray(x, float)
    out = None
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        col = (np.asarray(fn(x + d)) - np.asarray(fn(x - d))) / (2 * eps)
        if out is None:
            out = np.zeros(col.shape + x.shape)
        out[(..., *i)] = col
    return out


def run_in_threads(work: Callable, n: int = 4) -> None:
    """``work(k)`` in ``n`` threads at once, ``k = 0 .. n-1``; waits for all."""
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def in_new_thread(body: Callable, *args) -> None:
    """``body(*args)`` in a thread of its own (which starts from a new, small tape);
    its exception is re-raised in the caller's thread."""
    errors = []

    def run():
        try:
            body(*args)
        except BaseException as e:  # re-raised in the caller's thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]
