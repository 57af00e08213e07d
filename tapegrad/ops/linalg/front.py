"""Front ends of the ``linalg`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.linalg`)."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, NamedTuple

import numpy as np

from ...grad_mode import is_grad_enabled
from ...layout import DTYPE_CODE, NP_DTYPES, promote
from ...record import record_matmul
from ...recording import as_tensor, front_end, general
from ...shapes import matmul_layout, normalize_axes
from ...tape import current_tape
from ...tensors import Tensor
from ...tiers import call
from ..reduce.front import max as _max
from ..reduce.front import min as _min
from ..reduce.front import safe_sqrt
from ..reduce.front import sum as _sum
from ..shape.front import astype, axis_index, broadcast_to, gather_positions, moveaxis, swapaxes
from .rows import (
    CHOLESKY,
    DET,
    DOT,
    EIG,
    EIGH,
    EIGVALS,
    EIGVALSH,
    EINSUM,
    INNER,
    INV,
    LSTSQ,
    MATMUL,
    MATRIX_POWER,
    MULTI_DOT,
    NORM,
    OUTER,
    PINV,
    QR,
    SLOGDET,
    SOLVE,
    SVD,
    SVDVALS,
    TENSORDOT,
    TRACE,
    VDOT,
)


def matmul(x: Any, y: Any) -> Tensor:
    """Matrix product with ``numpy.matmul`` semantics.

    1-D operands are promoted to a row (x) or column (y) and the added axis removed
    from the result; leading axes are batch axes and broadcast against each other.
    """
    if type(y) is Tensor and current_tape().blas:  # (the first product sets BLAS up)
        r = front_end(record_matmul, MATMUL, (x, y), ())
        if r is not None:
            return r
    tx, ty = as_tensor(x), as_tensor(y)
    dx, dy = DTYPE_CODE[tx.dtype], DTYPE_CODE[ty.dtype]
    dt, out_shape, ip = _matmul_plan(tx.shape, ty.shape, dx, dy)
    if dt < 0:  # no float operand: not differentiable, NumPy computes
        return Tensor._external(np.matmul(tx._value(), ty._value()))
    if dx != dt:
        tx = astype(tx, NP_DTYPES[dt])
    if dy != dt:
        ty = astype(ty, NP_DTYPES[dt])
    tape = current_tape()
    if not tape.blas:
        tape.init_blas()
    return general(MATMUL, dt, [tx, ty], [(dt, out_shape)], ip)


# Models multiply the same few shapes over and over: the checks and parameters of a
# product are kept per (shapes, dtypes), shared by all tapes (errors are not kept).
@functools.lru_cache(maxsize=4096)
def _matmul_plan(xs: tuple, ys: tuple, dx: int, dy: int) -> tuple:
    """``(dtype, result shape, int params)`` of ``matmul`` on these operands, NumPy's
    errors for shapes it rejects; dtype -1 when neither operand is floating point."""
    out_shape, ip = matmul_layout(xs, ys)
    dt = call(promote, dx, dy)
    return dt, out_shape, ip


def _normalize_axes_list(axes: Any, ndim: int) -> list[int]:
    axes = [axes] if isinstance(axes, int | np.integer) else list(axes)
    return [axis_index(a, ndim, "tensordot", bools=False) for a in axes]


def tensordot(a: Any, b: Any, axes: Any = 2) -> Tensor:
    """Sum products over the given axes (``numpy.tensordot``): a transpose, a reshape and
    one matrix product."""
    ta, tb = as_tensor(a), as_tensor(b)
    if isinstance(axes, int | np.integer):
        n = int(axes)
        ax_a, ax_b = list(range(ta.ndim - n, ta.ndim)), list(range(n))
    else:
        ax_a, ax_b = (
            _normalize_axes_list(axes[0], ta.ndim),
            _normalize_axes_list(axes[1], tb.ndim),
        )
    if len(ax_a) != len(ax_b) or any(ta.shape[i] != tb.shape[j] for i, j in zip(ax_a, ax_b)):
        raise ValueError(
            f"tensordot: shape-mismatch for sum ({ta.shape} axes {ax_a}, {tb.shape} axes {ax_b})"
        )
    free_a = [d for d in range(ta.ndim) if d not in ax_a]
    free_b = [d for d in range(tb.ndim) if d not in ax_b]
    k = math.prod([ta.shape[d] for d in ax_a])
    am = ta.transpose(free_a + ax_a).reshape(-1, k)
    bm = tb.transpose(ax_b + free_b).reshape(k, -1)
    return matmul(am, bm).reshape([ta.shape[d] for d in free_a] + [tb.shape[d] for d in free_b])


def dot(a: Any, b: Any, out: Any = None) -> Tensor:
    """``numpy.dot``: products for scalars, inner product of vectors, matrix product, and
    for N-d arrays a sum over the last axis of ``a`` and the second-to-last of ``b``."""
    if out is not None:
        raise TypeError("dot: out= is not supported (tensors are immutable)")
    ta, tb = as_tensor(a), as_tensor(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return ta * tb
    _aligned("dot", ta, tb, max(tb.ndim - 2, 0))
    if tb.ndim <= 2 and (ta.ndim <= 2 or tb.ndim == 1):
        return matmul(ta, tb)
    return tensordot(ta, tb, axes=([-1], [-2]))


def _aligned(name: str, ta: Tensor, tb: Tensor, axis: int) -> None:
    """NumPy's error of ``dot`` / ``inner`` where ``ta``'s last axis and ``tb``'s
    ``axis`` differ in length (checked before anything is recorded)."""
    if ta.shape[-1] != tb.shape[axis]:
        raise ValueError(
            f"{name}: shapes {ta.shape} and {tb.shape} not aligned: {ta.shape[-1]} "
            f"(dim {ta.ndim - 1}) != {tb.shape[axis]} (dim {axis})"
        )


def vdot(a: Any, b: Any) -> Tensor:
    """Dot product of the flattened inputs."""
    ta, tb = as_tensor(a), as_tensor(b)
    if ta.size != tb.size:  # (checked before the flattening is recorded)
        raise ValueError(
            f"vdot: a of shape {ta.shape} and b of shape {tb.shape} have {ta.size} and "
            f"{tb.size} elements"
        )
    return dot(ta.reshape(-1), tb.reshape(-1))


def inner(a: Any, b: Any) -> Tensor:
    """Sum of products over the last axes."""
    ta, tb = as_tensor(a), as_tensor(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return ta * tb
    _aligned("inner", ta, tb, tb.ndim - 1)
    return tensordot(ta, tb, axes=([-1], [-1]))


def outer(a: Any, b: Any, out: Any = None) -> Tensor:
    """Outer product of the flattened inputs."""
    if out is not None:
        raise TypeError("outer: out= is not supported (tensors are immutable)")
    return as_tensor(a).reshape(-1, 1) * as_tensor(b).reshape(1, -1)


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """Sum along a diagonal."""
    d = gather_positions(a, lambda p: np.diagonal(p, offset, axis1, axis2), what="trace")
    return _sum(d, axis=-1)


def _parse_einsum(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Expand ``...`` into letters (right-aligned, broadcasting) and infer the output."""
    subscripts = subscripts.replace(" ", "")
    if subscripts.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} have more than one '->'")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs, out = subscripts, None
    specs = lhs.split(",")
    if len(specs) != len(shapes):
        raise ValueError(f"einsum: {len(specs)} operand subscripts for {len(shapes)} operands")
    used = set(subscripts)
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used]
    ell_nd = max(
        (len(s) - (len(spec) - 3) for spec, s in zip(specs, shapes) if "..." in spec), default=0
    )
    ell = "".join(spare[:ell_nd])
    expanded = []
    for spec, shape in zip(specs, shapes):
        if "..." in spec:
            k = len(shape) - (len(spec) - 3)
            spec = spec.replace("...", ell[ell_nd - k :] if k else "")
        if len(spec) != len(shape) or not (spec.isalpha() or spec == ""):  # "": a scalar
            raise ValueError(
                f"einsum: subscripts {spec!r} do not match an operand of shape {shape}"
            )
        expanded.append(spec)
    if out is None:
        counts = {c: "".join(expanded).count(c) for c in set("".join(expanded))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:  # NumPy's checks of an explicit output, before anything is recorded
        if ell and "..." not in out:
            raise ValueError(
                f"einsum: output {out!r} has no '...' for the broadcast dimensions of the "
                "operands' '...'"
            )
        out = out.replace("...", ell)
        given = set("".join(expanded))
        for c in out:
            if not c.isalpha():
                raise ValueError(f"einsum: invalid output subscript {c!r} in {subscripts!r}")
            if c not in given:
                raise ValueError(
                    f"einsum: output subscript {c!r} never appeared in an input ({subscripts!r})"
                )
            if out.count(c) > 1:
                raise ValueError(f"einsum: output subscript {c!r} appears more than once")
    return expanded, out


def einsum(subscripts: Any, *operands: Any, optimize: Any = False) -> Tensor:
    """Einstein summation (``numpy.einsum`` subscripts, with ``...`` and implicit output;
    or the interleaved form ``einsum(x, [0, 1], y, [1, 2], [0, 2])``).

    Repeated letters within an operand take a diagonal; letters only one operand has and
    the output does not are summed first; then operands are contracted pairwise, left
    to right, each pair as one (batched) matrix product.
    """

    if not isinstance(subscripts, str):  # einsum(op0, sublist0, op1, sublist1, ..., [out])
        subscripts, operands = _sublists(subscripts, *operands)
    ts = [as_tensor(o) for o in operands]
    specs, out = _parse_einsum(subscripts, [t.shape for t in ts])
    cur: list[tuple[Tensor, str]] = []
    for t, spec in zip(ts, specs):
        if len(set(spec)) < len(spec):  # repeated letter: its diagonal, by NumPy itself
            uniq = "".join(dict.fromkeys(spec))
            t = gather_positions(
                t, lambda p, s=spec, u=uniq: np.einsum(f"{s}->{u}", p), what="einsum"
            )
            spec = uniq
        cur.append((t, spec))
    for i, (t, spec) in enumerate(cur):  # sum letters nobody else needs
        others = out + "".join(s for j, (_, s) in enumerate(cur) if j != i)
        drop = tuple(d for d, c in enumerate(spec) if c not in others)
        if drop:
            cur[i] = (_sum(t, axis=drop), "".join(c for d, c in enumerate(spec) if d not in drop))
    t, spec = cur[0]
    for i in range(1, len(cur)):
        u, uspec = cur[i]
        keep = out + "".join(s for _, s in cur[i + 1 :])
        t, spec = _contract(t, spec, u, uspec, keep)
    if set(spec) != set(out):
        drop = tuple(d for d, c in enumerate(spec) if c not in out)
        t = _sum(t, axis=drop)
        spec = "".join(c for c in spec if c in out)
    return t.transpose([spec.index(c) for c in out]) if spec != out else t


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # NumPy's: 0 is 'A'


def _sublist(sub: Any) -> str:
    """``[0, 1, Ellipsis]`` -> ``"ab..."`` (NumPy's subscripts are ints below 52), with
    NumPy's errors (a tensor's values are read, never iterated: that would record)."""
    if isinstance(sub, Tensor):
        sub = sub._value()
    try:
        items = list(sub)
    except TypeError:
        raise TypeError(
            f"einsum: the subscripts for each operand must be a list or a tuple, got {sub!r}"
        ) from None
    out = []
    for s in items:
        if s is Ellipsis:
            out.append("...")
        elif not isinstance(s, int | np.integer) or isinstance(s, bool | np.bool_):
            got = repr(s) if np.ndim(s) == 0 else f"an array of shape {np.shape(s)}"
            raise TypeError(
                f"einsum: each subscript must be either an integer or an ellipsis, got {got}"
            )
        elif 0 <= s < len(_LETTERS):
            out.append(_LETTERS[s])
        else:
            raise ValueError(f"einsum: subscript {s} is not within the valid range [0, 52)")
    return "".join(out)


def _sublists(first: Any, *rest: Any) -> tuple[str, list]:
    """The interleaved call ``einsum(op0, sublist0, op1, sublist1, ..., [sublistout])``
    as subscripts and operands."""
    args = [first, *rest]
    operands, specs = args[0::2], args[1::2]
    out = None
    if len(operands) > len(specs):  # an odd count: the last one is the output sublist
        out = operands.pop()
    subscripts = ",".join(_sublist(s) for s in specs)
    if out is not None:
        subscripts += "->" + _sublist(out)
    return subscripts, operands


def _contract(a: Tensor, la: str, b: Tensor, lb: str, keep: str) -> tuple[Tensor, str]:
    """Contract two operands: shared letters not kept are summed (matrix product), shared
    kept letters are batch axes, the others are free."""
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]
    sa = dict(zip(la, a.shape))
    sb = dict(zip(lb, b.shape))
    for c in summed:  # NumPy broadcasts a summed letter of length 1 against the other's
        if sa[c] != sb[c] and 1 in (sa[c], sb[c]):
            if sa[c] == 1:
                sa[c] = sb[c]
                a = broadcast_to(a, tuple(sa[d] for d in la))
            else:
                sb[c] = sa[c]
                b = broadcast_to(b, tuple(sb[d] for d in lb))
        if sa[c] != sb[c]:
            raise ValueError(f"einsum: size of {c!r} differs ({sa[c]} and {sb[c]})")
    if not free_a and not free_b and a.dtype.kind == b.dtype.kind == "f":
        # batched dot products ('ijk,ijk->ij'; floats: bools would sum to counts): no matmul
        # of 1 x k by k x 1 per batch element, one product and a reduction instead
        at, bt = (
            t if order == sorted(order) else t.transpose(order)  # (a copy: only if needed)
            for t, order in ((a, [la.index(c) for c in batch + summed]),
                             (b, [lb.index(c) for c in batch + summed]))
        )  # fmt: skip
        r = at * bt
        if summed:
            r = _sum(r, axis=tuple(range(len(batch), len(batch) + len(summed))))
        return r, "".join(batch)
    k = math.prod([sa[c] for c in summed])
    m = math.prod([sa[c] for c in free_a])
    n = math.prod([sb[c] for c in free_b])
    am = a.transpose([la.index(c) for c in batch + free_a + summed]).reshape(
        [sa[c] for c in batch] + [m, k]
    )
    bm = b.transpose([lb.index(c) for c in batch + summed + free_b]).reshape(
        [sb[c] for c in batch] + [k, n]
    )
    r = matmul(am, bm)
    bshape = list(r.shape[: len(batch)])
    r = r.reshape(bshape + [sa[c] for c in free_a] + [sb[c] for c in free_b])
    return r, "".join(batch + free_a + free_b)


