"""The op table: one row per op, the single source of truth.

Vocabulary, used everywhere in tapegrad (as in HIPS autograd's ``numpy_vjps.py``):
``x``, ``y`` are an op's inputs, ``out`` its saved result, ``g`` the incoming
gradient (of the loss with respect to ``out``). ``<op>_fwd`` computes ``out``;
``<op>_bwd`` (or ``<op>_bwd_x`` / ``<op>_bwd_y``, one per input, as in PyTorch's
``derivatives.yaml``) gives the contribution to an input's gradient.

Kernels come in two shapes:

* **elementwise rows** (``UNARY``, ``BINARY``, ``COMPARE``) give *scalar* formulas:
  ``sin_fwd(x)``, ``sin_bwd(g, x, out)``, ``mul_bwd_y(g, x, y, out)``. One adapter per
  kind lifts them to whole tensors, with NumPy broadcasting on the way forward and the
  broadcast reduction (summing over broadcast axes) on the way back, so no rule ever
  re-implements broadcasting. What an op *saves* is read off the formulas: the
  inputs/outputs their bytecode loads (PyTorch's generator does the same with
  ``derivatives.yaml``).
* **array rows** (``ARRAY``) give node kernels ``f(dt, node, tp)`` that read their
  operands, parameters and the needs-input-grad mask from the tape (``tapegrad.layout``)
  and call a pure array kernel.

Backward kernels only *accumulate* (``gx += ...``) into gradient buffers the
scheduler owns, allocate nothing and read nothing but their arguments. The C-callable
wrappers that fill the dispatch table are generated from this table into
``tapegrad/_generated.py`` (``python -m tapegrad.ops.codegen``); so are the
``tapegrad.numpy`` functions of elementwise rows, the op reference in the docs and
the gradient tests.
"""

from __future__ import annotations

import dis
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..layout import F32, F64, OUTPUT_BIT0
from .elementwise.kernels import FORMULAS


class Kind(enum.Enum):
    UNARY = "unary"
    BINARY = "binary"
    COMPARE = "compare"
    ARRAY = "array"
    # Written in terms of other ops (recorded as several nodes, differentiated through
    # them) or, when not differentiable, computed by NumPy on the values: no kernels.
    COMPOSITE = "composite"


ELEMENTWISE = (Kind.UNARY, Kind.BINARY, Kind.COMPARE)

# Registry: rows get their op code in the order they are declared (ops/__init__.py
# imports the families in a fixed order).
ROWS: list[Op] = []
BY_NAME: dict[str, Op] = {}


