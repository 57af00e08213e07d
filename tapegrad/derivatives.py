"""Every differentiable row's derivative as recorded ops: ``Op.vjp`` and ``Op.jvp``.

The compiled kernels are the first-order backward. The rules here serve the modes
that need derivatives *as ops*: ``create_graph`` / nested transforms (reverse, the
gradient is recorded so it can be differentiated again) and forward mode (tangents).
:mod:`tapegrad.graphwalk` calls them with a :class:`~tapegrad.graphwalk.NodeView`.

* **Elementwise rows** need nothing new: their scalar backward formulas are written
  in the vocabulary of :mod:`tapegrad.ops.vocabulary`, so the *same* Python function,
  called with tensors, records its derivative. Reverse: ``formula_i(g, x, y, out)``
  summed down to input ``i``'s shape. Forward: a formula is linear in ``g`` and equals
  ``g * d out / d x_i``, so the tangent is ``sum_i formula_i(t_i, x, y, out)``.
* **Linear array rows** (reshape, transpose, gather, scatter, concatenate, sum, cumsum,
  cast) apply themselves to the tangent, and their transpose to the cotangent (a
  gather's transpose is the ``scatter_add`` row, and back).
* **The others** (matmul, inv, det, slogdet, solve, cholesky, prod, max, min, cumprod,
  log_softmax) state both rules below, next to each other. ``tests/test_higher.py``
  checks every rule against the compiled kernel (first order), central differences
  (second order, tangents) and the other mode (``<u, J v>`` both ways), for every case
  of the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .frontends.convolution import convolution
from .frontends.linalg import inv, matmul, solve
from .frontends.reduce import cumprod, cumsum
from .frontends.reduce import sum as rsum
from .frontends.scipy_linalg import row_permutation, solve_triangular, take_rows
from .frontends.shape import (
    astype,
    broadcast_to,
    concatenate,
    diagonal,
    flip,
    gather_positions,
    getitem,
    reshape,
    scatter_add,
    swapaxes,
    transpose,
    where,
)
from .graphwalk import NodeView
from .ops import BY_NAME, ROWS, Kind
from .ops.special import stirling_correction
from .tensors import Tensor, as_tensor, elementwise

Rule = Callable[[NodeView, list], list]


# --- shape helpers -----------------------------------------------------------------------


def sum_to(
    t: Any, shape: tuple[int, ...], dtype: np.dtype, full: tuple[int, ...] | None = None
) -> Tensor:
    """``t`` summed over the axes broadcasting added to ``shape`` (the broadcast
    reduction of every backward), cast to ``dtype``.

    ``t`` stands for a value of shape ``full`` (default: its own): a reduction's
    cotangent reaches an elementwise rule broadcastable to the node's output rather than
    broadcast (``graphwalk.full``), and a rule like ``add``'s passes it on unchanged. An
    axis of length 1 in ``t`` that stands for ``n`` elements of ``full`` sums to ``n``
    times its value, so it is scaled, not summed (summing a length-1 axis would count
    each broadcast copy once instead of ``n`` times)."""
    t = as_tensor(t)
    full = t.shape if full is None else np.broadcast_shapes(t.shape, tuple(full))
    if t.shape != shape or full != shape:
        lead = len(full) - len(shape)  # axes of full that shape does not have
        skip = len(full) - t.ndim  # axes of full that t does not have
        axes, scale = [], 1
        for d, n in enumerate(full):
            if d >= lead and (shape[d - lead] != 1 or n == 1):
                continue  # kept: not a broadcast axis of this input
            if d >= skip and t.shape[d - skip] != 1:
                axes.append(d - skip)  # t holds the n values: add them up
            else:
                scale *= n  # t holds one value standing for n copies
        if axes:
            t = rsum(t, axis=tuple(axes), keepdims=True)
        if t.ndim > len(shape):  # leading axes, all of length 1 now
            t = reshape(t, t.shape[t.ndim - len(shape) :])
        if t.shape != shape:
            t = broadcast_to(t, shape)
        if scale != 1:
            t = t * scale
    return t if t.dtype == dtype else astype(t, dtype)


def _fit(t: Any, shape: tuple[int, ...], dtype: np.dtype) -> Tensor:
    """``t`` broadcast to ``shape`` and cast to ``dtype`` (a tangent that did not
    depend on every operand, like ``add``'s ``t_x``)."""
    t = as_tensor(t)
    if t.shape != shape:
        t = broadcast_to(t, shape)
    return t if t.dtype == dtype else astype(t, dtype)


def _zeros_like(node: NodeView, i: int) -> np.ndarray:
    return np.zeros(node.in_shapes[i], node.in_dtypes[i])


def _mT(t: Any) -> Tensor:
    return swapaxes(t, -1, -2)


def _keep(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def _axes(node: NodeView) -> tuple[int, ...]:
    """A reduction's axes (its int parameters: count, then the axes)."""
    return tuple(node.ip[1 : 1 + node.ip[0]])


def _expand(g: Any, node: NodeView) -> Tensor:
    """A reduction's cotangent with the reduced axes of its input put back, as axes of
    length 1: broadcastable to the input, not broadcast (``graphwalk.full``)."""
    return reshape(g, _keep(node.in_shapes[0], _axes(node)))


# --- elementwise rows: the formulas themselves -------------------------------------------


def _elementwise_rules(op: Any) -> tuple[Rule, Rule]:
    formulas = [getattr(f, "py_func", f) for f in op.backward_formulas]

    def vjp(node: NodeView, grads: list) -> list:
        args = (*node.ins, node.outs[0])
        full = node.out_shapes[0]
        return [
            sum_to(f(grads[0], *args), node.in_shapes[i], node.in_dtypes[i], full)
            if node.needs[i]
            else None
            for i, f in enumerate(formulas)
        ]

    def jvp(node: NodeView, tangents: list) -> list:
        args = (*node.ins, node.outs[0])
        total = None
        for f, t in zip(formulas, tangents):
            if t is not None:
                term = f(t, *args)
                total = term if total is None else total + term
        return [_fit(total, node.out_shapes[0], node.out_dtypes[0])]

    return vjp, jvp


# --- linear array rows -------------------------------------------------------------------


def _astype_vjp(node: NodeView, grads: list) -> list:
    return [astype(grads[0], node.in_dtypes[0])]


def _astype_jvp(node: NodeView, tangents: list) -> list:
    return [astype(tangents[0], node.out_dtypes[0])]


def _reshape_vjp(node: NodeView, grads: list) -> list:
    return [reshape(grads[0], node.in_shapes[0])]


def _reshape_jvp(node: NodeView, tangents: list) -> list:
    return [reshape(tangents[0], node.out_shapes[0])]


def _transpose_vjp(node: NodeView, grads: list) -> list:
    return [transpose(grads[0], np.argsort(node.ip))]


def _transpose_jvp(node: NodeView, tangents: list) -> list:
    return [transpose(tangents[0], node.ip)]


def _positions(node: NodeView) -> np.ndarray:
    """A gather's or scatter's flat positions (int parameters, or its int64 input 1)."""
    if len(node.ins) == 1:
        return np.asarray(node.ip, np.int64)
    return np.asarray(node.ins[1], np.int64).reshape(-1)


def _gather(t: Any, where: np.ndarray, shape: tuple[int, ...]) -> Tensor:
    return gather_positions(t, lambda p: p.reshape(-1)[where].reshape(shape))


def _gather_vjp(node: NodeView, grads: list) -> list:
    return [scatter_add(grads[0], _positions(node), node.in_shapes[0]), None]


def _gather_jvp(node: NodeView, tangents: list) -> list:
    return [_gather(tangents[0], _positions(node), node.out_shapes[0])]


def _scatter_vjp(node: NodeView, grads: list) -> list:
    return [_gather(grads[0], _positions(node), node.in_shapes[0]), None]


def _scatter_jvp(node: NodeView, tangents: list) -> list:
    return [scatter_add(tangents[0], _positions(node), node.out_shapes[0])]


def _concatenate_vjp(node: NodeView, grads: list) -> list:
    # int parameters: (outer, inner, total, size_0, size_1, ...) of the (outer, total,
    # inner) view every operand and the result share
    outer, inner, total, *sizes = node.ip
    g3 = reshape(grads[0], (outer, total, inner))
    out, start = [], 0
    for i, n in enumerate(sizes):
        piece = getitem(g3, (slice(None), slice(start, start + n), slice(None)))
        out.append(reshape(piece, node.in_shapes[i]) if node.needs[i] else None)
        start += n
    return out


def _concatenate_jvp(node: NodeView, tangents: list) -> list:
    outer, inner, _, *sizes = node.ip
    parts = [
        reshape(t if t is not None else _zeros_like(node, i), (outer, n, inner))
        for i, (t, n) in enumerate(zip(tangents, sizes))
    ]
    return [reshape(concatenate(parts, axis=1), node.out_shapes[0])]


def _where_vjp(node: NodeView, grads: list) -> list:
    c, g = node.ins[0], grads[0]
    zero = np.zeros((), node.dtype)
    out: list = [None, None, None]
    for i, (a, b) in ((1, (g, zero)), (2, (zero, g))):
        if node.needs[i]:
            out[i] = sum_to(
                where(c, a, b), node.in_shapes[i], node.in_dtypes[i], node.out_shapes[0]
            )
    return out


def _where_jvp(node: NodeView, tangents: list) -> list:
    tx = tangents[1] if tangents[1] is not None else np.zeros((), node.dtype)
    ty = tangents[2] if tangents[2] is not None else np.zeros((), node.dtype)
    return [_fit(where(node.ins[0], tx, ty), node.out_shapes[0], node.dtype)]


def _sum_vjp(node: NodeView, grads: list) -> list:
    # int parameters: (number of axes, axes...); float parameter: the scale (1/count for
    # a mean)
    return [_expand(grads[0], node) * node.fp[0]]


def _sum_jvp(node: NodeView, tangents: list) -> list:
    r = rsum(tangents[0], axis=_axes(node)) * node.fp[0]
    return [reshape(r, node.out_shapes[0])]


def _cumsum_vjp(node: NodeView, grads: list) -> list:
    ax = node.ip[0]
    return [flip(cumsum(flip(grads[0], ax), ax), ax)]


def _cumsum_jvp(node: NodeView, tangents: list) -> list:
    return [cumsum(tangents[0], node.ip[0])]


# --- the others: both rules side by side --------------------------------------------------


def _as_matrices(node: NodeView) -> tuple[Tensor, Tensor, tuple, tuple]:
    """matmul's operands as stacks of matrices (a 1-D x a row, a 1-D y a column)."""
    x, y = as_tensor(node.ins[0]), as_tensor(node.ins[1])
    xm = reshape(x, (1, *x.shape)) if x.ndim == 1 else x
    ym = reshape(y, (*y.shape, 1)) if y.ndim == 1 else y
    return xm, ym, xm.shape, ym.shape


def _matmul_vjp(node: NodeView, grads: list) -> list:
    # out = x @ y: gx = g @ y^T, gy = x^T @ g, summed over broadcast batch axes
    xm, ym, xs, ys = _as_matrices(node)
    batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    g = reshape(grads[0], (*batch, xs[-2], ys[-1]))
    gx = sum_to(matmul(g, _mT(ym)), xs, node.dtype) if node.needs[0] else None
    gy = sum_to(matmul(_mT(xm), g), ys, node.dtype) if node.needs[1] else None
    return [
        None if gx is None else reshape(gx, node.in_shapes[0]),
        None if gy is None else reshape(gy, node.in_shapes[1]),
    ]


def _matmul_jvp(node: NodeView, tangents: list) -> list:
    # d(x @ y) = dx @ y + x @ dy
    tx, ty = tangents
    total = None
    if tx is not None:
        total = matmul(tx, node.ins[1])
    if ty is not None:
        term = matmul(node.ins[0], ty)
        total = term if total is None else total + term
    return [total]


def _inv_vjp(node: NodeView, grads: list) -> list:
    # d inv(A) = -inv(A) dA inv(A): gA = -inv(A)^T g inv(A)^T
    w = _mT(node.outs[0])
    return [-matmul(matmul(w, grads[0]), w)]


def _inv_jvp(node: NodeView, tangents: list) -> list:
    w = node.outs[0]
    return [-matmul(matmul(w, tangents[0]), w)]


def _logdet_grad(node: NodeView) -> Tensor:
    """d log|det A| / dA = inv(A)^T."""
    return _mT(inv(node.ins[0]))


def _det_vjp(node: NodeView, grads: list) -> list:
    # d det A = det A tr(inv(A) dA)
    scale = reshape(grads[0] * node.outs[0], (*node.out_shapes[0], 1, 1))
    return [scale * _logdet_grad(node)]


def _det_jvp(node: NodeView, tangents: list) -> list:
    return [node.outs[0] * rsum(_logdet_grad(node) * tangents[0], axis=(-2, -1))]


def _slogdet_vjp(node: NodeView, grads: list) -> list:
    # outputs (sign, log|det|): the sign is piecewise constant
    if grads[1] is None:
        return [None]
    return [reshape(grads[1], (*node.out_shapes[1], 1, 1)) * _logdet_grad(node)]


def _slogdet_jvp(node: NodeView, tangents: list) -> list:
    return [None, rsum(_logdet_grad(node) * tangents[0], axis=(-2, -1))]


def _solve_vjp(node: NodeView, grads: list) -> list:
    # x = A^-1 b: gb = A^-T g, gA = -gb x^T
    a = node.ins[0]
    gb = solve(_mT(a), grads[0])
    ga = -matmul(gb, _mT(node.outs[0])) if node.needs[0] else None
    return [ga, gb if node.needs[1] else None]


def _solve_jvp(node: NodeView, tangents: list) -> list:
    # dx = A^-1 (db - dA x)
    ta, tb = tangents
    rhs = tb if tb is not None else np.zeros(node.out_shapes[0], node.dtype)
    if ta is not None:
        rhs = rhs - matmul(ta, node.outs[0])
    return [solve(node.ins[0], rhs)]


def _sym(t: Any) -> Tensor:
    """(t + t^T) / 2. eigh and cholesky read one triangle, but their derivatives are
    those of A -> f((A + A^T) / 2), the convention of PyTorch and JAX for symmetric
    inputs: the reverse rules symmetrise the gradient, so the forward rules take the
    symmetric part of the tangent (then <u, J v> = <J^T u, v> in every direction)."""
    return 0.5 * (t + _mT(t))


def _phi(n: int, dtype: np.dtype) -> np.ndarray:
    """The lower triangle with the diagonal halved, as a mask (Murray 2016's Phi)."""
    return np.tril(np.ones((n, n), dtype)) - 0.5 * np.eye(n, dtype=dtype)


def _cholesky_vjp(node: NodeView, grads: list) -> list:
    # gA = sym(L^-T Phi(L^T gL) L^-1), symmetrised as the compiled kernel (and PyTorch)
    low = node.outs[0]
    n = node.in_shapes[0][-1]
    w = inv(low)
    s = matmul(matmul(_mT(w), matmul(_mT(low), grads[0]) * _phi(n, node.dtype)), w)
    return [0.5 * (s + _mT(s))]


def _cholesky_jvp(node: NodeView, tangents: list) -> list:
    # dL = L Phi(L^-1 dA L^-T), dA's symmetric part (see _sym)
    low = node.outs[0]
    n = node.in_shapes[0][-1]
    w = inv(low)
    return [matmul(low, matmul(matmul(w, _sym(tangents[0])), _mT(w)) * _phi(n, node.dtype))]


def _last_axis(t: Any, axes: tuple[int, ...]) -> tuple[Tensor, tuple[int, ...]]:
    """``t`` with the reduced ``axes`` moved last and merged into one; and the
    permutation used."""
    t = as_tensor(t)
    keep = [d for d in range(t.ndim) if d not in axes]
    perm = (*keep, *axes)
    moved = transpose(t, perm)
    m = math.prod(t.shape[d] for d in axes)
    return reshape(moved, (*moved.shape[: len(keep)], m)), perm


def _others(node: NodeView) -> tuple[Tensor, tuple[int, ...]]:
    """For prod: each element's product of the *other* reduced elements, from
    exclusive products on both sides (exact with zeros; no division)."""
    x, perm = _last_axis(node.ins[0], _axes(node))
    ones = np.ones((*x.shape[:-1], 1), node.dtype)
    left = concatenate([ones, cumprod(getitem(x, (..., slice(None, -1))), axis=-1)], axis=-1)
    rev = flip(x, -1)
    right = concatenate([ones, cumprod(getitem(rev, (..., slice(None, -1))), axis=-1)], axis=-1)
    return left * flip(right, -1), perm


def _unmerge(t: Tensor, node: NodeView, perm: tuple[int, ...]) -> Tensor:
    """Undo :func:`_last_axis` on a tensor of the merged shape."""
    shape = node.in_shapes[0]
    moved = reshape(t, tuple(shape[d] for d in perm))
    return transpose(moved, np.argsort(perm))


def _prod_vjp(node: NodeView, grads: list) -> list:
    others, perm = _others(node)
    g, _ = _last_axis(broadcast_to(_expand(grads[0], node), node.in_shapes[0]), _axes(node))
    return [_unmerge(g * others, node, perm), None, None]


def _prod_jvp(node: NodeView, tangents: list) -> list:
    others, _ = _others(node)
    t, _ = _last_axis(tangents[0], _axes(node))
    return [reshape(rsum(t * others, axis=-1), node.out_shapes[0]), None, None]


def _values_read(node: NodeView, what: str) -> None:
    """A rule that decides on values cannot be captured: replay would reuse them."""
    if node.capturing:
        raise NotImplementedError(
            f"tg.compile cannot capture the recorded derivative of {what}: it depends on "
            "which elements are selected, a decision on values the program would not "
            "re-check. Differentiate it eagerly (tg.grad) instead"
        )


def _ties(node: NodeView) -> np.ndarray:
    """max / min: where the input equals its result, divided by the number of ties
    (constants: the selection is piecewise constant)."""
    _values_read(node, node.op.name)
    x = np.asarray(node.ins[0]) if not isinstance(node.ins[0], Tensor) else node.ins[0].numpy()
    out = node.outs[0].numpy() if isinstance(node.outs[0], Tensor) else node.outs[0]
    keep = _keep(node.in_shapes[0], _axes(node))
    hit = x == out.reshape(keep)
    return hit / np.sum(hit, axis=_axes(node), keepdims=True).astype(node.dtype)


def _extreme_vjp(node: NodeView, grads: list) -> list:
    return [_expand(grads[0], node) * _ties(node).astype(node.dtype)]


def _extreme_jvp(node: NodeView, tangents: list) -> list:
    t = rsum(tangents[0] * _ties(node).astype(node.dtype), axis=_axes(node))
    return [reshape(t, node.out_shapes[0]), None]


# cumprod: out_i = prod_{k <= i} x_k. With P[j, i] = prod_{k <= i, k != j} x_k, the
# gradient is gx_j = sum_{i >= j} g_i P[j, i] and the tangent dout_i = sum_{j <= i} t_j
# P[j, i]. P comes from a cumprod over i of x with x_j replaced by 1 (exact with
# zeros, O(n^2) memory per row); a long axis uses out_i / x_j instead, which needs
# non-zero x.
_CUMPROD_SQUARE = 1024


def _cumprod_matrix(node: NodeView) -> tuple[Tensor, int]:
    ax = node.ip[0]
    x = swapaxes(node.ins[0], ax, -1)
    n = x.shape[-1]
    eye = np.eye(n, dtype=bool)
    rep = where(eye, np.ones((), node.dtype), reshape(x, (*x.shape[:-1], 1, n)))
    return cumprod(rep, axis=-1), ax  # [..., j, i]


def _cumprod_long(node: NodeView, name: str) -> None:
    _values_read(node, "cumprod along a long axis")
    x = node.ins[0]
    values = x.numpy() if isinstance(x, Tensor) else np.asarray(x)
    if np.any(values == 0):
        raise NotImplementedError(
            f"{name} of cumprod along an axis of length > {_CUMPROD_SQUARE} with zeros "
            "in the input is not supported"
        )


def _cumprod_vjp(node: NodeView, grads: list) -> list:
    ax = node.ip[0]
    if node.in_shapes[0][ax] > _CUMPROD_SQUARE:
        _cumprod_long(node, "create_graph")
        acc = flip(cumsum(flip(grads[0] * node.outs[0], ax), ax), ax)
        return [acc / node.ins[0]]
    p, ax = _cumprod_matrix(node)
    n = p.shape[-1]
    upper = np.triu(np.ones((n, n), node.dtype))  # [j, i]: i >= j
    g = swapaxes(grads[0], ax, -1)
    gx = rsum(p * upper * reshape(g, (*g.shape[:-1], 1, n)), axis=-1)
    return [swapaxes(gx, ax, -1)]


def _cumprod_jvp(node: NodeView, tangents: list) -> list:
    ax = node.ip[0]
    t = tangents[0]
    if node.in_shapes[0][ax] > _CUMPROD_SQUARE:
        _cumprod_long(node, "forward mode")
        return [node.outs[0] * cumsum(t / node.ins[0], ax)]
    p, ax = _cumprod_matrix(node)
    n = p.shape[-1]
    upper = np.triu(np.ones((n, n), node.dtype))
    tm = swapaxes(t, ax, -1)
    d = rsum(p * upper * reshape(tm, (*tm.shape[:-1], n, 1)), axis=-2)
    return [swapaxes(d, ax, -1)]


def _log_softmax_vjp(node: NodeView, grads: list) -> list:
    # out = x - logsumexp(x): gx = g - softmax(x) sum(g)
    ax = node.ip[0]
    g = grads[0]
    return [g - np.exp(node.outs[0]) * rsum(g, axis=ax, keepdims=True)]


def _log_softmax_jvp(node: NodeView, tangents: list) -> list:
    ax = node.ip[0]
    t = tangents[0]
    return [t - rsum(np.exp(node.outs[0]) * t, axis=ax, keepdims=True)]


# --- decompositions ------------------------------------------------------------------------
# The same formulas as the compiled kernels (kernels/linalg.py), in recorded ops; a
# missing output cotangent (None) drops its terms.


def _eye(n: int, dtype: np.dtype) -> np.ndarray:
    return np.eye(n, dtype=dtype)


def _diag_embed(v: Any, n: int, dtype: np.dtype) -> Tensor:
    return reshape(v, (*as_tensor(v).shape, 1)) * _eye(n, dtype)


def _diag_part(t: Any) -> Tensor:
    return diagonal(t, 0, -2, -1)


def _row(v: Any) -> Tensor:
    """(..., n) -> (..., 1, n): scales columns when multiplied."""
    return reshape(v, (*as_tensor(v).shape[:-1], 1, as_tensor(v).shape[-1]))


def _col(v: Any) -> Tensor:
    """(..., n) -> (..., n, 1): scales rows when multiplied."""
    return reshape(v, (*as_tensor(v).shape, 1))


def _gaps(w: Any, n: int, dtype: np.dtype) -> Tensor:
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    eye = _eye(n, dtype)
    return (1.0 - eye) / (_row(w) - _col(w) + eye)


def _eigh_vjp(node: NodeView, grads: list) -> list:
    # gA = V (diag(gw) + sym(F o V^T gV)) V^T
    w, v = node.outs
    gw, gv = grads
    n, dt = node.in_shapes[0][-1], node.dtype
    inner = _diag_embed(gw, n, dt) if gw is not None else np.zeros(node.in_shapes[0], dt)
    if gv is not None:
        m = matmul(_mT(v), gv)
        inner = inner + 0.5 * _gaps(w, n, dt) * (m - _mT(m))
    return [matmul(matmul(v, inner), _mT(v))]


def _eigh_jvp(node: NodeView, tangents: list) -> list:
    # P = V^T dA V: dw = diag(P), dV = V (F o P)
    w, v = node.outs
    n, dt = node.in_shapes[0][-1], node.dtype
    p = matmul(matmul(_mT(v), _sym(tangents[0])), v)
    return [_diag_part(p), matmul(v, _gaps(w, n, dt) * p)]


def _svd_gaps(s: Any, n: int, dtype: np.dtype) -> Tensor:
    """F_ij = 1 / (s_j^2 - s_i^2) off the diagonal."""
    return _gaps(s * s, n, dtype)


def _svd_vjp(node: NodeView, grads: list) -> list:
    s, u, vh = node.outs
    gs, gu, gvh = grads
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    f = _svd_gaps(s, k, dt)
    inner = _diag_embed(gs, k, dt) if gs is not None else np.zeros((k, k), dt)
    out = None
    if gu is not None:
        j = matmul(_mT(u), gu)
        inner = inner + f * (j - _mT(j)) * _row(s)
        if m > k:  # (gU - U J) S^-1 Vh
            out = matmul((gu - matmul(u, j)) / _row(s), vh)
    if gvh is not None:
        kk = matmul(vh, _mT(gvh))
        inner = inner + f * (kk - _mT(kk)) * _col(s)
        if n > k:  # U S^-1 (gVh - K^T Vh)
            term = matmul(u / _row(s), gvh - matmul(_mT(kk), vh))
            out = term if out is None else out + term
    main = matmul(matmul(u, inner), vh)
    return [main if out is None else main + out]


def _svd_jvp(node: NodeView, tangents: list) -> list:
    # P = U^T dA V: dS = diag(P), dU = U (F o (P S + S P^T)) + (I - U U^T) dA V S^-1,
    # dV = V (F o (S P + P^T S)) + (I - V V^T) dA^T U S^-1 (JAX's rule)
    s, u, vh = node.outs
    t = tangents[0]
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    f = _svd_gaps(s, k, dt)
    v = _mT(vh)
    p = matmul(matmul(_mT(u), t), v)
    du = matmul(u, f * (p * _row(s) + _mT(p) * _col(s)))
    dv = matmul(v, f * (p * _col(s) + _mT(p) * _row(s)))
    if m > k:
        dav = matmul(t, v)
        du = du + (dav - matmul(u, matmul(_mT(u), dav))) / _row(s)
    if n > k:
        dau = matmul(_mT(t), u)
        dv = dv + (dau - matmul(v, matmul(vh, dau))) / _row(s)
    return [_diag_part(p), du, _mT(dv)]


def _columns(t: Any, lo: int, hi: int | None) -> Tensor:
    return getitem(t, (Ellipsis, slice(None), slice(lo, hi)))


def _qr_vjp(node: NodeView, grads: list) -> list:
    # square / tall: gA = (Q N + gQ) R^-T, M = Q^T gQ - gR R^T, N = tril(M - M^T, -1) - M;
    # wide [X | Y]: gY = Q gV, and X gets the square rule with gQ + Y gV^T
    q, r = node.outs
    gq, gr = grads
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    gq = gq if gq is not None else np.zeros(node.out_shapes[0], dt)
    gr = gr if gr is not None else np.zeros(node.out_shapes[1], dt)
    gy = None
    if n > k:
        grv = _columns(gr, k, None)
        gq = gq + matmul(_columns(node.ins[0], k, None), _mT(grv))
        gy = matmul(q, grv)
        gr = _columns(gr, 0, k)
    rk = _columns(r, 0, k)
    mm = matmul(_mT(q), gq) - matmul(gr, _mT(rk))
    nn = (mm - _mT(mm)) * np.tril(np.ones((k, k), dt), -1) - mm
    gx = _mT(solve(rk, _mT(matmul(q, nn) + gq)))
    return [gx if gy is None else concatenate([gx, gy], axis=-1)]


def _qr_jvp(node: NodeView, tangents: list) -> list:
    # B = dX R^-1, C = Q^T B, dO = tril(C, -1) - tril(C, -1)^T: dQ = Q (dO - C) + B,
    # dR = (C - dO) R (JAX's rule, square / tall); wide: dV = dQ^T Y + Q^T dY
    q, r = node.outs
    t = tangents[0]
    m, n = node.in_shapes[0][-2:]
    k, dt = min(m, n), node.dtype
    rk = _columns(r, 0, k)
    b = _mT(solve(_mT(rk), _mT(_columns(t, 0, k))))
    c = matmul(_mT(q), b)
    low = c * np.tril(np.ones((k, k), dt), -1)
    do = low - _mT(low)
    dq = matmul(q, do - c) + b
    dr = matmul(c - do, rk)
    if n > k:
        dv = matmul(_mT(dq), _columns(node.ins[0], k, None)) + matmul(_mT(q), _columns(t, k, None))
        dr = concatenate([dr, dv], axis=-1)
    return [dq, dr]


def _eig_vjp(node: NodeView, grads: list) -> list:
    # gA = V^-T (diag(gw) + F o (G - V^T V diag(G))) V^T, G = V^T gV
    w, v = node.outs
    gw, gv = grads
    n, dt = node.in_shapes[0][-1], node.dtype
    inner = _diag_embed(gw, n, dt) if gw is not None else np.zeros(node.in_shapes[0], dt)
    if gv is not None:
        g = matmul(_mT(v), gv)
        h = g - matmul(_mT(v), v) * _row(_diag_part(g))
        inner = inner + _gaps(w, n, dt) * h
    return [solve(_mT(v), matmul(inner, _mT(v)))]


def _eig_jvp(node: NodeView, tangents: list) -> list:
    # P = V^-1 dA V: dw = diag(P), dV = V (E - diag(V^T V E)), E = F o P
    w, v = node.outs
    n, dt = node.in_shapes[0][-1], node.dtype
    p = solve(v, matmul(tangents[0], v))
    e = _gaps(w, n, dt) * p
    dv = matmul(v, e) - v * _row(_diag_part(matmul(matmul(_mT(v), v), e)))
    return [_diag_part(p), dv]


def _pinv_vjp(node: NodeView, grads: list) -> list:
    # gA = -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)
    a, x = node.ins[0], node.outs[0]
    g = grads[0]
    xt, gt = _mT(x), _mT(g)
    t2 = matmul(gt, matmul(x, xt))
    t3 = matmul(matmul(xt, x), gt)
    return [
        -matmul(matmul(xt, g), xt) + t2 - matmul(a, matmul(x, t2)) + t3 - matmul(matmul(t3, x), a)
    ]


def _pinv_jvp(node: NodeView, tangents: list) -> list:
    # dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X
    a, x = node.ins[0], node.outs[0]
    t = tangents[0]
    xt, tt = _mT(x), _mT(t)
    w1 = matmul(x, matmul(xt, tt))
    w2 = matmul(tt, matmul(xt, x))
    return [
        -matmul(matmul(x, t), x) + w1 - matmul(matmul(w1, a), x) + w2 - matmul(x, matmul(a, w2))
    ]


def _triangle(ip: list, n: int, dtype: np.dtype) -> np.ndarray:
    """The entries of a that solve_triangular reads (ip: lower, trans, unit at 3-5)."""
    ones = np.ones((n, n), dtype)
    mask = np.tril(ones) if ip[3] else np.triu(ones)
    return mask - np.eye(n, dtype=dtype) if ip[5] else mask


def _solve_triangular_vjp(node: NodeView, grads: list) -> list:
    # gb = op(A)^-T g; gA = -gb x^T (-x gb^T when op transposes) on the triangle read
    ip = node.ip
    n, dt = ip[1], node.dtype
    a, x = node.ins[0], node.outs[0]
    gb = solve_triangular(
        a, grads[0], trans=1 - ip[4], lower=bool(ip[3]), unit_diagonal=bool(ip[5])
    )
    ga = None
    if node.needs[0]:
        outer = matmul(x, _mT(gb)) if ip[4] else matmul(gb, _mT(x))
        ga = -outer * _triangle(ip, n, dt)
    return [ga, gb if node.needs[1] else None]


def _solve_triangular_jvp(node: NodeView, tangents: list) -> list:
    # dx = op(A)^-1 (db - op(dA) x), dA on the triangle read
    ip = node.ip
    n, dt = ip[1], node.dtype
    ta, tb = tangents
    rhs = tb if tb is not None else np.zeros(node.out_shapes[0], dt)
    if ta is not None:
        da = ta * _triangle(ip, n, dt)
        rhs = rhs - matmul(_mT(da) if ip[4] else da, node.outs[0])
    return [
        solve_triangular(
            node.ins[0], rhs, trans=ip[4], lower=bool(ip[3]), unit_diagonal=bool(ip[5])
        )
    ]


def _lu_parts(node: NodeView) -> tuple[Tensor, np.ndarray, int, np.dtype]:
    lu = node.outs[0]
    n, dt = node.in_shapes[0][-1], node.dtype
    piv = node.outs[1]
    piv = piv._value() if isinstance(piv, Tensor) else piv  # a guard while capturing
    return lu, row_permutation(np.asarray(piv).astype(np.int64)), n, dt


def _lu_factor_vjp(node: NodeView, grads: list) -> list:
    # gA = P^T L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T
    lu, perm, n, dt = _lu_parts(node)
    g = grads[0]
    strict = np.tril(np.ones((n, n), dt), -1)
    upper = np.triu(np.ones((n, n), dt))
    low = lu * strict + _eye(n, dt)
    up = lu * upper
    z = matmul(_mT(low), g * strict) * strict + matmul(g * upper, _mT(up)) * upper
    y = solve_triangular(lu, z, trans=1, lower=True, unit_diagonal=True)
    w = _mT(solve_triangular(lu, _mT(y), lower=False))
    return [take_rows(w, np.argsort(perm, axis=-1))]


def _lu_factor_jvp(node: NodeView, tangents: list) -> list:
    # X = L^-1 P dA U^-1: dL = L tril(X, -1), dU = triu(X) U
    lu, perm, n, dt = _lu_parts(node)
    strict = np.tril(np.ones((n, n), dt), -1)
    upper = np.triu(np.ones((n, n), dt))
    y = solve_triangular(lu, take_rows(tangents[0], perm), lower=True, unit_diagonal=True)
    x = _mT(solve_triangular(lu, _mT(y), trans=1, lower=False))
    low = lu * strict + _eye(n, dt)
    return [matmul(low, x * strict) + matmul(x * upper, lu * upper), None]


def _convolve_vjp(node: NodeView, grads: list) -> list:
    # out[k] = sum_i a[k + lo - i] v[i]: ga is g convolved with v reversed from offset
    # m - 1 - lo (length n), gv is g convolved with a reversed from n - 1 - lo (length m)
    n, m, lo, _ = node.ip
    a, v = node.ins
    g = grads[0]
    ga = convolution(g, flip(v, 0), m - 1 - lo, n) if node.needs[0] else None
    gv = convolution(g, flip(a, 0), n - 1 - lo, m) if node.needs[1] else None
    return [ga, gv]


def _convolve_jvp(node: NodeView, tangents: list) -> list:
    # bilinear: d out = conv(da, v) + conv(a, dv), the same window
    _, _, lo, length = node.ip
    a, v = node.ins
    ta, tv = tangents
    total = None
    if ta is not None:
        total = convolution(ta, v, lo, length)
    if tv is not None:
        term = convolution(a, tv, lo, length)
        total = term if total is None else total + term
    return [total]


# --- the incomplete beta function -----------------------------------------------------
# In x the derivative is the density x^(a-1) (1-x)^(b-1) / B(a, b), recorded (so it can be
# differentiated again). In a and b the first derivative comes from the differentiated
# continued fraction inside the compiled kernel, which has no recorded form: asking for
# it at second order (or in forward mode) raises rather than return a wrong number.


def _betainc_shape_parameters(node: NodeView, what: str) -> None:
    raise NotImplementedError(
        f"{what} of betainc in a or b is not implemented (its first derivative in a and b "
        "is computed inside the compiled kernel); in x it is"
    )


def _betainc_density(node: NodeView) -> Tensor:
    """The density x^(a-1) (1-x)^(b-1) / B(a, b), recorded. Where a and b are both at
    least 10, in the kernel's form (``betainc_density``: the prefactor's Stirling form,
    DiDonato & Morris), since the plain logs (a log x, log B: ~1e11 for binom.cdf at
    n = 1e12) cancel: the forward-mode derivative in p there was 1e-4 off."""
    a, b, x = (as_tensor(v) for v in node.ins)
    betaln = elementwise(BY_NAME["betaln"], a, b)
    plain = (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x) - betaln
    big = np.minimum(a, b) >= 10.0
    as_, bs = np.where(big, a, 10.0), np.where(big, b, 10.0)  # (safe where not taken)
    d = x * bs - (1.0 - x) * as_
    stirling = (
        0.5 * np.log(as_ * bs / (2.0 * math.pi * (as_ + bs)))
        + as_ * np.log1p(d / as_)
        + bs * np.log1p(-d / bs)
        + stirling_correction(as_ + bs)
        - stirling_correction(as_)
        - stirling_correction(bs)
        - np.log(x)
        - np.log1p(-x)
    )
    return np.exp(np.where(big, stirling, plain))


def _betainc_vjp(node: NodeView, grads: list) -> list:
    if node.needs[0] or node.needs[1]:
        _betainc_shape_parameters(node, "create_graph / second derivatives")
    return [None, None, grads[0] * _betainc_density(node) if node.needs[2] else None]


def _betainc_jvp(node: NodeView, tangents: list) -> list:
    ta, tb, tx = tangents
    if ta is not None or tb is not None:
        _betainc_shape_parameters(node, "forward mode (jvp)")
    return [None if tx is None else tx * _betainc_density(node)]


ARRAY_RULES: dict[str, tuple[Rule, Rule]] = {
    "astype": (_astype_vjp, _astype_jvp),
    "reshape": (_reshape_vjp, _reshape_jvp),
    "transpose": (_transpose_vjp, _transpose_jvp),
    "getitem": (_gather_vjp, _gather_jvp),
    "scatter_add": (_scatter_vjp, _scatter_jvp),
    "concatenate": (_concatenate_vjp, _concatenate_jvp),
    "where": (_where_vjp, _where_jvp),
    "matmul": (_matmul_vjp, _matmul_jvp),
    "inv": (_inv_vjp, _inv_jvp),
    "det": (_det_vjp, _det_jvp),
    "slogdet": (_slogdet_vjp, _slogdet_jvp),
    "solve": (_solve_vjp, _solve_jvp),
    "cholesky": (_cholesky_vjp, _cholesky_jvp),
    "eigh": (_eigh_vjp, _eigh_jvp),
    "svd": (_svd_vjp, _svd_jvp),
    "qr": (_qr_vjp, _qr_jvp),
    "eig": (_eig_vjp, _eig_jvp),
    "pinv": (_pinv_vjp, _pinv_jvp),
    "solve_triangular": (_solve_triangular_vjp, _solve_triangular_jvp),
    "lu_factor": (_lu_factor_vjp, _lu_factor_jvp),
    "convolve": (_convolve_vjp, _convolve_jvp),
    "sum": (_sum_vjp, _sum_jvp),
    "mean": (_sum_vjp, _sum_jvp),
    "prod": (_prod_vjp, _prod_jvp),
    "max": (_extreme_vjp, _extreme_jvp),
    "min": (_extreme_vjp, _extreme_jvp),
    "cumsum": (_cumsum_vjp, _cumsum_jvp),
    "cumprod": (_cumprod_vjp, _cumprod_jvp),
    "log_softmax": (_log_softmax_vjp, _log_softmax_jvp),
    "betainc": (_betainc_vjp, _betainc_jvp),
}


def _attach() -> None:
    for op in ROWS:
        if not op.differentiable or op.bwd is None:
            continue
        if op.kind in (Kind.UNARY, Kind.BINARY):
            op.vjp, op.jvp = _elementwise_rules(op)
        elif op.kind is Kind.ARRAY:
            op.vjp, op.jvp = ARRAY_RULES[op.name]
    missing = [
        op.name
        for op in ROWS
        if op.kind is Kind.ARRAY and op.differentiable and op.name not in ARRAY_RULES
    ]
    if missing:
        raise RuntimeError(f"array rows without recorded derivatives: {missing}")


_attach()