def square_stack(a: Tensor, what: str) -> tuple[tuple[int, ...], int]:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(
            f"{what}: last 2 dimensions of the array must be square (got shape {a.shape})"
        )
    return a.shape[:-2], a.shape[-1]


def square_float(a: Any, what: str) -> tuple[Tensor, int, tuple[int, ...], int]:
    """``a`` as a float (stack of) square matrices: (tensor, dtype code, batch, n); the
    shape checked before the cast of an integer ``a`` is recorded."""
    t = as_tensor(a)
    batch, n = square_stack(t, what)
    t, dt = float_and_code(t)
    return t, dt, batch, n


def float_and_code(t: Tensor) -> tuple[Tensor, int]:
    if t.dtype.kind != "f":
        t = astype(t, np.float64)
    return t, DTYPE_CODE[t.dtype]


def inv(a: Any) -> Tensor:
    """Inverse of a (stack of) square matrices."""
    t, dt, batch, n = square_float(a, "inv")
    nb = math.prod(batch)
    return general(INV, dt, [t], [(dt, t.shape)], [nb, n])


def det(a: Any) -> Tensor:
    """Determinant of a (stack of) square matrices."""
    t, dt, batch, n = square_float(a, "det")
    nb = math.prod(batch)
    return general(DET, dt, [t], [(dt, batch)], [nb, n])


