"""Front ends of the ``linalg`` op family: the Python functions that record its rows
(declared in :mod:`tapegrad.ops.linalg`)."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

from ..layout import DTYPE_CODE, NP_DTYPES, promote
from ..ops.linalg import (
    CHOLESKY,
    DET,
    DOT,
    EINSUM,
    INNER,
    INV,
    MATMUL,
    NORM,
    OUTER,
    SLOGDET,
    SOLVE,
    TENSORDOT,
    TRACE,
    VDOT,
)
from ..shapes import matmul_layout, normalize_axes
from ..tape import current_tape
from ..tensors import Tensor, as_tensor, general
from .reduce import max as _max
from .reduce import min as _min
from .reduce import safe_sqrt
from .reduce import sum as _sum
from .shape import astype, broadcast_to, diagonal, gather_positions


def matmul(x: Any, y: Any) -> Tensor:
    """Matrix product with ``numpy.matmul`` semantics.

    1-D operands are promoted to a row (x) or column (y) and the added axis removed
    from the result; leading axes are batch axes and broadcast against each other.
    """
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
    dt = promote(dx, dy)
    return dt, out_shape, ip


def _normalize_axes_list(axes: Any, ndim: int) -> list[int]:
    axes = [axes] if isinstance(axes, int | np.integer) else list(axes)
    return [operator.index(a) % ndim if ndim else 0 for a in axes]


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
    if tb.ndim <= 2 and (ta.ndim <= 2 or tb.ndim == 1):
        return matmul(ta, tb)
    return tensordot(ta, tb, axes=([-1], [-2]))


def vdot(a: Any, b: Any) -> Tensor:
    """Dot product of the flattened inputs."""
    return dot(as_tensor(a).reshape(-1), as_tensor(b).reshape(-1))


def inner(a: Any, b: Any) -> Tensor:
    """Sum of products over the last axes."""
    ta, tb = as_tensor(a), as_tensor(b)
    if ta.ndim == 0 or tb.ndim == 0:
        return ta * tb
    return tensordot(ta, tb, axes=([-1], [-1]))


def outer(a: Any, b: Any, out: Any = None) -> Tensor:
    """Outer product of the flattened inputs."""
    if out is not None:
        raise TypeError("outer: out= is not supported (tensors are immutable)")
    return as_tensor(a).reshape(-1, 1) * as_tensor(b).reshape(1, -1)


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """Sum along a diagonal."""

    return _sum(diagonal(a, offset, axis1, axis2), axis=-1)


def _parse_einsum(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Expand ``...`` into letters (right-aligned, broadcasting) and infer the output."""
    subscripts = subscripts.replace(" ", "")
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
        if len(spec) != len(shape) or not spec.isalpha():
            raise ValueError(
                f"einsum: subscripts {spec!r} do not match an operand of shape {shape}"
            )
        expanded.append(spec)
    if out is None:
        counts = {c: "".join(expanded).count(c) for c in set("".join(expanded))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return expanded, out


def einsum(subscripts: str, *operands: Any, optimize: Any = False) -> Tensor:
    """Einstein summation (``numpy.einsum`` subscripts, with ``...`` and implicit output).

    Repeated letters within an operand take a diagonal; letters only one operand has and
    the output does not are summed first; then operands are contracted pairwise, left
    to right, each pair as one (batched) matrix product.
    """

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


def _contract(a: Tensor, la: str, b: Tensor, lb: str, keep: str) -> tuple[Tensor, str]:
    """Contract two operands: shared letters not kept are summed (matrix product), shared
    kept letters are batch axes, the others are free."""
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    free_a = [c for c in la if c not in lb]
    free_b = [c for c in lb if c not in la]
    sa = dict(zip(la, a.shape))
    sb = dict(zip(lb, b.shape))
    for c in summed:
        if sa[c] != sb[c]:
            raise ValueError(f"einsum: size of {c!r} differs ({sa[c]} and {sb[c]})")
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


def _square_stack(a: Tensor, what: str) -> tuple[tuple[int, ...], int]:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(
            f"{what}: last 2 dimensions of the array must be square (got shape {a.shape})"
        )
    return a.shape[:-2], a.shape[-1]


def _float(t: Tensor) -> tuple[Tensor, int]:
    if t.dtype.kind != "f":
        t = astype(t, np.float64)
    return t, DTYPE_CODE[t.dtype]


def inv(a: Any) -> Tensor:
    """Inverse of a (stack of) square matrices."""
    t, dt = _float(as_tensor(a))
    batch, n = _square_stack(t, "inv")
    nb = math.prod(batch)
    return general(INV, dt, [t], [(dt, t.shape)], [nb, n])


def det(a: Any) -> Tensor:
    """Determinant of a (stack of) square matrices."""
    t, dt = _float(as_tensor(a))
    batch, n = _square_stack(t, "det")
    nb = math.prod(batch)
    return general(DET, dt, [t], [(dt, batch)], [nb, n])


class SlogdetResult(tuple):
    """(sign, logabsdet), as ``numpy.linalg.slogdet`` returns (the sign is constant)."""

    @property
    def sign(self) -> Tensor:
        return self[0]

    @property
    def logabsdet(self) -> Tensor:
        return self[1]


def slogdet(a: Any) -> SlogdetResult:
    """Sign and log of the absolute determinant; differentiable in the latter."""
    t, dt = _float(as_tensor(a))
    batch, n = _square_stack(t, "slogdet")
    nb = math.prod(batch)
    sign, logdet = general(SLOGDET, dt, [t], [(dt, batch), (dt, batch)], [nb, n], visible=2)
    return SlogdetResult((sign.detach(), logdet))


def solve(a: Any, b: Any) -> Tensor:
    """Solve ``a x = b``; ``b`` is a vector when 1-D, else a stack of matrices
    (NumPy 2 rules); batch axes broadcast."""

    ta, tb = as_tensor(a), as_tensor(b)
    batch, n = _square_stack(ta, "solve")
    vector = tb.ndim == 1
    rhs = tb.reshape(n, 1) if vector else tb
    if rhs.ndim < 2 or rhs.shape[-2] != n:
        raise ValueError(f"solve: b of shape {tb.shape} does not match a of shape {ta.shape}")
    try:
        out_batch = np.broadcast_shapes(batch, rhs.shape[:-2])
    except ValueError:
        raise ValueError(
            f"solve: batch dimensions of {ta.shape} and {tb.shape} do not broadcast"
        ) from None
    k = rhs.shape[-1]
    dtype = np.result_type(ta.dtype, rhs.dtype, np.float32)
    ta = broadcast_to(astype(ta, dtype), (*out_batch, n, n))
    rhs = broadcast_to(astype(rhs, dtype), (*out_batch, n, k))
    dt = DTYPE_CODE[np.dtype(dtype)]
    nb = math.prod(out_batch)
    x = general(SOLVE, dt, [ta, rhs], [(dt, (*out_batch, n, k))], [nb, n, k])
    return x.reshape(n) if vector else x


def cholesky(a: Any) -> Tensor:
    """Lower Cholesky factor of a (stack of) symmetric positive definite matrices
    (only the lower triangle is read; the gradient is symmetrised)."""
    t, dt = _float(as_tensor(a))
    batch, n = _square_stack(t, "cholesky")
    nb = math.prod(batch)
    return general(CHOLESKY, dt, [t], [(dt, t.shape)], [nb, n])


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Vector norms (ord None/2, 1, inf, -inf, 0, p) and matrix norms ('fro', 1, -1, inf,
    -inf), as ``numpy.linalg.norm``. Where the 2-norm is 0 its gradient is 0 (a
    subgradient), not NaN."""

    t = as_tensor(x)
    if t.dtype.kind != "f":
        t = astype(t, np.float64)
    if axis is None:
        if ord is None:
            r = safe_sqrt(_sum(t * t))
            return r.reshape((1,) * t.ndim) if keepdims else r
        axis = tuple(range(t.ndim))
    axes = normalize_axes(axis, t.ndim, "norm")
    if len(axes) == 1:
        ax = axes
        a = abs(t)
        if ord is None or ord == 2:
            return safe_sqrt(_sum(t * t, axis=ax, keepdims=keepdims))
        if ord == np.inf:
            return _max(a, axis=ax, keepdims=keepdims)
        if ord == -np.inf:
            return _min(a, axis=ax, keepdims=keepdims)
        if ord == 1:
            return _sum(a, axis=ax, keepdims=keepdims)
        if ord == 0:
            return _sum(t != 0, axis=ax, keepdims=keepdims).astype(t.dtype)
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
        return _sum(a**ord, axis=ax, keepdims=keepdims) ** (1.0 / ord)
    if len(axes) != 2:
        raise ValueError(f"norm: improper number of dimensions to norm ({len(axes)})")
    row, col = (
        axes
        if not isinstance(axis, tuple | list)
        else (operator.index(axis[0]) % t.ndim, operator.index(axis[1]) % t.ndim)
    )
    a = abs(t)
    if ord is None or ord == "fro":
        return safe_sqrt(_sum(t * t, axis=axes, keepdims=keepdims))
    if ord in (1, -1):  # max / min absolute column sum
        sums = _sum(a, axis=row, keepdims=True)
        r = (_max if ord == 1 else _min)(sums, axis=col, keepdims=True)
    elif ord in (np.inf, -np.inf):  # max / min absolute row sum
        sums = _sum(a, axis=col, keepdims=True)
        r = (_max if ord == np.inf else _min)(sums, axis=row, keepdims=True)
    else:
        raise NotImplementedError(
            f"norm: ord={ord!r} for matrices needs singular values, "
            "which tapegrad does not differentiate yet"
        )
    if not keepdims:
        r = r.reshape([n for d, n in enumerate(r.shape) if d not in axes])
    return r


# each row's public function
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
