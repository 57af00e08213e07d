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
    """Compile ``fn`` as a tapegrad kernel, for a custom function's ``backward_kernel``.

    The function is compiled by numba in nopython mode, lazily on its first call, and
    cached on disk when it lives in a source file. As a ``backward_kernel`` it is
    called as ``kernel(mask, *grads, *inputs, *outputs, *input_grads)`` with flat 1-D
    arrays of the function's float dtype and ``mask`` the needs-input-grad bits; it
    adds (``+=``) into ``input_grads`` and runs inside the compiled backward loop.

    Parameters
    ----------
    fn : callable
        A function numba can compile in nopython mode.

    Returns
    -------
    callable
        The numba dispatcher, callable from Python and from compiled code (``fn``
        itself when numba's JIT is disabled, ``NUMBA_DISABLE_JIT=1``).

    Raises
    ------
    numba.core.errors.TypingError
        On the first call: ``fn`` uses Python that numba cannot compile in nopython
        mode.

    See Also
    --------
    Function : Custom functions, with a Python or a compiled backward.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> @tg.kernel
    ... def cube_bwd(mask, g, x, out, gx):
    ...     for i in range(g.size):
    ...         gx[i] += 3.0 * x[i] * x[i] * g[i]
    >>> class Cube(tg.Function):
    ...     backward_kernel = cube_bwd
    ...
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x ** 3
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> tnp.sum(Cube.apply(x)).backward()
    >>> x.grad
    array([ 3., 12.])
    >>> tg.backward_stats()  # no Python in the backward pass
    {'nodes': 2, 'python_callbacks': 0}
    """
    import inspect
    import os

    try:
        cache = os.path.exists(inspect.getfile(fn))
    except TypeError:
        cache = False
    return jit(fn, cache=cache)


class FunctionCtx:
    """Per-call state passed to a custom function's ``forward`` and ``backward``.

    :meth:`Function.apply` makes one per call; ``forward`` may store values on it as
    attributes (``ctx.k = k``) for ``backward`` to read, and arrays with
    :meth:`save_for_backward`.

    Parameters
    ----------
    needs_input_grad : tuple of bool
        One flag per ``forward`` argument: whether it is a tensor that requires grad
        (with grad mode on). A ``backward`` may skip the gradients not needed.

    Attributes
    ----------
    needs_input_grad : tuple of bool
        As given.
    saved_tensors : tuple
        What :meth:`save_for_backward` kept (NumPy arrays).

    Raises
    ------
    ValueError
        From :meth:`save_for_backward`: a value NumPy cannot make into an array
        (ragged nested lists).

    See Also
    --------
    Function : Custom functions.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> ctx = tg.FunctionCtx((True, False))
    >>> ctx.save_for_backward(np.array([1.0, 2.0]), None)
    >>> ctx.needs_input_grad, ctx.saved_tensors
    ((True, False), (array([1., 2.]), None))
    """

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
    """Base class of custom differentiable functions, PyTorch's spelling.

    Subclass it with staticmethods ``forward(ctx, *args)`` and ``backward(ctx,
    *grads)``, and call ``MyOp.apply(*args)``: the call records one node.

    ``forward`` receives NumPy arrays (the values of tensor arguments; other arguments
    as given) and returns an array or a tuple of arrays. The backward comes in two
    kinds:

    * **Python**: ``backward(ctx, *grads)`` gets NumPy arrays (one per output) and
      returns one gradient per ``forward`` argument (``None`` for no gradient). The
      compiled scheduler yields to Python for that node and resumes. Returned
      gradients are validated like PyTorch's ``validate_outputs``: the wrong count
      raises naming the function; a shape the input broadcasts to is summed down to
      the input's shape, any other shape raises; the dtype is cast to the input's.
    * **compiled**: set ``backward_kernel`` to a :func:`kernel` function
      ``kernel(mask, *grads, *inputs, *outputs, *input_grads)``: flat 1-D arrays (all
      in the function's float dtype), ``mask`` the needs-input-grad bits; it adds
      (``+=``) into ``input_grads``. It runs inside the compiled loop: no Python at
      all in the backward pass (:func:`backward_stats` counts callbacks).

    Forward mode (``tg.jvp``) through a custom function calls its ``jvp(ctx,
    *tangents)`` staticmethod, one tangent per ``forward`` argument in and one per
    output out; without one it raises. ``backward(create_graph=True)`` and nested
    transforms through a custom function raise: its backward computes on NumPy
    arrays, so what it returns cannot be differentiated again.

    Attributes
    ----------
    backward_kernel : callable or None
        A compiled backward (:func:`kernel`), or None for a Python ``backward``.

    See Also
    --------
    FunctionCtx : The ``ctx`` argument.
    kernel : Compile a backward kernel.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> class Scale(tg.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, k):
    ...         ctx.k = k
    ...         return x * k
    ...
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g * ctx.k, None  # no gradient for the number k
    ...
    ...     @staticmethod
    ...     def jvp(ctx, tx, tk):
    ...         return tx * ctx.k
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> tnp.sum(Scale.apply(x, 3.0)).backward()
    >>> x.grad
    array([3., 3.])
    >>> tg.jvp(lambda x: Scale.apply(x, 3.0), (np.array([1.0, 2.0]),), (np.ones(2),))
    (array([3., 6.]), array([3., 3.]))
    """

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
