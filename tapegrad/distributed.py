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
    """Return ``(start, stop)`` of this rank's rows out of ``n``.

    ``numpy.array_split``'s split: the first ``n % size`` ranks hold one row more (a
    rank may hold none).

    Parameters
    ----------
    n : int
        The number of rows in all.
    comm : mpi4py.MPI.Comm, optional
        The communicator (``MPI.COMM_WORLD`` by default).

    Returns
    -------
    tuple of int
        ``(start, stop)``: this rank's rows are ``start:stop``.

    Raises
    ------
    AttributeError
        ``comm`` is not a communicator (it has no ``rank`` and ``size``).

    See Also
    --------
    shard : The rows themselves.

    Examples
    --------
    >>> import tapegrad.distributed as tgd
    >>> tgd.shard_range(10)  # one process: all the rows
    (0, 10)
    >>> # under mpiexec -n 4 the ranks get (0, 3), (3, 6), (6, 8) and (8, 10)
    """
    comm = _comm(comm)
    base, extra = divmod(n, comm.size)
    start = comm.rank * base + min(comm.rank, extra)
    return start, start + base + (comm.rank < extra)


def shard(a: Any, comm: Any = None) -> np.ndarray:
    """Return this rank's rows of ``a`` along axis 0.

    The split of :func:`shard_range`: the first ``n % size`` ranks hold one row more.

    Parameters
    ----------
    a : array_like
        The whole data set, every rank passing the same (or at least as many rows).
    comm : mpi4py.MPI.Comm, optional
        The communicator (``MPI.COMM_WORLD`` by default).

    Returns
    -------
    numpy.ndarray
        A view of this rank's rows of ``numpy.asarray(a)``.

    Raises
    ------
    IndexError
        ``a`` is 0-d (it has no rows).

    Examples
    --------
    >>> import numpy as np, tapegrad.distributed as tgd
    >>> tgd.shard(np.arange(5.0))  # one process: all the rows
    array([0., 1., 2., 3., 4.])
    """
    arr = np.asarray(a)
    start, stop = shard_range(arr.shape[0], comm)
    return arr[start:stop]


