"""Kernels that move values around: reshape, transpose, gather (indexing), cast.

* reshape: the output *aliases* its input (same address, recorded by the front end),
  so the forward does nothing and the backward is ``gx += g``.
* transpose: ``ip = perm``; the strided loop runs over the output with the input's
  strides permuted.
* gather: input 1 is an int64 array of flat positions into x (NumPy computed it from
  any index expression: slices, ints, integer arrays, boolean masks). The backward is
  a scatter-add, so repeated indices add up their gradients.
* cast: dtype conversion between two dtypes (``src``, ``dst``).
"""

from __future__ import annotations

import numpy as np

from .._jit import jit
from ..layout import (
    OK,
    header,
    in_data,
    in_grad,
    in_shape,
    node_ip,
    out_data,
    out_grad,
    scratch,
)
from .loops import collapse, plan_arrays, row_offsets


@jit
def reshape_fwd(dt, node, tp):
    return OK  # aliased output: nothing to compute


@jit
def reshape_bwd(dt, node, tp):
    h = header(tp)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    for i in range(gx.size):
        gx[i] += g[i]
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
def transpose_arrays(x, xshape, perm, out, sc, backward):
    """Forward: ``out = x.transpose(perm)``; backward: ``x += out.transpose(argsort(perm))``
    (``x`` is then gx and ``out`` is g)."""
    n = out.size
    if n == 0:
        return
    nd, dims, sa, so = _transpose_plan(xshape, perm, sc)
    inner = dims[nd - 1]
    ia, io = sa[nd - 1], so[nd - 1]
    for r in range(n // inner):
        oa, _, oo = row_offsets(r, nd, dims, sa, sa, so)
        if backward:
            for j in range(inner):
                x[oa + j * ia] += out[oo + j * io]
        else:
            for j in range(inner):
                out[oo + j * io] = x[oa + j * ia]


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


@jit
def gather_fwd(dt, node, tp):
    h = header(tp)
    gather_fwd_arrays(
        in_data(h, node, 0, dt), in_data(h, node, 1, np.int64), out_data(h, node, 0, dt)
    )
    return OK


@jit
def gather_bwd(dt, node, tp):
    h = header(tp)
    gather_bwd_arrays(
        out_grad(h, node, 0, dt), in_data(h, node, 1, np.int64), in_grad(h, node, 0, dt)
    )
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
    for i in range(gx.size):
        gx[i] += g[i]
    return OK
