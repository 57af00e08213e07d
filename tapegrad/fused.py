"""Fused runs of scalar nodes in replay plans.

A replay plan (``tapegrad.replay``) makes one kernel call per node. Where consecutive
plan entries are float64 unary or binary rows on one-element values (a loop over
Python floats, an ODE's right-hand side on a few states; one element picked from an
array by a constant position, too), :func:`fuse_forward` and
:func:`fuse_backward` turn each run of them into one entry that calls an executor
(``dispatch.fused_forward``, ``dispatch.fused_backward``), which evaluates the run's
formulas through the generated family switch. The result is bitwise the plan's.

The executors are compiled once for all programs. On a cold cache they are left to the
background compiler (``tapegrad.tiers``): plans made before they are ready stay
unfused, the ones made after are fused.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from . import dispatch, tiers
from ._generated import SCALAR_BWD_OPS, SCALAR_FWD_OPS
from ._jit import DISABLE_JIT
from .layout import (
    F64,
    N_LINK,
    N_NIN,
    N_NIP,
    N_NOUT,
    N_OP,
    N_SIG,
    S_DTYPE,
    S_SIZE,
)
from .tape import Tape

# The shortest run worth an executor call: one node is one kernel call either way.
MIN_RUN = 2

_state: dict = {"addresses": None, "next_look": 0.0}
_lock = threading.Lock()
LOOK_EVERY = 1.0  # seconds between looks for the executors in a cold cache


def executors() -> tuple[int, int] | None:
    """The fused-run executors' addresses (forward, backward), or None while they are
    not compiled: under ``NUMBA_DISABLE_JIT``, or on a cold cache, where the background
    compiler is asked for them and this looks again at most once a second."""
    found = _state["addresses"]
    if found is not None or DISABLE_JIT:
        return found
    now = time.monotonic()
    if now < _state["next_look"]:
        return None
    with _lock:
        if _state["addresses"] is None:
            cold = tiers.enabled() and not all(
                tiers.function_cached(f) for f in (dispatch.fused_forward, dispatch.fused_backward)
            )
            if cold:
                _state["next_look"] = now + LOOK_EVERY
                tiers.request(["fused"])
                return None
            _state["addresses"] = dispatch.run_executors()
    return _state["addresses"]


def _scalar_nodes(tape: Tape, ids: np.ndarray, codes: frozenset[int]) -> np.ndarray:
    """Which nodes ``ids`` a fused run may hold: rows in ``codes`` computing in float64
    with one output, every input and the output one float64 element; and gathers of
    one float64 element by a constant position (``dispatch.GATHER``: one input, one int
    parameter)."""
    N, S, L = tape.arrays["node"], tape.arrays["slot"], tape.arrays["link"]
    op = N[N_OP, ids]
    nin = N[N_NIN, ids]
    at = N[N_LINK, ids]
    one = (N[N_SIG, ids] == F64) & (N[N_NOUT, ids] == 1)
    gather = one & (op == dispatch.GATHER) & (nin == 1) & (N[N_NIP, ids] == 1)
    ok = one & ((nin == 1) | (nin == 2)) & np.isin(op, np.fromiter(codes, np.int64))
    for i in range(3):  # inputs, then the output (at most 2 + 1 links)
        use = (ok | gather) & (i <= nin)
        s = L[0, np.where(use, at + i, 0)]
        f64 = S[S_DTYPE, s] == F64
        ok &= ~use | (f64 & (S[S_SIZE, s] == 1))
        gather &= ~use | (f64 & ((S[S_SIZE, s] == 1) | (i == 0)))  # any size gathered from
    return ok | gather


def _mark(plan: np.ndarray, ok: np.ndarray, addr: int, count_row: int, addr_row: int) -> None:
    """Make each run of ``MIN_RUN`` or more consecutive ``ok`` entries one entry."""
    n = ok.size
    i = 0
    while i < n:
        if not ok[i]:
            i += 1
            continue
        j = i
        while j < n and ok[j]:
            j += 1
        if j - i >= MIN_RUN:
            plan[addr_row, i] = addr
            plan[count_row, i] = j - i
            plan[count_row, i + 1 : j] = 0
        i = j


def fuse_forward(tape: Tape, fwd: np.ndarray) -> np.ndarray:
    """The forward plan ``fwd`` (``replay.forward_plan``) with its runs of scalar nodes
    fused, in place; returned."""
    found = executors()
    if found is not None and fwd.shape[1] >= MIN_RUN:
        ok = _scalar_nodes(tape, np.arange(fwd.shape[1]), SCALAR_FWD_OPS)
        _mark(fwd, ok, found[0], 1, 0)
    return fwd


def fuse_backward(tape: Tape, bwd: np.ndarray) -> np.ndarray:
    """The backward plan ``bwd`` (``replay.backward_plan``) with its runs of scalar
    nodes fused, in place; returned."""
    found = executors()
    if found is not None and bwd.shape[1] >= MIN_RUN:
        ok = _scalar_nodes(tape, bwd[0], SCALAR_BWD_OPS)
        _mark(bwd, ok, found[1], 2, 1)
    return bwd


__all__ = ["executors", "fuse_backward", "fuse_forward"]
