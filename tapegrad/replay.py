"""The compiled replay of a captured program: forward interpreter plus scheduler.

A program is a tape recorded once (see ``tapegrad/compile.py``). Replaying it runs every
node's forward kernel in tape order through the same dispatch table the eager recorder
used, then the backward scheduler: one compiled call, no Python per op, and nothing
compiled per program (these functions are compiled once, for all programs).
"""

from __future__ import annotations

from ._jit import call_kernel, jit
from .layout import FWD, H_ERR_A, H_SELF, N_OP, N_SIG, OK, ktable, nodes
from .scheduler import rerun_backward, run_backward


@jit
def run_forward(h, n):
    """Run the forward kernels of nodes ``0 .. n-1`` (values land in their slots)."""
    N = nodes(h)
    K = ktable(h)
    me = h[H_SELF]
    for k in range(n):
        st = call_kernel(K[N[N_OP, k], N[N_SIG, k], FWD], k, me)
        if st != OK:
            h[H_ERR_A] = k
            return st
    return OK


@jit
def replay(h, n, root, want_grad, pruned):
    """Forward over the program, then (``want_grad``) backward from slot ``root`` with
    the graph kept for the next replay; ``pruned``: the last backward on this tape was
    a complete one from ``root``, so its pruning still holds and is skipped."""
    st = run_forward(h, n)
    if st != OK or not want_grad:
        return st
    if pruned:
        return rerun_backward(h, root)
    return run_backward(h, root, -1, True)
