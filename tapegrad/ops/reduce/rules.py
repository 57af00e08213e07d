"""The reductions' recorded rules: sums and cumulative sums (linear), products,
extrema (ties share the gradient) and cumulative products."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...derivatives import attach, expand_reduced, kept_shape, reduced_axes
from ...recording import as_tensor
from ...rule_walks import NodeView
from ...tensors import Tensor
from ..shape.front import (
    broadcast_to,
    concatenate,
    flip,
    getitem,
    reshape,
    swapaxes,
    transpose,
    where,
)
from .front import cumprod, cumsum
from .front import sum as rsum


def _sum_vjp(node: NodeView, grads: list) -> list:
    # int parameters: (number of axes, axes...); float parameter: the scale (1/count for
    # a mean)
    return [expand_reduced(grads[0], node) * node.fp[0]]


def _sum_jvp(node: NodeView, tangents: list) -> list:
    r = rsum(tangents[0], axis=reduced_axes(node)) * node.fp[0]
    return [reshape(r, node.out_shapes[0])]


def _cumsum_vjp(node: NodeView, grads: list) -> list:
    ax = node.ip[0]
    return [flip(cumsum(flip(grads[0], ax), ax), ax)]


def _cumsum_jvp(node: NodeView, tangents: list) -> list:
    return [cumsum(tangents[0], node.ip[0])]


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
    x, perm = _last_axis(node.ins[0], reduced_axes(node))
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
    g, _ = _last_axis(
        broadcast_to(expand_reduced(grads[0], node), node.in_shapes[0]), reduced_axes(node)
    )
    return [_unmerge(g * others, node, perm), None, None]


def _prod_jvp(node: NodeView, tangents: list) -> list:
    others, _ = _others(node)
    t, _ = _last_axis(tangents[0], reduced_axes(node))
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
    keep = kept_shape(node.in_shapes[0], reduced_axes(node))
    hit = x == out.reshape(keep)
    return hit / np.sum(hit, axis=reduced_axes(node), keepdims=True).astype(node.dtype)


def _extreme_vjp(node: NodeView, grads: list) -> list:
    return [expand_reduced(grads[0], node) * _ties(node).astype(node.dtype)]


def _extreme_jvp(node: NodeView, tangents: list) -> list:
    t = rsum(tangents[0] * _ties(node).astype(node.dtype), axis=reduced_axes(node))
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


attach(
    {
        "sum": (_sum_vjp, _sum_jvp),
        "mean": (_sum_vjp, _sum_jvp),
        "prod": (_prod_vjp, _prod_jvp),
        "max": (_extreme_vjp, _extreme_jvp),
        "min": (_extreme_vjp, _extreme_jvp),
        "cumsum": (_cumsum_vjp, _cumsum_jvp),
        "cumprod": (_cumprod_vjp, _cumprod_jvp),
    }
)
