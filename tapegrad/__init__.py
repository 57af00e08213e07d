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

import warnings
from typing import Any

# (_threads first: it sets the thread pool's defaults before numba reads them)
from . import _threads, devices, extend, integrate, numpy, scipy, special  # noqa: F401
from . import dispatch as _dispatch
from .batching import vmap
from .checkpoint import checkpoint
from .compile import compile
from .engine import backward_stats, detect_anomaly, is_anomaly_enabled
from .forward_mode import hessian, hvp, jacfwd, jvp
from .function import Function, FunctionCtx, kernel
from .grad_mode import enable_grad, is_grad_enabled, no_grad
from .graph import print_graph, to_dot
from .implicit import custom_root, fixed_point
from .recording import as_tensor, tensor
from .tensors import Tensor
from .testing import gradcheck
from .transforms import grad, jacobian, jacrev, value_and_grad, vjp

__version__ = "0.1.0"


def compile_all(*args: Any, **kwargs: Any) -> int:
    """Compile every kernel of the op table: :func:`tapegrad.warmup.compile_all`.

    Kept under this name for code written before it moved; it warns. The name read as
    a relative of :func:`tapegrad.compile`, which captures a step; this one warms the
    kernel cache.

    Parameters
    ----------
    *args, **kwargs
        Those of :func:`tapegrad.warmup.compile_all`.

    Returns
    -------
    int
        How many kernels were compiled or loaded from the cache.

    Raises
    ------
    numba.core.errors.NumbaError
        A kernel that does not compile.

    Warns
    -----
    DeprecationWarning
        Always: call ``tapegrad.warmup.compile_all`` (or run
        ``python -m tapegrad.warmup``) instead.

    Examples
    --------
    >>> import tapegrad as tg
    >>> n = tg.compile_all()  # doctest: +SKIP
    """
    warnings.warn(
        "tapegrad.compile_all moved to tapegrad.warmup.compile_all (it warms the kernel "
        "cache; tapegrad.compile captures a step); python -m tapegrad.warmup does it on "
        "every core",
        DeprecationWarning,
        stacklevel=2,
    )
    return _dispatch.compile_all(*args, **kwargs)


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
    "custom_root",
    "detect_anomaly",
    "enable_grad",
    "extend",
    "fixed_point",
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
    "vmap",
]
