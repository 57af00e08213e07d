"""The elementwise rows' recorded rules: their scalar backward formulas, called with
tensors (reverse: summed to each input's shape; forward: the tangent is the sum of the
formulas with tangents in place of ``g``)."""

from __future__ import annotations

from typing import Any

from ...derivatives import Rule, fit_tangent, sum_to
from ...rule_walks import NodeView
from .. import ROWS, Kind

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
        return [fit_tangent(total, node.out_shapes[0], node.out_dtypes[0])]

    return vjp, jvp


for _op in ROWS:
    if _op.differentiable and _op.bwd is not None and _op.kind in (Kind.UNARY, Kind.BINARY):
        _op.vjp, _op.jvp = _elementwise_rules(_op)
del _op
