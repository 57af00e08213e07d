"""Custom functions: ``class MyOp(tg.Function)`` with ``forward(ctx, *args)`` and
``backward(ctx, *grads)``, called as ``MyOp.apply(...)`` (PyTorch's spelling).

``forward`` receives NumPy arrays (the values of tensor arguments; other arguments as
given) and returns an array or a tuple of arrays. The backward comes in two kinds:

* **Python** - ``backward(ctx, *grads)`` gets NumPy arrays (one per output) and returns
  one gradient per ``forward`` argument (``None`` for no gradient). The compiled
  scheduler yields to Python for that node and resumes. Returned gradients are
  validated like PyTorch's ``validate_outputs``: the wrong count raises naming the
  function; a shape the input broadcasts to is summed down to the input's shape, any
  other shape raises; the dtype is cast to the input's.
* **compiled** - set ``backward_kernel`` to a ``tapegrad.kernel`` (numba nopython)
  function ``kernel(mask, *grads, *inputs, *outputs, *input_grads)``: flat 1-D arrays
  (all in the function's float dtype), ``mask`` the needs-input-grad bits; it adds
  (``+=``) into ``input_grads``. It runs inside the compiled loop: no Python at all in
  the backward pass (``tg.backward_stats()`` counts callbacks).

Forward mode (``tg.jvp``) through a custom function calls its ``jvp(ctx, *tangents)``
staticmethod (PyTorch's spelling); without one it raises. ``backward(create_graph=True)``
and nested transforms through a custom function raise: its backward computes on NumPy
arrays, so what it returns cannot be differentiated again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from . import dispatch, layout
from ._jit import jit
from .layout import DTYPE_CODE, F64, FLOAT_CODES, SLOT_CONST
from .record import record_custom
from .tape import current_tape, normalize_array
from .tensors import Tensor, bind_operand, is_grad_enabled, no_grad, result_handle
from .tiers import current

__all__ = ["Function", "FunctionCtx", "kernel"]


def kernel(fn: Callable) -> Callable:
    """Compile ``fn`` as a tapegrad kernel (numba nopython; cached on disk when the
    function lives in a source file)."""
    import inspect
    import os

    try:
        cache = os.path.exists(inspect.getfile(fn))
    except TypeError:
        cache = False
    return jit(fn, cache=cache)


class FunctionCtx:
    """Per-call state passed to ``forward`` and ``backward``."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self._saved: tuple[Any, ...] = ()
        self._non_differentiable: set[int] = set()

    def save_for_backward(self, *values: Any) -> None:
        """Keep values (arrays) for ``backward``; they are copied."""
        self._saved = tuple(
            np.array(v._value() if isinstance(v, Tensor) else v, copy=True)
            if v is not None
            else None
            for v in values
        )

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """What ``save_for_backward`` kept (NumPy arrays)."""
        return self._saved

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """Outputs (the arrays ``forward`` returns) that get no gradient."""
        self._non_differentiable.update(id(o) for o in outputs)


