"""Front ends of the ``shape`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.shape`)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ...grad_mode import is_grad_enabled
from ...host_arrays import normalize_array
from ...layout import DTYPE_CODE, FLOAT_CODES, NP_DTYPES
from ...record import cast_slot
from ...recording import as_tensor, general
from ...shapes import normalize_axes, normalize_shape
from ...tape import current_tape
from ...tensors import Tensor, bind_operand, result_handle
from ...tiers import call
from .rows import (
    ARRAY_SPLIT,
    BROADCAST_TO,
    CAST,
    CLIP,
    CONCATENATE,
    DIAG,
    DIAGONAL,
    EXPAND_DIMS,
    FLIP,
    GATHER,
    HSTACK,
    MOVEAXIS,
    PAD,
    RAVEL,
    REPEAT,
    RESHAPE,
    ROLL,
    SCATTER,
    SETITEM,
    SPLIT,
    SQUEEZE,
    STACK,
    SWAPAXES,
    TAKE,
    TILE,
    TRANSPOSE,
    VSTACK,
    WHERE,
)


def astype(x: Any, dtype: Any) -> Tensor:
    """``x`` converted to ``dtype``; differentiable between float64 and float32."""
    t = as_tensor(x)
    dst = DTYPE_CODE.get(np.dtype(dtype))
    if dst is None:
        raise TypeError(f"astype: unsupported dtype {np.dtype(dtype)}")
    if t.dtype == NP_DTYPES[dst]:
        return t
    if dst not in FLOAT_CODES:  # to int/bool: not differentiable, NumPy converts
        return Tensor._external(t._value().astype(NP_DTYPES[dst]))
    tape = current_tape()
    while True:
        ep = tape.epoch
        a, _ = bind_operand(tape, ep, t)
        if tape.epoch != ep:
            continue
        r = call(cast_slot, tape.header, a, dst)
        if r >= 0:
            return result_handle(tape, r, ep) if r != a else t
        tape.fix(r)


def reshape(x: Any, *shape: Any) -> Tensor:
    """``x`` with a new shape (C order; one dimension may be -1). No copy is made."""
    t = as_tensor(x)
    if len(shape) == 1 and not isinstance(shape[0], int | np.integer):
        shape = tuple(shape[0])
    old = t.shape
    new = normalize_shape(math.prod(old), shape, old)
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:  # integers and booleans: not differentiable, NumPy reshapes
        return Tensor._external(t._value().reshape(new))
    return general(RESHAPE, dt, [t], [(dt, new)], alias=True)


def transpose(x: Any, axes: Any = None) -> Tensor:
    """Permute the axes (reverse them by default), as ``numpy.transpose``."""
    t = as_tensor(x)
    shape = t.shape
    nd = len(shape)
    if axes is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        perm = tuple(operator.index(a) for a in axes)
        perm = tuple(a + nd if a < 0 else a for a in perm)
        if sorted(perm) != list(range(nd)):
            raise ValueError(f"transpose: axes {tuple(axes)} don't match array of shape {shape}")
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:
        return Tensor._external(np.ascontiguousarray(np.transpose(t._value(), perm)))
    return general(TRANSPOSE, dt, [t], [(dt, tuple(shape[a] for a in perm))], list(perm))


def _index_values(key: Any) -> Any:
    if isinstance(key, tuple):
        return tuple(_index_values(k) for k in key)
    if isinstance(key, Tensor):
        return key._value()
    if isinstance(key, list):
        return np.asarray([_index_values(k) for k in key])
    return key


def gather_positions(x: Any, index: Any, fill: Any = None, what: str = "getitem") -> Tensor:
    """``x`` rearranged by NumPy itself: ``index(positions)`` is applied to the array of
    ``x``'s flat positions, and the result's positions are gathered (the backward
    scatter-adds, so repeated positions add up). Position -1 takes the value ``fill``.

    This is how indexing, flip, roll, tile, repeat, take, diagonal, pad and split get
    NumPy's exact semantics, argument checking and error messages.
    """
    t = as_tensor(x)
    shape = t.shape
    try:
        positions = np.arange(math.prod(shape), dtype=np.int64)
        idx = np.asarray(index(positions.reshape(shape)))
    except (IndexError, ValueError, TypeError) as e:
        raise type(e)(f"{what}: {e} (tensor of shape {shape})") from None
    idx = normalize_array(idx, copy=not idx.flags.owndata)
    dt = DTYPE_CODE[t.dtype]
    src = t
    if fill is not None and (idx < 0).any():
        idx = np.where(idx < 0, positions.size, idx)
        src = concatenate([t.reshape(-1), np.full(1, fill, t.dtype)])
    if dt not in FLOAT_CODES:
        # (np.asarray: a 0-d index gives a NumPy scalar, which a tensor cannot hold)
        return Tensor._external(np.asarray(as_tensor(src)._value().reshape(-1)[idx]))
    return general(GATHER, dt, [src, idx], [(dt, idx.shape)])


def scatter_add(values: Any, positions: Any, shape: tuple[int, ...]) -> Tensor:
    """``out = zeros(shape); out.flat[positions] += values`` (repeated positions add up):
    the transpose of a gather, so a gather's gradient is an op that can be
    differentiated again. ``positions`` is an int64 array of ``values``' size."""
    t = as_tensor(values)
    where = np.ascontiguousarray(positions, dtype=np.int64).reshape(-1)
    if where.size != t.size:
        raise ValueError(
            f"scatter_add: {where.size} positions for {t.size} values (shape {t.shape})"
        )
    n = math.prod(shape)
    if where.size and (where.min() < 0 or where.max() >= n):
        raise IndexError(f"scatter_add: a position is outside the {n} elements of {shape}")
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:
        out = np.zeros(n, t.dtype)
        np.add.at(out, where, t._value().reshape(-1))
        return Tensor._external(out.reshape(shape))
    return general(SCATTER, dt, [t, Tensor._external(where)], [(dt, tuple(shape))])


