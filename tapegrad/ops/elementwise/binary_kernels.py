"""Lifting elementwise scalar formulas to whole tensors: the binary loops (plain,
broadcast, streamed, blocked, with vector formulas) and the node adapters the kernel
table calls for every elementwise row."""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._jit import (
    FULL,
    jit,
    overload,
    store_fence,
    stream_lines,
)
from ...kernels.loops import broadcast_plan, clear, next_row, put, row_walk, ux
from ...layout import (
    FRESH_SHIFT,
    N_MASK,
    OK,
    fresh_bits,
    header,
    in_data,
    in_grad,
    in_shape,
    is_fresh,
    nodes,
    out_data,
    out_grad,
    out_shape,
    scratch,
)
from .kernels import (
    BLOCK,
    BOTH_INPUTS,
    SB,
    SMALL,
    STREAM_ELEMENTS,
    X_INPUT,
    Y_INPUT,
    binary_bwd_parallel,
    binary_bwd_scalar_large,
    bwd1,
    bwd2,
    bwd2v,
    edges,
    fwd1,
    fwd2,
    fwd2v,
    gate_holds,
    gate_holds_at,
    line_start,
    on_all_cores,
    row,
    streamed_operands,
    streams,
    unary_bwd_arrays,
    unary_fwd_arrays,
)


@jit(inline="always")
def binary_fwd_plain(op, x, y, out):
    """Same-shape and scalar operands (no shapes needed); False if broadcasting is."""
    n = out.size
    if x.size == n and y.size == n:
        for i in range(n):
            out[i] = fwd2(op, x[i], y[i])
    elif x.size == 1 and y.size == n:
        a = x[0]
        for i in range(n):
            out[i] = fwd2(op, a, y[i])
    elif y.size == 1 and x.size == n:
        b = y[0]
        for i in range(n):
            out[i] = fwd2(op, x[i], b)
    else:
        return False
    return True


