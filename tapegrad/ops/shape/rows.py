"""Rows that move values: cast, reshape, transpose, indexing (gather)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...layout import BOOL, F32, F64, I64, cast_sig
from ..table import Kind, Op
from .kernels import (
    cast_bwd,
    cast_fwd,
    concatenate_bwd,
    concatenate_fwd,
    gather_bwd,
    gather_fwd,
    reshape_bwd,
    reshape_fwd,
    scatter_bwd,
    scatter_fwd,
    transpose_bwd,
    transpose_fwd,
    where_bwd,
    where_fwd,
)


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
    cuda="astype",
    array_saves=(),
    assigns=True,
    cases=_cast_cases,
    method=True,
)


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
    cuda="reshape",
    array_saves=(),
    assigns=True,
    cases=_reshape_cases,
)


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
    cuda="transpose",
    array_saves=(),
    assigns=True,
    cases=_transpose_cases,
)


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
    cuda="getitem",
    array_saves=(),
    dunder=("__getitem__",),
    cases=_getitem_cases,
)


def _scatter(m: Any, v: Any, where: np.ndarray, n: int) -> Any:
    """``out = zeros(n); out[where] += v`` with repeats adding up, in NumPy or tapegrad."""
    if m is np:
        out = np.zeros(n, v.dtype)
        np.add.at(out, where, v)
        return out
    return SCATTER.front(v, where, (n,))


def _scatter_cases() -> list:
    rep = np.array([3, 0, 3, 1, 3])
    return [
        ("repeated positions", lambda m, v: _scatter(m, v, rep, 5) ** 2, [(5,)], {}),
        ("a few positions", lambda m, v: _scatter(m, v, rep[:2], 4) ** 2, [(2,)], {}),
    ]


SCATTER = Op(
    "scatter_add",
    Kind.ARRAY,
    scatter_fwd,
    scatter_bwd,
    "out = 0; out[positions] += v (the gather's transpose, repeats add up)",
    cuda=None,
    array_saves=(),
    cases=_scatter_cases,
    namespace="internal",
)


def _cases(*entries: Any) -> Any:
    return lambda: [(*e, {}) for e in entries]


CONCATENATE = Op(
    "concatenate",
    Kind.ARRAY,
    concatenate_fwd,
    concatenate_bwd,
    "join along an existing axis",
    array_saves=(),
    cases=_cases(
        ("axis 0", lambda m, x, y: m.concatenate([x, y]), [(2, 3), (1, 3)]),
        (
            "axis 1, three",
            lambda m, x, y, z: m.concatenate([x, y, z], axis=1),
            [(2, 1), (2, 3), (2, 2)],
        ),
        ("axis None", lambda m, x, y: m.concatenate([x, y], axis=None), [(2, 2), (3,)]),
        ("with a constant", lambda m, x: m.concatenate([x, x[:2] * 0 + 1]), [(3,)]),
    ),
)


WHERE = Op(
    "where",
    Kind.ARRAY,
    where_fwd,
    where_bwd,
    "select x where condition, else y (broadcast)",
    array_saves=("x",),
    assigns=True,
    cases=_cases(
        ("same shape", lambda m, x, y: m.where(x > 0, x, y), [(3, 4), (3, 4)]),
        ("broadcast", lambda m, x, y: m.where(x > 0.5, x, y), [(3, 1), (4,)]),
        ("scalar branch", lambda m, x: m.where(x > 0, m.log(m.abs(x) + 1), 0.0), [(5,)]),
    ),
)


RAVEL = Op(
    "ravel",
    Kind.COMPOSITE,
    None,
    None,
    "flatten (reshape to 1-D)",
    cases=_cases(("2-d", lambda m, x: m.ravel(x), [(2, 3)])),
    method=True,
)


SQUEEZE = Op(
    "squeeze",
    Kind.COMPOSITE,
    None,
    None,
    "drop axes of length 1",
    cases=_cases(
        ("all", lambda m, x: m.squeeze(x), [(1, 3, 1)]),
        ("axis", lambda m, x: m.squeeze(x, axis=0), [(1, 3, 1)]),
    ),
    method=True,
)


EXPAND_DIMS = Op(
    "expand_dims",
    Kind.COMPOSITE,
    None,
    None,
    "insert axes of length 1",
    cases=_cases(
        ("axis 1", lambda m, x: m.expand_dims(x, 1), [(2, 3)]),
        ("axes (0, -1)", lambda m, x: m.expand_dims(x, (0, -1)), [(3,)]),
    ),
)


SWAPAXES = Op(
    "swapaxes",
    Kind.COMPOSITE,
    None,
    None,
    "interchange two axes",
    cases=_cases(("0, 2", lambda m, x: m.swapaxes(x, 0, 2), [(2, 3, 4)])),
    method=True,
)


MOVEAXIS = Op(
    "moveaxis",
    Kind.COMPOSITE,
    None,
    None,
    "move axes to new positions",
    cases=_cases(
        ("0 -> -1", lambda m, x: m.moveaxis(x, 0, -1), [(2, 3, 4)]),
        ("two axes", lambda m, x: m.moveaxis(x, [0, 1], [2, 0]), [(2, 3, 4)]),
    ),
)


BROADCAST_TO = Op(
    "broadcast_to",
    Kind.COMPOSITE,
    None,
    None,
    "broadcast to a shape (the backward sums)",
    cases=_cases(
        ("(3,) -> (2, 3)", lambda m, x: m.broadcast_to(x, (2, 3)), [(3,)]),
        ("(2, 1) -> (2, 4)", lambda m, x: m.broadcast_to(x, (2, 4)), [(2, 1)]),
    ),
)


STACK = Op(
    "stack",
    Kind.COMPOSITE,
    None,
    None,
    "join along a new axis",
    cases=_cases(
        ("axis 0", lambda m, x, y: m.stack([x, y]), [(2, 3), (2, 3)]),
        ("axis -1", lambda m, x, y: m.stack([x, y], axis=-1), [(3,), (3,)]),
    ),
)


VSTACK = Op(
    "vstack",
    Kind.COMPOSITE,
    None,
    None,
    "stack as rows",
    cases=_cases(("1-d and 2-d", lambda m, x, y: m.vstack([x, y]), [(3,), (2, 3)])),
)


HSTACK = Op(
    "hstack",
    Kind.COMPOSITE,
    None,
    None,
    "stack as columns",
    cases=_cases(
        ("1-d", lambda m, x, y: m.hstack([x, y]), [(3,), (2,)]),
        ("2-d", lambda m, x, y: m.hstack([x, y]), [(2, 1), (2, 2)]),
    ),
)


SPLIT = Op(
    "split",
    Kind.COMPOSITE,
    None,
    None,
    "split into equal parts or at indices",
    cases=_cases(
        ("3 sections", lambda m, x: m.split(x, 3)[1], [(6,)]),
        ("at indices, axis 1", lambda m, x: m.split(x, [1, 3], axis=1)[2], [(2, 4)]),
    ),
)


ARRAY_SPLIT = Op(
    "array_split",
    Kind.COMPOSITE,
    None,
    None,
    "split into nearly equal parts",
    cases=_cases(("uneven", lambda m, x: m.array_split(x, 3)[0], [(7,)])),
)


TILE = Op(
    "tile",
    Kind.COMPOSITE,
    None,
    None,
    "repeat the whole tensor",
    cases=_cases(
        ("(2, 1)", lambda m, x: m.tile(x, (2, 1)), [(2, 3)]),
        ("3", lambda m, x: m.tile(x, 3), [(2,)]),
    ),
)


REPEAT = Op(
    "repeat",
    Kind.COMPOSITE,
    None,
    None,
    "repeat each element",
    cases=_cases(
        ("flat", lambda m, x: m.repeat(x, 2), [(2, 2)]),
        ("per element, axis 1", lambda m, x: m.repeat(x, [1, 0, 3], axis=1), [(2, 3)]),
    ),
    method=True,
)


FLIP = Op(
    "flip",
    Kind.COMPOSITE,
    None,
    None,
    "reverse along axes",
    cases=_cases(
        ("all", lambda m, x: m.flip(x), [(2, 3)]),
        ("axis 1", lambda m, x: m.flip(x, axis=1), [(2, 3)]),
    ),
)


ROLL = Op(
    "roll",
    Kind.COMPOSITE,
    None,
    None,
    "roll elements",
    cases=_cases(
        ("flat", lambda m, x: m.roll(x, 2), [(2, 3)]),
        ("axis 0", lambda m, x: m.roll(x, -1, axis=0), [(3, 2)]),
    ),
)


TAKE = Op(
    "take",
    Kind.COMPOSITE,
    None,
    None,
    "take elements along an axis",
    cases=_cases(
        ("flat, repeated", lambda m, x: m.take(x, [0, 4, 4]), [(2, 3)]),
        ("axis 1", lambda m, x: m.take(x, [2, 0], axis=1), [(2, 3)]),
    ),
    method=True,
)


DIAGONAL = Op(
    "diagonal",
    Kind.COMPOSITE,
    None,
    None,
    "diagonal of 2-D slices",
    cases=_cases(
        ("main", lambda m, x: m.diagonal(x), [(3, 3)]),
        ("offset, 3-d", lambda m, x: m.diagonal(x, 1, 1, 2), [(2, 3, 4)]),
    ),
    method=True,
)


DIAG = Op(
    "diag",
    Kind.COMPOSITE,
    None,
    None,
    "diagonal, or diagonal matrix from a vector",
    cases=_cases(
        ("matrix from vector", lambda m, x: m.diag(x), [(3,)]),
        ("k=1 of matrix", lambda m, x: m.diag(x, 1), [(3, 3)]),
    ),
)


PAD = Op(
    "pad",
    Kind.COMPOSITE,
    None,
    None,
    "pad with a constant",
    cases=_cases(
        ("1-d", lambda m, x: m.pad(x, 2, constant_values=1.5), [(3,)]),
        ("2-d", lambda m, x: m.pad(x, ((1, 0), (0, 2))), [(2, 2)]),
    ),
)


CLIP = Op(
    "clip",
    Kind.COMPOSITE,
    None,
    None,
    "limit to [a_min, a_max]; gradient passes inside",
    cases=_cases(
        ("both bounds", lambda m, x: m.clip(x, -0.5, 0.7), [(3, 4)]),
        ("tensor bounds", lambda m, x, lo: m.clip(x, lo - 1.0, None), [(3, 4), (4,)]),
    ),
    method=True,
)


SETITEM = Op(
    "setitem",
    Kind.COMPOSITE,
    None,
    None,
    "x[key] = value on a non-leaf tensor, recorded",
    dunder=("__setitem__",),
    cases=_cases(
        ("slice", lambda m, x, v: _assign(m, x, (slice(1, None),), v), [(3, 2), (2,)]),
        (
            "repeated index, last wins",
            lambda m, x, v: _assign(m, x, (np.array([0, 2, 0]),), v),
            [(4,), (3,)],
        ),
        ("mask and scalar", lambda m, x: _assign(m, x, (x > 0,), 0.5), [(5,)]),
    ),
)


def _assign(m: Any, x: Any, key: tuple, v: Any) -> Any:
    """``y = x * 1; y[key] = v; return y * y`` (in NumPy or tapegrad)."""
    y = x * 1.0
    k = key[0]
    if hasattr(k, "numpy"):  # a tapegrad mask (x > 0): its values
        k = k.numpy()
    y[k] = v
    return y * y
