"""Strided loops: the one implementation of broadcasting and axis reduction.

Broadcast forward, broadcast-reducing backward, reductions over axes and transposes are
all the same loop: walk a *loop shape* in C order and, for each of up to three
operands, keep a flat offset that advances by that operand's stride along each axis
(stride 0 on an axis the operand is broadcast along or reduced over).

``plan`` writes the loop into scratch memory as ``dims`` plus three stride rows,
after collapsing it: axes of length 1 are dropped and neighbouring axes that are
contiguous in every operand are merged, so most loops end up 1- or 2-dimensional.
Kernels then loop over *rows* (all axes but the last, offsets from ``row_walk`` /
``next_row``) and run a tight inner loop along the last axis.
"""

from __future__ import annotations

import numpy as np
from numba import carray

from .._jit import as_pointer, jit
from ..layout import SCRATCH_LEN, odometer, plan_arrays


@jit
def broadcast_strides(shape, nd, st):
    """Element strides of a C-contiguous array of ``shape`` seen inside an ``nd``-d loop.

    The array is aligned on the right (NumPy broadcasting); a missing or length-1 axis
    gets stride 0.
    """
    s = 1
    k = shape.size
    for d in range(nd - 1, -1, -1):
        j = d - (nd - k)
        if j >= 0 and shape[j] != 1:
            st[d] = s
            s *= shape[j]
        else:
            st[d] = 0


@jit
def collapse(nd, dims, sa, sb, sc):
    """Drop length-1 axes and merge axes contiguous in all operands; returns new ndim."""
    m = 0
    for d in range(nd):
        if dims[d] != 1:
            dims[m] = dims[d]
            sa[m] = sa[d]
            sb[m] = sb[d]
            sc[m] = sc[d]
            m += 1
    if m == 0:
        dims[0] = 1
        sa[0] = 0
        sb[0] = 0
        sc[0] = 0
        return 1
    # Scan outward from the innermost axis: axis d folds into the current axis `o`
    # when, for every operand, stepping once along d equals stepping dims[o] along o.
    o = m - 1
    for d in range(m - 2, -1, -1):
        n = dims[o]
        if sa[d] == sa[o] * n and sb[d] == sb[o] * n and sc[d] == sc[o] * n:
            dims[o] = dims[d] * n
        else:
            o -= 1
            dims[o] = dims[d]
            sa[o] = sa[d]
            sb[o] = sb[d]
            sc[o] = sc[d]
    k = m - o
    for d in range(k):
        dims[d] = dims[o + d]
        sa[d] = sa[o + d]
        sb[d] = sb[o + d]
        sc[d] = sc[o + d]
    return k


@jit
def broadcast_plan(oshape, ashape, bshape, cshape, sc):
    """Loop over ``oshape`` with three operands broadcast into it (NumPy rules), collapsed.

    Returns ``(nd, dims, sa, sb, sc)``. Pass ``oshape`` as an operand's shape to get the
    contiguous strides of the output itself.
    """
    dims, sa, sb, s3 = plan_arrays(sc)
    nd = oshape.size
    for d in range(nd):
        dims[d] = oshape[d]
    broadcast_strides(ashape, nd, sa)
    broadcast_strides(bshape, nd, sb)
    broadcast_strides(cshape, nd, s3)
    if nd == 0:
        dims[0] = 1
        sa[0] = 0
        sb[0] = 0
        s3[0] = 0
        nd = 1
    nd = collapse(nd, dims, sa, sb, s3)
    return nd, dims, sa, sb, s3


@jit
def lines(shape, axis):
    """A loop over the 1-D lines of a C-contiguous array along ``axis``:
    ``(count, length, stride)``; line ``l`` starts at ``line_start(l, length, stride)``."""
    length = shape[axis]
    stride = 1
    for d in range(axis + 1, shape.size):
        stride *= shape[d]
    total = 1
    for d in range(shape.size):
        total *= shape[d]
    count = total // length if length else 0
    return count, length, stride


