"""Data-parallel gradients over MPI: each rank evaluates its shard of the data, then one
``Allreduce`` per dtype sums values and gradients, so every rank holds the full loss and
gradient.

The transport is MPI through ``mpi4py`` (``pip install -e ".[mpi]"`` installs it with the
``mpich`` wheel, which brings ``mpiexec``); tapegrad adds no scheme of its own. This
module imports ``mpi4py`` and is imported only when used: ``import tapegrad`` does not
need it. Run a script on 4 processes with ``mpiexec -n 4 python script.py``.

* :func:`shard` / :func:`shard_range`: a rank's rows of an array (``numpy.array_split``'s
  split: the first ``n % size`` ranks get one row more).
* :func:`allreduce_grads`: sums (or averages) a pytree of gradients across ranks in place,
  one ``Allreduce`` per dtype on a flat buffer kept between calls.
* :class:`DataParallel`: wraps a ``tg.compile``d step or any ``value_and_grad`` function
  of the local shard; returns the summed value and gradients.
* :func:`minimize`: ``scipy.optimize.minimize`` on rank 0 while the other ranks serve
  evaluations of the same points, the way to fit a model on sharded data.

Sum or mean: a loss that is a *sum* over data points (a log-likelihood) is the sum of the
shards' losses (``reduce="sum"``, the default). A *mean* over all points is not the mean of
the shards' means when shards differ in size: write the local loss as the shard's sum
divided by the global count (``shard_range``'s ``n``), and sum. ``reduce="mean"`` divides
the sum by the number of ranks (equal shards, or averaging replicas).

Failure: a rank that raises while evaluating (NaN data under anomaly mode, a bug) prints
``tapegrad.distributed: rank r of n raised ...`` with its traceback and aborts the
communicator, so the other ranks exit too instead of waiting forever in a collective.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.optimize
from mpi4py import MPI

from .pytree import flatten
from .tensors import Tensor

__all__ = ["DataParallel", "abort_on_error", "allreduce_grads", "minimize", "shard", "shard_range"]


def _comm(comm: Any) -> Any:
    return MPI.COMM_WORLD if comm is None else comm


def shard_range(n: int, comm: Any = None) -> tuple[int, int]:
    """``(start, stop)`` of this rank's rows out of ``n``: ``numpy.array_split``'s split,
    so the first ``n % size`` ranks hold one row more (a rank may hold none)."""
    comm = _comm(comm)
    base, extra = divmod(n, comm.size)
    start = comm.rank * base + min(comm.rank, extra)
    return start, start + base + (comm.rank < extra)


def shard(a: Any, comm: Any = None) -> np.ndarray:
    """This rank's rows of ``a`` along axis 0 (a view; see :func:`shard_range`)."""
    arr = np.asarray(a)
    start, stop = shard_range(arr.shape[0], comm)
    return arr[start:stop]


@contextlib.contextmanager
def abort_on_error(comm: Any = None, what: str = "computing") -> Iterator[None]:
    """Run the block; if it raises, report the rank and the error on stderr and abort
    the communicator (every rank exits) instead of leaving the others blocked in their
    next collective."""
    comm = _comm(comm)
    try:
        yield
    except BaseException as e:
        sys.stderr.write(
            f"tapegrad.distributed: rank {comm.rank} of {comm.size} raised "
            f"{type(e).__name__} while {what}: {e}\n{traceback.format_exc()}"
        )
        sys.stderr.flush()
        comm.Abort(1)
        raise


# flat reduction buffers, by (communicator, dtype, size): kept between calls, so a training
# loop allocates nothing per step
_BUFFERS: dict[tuple, np.ndarray] = {}


def _buffer(comm: Any, dtype: np.dtype, size: int) -> np.ndarray:
    key = (id(comm), dtype.str, size)
    buf = _BUFFERS.get(key)
    if buf is None:
        if len(_BUFFERS) > 64:
            _BUFFERS.clear()
        buf = _BUFFERS[key] = np.empty(size, dtype)
    return buf


