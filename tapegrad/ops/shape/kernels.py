"""Kernels that move values around: reshape, transpose, gather (indexing), cast.

* reshape: the output *aliases* its input (same address, recorded by the front end),
  so the forward does nothing and the backward is ``gx += g``.
* transpose: ``ip = perm``; the strided loop runs over the output with the input's
  strides permuted.
* gather: input 1 is an int64 array of flat positions into x (NumPy computed it from
  any index expression: slices, ints, integer arrays, boolean masks), or, for a basic
  key selecting a few elements (``u[k]``), the node has one input and the positions
  are its int parameters. The backward is a scatter-add, so repeated indices add up
  their gradients.
* scatter: the transpose of a gather (``out = 0; out[where] += v``, the gather's
  backward as an op of its own, so that the gather's gradient can be differentiated
  again); its backward is the gather.
* cast: dtype conversion between two dtypes (``src``, ``dst``).
"""

from __future__ import annotations

import numpy as np

from ..._jit import jit
from ...kernels.loops import broadcast_plan, clear, collapse, next_row, put, row_walk, ux
from ...layout import (
    FRESH_SHIFT,
    N_MASK,
    N_NIN,
    OK,
    fresh_bits,
    header,
    in_data,
    in_grad,
    in_shape,
    is_fresh,
    needs_grad,
    node_ip,
    nodes,
    out_data,
    out_grad,
    out_shape,
    plan_arrays,
    scratch,
)


@jit
def reshape_fwd(dt, node, tp):
    return OK  # aliased output: nothing to compute


@jit
def reshape_bwd(dt, node, tp):
    h = header(tp)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    f = is_fresh(fresh_bits(h, node), 0)
    for i in range(gx.size):
        put(gx, i, g[i], f)
    return OK


@jit
def _transpose_plan(xshape, perm, sc):
    """Loop over the output's shape: sa = x's strides permuted, sc = output's strides."""
    dims, sa, sb, so = plan_arrays(sc)
    nd = xshape.size
    # x's contiguous strides, stored temporarily in sb
    s = 1
    for d in range(nd - 1, -1, -1):
        sb[d] = s
        s *= xshape[d]
    for d in range(nd):
        dims[d] = xshape[perm[d]]
        sa[d] = sb[perm[d]]
    s = 1
    for d in range(nd - 1, -1, -1):
        so[d] = s
        s *= dims[d]
    for d in range(nd):
        sb[d] = 0
    if nd == 0:
        dims[0] = 1
        sa[0] = 0
        so[0] = 0
        sb[0] = 0
        nd = 1
    nd = collapse(nd, dims, sa, sb, so)
    return nd, dims, sa, so


