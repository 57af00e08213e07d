"""Lifting elementwise scalar formulas to whole tensors: the shared pieces (parallel
thresholds, streamed blocks, range gates) and the unary loops, forward and backward.

See :mod:`tapegrad.ops.elementwise.binary_kernels` for binary rows and the node
adapters the kernel table calls."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import prange, types

from ..._jit import (
    FULL,
    StaticRef,
    StaticRefType,
    jit,
    numba_threads,
    overload,
    store_fence,
    stream_lines,
)
from ...kernels.loops import put, ux
from ...layout import (
    STREAM_MIN,
    is_fresh,
)

# Loops over at least this many elements run on all cores (numba prange): backward
# loops, and forward loops of vector formulas and arithmetic. Measured on 2 vCPUs,
# g * cos(x) over 2e6 elements takes 9.5 ms instead of 16.7.
PARALLEL_MIN = 1 << 17


@jit(inline="always")
def on_all_cores(n):
    """Whether a loop over ``n`` elements runs its ``prange`` version: from
    ``PARALLEL_MIN`` elements, when numba has more than one thread. A forked child has
    one (``_jit`` sets it after a fork): OpenMP does not survive ``fork()``, and numba
    terminates a child that enters a parallel loop."""
    return n >= PARALLEL_MIN and numba_threads() > 1


# The rows whose formulas these loops lift, by name: each op table row registers itself
# here when it is declared (ops/table.py), so the kernels need not import the table.
FORMULAS: dict[str, Any] = {}


def row(op: StaticRef | StaticRefType):
    """The op table row an op reference (Python object or numba type) points to."""
    return FORMULAS[op.ref]


def fwd1(op, x):
    """Forward formula of unary ``op`` at scalar ``x``."""
    return row(op).fwd(x)


def fwd2(op, x, y):
    """Forward formula of binary (or comparison) op ``op``."""
    return row(op).fwd(x, y)


def bwd1(op, g, x, out):
    """Backward formula of unary op ``op``."""
    return row(op).backward_formulas[0](g, x, out)


def bwd2(op, i, g, x, y, out):
    """Backward formula of binary op ``op`` for input ``i`` (0: x, 1: y)."""
    return row(op).backward_formulas[i](g, x, y, out)


@overload(fwd1)
def _fwd1(op, x):
    if isinstance(op, StaticRefType):
        f = row(op).fwd
        return lambda op, x: f(x)


@overload(fwd2)
def _fwd2(op, x, y):
    if isinstance(op, StaticRefType):
        f = row(op).fwd
        return lambda op, x, y: f(x, y)


@overload(bwd1)
def _bwd1(op, g, x, out):
    if isinstance(op, StaticRefType):
        b = row(op).backward_formulas[0]
        return lambda op, g, x, out: b(g, x, out)


@overload(bwd2)
def _bwd2(op, i, g, x, y, out):
    if isinstance(op, StaticRefType) and isinstance(i, types.IntegerLiteral):
        b = row(op).backward_formulas[i.literal_value]
        return lambda op, i, g, x, y, out: b(g, x, y, out)


def fwd1v(op, x):
    """Vector forward formula of unary ``op`` (accurate inside its ``vector_range``)."""
    return row(op).vector[0](x)


def bwd1v(op, g, x, out):
    """Vector backward formula of unary ``op``."""
    return row(op).vector[1](g, x, out)


def vector_range(op):
    """The |x| bound inside which ``op``'s vector formulas may be used."""
    return row(op).vector_range


@overload(fwd1v)
def _fwd1v(op, x):
    if isinstance(op, StaticRefType):
        f = row(op).vector[0]
        return lambda op, x: f(x)


@overload(bwd1v)
def _bwd1v(op, g, x, out):
    if isinstance(op, StaticRefType):
        b = row(op).vector[1]
        return lambda op, g, x, out: b(g, x, out)


@overload(vector_range)
def _vector_range(op):
    if isinstance(op, StaticRefType):
        lim = row(op).vector_range
        return lambda op: lim


def fwd2v(op, x, y):
    """Vector forward formula of binary ``op``."""
    return row(op).vector[0](x, y)


