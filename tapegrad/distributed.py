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
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import scipy.optimize
from mpi4py import MPI

from .pytree import flatten, structure
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
        if not getattr(e, "_tapegrad_reported", False):  # (an inner block reported it)
            world = MPI.COMM_WORLD.rank
            where = "" if comm.size == MPI.COMM_WORLD.size else f" (world rank {world})"
            sys.stderr.write(
                f"tapegrad.distributed: rank {comm.rank} of {comm.size}{where} raised "
                f"{type(e).__name__} while {what}: {e}\n{traceback.format_exc()}"
            )
            sys.stderr.flush()
            e._tapegrad_reported = True
        comm.Abort(1)
        raise


# flat reduction buffers, one per (communicator, dtype), grown to the largest call: a
# training loop allocates nothing per step, and varying sizes keep one buffer each
_BUFFERS: dict[tuple, np.ndarray] = {}


def _buffer(comm: Any, dtype: np.dtype, size: int) -> np.ndarray:
    key = (id(comm), dtype.str)
    buf = _BUFFERS.get(key)
    if buf is None or buf.size < size:
        buf = _BUFFERS[key] = np.empty(size, dtype)
    return buf[:size]


def _same_structure(comm: Any, grads: Any, arrays: list, op: str) -> None:
    """Every rank must reduce the same pytree (structure, keys, shapes, dtypes, None
    parts) with the same op: leaves are matched by position, so a difference would add
    unrelated numbers or hang in mismatched messages. One small collective compares a
    hash of it on all ranks; a difference raises on every rank."""
    layout = [None if a is None else (a.shape, a.dtype.str) for a in arrays]
    sig = zlib.crc32(repr((structure(grads), layout, op)).encode())
    both = np.array([sig, -sig], np.int64)
    comm.Allreduce(MPI.IN_PLACE, both, op=MPI.MIN)
    if both[0] != sig or -both[1] != sig:
        raise ValueError(
            f"allreduce_grads: the ranks passed different gradients (rank {comm.rank} has "
            f"{len(arrays)} parts: {layout[:4]}{'...' if len(layout) > 4 else ''}); every "
            "rank must pass the same structure, keys in the same order, shapes, dtypes, "
            "None parts and op"
        )


def allreduce_grads(grads: Any, comm: Any = None, op: str = "sum") -> Any:
    """Sum (``op="sum"``) or average (``"mean"``) a pytree of gradients over the ranks.

    Leaves are NumPy arrays, tensors (their values) or numbers; ``None`` leaves stay
    ``None``. Every rank must pass the same structure (keys in the same order, shapes,
    dtypes, None parts) and ``op``: a small collective checks it first and raises on
    every rank otherwise. The leaves of one dtype are packed into one flat buffer and
    reduced with one ``Allreduce``; writable NumPy arrays (0-d included) get the result
    in place (the same objects come back), read-only arrays and tensors are replaced by
    new arrays, numbers by NumPy scalars. The result is identical on every rank
    (checked bit for bit in the tests), so replicas stepping on it cannot drift apart.
    """
    if op not in ("sum", "mean"):
        raise ValueError(f"allreduce_grads: op must be 'sum' or 'mean', got {op!r}")
    comm = _comm(comm)
    leaves, rebuild = flatten(grads)
    arrays: list[Any] = []
    bad = None  # a leaf that is not numbers: reported after the structure check, so
    # that the other ranks are not left waiting in it
    for leaf in leaves:
        if leaf is None:
            arrays.append(None)
            continue
        try:
            arr = leaf.numpy() if isinstance(leaf, Tensor) else leaf
            if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
                arr = np.asarray(arr, dtype=np.result_type(arr, np.float64))
            if not arr.dtype.isnative:  # MPI sends native byte order
                arr = arr.astype(arr.dtype.newbyteorder("="))
        except (TypeError, ValueError) as e:
            bad = bad or TypeError(
                f"allreduce_grads: a gradient of type {type(leaf).__name__} is not numbers: {e}"
            )
            arr = np.empty((0,), "V1")  # a placeholder the structure check tells apart
        arrays.append(arr)
    _same_structure(comm, grads, arrays, op)
    if bad is not None:
        raise bad
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
            if arr is leaves[i] and arr.flags.writeable:
                arr[...] = part  # in place: the caller's array (0-d ones too)
            elif isinstance(leaves[i], np.ndarray | Tensor):
                out[i] = part.copy()
            else:  # a number: a NumPy scalar
                out[i] = part.reshape(()).copy()[()]
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
    total gradients in ``fn``'s structure, identical on every rank; with a ``has_aux``
    step, ``((value, aux), grads)`` with this rank's own ``aux``.
    """

    def __init__(self, fn: Callable, comm: Any = None, reduce: str = "sum") -> None:
        if reduce not in ("sum", "mean"):
            raise ValueError(f"DataParallel: reduce must be 'sum' or 'mean', got {reduce!r}")
        self.fn = fn.value_and_grad if hasattr(fn, "value_and_grad") else fn
        self.comm = _comm(comm)
        self.reduce = reduce

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        with abort_on_error(self.comm, "evaluating its shard"):
            value, grads = self.fn(*args, **kwargs)
            aux = None
            if isinstance(value, tuple):  # has_aux: (value, aux); aux stays this rank's
                value, aux = value
            local = np.array([float(value)])
            total, grads = allreduce_grads((local, grads), self.comm, self.reduce)
        value = float(total[0])
        return ((value, aux) if aux is not None else value), grads


def minimize(fun: Callable, x0: Any, comm: Any = None, **kwargs: Any) -> Any:
    """``scipy.optimize.minimize(fun, x0, jac=True, **kwargs)`` with sharded data.

    ``fun(x, *args) -> (value, grad)`` is collective (every rank must call it with the
    same ``x``), such as a :class:`DataParallel`; ``args`` (a keyword, as scipy's) are
    each rank's own, typically its shard. Rank 0 runs the optimiser and sends each point
    to the other ranks, which evaluate it until rank 0 is done; every rank returns the
    same result. An error inside this function on any rank aborts them all; for errors
    anywhere else in a script, run it as ``mpiexec -n 4 python -m mpi4py script.py``
    (mpi4py then aborts on an unhandled exception instead of leaving ranks waiting).
    """
    comm = _comm(comm)
    x0 = np.asarray(x0, dtype=np.float64)
    local = kwargs.pop("args", ())  # each rank's own extra arguments (its shard)
    local = local if isinstance(local, tuple) else (local,)
    if comm.rank == 0:
        with abort_on_error(comm, "running the optimiser"):

            def point(x: np.ndarray) -> tuple[float, Any]:
                comm.bcast(("eval", np.asarray(x)), root=0)
                return fun(x, *local)

            result = scipy.optimize.minimize(point, x0, jac=True, **kwargs)
            comm.bcast(("done", result), root=0)
        return result
    with abort_on_error(comm, "evaluating for the optimiser"):
        while True:
            command, payload = comm.bcast(None, root=0)
            if command == "done":
                return payload
            fun(payload, *local)
