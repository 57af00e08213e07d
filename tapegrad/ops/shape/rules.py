"""The shape rows' recorded rules: linear rows apply themselves to the tangent and
their transpose to the cotangent (a gather's transpose is ``scatter_add``, and back)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...derivatives import attach, fit_tangent, input_zeros, sum_to
from ...rule_walks import NodeView
from ...tensors import Tensor
from .front import (
    astype,
    concatenate,
    gather_positions,
    getitem,
    reshape,
    scatter_add,
    transpose,
    where,
)

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
        reshape(t if t is not None else input_zeros(node, i), (outer, n, inner))
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
    return [fit_tangent(where(node.ins[0], tx, ty), node.out_shapes[0], node.dtype)]


attach(
    {
        "astype": (_astype_vjp, _astype_jvp),
        "reshape": (_reshape_vjp, _reshape_jvp),
        "transpose": (_transpose_vjp, _transpose_jvp),
        "getitem": (_gather_vjp, _gather_jvp),
        "scatter_add": (_scatter_vjp, _scatter_jvp),
        "concatenate": (_concatenate_vjp, _concatenate_jvp),
        "where": (_where_vjp, _where_jvp),
    }
)