def bwd2v(op, i, g, x, y, out):
    """Vector backward formula of binary ``op`` for input ``i``."""
    return row(op).vector[1][i](g, x, y, out)


def gate2(op, x, y):
    """Binary ``op``'s vector gate at ``(x, y)``."""
    return row(op).vector_gate(x, y)


@overload(fwd2v)
def _fwd2v(op, x, y):
    if isinstance(op, StaticRefType):
        f = row(op).vector[0]
        return lambda op, x, y: f(x, y)


@overload(bwd2v)
def _bwd2v(op, i, g, x, y, out):
    if isinstance(op, StaticRefType) and isinstance(i, types.IntegerLiteral):
        b = row(op).vector[1][i.literal_value]
        return lambda op, i, g, x, y, out: b(g, x, y, out)


@overload(gate2)
def _gate2(op, x, y):
    if isinstance(op, StaticRefType):
        f = row(op).vector_gate
        return lambda op, x, y: f(x, y)


# Vector formulas (kernels/vecmath.py) are checked block by block: a block of this many
# elements whose x are all inside the row's vector_range (not inf, not NaN) takes them,
# any other block the libm formulas. Blocks keep the check and the work in one pass over
# cache-resident memory.
BLOCK = 1024

# Below this many elements the unary adapters run the libm formulas in a plain loop: no
# range check, no blocks. A vector formula is a long dependent chain (exp's polynomial is
# 13 fused multiply-adds), as fast as libm for one element and slower for two to four
# before the vector loop starts; the blocked loop's set-up costs more than the work.
SMALL = 8

# The input whose gradient a backward loop computes (``which``), as run-time int64s:
# numba compiles a call once for each literal argument, and a literal 0, 1 or 2 made
# three copies of the parfors and streamed loops of every binary row (multiply's
# backward: 26.6 s to compile; 15.9 s with one).
X_INPUT, Y_INPUT, BOTH_INPUTS = np.int64(0), np.int64(1), np.int64(2)

# Elements a streamed block: small blocks stream faster (2e6 float64 multiplies: 0.95 ms
# at 128, 1.04 at 256, 1.12-1.17 at 512, 1.22-1.27 at 1024), and the per-block work
# must stay tiny: a constant trip count, the alignment peeled once per result (a few
# integer operations more a block cost 0.2 ms there).
SB = 128


# The fewest elements a streamed result can have (complex128): smaller nodes skip the
# streaming checks with one comparison (each check cost the scalar graphs' replay and
# backward 2-5 ns a node, ~9%).
STREAM_ELEMENTS = STREAM_MIN // 16


@jit(inline="always")
def streams(out):
    """Whether ``out`` is streamed past the caches: ``STREAM_MIN`` bytes or more, on
    one core. With several, the parallel loops write it: streamed variants of those
    cost a second parfor per op and dtype, which doubled the kernel cache's compile
    time (1657 s against ~800), for 70 instead of 81 ms on the first chain at two
    threads, where it was already level with PyTorch."""
    n = out.size
    return out.nbytes >= STREAM_MIN and out.ctypes.data % out.itemsize == 0 and not on_all_cores(n)


