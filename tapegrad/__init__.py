"""tapegrad: reverse-mode automatic differentiation for NumPy code, built on numba.

The forward pass records into a typed tape; the backward pass is one compiled loop
over it that never touches a Python object.

>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> x = tg.tensor(np.ones(3), requires_grad=True)
>>> loss = tnp.sum(tnp.sin(x) ** 2)
>>> loss.backward()
>>> x.grad  # 2 sin(x) cos(x) = sin(2x)
array([0.90929743, 0.90929743, 0.90929743])
"""

from __future__ import annotations

# (_threads first: it sets the thread pool's defaults before numba reads them)
from . import _threads, devices, extend, integrate, numpy, scipy, special  # noqa: F401
from .compile import compile
from .dispatch import compile_all
from .engine import backward_stats, detect_anomaly, is_anomaly_enabled
from .function import Function, FunctionCtx, kernel
from .graph import print_graph, to_dot
from .higher import checkpoint, hessian, hvp, jacfwd, jvp
from .tensors import Tensor, as_tensor, enable_grad, is_grad_enabled, no_grad, tensor
from .testing import gradcheck
from .transforms import grad, jacobian, jacrev, value_and_grad, vjp

__version__ = "0.1.0"

# The device targets: loaded on first use (tg.tensor(x, device="cuda"), t.to("cuda")),
# when their module registers with tapegrad.devices; the core never imports them
devices.declare("cuda", "tapegrad.cuda")

__all__ = [
    "Function",
    "FunctionCtx",
    "Tensor",
    "as_tensor",
    "backward_stats",
    "checkpoint",
    "compile",
    "compile_all",
    "detect_anomaly",
    "enable_grad",
    "extend",
    "grad",
    "gradcheck",
    "hessian",
    "hvp",
    "integrate",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jvp",
    "kernel",
    "no_grad",
    "numpy",
    "print_graph",
    "scipy",
    "special",
    "tensor",
    "to_dot",
    "value_and_grad",
    "vjp",
]