class SlogdetResult(NamedTuple):
    """(sign, logabsdet), as ``numpy.linalg.slogdet`` returns (the sign is constant)."""

    sign: Tensor
    logabsdet: Tensor


def slogdet(a: Any) -> SlogdetResult:
    """Sign and log of the absolute determinant; differentiable in the latter."""
    t, dt, batch, n = square_float(a, "slogdet")
    nb = math.prod(batch)
    sign, logdet = general(SLOGDET, dt, [t], [(dt, batch), (dt, batch)], [nb, n], visible=2)
    return SlogdetResult(sign.detach(), logdet)


def system_shape(ta: Tensor, tb: Tensor, what: str) -> tuple[tuple[int, ...], int, bool]:
    """NumPy's and SciPy's checks of a system ``a x = b`` (``what``), before anything is
    recorded: (broadcast batch shape, n, whether b is a vector)."""
    batch, n = square_stack(ta, what)
    vector = tb.ndim == 1
    shape = (*tb.shape, 1) if vector else tb.shape
    if len(shape) < 2 or shape[-2] != n:
        raise ValueError(
            f"{what}: shapes of a {ta.shape} {ta.dtype} and b {tb.shape} {tb.dtype} "
            "are incompatible"
        )
    try:
        out_batch = np.broadcast_shapes(batch, shape[:-2])
    except ValueError:
        raise ValueError(
            f"{what}: batch dimensions of a {ta.shape} and b {tb.shape} do not broadcast"
        ) from None
    return out_batch, n, vector


