"""The CUDA target's backward pass: the compiled CPU scheduler's steps, driven from the host."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..record import aligned, place
from ..shapes import (
    gradient_buffer_error,
)
from ..shapes import seed as shared_seed
from ..tensors import FREED_MESSAGE, NO_GRAD_MESSAGE
from .runtime import device_fill, flat_view, launch, move_kernels, numba_cuda
from .tensor import CudaTensor, Node, install_methods

# --- the backward pass ------------------------------------------------------------------------


def _pruned(root: CudaTensor) -> list[Node]:
    """Nodes on a path from a requires-grad leaf to ``root``, in reverse recording order."""
    nodes: dict[int, Node] = {}
    stack = [root]
    while stack:
        node = stack.pop()._node
        if node is None or id(node) in nodes:
            continue
        if node.freed:
            raise RuntimeError(FREED_MESSAGE)
        nodes[id(node)] = node
        stack.extend(t for t in node.inputs if t._rg)
    return sorted(nodes.values(), key=lambda nd: nd.seq, reverse=True)


def _grad_buffers(root: CudaTensor, nodes: list[Node]) -> dict[int, Any]:
    """A zeroed gradient buffer for the root and every requires-grad input of ``nodes``,
    views of one arena per dtype (one allocation and one fill launch each)."""
    tensors: dict[int, CudaTensor] = {id(root): root}
    for node in nodes:
        for t in node.inputs:
            if t._rg:
                tensors.setdefault(id(t), t)
    by_dtype: dict[str, list[CudaTensor]] = {}
    for t in tensors.values():
        by_dtype.setdefault(t.dtype.str, []).append(t)
    cuda = numba_cuda()
    out: dict[int, Any] = {}
    for group in by_dtype.values():
        # laid out by the CPU scheduler's rule (record.place / aligned), in bytes
        item = group[0].dtype.itemsize
        offsets, top = [], 0
        for t in group:
            nbytes = t.size * item
            top = place(top, nbytes)
            offsets.append(top // item)
            top += aligned(nbytes)
        arena = cuda.device_array(builtins.max(top // item, 1), group[0].dtype)
        device_fill(arena, 0.0)
        for t, off in zip(group, offsets, strict=True):
            out[id(t)] = arena[off : off + t.size].reshape(t.shape)
    return out


def backward(root: CudaTensor, gradient: Any = None, retain_graph: bool = False) -> None:
    """Run the backward pass from ``root``, accumulating into the leaves' ``.grad``.

    The CPU scheduler's steps: prune to the nodes between requires-grad leaves and the
    root, dispatch in reverse recording order, validate each gradient buffer against
    its tensor's shape and dtype, accumulate; each node's backward kernels are
    launched from the host. Gradients accumulate into leaves' ``.grad`` as on the CPU
    (a new buffer each time: a ``.grad`` the user holds is never modified).
    ``root.backward()`` calls it.

    Parameters
    ----------
    root : CudaTensor
        The tensor to differentiate.
    gradient : array_like or CudaTensor, optional
        The cotangent, of ``root``'s shape; required unless ``root`` has one element,
        where it defaults to 1.
    retain_graph : bool, optional
        Keep the graph for another backward pass (by default it is freed).

    Raises
    ------
    RuntimeError
        ``root`` does not require grad; ``gradient`` is missing for a root of more than
        one element or has the wrong shape; or the graph was freed by an earlier
        backward pass.
    TypeError
        ``gradient`` is not of a real dtype.

    Examples
    --------
    >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
    >>> import numpy as np, tapegrad.cuda as tgc
    >>> w = tgc.to_device([1.0, 2.0], requires_grad=True)  # doctest: +SKIP
    >>> tgc.backward(w * 3.0, gradient=np.array([1.0, 1.0]))  # doctest: +SKIP
    >>> w.grad  # doctest: +SKIP
    tensor([3., 3.], device='cuda')
    """
    if not root._rg:
        raise RuntimeError(NO_GRAD_MESSAGE)
    given = gradient.numpy() if isinstance(gradient, CudaTensor) else gradient
    seed = shared_seed(root.shape, root.dtype, given)
    if seed is None:
        seed = np.ones(root.shape, root.dtype)
    nodes = _pruned(root)
    grads = _grad_buffers(root, nodes)
    if seed.size:
        flat_view(grads[id(root)]).copy_to_device(seed.reshape(-1))
    leaves: dict[int, CudaTensor] = {id(root): root} if root.is_leaf else {}
    for node in nodes:
        bufs = []
        for t in node.inputs:
            if not t._rg:
                bufs.append(None)
                continue
            buf = grads[id(t)]
            # the metadata check of the CPU scheduler: the buffer this node's kernel
            # accumulates into has its input's shape and dtype
            if tuple(buf.shape) != t.shape or np.dtype(buf.dtype) != t.dtype:
                raise gradient_buffer_error(
                    node.name,
                    f"input {len(bufs)}",
                    f"shape {t.shape} and dtype {t.dtype}",
                    f"shape {tuple(buf.shape)} and dtype {buf.dtype}",
                )
            bufs.append(buf)
            if t.is_leaf:
                leaves[id(t)] = t
        node.backward(grads[node.out], bufs)
        if not retain_graph:
            node.freed = True
    k = move_kernels()
    for key, leaf in leaves.items():
        g = grads[key]
        if leaf.grad is not None:  # accumulate as PyTorch does, into a fresh buffer
            launch(k["add"], leaf.size, flat_view(leaf.grad.data), flat_view(g))
        leaf.grad = CudaTensor(g)
    numba_cuda().synchronize()


class _Methods:
    """CudaTensor.backward, installed on the class below."""

    # --- autograd ---------------------------------------------------------------------------
    def backward(
        self, gradient: Any = None, retain_graph: bool = False, create_graph: bool = False
    ) -> None:
        """Accumulate the gradient of this tensor into the leaves' ``.grad``.

        Runs :func:`backward` from this tensor: the graph's backward kernels are
        launched from the host, and each leaf that requires grad gets (or adds to) a
        CUDA tensor ``.grad``.

        Parameters
        ----------
        gradient : array_like or CudaTensor, optional
            The cotangent, of this tensor's shape; required unless it has one element,
            where it defaults to 1.
        retain_graph : bool, optional
            Keep the graph for another backward pass (by default it is freed).
        create_graph : bool, optional
            Must be False: higher-order derivatives are CPU only.

        Raises
        ------
        RuntimeError
            This tensor does not require grad; ``gradient`` is missing for a tensor of
            more than one element or has the wrong shape; or the graph was freed by an
            earlier backward pass.
        TypeError
            ``gradient`` is not of a real dtype.
        NotImplementedError
            ``create_graph=True``.

        See Also
        --------
        tapegrad.cuda.backward : The function it calls.

        Examples
        --------
        >>> # needs a CUDA GPU (or NUMBA_ENABLE_CUDASIM=1 set before numba is imported)
        >>> import tapegrad as tg
        >>> x = tg.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)  # doctest: +SKIP
        >>> (x * x).sum().backward()  # doctest: +SKIP
        >>> x.grad  # doctest: +SKIP
        tensor([2., 4., 6.], device='cuda')
        """
        if create_graph:
            raise NotImplementedError(
                "backward(create_graph=True) on the CUDA target: higher-order derivatives "
                "are CPU only (the CUDA graph has no recorded derivatives)"
            )
        backward(self, gradient, retain_graph)


install_methods(_Methods)
