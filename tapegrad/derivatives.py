"""What every family's recorded rules share: ``Op.vjp`` and ``Op.jvp`` are attached here
(:func:`attach`), and the helpers the rules are written with (``sum_to``, the broadcast
reduction of every backward). The rules themselves live with their rows, in
``ops/<family>/rules.py``.

The compiled kernels are the first-order backward. The rules serve the modes
that need derivatives *as ops*: ``create_graph`` / nested transforms (reverse, the
gradient is recorded so it can be differentiated again) and forward mode (tangents).
:mod:`tapegrad.rule_walks` calls them with a :class:`~tapegrad.rule_walks.NodeView`.

* **Elementwise rows** need nothing new: their scalar backward formulas are written
  in the vocabulary of :mod:`tapegrad.ops.vocabulary`, so the *same* Python function,
  called with tensors, records its derivative. Reverse: ``formula_i(g, x, y, out)``
  summed down to input ``i``'s shape. Forward: a formula is linear in ``g`` and equals
  ``g * d out / d x_i``, so the tangent is ``sum_i formula_i(t_i, x, y, out)``.
* **Linear array rows** (reshape, transpose, gather, scatter, concatenate, sum, cumsum,
  cast) apply themselves to the tangent, and their transpose to the cotangent (a
  gather's transpose is the ``scatter_add`` row, and back).
* **The others** (matmul, inv, det, slogdet, solve, cholesky, prod, max, min, cumprod,
  log_softmax...) state both rules next to each other, in their family's module.
  ``tests/test_higher.py`` checks every rule against the compiled kernel (first
  order), central differences (second order, tangents) and the other mode
  (``<u, J v>`` both ways), for every case of the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .ops import BY_NAME, ROWS, Kind
from .ops.reduce.front import sum as rsum
from .ops.shape.front import (
    astype,
    broadcast_to,
    reshape,
    swapaxes,
)
from .recording import as_tensor
from .rule_walks import NodeView
from .tensors import Tensor

Rule = Callable[[NodeView, list], list]


# --- shape helpers -----------------------------------------------------------------------


def sum_to(
    t: Any, shape: tuple[int, ...], dtype: np.dtype, full: tuple[int, ...] | None = None
) -> Tensor:
    """``t`` summed over the axes broadcasting added to ``shape`` (the broadcast
    reduction of every backward), cast to ``dtype``.

    ``t`` stands for a value of shape ``full`` (default: its own): a reduction's
    cotangent reaches an elementwise rule broadcastable to the node's output rather than
    broadcast (``rule_walks.full``), and a rule like ``add``'s passes it on unchanged. An
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


def fit_tangent(t: Any, shape: tuple[int, ...], dtype: np.dtype) -> Tensor:
    """``t`` broadcast to ``shape`` and cast to ``dtype`` (a tangent that did not
    depend on every operand, like ``add``'s ``t_x``)."""
    t = as_tensor(t)
    if t.shape != shape:
        t = broadcast_to(t, shape)
    return t if t.dtype == dtype else astype(t, dtype)


def input_zeros(node: NodeView, i: int) -> np.ndarray:
    return np.zeros(node.in_shapes[i], node.in_dtypes[i])


def matrix_transpose(t: Any) -> Tensor:
    return swapaxes(t, -1, -2)


def kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def reduced_axes(node: NodeView) -> tuple[int, ...]:
    """A reduction's axes (its int parameters: count, then the axes)."""
    return tuple(node.ip[1 : 1 + node.ip[0]])


def expand_reduced(g: Any, node: NodeView) -> Tensor:
    """A reduction's cotangent with the reduced axes of its input put back, as axes of
    length 1: broadcastable to the input, not broadcast (``rule_walks.full``)."""
    return reshape(g, kept_shape(node.in_shapes[0], reduced_axes(node)))


_NAMED: set[str] = set()  # the array rows a family's rules module declared


def attach(rules: dict[str, tuple[Rule, Rule]]) -> None:
    """Give each named row its recorded rules (``Op.vjp``, ``Op.jvp``): what each
    family's ``rules`` module calls for its rows (a row without a backward kernel is
    not differentiated, and keeps none)."""
    for name, (vjp, jvp) in rules.items():
        op = BY_NAME[name]
        _NAMED.add(name)
        if op.differentiable and op.bwd is not None:
            op.vjp, op.jvp = vjp, jvp


def check_every_row_has_rules() -> None:
    """Raise if a differentiable array row has no recorded rules (every family's rules
    module imported first: :mod:`tapegrad.families`)."""
    missing = [
        op.name
        for op in ROWS
        if op.kind is Kind.ARRAY and op.differentiable and op.name not in _NAMED
    ]
    if missing:
        raise RuntimeError(f"array rows without recorded derivatives: {missing}")