@jit
def binary_fwd_general(op, x, xshape, y, yshape, out, oshape, sc):
    n = out.size
    if n == 0:
        return
    nd, dims, sa, sb, so = broadcast_plan(oshape, xshape, yshape, oshape, sc)
    swap_for_rows(nd, dims, sa, sb, so)
    inner = dims[nd - 1]
    ia, ib, io = sa[nd - 1], sb[nd - 1], so[nd - 1]
    w = row_walk(nd, dims, sa, sb, so, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob, oo = w[2], w[3], w[4]
        for j in range(inner):
            out[ux(oo + j * io)] = fwd2(op, x[ux(oa + j * ia)], y[ux(ob + j * ib)])


@jit(inline="always")
def binary_fwd_arrays(op, x, xshape, y, yshape, out, oshape, sc):
    """``out = f(x, y)`` with NumPy broadcasting (``out`` may be bool for comparisons)."""
    if not binary_fwd_fast(op, x, y, out):
        binary_fwd_general(op, x, xshape, y, yshape, out, oshape, sc)


@jit(inline="always")
def binary_bwd_shared(op, g, x, out, gx, f):
    """One slot as both operands (``x * x``): ``gx`` receives both formulas, summed, in
    one pass (stored if fresh: the scheduler marks the first input's bit)."""
    n = out.size
    if FULL and f and n >= STREAM_ELEMENTS and streams(gx):
        binary_bwd_streamed(op, BOTH_INPUTS, g, x, x, out, gx)
        return
    if FULL and on_all_cores(n):
        binary_bwd_parallel(op, BOTH_INPUTS, g, x, x, out, gx, f)
        return
    for i in range(n):
        put(gx, i, bwd2(op, 0, g[i], x[i], x[i], out[i]) + bwd2(op, 1, g[i], x[i], x[i], out[i]), f)


def binary_bwd_at(op, which, g, x, xs, y, ys, out, s, m, dst, d):
    """``dst[d:d + m] = g d out / d input which`` over elements ``s:s + m`` (``which``
    2: both formulas summed, x and y one slot); x and y from offsets ``xs``, ``ys``.
    Compiled, by the vector formulas where the row has them and their gate holds."""
    for i in range(m):
        a, b, k = x[xs + i], y[ys + i], s + i
        dst[d + i] = bwd2_which(op, which, False, g[k], a, b, out[k])


def bwd2_which(op, which, vec, g, x, y, out):
    """``bwd2`` (``bwd2v`` if ``vec``) of input ``which`` at run time; 2: both summed."""
    v0 = row(op).backward_formulas[0](g, x, y, out)
    v1 = row(op).backward_formulas[1](g, x, y, out)
    return v0 if which == 0 else v1 if which == 1 else v0 + v1


@jit(inline="always")
def _bwd2_libm_which(op, which, g, x, y, out):
    if which == 0:
        return bwd2(op, 0, g, x, y, out)
    if which == 1:
        return bwd2(op, 1, g, x, y, out)
    return bwd2(op, 0, g, x, y, out) + bwd2(op, 1, g, x, y, out)


@overload(bwd2_which, inline="always")
def _bwd2_which(op, which, vec, g, x, y, out):
    if row(op).vector is None:
        return lambda op, which, vec, g, x, y, out: _bwd2_libm_which(op, which, g, x, y, out)

    def either(op, which, vec, g, x, y, out):
        if not vec:
            return _bwd2_libm_which(op, which, g, x, y, out)
        if which == 0:
            return bwd2v(op, 0, g, x, y, out)
        if which == 1:
            return bwd2v(op, 1, g, x, y, out)
        return bwd2v(op, 0, g, x, y, out) + bwd2v(op, 1, g, x, y, out)

    return either


@jit(inline="always")
def _binary_bwd_at_loop(op, which, vec, g, x, xs, y, ys, out, s, m, dst, d):
    for i in range(m):
        a, b, k = x[ux(xs + i)], y[ux(ys + i)], ux(s + i)
        dst[ux(d + i)] = bwd2_which(op, which, vec, g[k], a, b, out[k])


@overload(binary_bwd_at, inline="always")
def _binary_bwd_at(op, which, g, x, xs, y, ys, out, s, m, dst, d):
    if row(op).vector is None:

        def libm(op, which, g, x, xs, y, ys, out, s, m, dst, d):
            _binary_bwd_at_loop(op, which, False, g, x, xs, y, ys, out, s, m, dst, d)

        return libm

    def gated(op, which, g, x, xs, y, ys, out, s, m, dst, d):
        vec = gate_holds_at(op, x, xs, y, ys, m)
        _binary_bwd_at_loop(op, which, vec, g, x, xs, y, ys, out, s, m, dst, d)

    return gated


@jit
def binary_bwd_streamed(op, which, g, x, y, out, gv):
    """Input ``which``'s gradient into its fresh, full-size buffer ``gv`` of
    ``STREAM_MIN`` bytes or more (same-shape or scalar operands)."""
    n = g.size
    xv, fx, yv, fy = streamed_operands(x, y, n)
    h = line_start(gv)
    nb = (n - h) // SB
    tmp = np.empty(SB, gv.dtype)
    for b in range(nb):
        s = h + b * SB
        binary_bwd_at(op, which, g, xv, fx * s, yv, fy * s, out, s, SB, tmp, 0)
        stream_lines(tmp, gv, s, SB)
    store_fence()
    for s, e in edges(n, h, nb):
        binary_bwd_at(op, which, g, xv, fx * s, yv, fy * s, out, s, e - s, gv, s)


@jit(inline="always")
def binary_bwd_stream_fresh(op, mask, fresh, g, x, y, out, gx, gy):
    """Stream the gradients of ``mask``'s inputs that are full-size, fresh and of
    ``STREAM_MIN`` bytes or more (the other operand same-size or a scalar); the mask
    of the inputs left to do."""
    n = out.size
    if n < STREAM_ELEMENTS:
        return mask
    if (x.size == n or x.size == 1) and (y.size == n or y.size == 1):
        if FULL and mask & 1 and x.size == n and is_fresh(fresh, 0) and streams(gx):
            binary_bwd_streamed(op, X_INPUT, g, x, y, out, gx)
            mask &= ~1
        if FULL and mask & 2 and y.size == n and is_fresh(fresh, 1) and streams(gy):
            binary_bwd_streamed(op, Y_INPUT, g, x, y, out, gy)
            mask &= ~2
    return mask


@jit(inline="always")
def binary_bwd_plain(op, mask, fresh, g, x, y, out, gx, gy):
    """Same-shape and scalar operands; False if broadcasting is needed. Sums into a
    scalar operand are carried in float64 whatever the dtype. Fresh gradient buffers
    (``fresh``, see ``layout.FRESH_SHIFT``) are stored into: each of their elements
    receives exactly one value on these paths."""
    n = out.size
    mask = binary_bwd_stream_fresh(op, mask, fresh, g, x, y, out, gx, gy)
    want_x = (mask & 1) != 0
    want_y = (mask & 2) != 0
    fx = is_fresh(fresh, 0)
    fy = is_fresh(fresh, 1)
    if x.size == n and y.size == n:
        if FULL and on_all_cores(n):
            if want_x:
                binary_bwd_parallel(op, X_INPUT, g, x, y, out, gx, fx)
            if want_y:
                binary_bwd_parallel(op, Y_INPUT, g, x, y, out, gy, fy)
            return True
        if want_x:
            for i in range(n):
                put(gx, i, bwd2(op, 0, g[i], x[i], y[i], out[i]), fx)
        if want_y:
            for i in range(n):
                put(gy, i, bwd2(op, 1, g[i], x[i], y[i], out[i]), fy)
    elif (
        FULL and on_all_cores(n) and binary_bwd_scalar_large(op, mask, fresh, g, x, y, out, gx, gy)
    ):
        pass
    elif x.size == 1 and y.size == n:
        a = x[0]
        if want_x:
            acc = 0.0
            for i in range(n):
                acc += bwd2(op, 0, g[i], a, y[i], out[i])
            put(gx, 0, acc, fx)
        if want_y:
            for i in range(n):
                put(gy, i, bwd2(op, 1, g[i], a, y[i], out[i]), fy)
    elif y.size == 1 and x.size == n:
        b = y[0]
        if want_x:
            for i in range(n):
                put(gx, i, bwd2(op, 0, g[i], x[i], b, out[i]), fx)
        if want_y:
            acc = 0.0
            for i in range(n):
                acc += bwd2(op, 1, g[i], x[i], b, out[i])
            put(gy, 0, acc, fy)
    else:
        return False
    return True


# --- binary rows with vector formulas (logaddexp) ---------------------------------------
#
# Same-shape and scalar operands take the vector formulas block by block, as the unary
# rows do; a scalar operand is spread over a block-long array once a call, so that one
# block loop serves the three cases. The gate (of x, y) picks the formulas of a block,
# forward and backward. Broadcasting, one slot as both operands and fewer than SMALL
# elements keep the libm formulas.


@jit(inline="always")
def _operand_block(v, n, s, e, spread):
    """Elements s:e of an operand: its own, or copies of its one element."""
    return v[s:e] if v.size == n else spread[: e - s]


@jit(inline="always")
def _spread(v, n):
    """``v``'s element over a block when it is a scalar operand (else nothing)."""
    return np.full(min(n, BLOCK) if v.size != n else 0, v[0])


@jit(inline="always")
def binary_fwd_block(op, x, y, out):
    if gate_holds(op, x, y):
        for i in range(out.size):
            out[i] = fwd2v(op, x[i], y[i])
    else:
        for i in range(out.size):
            out[i] = fwd2(op, x[i], y[i])


@jit(parallel=True)
def binary_fwd_blocks_parallel(op, x, y, out, sx, sy):
    n = out.size
    for b in prange((n + BLOCK - 1) // BLOCK):
        s, e = b * BLOCK, min(n, (b + 1) * BLOCK)
        xb, yb = _operand_block(x, n, s, e, sx), _operand_block(y, n, s, e, sy)
        binary_fwd_any(op, xb, yb, out[s:e])


def binary_fwd_any(op, x, y, out):
    """``out = f(x, y)`` over a block of equal-length operands: compiled, by the vector
    formulas where the row has them (and their gate holds), else libm's."""
    for i in range(out.size):
        out[i] = fwd2(op, x[i], y[i])


@overload(binary_fwd_any, inline="always")
def _binary_fwd_any(op, x, y, out):
    if row(op).vector is None:

        def plain(op, x, y, out):
            for i in range(out.size):
                out[i] = fwd2(op, x[i], y[i])

        return plain
    return lambda op, x, y, out: binary_fwd_block(op, x, y, out)


def binary_fwd_at(op, x, xs, y, ys, m, dst, d):
    """``dst[d:d + m] = f(x[xs:xs + m], y[ys:ys + m])``: compiled, by the vector
    formulas where the row has them (and their gate holds), else libm's."""
    for i in range(m):
        dst[d + i] = fwd2(op, x[xs + i], y[ys + i])


@overload(binary_fwd_at, inline="always")
def _binary_fwd_at(op, x, xs, y, ys, m, dst, d):
    if row(op).vector is None:

        def plain(op, x, xs, y, ys, m, dst, d):
            for i in range(m):
                dst[ux(d + i)] = fwd2(op, x[ux(xs + i)], y[ux(ys + i)])

        return plain

    def blocked(op, x, xs, y, ys, m, dst, d):
        if gate_holds_at(op, x, xs, y, ys, m):
            for i in range(m):
                dst[ux(d + i)] = fwd2v(op, x[ux(xs + i)], y[ux(ys + i)])
        else:
            for i in range(m):
                dst[ux(d + i)] = fwd2(op, x[ux(xs + i)], y[ux(ys + i)])

    return blocked


@jit
def binary_fwd_streamed(op, x, y, out):
    """``out = f(x, y)`` (same-shape or scalar operands) for a result of
    ``STREAM_MIN`` bytes or more (as ``unary_fwd_streamed``). A scalar operand is
    spread over a block (``streamed_operands``)."""
    n = out.size
    xv, fx, yv, fy = streamed_operands(x, y, n)
    h = line_start(out)
    nb = (n - h) // SB
    tmp = np.empty(SB, out.dtype)
    for b in range(nb):
        s = h + b * SB
        binary_fwd_at(op, xv, fx * s, yv, fy * s, SB, tmp, 0)
        stream_lines(tmp, out, s, SB)
    store_fence()
    for s, e in edges(n, h, nb):
        binary_fwd_at(op, xv, fx * s, yv, fy * s, e - s, out, s)


@jit(inline="always")
def binary_bwd_into(op, which, vec, g, x, y, out, dst, f):
    """``dst (+)= g d out / d input which`` over a block (``f``: store), by the vector
    formulas (``vec``) or libm's."""
    if which == 0:
        if vec:
            for i in range(dst.size):
                put(dst, i, bwd2v(op, 0, g[i], x[i], y[i], out[i]), f)
        else:
            for i in range(dst.size):
                put(dst, i, bwd2(op, 0, g[i], x[i], y[i], out[i]), f)
    elif vec:
        for i in range(dst.size):
            put(dst, i, bwd2v(op, 1, g[i], x[i], y[i], out[i]), f)
    else:
        for i in range(dst.size):
            put(dst, i, bwd2(op, 1, g[i], x[i], y[i], out[i]), f)


@jit(inline="always")
def binary_bwd_block(op, which, g, x, y, out, gv, full, f, tmp):
    """One block of input ``which``'s gradient: into ``gv`` (its block) for a full-size
    operand; for a scalar one through ``tmp`` (float64), returning the block's sum."""
    vec = gate_holds(op, x, y)
    if full:
        binary_bwd_into(op, which, vec, g, x, y, out, gv, f)
        return 0.0
    t = tmp[: g.size]
    binary_bwd_into(op, which, vec, g, x, y, out, t, True)
    acc = 0.0
    for i in range(t.size):
        acc += t[i]
    return acc


@jit(parallel=True)
def binary_bwd_blocks_parallel(op, which, g, x, y, out, gv, f, sx, sy):
    n = g.size
    full = gv.size == n
    acc = 0.0
    for b in prange((n + BLOCK - 1) // BLOCK):
        s, e = b * BLOCK, min(n, (b + 1) * BLOCK)
        xb, yb = _operand_block(x, n, s, e, sx), _operand_block(y, n, s, e, sy)
        tmp = np.empty(0 if full else BLOCK, np.float64)
        gb = gv[s:e] if full else gv
        acc += binary_bwd_block(op, which, g[s:e], xb, yb, out[s:e], gb, full, f, tmp)
    return acc


@jit(inline="always")
def binary_bwd_blocks(op, which, g, x, y, out, gv, f, sx, sy):
    """Input ``which``'s gradient by blocks; the sum for a scalar operand."""
    n = g.size
    if FULL and on_all_cores(n):
        return binary_bwd_blocks_parallel(op, which, g, x, y, out, gv, f, sx, sy)
    full = gv.size == n
    tmp = np.empty(0 if full else min(n, BLOCK), np.float64)
    acc = 0.0
    for s in range(0, n, BLOCK):
        e = min(n, s + BLOCK)
        xb, yb = _operand_block(x, n, s, e, sx), _operand_block(y, n, s, e, sy)
        gb = gv[s:e] if full else gv
        acc += binary_bwd_block(op, which, g[s:e], xb, yb, out[s:e], gb, full, f, tmp)
    return acc


@jit(inline="always")
def _vector_operands(x, y, n):
    return n >= SMALL and (x.size == n or x.size == 1) and (y.size == n or y.size == 1)


def binary_fwd_fast(op, x, y, out):
    """``binary_fwd_plain``; compiled, a row with vector formulas runs them by blocks,
    large results of arithmetic and vector rows run on all cores, and results of
    ``STREAM_MIN`` bytes are streamed out."""
    return binary_fwd_plain(op, x, y, out)


def binary_fwd_large(op, x, y, out):
    """``binary_fwd_fast`` from ``SMALL`` elements with same-shape or scalar operands;
    compiled, a function of its own (see the overload)."""
    binary_fwd_plain(op, x, y, out)


@overload(binary_fwd_large)
def _binary_fwd_large(op, x, y, out):
    # not inlined: the kernel a scalar node calls stays small (inlined, the streamed,
    # parallel and blocked paths cost replay of the scalar recurrence ~1 ns a node:
    # 23.1 against 22.4, asv_bench/ab.py --what perf, 15 rounds)
    blocks = row(op).vector is not None  # serial loops by blocks (the range check)
    parallel = blocks or row(op).arith  # large results on all cores

    def large(op, x, y, out):
        n = out.size
        if FULL and streams(out):
            binary_fwd_streamed(op, x, y, out)
        elif FULL and parallel and on_all_cores(n):
            binary_fwd_blocks_parallel(op, x, y, out, _spread(x, n), _spread(y, n))
        elif blocks:
            sx, sy = _spread(x, n), _spread(y, n)
            for s in range(0, n, BLOCK):
                e = min(n, s + BLOCK)
                xb, yb = _operand_block(x, n, s, e, sx), _operand_block(y, n, s, e, sy)
                binary_fwd_any(op, xb, yb, out[s:e])
        else:
            binary_fwd_plain(op, x, y, out)

    return large


@overload(binary_fwd_fast, inline="always")
def _binary_fwd_fast(op, x, y, out):
    def fast(op, x, y, out):
        if not _vector_operands(x, y, out.size):
            return binary_fwd_plain(op, x, y, out)
        binary_fwd_large(op, x, y, out)
        return True

    return fast


def binary_bwd_fast(op, mask, fresh, g, x, y, out, gx, gy):
    """``binary_bwd_plain``; compiled, a row with vector formulas runs them by blocks."""
    return binary_bwd_plain(op, mask, fresh, g, x, y, out, gx, gy)


@overload(binary_bwd_fast, inline="always")
def _binary_bwd_fast(op, mask, fresh, g, x, y, out, gx, gy):
    if row(op).vector is None:
        return lambda op, mask, fresh, g, x, y, out, gx, gy: binary_bwd_plain(
            op, mask, fresh, g, x, y, out, gx, gy
        )

    def blocked(op, mask, fresh, g, x, y, out, gx, gy):
        n = out.size
        if not _vector_operands(x, y, n):
            return binary_bwd_plain(op, mask, fresh, g, x, y, out, gx, gy)
        mask = binary_bwd_stream_fresh(op, mask, fresh, g, x, y, out, gx, gy)
        sx, sy = _spread(x, n), _spread(y, n)
        fx, fy = is_fresh(fresh, 0), is_fresh(fresh, 1)
        if mask & 1:
            acc = binary_bwd_blocks(op, X_INPUT, g, x, y, out, gx, fx, sx, sy)
            if x.size != n:
                put(gx, 0, acc, fx)
        if mask & 2:
            acc = binary_bwd_blocks(op, Y_INPUT, g, x, y, out, gy, fy, sx, sy)
            if y.size != n:
                put(gy, 0, acc, fy)
        return True

    return blocked


@jit
def swap_for_sums(nd, dims, sa, sb, so, mask):
    """Exchange the plan's last two axes (the loop then visits the same elements in
    another order) when an operand that wants a gradient (``mask``) is broadcast along
    the next-to-last axis, that axis is long and the innermost one short (xyz
    coordinates): its inner loop then runs along the broadcast axis and sums in a
    register. (512, 1, 3) - (1, 512, 3) spent ~5 ns a row of three in row bookkeeping
    and read-add-writes. A separate (not inlined) function: it runs once a call."""
    if not _short_inner(nd, dims):
        return
    if not ((mask & 1 and sa[nd - 2] == 0) or (mask & 2 and sb[nd - 2] == 0)):
        return
    _swap_last_two(nd, dims, sa, sb, so)


# The forward's exchange (swap_for_rows) keeps the plane of the last two axes within
# this many elements: the inner loop then strides through it `inner` times, and the
# plane must stay in the cache between those passes ((512, 3) planes: 12 KB).
PLANE_MAX = 1 << 14


@jit
def swap_for_rows(nd, dims, sa, sb, so):
    """The forward's exchange of the last two axes: a short innermost axis (xyz) under
    a long one makes rows of a few elements, each paying the row walk; exchanged, the
    inner loop runs along the long axis ((512, 1, 3) - (1, 512, 3): rows of 512 instead
    of 3)."""
    if _short_inner(nd, dims) and dims[nd - 2] * dims[nd - 1] <= PLANE_MAX:
        _swap_last_two(nd, dims, sa, sb, so)


@jit(inline="always")
def _short_inner(nd, dims):
    """The plan's innermost axis is short (at most 8) and the next at least 4x longer."""
    return nd >= 2 and dims[nd - 1] <= 8 and dims[nd - 2] >= 4 * dims[nd - 1]


@jit(inline="always")
def _swap_last_two(nd, dims, sa, sb, so):
    i, j = nd - 1, nd - 2
    dims[i], dims[j] = dims[j], dims[i]
    sa[i], sa[j] = sa[j], sa[i]
    sb[i], sb[j] = sb[j], sb[i]
    so[i], so[j] = so[j], so[i]


@jit
def binary_bwd_general(op, mask, g, x, xshape, y, yshape, out, oshape, gx, gy, sc):
    """The broadcast case: each operand receives the sum of its contributions over the
    axes it was broadcast along (stride 0 in the strided loop). Along an inner axis of
    stride 0 the contributions are summed in a register and added once; the loops keep
    one copy of each formula (copies cost compile time), LLVM unswitches the
    loop-invariant stride test."""
    n = out.size
    if n == 0:
        return
    nd, dims, sa, sb, so = broadcast_plan(oshape, xshape, yshape, oshape, sc)
    swap_for_sums(nd, dims, sa, sb, so, mask)
    inner = dims[nd - 1]
    ia, ib, io = sa[nd - 1], sb[nd - 1], so[nd - 1]
    w = row_walk(nd, dims, sa, sb, so, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob, oo = w[2], w[3], w[4]
        if mask & 1:
            acc = 0.0
            for j in range(inner):
                k, a, b = ux(oo + j * io), ux(oa + j * ia), ux(ob + j * ib)
                v = bwd2(op, 0, g[k], x[a], y[b], out[k])
                if ia == 0:
                    acc += v
                else:
                    gx[a] += v
            if ia == 0:
                gx[ux(oa)] += acc
        if mask & 2:
            acc = 0.0
            for j in range(inner):
                k, a, b = ux(oo + j * io), ux(oa + j * ia), ux(ob + j * ib)
                v = bwd2(op, 1, g[k], x[a], y[b], out[k])
                if ib == 0:
                    acc += v
                else:
                    gy[b] += v
            if ib == 0:
                gy[ux(ob)] += acc


# --- node adapters -------------------------------------------------------------------


@jit(inline="always")
def unary_fwd(op, dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    if out.size < SMALL:
        for i in range(out.size):
            out[i] = fwd1(op, x[i])
    else:
        unary_fwd_arrays(op, x, out)
    return OK


@jit(inline="always")
def unary_bwd(op, dt, node, tp):
    h = header(tp)
    g = out_grad(h, node, 0, dt)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    f = is_fresh(fresh_bits(h, node), 0)
    if gx.size < SMALL:
        for i in range(gx.size):
            put(gx, i, bwd1(op, g[i], x[i], out[i]), f)
    else:
        unary_bwd_arrays(op, g, x, out, gx, f)
    return OK


@jit(inline="always")
def binary_fwd(op, dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    y = in_data(h, node, 1, dt)
    out = out_data(h, node, 0, dt)
    if not binary_fwd_fast(op, x, y, out):  # shapes are read only when broadcasting
        binary_fwd_general(
            op,
            x,
            in_shape(h, node, 0),
            y,
            in_shape(h, node, 1),
            out,
            out_shape(h, node, 0),
            scratch(h),
        )
    return OK


@jit(inline="always")
def compare_fwd(op, dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    y = in_data(h, node, 1, dt)
    out = out_data(h, node, 0, np.bool_)
    if not binary_fwd_fast(op, x, y, out):
        binary_fwd_general(
            op,
            x,
            in_shape(h, node, 0),
            y,
            in_shape(h, node, 1),
            out,
            out_shape(h, node, 0),
            scratch(h),
        )
    return OK


@jit(inline="always")
def binary_bwd(op, dt, node, tp):
    h = header(tp)
    mask = nodes(h)[N_MASK, node]
    x = in_data(h, node, 0, dt)
    y = in_data(h, node, 1, dt)
    # An input that wants no gradient gets its own data as a placeholder: the mask
    # guarantees the kernel never writes it.
    gx = in_grad(h, node, 0, dt) if mask & 1 else x
    gy = in_grad(h, node, 1, dt) if mask & 2 else y
    g = out_grad(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    fresh = mask >> FRESH_SHIFT
    if fresh & 4:  # one slot as both operands (the scheduler's mark)
        binary_bwd_shared(op, g, x, out, gx, is_fresh(fresh, 0))
    elif not binary_bwd_fast(op, mask, fresh, g, x, y, out, gx, gy):
        # a broadcast operand's elements receive several contributions: adds only
        clear(gx, is_fresh(fresh, 0))
        clear(gy, is_fresh(fresh, 1))
        binary_bwd_general(
            op,
            mask,
            g,
            x,
            in_shape(h, node, 0),
            y,
            in_shape(h, node, 1),
            out,
            out_shape(h, node, 0),
            gx,
            gy,
            scratch(h),
        )
    return OK
