"""The recording calls the front ends make, and making tensors.

* ``elementwise``: the eager hot path (operands resolved to slots, one compiled call
  that records the node and runs its forward, one handle); ``elementwise_function``,
  a row's public function;
* ``general``: an array row's node (a request to the compiled recorder);
  ``front_end``: a compiled front end, called through the tiers;
* ``tensor`` and ``as_tensor``: new leaves and constants.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from . import devices
from .layout import (
    DEFERRED,
    DTYPE_NAMES,
    E_BROADCAST,
    E_FRONT_END,
    E_LINALG,
    E_NOFLOAT,
    E_SPACE,
    F64,
    H_NLINK,
    NP_DTYPES,
    R_ALIAS,
    R_BODY,
    R_NFP,
    R_NIN,
    R_NIP,
    R_NOUT,
    S_DTYPE,
    SLOT_CONST,
)
from .record import ABSENT, SCALAR, record_elementwise, record_general, record_tensors
from .shapes import broadcast_error, check_float
from .tape import (
    THREAD_MIN,
    Tape,
    current_tape,
    normalize_array,
    worker_count,
)
from .tensors import (
    FLAG_RG,
    FLOAT_DTYPES,
    SCALARS,
    Tensor,
    bind_operand,
    result_handle,
    shape_of,
    values_of,
)
from .tiers import Unbound, current, entry_point, on_switch

# Converts a list or an object array holding tensors into one tensor, keeping the
# graph (tapegrad.numpy installs ``array``: stacking is a front end above this module).
_objects_to_tensor: Callable[[Any], Tensor] | None = None


# The tensor types of the device targets loaded so far (tapegrad.devices keeps it up to
# date); empty keeps the CPU paths free of any device check until one is loaded.
DEVICE_TYPES: tuple[type, ...] = ()


def _device_types(types: tuple[type, ...]) -> None:
    global DEVICE_TYPES
    DEVICE_TYPES = types


devices.listen(_device_types)


def set_object_converter(fn: Callable[[Any], Tensor]) -> None:
    global _objects_to_tensor
    _objects_to_tensor = fn


def tensor(
    data: Any, requires_grad: bool = False, dtype: Any = None, device: str = "cpu"
) -> Tensor:
    """Make a leaf tensor holding a copy of ``data``.

    Parameters
    ----------
    data : array_like or Tensor
        Array-like (NumPy array, nested lists, Python number, another Tensor).
        float64 and float32 are kept; Python floats become float64, Python ints and
        integer arrays int64, bools bool.
    requires_grad : bool, optional
        Record ops on this tensor so ``backward`` computes its gradient (float only).
    dtype : data-type, optional
        Convert to this dtype: float64, float32, int64 or bool.
    device : {'cpu', 'cuda'}, optional
        ``'cpu'`` (default) or ``'cuda'``: a :class:`tapegrad.cuda.CudaTensor` whose
        values live on the GPU (loads the CUDA target on first use).

    Returns
    -------
    Tensor
        A new leaf (a :class:`tapegrad.cuda.CudaTensor` for ``device='cuda'``).

    Raises
    ------
    TypeError
        ``requires_grad=True`` for a non-float dtype; a ``dtype`` other than float64,
        float32, int64 or bool; ``data`` of a dtype tapegrad cannot hold (strings,
        complex numbers); or ``data`` is a tensor (or an object array of tensors) that
        requires grad, whose gradient the copy would drop (use ``tnp.array(t)`` or
        ``t.copy()`` to keep the graph, ``t.detach()`` for a new leaf).
    ValueError
        An unknown ``device``, or ragged nested lists.
    RuntimeError
        ``device='cuda'`` on a machine without a GPU (or numba's CUDA simulator).

    See Also
    --------
    as_tensor : No copy of a tensor; keeps the graph of a list of tensors.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> tg.tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    >>> tg.tensor([1, 2]), tg.tensor(2.5), tg.tensor([1.0, 2.0], dtype=np.float32)
    (tensor([1, 2]), tensor(2.5), tensor([1., 2.], dtype=float32))
    """
    if device != "cpu":
        return devices.get(device, "tensor").to_device(data, requires_grad, dtype)
    if isinstance(data, Tensor):
        if data.requires_grad and current_tape().grad_enabled:
            raise TypeError(
                f"tensor() of a tensor that requires grad (shape {data.shape}, "
                f"{data.dtype}) makes a new leaf from its values, which would drop its "
                "gradient. To keep the graph, use tnp.array(t) or t.copy() (a recorded "
                "copy); for a new leaf, pass t.detach() (tg.tensor(t.detach(), "
                "requires_grad=True))"
            )
        data = data._value()
    elif isinstance(data, np.ndarray) and data.dtype == object:
        if any(isinstance(v, Tensor) and v.requires_grad for v in data.flat):
            raise TypeError(
                "tensor: this object array holds tensors that require grad; tensor() "
                "copies values (which would drop their gradient): use tnp.array or "
                "tnp.stack to keep the graph, or .detach() them"
            )
    elif DEVICE_TYPES and isinstance(data, DEVICE_TYPES):
        data = data.numpy()
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in NP_DTYPES:
            raise TypeError(f"tensor: unsupported dtype {dt} (supported: {', '.join(DTYPE_NAMES)})")
        arr = np.array(data, dtype=dt, order="C", copy=True)
    else:
        arr = normalize_array(data, copy=True)
    if requires_grad:
        check_float(arr.dtype, "tensor")
    return Tensor._external(arr, FLAG_RG if requires_grad else 0)


def as_tensor(x: Any) -> Tensor:
    """Convert ``x`` to a tensor: ``x`` itself if it is one, else a constant tensor.

    A constant tensor holds a copy of ``x``'s values and does not require grad; a
    list or an object array holding tensors is stacked (recorded: the graph is kept).

    Parameters
    ----------
    x : array_like or Tensor
        A tensor, a NumPy array, a Python number, or (nested) lists of numbers or
        tensors.

    Returns
    -------
    Tensor
        ``x`` itself when it is a tensor, else a new tensor.

    Raises
    ------
    TypeError
        ``x`` is of a dtype tapegrad cannot hold (strings, complex numbers), or is a
        CUDA tensor (:class:`tapegrad.cuda.CudaTensor`).
    ValueError
        Ragged nested lists, or parts of a list of tensors whose shapes do not match.

    See Also
    --------
    tensor : Always a new leaf, optionally requiring grad.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> tg.as_tensor(np.array([1.0, 2.0]))
    tensor([1., 2.])
    >>> x = tg.tensor(3.0, requires_grad=True)
    >>> tg.as_tensor(x) is x
    True
    >>> tg.as_tensor([x, 2 * x])
    tensor([3., 6.], requires_grad=True)
    """
    if isinstance(x, Tensor):
        return x
    if type(x) is np.ndarray and x.dtype in FLOAT_DTYPES:  # the common case: a copy
        return Tensor._external(x.copy())
    if DEVICE_TYPES and isinstance(x, DEVICE_TYPES):
        if hasattr(x, "_one_value"):  # tg.vmap's batched value: no one tensor
            x._one_value("making one tensor")
        raise TypeError(DEVICE_MESSAGE)
    if (isinstance(x, list | tuple) or (isinstance(x, np.ndarray) and x.dtype == object)) and (
        _objects_to_tensor is not None
    ):
        return _objects_to_tensor(x)
    return Tensor._external(normalize_array(x, copy=True))


DEVICE_MESSAGE = (
    "expected all tensors on one device, got a CUDA tensor among CPU operands (or in an op "
    "without a CUDA kernel: see the op reference); move it with .to('cpu') or the others "
    "with .to('cuda')"
)


def elementwise(op: Any, x: Any, y: Any = None, out: Any = None) -> Tensor:
    """Record elementwise ``op`` (a table row) on ``x`` (and ``y`` unless unary).

    This is the eager hot path: resolve operands to slots, one compiled call that
    records the node and runs its forward, one handle.
    """
    if out is not None:
        raise TypeError(f"{op.name}: out= is not supported (tensors are immutable)")
    if DEVICE_TYPES and (isinstance(x, DEVICE_TYPES) or isinstance(y, DEVICE_TYPES)):
        return devices.route((x, y)).elementwise(op, x, y)
    code = op.code
    unary = op.is_unary
    compare = op.is_compare
    # arrays and lists become constant tensors once, so a retry does not bind them again
    if type(x) is not Tensor and type(x) not in SCALARS:
        x = as_tensor(x)
    if not unary and type(y) is not Tensor and type(y) not in SCALARS:
        y = as_tensor(y)
    tape = current_tape()
    h = tape.header
    mark = None
    while True:
        ep = tape.epoch
        if type(x) is Tensor and x._tape is tape and x._epoch == ep:
            a, fa = x._slot, 0.0
        else:
            if mark is None or mark[0] != ep:
                mark = tape.mark()
            a, fa = bind_operand(tape, ep, x)
        if unary:
            b, fb = ABSENT, 0.0
        elif type(y) is Tensor and y._tape is tape and y._epoch == ep:
            b, fb = y._slot, 0.0
        else:
            if mark is None or mark[0] != ep:
                mark = tape.mark()
            b, fb = bind_operand(tape, ep, y)
        if tape.epoch != ep:  # binding rewound the tape: resolve again
            continue
        if a == SCALAR and b < 0:
            r = E_NOFLOAT
        else:
            r = current(record_elementwise)(h, code, a, b, fa, fb, compare)
        if r >= 0:
            if _record_tensors is record_tensors:
                _use_entry_points(h)
            if r >= DEFERRED:
                r = _numpy_forward(tape, op, r - DEFERRED)
            return result_handle(tape, r, ep)
        if r == E_NOFLOAT:  # integers and bools only: not differentiable, NumPy computes
            ufunc = _library_function(op)
            res = ufunc(values_of(x)) if unary else ufunc(values_of(x), values_of(y))
            return Tensor._external(normalize_array(res, copy=False))
        if r == E_BROADCAST:
            if mark is not None:  # leave the tape as it was: drop what was bound for this op
                tape.restore(mark, (x, y))
            raise broadcast_error(op.name, shape_of(x), shape_of(y))
        tape.fix(r)


# The eager fast paths call the recorder's compiled entry points, skipping numba's
# dispatcher (about 150 ns of the ~1 us an op costs; see ``_jit.entry_point``). They are
# the dispatchers themselves until the first op has compiled or loaded the recorder, or
# its interpreted twins while the kernel cache lacks it (``tapegrad.tiers``).
_record_tensors: Any = Unbound(record_tensors, lambda: _bind_recorders())
_record_scalar: Any = Unbound(record_elementwise, lambda: _bind_recorders())
_record_general: Any = Unbound(record_general, lambda: _bind_recorders())


def _bind_recorders() -> None:
    global _record_tensors, _record_scalar, _record_general
    _record_tensors = current(record_tensors)
    _record_scalar = current(record_elementwise)
    _record_general = current(record_general)
    _FRONT_ENDS.clear()


def _use_entry_points(h: np.ndarray) -> None:
    global _record_tensors, _record_scalar
    _record_scalar = entry_point(record_elementwise, h, 0, 0, 0, 0.0, 0.0, False)
    _record_tensors = entry_point(record_tensors, h, 0, 0, 0)


def _use_general_entry_point(h: np.ndarray) -> None:
    global _record_general
    _record_general = entry_point(record_general, h, 0, 0, False)


_POOL: Any = None


def _forget_pool() -> None:
    """A forked child has none of the pool's threads: it starts its own."""
    global _POOL
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _library_function(op: Any) -> Any:
    """The NumPy ufunc, or for a ``tapegrad.special`` row SciPy's, that computes row
    ``op`` on plain numbers (``tapegrad.special.gammaln(1.7)``)."""
    if op.namespace == "special":
        import scipy.special  # only here: SciPy's import costs ~0.1 s

        return getattr(scipy.special, op.name)
    return getattr(np, op.name)


def _numpy_forward(tape: Tape, op: Any, out: int) -> int:
    """Compute a large elementwise result with NumPy's ufunc, straight into its slot
    (the node is already recorded; its operands are in the link list before it). With
    same-shape operands and several cores, halves of it run in threads (ufunc loops
    release the GIL); which rows come here then is ``record._numpy_runs``'s choice
    (one thread pool at a time)."""
    global _POOL
    base = tape.h[H_NLINK] - 1  # out is the node's last link
    nin = 1 if op.is_unary else 2
    ins = [tape.view(s) for s in tape.links(base - nin, nin)]
    dst = tape.view(out)
    ufunc = getattr(np, op.name)
    workers = worker_count() if dst.size >= THREAD_MIN else 1
    with np.errstate(all="ignore"):  # IEEE results, no warnings: like the kernels
        if workers < 2 or any(a.size not in (1, dst.size) for a in ins):
            ufunc(*ins, out=dst)
            return out
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(workers, thread_name_prefix="tapegrad")
        flat_out = dst.reshape(-1)
        flat_in = [a.reshape(-1) for a in ins]
        cuts = np.linspace(0, dst.size, workers + 1).astype(int)

        def part(lo: int, hi: int) -> None:
            with np.errstate(all="ignore"):
                ufunc(*[a if a.size == 1 else a[lo:hi] for a in flat_in], out=flat_out[lo:hi])

        for f in [_POOL.submit(part, lo, hi) for lo, hi in itertools.pairwise(cuts)]:
            f.result()
    return out


def elementwise_function(op: Any) -> Callable[..., Tensor]:
    """The public function of an elementwise op: a fast path for tensor operands that
    live in the current tape, :func:`elementwise` for everything else."""
    opc = 2 * op.code + int(op.is_compare)

    if op.is_unary:

        def unary(x: Any, /, out: Any = None) -> Tensor:
            if type(x) is Tensor and out is None:
                tape = current_tape()
                ep = tape.epoch
                if x._tape is tape and x._epoch == ep:
                    r = _record_tensors(tape.header, opc, x._slot, ABSENT)
                    if r >= 0:
                        if r >= DEFERRED:
                            r = _numpy_forward(tape, op, r - DEFERRED)
                        return result_handle(tape, r, ep)
            return elementwise(op, x, out=out)

        return unary

    code = op.code
    compare = op.is_compare

    def binary(x: Any, y: Any, /, out: Any = None) -> Tensor:
        tx = type(x)
        ty = type(y)
        if out is None and (tx is Tensor or ty is Tensor):
            tape = current_tape()
            ep = tape.epoch
            r = -1
            if tx is Tensor and ty is Tensor:
                if x._tape is tape and x._epoch == ep and y._tape is tape and y._epoch == ep:
                    r = _record_tensors(tape.header, opc, x._slot, y._slot)
            # a Python float or int goes by value (weak, as NumPy treats it): `y * 1.01`,
            # `y ** 2`; so does a NumPy float64 scalar with a float64 tensor (strong under
            # NEP 50, but then it changes nothing): `y - observed[0, k]`
            elif ty is float or ty is int:
                if x._tape is tape and x._epoch == ep:
                    r = _record_scalar(tape.header, code, x._slot, SCALAR, 0.0, float(y), compare)
            elif tx is float or tx is int:
                if y._tape is tape and y._epoch == ep:
                    r = _record_scalar(tape.header, code, SCALAR, y._slot, float(x), 0.0, compare)
            elif ty is np.float64:
                if x._tape is tape and x._epoch == ep and tape.slot_field(S_DTYPE, x._slot) == F64:
                    r = _record_scalar(tape.header, code, x._slot, SCALAR, 0.0, float(y), compare)
            # a float NumPy array: a constant (`onehot * p`, `x - mu`), imported as
            # elementwise() would, without the Tensor it makes for a retry
            elif ty is np.ndarray:
                if x._tape is tape and x._epoch == ep and y.dtype in FLOAT_DTYPES:
                    r = _with_constant(tape, ep, opc, x._slot, y, False)
            elif tx is np.ndarray:
                if y._tape is tape and y._epoch == ep and x.dtype in FLOAT_DTYPES:
                    r = _with_constant(tape, ep, opc, y._slot, x, True)
            if r >= 0:  # anything else (binding, errors, growing the tape): the full path
                if r >= DEFERRED:
                    r = _numpy_forward(tape, op, r - DEFERRED)
                return result_handle(tape, r, ep)
        return elementwise(op, x, y, out=out)

    return binary


def _with_constant(tape: Tape, ep: int, opc: int, slot: int, arr: np.ndarray, first: bool) -> int:
    """Record binary op ``opc`` on tensor ``slot`` and a copy of float array ``arr`` (the
    first operand if ``first``); a status below 0 leaves the tape as it was, for
    :func:`elementwise` to take over (growing the tape, raising a shape error)."""
    mark = tape.mark()
    c = tape.import_array(arr.copy(), SLOT_CONST)
    if tape.epoch != ep:  # importing rewound the tape: start over
        return -1
    a, b = (c, slot) if first else (slot, c)
    r = _record_tensors(tape.header, opc, a, b)
    if r < 0:
        tape.restore(mark)
    return r


def general(
    op: Any,
    sig: int,
    inputs: list[Any],
    outs: list[tuple[int, tuple[int, ...]]],
    ip: list[int] = (),
    fp: list[float] = (),
    alias: bool = False,
    visible: int = 1,
) -> Any:
    """Record an array op: inputs (Tensors, arrays or numbers), outputs
    ``(dtype code, shape)``, int and float parameters. Returns the first output, or a
    tuple of the first ``visible`` outputs (further outputs are internal: saved for the
    backward only)."""
    inputs = [v if isinstance(v, Tensor) else as_tensor(v) for v in inputs]
    tape = current_tape()
    h = tape.header
    plain = False
    while True:
        ep = tape.epoch
        # the request (layout.R_BODY), written with plain stores: the compiled recorder
        # checks capacity and copies it into the tables
        rq = tape.rq
        k = R_BODY
        try:
            for v in inputs:
                rq[k] = (
                    v._slot if v._tape is tape and v._epoch == ep else bind_operand(tape, ep, v)[0]
                )
                k += 1
            if tape.epoch != ep:  # binding an operand rewound the tape: again
                continue
            for v in ip:
                rq[k] = v
                k += 1
            for dt, shape in outs:
                rq[k] = dt
                rq[k + 1] = len(shape)
                k += 2
                for d in shape:
                    rq[k] = d
                    k += 1
            rqf = tape.rqf
            for v in fp:
                rqf[k] = v
                k += 1
        except IndexError:  # more than the buffer holds (stack of many tensors, ...)
            tape.grow_request(2 * _request_len(inputs, outs, ip, fp))
            continue
        except TypeError:  # a store takes ints and floats only: convert once (np.bool_)
            if plain:
                raise
            plain = True
            ip = [int(v) for v in ip]
            fp = [float(v) for v in fp]
            outs = [(int(dt), tuple(int(d) for d in shape)) for dt, shape in outs]
            continue
        rq[R_NIN] = len(inputs)
        rq[R_NOUT] = len(outs)
        rq[R_NIP] = len(ip)
        rq[R_NFP] = len(fp)
        rq[R_ALIAS] = alias
        if _record_general is record_general:
            _use_general_entry_point(h)
        r = _record_general(h, op.code, sig, op.differentiable)
        if r >= 0:
            if visible == 1:
                return result_handle(tape, r, ep)
            return tuple(result_handle(tape, r + j, ep) for j in range(visible))
        if r == E_LINALG:
            shapes = ", ".join(str(t.shape) for t in inputs)
            raise np.linalg.LinAlgError(f"{op.name}: {op.failure} (input shapes {shapes})")
        tape.fix(r)
        if r == E_SPACE:  # the headroom fix() keeps may be less than this op asks for
            nshape = sum(len(s) for _, s in outs)
            tape.reserve_request(len(inputs) + len(outs), len(ip), len(fp), nshape)


# compiled front end (record.record_reduce...) -> its entry point, once a first call
# has compiled or loaded it
_FRONT_ENDS: dict[Any, Any] = {}
on_switch(_bind_recorders)


def front_end(fn: Any, op: Any, operands: tuple, params: tuple) -> Tensor | None:
    """Record ``op`` through compiled front end ``fn`` (``record.record_reduce``,
    ``record_matmul``, ``record_along``): ``fn(header, op code, differentiable, *operand
    slots, *params)`` reads the operands' shapes, writes the request and records. The
    operands are tensors in the current tape or float arrays (constants, copied as
    :func:`general` would). None, with the tape as it was, where ``fn`` declines or an
    operand is anything else: the Python front end then records the op (binding,
    growing the tape, NumPy's errors). ``params`` are Python ints and bools only (the
    entry point does not check types)."""
    tape = current_tape()
    ep = tape.epoch
    mark = None
    slots = []
    r = E_FRONT_END
    for v in operands:
        if type(v) is Tensor and v._tape is tape and v._epoch == ep:
            slots.append(v._slot)
        elif type(v) is np.ndarray and v.dtype in FLOAT_DTYPES:
            if mark is None:
                mark = tape.mark()
            slots.append(tape.import_array(v.copy(), SLOT_CONST))
            if tape.epoch != ep:  # importing rewound the tape: the full path
                return None
        else:
            break
    else:
        h = tape.header
        args = (h, op.code, op.differentiable, *slots, *params)
        rec = _FRONT_ENDS.get(fn) or current(fn, args)
        r = rec(*args)
    if r < 0:
        if mark is not None:  # a constant imported for this op: not kept twice
            tape.restore(mark)
        return None
    if rec is fn:
        _FRONT_ENDS[fn] = entry_point(fn, tape.header, op.code, op.differentiable, *slots, *params)
    return result_handle(tape, r, ep)


def _request_len(inputs: list, outs: list, ip: Any, fp: Any) -> int:
    """Cells the request of an array op takes in the request buffer."""
    return R_BODY + len(inputs) + len(ip) + sum(2 + len(s) for _, s in outs) + len(fp)