def system_operands(a: Any, b: Any, what: str) -> tuple[Tensor, Tensor, bool, tuple, int, int, int]:
    """The operands of a solve ``a x = b`` (``what``): ``a`` a (stack of) square
    matrices, ``b`` a vector when 1-D, else a stack of (n, k) matrices (NumPy 2's rule),
    batch axes broadcast, a common float dtype. Returns ``(a, rhs, b was a vector,
    batch, n, k, dtype code)``, a and rhs broadcast to (batch, n, n) and (batch, n, k)."""
    ta, tb = as_tensor(a), as_tensor(b)
    out_batch, n, vector = system_shape(ta, tb, what)
    rhs = tb.reshape(-1, 1) if vector else tb
    k = rhs.shape[-1]
    dtype = np.result_type(ta.dtype, rhs.dtype, np.float32)
    ta = broadcast_to(astype(ta, dtype), (*out_batch, n, n))
    rhs = broadcast_to(astype(rhs, dtype), (*out_batch, n, k))
    return ta, rhs, vector, out_batch, n, k, DTYPE_CODE[np.dtype(dtype)]


def solve(a: Any, b: Any) -> Tensor:
    """Solve ``a x = b``; ``b`` is a vector when 1-D, else a stack of matrices
    (NumPy 2 rules); batch axes broadcast."""

    ta, rhs, vector, out_batch, n, k, dt = system_operands(a, b, "solve")
    nb = math.prod(out_batch)
    x = general(SOLVE, dt, [ta, rhs], [(dt, (*out_batch, n, k))], [nb, n, k])
    return x.reshape(*out_batch, n) if vector else x


def cholesky(a: Any) -> Tensor:
    """Lower Cholesky factor of a (stack of) symmetric positive definite matrices
    (only the lower triangle is read; the gradient is symmetrised)."""
    t, dt, batch, n = square_float(a, "cholesky")
    nb = math.prod(batch)
    return general(CHOLESKY, dt, [t], [(dt, t.shape)], [nb, n])


