"""The special functions' recorded rules that are not elementwise formulas:
``log_softmax`` and the incomplete beta function."""

from __future__ import annotations

import math

import numpy as np

from ...derivatives import attach
from ...recording import as_tensor, elementwise
from ...rule_walks import NodeView
from ...tensors import Tensor
from .. import BY_NAME
from ..reduce.front import sum as rsum
from .gamma import stirling_correction


def _log_softmax_vjp(node: NodeView, grads: list) -> list:
    # out = x - logsumexp(x): gx = g - softmax(x) sum(g)
    ax = node.ip[0]
    g = grads[0]
    return [g - np.exp(node.outs[0]) * rsum(g, axis=ax, keepdims=True)]


def _log_softmax_jvp(node: NodeView, tangents: list) -> list:
    ax = node.ip[0]
    t = tangents[0]
    return [t - rsum(np.exp(node.outs[0]) * t, axis=ax, keepdims=True)]


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


attach(
    {
        "log_softmax": (_log_softmax_vjp, _log_softmax_jvp),
        "betainc": (_betainc_vjp, _betainc_jvp),
    }
)
