"""Test cases generated from the op table (shared by the gradient tests and the docs)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tapegrad.ops import ROWS, Kind, Op

UNARY_SHAPES = [(), (5,), (3, 4), (2, 3, 4)]
BINARY_SHAPES = [
    ((), ()),
    ((5,), (5,)),
    ((3, 4), (3, 4)),
    ((2, 3, 4), (2, 3, 4)),  # same shape
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((), (3,)),
    ((5,), ()),
    ((2, 1, 4), (3, 1)),  # broadcast
]


@dataclass
class Case:
    op: Op
    label: str
    f: Callable[..., Any]  # f(module, *args): module is tapegrad.numpy or numpy
    shapes: list[tuple[int, ...]]
    check: dict[str, Any] = field(default_factory=dict)
    domains: tuple[int, ...] | None = None  # which input's domain each argument uses

    @property
    def id(self) -> str:
        return f"{self.op.name}[{self.label}]"

    def domain(self, i: int) -> tuple[float, float]:
        d = self.op.domain
        return d[i] if isinstance(d[0], tuple) else d

    def args(self, dtype: Any = np.float64) -> list[np.ndarray]:
        rng = np.random.default_rng(zlib.crc32(self.id.encode()))
        which = self.domains or range(len(self.shapes))
        return [
            rng.uniform(*self.domain(i), size=s).astype(dtype) for i, s in zip(which, self.shapes)
        ]


# The NumPy function an internal elementwise row computes (its gradient is the row's
# own: safe_sqrt's is 0 at 0, which the table's domains, away from 0, do not reach).
INTERNAL_REFERENCE = {"safe_sqrt": np.sqrt}


def function(m: Any, op: Op) -> Callable:
    """``op``'s function next to NumPy (``m`` is numpy) or in tapegrad (``m`` is
    tapegrad.numpy): numpy / numpy.linalg / scipy.special names."""
    if op.namespace == "internal":  # not published: the row's function, NumPy's twin
        return op.front if m is not np else INTERNAL_REFERENCE[op.name]
    if op.namespace == "special":
        if m is np:
            import scipy.special

            return getattr(scipy.special, op.name)
        import tapegrad.special

        return getattr(tapegrad.special, op.name)
    if op.namespace.startswith("scipy."):  # scipy.linalg, scipy.integrate
        import importlib

        home = importlib.import_module(op.namespace if m is np else "tapegrad." + op.namespace)
        return getattr(home, op.name)
    if op.namespace == "numpy.linalg":
        return getattr(m.linalg, op.name)
    return getattr(m, op.name)


def _elementwise_cases(op: Op) -> Iterator[Case]:
    if op.kind is Kind.UNARY:
        for s in UNARY_SHAPES:
            yield Case(op, f"shape {s}", lambda m, x: function(m, op)(x), [s])
        return
    for sx, sy in BINARY_SHAPES:
        yield Case(op, f"{sx} with {sy}", lambda m, x, y: function(m, op)(x, y), [sx, sy])
    yield Case(op, "tensor with Python scalar", lambda m, x: function(m, op)(x, 1.25), [(3,)])
    yield Case(
        op, "Python scalar with tensor", lambda m, y: function(m, op)(1.25, y), [(3,)], domains=(1,)
    )


def cases() -> list[Case]:
    out: list[Case] = []
    for op in ROWS:
        if op.kind in (Kind.ARRAY, Kind.COMPOSITE) or op.cases is not None:
            out += [Case(op, label, f, shapes, check) for label, f, shapes, check in op.cases()]
        else:
            out += list(_elementwise_cases(op))
    return out