_MATRIX_ORDS = (1, -1, np.inf, -np.inf, 2, -2)  # besides None, "fro" and "nuc"


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Vector norms (ord None/2, 1, inf, -inf, 0, p) and matrix norms ('fro', 1, -1, inf,
    -inf), as ``numpy.linalg.norm``. Where a vector norm of order > 0 (or the
    Frobenius norm) is 0 its gradient is 0 (a subgradient), not NaN."""

    t = as_tensor(x)
    if axis is None and ord is None:
        t = t if t.dtype.kind == "f" else astype(t, np.float64)
        r = safe_sqrt(_sum(t * t))
        return r.reshape((1,) * t.ndim) if keepdims else r
    if axis is None:
        axis = tuple(range(t.ndim))
    elif not isinstance(axis, tuple):  # numpy.linalg.norm takes int(axis): 1.0, True too
        try:
            axis = int(axis)
        except (TypeError, ValueError):
            raise TypeError(
                f"norm: 'axis' must be None, an integer or a tuple of integers, got {axis!r}"
            ) from None
    else:  # (its elements are integers, bools too: NumPy's own error otherwise)
        for a in axis:
            try:
                operator.index(a)
            except TypeError:
                raise TypeError(f"norm: axis {axis!r} is not a tuple of integers") from None
    # NumPy's errors, before anything is recorded
    axes = normalize_axes(axis, t.ndim, "norm", bools=True)  # as numpy.linalg.norm
    if len(axes) not in (1, 2):
        raise ValueError(f"norm: improper number of dimensions to norm ({len(axes)})")
    if len(axes) == 1 and isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    if len(axes) == 2 and ord is not None and ord != "fro":
        if not (ord == "nuc" if isinstance(ord, str) else ord in _MATRIX_ORDS):
            raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    row, col = axes[0], axes[-1]  # (a matrix's in the order given)
    if len(axes) == 2 and isinstance(axis, tuple):
        row, col = (operator.index(a) % t.ndim for a in axis)
    # the length of the last reduction of a max or min order: NumPy's maximum of nothing
    # is 0 (initial=0), its minimum of nothing an error
    if len(axes) == 1:
        over = t.shape[row] if not isinstance(ord, str) and ord in (np.inf, -np.inf) else 1
    elif ord in (1, -1):  # (ord may be a string: "nuc" == 1 is False)
        over = t.shape[col]
    elif ord in (np.inf, -np.inf):
        over = t.shape[row]
    else:
        over = min(t.shape[row], t.shape[col])
    if over == 0 and ord in ((-np.inf,) if len(axes) == 1 else (-1, -2, -np.inf)):
        raise ValueError(
            f"norm: zero-size array to reduction operation minimum which has no identity "
            f"(shape {t.shape}, axis {axis}, ord {ord})"
        )
    biggest = _sum if over == 0 else _max  # (of nothing: 0, as NumPy's)
    if t.dtype.kind != "f":
        t = astype(t, np.float64)
    if len(axes) == 1:
        ax = axes
        if ord is None or ord == 2:
            return safe_sqrt(_sum(t * t, axis=ax, keepdims=keepdims))
        a = abs(t)  # (only where needed: it is a recorded pass over t)
        if ord == np.inf:
            return biggest(a, axis=ax, keepdims=keepdims)
        if ord == -np.inf:
            return _min(a, axis=ax, keepdims=keepdims)
        if ord == 1:
            return _sum(a, axis=ax, keepdims=keepdims)
        if ord == 0:
            return _sum(t != 0, axis=ax, keepdims=keepdims).astype(t.dtype)
        s = _sum(a**ord, axis=ax, keepdims=keepdims)
        if ord > 0:  # 0 where the norm is 0, gradient 0 there (not 0 * inf = nan)
            return (s + (s == 0)) ** (1.0 / ord) * (s != 0)
        return s ** (1.0 / ord)
    if ord is None or ord == "fro":
        return safe_sqrt(_sum(t * t, axis=axes, keepdims=keepdims))
    a = abs(t)
    if ord in (1, -1):  # max / min absolute column sum
        sums = _sum(a, axis=row, keepdims=True)
        r = (biggest if ord == 1 else _min)(sums, axis=col, keepdims=True)
    elif ord in (np.inf, -np.inf):  # max / min absolute row sum
        sums = _sum(a, axis=col, keepdims=True)
        r = (biggest if ord == np.inf else _min)(sums, axis=row, keepdims=True)
    else:  # 2, -2, "nuc": largest / smallest / sum of the singular values
        s = svdvals(moveaxis(t, (row, col), (-2, -1)))
        r = biggest(s, axis=-1) if ord == 2 else _min(s, axis=-1) if ord == -2 else _sum(s, axis=-1)
        return r.reshape(_keep_shape(t.shape, axes)) if keepdims else r
    if not keepdims:
        r = r.reshape([n for d, n in enumerate(r.shape) if d not in axes])
    return r


def _keep_shape(shape: tuple[int, ...], axes: Any) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def transposed_matrices(t: Tensor) -> Tensor:
    return swapaxes(t, -1, -2)


def _lower_symmetric(t: Tensor, what: str) -> Tensor:
    """The symmetric matrix ``t``'s lower triangle stands for (``hermitian=True``:
    NumPy then reads that triangle only)."""
    n = square_stack(t, what)[1]
    lower = np.tril(np.ones((n, n), t.dtype))
    return t * lower + transposed_matrices(t * (lower - np.eye(n, dtype=t.dtype)))


def _requires_grad(*ts: Tensor) -> bool:
    return any(t.requires_grad for t in ts) and is_grad_enabled()


def _matrices(a: Any, what: str) -> tuple[Tensor, int, tuple[int, ...], int, int]:
    """A float tensor of (a stack of) matrices: (tensor, dtype code, batch, rows, cols);
    the dimensions checked before the cast of an integer ``a`` is recorded."""
    t = as_tensor(a)
    if t.ndim < 2:
        raise np.linalg.LinAlgError(
            f"{what}: {t.ndim}-dimensional array given. Array must be at least two-dimensional"
        )
    t, dt = float_and_code(t)
    return t, dt, t.shape[:-2], t.shape[-2], t.shape[-1]


# --- decompositions ----------------------------------------------------------------------------


class EighResult(NamedTuple):
    """(eigenvalues, eigenvectors), as ``numpy.linalg.eigh`` returns."""

    eigenvalues: Tensor
    eigenvectors: Tensor


class EigResult(NamedTuple):
    """(eigenvalues, eigenvectors), as ``numpy.linalg.eig`` returns (real here)."""

    eigenvalues: Tensor
    eigenvectors: Tensor


def _constants(result: Any) -> Any:
    """A NumPy result (an array or a tuple of them and ints) as constant tensors: what
    an empty input gives (nothing there to differentiate)."""
    if isinstance(result, tuple):
        return tuple(_constants(r) for r in result)
    return Tensor._external(result) if isinstance(result, np.ndarray) else result


def _visible(outs: tuple, visible: int) -> Any:
    return outs[0] if visible == 1 else outs[:visible]


def _eigh(a: Any, uplo: str, what: str, visible: int) -> Any:
    t, dt, batch, n = square_float(a, what)
    if uplo not in ("L", "U"):
        raise ValueError(f"{what}: UPLO argument must be 'L' or 'U' (got {uplo!r})")
    if t.size == 0:
        return _visible(_constants(tuple(np.linalg.eigh(t._value()))), visible)
    if uplo == "U":  # the upper triangle of a is the lower one of a^T
        t = transposed_matrices(t)
    outs = [(dt, (*batch, n)), (dt, t.shape)]
    return general(EIGH, dt, [t], outs, [math.prod(batch), n], visible=visible)


def eigh(a: Any, UPLO: str = "L") -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of (a stack of) symmetric matrices; only
    the ``UPLO`` triangle is read.

    The gradient assumes a symmetric input (it is symmetrised, as in PyTorch and JAX).
    Eigenvectors of a repeated eigenvalue are not unique: a loss that depends on them
    there has no gradient, and the backward gives inf or NaN. Losses of the
    eigenvalues alone (``eigvalsh``) have finite gradients everywhere. An eigenvector's
    sign is arbitrary; a loss should not depend on it.
    """
    return EighResult(*_eigh(a, UPLO, "eigh", 2))


