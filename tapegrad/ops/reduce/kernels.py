"""Reductions over axes: the strided loop of ``loops.py`` with the roles swapped.

The loop runs over the *input's* shape; the output gets stride 0 along reduced axes,
so ``out[o] += x[i]`` sums and ``gx[i] += g[o]`` spreads the gradient back.
Parameters in the tape: ``ip = [naxes, axis...]``, ``fp = [scale]`` (1 for ``sum``,
1/count for ``mean``).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ..._jit import FULL, jit
from ...kernels import vecmath as vm
from ...kernels.loops import collapse, line_start, lines, next_row, put, row_walk, ux
from ...layout import (
    OK,
    fresh_bits,
    header,
    in_data,
    in_grad,
    in_shape,
    is_fresh,
    node_fp,
    node_ip,
    out_data,
    out_grad,
    plan_arrays,
    scratch,
)
from ..elementwise.kernels import on_all_cores


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


@jit(inline="always")
def _reduce_rows(xshape, axes, sc):
    """The reduce plan plus its innermost extent and strides (x's and the output's)."""
    nd, dims, sa, sb, sz = _reduce_plan(xshape, axes, sc)
    return nd, dims, sa, sb, sz, dims[nd - 1], sa[nd - 1], sb[nd - 1]


@jit(inline="always")
def sum_contiguous(x):
    """Sum in float64 with eight partial sums: one running sum is a chain of dependent
    additions (4 cycles each), eight are independent and LLVM packs them into one
    vector (65,536 elements: 10 us, against 55 with one running sum). The order changes
    like NumPy's pairwise sum does, within rounding."""
    n = x.size
    m = n - n % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    for i in range(0, m, 8):
        a0 += x[i]
        a1 += x[i + 1]
        a2 += x[i + 2]
        a3 += x[i + 3]
        a4 += x[i + 4]
        a5 += x[i + 5]
        a6 += x[i + 6]
        a7 += x[i + 7]
    acc = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for i in range(m, n):
        acc += x[i]
    return acc


# A reduced last axis at most this long (xyz coordinates, a few features) is summed by
# one flat loop over the rows: per row, the strided walk and sum_contiguous's set-up
# cost more than the three additions ((512, 512, 3) summed over the last axis).
SHORT_AXIS = 8


@jit(inline="always")
def _short_last_axis(nd, dims, sa, sb, inner, ia, ib):
    """The plan reduces a short contiguous last axis into a contiguous output: rows of
    ``inner`` elements, one output element each."""
    return nd == 2 and inner <= SHORT_AXIS and ia == 1 and ib == 0 and sa[0] == inner and sb[0] == 1


@jit(inline="always")
def _short_row_sum(x, out, i, inner, scale):
    """Row ``i`` of the short-last-axis sum: one output element."""
    acc = 0.0
    for j in range(inner):
        acc += x[ux(i * inner + j)]
    out[i] = scale * acc


@jit(inline="always")
def _short_row_spread(g, gx, i, inner, scale, f):
    """Row ``i`` of its backward: the row's gradient is one value, spread."""
    v = scale * g[i]
    for j in range(inner):
        put(gx, ux(i * inner + j), v, f)


@jit(parallel=True)
def sum_short_rows_parallel(x, out, rows, inner, scale):
    """The short-last-axis sum on all cores: a row per output element (pairwise
    distances summed over xyz, 262,144 rows of 3)."""
    for i in prange(rows):
        _short_row_sum(x, out, i, inner, scale)


@jit(parallel=True)
def sum_short_rows_bwd_parallel(g, gx, rows, inner, scale, f):
    """Its backward on all cores."""
    for i in prange(rows):
        _short_row_spread(g, gx, i, inner, scale, f)


@jit
def sum_fwd_arrays(x, xshape, axes, scale, out, sc):
    """``out = scale * sum(x, axes)``; a reduced inner axis is summed in float64."""
    for i in range(out.size):
        out[i] = 0
    n = x.size
    if n == 0:
        return
    nd, dims, sa, sb, sz, inner, ia, ib = _reduce_rows(xshape, axes, sc)
    if _short_last_axis(nd, dims, sa, sb, inner, ia, ib):
        if FULL and on_all_cores(n):
            sum_short_rows_parallel(x, out, dims[0], inner, scale)
            return
        for i in range(dims[0]):
            _short_row_sum(x, out, i, inner, scale)
        return
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        if ib == 0 and ia == 1:
            out[ob] += sum_contiguous(x[oa : oa + inner])
        elif ib == 0:
            acc = 0.0
            for j in range(inner):
                acc += x[ux(oa + j * ia)]
            out[ob] += acc
        else:
            for j in range(inner):
                out[ux(ob + j * ib)] += x[ux(oa + j * ia)]
    if scale != 1.0:
        for i in range(out.size):
            out[i] *= scale