@jit
def transpose_arrays(x, xshape, perm, out, sc, backward, f=False):
    """Forward: ``out = x.transpose(perm)``; backward: ``x += out.transpose(argsort(perm))``
    (``x`` is then gx and ``out`` is g; ``f``: gx is fresh, store)."""
    n = out.size
    if n == 0:
        return
    nd, dims, sa, so = _transpose_plan(xshape, perm, sc)
    inner = dims[nd - 1]
    ia, io = sa[nd - 1], so[nd - 1]
    w = row_walk(nd, dims, sa, sa, so, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, oo = w[2], w[4]
        if backward:
            for j in range(inner):
                put(x, ux(oa + j * ia), out[ux(oo + j * io)], f)
        else:
            for j in range(inner):
                out[ux(oo + j * io)] = x[ux(oa + j * ia)]


@jit
def transpose_fwd(dt, node, tp):
    h = header(tp)
    transpose_arrays(
        in_data(h, node, 0, dt),
        in_shape(h, node, 0),
        node_ip(h, node),
        out_data(h, node, 0, dt),
        scratch(h),
        False,
    )
    return OK


@jit
def transpose_bwd(dt, node, tp):
    h = header(tp)
    transpose_arrays(
        in_grad(h, node, 0, dt),
        in_shape(h, node, 0),
        node_ip(h, node),
        out_grad(h, node, 0, dt),
        scratch(h),
        True,
        is_fresh(fresh_bits(h, node), 0),
    )
    return OK


@jit
def gather_fwd_arrays(x, idx, out):
    for i in range(out.size):
        out[i] = x[idx[i]]


@jit
def gather_bwd_arrays(g, idx, gx):
    for i in range(g.size):
        gx[idx[i]] += g[i]


@jit(inline="always")
def gather_where(h, node):
    """A gather's flat positions: its int parameters when it has one input (a few
    positions of a basic key), else its int64 input 1."""
    if nodes(h)[N_NIN, node] == 1:
        return node_ip(h, node)
    return in_data(h, node, 1, np.int64)


@jit
def gather_fwd(dt, node, tp):
    h = header(tp)
    gather_fwd_arrays(in_data(h, node, 0, dt), gather_where(h, node), out_data(h, node, 0, dt))
    return OK


@jit
def gather_bwd(dt, node, tp):
    h = header(tp)
    gather_bwd_arrays(out_grad(h, node, 0, dt), gather_where(h, node), in_grad(h, node, 0, dt))
    return OK


@jit
def scatter_fwd(dt, node, tp):
    # the transpose of a gather: out = 0, then out[where[i]] += v[i] (repeats add up)
    h = header(tp)
    out = out_data(h, node, 0, dt)
    out[:] = 0
    gather_bwd_arrays(in_data(h, node, 0, dt), gather_where(h, node), out)
    return OK


@jit
def scatter_bwd(dt, node, tp):
    h = header(tp)
    g = out_grad(h, node, 0, dt)
    gv = in_grad(h, node, 0, dt)
    where = gather_where(h, node)
    for i in range(gv.size):
        gv[i] += g[where[i]]
    return OK


@jit
def cast_fwd(src, dst, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, src)
    out = out_data(h, node, 0, dst)
    for i in range(out.size):
        out[i] = x[i]
    return OK


@jit
def cast_bwd(src, dst, node, tp):
    h = header(tp)
    g = out_grad(h, node, 0, dst)
    gx = in_grad(h, node, 0, src)
    f = is_fresh(fresh_bits(h, node), 0)
    for i in range(gx.size):
        put(gx, i, g[i], f)
    return OK


# --- where: a select between two broadcast operands ----------------------------------------


@jit
def where_arrays(
    c, cshape, x, xshape, y, yshape, out, oshape, sc, g, gx, gy, mask, backward, fresh=0
):
    """Forward: ``out = where(c, x, y)`` with broadcasting. Backward (``g`` given):
    ``gx += g`` where c, ``gy += g`` elsewhere (mask bits 1 and 2: inputs x and y). A
    fresh gx or gy (``fresh`` bits 1, 2; only when it is not broadcast, so that each
    element is visited once) gets g or 0 stored."""
    n = out.size
    if n == 0:
        return
    nd, dims, sa, sb, s3 = broadcast_plan(oshape, cshape, xshape, yshape, sc)
    inner = dims[nd - 1]
    ia, ib, ic = sa[nd - 1], sb[nd - 1], s3[nd - 1]
    w = row_walk(nd, dims, sa, sb, s3, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob, oc = w[2], w[3], w[4]
        base = r * inner
        if backward:
            fx = is_fresh(fresh, 1)
            fy = is_fresh(fresh, 2)
            for j in range(inner):
                if c[ux(oa + j * ia)]:
                    if mask & 2:
                        put(gx, ux(ob + j * ib), g[ux(base + j)], fx)
                    if fy:
                        gy[ux(oc + j * ic)] = 0.0
                else:
                    if mask & 4:
                        put(gy, ux(oc + j * ic), g[ux(base + j)], fy)
                    if fx:
                        gx[ux(ob + j * ib)] = 0.0
        else:
            for j in range(inner):
                out[ux(base + j)] = x[ux(ob + j * ib)] if c[ux(oa + j * ia)] else y[ux(oc + j * ic)]


@jit
def where_fwd(dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 1, dt)
    where_arrays(
        in_data(h, node, 0, np.bool_),
        in_shape(h, node, 0),
        x,
        in_shape(h, node, 1),
        in_data(h, node, 2, dt),
        in_shape(h, node, 2),
        out_data(h, node, 0, dt),
        out_shape(h, node, 0),
        scratch(h),
        x,
        x,
        x,
        0,
        False,
    )
    return OK


@jit
def where_bwd(dt, node, tp):
    h = header(tp)
    mask = nodes(h)[N_MASK, node]
    x = in_data(h, node, 1, dt)
    y = in_data(h, node, 2, dt)
    gx = in_grad(h, node, 1, dt) if mask & 2 else x
    gy = in_grad(h, node, 2, dt) if mask & 4 else y
    n = out_data(h, node, 0, dt).size
    fresh = mask >> FRESH_SHIFT
    if is_fresh(fresh, 1) and gx.size != n:  # broadcast: several values per element
        clear(gx, True)
        fresh &= ~2
    if is_fresh(fresh, 2) and gy.size != n:
        clear(gy, True)
        fresh &= ~4
    where_arrays(
        in_data(h, node, 0, np.bool_),
        in_shape(h, node, 0),
        x,
        in_shape(h, node, 1),
        y,
        in_shape(h, node, 2),
        out_data(h, node, 0, dt),
        out_shape(h, node, 0),
        scratch(h),
        out_grad(h, node, 0, dt),
        gx,
        gy,
        mask,
        True,
        fresh,
    )
    return OK


# --- concatenate --------------------------------------------------------------------------


@jit
def concatenate_fwd(dt, node, tp):
    """``ip = [outer, inner, total, len_0, ..., len_{n-1}]``: input i's block of
    ``len_i * inner`` values goes after the previous inputs' in each of ``outer`` rows."""
    h = header(tp)
    ip = node_ip(h, node)
    outer, inner, total = ip[0], ip[1], ip[2]
    out = out_data(h, node, 0, dt)
    off = 0
    for i in range(nodes(h)[N_NIN, node]):
        x = in_data(h, node, i, dt)
        blk = ip[3 + i] * inner
        for o in range(outer):
            dst = (o * total + off) * inner
            src = o * blk
            for j in range(blk):
                out[dst + j] = x[src + j]
        off += ip[3 + i]
    return OK


@jit
def concatenate_bwd(dt, node, tp):
    h = header(tp)
    ip = node_ip(h, node)
    outer, inner, total = ip[0], ip[1], ip[2]
    g = out_grad(h, node, 0, dt)
    off = 0
    for i in range(nodes(h)[N_NIN, node]):
        blk = ip[3 + i] * inner
        if needs_grad(h, node, i):
            gx = in_grad(h, node, i, dt)
            for o in range(outer):
                src = (o * total + off) * inner
                dst = o * blk
                for j in range(blk):
                    gx[dst + j] += g[src + j]
        off += ip[3 + i]
    return OK
