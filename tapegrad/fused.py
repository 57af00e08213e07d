"""Fused runs of scalar nodes in replay plans.

A replay plan (``tapegrad.replay``) makes one kernel call per node. Where consecutive
plan entries are float64 unary or binary rows on one-element values (a loop over
Python floats, an ODE's right-hand side on a few states; one element picked from an
array by a constant position, too), :func:`fuse_forward` and
:func:`fuse_backward` turn each run of them into one entry that calls an executor
(``dispatch.fused_forward``, ``dispatch.fused_backward``), which evaluates the run's
formulas through the generated family switch. Each run's instructions (operand
addresses, gradient offsets, what the row's kernel would read from the node's mask) are
written once, here, into the buffer that holds the plan. The result is bitwise the
plan's.

The executors are compiled once for all programs. On a cold cache they are left to the
background compiler (``tapegrad.tiers``): plans made before they are ready run unfused
until they are, then ``program.Program.fuse_plans`` fuses them.
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
    FRESH_SHIFT,
    N_IP,
    N_LINK,
    N_MASK,
    N_NIN,
    N_NIP,
    N_NOUT,
    N_OP,
    N_SIG,
    S_ADDR,
    S_DTYPE,
    S_GRAD,
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
            tiers.renew_hot()  # (the kernels fused runs serve are not run in loops now)
    return _state["addresses"]


def _scalar_nodes(tape: Tape, ids: np.ndarray, codes: frozenset[int]) -> tuple[np.ndarray, ...]:
    """Which nodes ``ids`` a fused run may hold: rows in ``codes`` computing in float64
    with one output, every input and the output one float64 element; and gathers of
    one float64 element by a constant position (``dispatch.GATHER``: one input, one int
    parameter). Returns the mask of those, and of the gathers among them."""
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
    return ok | gather, gather


def _runs(ok: np.ndarray) -> list[tuple[int, int]]:
    """The ``[start, stop)`` ranges of ``MIN_RUN`` or more consecutive ``ok`` entries."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], ok.astype(np.int8), [0]))))
    return [(int(i), int(j)) for i, j in zip(edges[::2], edges[1::2]) if j - i >= MIN_RUN]


def _operands(tape: Tape, ids: np.ndarray, gather: np.ndarray) -> tuple[np.ndarray, ...]:
    """Op code (``dispatch.COPY`` for a gather), the slots of x, y (x's for a unary
    node) and the output, and the byte offset into x a gather reads, of nodes ``ids``."""
    N, L = tape.arrays["node"], tape.arrays["link"]
    at = N[N_LINK, ids]
    binary = N[N_NIN, ids] == 2
    sx = L[0, at]
    sy = np.where(binary, L[0, np.where(binary, at + 1, at)], sx)
    so = L[0, np.where(binary, at + 2, at + 1)]
    pos = np.zeros(ids.size, np.int64)
    if gather.any():  # a gather's one int parameter: the flat position it picks
        pos[gather] = tape.arrays["ip"][0, N[N_IP, ids[gather]]] * 8
    op = np.where(gather, dispatch.COPY, N[N_OP, ids])
    return op, sx, sy, so, pos


def _place(plan: np.ndarray, runs: list, block: np.ndarray, rows: tuple, executor: int):
    """``plan`` with ``runs`` marked, as a view of one buffer that also holds their
    instructions ``block`` (so whoever holds the plan, a program or an ODE solve, holds
    them). ``rows``: the plan's rows for the executor, the run's length and the address
    of its first instruction."""
    addr_row, count_row, code_row = rows
    buf = np.empty(plan.size + block.size, np.int64)
    view = buf[: plan.size].reshape(plan.shape)
    view[...] = plan
    buf[plan.size :] = block.ravel()
    base = buf[plan.size :].ctypes.data
    width = block.shape[1]
    row = 0
    for i, j in runs:
        view[addr_row, i] = executor
        view[count_row, i] = j - i
        view[count_row, i + 1 : j] = 0
        view[code_row, i] = base + 8 * width * row
        row += j - i
    return view


def fuse_forward(tape: Tape, fwd: np.ndarray) -> np.ndarray:
    """The forward plan ``fwd`` (``replay.forward_plan``) with its runs of scalar nodes
    fused: a new plan that holds the runs' instructions (or ``fwd``, with none)."""
    found = executors()
    if found is None:
        return fwd
    ok, gather = _scalar_nodes(tape, np.arange(fwd.shape[1]), SCALAR_FWD_OPS)
    runs = _runs(ok)
    if not runs:
        return fwd
    ids = np.concatenate([np.arange(i, j) for i, j in runs])
    op, sx, sy, so, pos = _operands(tape, ids, gather[ids])
    addr = tape.arrays["slot"][S_ADDR]
    d = dispatch
    block = np.empty((ids.size, d.F_WIDTH), np.int64)
    block[:, d.F_OP] = op
    block[:, d.F_X] = addr[sx] + pos
    block[:, d.F_Y] = addr[sy]
    block[:, d.F_OUT] = addr[so]
    return _place(fwd, runs, block, (0, 1, 2), found[0])


def fuse_backward(tape: Tape, bwd: np.ndarray) -> np.ndarray:
    """The backward plan ``bwd`` (``replay.backward_plan``) with its runs of scalar
    nodes fused: a new plan that holds the runs' instructions (or ``bwd``, with none).
    Called right after the backward that laid the gradients out: the plan keeps their
    offsets and the fresh bits, as the unfused plan does."""
    found = executors()
    if found is None:
        return bwd
    ok, gather = _scalar_nodes(tape, bwd[0], SCALAR_BWD_OPS)
    runs = _runs(ok)
    if not runs:
        return bwd
    at = np.concatenate([np.arange(i, j) for i, j in runs])
    ids = bwd[0, at]
    op, sx, sy, so, pos = _operands(tape, ids, gather[at])
    N, S = tape.arrays["node"], tape.arrays["slot"]
    d = dispatch
    # what the row's kernel reads from the node's mask: a unary kernel always writes
    # its input's buffer; a binary one each input whose bit is set, one slot as both
    # operands into x's buffer
    mask = N[N_MASK, ids]
    fresh = mask >> FRESH_SHIFT
    binary = N[N_NIN, ids] == 2
    flags = np.where(binary, (mask & 1) * d.WANT_X | ((mask >> 1) & 1) * d.WANT_Y, d.WANT_X)
    flags |= (fresh & 1) * d.FRESH_X
    flags |= np.where(binary, ((fresh >> 1) & 1) * d.FRESH_Y | ((fresh >> 2) & 1) * d.SHARED, 0)
    flags = np.where(gather[at], 0, flags)  # a gather adds (it honours no fresh bits)
    block = np.empty((ids.size, d.B_WIDTH), np.int64)
    block[:, d.B_OP] = op
    block[:, d.B_X] = S[S_ADDR, sx]
    block[:, d.B_Y] = S[S_ADDR, sy]
    block[:, d.B_OUT] = S[S_ADDR, so]
    block[:, d.B_GX] = S[S_GRAD, sx] + pos
    block[:, d.B_GY] = S[S_GRAD, sy]
    block[:, d.B_G] = S[S_GRAD, so]
    block[:, d.B_FLAGS] = flags
    return _place(bwd, runs, block, (1, 2, 3), found[1])


__all__ = ["executors", "fuse_backward", "fuse_forward"]
