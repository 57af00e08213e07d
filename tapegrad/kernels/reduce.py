"""Reductions over axes: the strided loop of ``loops.py`` with the roles swapped.

The loop runs over the *input's* shape; the output gets stride 0 along reduced axes,
so ``out[o] += x[i]`` sums and ``gx[i] += g[o]`` spreads the gradient back.
Parameters in the tape: ``ip = [naxes, axis...]``, ``fp = [scale]`` (1 for ``sum``,
1/count for ``mean``).
"""

from __future__ import annotations

from .._jit import jit
from ..layout import (
    OK,
    header,
    in_data,
    in_grad,
    in_shape,
    node_fp,
    node_ip,
    out_data,
    out_grad,
    scratch,
)
from .loops import collapse, plan_arrays, row_offsets


@jit
def _reduce_plan(xshape, axes, sc):
    """Loop over x's shape: sa = x's strides, sb = out's strides (0 on reduced axes)."""
    dims, sa, sb, sz = plan_arrays(sc)
    nd = xshape.size
    sx = 1
    so = 1
    for d in range(nd - 1, -1, -1):
        n = xshape[d]
        dims[d] = n
        sa[d] = sx
        sx *= n
        reduced = False
        for a in axes:
            if a == d:
                reduced = True
        if reduced:
            sb[d] = 0
        else:
            sb[d] = so
            so *= n
        sz[d] = 0
    if nd == 0:
        dims[0] = 1
        sa[0] = 0
        sb[0] = 0
        sz[0] = 0
        nd = 1
    nd = collapse(nd, dims, sa, sb, sz)
    return nd, dims, sa, sb, sz


@jit
def sum_fwd_arrays(x, xshape, axes, scale, out, sc):
    """``out = scale * sum(x, axes)``; a reduced inner axis is summed in float64."""
    for i in range(out.size):
        out[i] = 0
    n = x.size
    if n == 0:
        return
    nd, dims, sa, sb, sz = _reduce_plan(xshape, axes, sc)
    inner = dims[nd - 1]
    ia, ib = sa[nd - 1], sb[nd - 1]
    for r in range(n // inner):
        oa, ob, _ = row_offsets(r, nd, dims, sa, sb, sz)
        if ib == 0:
            acc = 0.0
            for j in range(inner):
                acc += x[oa + j * ia]
            out[ob] += acc
        else:
            for j in range(inner):
                out[ob + j * ib] += x[oa + j * ia]
    if scale != 1.0:
        for i in range(out.size):
            out[i] *= scale


@jit
def sum_bwd_arrays(g, xshape, axes, scale, gx, sc):
    n = gx.size
    if n == 0:
        return
    nd, dims, sa, sb, sz = _reduce_plan(xshape, axes, sc)
    inner = dims[nd - 1]
    ia, ib = sa[nd - 1], sb[nd - 1]
    for r in range(n // inner):
        oa, ob, _ = row_offsets(r, nd, dims, sa, sb, sz)
        for j in range(inner):
            gx[oa + j * ia] += scale * g[ob + j * ib]


@jit
def sum_fwd(dt, node, tp):
    h = header(tp)
    ip = node_ip(h, node)
    sum_fwd_arrays(
        in_data(h, node, 0, dt),
        in_shape(h, node, 0),
        ip[1 : 1 + ip[0]],
        node_fp(h, node)[0],
        out_data(h, node, 0, dt),
        scratch(h),
    )
    return OK


@jit
def sum_bwd(dt, node, tp):
    h = header(tp)
    ip = node_ip(h, node)
    sum_bwd_arrays(
        out_grad(h, node, 0, dt),
        in_shape(h, node, 0),
        ip[1 : 1 + ip[0]],
        node_fp(h, node)[0],
        in_grad(h, node, 0, dt),
        scratch(h),
    )
    return OK
