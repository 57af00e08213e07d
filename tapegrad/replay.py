"""The compiled replay of a captured program: forward interpreter plus scheduler.

A program is a tape recorded once (see ``tapegrad/compile.py``). Replaying it runs every
node's forward kernel in tape order through the same dispatch table the eager recorder
used, then the backward scheduler: one compiled call, no Python per op, and nothing
compiled per program (these functions are compiled once, for all programs).

The first replay goes through the general scheduler (prune, allocate, validate,
dispatch). Its outcome is fixed for the program's life: the graph, the slots' dtypes
and sizes and the gradient offsets never change, so the next replays run a *plan*, the
flat list of kernel addresses it dispatched (forward: every node; backward: the live
nodes, newest first). A plan call does no table lookups, no liveness scan, no
validation (the first replay validated exactly these nodes against exactly these
buffers); per node it is one indirect call, and a run of scalar nodes that
``tapegrad.fused`` marked is one call of an executor for them all. Anything that could
change the outcome (a non-OK status, anomaly mode) goes back to the general path.

**Guards.** A value that Python read while the program was captured (``bool`` of a
comparison, ``float()``, an index, ``.numpy()``) decided something the program now takes
for granted. Each such read is a guard: the slot, the node that computes it (-1 for an
input) and the bytes it held. Both forward loops check a node's guards right after it
runs (inputs' before the first node) and stop with ``E_GUARD`` at the first that does
not hold, before anything depends on it; ``tapegrad.compile`` then tries another
program or captures the new branch. ``G`` is ``[4, n]`` int64 (node, slot, offset into
``expect``, length), sorted by node; a program without guards passes an empty one and
pays one comparison per node.

**Custom functions.** A node whose forward is Python (``tg.Function``, a
``tapegrad.extend`` primitive) has no forward kernel: the forward loops stop there with
``E_CALLBACK_FWD`` (``H_ERR_A`` the node), ``tapegrad.program`` runs its Python forward
on the current input values into its output slots, and calls again from the next node
(``k0``). A Python backward stops a plan the way it stops the scheduler,
``E_CALLBACK_PY`` (``H_ERR_A`` the node, ``H_ERR_B`` the plan entry), and the plan
resumes at the entry after it (``b0``). A program without them pays one comparison per
node.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from ._jit import as_pointer, call_kernel, call_run, jit
from .layout import (
    BWD,
    E_CALLBACK_FWD,
    E_CALLBACK_PY,
    E_GUARD,
    FWD,
    H_ERR_A,
    H_ERR_B,
    H_LAZY,
    H_LO,
    H_SELF,
    H_STAT_CALLBACKS,
    H_STAT_NODES,
    H_USER_OP0,
    N_FLAGS,
    N_OP,
    N_SIG,
    NODE_LIVE,
    OK,
    PY_CALLBACK,
    S_ADDR,
    S_NODE,
    ktable,
    nodes,
    slots,
)
from .scheduler import run_backward, seed_gradients


@jit
def _guards(h, G, expect, i, k):
    """Check the guards from ``i`` on whose node is ``k``; returns the index of the next
    guard, or ``-1 - j`` when guard ``j`` does not hold."""
    S = slots(h)
    while i < G.shape[1] and G[0, i] == k:
        n = G[3, i]
        now = carray(as_pointer(S[S_ADDR, G[1, i]], np.uint8), n)
        off = G[2, i]
        for b in range(n):
            if now[b] != expect[off + b]:
                return -1 - i
        i += 1
    return i


@jit
def _resume_guards(h, G, expect, k0):
    """Where the guard loop stands when the forward starts at node ``k0``: the guards of
    the inputs (``k0 = 0``) or of node ``k0 - 1`` (a custom function's, whose forward
    Python just ran) are checked; the index of the next guard, or ``-1 - j``."""
    i = 0
    while i < G.shape[1] and G[0, i] < k0 - 1:
        i += 1
    return _guards(h, G, expect, i, k0 - 1)


@jit
def run_forward(h, k0, n, G, expect):
    """Run the forward kernels of nodes ``k0 .. n-1`` (values land in their slots),
    checking the guards ``G`` as their values appear; stops at a node whose forward is
    Python (``E_CALLBACK_FWD``)."""
    N = nodes(h)
    K = ktable(h)
    me = h[H_SELF]
    user = h[H_USER_OP0]
    gi = _resume_guards(h, G, expect, k0)
    if gi < 0:
        h[H_ERR_A] = -1 - gi
        return E_GUARD
    for k in range(k0, n):
        if N[N_OP, k] >= user:
            h[H_ERR_A] = k
            return E_CALLBACK_FWD
        st = call_kernel(K[N[N_OP, k], N[N_SIG, k], FWD], k, me)
        if st != OK:
            h[H_ERR_A] = k
            return st
        if gi < G.shape[1] and G[0, gi] == k:
            gi = _guards(h, G, expect, gi, k)
            if gi < 0:
                h[H_ERR_A] = -1 - gi
                return E_GUARD
    return OK


@jit
def replay(h, k0, n, root, want_grad, G, expect):
    """Forward over the program from node ``k0``, then (``want_grad``) a full backward
    from slot ``root`` that keeps the graph (and its pruning) for the plans below."""
    st = run_forward(h, k0, n, G, expect)
    if st != OK or not want_grad:
        return st
    return run_backward(h, root, -1, True)


@jit
def forward_plan(h, n):
    """``(3, n)``: the forward kernel address of each of the nodes ``0 .. n-1``
    (``PY_CALLBACK`` for a Python forward), the nodes each entry runs (1), and 0
    (``tapegrad.fused`` makes runs: an executor's address, the run's length and the
    address of its instructions)."""
    N = nodes(h)
    K = ktable(h)
    user = h[H_USER_OP0]
    fwd = np.zeros((3, n), np.int64)
    for k in range(n):
        op = N[N_OP, k]
        fwd[0, k] = PY_CALLBACK if op >= user else K[op, N[N_SIG, k], FWD]
        fwd[1, k] = 1
    return fwd


@jit
def backward_plan(h, root):
    """``(4, live)``: node, backward kernel address, nodes run (1) and 0 for each node
    the last backward from ``root`` ran, newest first (``tapegrad.fused`` makes runs,
    as in :func:`forward_plan`)."""
    N = nodes(h)
    K = ktable(h)
    start = slots(h)[S_NODE, root]  # -1 for a leaf root: nothing runs
    count = 0
    for k in range(start, h[H_LO] - 1, -1):
        if N[N_FLAGS, k] & NODE_LIVE:
            count += 1
    bwd = np.zeros((4, count), np.int64)
    i = 0
    for k in range(start, h[H_LO] - 1, -1):
        if N[N_FLAGS, k] & NODE_LIVE:
            bwd[0, i] = k
            bwd[1, i] = K[N[N_OP, k], N[N_SIG, k], BWD]
            bwd[2, i] = 1
            i += 1
    return bwd


@jit
def run_plan(h, fwd, bwd, root, want_grad, G, expect):
    """Replay from plans: the forward kernels ``fwd`` in tape order (checking the guards
    ``G``), then (``want_grad``) the gradient arena seeded with ones at ``root`` and the
    backward kernels ``bwd``. An entry that runs several nodes calls a fused run's
    executor, once for them all. A custom function's Python forward or backward stops
    it (:func:`resume_plan` goes on)."""
    return resume_plan(h, fwd, bwd, root, want_grad, G, expect, 0, 0)


@jit
def resume_plan(h, fwd, bwd, root, want_grad, G, expect, f0, b0):
    """:func:`run_plan` from forward entry ``f0`` and backward entry ``b0``: ``f0`` is
    the node after one whose Python forward just ran; ``b0 > 0`` is the entry after one
    whose Python backward just ran (the forward is done: ``f0`` = its length)."""
    me = h[H_SELF]
    gi = _resume_guards(h, G, expect, f0)
    if gi < 0:
        h[H_ERR_A] = -1 - gi
        return E_GUARD
    k = f0
    while k < fwd.shape[1]:
        m = fwd[1, k]
        if m == 1:
            addr = fwd[0, k]
            if addr == PY_CALLBACK:
                h[H_ERR_A] = k
                return E_CALLBACK_FWD
            st = call_kernel(addr, k, me)
        else:  # a fused run (its guards are checked after it: formulas cannot fail)
            st = call_run(fwd[0, k], fwd[2, k], m, me)
        if st != OK:
            h[H_ERR_A] = k
            return st
        for j in range(k, k + m):
            if gi < G.shape[1] and G[0, gi] == j:
                gi = _guards(h, G, expect, gi, j)
                if gi < 0:
                    h[H_ERR_A] = -1 - gi
                    return E_GUARD
        k += m
    if not want_grad:
        return OK
    if b0 == 0:
        h[H_STAT_NODES] = 0
        h[H_STAT_CALLBACKS] = 0
        # The plan runs the nodes the first replay ran, with the fresh bits that run
        # left in the node table: a fresh buffer's kernel stores, every other buffer
        # must read as zeros, as the scheduler would have made it node by node: the
        # seed zeroes the whole arena first (H_LAZY 0). (A Python backward adds into
        # its inputs' buffers, as it does in the scheduler, where it never gets fresh
        # bits.)
        h[H_LAZY] = 0
        seed_gradients(h, root, -1)
    i = b0
    while i < bwd.shape[1]:
        m = bwd[2, i]
        if m == 1:
            addr = bwd[1, i]
            if addr == PY_CALLBACK:
                h[H_ERR_A] = bwd[0, i]
                h[H_ERR_B] = i
                h[H_STAT_CALLBACKS] += 1
                return E_CALLBACK_PY
            st = call_kernel(addr, bwd[0, i], me)
        else:
            st = call_run(bwd[1, i], bwd[3, i], m, me)
        if st != OK:
            h[H_ERR_A] = bwd[0, i]
            return st
        i += m
    h[H_STAT_NODES] = bwd.shape[1]
    return OK