@dataclass(eq=False)
class Op:
    """One op.

    Parameters
    ----------
    name
        Public name (``tapegrad.numpy.<name>`` for elementwise rows).
    kind
        How the kernels are shaped (see the module docstring).
    fwd
        Forward kernel: scalar formula (elementwise) or node kernel (array).
    bwd
        Backward: one scalar formula per input (elementwise), a node kernel (array),
        or ``None`` for ops that are not differentiable (``differentiable=False``)
        or whose rule is missing (the scheduler then raises naming the op).
    doc
        One line for the op reference.
    domain
        Interval the gradient tests sample inputs from (inside the op's domain).
    dtypes
        Computation dtypes the op is compiled for.
    differentiable
        ``False`` for comparisons and other piecewise-constant ops.
    sigs
        Explicit kernel signatures (dtype pairs for casts); defaults to ``dtypes``.
    alias
        The output shares input 0's memory (reshape): no forward copy.
    cases
        For array rows, ``cases() -> [(label, f, shapes)]`` for the generated gradient
        tests; elementwise rows get shape cases from their kind unless they give their
        own (``polygamma``: integer orders).
    front
        The public Python function of an array or composite row (elementwise rows get
        a generated one).
    array_saves
        For array rows, which operands the backward reads (``x``/``y``/``z``: inputs 0-2,
        ``out``/``out1``: outputs 0-1; default: all), for the in-place version check.
    namespace
        Where the function is published: ``numpy`` (``tapegrad.numpy``),
        ``numpy.linalg`` or ``special`` (``tapegrad.special``, SciPy's names);
        ``internal``: not published (rows tapegrad's own rules record).
    aliases
        Other ``tapegrad.numpy`` names for the op (``abs`` for ``absolute``).
    arith
        Elementwise rows of plain arithmetic (no libm call): the kernel loop vectorises
        and beats NumPy's ufunc on large operands (a broadcast add of (256, 256) and
        (256,): 17 us against 58 through NumPy), so a large same-shape or
        scalar-operand result runs on all cores in the kernel, or, with several threads
        right after a forward NumPy split across its threads, NumPy's halves on those
        (one pool at a time: ``record._numpy_runs``).
    dunder
        Tensor operator methods: ``(forward, reflected)``, e.g. ``("__add__", "__radd__")``.
    method
        Also a Tensor method, as NumPy's ndarray has it: ``t.sum(axis=0)`` is the row's
        public function with the tensor first (unary rows of the ``numpy`` namespace
        are methods anyway: NumPy's object loops call ``t.exp()``).
    cuda
        The row's GPU target (:mod:`tapegrad.cuda`). ``UNARY``/``BINARY`` rows default to
        ``"formulas"``: the same scalar formulas, compiled as CUDA device functions and
        lifted by broadcasting kernels. Array rows name the method of
        ``tapegrad.cuda.CudaTensor`` that records them on the GPU. ``None``: CPU only.
    vector
        ``(forward, backward)`` formulas with the signatures of ``fwd`` and ``bwd``
        (for binary rows, backward is a pair, one per input) built on
        :mod:`tapegrad.kernels.vecmath` (branch-free, so LLVM vectorises the kernel
        loop), accurate to a few ulp for ``|x| <= vector_range`` (unary rows) or
        inside ``vector_gate`` (binary rows). The CPU kernels use them
        for blocks of inputs inside that range and ``fwd``/``bwd`` (libm) elsewhere;
        the large-array eager forward then stays in the kernel instead of NumPy's
        ufunc. Binary rows take them on same-shape and scalar operands; broadcasting
        keeps the libm formulas.
    vector_range
        See ``vector``.
    vector_gate
        Binary rows with ``vector`` formulas: the scalar function of ``(x, y)`` whose
        magnitude must stay within ``vector_range`` over a block for the block to take
        them, forward and backward (logaddexp: ``x - y``). Both backward formulas must
        read x and y: the tape keeps and version-checks only what a formula reads, and
        an operand changed in place after the forward must not steer a gradient to a
        formula outside its range.
    failure
        For array rows whose kernels call LAPACK: what a failure (``E_LINALG``) means,
        in the ``numpy.linalg.LinAlgError`` the front end raises.
    passes
        Binary rows: the inputs whose gradient is the output's gradient unchanged
        (add: ``(0, 1)``; subtract: ``(0,)``). Where such an input has the output's
        dtype and size and nothing wrote its gradient yet, the scheduler hands it the
        output's buffer (``layout.OPF_PASS``) instead of running a copy.
    scalar_parallel
        Binary rows users write with a Python number beside a large array (``x * 0.9``,
        ``x ** 1.3``, ``1 - x``, ``maximum(x, 0)``): their scalar-operand backward runs
        on all cores from ``ops.elementwise.kernels.PARALLEL_MIN`` elements. Each such row
        costs a parallel function per compiled signature (~3 s of a cold cache's
        compile), so the other rows keep the serial loops.
    assigns
        The backward kernel stores into an input gradient buffer the scheduler marks
        fresh (``layout.FRESH_SHIFT``) instead of adding to it, so that buffer need
        not be zeroed first. Every element of a fresh buffer must then be written
        (zeros where the op contributes nothing). Unary and binary rows have it (their
        adapters handle it); array rows opt in where the kernel was written for it.
    vjp, jvp
        For array rows, the derivative as recorded ops, attached by
        :mod:`tapegrad.derivatives` (the compiled ``bwd`` kernel stays the first-order
        path): ``vjp(node, grads) -> input grads`` serves ``create_graph`` and higher
        order, ``jvp(node, tangents) -> output tangents`` forward mode. Elementwise rows
        need neither: their scalar formulas are written in the vocabulary of
        :mod:`tapegrad.ops.vocabulary` and record when called with tensors.
    """

    name: str
    kind: Kind
    fwd: Callable
    bwd: Any
    doc: str
    domain: tuple[float, float] = (-2.0, 2.0)
    dtypes: tuple[int, ...] = (F64, F32)
    differentiable: bool = True
    sigs: tuple[int, ...] | None = None
    alias: bool = False
    cases: Callable | None = None
    front: Callable | None = None
    array_saves: tuple[str, ...] | None = None
    namespace: str = "numpy"
    aliases: tuple[str, ...] = ()
    dunder: tuple[str | None, ...] = ()
    method: bool = False
    cuda: str | None = "default"
    vector: tuple[Callable, Callable] | None = None
    vector_range: float = 0.0
    vector_gate: Callable | None = None
    arith: bool = False
    failure: str = "singular matrix (or the input is not finite)"
    assigns: bool = False
    passes: tuple[int, ...] = ()
    scalar_parallel: bool = False
    vjp: Callable | None = None
    jvp: Callable | None = None
    code: int = field(default=-1, init=False)
    saves: tuple[str, ...] = field(default=(), init=False)
    # plain attributes for the eager hot path (enum and property lookups cost ~0.1 us)
    is_unary: bool = field(default=False, init=False)
    is_compare: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.name in BY_NAME:
            raise ValueError(f"op {self.name!r} declared twice")
        self.code = len(ROWS)
        if self.kind is Kind.COMPOSITE:
            self.sigs = ()
        elif self.sigs is None:
            self.sigs = tuple(self.dtypes)
        if self.kind is Kind.BINARY and self.bwd is not None and len(self.bwd) != 2:
            raise ValueError(f"binary op {self.name!r} needs one backward formula per input")
        if self.vector is not None and not (
            self.vector_range > 0
            and (
                (self.kind is Kind.UNARY and self.vector_gate is None)
                or (
                    self.kind is Kind.BINARY
                    and self.vector_gate is not None
                    and len(self.vector[1]) == 2
                )
            )
        ):
            raise ValueError(
                f"op {self.name!r}: vector formulas need a range and a unary row, or a "
                "binary row with a gate and a backward formula per input"
            )
        if self.scalar_parallel and self.kind is not Kind.BINARY:
            raise ValueError(f"op {self.name!r}: scalar_parallel is for binary rows")
        if self.passes and (self.kind is not Kind.BINARY or not set(self.passes) <= {0, 1}):
            raise ValueError(f"op {self.name!r}: passes names inputs of a binary row")
        if self.kind in (Kind.UNARY, Kind.BINARY):
            self.assigns = True
        if self.cuda == "default":
            self.cuda = "formulas" if self.kind in (Kind.UNARY, Kind.BINARY) else None
        self.saves = _saved_values(self)
        if self.vector is not None:
            binary = self.kind is Kind.BINARY
            vb = self.vector[1] if binary else (self.vector[1],)
            for vf, f in zip(vb, self.backward_formulas):
                # each reads at most what its libm formula reads: the tape keeps (and
                # version-checks) only that, per input (saved_mask_for); a binary
                # row's gate reads x and y
                reads = _loaded_names(vf) | ({"x", "y"} if binary else set())
                extra = reads & {"x", "y", "out"} - _loaded_names(f)
                if extra:
                    raise ValueError(f"op {self.name!r}: vector backward reads {sorted(extra)}")
        self.is_unary = self.kind is Kind.UNARY
        self.is_compare = self.kind is Kind.COMPARE
        ROWS.append(self)
        BY_NAME[self.name] = self
        FORMULAS[self.name] = self

    @property
    def saved_mask(self) -> int:
        """Bits of the node's link list whose values the backward reads: input i is bit
        i, output j bit ``OUTPUT_BIT0 + j``. The scheduler checks their versions
        (in-place safety)."""
        names = self.saves if self.kind in ELEMENTWISE else self.array_saves
        if self.kind is not Kind.ARRAY or names is not None:
            bits = {"x": 1, "y": 2, "z": 4, "out": 1 << OUTPUT_BIT0, "out1": 2 << OUTPUT_BIT0}
            return sum(bits[n] for n in (names or ()))
        return (1 << OUTPUT_BIT0) - 1 | ((1 << 31) - 1) << OUTPUT_BIT0

    def saved_mask_for(self, i: int) -> int:
        """:attr:`saved_mask` when only input ``i`` wants a gradient: the bits its own
        formula reads (``h * 2.0`` then ``h[0] = 5``: the gradient of ``h`` reads only
        the 2.0, so the in-place change of ``h`` does not matter to it)."""
        formulas = self.backward_formulas
        if self.kind not in ELEMENTWISE or len(formulas) != self.arity or i >= len(formulas):
            return self.saved_mask
        bits = {"x": 1, "y": 2, "out": 1 << OUTPUT_BIT0}
        return sum(bits[n] for n in _loaded_names(formulas[i]) if n in bits)

    @property
    def arity(self) -> int:
        if self.kind is Kind.UNARY:
            return 1
        return 2 if self.kind in (Kind.BINARY, Kind.COMPARE) else -1

    @property
    def backward_formulas(self) -> tuple[Callable, ...]:
        if self.bwd is None:
            return ()
        return tuple(self.bwd) if isinstance(self.bwd, tuple | list) else (self.bwd,)


def _loaded_names(fn: Callable) -> set[str]:
    py = getattr(fn, "py_func", fn)
    names: set[str] = set()
    for ins in dis.get_instructions(py):
        if ins.opname.startswith("LOAD_FAST"):  # 3.13 fuses pairs: LOAD_FAST_LOAD_FAST
            names.update(ins.argval if isinstance(ins.argval, tuple) else (ins.argval,))
    return names


def _saved_values(op: Op) -> tuple[str, ...]:
    """What the backward reads, worked out from the formulas' bytecode."""
    if op.kind not in ELEMENTWISE or op.bwd is None:
        return ()
    used: set[str] = set()
    for f in op.backward_formulas:
        used |= _loaded_names(f)
    return tuple(n for n in ("x", "y", "out") if n in used)