def basic_key(key: Any) -> Any:
    """A hashable stand-in for a key made of ints, slices of ints, ``None`` and ``...``
    (NumPy's basic indexing), or None for any other key."""
    parts = key if type(key) is tuple else (key,)
    out = []
    for k in parts:
        tk = type(k)
        if tk is int or k is None or k is Ellipsis:
            out.append(k)
        elif tk is np.int64:  # from a loop over np.arange
            out.append(int(k))
        elif tk is slice and all(type(v) is int or v is None for v in (k.start, k.stop, k.step)):
            out.append((k.start, k.stop, k.step))
        else:
            return None
    return type(key) is tuple, tuple(out)


_GATHERS_MAX = 4096


_IP_GATHER_MAX = 8


# (shape, basic key) -> (result shape, positions: a tuple of ints or an int64 array)
_POSITIONS: dict[tuple, tuple] = {}


def getitem(x: Any, key: Any) -> Tensor:
    """``x[key]`` with NumPy semantics: slices, ints, ``None``, ``...``, integer arrays
    (repeated indices add up their gradients) and boolean masks, mixed freely."""
    t = as_tensor(x)
    basic = basic_key(key)
    if basic is not None and t.dtype.kind == "f":
        # `u[k]` in a Python loop makes the same few gathers over and over; computing
        # their positions with NumPy (arange, reshape, index, copy) costs more than
        # recording the op, so they are kept, shared by all tapes (a program's fresh
        # tape would otherwise recompute them all while capturing). Up to
        # _IP_GATHER_MAX positions go in the node's int parameters (the gather then
        # has one input); more in a constant tensor per tape (binding is per tape and
        # epoch, ~2.5 us, and tapes are per thread).
        spec = _POSITIONS.get((t.shape, basic))
        if spec is None:
            positions = np.arange(math.prod(t.shape), dtype=np.int64).reshape(t.shape)
            try:
                arr = np.array(positions[key], dtype=np.int64)
            except IndexError as e:
                raise IndexError(f"getitem: {e} (tensor of shape {t.shape})") from None
            # not flagged read-only: binding takes the address of a writable array's
            # buffer 2 us faster (tape.data_address), and nothing writes a gather's
            # positions (kernels write outputs and gradients only)
            where = tuple(arr.ravel().tolist()) if arr.size <= _IP_GATHER_MAX else arr
            if len(_POSITIONS) >= _GATHERS_MAX:
                _POSITIONS.clear()
            spec = _POSITIONS[(t.shape, basic)] = (arr.shape, where)
        shape, where = spec
        dt = DTYPE_CODE[t.dtype]
        if type(where) is tuple:
            return general(GATHER, dt, [t], [(dt, shape)], ip=where)
        gathers = current_tape().gathers
        idx = gathers.get((t.shape, basic))
        if idx is None:
            if len(gathers) >= _GATHERS_MAX:
                gathers.clear()
            idx = gathers[(t.shape, basic)] = Tensor._external(where)
        return general(GATHER, dt, [t, idx], [(dt, shape)])
    k = _index_values(key)
    return gather_positions(t, lambda p: p[k])


