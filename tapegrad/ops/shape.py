"""Rows that move values: cast, reshape, transpose, indexing (gather)."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..kernels.shape import (
    cast_bwd,
    cast_fwd,
    gather_bwd,
    gather_fwd,
    reshape_bwd,
    reshape_fwd,
    transpose_bwd,
    transpose_fwd,
)
from ..layout import BOOL, DTYPE_CODE, F32, F64, FLOAT_CODES, I64, NP_DTYPES, cast_sig
from ..record import cast_slot
from ..tape import current_tape, normalize_array
from ..tensor import Tensor, _in_tape, _operand, as_tensor, general
from .table import Kind, Op

# --- cast -------------------------------------------------------------------------------


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
        a, _ = _operand(tape, ep, t)
        if tape.epoch != ep:
            continue
        r = cast_slot(tape.header, a, dst)
        if r >= 0:
            return _in_tape(tape, r, ep) if r != a else t
        tape.fix(r)


def _cast_cases() -> list:
    return [
        (
            "float64->float32->float64",
            lambda m, x: x.astype(np.float32).astype(np.float64),
            [(2, 3)],
            {"eps": 1e-2, "rtol": 1e-5},
        ),
    ]


CAST = Op(
    "astype",
    Kind.ARRAY,
    cast_fwd,
    cast_bwd,
    "dtype conversion (float64 <-> float32)",
    sigs=tuple(cast_sig(s, d) for d in (F64, F32) for s in (F64, F32, I64, BOOL) if s != d),
    front=astype,
    cases=_cast_cases,
)

# --- reshape ------------------------------------------------------------------------------


def _normalize_shape(size: int, shape: tuple, old: tuple) -> tuple[int, ...]:
    shape = tuple(operator.index(d) for d in shape)
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension")
    known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != size:
        raise ValueError(
            f"reshape: cannot reshape array of size {size} (shape {old}) into shape {shape}"
        )
    return shape


def reshape(x: Any, *shape: Any) -> Tensor:
    """``x`` with a new shape (C order; one dimension may be -1). No copy is made."""
    t = as_tensor(x)
    if len(shape) == 1 and not isinstance(shape[0], int | np.integer):
        shape = tuple(shape[0])
    old = t.shape
    new = _normalize_shape(int(np.prod(old, dtype=np.int64)), shape, old)
    dt = DTYPE_CODE[t.dtype]
    return general(RESHAPE, dt, [t], [(dt, new)], alias=True)


def _reshape_cases() -> list:
    return [
        ("(2,3)->(6,)", lambda m, x: m.reshape(x, (6,)), [(2, 3)], {}),
        ("(2,3,2)->(3,-1)", lambda m, x: m.reshape(x, (3, -1)), [(2, 3, 2)], {}),
        ("()->(1,1)", lambda m, x: m.reshape(x, (1, 1)), [()], {}),
        ("(4,)->(2,2) then sin", lambda m, x: m.sin(m.reshape(x, (2, 2))), [(4,)], {}),
    ]


RESHAPE = Op(
    "reshape",
    Kind.ARRAY,
    reshape_fwd,
    reshape_bwd,
    "new shape, same data (no copy)",
    alias=True,
    front=reshape,
    cases=_reshape_cases,
)

# --- transpose ------------------------------------------------------------------------------


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


def _transpose_cases() -> list:
    return [
        ("(3,4).T", lambda m, x: m.transpose(x), [(3, 4)], {}),
        ("(2,3,4) perm (1,0,2)", lambda m, x: m.transpose(x, (1, 0, 2)), [(2, 3, 4)], {}),
        ("(2,3,4) perm (2,0,1)", lambda m, x: m.transpose(x, (2, 0, 1)), [(2, 3, 4)], {}),
        ("(5,)", lambda m, x: m.transpose(x), [(5,)], {}),
        ("()", lambda m, x: m.transpose(x), [()], {}),
    ]


TRANSPOSE = Op(
    "transpose",
    Kind.ARRAY,
    transpose_fwd,
    transpose_bwd,
    "permute axes",
    front=transpose,
    cases=_transpose_cases,
)

# --- indexing -------------------------------------------------------------------------------


def _index_values(key: Any) -> Any:
    if isinstance(key, tuple):
        return tuple(_index_values(k) for k in key)
    if isinstance(key, Tensor):
        return key._value()
    if isinstance(key, list):
        return np.asarray([_index_values(k) for k in key])
    return key


def getitem(x: Any, key: Any) -> Tensor:
    """``x[key]`` with NumPy semantics: slices, ints, ``None``, ``...``, integer arrays
    (repeated indices add up their gradients) and boolean masks, mixed freely.

    NumPy itself interprets the key on an array of flat positions; the op gathers those
    positions, and its backward scatter-adds into them.
    """
    t = as_tensor(x)
    shape = t.shape
    try:
        positions = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
        idx = positions.reshape(shape)[_index_values(key)]
    except (IndexError, ValueError, TypeError) as e:
        raise type(e)(f"getitem: {e} (tensor of shape {shape})") from None
    idx = normalize_array(idx, copy=False)
    if not idx.flags.owndata:
        idx = idx.copy()
    dt = DTYPE_CODE[t.dtype]
    if dt not in FLOAT_CODES:
        return Tensor._external(t._value().reshape(-1)[idx])
    return general(GATHER, dt, [t, idx], [(dt, idx.shape)])


def _getitem_cases() -> list:
    rep = np.array([0, 2, 2, 1, 0])
    mask = np.array([True, False, True, True])
    return [
        ("int", lambda m, x: x[1], [(3, 4)], {}),
        ("negative int, 0-d result", lambda m, x: x[-1, 2], [(3, 4)], {}),
        ("slices with steps", lambda m, x: x[1:, ::2], [(3, 4)], {}),
        ("negative step", lambda m, x: x[::-1], [(5,)], {}),
        ("ellipsis and newaxis", lambda m, x: x[..., None, 1], [(2, 3, 4)], {}),
        ("repeated integer array", lambda m, x: x[rep], [(3,)], {}),
        ("integer array on axis 1", lambda m, x: x[:, rep[:3]], [(2, 3)], {}),
        ("boolean mask", lambda m, x: x[mask], [(4,)], {}),
        ("boolean mask on rows", lambda m, x: x[mask[:3]], [(3, 2)], {}),
        ("mixed advanced", lambda m, x: x[rep[:2], 1:], [(3, 3)], {}),
        ("0-d index of 0-d", lambda m, x: x[()], [()], {}),
    ]


GATHER = Op(
    "getitem",
    Kind.ARRAY,
    gather_fwd,
    gather_bwd,
    "indexing x[key] (basic, integer-array, boolean; scatter-add backward)",
    front=getitem,
    dunder=("__getitem__",),
    cases=_getitem_cases,
)