def eigvalsh(a: Any, UPLO: str = "L") -> Tensor:
    """Eigenvalues (ascending) of (a stack of) symmetric matrices (finite gradients for
    repeated eigenvalues)."""
    return _eigh(a, UPLO, "eigvalsh", 1)


class SVDResult(NamedTuple):
    """(U, S, Vh), as ``numpy.linalg.svd`` returns."""

    U: Tensor
    S: Tensor
    Vh: Tensor


def _svd(a: Any, what: str, visible: int, hermitian: bool = False) -> Any:
    t, dt, batch, m, n = _matrices(a, what)
    k = min(m, n)
    if t.size == 0:
        u, s_, vh = np.linalg.svd(t._value(), full_matrices=False)
        return _visible(_constants((s_, u, vh)), visible)
    if hermitian:
        t = _lower_symmetric(t, what)
    outs = [(dt, (*batch, k)), (dt, (*batch, m, k)), (dt, (*batch, k, n))]
    return general(SVD, dt, [t], outs, [math.prod(batch), m, n], visible=visible)


def svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False
) -> Any:
    """Singular value decomposition ``a = U @ diag(S) @ Vh`` of (a stack of) matrices.

    Differentiable in its thin form: for a non-square input that requires grad, pass
    ``full_matrices=False`` (the extra columns NumPy's full form adds are not unique).
    Singular vectors of a repeated singular value are not unique either: a loss that
    depends on them there gets inf or NaN; losses of the values alone (``svdvals``,
    ``compute_uv=False``) are finite. ``hermitian=True`` reads the lower triangle only,
    as NumPy (the singular values are NumPy's; the vectors may differ in sign).
    """
    if not compute_uv:
        return _svd(a, "svdvals", 1, hermitian)
    t = as_tensor(a)
    if full_matrices and t.ndim >= 2 and t.shape[-1] != t.shape[-2]:
        if _requires_grad(t):
            raise NotImplementedError(
                f"svd: full_matrices=True of a non-square {t.shape} {t.dtype} matrix is not "
                "differentiable (its extra singular vectors are not unique); pass "
                "full_matrices=False"
            )
        u, s_, vh = np.linalg.svd(t._value(), full_matrices=True)
        return SVDResult(*(Tensor._external(v) for v in (u, s_, vh)))
    s_, u, vh = _svd(t, "svd", 3, hermitian)
    return SVDResult(u, s_, vh)