class Function:
    """Base class of custom differentiable functions (see the module docstring)."""

    backward_kernel: ClassVar[Callable | None] = None
    _code: ClassVar[int] = -1

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        raise NotImplementedError("this Function defines neither backward nor backward_kernel")

    @staticmethod
    def jvp(ctx: FunctionCtx, *tangents: Any) -> Any:
        """Forward mode (``tg.jvp``, ``tg.jacfwd``): one tangent per ``forward``
        argument in (NumPy arrays, zeros for tensors without one; ``None`` for other
        arguments), one tangent per output out. Optional: without it, forward mode
        through the function raises."""
        raise NotImplementedError("this Function defines no jvp")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Run ``forward`` on the values and record one node."""
        grad_on = is_grad_enabled()
        needs = tuple(isinstance(a, Tensor) and a.requires_grad and grad_on for a in args)
        ctx = FunctionCtx(needs)
        compiled = cls.backward_kernel is not None
        inputs = [a for a in args if isinstance(a, Tensor)]
        if compiled:  # one float dtype for the kernel: NumPy's result type
            floats = [a.dtype for a in inputs if a.dtype.kind == "f"] or [np.float64]
            dtype = np.result_type(*floats)
            args = tuple(
                a.astype(dtype) if isinstance(a, Tensor) and a.dtype.kind == "f" else a
                for a in args
            )
            inputs = [a for a in args if isinstance(a, Tensor)]
        values = [a.numpy() if isinstance(a, Tensor) else a for a in args]
        with no_grad():
            result = cls.forward(ctx, *values)
        single = not isinstance(result, tuple)
        raw = (result,) if single else result
        outs = []
        for r in raw:
            arr = r._value() if isinstance(r, Tensor) else r
            arr = normalize_array(arr, copy=True)
            if compiled and arr.dtype.kind == "f":
                arr = arr.astype(dtype)
            outs.append(arr)
        differentiable = any(needs)
        rg_mask = 0
        for j, (r, arr) in enumerate(zip(raw, outs)):
            if differentiable and arr.dtype.kind == "f" and id(r) not in ctx._non_differentiable:
                rg_mask |= 1 << j
        float_dt = [DTYPE_CODE[a.dtype] for a in outs if DTYPE_CODE[a.dtype] in FLOAT_CODES]
        sig = float_dt[0] if float_dt else F64
        code = cls._op_code() if compiled else dispatch.first_user_code()
        handles = _record(cls, ctx, args, inputs, outs, code, sig, rg_mask)
        return handles[0] if single else tuple(handles)

    @classmethod
    def _op_code(cls) -> int:
        if cls.__dict__.get("_code", -1) < 0:
            cls._code = dispatch.register_function(cls)
        return cls._code

    @classmethod
    def _wrapper(cls, sig: int) -> Callable:
        """The C-callable backward of this class for dtype ``sig`` (compiled by dispatch)."""
        return _make_wrapper(cls.backward_kernel, cls._nin, cls._nout, sig)


def _record(
    cls: type,
    ctx: FunctionCtx,
    args: tuple,
    inputs: list[Tensor],
    outs: list[np.ndarray],
    code: int,
    sig: int,
    rg_mask: int,
) -> list[Tensor]:
    tape = current_tape()
    nin, nout = len(inputs), len(outs)
    if cls.backward_kernel is not None:
        known = cls.__dict__.get("_nin")
        if known is not None and (known, cls._nout) != (nin, nout):
            raise TypeError(
                f"{cls.__name__}: a compiled backward needs the same number of "
                f"tensor inputs and outputs on every call ({known}, {cls._nout})"
            )
        cls._nin, cls._nout = nin, nout
    while True:
        ep = tape.epoch
        in_slots = [bind_operand(tape, ep, t)[0] for t in inputs]
        out_slots = [tape.import_array(a, SLOT_CONST) for a in outs]
        if tape.epoch != ep:
            continue
        pl = tape.reserve("link", nin + nout)
        pi = tape.reserve("ip", 1)
        tape.set_links(pl, in_slots + out_slots)
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        n_custom = len(tape.custom)
        tape.add_custom(pi, (cls, ctx, len(args), positions))
        k = current(record_custom)(tape.header, code, sig, nin, nout, rg_mask)
        if k >= 0:
            return [result_handle(tape, s, ep) for s in out_slots]
        del tape.custom[n_custom:]
        tape.fix(k)


_WRAPPER_TEMPLATE = """
def wrapper(node, tp):
    h = header(tp)
    mask = nodes(h)[N_MASK, node]
    user_kernel(mask, {args})
    return 0
"""


def _make_wrapper(user_kernel: Callable, nin: int, nout: int, sig: int) -> Callable:
    """Glue between the tape and a user kernel with ``nin`` inputs and ``nout`` outputs.

    Built from source at run time (the arity varies), so it is compiled once per process
    rather than cached on disk; the user's kernel itself is cached by numba if it lives
    in a file.
    """
    dt = "np.float64" if sig == F64 else "np.float32"
    args = (
        [f"out_grad(h, node, {j}, {dt})" for j in range(nout)]
        + [f"in_data(h, node, {i}, {dt})" for i in range(nin)]
        + [f"out_data(h, node, {j}, {dt})" for j in range(nout)]
        + [f"in_grad(h, node, {i}, {dt})" for i in range(nin)]
    )
    namespace = {
        "np": np,
        "user_kernel": user_kernel,
        **{
            n: getattr(layout, n)
            for n in ("header", "nodes", "N_MASK", "out_grad", "in_data", "out_data", "in_grad")
        },
    }
    exec(_WRAPPER_TEMPLATE.format(args=", ".join(args)), namespace)
    return namespace["wrapper"]
