"""Batching rules of the ``shape`` family (``tg.vmap``; see :mod:`tapegrad.batching`):
one example's axes are the batch's axes after the first, so shapes gain the batch size
in front, permutations and axis arguments shift by one, and an index gains a leading
``:``. ``kit`` is :mod:`tapegrad.batching` (this module imports nothing above the op
families)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# (row, position of the axis argument, what axis=None means, its default)
ALONG_AXIS = (
    ("sort", 1, "flatten", -1),
    ("flip", 1, "all", None),
    ("diff", 2, "all", -1),
    ("split", 2, "all", 0),
    ("array_split", 2, "all", 0),
    ("take", 2, "flatten", None),
    ("cumulative_trapezoid", 3, "all", -1),
    ("trapezoid", 3, "all", -1),
)


# composites that only move elements (see ``rearranging``)
REARRANGING = (
    "repeat", "tile", "flipud", "fliplr", "rot90", "diag", "atleast_1d", "atleast_2d",
    "atleast_3d",
)  # fmt: skip


def rules(kit: Any) -> dict[str, Callable]:
    """The family's rules, by row name."""
    NP = kit.NP
    at, Batched = kit.at, kit.Batched
    out: dict[str, Callable] = {
        name: kit.axis_rule(name, pos, none, default) for name, pos, none, default in ALONG_AXIS
    }

    def only_first(level: int, args: tuple, kwargs: dict) -> bool:
        """The first argument is batched here and nothing else is."""
        return at(args[0], level) and kit.level_of((args[1:], kwargs))[0] < level

    def reshape(level: int, n: int, x: Any, *shape: Any, **kw: Any) -> Any:
        if not only_first(level, (x, shape), kw) or kw:
            return NotImplemented
        new = shape[0] if len(shape) == 1 else shape
        new = (new,) if isinstance(new, int | np.integer) else tuple(new)
        return Batched(NP["reshape"](x.value, (n, *new)), level, n)

    def ravel(level: int, n: int, x: Any, order: str = "C") -> Any:
        if not at(x, level) or order != "C":
            return NotImplemented
        return Batched(NP["reshape"](x.value, (n, -1)), level, n)

    def transpose(level: int, n: int, x: Any, axes: Any = None) -> Any:
        if not at(x, level):
            return NotImplemented
        nd = x.ndim
        perm = range(nd - 1, -1, -1) if axes is None else (int(a) % nd for a in axes)
        return Batched(NP["transpose"](x.value, (0, *(a + 1 for a in perm))), level, n)

    def swapaxes(level: int, n: int, x: Any, axis1: int, axis2: int) -> Any:
        if not at(x, level):
            return NotImplemented
        a, b = kit.shifted((axis1, axis2), x.ndim, "swapaxes")
        return Batched(NP["swapaxes"](x.value, a, b), level, n)

    def moveaxis(level: int, n: int, x: Any, source: Any, destination: Any) -> Any:
        if not at(x, level):
            return NotImplemented
        src = kit.shifted(source, x.ndim, "moveaxis")
        dst = kit.shifted(destination, x.ndim, "moveaxis")
        return Batched(NP["moveaxis"](x.value, src, dst), level, n)

    def expand_dims(level: int, n: int, x: Any, axis: Any) -> Any:
        if not at(x, level):
            return NotImplemented
        axes = axis if isinstance(axis, tuple | list) else (axis,)
        nd = x.ndim + len(axes)  # the axes count in the result
        return Batched(NP["expand_dims"](x.value, kit.shifted(tuple(axes), nd, "expand_dims")),
                       level, n)  # fmt: skip

    def squeeze(level: int, n: int, x: Any, axis: Any = None) -> Any:
        if not at(x, level):
            return NotImplemented
        if axis is None:
            axis = tuple(i for i, s in enumerate(x.shape) if s == 1)
            if not axis:
                return x
        return Batched(NP["squeeze"](x.value, kit.shifted(axis, x.ndim, "squeeze")), level, n)

    def broadcast_to(level: int, n: int, x: Any, shape: Any) -> Any:
        if not only_first(level, (x, shape), {}):
            return NotImplemented
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        return Batched(NP["broadcast_to"](kit.aligned(x, level, len(shape)), (n, *shape)),
                       level, n)  # fmt: skip

    def getitem(level: int, n: int, x: Any, key: Any) -> Any:
        if not only_first(level, (x, key), {}):
            return NotImplemented  # a batched index: a loop
        key = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, bool | np.bool_) for k in key):
            return NotImplemented  # (a scalar mask adds an axis: a loop)
        arrays = [
            i for i, k in enumerate(key)
            if not (k is None or k is Ellipsis or isinstance(k, slice | int | np.integer))
        ]  # fmt: skip
        # with index arrays present, NumPy counts an integer as one more advanced index
        # (a 0-d one): it joins the broadcast, and decides the adjacency too
        advanced = arrays
        if arrays:
            advanced = [i for i, k in enumerate(key) if i in arrays or _is_int(k)]
        value = NP["getitem"](x.value, (slice(None), *key))
        if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)):
            # separated advanced indices: NumPy puts their dimensions first, before the
            # batch's; move the batch back in front
            dims = np.broadcast_shapes(*(_index_shape(key[i]) for i in advanced))
            value = NP["moveaxis"](value, len(dims), 0)
        return Batched(value, level, n)

    def concatenate(level: int, n: int, arrays: Any, axis: Any = 0, **kw: Any) -> Any:
        if kw.get("out") is not None or kit.level_of(kw)[0] >= level:
            return NotImplemented
        parts = kit.each_batched(level, n, arrays)
        if axis is None:
            parts, axis = [NP["reshape"](p, (n, -1)) for p in parts], 1
        else:
            axis = kit.shifted(axis, kit.ndim(arrays[0]), "concatenate")
        return Batched(NP["concatenate"](parts, axis, **kw), level, n)

    def stack(level: int, n: int, arrays: Any, axis: int = 0, **kw: Any) -> Any:
        if kw.get("out") is not None or kit.level_of(kw)[0] >= level:
            return NotImplemented
        parts = kit.each_batched(level, n, arrays)
        axis = kit.shifted(axis, kit.ndim(arrays[0]) + 1, "stack")
        return Batched(NP["stack"](parts, axis, **kw), level, n)

    def broadcasting(name: str, operands: int) -> Callable:
        """A row that broadcasts its first ``operands`` arguments elementwise."""

        def rule(level: int, n: int, *args: Any, **kw: Any) -> Any:
            if kit.level_of((args[operands:], kw))[0] >= level or len(args) < operands:
                return NotImplemented
            rank = max(kit.ndim(a) for a in args[:operands])
            ops = [kit.aligned(a, level, rank) for a in args[:operands]]
            return Batched(kit.public(name)(*ops, *args[operands:], **kw), level, n)

        return rule

    def roll(level: int, n: int, x: Any, shift: Any, axis: Any = None) -> Any:
        if not only_first(level, (x, shift), {}):
            return NotImplemented
        if axis is None:  # the flattened example, shape restored
            flat = NP["roll"](NP["reshape"](x.value, (n, -1)), shift, 1)
            return Batched(NP["reshape"](flat, (n, *x.shape)), level, n)
        return Batched(NP["roll"](x.value, shift, kit.shifted(axis, x.ndim, "roll")), level, n)

    def tri(name: str) -> Callable:
        def rule(level: int, n: int, m: Any, k: int = 0) -> Any:
            if not at(m, level) or m.ndim < 2:
                return NotImplemented  # (a 1-D tril is a matrix: a loop)
            return Batched(kit.public(name)(m.value, k), level, n)

        return rule

    def diagonal(level: int, n: int, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1):
        if not at(a, level):
            return NotImplemented
        a1, a2 = kit.shifted((axis1, axis2), a.ndim, "diagonal")
        return Batched(NP["diagonal"](a.value, offset, a1, a2), level, n)

    def trace(level: int, n: int, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kw):
        if not at(a, level) or kw:
            return NotImplemented
        a1, a2 = kit.shifted((axis1, axis2), a.ndim, "trace")
        return Batched(NP["trace"](a.value, offset, a1, a2), level, n)

    def astype(level: int, n: int, x: Any, dtype: Any) -> Any:
        return Batched(NP["astype"](x.value, dtype), level, n)

    def pad(level: int, n: int, x: Any, pad_width: Any, *args: Any, **kw: Any) -> Any:
        if not only_first(level, (x, pad_width, args), kw):
            return NotImplemented
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
        full = [(0, 0), *(tuple(int(v) for v in w) for w in widths)]
        return Batched(NP["pad"](x.value, full, *args, **kw), level, n)

    def rearranging(name: str) -> Callable:
        """A composite that only moves elements (``repeat``, ``rot90``, ``diag``...):
        where each output element comes from is NumPy's function on the positions
        1..size of one example (0 where it fills with zeros), then one gather on the
        batch."""

        def rule(level: int, n: int, a: Any, *args: Any, **kw: Any) -> Any:
            if not at(a, level) or kit.level_of((args, kw))[0] >= level:
                return NotImplemented
            size = int(np.prod(a.shape, dtype=np.int64))
            probe = np.arange(1, size + 1, dtype=np.float64).reshape(a.shape)
            try:  # (the composite is NumPy's function: the same positions)
                where = np.asarray(getattr(np, name)(probe, *args, **kw))
            except Exception:
                return NotImplemented  # (NumPy's error, from the loop)
            where = where.astype(np.int64)
            flat = NP["reshape"](a.value, (n, size))
            if (where == 0).any():  # filled with zeros: one zero column in front
                flat = NP["concatenate"]([np.zeros((n, 1), a.dtype), flat], axis=1)
            else:
                where = where - 1
            return Batched(NP["getitem"](flat, (slice(None), where)), level, n)

        return rule

    out.update({name: rearranging(name) for name in REARRANGING})
    out.update(
        reshape=reshape, ravel=ravel, transpose=transpose, swapaxes=swapaxes,
        moveaxis=moveaxis, expand_dims=expand_dims, squeeze=squeeze,
        broadcast_to=broadcast_to, getitem=getitem, concatenate=concatenate, stack=stack,
        where=broadcasting("where", 3), clip=broadcasting("clip", 3),
        betainc=broadcasting("betainc", 3), roll=roll, tril=tri("tril"), triu=tri("triu"),
        diagonal=diagonal, trace=trace, astype=astype, pad=pad,
    )  # fmt: skip
    return out


def _is_int(k: Any) -> bool:
    return isinstance(k, int | np.integer) and not isinstance(k, bool | np.bool_)


def _index_shape(k: Any) -> tuple[int, ...]:
    """The dimensions an advanced index contributes (a mask: one, its count)."""
    a = np.asarray(k)
    if a.dtype == bool:
        return (int(np.count_nonzero(a)),)
    return a.shape