def svdvals(x: Any, /) -> Tensor:
    """Singular values (descending) of (a stack of) matrices."""
    return _svd(x, "svdvals", 1)


class QRResult(NamedTuple):
    """(Q, R), as ``numpy.linalg.qr`` returns."""

    Q: Tensor
    R: Tensor


def qr(a: Any, mode: str = "reduced") -> Any:
    """QR decomposition of (a stack of) matrices: ``mode`` ``'reduced'`` (Q (m, k),
    R (k, n), k = min(m, n)), ``'r'`` (R alone) or ``'complete'`` (the same for
    m <= n; for tall matrices Q's extra columns are not unique, so not differentiable).
    Differentiable for tall, square and wide matrices of full rank."""
    t, dt, batch, m, n = _matrices(a, "qr")
    if mode not in ("reduced", "r", "complete", "raw"):
        raise ValueError(f"qr: unrecognized mode {mode!r}")
    if mode == "raw" or (mode == "complete" and m > n):
        if _requires_grad(t):
            raise NotImplementedError(
                f"qr: mode={mode!r} of a {t.shape} {t.dtype} matrix is not differentiable; "
                "use mode='reduced'"
            )
        out = np.linalg.qr(t._value(), mode=mode)
        return QRResult(*(Tensor._external(np.asarray(v)) for v in out))
    if t.size == 0:
        q, r = np.linalg.qr(t._value(), mode="reduced")
        return _constants(r) if mode == "r" else QRResult(*_constants((q, r)))
    k = min(m, n)
    outs = [(dt, (*batch, m, k)), (dt, (*batch, k, n))]
    q, r = general(QR, dt, [t], outs, [math.prod(batch), m, n], visible=2)
    return r if mode == "r" else QRResult(q, r)


def _eig(a: Any, what: str, visible: int) -> Any:
    t, dt, batch, n = square_float(a, what)
    if t.size == 0:
        return _visible(_constants(tuple(np.linalg.eig(t._value()))), visible)
    outs = [(dt, (*batch, n)), (dt, t.shape)]
    return general(EIG, dt, [t], outs, [math.prod(batch), n], visible=visible)


def eig(a: Any) -> EigResult:
    """Eigenvalues and unit eigenvectors of (a stack of) real matrices whose eigenvalues
    are real; a matrix with complex eigenvalues raises ``LinAlgError``. Repeated
    eigenvalues make the eigenvectors' gradient diverge; their sign is arbitrary."""
    return EigResult(*_eig(a, "eig", 2))


def eigvals(a: Any) -> Tensor:
    """Eigenvalues of (a stack of) real matrices whose eigenvalues are real."""
    return _eig(a, "eigvals", 1)


_NO_VALUE = object()


def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _NO_VALUE) -> Tensor:
    """Moore-Penrose pseudo-inverse of (a stack of) matrices; singular values at most
    ``rcond * max(s)`` count as zero (NumPy's defaults: ``rcond=1e-15``, or
    ``rtol=None`` for ``max(m, n) * eps``). The gradient is that of the pseudo-inverse
    at constant rank (Golub and Pereyra), finite for repeated singular values."""
    t, dt, batch, m, n = _matrices(a, "pinv")
    if rcond is not None and rtol is not _NO_VALUE:
        raise ValueError("pinv: `rtol` and `rcond` can't be both set.")
    if rcond is None:
        rcond = 1e-15 if rtol is _NO_VALUE else rtol
        if rcond is None:
            rcond = max(m, n) * np.finfo(t.dtype).eps
    if np.ndim(rcond) != 0:
        raise TypeError(f"pinv: rcond must be a scalar in tapegrad (got shape {np.shape(rcond)})")
    if t.size == 0:
        return _constants(np.linalg.pinv(t._value()))
    if hermitian:
        t = _lower_symmetric(t, "pinv")
    return general(PINV, dt, [t], [(dt, (*batch, n, m))], [math.prod(batch), m, n], [float(rcond)])