def _view(shape: tuple[int, ...]) -> np.ndarray:
    """A zero-byte array of ``shape`` for asking NumPy what a shape function does."""
    return np.broadcast_to(np.empty((), np.bool_), shape)


def ravel(a: Any, order: str = "C") -> Tensor:
    """The values as a 1-D tensor (C order)."""
    if order != "C":
        raise NotImplementedError("ravel: only order='C'")
    return reshape(a, -1)


def squeeze(a: Any, axis: Any = None) -> Tensor:
    """Remove axes of length 1."""
    t = as_tensor(a)
    return reshape(t, np.squeeze(_view(t.shape), axis).shape)


def expand_dims(a: Any, axis: Any) -> Tensor:
    """Insert axes of length 1 at ``axis``."""
    t = as_tensor(a)
    return reshape(t, np.expand_dims(_view(t.shape), axis).shape)


def axis_index(axis: Any, ndim: int, op: str, bools: bool = True) -> int:
    """One axis of an ``ndim``-dimensional array as a non-negative int, with NumPy's
    AxisError out of range (a wrap-around ``axis % ndim`` would answer for an axis the
    array does not have). A bool is taken as an int, as NumPy's Python-level functions
    (``diff``, ``swapaxes``, ``median``...) take it, unless ``bools`` is False (where
    NumPy's own function refuses it: ``trapezoid``, ``tensordot``)."""
    try:  # one integer: a tuple, list or None is refused, as in NumPy
        if not bools and isinstance(axis, bool | np.bool_):
            raise TypeError
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{op}: an integer is required for the axis, got {axis!r}") from None
    (ax,) = normalize_axes(axis, ndim, op, bools=True)
    return ax