@contextlib.contextmanager
def abort_on_error(comm: Any = None, what: str = "computing") -> Iterator[None]:
    """Abort every rank when the block raises: a context manager.

    If the block raises, the rank and the error (with its traceback) are reported on
    stderr as ``tapegrad.distributed: rank r of n raised ...`` and the communicator
    is aborted, so every rank exits instead of the others waiting forever in their
    next collective. :class:`DataParallel` and :func:`minimize` run their work inside
    it.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        The communicator to abort (``MPI.COMM_WORLD`` by default).
    what : str, optional
        What the block does, for the report ("while loading data").

    Raises
    ------
    BaseException
        Whatever the block raises, after the report and ``comm.Abort(1)``, which
        normally ends every process of the communicator with status 1 first.

    Examples
    --------
    >>> import numpy as np, tapegrad.distributed as tgd
    >>> with tgd.abort_on_error(what="loading data"):
    ...     data = tgd.shard(np.arange(6.0))
    >>> data
    array([0., 1., 2., 3., 4., 5.])
    """
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

    Parameters
    ----------
    grads : pytree
        Nested lists / tuples / dicts of arrays, tensors, numbers or None.
    comm : mpi4py.MPI.Comm, optional
        The communicator (``MPI.COMM_WORLD`` by default).
    op : {'sum', 'mean'}, optional
        Sum over the ranks (default), or the sum divided by the number of ranks.

    Returns
    -------
    pytree
        ``grads``' structure holding the reduced values.

    Raises
    ------
    ValueError
        ``op`` is neither ``'sum'`` nor ``'mean'``, or the ranks passed different
        structures, shapes, dtypes or ops (raised on every rank).
    TypeError
        A leaf is not numbers (raised after the structure check, so no rank is left
        waiting).

    See Also
    --------
    DataParallel : Values and gradients of a sharded loss, reduced.

    Examples
    --------
    >>> import numpy as np, tapegrad.distributed as tgd
    >>> g = {"w": np.array([1.0, 2.0]), "b": 0.5}
    >>> out = tgd.allreduce_grads(g)  # one process: the sum of one rank's values
    >>> out["w"] is g["w"], out["w"], float(out["b"])
    (True, array([1., 2.]), 0.5)
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
    """Evaluate ``fn`` on this rank's shard, its value and gradients summed over ranks.

    Calling it returns ``(value, grads)``: the total value (a Python float) and the
    total gradients in ``fn``'s structure, identical on every rank; with a ``has_aux``
    step, ``((value, aux), grads)`` with this rank's own ``aux``. The call is
    collective: every rank must make it. An error in ``fn`` on any rank is reported
    and aborts every rank (see :func:`abort_on_error`).

    Parameters
    ----------
    fn : callable
        A ``tg.compile``d step (its ``value_and_grad`` is used) or any function
        returning ``(value, grads)`` such as ``tg.value_and_grad(loss)``, called with
        the same arguments on every rank: the parameters, and this rank's shard of the
        data.
    comm : mpi4py.MPI.Comm, optional
        The communicator (``MPI.COMM_WORLD`` by default).
    reduce : {'sum', 'mean'}, optional
        ``"sum"`` (a loss that is a sum over data points) or ``"mean"`` (the sum
        divided by the number of ranks: equal shards, or averaging replicas).

    Raises
    ------
    ValueError
        ``reduce`` is neither ``'sum'`` nor ``'mean'``.

    See Also
    --------
    minimize : SciPy's optimisers on a ``DataParallel``.
    allreduce_grads : The reduction it uses.

    Notes
    -----
    A *mean* over all data points is not the mean of the shards' means when shards
    differ in size: write the local loss as the shard's sum divided by the global
    count (``shard_range``'s ``n``), and use ``reduce="sum"``.

    Examples
    --------
    Run with ``mpiexec -n 4 python script.py``; on one process it is ``fn`` itself.

    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> import tapegrad.distributed as tgd
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> y = np.array([1.0, 2.0, 3.0])
    >>> def loss(w, X, y):
    ...     return tnp.sum((X @ w - y) ** 2)
    >>> f = tgd.DataParallel(tg.compile(loss))
    >>> f(np.zeros(2), tgd.shard(X), tgd.shard(y))
    (14.0, array([-44., -56.]))
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
    """Run ``scipy.optimize.minimize(fun, x0, jac=True, **kwargs)`` with sharded data.

    ``fun(x, *args) -> (value, grad)`` is collective (every rank must call it with the
    same ``x``), such as a :class:`DataParallel`; ``args`` (a keyword, as scipy's) are
    each rank's own, typically its shard. Rank 0 runs the optimiser and sends each point
    to the other ranks, which evaluate it until rank 0 is done; every rank returns the
    same result.

    Parameters
    ----------
    fun : callable
        ``fun(x, *args) -> (value, grad)``, collective.
    x0 : array_like
        The starting point (converted to float64).
    comm : mpi4py.MPI.Comm, optional
        The communicator (``MPI.COMM_WORLD`` by default).
    **kwargs
        Passed to ``scipy.optimize.minimize`` (``method``, ``tol``, ``options``...);
        ``args``, a tuple, is each rank's own extra arguments of ``fun``.

    Returns
    -------
    scipy.optimize.OptimizeResult
        Rank 0's result, the same object's contents on every rank.

    Raises
    ------
    Exception
        Any error inside it on any rank (from ``fun``, or from SciPy on rank 0, such
        as a ``ValueError`` for an unknown ``method``) is reported on stderr with the
        rank, and the communicator is aborted: every rank exits with status 1 rather
        than waiting forever. For errors anywhere else in a script, run it as
        ``mpiexec -n 4 python -m mpi4py script.py`` (mpi4py then aborts on an
        unhandled exception instead of leaving ranks waiting).

    See Also
    --------
    DataParallel : A collective ``fun`` from a loss on this rank's shard.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> import tapegrad.distributed as tgd
    >>> X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> y = np.array([1.0, 2.0, 3.0])
    >>> def loss(w, X, y):
    ...     return tnp.sum((X @ w - y) ** 2)
    >>> f = tgd.DataParallel(tg.compile(loss))
    >>> res = tgd.minimize(f, np.zeros(2), args=(tgd.shard(X), tgd.shard(y)))
    >>> res.success, np.allclose(res.x, [0.0, 0.5], atol=1e-5)
    (True, True)
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