@jit(inline="always")
def line_start(out):
    """Elements of ``out`` before its first one on a 64-byte boundary."""
    return min(out.size, ((-out.ctypes.data) % 64) // out.itemsize)


@jit(inline="always")
def streamed_operands(x, y, n):
    """The operands of a streamed binary loop, each with its offset factor: a full-size
    one as it is (1), a scalar spread over a block (0: its offsets stay 0)."""
    fx, fy = int(x.size == n), int(y.size == n)
    return (x if fx else np.full(SB, x[0])), fx, (y if fy else np.full(SB, y[0])), fy


@jit(inline="always")
def edges(n, h, nb):
    """The element ranges a streamed loop stores plainly: the ``h`` before the first
    64-byte boundary and what follows its ``nb`` blocks (one loop over both keeps one
    copy of the formulas for them)."""
    return ((0, h), (h + nb * SB, n))


@jit(inline="always")
def in_range(x, lim):
    """Whether every |x| <= lim (False for a NaN): a vectorised reduction."""
    ok = True
    for i in range(x.size):
        ok &= abs(x[i]) <= lim
    return ok


@jit(inline="always")
def gate_holds(op, x, y):
    """Whether binary ``op``'s gate is within its range at every (x, y) pair (False
    for a NaN)."""
    lim = vector_range(op)
    ok = True
    for k in range(x.size):
        ok &= abs(gate2(op, x[k], y[k])) <= lim
    return ok


# in_range and gate_holds by offsets, for the streamed loops. Not inlined into numba's
# IR (LLVM inlines them): inlined into an inlined overload, numba's IR check warns that
# the loop's variable "is not in scope".


@jit
def in_range_at(x, s, m, lim):
    """Whether every |x[s:s + m]| <= lim (False for a NaN)."""
    ok = True
    for i in range(m):
        ok &= abs(x[ux(s + i)]) <= lim
    return ok


@jit
def gate_holds_at(op, x, xs, y, ys, m):
    """Whether binary ``op``'s gate is within its range at every pair
    ``(x[xs + k], y[ys + k])``, ``k < m`` (False for a NaN)."""
    lim = vector_range(op)
    ok = True
    for k in range(m):
        ok &= abs(gate2(op, x[ux(xs + k)], y[ux(ys + k)])) <= lim
    return ok


# The block loops take views of the block rather than (start, stop) indices: numba must
# handle a possibly negative index (wraparound) in x[i] for i in range(start, stop),
# which keeps LLVM from vectorising (3.3 instead of 1.2 ns per tanh).


@jit(inline="always")
def unary_fwd_block(op, x, out):
    if in_range(x, vector_range(op)):
        for i in range(out.size):
            out[i] = fwd1v(op, x[i])
    else:
        for i in range(out.size):
            out[i] = fwd1(op, x[i])


@jit(inline="always")
def unary_bwd_block(op, g, x, out, gx, f):
    if in_range(x, vector_range(op)):
        for i in range(gx.size):
            put(gx, i, bwd1v(op, g[i], x[i], out[i]), f)
    else:
        for i in range(gx.size):
            put(gx, i, bwd1(op, g[i], x[i], out[i]), f)


@jit(parallel=True)
def unary_fwd_blocks_parallel(op, x, out):
    n = out.size
    for b in prange((n + BLOCK - 1) // BLOCK):
        s, e = b * BLOCK, min(n, (b + 1) * BLOCK)
        unary_fwd_block(op, x[s:e], out[s:e])


@jit(parallel=True)
def unary_bwd_blocks_parallel(op, g, x, out, gx, f):
    n = gx.size
    for b in prange((n + BLOCK - 1) // BLOCK):
        s, e = b * BLOCK, min(n, (b + 1) * BLOCK)
        unary_bwd_block(op, g[s:e], x[s:e], out[s:e], gx[s:e], f)


# The streamed loops below address blocks by offsets into whole arrays, never by views:
# a view costs a reference count, an atomic instruction, and an atomic between two
# streamed blocks drains the write buffers (_jit.stream_lines).


def unary_fwd_at(op, x, s, m, dst, d):
    """``dst[d:d + m] = f(x[s:s + m])``: compiled, by the vector formulas where the row
    has them (and the block is within their range), else libm's."""
    for i in range(m):
        dst[d + i] = fwd1(op, x[s + i])


@overload(unary_fwd_at, inline="always")
def _unary_fwd_at(op, x, s, m, dst, d):
    if row(op).vector is None:

        def plain(op, x, s, m, dst, d):
            for i in range(m):
                dst[ux(d + i)] = fwd1(op, x[ux(s + i)])

        return plain

    def blocked(op, x, s, m, dst, d):
        if in_range_at(x, s, m, vector_range(op)):
            for i in range(m):
                dst[ux(d + i)] = fwd1v(op, x[ux(s + i)])
        else:
            for i in range(m):
                dst[ux(d + i)] = fwd1(op, x[ux(s + i)])

    return blocked


@jit
def unary_fwd_streamed(op, x, out):
    """``out = f(x)`` for a result of ``STREAM_MIN`` bytes or more (``streams``): the
    elements before ``out``'s first 64-byte boundary, then blocks of ``SB`` computed
    into ``tmp`` (in L1) and streamed out, a fence, the rest."""
    n = out.size
    h = line_start(out)
    nb = (n - h) // SB
    tmp = np.empty(SB, out.dtype)
    for b in range(nb):
        s = h + b * SB
        unary_fwd_at(op, x, s, SB, tmp, 0)
        stream_lines(tmp, out, s, SB)
    store_fence()
    for s, e in edges(n, h, nb):
        unary_fwd_at(op, x, s, e - s, out, s)


def unary_bwd_at(op, g, x, out, s, m, dst, d):
    """``dst[d:d + m] = f'(x) g`` over elements ``s:s + m``: compiled, by the vector
    formulas where the row has them (and the block is within their range)."""
    for i in range(m):
        dst[d + i] = bwd1(op, g[s + i], x[s + i], out[s + i])


@overload(unary_bwd_at, inline="always")
def _unary_bwd_at(op, g, x, out, s, m, dst, d):
    if row(op).vector is None:

        def plain(op, g, x, out, s, m, dst, d):
            for i in range(m):
                k = ux(s + i)
                dst[ux(d + i)] = bwd1(op, g[k], x[k], out[k])

        return plain

    def blocked(op, g, x, out, s, m, dst, d):
        if in_range_at(x, s, m, vector_range(op)):
            for i in range(m):
                k = ux(s + i)
                dst[ux(d + i)] = bwd1v(op, g[k], x[k], out[k])
        else:
            for i in range(m):
                k = ux(s + i)
                dst[ux(d + i)] = bwd1(op, g[k], x[k], out[k])

    return blocked


@jit
def unary_bwd_streamed(op, g, x, out, gx):
    """``gx = f'(x) g`` into a fresh gradient buffer of ``STREAM_MIN`` bytes or more
    (as ``unary_fwd_streamed``)."""
    n = gx.size
    h = line_start(gx)
    nb = (n - h) // SB
    tmp = np.empty(SB, gx.dtype)
    for b in range(nb):
        s = h + b * SB
        unary_bwd_at(op, g, x, out, s, SB, tmp, 0)
        stream_lines(tmp, gx, s, SB)
    store_fence()
    for s, e in edges(n, h, nb):
        unary_bwd_at(op, g, x, out, s, e - s, gx, s)


def unary_fwd_arrays(op, x, out):
    """``out = f(x)``. Compiled, a row with vector formulas runs them block by block,
    and a large result is streamed out (``STREAM_MIN``)."""
    for i in range(out.size):
        out[i] = fwd1(op, x[i])


@overload(unary_fwd_arrays, inline="always")
def _unary_fwd_arrays(op, x, out):
    if row(op).vector is None:

        def plain(op, x, out):
            if FULL and streams(out):
                unary_fwd_streamed(op, x, out)
                return
            for i in range(out.size):
                out[i] = fwd1(op, x[i])

        return plain

    def blocked(op, x, out):
        n = out.size
        if FULL and streams(out):
            unary_fwd_streamed(op, x, out)
        elif FULL and on_all_cores(n):
            unary_fwd_blocks_parallel(op, x, out)
        else:
            for s in range(0, n, BLOCK):
                e = min(n, s + BLOCK)
                unary_fwd_block(op, x[s:e], out[s:e])

    return blocked


@jit(parallel=True)
def unary_bwd_parallel(op, g, x, out, gx, f):
    for i in prange(gx.size):
        put(gx, i, bwd1(op, g[i], x[i], out[i]), f)


@jit(parallel=True)
def binary_bwd_parallel(op, which, g, x, y, out, gv, f):
    """Same-shape operands, all cores: ``which`` 0 accumulates dx into gv, 1 dy, 2 both
    (x and y are one slot; ``f``: gv is fresh, store)."""
    if which == 0:
        for i in prange(g.size):
            put(gv, i, bwd2(op, 0, g[i], x[i], y[i], out[i]), f)
    elif which == 2:
        for i in prange(g.size):
            v = bwd2(op, 0, g[i], x[i], y[i], out[i]) + bwd2(op, 1, g[i], x[i], y[i], out[i])
            put(gv, i, v, f)
    else:
        for i in prange(g.size):
            put(gv, i, bwd2(op, 1, g[i], x[i], y[i], out[i]), f)


@jit(parallel=True)
def binary_bwd_scalar_parallel(op, which, g, x, y, out, gv, f):
    """One operand a scalar (``x`` or ``y`` has one element), all cores: input
    ``which``'s gradient, stored or added (``f``) element by element into ``gv`` when
    that input is the full-size one, else summed in float64 and returned (``x * 0.9``,
    ``x ** 1.3``, ``1 - x``: until this, one core at any size)."""
    n = g.size
    acc = 0.0
    if x.size == 1:
        a = x[0]
        if which == 0:
            for i in prange(n):
                acc += bwd2(op, 0, g[i], a, y[i], out[i])
        else:
            for i in prange(n):
                put(gv, i, bwd2(op, 1, g[i], a, y[i], out[i]), f)
    else:
        b = y[0]
        if which == 1:
            for i in prange(n):
                acc += bwd2(op, 1, g[i], x[i], b, out[i])
        else:
            for i in prange(n):
                put(gv, i, bwd2(op, 0, g[i], x[i], b, out[i]), f)
    return acc


def binary_bwd_scalar_large(op, mask, fresh, g, x, y, out, gx, gy):
    """Whether the backward of a large scalar-operand case was run on all cores: never
    in Python (the serial loops serve); compiled, see the overload."""
    return False


@overload(binary_bwd_scalar_large, inline="always")
def _binary_bwd_scalar_large(op, mask, fresh, g, x, y, out, gx, gy):
    if not row(op).scalar_parallel:  # see Op.scalar_parallel
        return lambda op, mask, fresh, g, x, y, out, gx, gy: False

    def parallel(op, mask, fresh, g, x, y, out, gx, gy):
        n = out.size
        if not ((x.size == 1 or y.size == 1) and (x.size == n or y.size == n)):
            return False
        fx, fy = is_fresh(fresh, 0), is_fresh(fresh, 1)
        if mask & 1:
            acc = binary_bwd_scalar_parallel(op, X_INPUT, g, x, y, out, gx, fx)
            if x.size != n:
                put(gx, 0, acc, fx)
        if mask & 2:
            acc = binary_bwd_scalar_parallel(op, Y_INPUT, g, x, y, out, gy, fy)
            if y.size != n:
                put(gy, 0, acc, fy)
        return True

    return parallel


def unary_bwd_arrays(op, g, x, out, gx, f):
    """``gx += f'(x) g`` (``=`` if ``f``: gx is fresh, and streamed out from
    ``STREAM_MIN`` bytes), on all cores from PARALLEL_MIN elements; vector formulas as
    in ``unary_fwd_arrays``."""
    for i in range(gx.size):
        put(gx, i, bwd1(op, g[i], x[i], out[i]), f)


@overload(unary_bwd_arrays, inline="always")
def _unary_bwd_arrays(op, g, x, out, gx, f):
    if row(op).vector is None:

        def plain(op, g, x, out, gx, f):
            n = gx.size
            if FULL and f and streams(gx):
                unary_bwd_streamed(op, g, x, out, gx)
            elif FULL and on_all_cores(n):  # all cores (see PARALLEL_MIN)
                unary_bwd_parallel(op, g, x, out, gx, f)
            else:
                for i in range(n):
                    put(gx, i, bwd1(op, g[i], x[i], out[i]), f)

        return plain

    def blocked(op, g, x, out, gx, f):
        n = gx.size
        if FULL and f and streams(gx):
            unary_bwd_streamed(op, g, x, out, gx)
        elif FULL and on_all_cores(n):
            unary_bwd_blocks_parallel(op, g, x, out, gx, f)
        else:
            for s in range(0, n, BLOCK):
                e = min(n, s + BLOCK)
                unary_bwd_block(op, g[s:e], x[s:e], out[s:e], gx[s:e], f)

    return blocked