def swapaxes(a: Any, axis1: int, axis2: int) -> Tensor:
    """Interchange two axes."""
    t = as_tensor(a)
    perm = list(range(t.ndim))
    i, j = axis_index(axis1, t.ndim, "swapaxes"), axis_index(axis2, t.ndim, "swapaxes")
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(t, perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Tensor:
    """Move axes to new positions (the others keep their order)."""
    t = as_tensor(a)
    # NumPy moves the axes of a zero-byte view whose strides name the original axes
    view = np.lib.stride_tricks.as_strided(
        np.empty(1, np.uint8), t.shape, [t.ndim - d for d in range(t.ndim)]
    )
    moved = np.moveaxis(view, source, destination)
    return transpose(t, [t.ndim - s for s in moved.strides])


def broadcast_to(array: Any, shape: Any) -> Tensor:
    """``array`` broadcast to ``shape``; the backward sums over the broadcast axes."""
    t = as_tensor(array)
    shape = tuple(np.broadcast_to(_view(t.shape), shape).shape)  # NumPy's checks
    if shape == t.shape:
        return t
    return t + np.zeros(shape, t.dtype)


def _result_dtype(tensors: list[Tensor]) -> np.dtype:
    return np.result_type(*[np.empty(0, t.dtype) for t in tensors])


def concatenate(arrays: Any, axis: Any = 0, out: Any = None, dtype: Any = None) -> Tensor:
    """Join tensors along an existing axis (None: flatten first)."""
    if out is not None:
        raise TypeError("concatenate: out= is not supported (tensors are immutable)")
    ts = [as_tensor(a) for a in arrays]
    if not ts:
        raise ValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        ts = [t.reshape(-1) for t in ts]
        axis = 0
    dtype = np.dtype(dtype) if dtype is not None else _result_dtype(ts)
    nd = ts[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    try:  # NumPy's shape checks on zero-byte views
        shape = np.concatenate([_view(t.shape) for t in ts], axis=axis).shape
    except (ValueError, np.exceptions.AxisError) as e:
        raise type(e)(f"concatenate: {e} (shapes {[t.shape for t in ts]})") from None
    ax = operator.index(axis) % nd
    dt = DTYPE_CODE.get(dtype)
    if dt not in FLOAT_CODES:
        return Tensor._external(np.concatenate([t._value() for t in ts], axis=ax).astype(dtype))
    ts = [astype(t, dtype) for t in ts]
    outer = math.prod(shape[:ax])
    inner = math.prod(shape[ax + 1 :])
    ip = [outer, inner, shape[ax], *[t.shape[ax] for t in ts]]
    return general(CONCATENATE, dt, ts, [(dt, shape)], ip)


def stack(arrays: Any, axis: int = 0, out: Any = None) -> Tensor:
    """Join tensors of the same shape along a new axis."""
    ts = [as_tensor(a) for a in arrays]
    if not ts:
        raise ValueError("stack: need at least one array to stack")
    if any(t.shape != ts[0].shape for t in ts):
        raise ValueError(
            f"stack: all input arrays must have the same shape (got {[t.shape for t in ts]})"
        )
    ax = operator.index(axis)
    return concatenate([expand_dims(t, ax) for t in ts], axis=ax, out=out)


def atleast_1d(a: Any) -> Tensor:
    t = as_tensor(a)
    return t.reshape(1) if t.ndim == 0 else t


def atleast_2d(a: Any) -> Tensor:
    t = as_tensor(a)
    return t.reshape(1, -1) if t.ndim < 2 else t


def vstack(tup: Any) -> Tensor:
    """Stack rows: 1-D inputs become rows of a matrix."""
    return concatenate([atleast_2d(a) for a in tup], axis=0)


def hstack(tup: Any) -> Tensor:
    """Stack columns: concatenate 1-D inputs, or along axis 1."""
    ts = [atleast_1d(a) for a in tup]
    return concatenate(ts, axis=0 if ts and ts[0].ndim == 1 else 1)


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """Split into equal parts (or at the given indices), as ``numpy.split``."""
    t = as_tensor(ary)
    pieces = np.split(_positions(t), indices_or_sections, axis=axis)
    return [gather_positions(t, lambda p, q=q: q, what="split") for q in pieces]


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """Split into parts that may differ by one in length, as ``numpy.array_split``."""
    t = as_tensor(ary)
    pieces = np.array_split(_positions(t), indices_or_sections, axis=axis)
    return [gather_positions(t, lambda p, q=q: q, what="array_split") for q in pieces]


def _positions(t: Tensor) -> np.ndarray:
    return np.arange(t.size, dtype=np.int64).reshape(t.shape)


def tile(A: Any, reps: Any) -> Tensor:
    """Repeat the whole tensor ``reps`` times along each axis."""
    return gather_positions(A, lambda p: np.tile(p, reps), what="tile")


def repeat(a: Any, repeats: Any, axis: Any = None) -> Tensor:
    """Repeat each element (along ``axis``, or of the flattened tensor)."""
    return gather_positions(a, lambda p: np.repeat(p, repeats, axis=axis), what="repeat")


def flip(m: Any, axis: Any = None) -> Tensor:
    """Reverse the order of elements along ``axis`` (all axes by default)."""
    return gather_positions(m, lambda p: np.flip(p, axis=axis), what="flip")


def roll(a: Any, shift: Any, axis: Any = None) -> Tensor:
    """Roll elements along ``axis`` (of the flattened tensor when None)."""
    return gather_positions(a, lambda p: np.roll(p, shift, axis=axis), what="roll")


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Tensor:
    """Take elements along ``axis`` (of the flattened tensor when None)."""
    if out is not None:
        raise TypeError("take: out= is not supported (tensors are immutable)")
    idx = indices._value() if isinstance(indices, Tensor) else indices
    return gather_positions(a, lambda p: np.take(p, idx, axis=axis, mode=mode), what="take")


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The diagonal (an ``offset`` one) of the 2-D slices across ``axis1``, ``axis2``."""
    return gather_positions(a, lambda p: np.diagonal(p, offset, axis1, axis2), what="diagonal")


def diag(v: Any, k: int = 0) -> Tensor:
    """The k-th diagonal of a matrix, or the square matrix with ``v`` on it."""
    t = as_tensor(v)
    if t.ndim == 1:  # build a matrix: off-diagonal positions are -1, filled with 0
        return gather_positions(t, lambda p: np.diag(p + 1, k) - 1, fill=0, what="diag")
    return gather_positions(t, lambda p: np.diag(p, k), what="diag")


def pad(array: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Tensor:
    """Pad with a constant (``mode='constant'``, scalar ``constant_values``)."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode={mode!r} is not supported (only 'constant')")
    if np.ndim(constant_values) != 0:
        raise NotImplementedError("pad: only a scalar constant_values is supported")
    return gather_positions(
        array,
        lambda p: np.pad(p, pad_width, constant_values=-1),
        fill=float(constant_values),
        what="pad",
    )


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """Elements of ``x`` where ``condition``, else of ``y`` (broadcast); the gradient of
    each goes where it was chosen. ``where(condition)`` is ``nonzero`` (constants)."""
    if x is None and y is None:
        c = condition._value() if isinstance(condition, Tensor) else np.asarray(condition)
        return tuple(Tensor._external(i) for i in np.nonzero(c))
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    c, tx, ty = as_tensor(condition), as_tensor(x), as_tensor(y)
    if c.dtype != np.bool_:
        c = c != 0
    # Python numbers are weak (NEP 50): where(c, x32, 0.0) stays float32. The common
    # cases skip NumPy's promotion and broadcasting calls (several us each).
    weak = (float, int, bool)
    if tx.dtype == ty.dtype and (type(x) in weak) == (type(y) in weak):
        dtype = tx.dtype
    elif type(y) in weak and type(x) not in weak and tx.dtype.kind == "f":
        dtype = tx.dtype
    elif type(x) in weak and type(y) not in weak and ty.dtype.kind == "f":
        dtype = ty.dtype
    else:
        dtype = np.result_type(
            *[v if type(v) in weak else np.empty(0, t.dtype) for v, t in ((x, tx), (y, ty))]
        )
    try:
        if c.shape == tx.shape and (ty.shape == tx.shape or not ty.shape):
            shape = tx.shape
        else:
            shape = np.broadcast_shapes(c.shape, tx.shape, ty.shape)
    except ValueError:
        raise ValueError(
            f"where: shapes {c.shape}, {tx.shape} and {ty.shape} do not broadcast together"
        ) from None
    dt = DTYPE_CODE.get(dtype)
    if dt not in FLOAT_CODES:
        return Tensor._external(np.where(c._value(), tx._value(), ty._value()).astype(dtype))
    return general(WHERE, dt, [c, astype(tx, dtype), astype(ty, dtype)], [(dt, shape)])


def clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None) -> Tensor:
    """Limit values to [a_min, a_max]; the gradient passes where a_min <= a <= a_max
    (bounds included, as in PyTorch) and goes to a bound where it clipped."""
    if out is not None:
        raise TypeError("clip: out= is not supported (tensors are immutable)")
    t = as_tensor(a)
    if a_min is not None:
        t = where(t < a_min, a_min, t)
    if a_max is not None:
        t = where(t > a_max, a_max, t)
    return t