@jit
def sum_bwd_arrays(g, xshape, axes, scale, gx, sc, f):
    """``gx += scale * g`` broadcast back over the summed axes; each element of gx gets
    exactly one value, so a fresh gx (``f``) is stored into."""
    n = gx.size
    if n == 0:
        return
    nd, dims, sa, sb, sz, inner, ia, ib = _reduce_rows(xshape, axes, sc)
    if _short_last_axis(nd, dims, sa, sb, inner, ia, ib):
        if FULL and on_all_cores(n):
            sum_short_rows_bwd_parallel(g, gx, dims[0], inner, scale, f)
            return
        for i in range(dims[0]):
            _short_row_spread(g, gx, i, inner, scale, f)
        return
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        if ia == 1 and ib == 0:  # a summed inner axis (a full sum): one value per row
            v = scale * g[ob]
            gs = gx[oa : oa + inner]
            for j in range(inner):
                put(gs, j, v, f)
        else:
            for j in range(inner):
                put(gx, ux(oa + j * ia), scale * g[ux(ob + j * ib)], f)


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
        is_fresh(fresh_bits(h, node), 0),
    )
    return OK


# --- max / min: outputs (out, count of elements equal to out) --------------------------------
# The gradient goes to every element equal to the extreme, split equally between ties
# (the count is a second, internal output of the forward).


@jit
def extreme_fwd_arrays(x, xshape, axes, out, count, sc, is_max):
    inf = np.inf if is_max else -np.inf
    for i in range(out.size):
        out[i] = -inf
        count[i] = 0
    n = x.size
    if n == 0:
        return
    nd, dims, sa, sb, sz, inner, ia, ib = _reduce_rows(xshape, axes, sc)
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        for j in range(inner):
            v = x[ux(oa + j * ia)]
            cur = out[ux(ob + j * ib)]
            # NaN propagates, as in numpy.max: once stored, no comparison replaces it
            if v != v or (v > cur if is_max else v < cur):
                if cur == cur:
                    out[ux(ob + j * ib)] = v
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        for j in range(inner):
            if x[ux(oa + j * ia)] == out[ux(ob + j * ib)]:
                count[ux(ob + j * ib)] += 1


@jit
def extreme_bwd_arrays(g, x, xshape, axes, out, count, gx, sc):
    n = x.size
    if n == 0:
        return
    nd, dims, sa, sb, sz, inner, ia, ib = _reduce_rows(xshape, axes, sc)
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        for j in range(inner):
            o = ux(ob + j * ib)
            if x[ux(oa + j * ia)] == out[o]:
                gx[ux(oa + j * ia)] += g[o] / count[o]


@jit
def _extreme_fwd(dt, node, tp, is_max):
    h = header(tp)
    ip = node_ip(h, node)
    extreme_fwd_arrays(
        in_data(h, node, 0, dt),
        in_shape(h, node, 0),
        ip[1 : 1 + ip[0]],
        out_data(h, node, 0, dt),
        out_data(h, node, 1, dt),
        scratch(h),
        is_max,
    )
    return OK


@jit
def max_fwd(dt, node, tp):
    return _extreme_fwd(dt, node, tp, True)


@jit
def min_fwd(dt, node, tp):
    return _extreme_fwd(dt, node, tp, False)


@jit
def extreme_bwd(dt, node, tp):
    h = header(tp)
    ip = node_ip(h, node)
    extreme_bwd_arrays(
        out_grad(h, node, 0, dt),
        in_data(h, node, 0, dt),
        in_shape(h, node, 0),
        ip[1 : 1 + ip[0]],
        out_data(h, node, 0, dt),
        out_data(h, node, 1, dt),
        in_grad(h, node, 0, dt),
        scratch(h),
    )
    return OK


# --- prod: outputs (out, product of the non-zero elements, number of zeros) --------------
# d prod / d x_i is the product of the others: out / x_i without zeros, the non-zero
# product at the single zero when there is one, and 0 everywhere with two or more.


