"""The CUDA target: tensors on the GPU, ``numba.cuda.jit`` kernels, a host-driven scheduler.

``tg.tensor(x, device="cuda")`` (or ``t.to("cuda")``) makes a :class:`CudaTensor`. Ops
on it launch CUDA kernels and record a graph; ``backward()`` runs the same steps as the
compiled CPU scheduler -- prune to the nodes between requires-grad leaves and the root,
dispatch in reverse recording order, validate each gradient buffer against its tensor's
shape and dtype, accumulate in place -- launching the kernels from the host.
``.grad`` of a CUDA leaf is a CUDA tensor (``.grad.numpy()`` copies it to the host).

Kernels come from the op table, one row, two targets (``Op.cuda``):

* elementwise rows (``"formulas"``): the row's scalar formulas (``sin_fwd``,
  ``mul_bwd_y``...) recompiled as CUDA device functions and lifted by broadcasting
  kernels (:mod:`tapegrad.cuda.kernels`): one thread per output element, the backward
  accumulating into broadcast operands with atomics;
* array rows of the core set (sum, mean, matmul, reshape, transpose, indexing, astype)
  name their function in this module; indexing's backward is a scatter-add with
  atomics, so repeated indices add up.

``tapegrad.numpy`` functions and NumPy's own (``np.sin(t)``, ``np.sum(t)``) route CUDA
tensors here; an op without a CUDA kernel, or CPU and CUDA operands mixed, raise a
``TypeError`` naming both devices.

``import tapegrad`` never imports numba's CUDA target: this module loads it on first
use of a CUDA tensor. Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` runs the kernels in
numba's simulator (slow: keep arrays to a few hundred elements); with neither, making a
CUDA tensor raises.

Memory: values are carved out of per-dtype device arenas (chunks of at least
``CHUNK`` elements, bump-allocated; a chunk is released when no tensor views it), and
a backward pass allocates one zeroed gradient arena per dtype for all the buffers it
needs. The graph is a list of Python node records: on a GPU the per-node cost is the
kernel launch (a few microseconds), not Python.

The target is a wing of the package: the core never imports it. Importing this package
registers it with :mod:`tapegrad.devices` (its tensor type, ``to_device``,
``elementwise`` and the array rows' functions), and the core dispatches through that
registry. Its modules, bottom first: :mod:`~tapegrad.cuda.runtime` (numba's CUDA module,
launches, arenas), :mod:`~tapegrad.cuda.kernels` (the ``numba.cuda.jit`` kernels),
:mod:`~tapegrad.cuda.tensor` (:class:`CudaTensor` and its graph record),
:mod:`~tapegrad.cuda.ops` and :mod:`~tapegrad.cuda.backward`.
"""

from __future__ import annotations

from typing import Any

from .. import devices
from . import ops
from .backward import backward
from .ops import astype, elementwise, getitem, matmul, mean, reshape, sum, transpose
from .runtime import available
from .tensor import CudaTensor, to_device

__all__ = [
    "CudaTensor",
    "astype",
    "available",
    "backward",
    "elementwise",
    "getitem",
    "matmul",
    "mean",
    "reshape",
    "sum",
    "to_device",
    "transpose",
]


def _function(op: Any) -> Any:
    """The function of array row ``op`` on this target: the one its ``Op.cuda`` names."""
    return getattr(ops, op.cuda)


# from now on the CPU front ends route CUDA tensors here
devices.register(devices.Device("cuda", CudaTensor, to_device, elementwise, function=_function))
