"""Batching rules of the ``linalg`` family (``tg.vmap``; see :mod:`tapegrad.batching`):
NumPy's linear algebra already works on stacks of matrices, so a batch is one more
stack axis; products are written as ``einsum`` with one more index, the batch's.
``kit`` is :mod:`tapegrad.batching` (this module imports nothing above the op
families)."""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

# rows over stacks of square or rectangular matrices, with how many matrix arguments
STACKED = (
    ("inv", 1), ("det", 1), ("slogdet", 1), ("cholesky", 1), ("eigh", 1), ("eigvalsh", 1),
    ("svd", 1), ("svdvals", 1), ("qr", 1), ("eig", 1), ("eigvals", 1), ("pinv", 1),
    ("matrix_power", 1),
)  # fmt: skip


def rules(kit: Any) -> dict[str, Callable]:
    """The family's rules, by row name."""
    NP, at, Batched = kit.NP, kit.at, kit.Batched
    out: dict[str, Callable] = {name: kit.stack_rule(name, k) for name, k in STACKED}

    def einsum(level: int, n: int, *operands: Any, **kw: Any) -> Any:
        spec = operands[0]
        if not isinstance(spec, str) or kit.level_of(kw)[0] >= level:
            return NotImplemented  # (the interleaved form: a loop)
        arrays = operands[1:]
        spec = spec.replace(" ", "")
        inputs, _, output = spec.partition("->")
        terms = inputs.split(",")
        if len(terms) != len(arrays):
            return NotImplemented  # (NumPy's error, from the loop)
        if "->" not in spec:  # NumPy's implicit output: the indices seen once, sorted
            letters = [c for c in inputs if c.isalpha()]
            output = ("..." if "..." in inputs else "") + "".join(
                sorted(c for c in set(letters) if letters.count(c) == 1)
            )
        free = [c for c in string.ascii_letters if c not in spec]
        b = free[0]
        terms = [b + t if at(a, level) else t for t, a in zip(terms, arrays)]
        values = [a.value if at(a, level) else a for a in arrays]
        new = ",".join(terms) + "->" + b + output
        return Batched(NP["einsum"](new, *values, **kw), level, n)

    def matmul(level: int, n: int, x: Any, y: Any) -> Any:
        nx, ny = kit.ndim(x), kit.ndim(y)
        if nx == 0 or ny == 0:
            return NotImplemented  # (NumPy's error, from the loop)
        # each example's operands as stacks of matrices: a vector is a row (x) or a
        # column (y); the batch axis first, the stacks aligned behind it
        xs = kit.shape(x) if nx > 1 else (1, *kit.shape(x))
        ys = kit.shape(y) if ny > 1 else (*kit.shape(y), 1)
        rank = max(len(xs), len(ys))

        def operand(v: Any, s: tuple) -> Any:
            full = (*(1,) * (rank - len(s)), *s)
            if at(v, level):
                return NP["reshape"](v.value, (n, *full))
            return NP["reshape"](v, full) if full != kit.shape(v) else v

        r = NP["matmul"](operand(x, xs), operand(y, ys))
        if nx == 1:
            r = NP["squeeze"](r, -2)
        if ny == 1:
            r = NP["squeeze"](r, -1)
        # the aligned stacks may have added unit axes behind the batch: drop them
        want = 1 + max(nx, ny, 2) - (nx == 1) - (ny == 1)
        while kit.ndim(r) > want:
            r = NP["squeeze"](r, 1)
        return Batched(r, level, n)

    def letters(k: int, skip: str = "") -> str:
        return "".join([c for c in string.ascii_lowercase if c not in skip][:k])

    def contracts(a: Any, axes_a: list, b: Any, axes_b: list) -> bool:
        """The contracted axes have equal lengths (einsum would broadcast a 1 where
        NumPy's products raise: the loop then raises NumPy's error)."""
        sa, sb = kit.shape(a), kit.shape(b)
        return all(sa[i] == sb[j] for i, j in zip(axes_a, axes_b))

    def dot(level: int, n: int, a: Any, b: Any) -> Any:
        na, nb = kit.ndim(a), kit.ndim(b)
        if na == 0 or nb == 0:
            return NP["multiply"](a, b)
        if not contracts(a, [na - 1], b, [nb - 2 if nb >= 2 else 0]):
            return NotImplemented
        la = letters(na)
        lb = letters(nb, la)
        contracted = lb[-2] if nb >= 2 else lb[-1]
        lb = lb.replace(contracted, la[-1])
        spec = f"{la},{lb}->{la[:-1]}{lb.replace(la[-1], '')}"
        return einsum(level, n, spec, a, b)

    def inner(level: int, n: int, a: Any, b: Any) -> Any:
        na, nb = kit.ndim(a), kit.ndim(b)
        if na == 0 or nb == 0:
            return NP["multiply"](a, b)
        if not contracts(a, [na - 1], b, [nb - 1]):
            return NotImplemented
        la = letters(na)
        lb = letters(nb - 1, la) + la[-1]
        return einsum(level, n, f"{la},{lb}->{la[:-1]}{lb[:-1]}", a, b)

    def outer(level: int, n: int, a: Any, b: Any) -> Any:
        return einsum(level, n, "i,j->ij", NP["ravel"](a), NP["ravel"](b))

    def vdot(level: int, n: int, a: Any, b: Any) -> Any:
        if (
            kit.ndim(a) == 0
            or kit.ndim(b) == 0
            or math.prod(kit.shape(a)) != math.prod(kit.shape(b))
        ):
            return NotImplemented
        return einsum(level, n, "i,i->", NP["ravel"](a), NP["ravel"](b))

    def tensordot(level: int, n: int, a: Any, b: Any, axes: Any = 2) -> Any:
        na, nb = kit.ndim(a), kit.ndim(b)
        if isinstance(axes, int):
            ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
        else:
            ax_a, ax_b = axes
            ax_a = [ax_a] if isinstance(ax_a, int) else list(ax_a)
            ax_b = [ax_b] if isinstance(ax_b, int) else list(ax_b)
        ax_a = [x % na for x in ax_a]
        ax_b = [x % nb for x in ax_b]
        if len(ax_a) != len(ax_b) or not contracts(a, ax_a, b, ax_b):
            return NotImplemented
        la = list(letters(na))
        lb = list(letters(nb, "".join(la)))
        for i, j in zip(ax_a, ax_b):
            lb[j] = la[i]
        keep_a = "".join(c for i, c in enumerate(la) if i not in ax_a)
        keep_b = "".join(c for j, c in enumerate(lb) if j not in ax_b)
        return einsum(level, n, f"{''.join(la)},{''.join(lb)}->{keep_a}{keep_b}", a, b)

    def solve(level: int, n: int, a: Any, b: Any) -> Any:
        if kit.ndim(a) != 2 or kit.ndim(b) not in (1, 2):
            return NotImplemented
        vector = kit.ndim(b) == 1
        A = a.value if at(a, level) else a
        if at(b, level):
            B = NP["expand_dims"](b.value, -1) if vector else b.value
        else:
            B = NP["expand_dims"](b, -1) if vector else b
            if vector:  # an unbatched vector against a batch of matrices
                B = kit.materialized(B, n)
        x = LINALG["solve"](A, B)
        return Batched(NP["squeeze"](x, -1) if vector else x, level, n)

    def norm(level: int, n: int, x: Any, ord: Any = None, axis: Any = None, keepdims=False):
        if not at(x, level):
            return NotImplemented
        value = x.value
        if axis is None:
            if x.ndim <= 2:
                axis = tuple(range(-x.ndim, 0)) if x.ndim else None
            elif ord is None:  # the 2-norm of the flattened example
                value, axis = NP["reshape"](value, (n, -1)), -1
            else:
                return NotImplemented  # (NumPy's error, from the loop)
            if axis is None:
                return Batched(NP["abs"](value), level, n)
            r = LINALG["norm"](value, ord, axis)
            if keepdims:
                r = NP["reshape"](r, (n, *(1,) * x.ndim))
            return Batched(r, level, n)
        return Batched(LINALG["norm"](value, ord, kit.shifted(axis, x.ndim, "norm"), keepdims),
                       level, n)  # fmt: skip

    LINALG = kit.LINALG
    out.update(
        einsum=einsum, matmul=matmul, dot=dot, inner=inner, outer=outer, vdot=vdot,
        tensordot=tensordot, solve=solve, norm=norm,
    )  # fmt: skip
    return out