def _selection(x: Tensor, key: Any, value: Any, what: str) -> tuple[Any, np.ndarray, Tensor]:
    """For an in-place write ``what`` of ``value`` at ``x[key]``: the index, the flat
    positions it selects (shaped as the selection) and the value as a tensor, after
    NumPy's index and broadcast checks (the in-place checks of ``x`` are the caller's:
    :func:`write_in_place`)."""
    k = _index_values(key)
    pos = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    try:
        target = pos[k]
    except (IndexError, ValueError, TypeError) as e:
        raise type(e)(f"{what}: {e} (tensor of shape {x.shape})") from None
    v = as_tensor(value)
    try:
        np.broadcast_to(_view(v.shape), target.shape)
    except ValueError:
        raise ValueError(
            f"{what}: could not broadcast value of shape {v.shape} into "
            f"selection of shape {target.shape}"
        ) from None
    if x.dtype.kind != "f" and v.requires_grad and is_grad_enabled():
        raise TypeError(
            f"{what}: writes a tensor that requires grad ({v.shape} {v.dtype}) into an "
            f"integer tensor ({x.shape} {x.dtype}), which cannot hold its gradient; cast "
            "the target to a float dtype, or pass .detach()"
        )
    return k, target, v


def setitem(x: Tensor, key: Any, value: Any) -> None:
    """``x[key] = value``: the handle ``x`` now holds a new, recorded value.

    As NumPy assignment: ``value`` is cast to x's dtype and broadcast to the selection,
    and where an index repeats the last assignment wins. The gradient flows to the old
    values that were kept and to the assigned ones that survived. Other tensors that
    held x's old value keep it (the tape's values are never modified in place).
    """

    def new_value() -> Tensor:
        k, target, v = _selection(x, key, value, "setitem")
        n = x.size
        if x.dtype.kind != "f":  # integer / bool data: NumPy assigns, nothing to record
            data = x._value().copy()
            data[k] = v._value()
            return Tensor._external(data)
        v = broadcast_to(astype(v, x.dtype), target.shape).reshape(-1)
        perm = np.arange(n, dtype=np.int64).reshape(x.shape)
        perm[k] = n + np.arange(target.size, dtype=np.int64).reshape(target.shape)
        both = concatenate([x.reshape(-1), v])
        return gather_positions(both, lambda p: p[perm.reshape(-1)]).reshape(x.shape)

    write_in_place(x, "setitem", new_value)