@jit
def line_start(line, length, stride):
    return (line // stride) * length * stride + line % stride


@jit(inline="always")
def row_walk(nd, dims, sa, sb, s3, sc):
    """A walk over the rows of a plan (all axes but the last), at row 0.

    The state is a tuple of scalars: (position along axis nd-2, its length, the three
    offsets, their strides along that axis, nd, address of the scratch). Only when the
    position wraps (once every ``dims[nd-2]`` rows) does :func:`_carry` touch the plan
    arrays. Both choices are about speed: computing a row's offsets from its index
    takes a division per axis, and passing the plan's arrays to a helper on every row
    costs reference counting (together ~25 ns a row, which dominated loops whose last
    axis is short: a sum over xyz coordinates, say).
    """
    ctr = odometer(sc)
    for d in range(nd):
        ctr[d] = 0
    if nd < 2:
        return (0, 0, 0, 0, 0, 0, 0, 0, nd, 0)  # a single row: next_row never runs
    d = nd - 2
    return (0, dims[d], 0, 0, 0, sa[d], sb[d], s3[d], nd, sc.ctypes.data)


@jit(inline="always")
def next_row(w, r):
    """The walk ``w`` moved on to row ``r`` (rows are visited in order; r = 0 is the start).
    Offsets: ``w[2], w[3], w[4]``."""
    if r == 0:
        return w
    k, n0, oa, ob, oc, a0, b0, c0, nd, addr = w
    k += 1
    oa += a0
    ob += b0
    oc += c0
    if k == n0:
        k = 0
        oa, ob, oc = _carry(addr, nd, oa - n0 * a0, ob - n0 * b0, oc - n0 * c0)
    return (k, n0, oa, ob, oc, a0, b0, c0, nd, addr)


@jit
def _carry(addr, nd, oa, ob, oc):
    """Axis nd-2 wrapped: advance the odometer over axes nd-3 .. 0 (in the scratch after
    the plan, whose arrays ``plan_arrays`` places at fixed offsets)."""
    sc = carray(as_pointer(addr, np.int64), SCRATCH_LEN)
    dims, sa, sb, s3 = plan_arrays(sc)
    ctr = odometer(sc)
    d = nd - 3
    while d >= 0:
        ctr[d] += 1
        oa += sa[d]
        ob += sb[d]
        oc += s3[d]
        if ctr[d] < dims[d]:
            break
        n = dims[d]
        ctr[d] = 0
        oa -= n * sa[d]
        ob -= n * sb[d]
        oc -= n * s3[d]
        d -= 1
    return oa, ob, oc


@jit(inline="always")
def ux(i):
    """An element offset as an unsigned index. numba wraps negative signed indices
    (``x[-1]``), a select per access that hides the stride from LLVM; unsigned offsets
    let it version the inner loops for unit strides and vectorise them (a broadcast add
    over (256, 256) + (256,): 16 us, against 85 with signed offsets). Strided offsets
    here are never negative."""
    return np.uint64(i)


@jit(inline="always")
def put(a, i, v, fresh):
    """``a[i] += v``, or ``a[i] = v`` into a fresh gradient buffer (one that holds no
    value yet: the scheduler skipped zeroing it, see ``layout.FRESH_SHIFT``). ``fresh``
    is loop-invariant; the select costs nothing measurable (LLVM unswitches or
    vectorises it), and storing saves the memset pass over the buffer."""
    if fresh:
        a[i] = v
    else:
        a[i] += v


@jit(inline="always")
def clear(a, fresh):
    """Zero a fresh buffer that a kernel path can only add into (a broadcast reduction:
    several contributions per element)."""
    if fresh:
        for i in range(a.size):
            a[i] = 0


@jit
def loop_size(nd, dims):
    n = 1
    for d in range(nd):
        n *= dims[d]
    return n