def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple:
    """Least-squares solution of ``a x = b`` as ``numpy.linalg.lstsq``: ``(x,
    residuals, rank, s)``. ``x = pinv(a, rcond) @ b`` (the minimum-norm solution;
    ``rcond=None`` is ``eps * max(m, n)``); residuals (for full column rank and m > n)
    and singular values are differentiable too; rank is an int."""
    ta, tb = as_tensor(a), as_tensor(b)
    # NumPy's errors, before the cast of an integer a is recorded
    if ta.ndim != 2:
        raise np.linalg.LinAlgError(
            f"lstsq: {ta.ndim}-dimensional array given. Array must be two-dimensional"
        )
    if tb.ndim not in (1, 2) or tb.shape[0] != ta.shape[0]:
        raise np.linalg.LinAlgError(
            f"lstsq: incompatible dimensions (a {ta.shape} {ta.dtype}, b {tb.shape} {tb.dtype})"
        )
    ta, _, _, m, n = _matrices(ta, "lstsq")
    eps = np.finfo(ta.dtype).eps
    if rcond is None:
        rcond = eps * max(m, n)
    elif rcond < 0:  # LAPACK's (and NumPy's old default -1): machine precision
        rcond = eps
    if ta.size == 0 or tb.size == 0:
        return _constants(np.linalg.lstsq(ta._value(), tb._value(), rcond=rcond))
    try:  # (a failure depends on the values: it cannot be checked first)
        s = svdvals(ta)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            f"lstsq: SVD did not converge in Linear Least Squares (a {ta.shape} {ta.dtype}, "
            "not finite?)"
        ) from None
    big = s > rcond * _max(s) if s.size else s > 0
    rank = int(_sum(big)) if s.size else 0  # a guard while capturing
    x = matmul(pinv(ta, rcond), tb)
    if rank == n and m > n:
        r = tb - matmul(ta, x)
        residuals = _sum(r * r, axis=0).reshape(-1)
    else:
        residuals = Tensor._external(np.empty(0, x.dtype))
    return x, residuals, rank, s


def matrix_power(a: Any, n: int) -> Tensor:
    """``a`` to the integer power ``n`` (matrix products by repeated squaring, in
    NumPy's order; ``n < 0`` inverts first, ``n == 0`` is the identity)."""
    t = as_tensor(a)
    k = square_stack(t, "matrix_power")[1]
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("matrix_power: exponent must be an integer") from None
    if n == 0:
        eye = np.broadcast_to(np.eye(k, dtype=t.dtype), t.shape).copy()
        return Tensor._external(eye)
    n0 = n
    if n < 0:
        t, n = inv(t), -n
    if n == 1:
        return t * 1 if n0 > 0 else t  # a new tensor, as NumPy returns a copy
    if n == 2:
        return matmul(t, t)
    if n == 3:
        return matmul(matmul(t, t), t)
    result = z = None
    while n > 0:
        z = t if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The cheapest parenthesisation of a chain of matrices ``dims[i] x dims[i + 1]``
    (the textbook dynamic programme NumPy uses): ``split[i][j]``."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for span in range(1, n):
        for i in range(n - span):
            j = i + span
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


def multi_dot(arrays: Any, *, out: Any = None) -> Tensor:
    """The product of two or more matrices in the order of fewest multiplications
    (``numpy.linalg.multi_dot``); the first may be a 1-D row and the last a 1-D
    column."""
    if out is not None:
        raise TypeError("multi_dot: out= is not supported (tensors are immutable)")
    ts = [as_tensor(a) for a in arrays]
    if len(ts) < 2:
        raise ValueError("multi_dot: expecting at least two arrays.")
    if len(ts) == 2:
        return dot(ts[0], ts[1])
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    # NumPy's errors, before anything is recorded: dimensions, then the chain's sizes
    shapes = [t.shape for t in ts]
    shapes[0] = (1, *shapes[0]) if first else shapes[0]
    shapes[-1] = (*shapes[-1], 1) if last else shapes[-1]
    for shape in shapes:
        if len(shape) != 2:
            raise ValueError(
                f"multi_dot: {len(shape)}-dimensional array given. Array must be two-dimensional"
            )
    for i in range(len(shapes) - 1):
        if shapes[i][1] != shapes[i + 1][0]:
            raise ValueError(
                f"multi_dot: shapes {shapes[i]} and {shapes[i + 1]} (arrays {i} and {i + 1}) "
                f"not aligned: {shapes[i][1]} != {shapes[i + 1][0]}"
            )
    if first:
        ts[0] = ts[0].reshape(1, -1)
    if last:
        ts[-1] = ts[-1].reshape(-1, 1)
    split = _chain_order([t.shape[0] for t in ts] + [ts[-1].shape[1]])

    def product(i: int, j: int) -> Tensor:
        if i == j:
            return ts[i]
        return matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    r = product(0, len(ts) - 1)
    if first and last:
        return r.reshape(())
    if first or last:
        return r.reshape(-1)
    return r


MATMUL.front = matmul
DOT.front = dot
VDOT.front = vdot
INNER.front = inner
OUTER.front = outer
TENSORDOT.front = tensordot
EINSUM.front = einsum
TRACE.front = trace
INV.front = inv
DET.front = det
SLOGDET.front = slogdet
SOLVE.front = solve
CHOLESKY.front = cholesky
NORM.front = norm
EIGH.front = eigh
EIGVALSH.front = eigvalsh
SVD.front = svd
SVDVALS.front = svdvals
QR.front = qr
EIG.front = eig
EIGVALS.front = eigvals
PINV.front = pinv
LSTSQ.front = lstsq
MATRIX_POWER.front = matrix_power
MULTI_DOT.front = multi_dot