def write_in_place(x: Tensor, what: str, new_value: Callable[[], Tensor]) -> None:
    """``x`` takes ``new_value()`` in place. The version goes up first (the node that
    computes the new value saves ``x`` at the new version); an index, value or cast
    that is refused takes the bump back, so that a graph that saved ``x`` still runs
    backward (nothing was replaced). ``x[key] = v``, ``np.add.at`` and the augmented
    operators (``+=``, ``&=``...) all write through here."""
    x._begin_inplace(what)
    try:
        result = new_value()
    except BaseException:
        x._undo_inplace()
        raise
    x._inplace(result, what)


def ufunc_at(name: str, x: Tensor, indices: Any, b: Any) -> None:
    """``numpy.add.at(x, indices, b)`` (and ``subtract.at``) on a tensor: unbuffered
    in place, so repeated indices add up every time; ``x`` now holds a new, recorded
    value (the gradient reaches the old values and ``b``, summed over repeats)."""
    if name not in ("add", "subtract"):
        raise TypeError(f"{name}.at: only add.at and subtract.at are supported on tensors")

    def new_value() -> Tensor:
        k, target, v = _selection(x, indices, b, f"{name}.at")
        if x.dtype.kind != "f":  # integer data: NumPy adds, nothing to record
            data = x._value().copy()
            getattr(np, name).at(data, k, v._value())
            return Tensor._external(data)
        v = broadcast_to(astype(v, x.dtype), target.shape).reshape(-1)
        if name == "subtract":
            v = -v
        return x + scatter_add(v, target.reshape(-1), x.shape)

    write_in_place(x, f"{name}.at", new_value)


# each row's public function
CAST.front = astype
RESHAPE.front = reshape
TRANSPOSE.front = transpose
GATHER.front = getitem
SCATTER.front = scatter_add
CONCATENATE.front = concatenate
WHERE.front = where
RAVEL.front = ravel
SQUEEZE.front = squeeze
EXPAND_DIMS.front = expand_dims
SWAPAXES.front = swapaxes
MOVEAXIS.front = moveaxis
BROADCAST_TO.front = broadcast_to
STACK.front = stack
VSTACK.front = vstack
HSTACK.front = hstack
SPLIT.front = split
ARRAY_SPLIT.front = array_split
TILE.front = tile
REPEAT.front = repeat
FLIP.front = flip
ROLL.front = roll
TAKE.front = take
DIAGONAL.front = diagonal
DIAG.front = diag
PAD.front = pad
CLIP.front = clip
SETITEM.front = setitem