@jit
def prod_fwd_arrays(x, xshape, axes, out, nzprod, zeros, sc):
    for i in range(out.size):
        out[i] = 1
        nzprod[i] = 1
        zeros[i] = 0
    n = x.size
    if n == 0:
        return
    nd, dims, sa, sb, sz, inner, ia, ib = _reduce_rows(xshape, axes, sc)
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        for j in range(inner):
            v = x[ux(oa + j * ia)]
            o = ux(ob + j * ib)
            out[o] *= v
            if v == 0:
                zeros[o] += 1
            else:
                nzprod[o] *= v


@jit
def prod_bwd_arrays(g, x, xshape, axes, nzprod, zeros, gx, sc):
    n = x.size
    if n == 0:
        return
    nd, dims, sa, sb, sz, inner, ia, ib = _reduce_rows(xshape, axes, sc)
    w = row_walk(nd, dims, sa, sb, sz, sc)
    for r in range(n // inner):
        w = next_row(w, r)
        oa, ob = w[2], w[3]
        for j in range(inner):
            o = ux(ob + j * ib)
            v = x[ux(oa + j * ia)]
            if zeros[o] == 0:
                gx[ux(oa + j * ia)] += g[o] * nzprod[o] / v
            elif zeros[o] == 1 and v == 0:
                gx[ux(oa + j * ia)] += g[o] * nzprod[o]


@jit
def prod_fwd(dt, node, tp):
    h = header(tp)
    ip = node_ip(h, node)
    prod_fwd_arrays(
        in_data(h, node, 0, dt),
        in_shape(h, node, 0),
        ip[1 : 1 + ip[0]],
        out_data(h, node, 0, dt),
        out_data(h, node, 1, dt),
        out_data(h, node, 2, dt),
        scratch(h),
    )
    return OK


@jit
def prod_bwd(dt, node, tp):
    h = header(tp)
    ip = node_ip(h, node)
    prod_bwd_arrays(
        out_grad(h, node, 0, dt),
        in_data(h, node, 0, dt),
        in_shape(h, node, 0),
        ip[1 : 1 + ip[0]],
        out_data(h, node, 1, dt),
        out_data(h, node, 2, dt),
        in_grad(h, node, 0, dt),
        scratch(h),
    )
    return OK


# --- cumulative sum and product along one axis (``ip = [axis]``) ---------------------------


@jit
def cumsum_fwd(dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    count, length, stride = lines(in_shape(h, node, 0), node_ip(h, node)[0])
    for line in range(count):
        start = line_start(line, length, stride)
        acc = 0.0
        for k in range(length):
            acc += x[start + k * stride]
            out[start + k * stride] = acc
    return OK


@jit
def cumsum_bwd(dt, node, tp):
    h = header(tp)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    count, length, stride = lines(in_shape(h, node, 0), node_ip(h, node)[0])
    for line in range(count):
        start = line_start(line, length, stride)
        acc = 0.0
        for k in range(length - 1, -1, -1):  # the gradient is the reversed cumulative sum
            acc += g[start + k * stride]
            gx[start + k * stride] += acc
    return OK


@jit
def cumprod_fwd(dt, node, tp):
    h = header(tp)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    count, length, stride = lines(in_shape(h, node, 0), node_ip(h, node)[0])
    for line in range(count):
        start = line_start(line, length, stride)
        acc = 1.0
        for k in range(length):
            acc *= x[start + k * stride]
            out[start + k * stride] = acc
    return OK


@jit
def cumprod_bwd(dt, node, tp):
    """gx[i] = P[i] * S[i] with P[i] = out[i-1] (the product before i) and
    S[i] = g[i] + x[i+1] * S[i+1]: exact with zeros, no division."""
    h = header(tp)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    g = out_grad(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    count, length, stride = lines(in_shape(h, node, 0), node_ip(h, node)[0])
    for line in range(count):
        start = line_start(line, length, stride)
        s = 0.0
        for k in range(length - 1, -1, -1):
            if k < length - 1:
                s = s * x[start + (k + 1) * stride]
            s += g[start + k * stride]
            before = out[start + (k - 1) * stride] if k > 0 else 1.0
            gx[start + k * stride] += before * s
    return OK


# --- log_softmax: a reduction and a broadcast along each line of one axis ----------------


@jit(inline="always")
def _exp(v):
    """e^v by the vector formula on its range (the shifted values of a softmax are <= 0
    there), libm elsewhere: NaN, +-inf, below -708 (subnormal results)."""
    if -708.0 <= v <= 708.0:
        return vm.exp(v)
    return np.exp(v)


# A softmax over a unit-stride axis takes its exponentials in flat passes over chunks of
# this many elements (whole lines; 8 KiB of float64 scratch), by the vector formula: a
# loop that vectorises needs more iterations than a line of 10 classes has, and the
# float sums along each line keep their own loops from vectorising at all. (256, 10)
# logits took 21 us a forward, 6 ns an element, with the exponentials taken line by line.
EXP_CHUNK = 1024


@jit(inline="always")
def _exps(e, n, vec):
    """``e[:n] = exp(e[:n])``: by the vector formula if ``vec`` (every value in its
    range), else by ``_exp``, which picks per element (the same value where both may)."""
    if vec:
        for i in range(n):
            e[ux(i)] = vm.exp(e[ux(i)])
    else:
        for i in range(n):
            e[ux(i)] = _exp(e[ux(i)])


@jit(inline="always")
def _in_exp_range(d):
    return (d >= -708.0) & (d <= 708.0)  # NaN is outside


@jit(inline="always")
def _chunks(length, stride):
    """Lines per chunk (one for strided lines) and the chunk's float64 scratch."""
    per = max(1, EXP_CHUNK // max(length, 1)) if stride == 1 else 1
    return per, np.empty(per * length, np.float64), np.zeros(per, np.float64)


@jit(inline="always")
def _chunk_exps(v, first, nl, length, stride, shift, e):
    """``e[j length + k] = exp(v[k] - shift[j])`` along lines ``first + j``, ``j < nl``."""
    vec = stride == 1
    for j in range(nl):
        start = line_start(first + j, length, stride)
        for k in range(length):
            d = v[ux(start + k * stride)] - shift[j]
            e[ux(j * length + k)] = d
            vec &= _in_exp_range(d)
    _exps(e, nl * length, vec)


@jit
def log_softmax_fwd(dt, node, tp):
    """``out = x - m - log(sum(exp(x - m)))`` along each line, with m the line's max
    (0 when it is not finite: an all -inf line gives NaN, as in SciPy). One node in
    place of the composite's ten (max, shift, exp, sum, log...): the sum runs in
    float64 and nothing overflows. Unit-stride lines go by chunks (``EXP_CHUNK``)."""
    h = header(tp)
    x = in_data(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    count, length, stride = lines(in_shape(h, node, 0), node_ip(h, node)[0])
    per, e, shift = _chunks(length, stride)
    for first in range(0, count, per):
        nl = min(per, count - first)
        for j in range(nl):
            start = line_start(first + j, length, stride)
            m = -np.inf
            for k in range(length):
                v = x[ux(start + k * stride)]
                if v > m:
                    m = v
            shift[j] = m if np.isfinite(m) else 0.0
        _chunk_exps(x, first, nl, length, stride, shift, e)
        for j in range(nl):
            start = line_start(first + j, length, stride)
            s = 0.0
            for k in range(length):
                s += e[ux(j * length + k)]
            c = shift[j] + np.log(s)
            for k in range(length):
                i = ux(start + k * stride)
                out[i] = x[i] - c
    return OK


@jit
def log_softmax_bwd(dt, node, tp):
    """``gx += g - softmax * sum(g)`` along each line, the softmax being ``exp(out)``
    (each element once: a fresh gx is stored into); by chunks as the forward."""
    h = header(tp)
    f = is_fresh(fresh_bits(h, node), 0)
    g = out_grad(h, node, 0, dt)
    out = out_data(h, node, 0, dt)
    gx = in_grad(h, node, 0, dt)
    count, length, stride = lines(in_shape(h, node, 0), node_ip(h, node)[0])
    per, e, zero = _chunks(length, stride)
    for first in range(0, count, per):
        nl = min(per, count - first)
        _chunk_exps(out, first, nl, length, stride, zero, e)
        for j in range(nl):
            start = line_start(first + j, length, stride)
            sg = 0.0
            for k in range(length):
                sg += g[ux(start + k * stride)]
            for k in range(length):
                i = ux(start + k * stride)
                put(gx, i, g[i] - e[ux(j * length + k)] * sg, f)
    return OK