def allreduce_grads(grads: Any, comm: Any = None, op: str = "sum") -> Any:
    """Sum (``op="sum"``) or average (``"mean"``) a pytree of gradients over the ranks.

    Leaves are NumPy arrays, tensors (their values) or numbers; ``None`` leaves stay
    ``None`` and must be ``None`` on every rank. The leaves of one dtype are packed into
    one flat buffer and reduced with one ``Allreduce``; writable arrays get the result
    in place (the same objects come back), the others are replaced by new arrays. The
    result is identical on every rank (checked bit for bit in the tests), so replicas
    stepping on it cannot drift apart.
    """
    if op not in ("sum", "mean"):
        raise ValueError(f"allreduce_grads: op must be 'sum' or 'mean', got {op!r}")
    comm = _comm(comm)
    leaves, rebuild = flatten(grads)
    arrays: list[np.ndarray | None] = []
    for leaf in leaves:
        if leaf is None:
            arrays.append(None)
            continue
        arr = leaf.numpy() if isinstance(leaf, Tensor) else leaf
        if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
            arr = np.asarray(arr, dtype=np.result_type(arr, np.float64))
        arrays.append(arr)
    by_dtype: dict[np.dtype, list[int]] = {}
    for i, arr in enumerate(arrays):
        if arr is not None:
            by_dtype.setdefault(arr.dtype, []).append(i)
    out: list[Any] = list(arrays)
    for dtype in sorted(by_dtype, key=lambda d: d.str):  # the same order on every rank
        members = by_dtype[dtype]
        buf = _buffer(comm, dtype, sum(arrays[i].size for i in members))
        offset = 0
        for i in members:
            n = arrays[i].size
            buf[offset : offset + n] = arrays[i].reshape(-1)
            offset += n
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        if op == "mean":
            buf /= comm.size
        offset = 0
        for i in members:
            arr = arrays[i]
            part = buf[offset : offset + arr.size].reshape(arr.shape)
            offset += arr.size
            if arr is leaves[i] and arr.flags.writeable and arr.ndim:
                arr[...] = part  # in place: the caller's array
            else:
                out[i] = part.copy() if arr.ndim else part.reshape(()).copy()[()]
    return rebuild(out)


class DataParallel:
    """``fn`` evaluated on this rank's shard, its value and gradients summed over ranks.

    Parameters
    ----------
    fn
        A ``tg.compile``d step (its ``value_and_grad`` is used) or any function
        returning ``(value, grads)`` such as ``tg.value_and_grad(loss)``, called with the
        same arguments on every rank: the parameters, and this rank's shard of the data.
    comm
        The communicator (``MPI.COMM_WORLD`` by default).
    reduce
        ``"sum"`` (a loss that is a sum over data points) or ``"mean"`` (see the module
        docstring).

    Calling it returns ``(value, grads)``: the total value (a Python float) and the
    total gradients in ``fn``'s structure, identical on every rank.
    """

    def __init__(self, fn: Callable, comm: Any = None, reduce: str = "sum") -> None:
        if reduce not in ("sum", "mean"):
            raise ValueError(f"DataParallel: reduce must be 'sum' or 'mean', got {reduce!r}")
        self.fn = fn.value_and_grad if hasattr(fn, "value_and_grad") else fn
        self.comm = _comm(comm)
        self.reduce = reduce

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[float, Any]:
        with abort_on_error(self.comm, "evaluating its shard"):
            value, grads = self.fn(*args, **kwargs)
            if isinstance(value, tuple):  # has_aux: (value, aux) stays local
                value = value[0]
            local = np.array([float(value)])
        total, grads = allreduce_grads((local, grads), self.comm, self.reduce)
        return float(total[0]), grads


def minimize(fun: Callable, x0: Any, comm: Any = None, **kwargs: Any) -> Any:
    """``scipy.optimize.minimize(fun, x0, jac=True, **kwargs)`` with sharded data.

    ``fun(x) -> (value, grad)`` is collective (every rank must call it with the same
    ``x``), such as a :class:`DataParallel`. Rank 0 runs the optimiser and sends each
    point to the other ranks, which evaluate it with their shard until rank 0 is done;
    every rank returns the same result. An error on any rank aborts them all.
    """
    comm = _comm(comm)
    x0 = np.asarray(x0, dtype=np.float64)
    if comm.rank == 0:
        with abort_on_error(comm, "running the optimiser"):

            def point(x: np.ndarray) -> tuple[float, Any]:
                comm.bcast(("eval", np.asarray(x)), root=0)
                return fun(x)

            result = scipy.optimize.minimize(point, x0, jac=True, **kwargs)
        comm.bcast(("done", result), root=0)
        return result
    while True:
        command, payload = comm.bcast(None, root=0)
        if command == "done":
            return payload
        fun(payload)
