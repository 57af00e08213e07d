"""Custom functions used by the tests (in a file, so their kernels are cached)."""

from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.extend import defjvp, defvjp, primitive


@primitive
def logsumexp(x):
    """A primitive with both rules, written in tapegrad ops (any order)."""
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


defvjp(logsumexp, lambda ans, x: lambda g: g * tnp.exp(x - ans))
defjvp(logsumexp, lambda t, ans, x: tnp.sum(t * tnp.exp(x - ans)))


class Cube(tg.Function):
    """x ** 3 with a Python backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


@tg.kernel
def _scaled_product_bwd(mask, g, x, y, out, gx, gy):
    # out = x * y * 2 (broadcast-free): gx += 2 g y, gy += 2 g x
    for i in range(g.size):
        if mask & 1:
            gx[i] += 2.0 * g[i] * y[i]
        if mask & 2:
            gy[i] += 2.0 * g[i] * x[i]


class ScaledProduct(tg.Function):
    """2 x y with a compiled backward that runs inside the scheduler's loop."""

    @staticmethod
    def forward(ctx, x, y):
        return 2.0 * x * y

    backward_kernel = _scaled_product_bwd


class SplitSum(tg.Function):
    """Two outputs (sum and max-marked-non-differentiable argmax), a non-tensor argument."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        idx = np.asarray(np.argmax(x))
        ctx.mark_non_differentiable(idx)
        return x.sum() * scale, idx

    @staticmethod
    def backward(ctx, g_sum, g_idx):
        (x,) = ctx.saved_tensors
        return np.full(x.shape, g_sum * ctx.scale), None


class BroadcastGrad(tg.Function):
    """Returns a gradient of the broadcast shape: tapegrad sums it down."""

    @staticmethod
    def forward(ctx, b, m):
        ctx.shape = m.shape
        return m + b

    @staticmethod
    def backward(ctx, g):
        return g, g  # g has m's shape; b's gradient must be reduced


class WrongCount(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g, g, g


class WrongShape(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return np.ones(7)


class Float32Grad(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return (2 * g).astype(np.float32)


def doubling(name: str, backward) -> type:
    """A Function class ``name``: forward doubles x, backward returns ``backward(g)``
    (for what a custom backward may wrongly return)."""
    return type(
        name,
        (tg.Function,),
        {
            "forward": staticmethod(lambda ctx, x: x * 2),
            "backward": staticmethod(lambda ctx, g: backward(g)),
        },
    )
