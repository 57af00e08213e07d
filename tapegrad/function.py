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
from .grad_mode import is_grad_enabled, no_grad
from .layout import DTYPE_CODE, F64, FLOAT_CODES, SLOT_CONST
from .pytree import flatten
from .record import record_custom
from .tape import Tape, current_tape, normalize_array
from .tensors import Tensor, bind_operand, result_handle
from .tiers import call

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
        """Keep arrays (copies) for ``backward``, which reads them from ``saved_tensors``.

        Call it from ``forward``. Each value is copied into a new NumPy array (a tensor
        contributes its values), so changing an array after saving it does not change
        what ``backward`` reads; None is kept as None. A second call replaces what the
        first kept. ``t.grad_fn.saved()`` shows the saved arrays of the node.

        Parameters
        ----------
        *values : array_like, Tensor or None
            The values ``backward`` needs, in the order
            :attr:`FunctionCtx.saved_tensors` gives them.

        Raises
        ------
        ValueError
            A value NumPy cannot make into an array (ragged nested lists).

        See Also
        --------
        Function.backward : Where the saved arrays are read.

        Examples
        --------
        >>> import numpy as np, tapegrad as tg
        >>> class Exp(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         out = np.exp(x)
        ...         ctx.save_for_backward(out)  # d exp(x) = exp(x) dx
        ...         return out
        ...
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (out,) = ctx.saved_tensors
        ...         return g * out
        >>> x = tg.tensor([0.0, 1.0], requires_grad=True)
        >>> y = Exp.apply(x)
        >>> y.grad_fn.saved()
        [array([1.        , 2.71828183])]
        >>> y.backward(np.ones(2))
        >>> x.grad
        array([1.        , 2.71828183])
        """
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
        """Mark outputs of ``forward`` that get no gradient (indices, counts, masks).

        Call it from ``forward`` with the very objects it returns (they are matched by
        identity). A marked output becomes a tensor that does not require grad, and
        ``backward`` receives zeros as its cotangent. Outputs of integer or bool dtype
        never require grad and need no mark.

        Parameters
        ----------
        *outputs : object
            Objects ``forward`` returns. Anything else is accepted and has no effect.

        Raises
        ------
        RuntimeError
            Not from this call, which accepts any object: from a later ``backward()``
            started at a marked output, which does not require grad.

        See Also
        --------
        Function.forward : Where the outputs are made.

        Examples
        --------
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> class Sort(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         order = np.argsort(x)
        ...         ctx.order = order
        ...         positions = order.astype(np.float64)
        ...         ctx.mark_non_differentiable(positions)
        ...         return x[order], positions
        ...
        ...     @staticmethod
        ...     def backward(ctx, g, g_positions):  # g_positions: zeros
        ...         gx = np.empty_like(g)
        ...         gx[ctx.order] = g
        ...         return gx
        >>> x = tg.tensor([3.0, 1.0, 2.0], requires_grad=True)
        >>> values, positions = Sort.apply(x)
        >>> values, positions
        (tensor([1., 2., 3.], requires_grad=True), tensor([1., 2., 0.]))
        >>> tnp.sum(values * np.array([1.0, 2.0, 3.0])).backward()
        >>> x.grad
        array([3., 1., 2.])
        """
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

    Under :func:`tapegrad.compile` a call is captured as one node of the program: each
    replay runs ``forward`` again, in Python, on that replay's input values (and a
    Python ``backward`` likewise), so ``forward`` must compute from its arguments, as
    PyTorch asks of it. Python control flow inside ``forward`` is not a guard: it
    runs again on every replay.

    Attributes
    ----------
    backward_kernel : callable or None
        A compiled backward (:func:`kernel`), or None for a Python ``backward``.
    replays : bool
        Whether :func:`tapegrad.compile` may capture a call and run ``forward`` again
        on every replay (True). A class whose forward keeps state between calls sets
        it to False, and a function calling it cannot be compiled.

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
    replays: ClassVar[bool] = True
    _code: ClassVar[int] = -1

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any) -> Any:
        """Compute the outputs from the inputs' values: the staticmethod a subclass writes.

        :meth:`Function.apply` calls it with grad mode off, each tensor argument
        replaced by a copy of its values (a NumPy array) and the other arguments as
        given, and turns what it returns into tensors. What ``backward`` or ``jvp``
        will need goes on ``ctx``: arrays through
        :meth:`FunctionCtx.save_for_backward`, anything else as attributes
        (``ctx.k = k``). A float output requires grad when a tensor argument does
        (with grad mode on), unless it is marked with
        :meth:`FunctionCtx.mark_non_differentiable`; integer and bool outputs never
        do. An exception ``forward`` raises reaches the caller of ``apply`` unchanged.

        Parameters
        ----------
        ctx : FunctionCtx
            This call's state, handed to ``backward`` and ``jvp`` later.
        *args : object
            The arguments given to ``apply``, tensors as NumPy arrays.

        Returns
        -------
        array_like or tuple of array_like
            One output (``apply`` returns a tensor) or a tuple of outputs (``apply``
            returns a tuple of tensors): arrays, numbers, nested lists or tensors of
            float64, float32, integer or bool dtype.

        Raises
        ------
        NotImplementedError
            From ``apply``: the subclass does not define ``forward``.
        TypeError
            From ``apply``: an output of a dtype tapegrad cannot hold (complex,
            strings, objects); or, with a ``backward_kernel``, a call with another
            number of tensor arguments or outputs than the first call.
        ValueError
            From ``apply``: an output NumPy cannot make into an array (ragged nested
            lists).

        See Also
        --------
        Function.backward : Its reverse-mode derivative.
        Function.jvp : Its forward-mode derivative.

        Examples
        --------
        Two outputs; the second, an integer position, does not require grad (and its
        cotangent in ``backward`` is zero).

        >>> import numpy as np, tapegrad as tg
        >>> class Peak(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         i = np.argmax(x)
        ...         ctx.i, ctx.shape = i, x.shape
        ...         return x[i], i
        ...
        ...     @staticmethod
        ...     def backward(ctx, g, g_i):
        ...         gx = np.zeros(ctx.shape)
        ...         gx[ctx.i] = g
        ...         return gx
        >>> x = tg.tensor([1.0, 5.0, 2.0], requires_grad=True)
        >>> value, i = Peak.apply(x)
        >>> value, i
        (tensor(5., requires_grad=True), tensor(1))
        >>> value.backward()
        >>> x.grad
        array([0., 1., 0.])
        """
        raise NotImplementedError

    @staticmethod
    def backward(ctx: FunctionCtx, *grads: Any) -> Any:
        """Map the outputs' cotangents to the inputs' gradients: the staticmethod a
        subclass writes (unless it sets ``backward_kernel``).

        A backward pass calls it once for the node, with NumPy arrays, and adds what it
        returns into the inputs' gradients. It computes on NumPy arrays, so its result
        cannot be differentiated again: ``backward(create_graph=True)`` and nested
        transforms through the function raise. ``ctx.needs_input_grad`` tells which
        gradients are wanted; the others may be None. An exception it raises reaches
        the caller of ``backward()`` unchanged.

        Parameters
        ----------
        ctx : FunctionCtx
            The state ``forward`` left: :attr:`FunctionCtx.saved_tensors`, attributes,
            ``needs_input_grad``.
        *grads : numpy.ndarray
            One cotangent per output of ``forward``, of that output's shape and dtype
            (zeros for an output that gets no gradient).

        Returns
        -------
        array_like, None or tuple of them
            One gradient per ``forward`` argument, in order (a tuple for more than one;
            None for a non-tensor argument or a gradient that is not needed); one per
            tensor argument is also accepted. A gradient of a shape the input
            broadcasts to is summed down to the input's shape, and it is cast to the
            input's dtype.

        Raises
        ------
        NotImplementedError
            From a backward pass: the subclass defines neither ``backward`` nor
            ``backward_kernel``; or ``create_graph=True`` (a higher-order derivative).
        RuntimeError
            From a backward pass: it returned another number of gradients, or one of a
            shape the input does not broadcast to.
        TypeError
            From a backward pass: a gradient that is not an array of real numbers
            (complex values, strings).

        See Also
        --------
        Function.forward : What it differentiates.
        kernel : A compiled backward instead (``backward_kernel``).

        Examples
        --------
        Two tensor inputs and a number; the number gets None.

        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> class Blend(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x, y, t):  # (1 - t) x + t y
        ...         ctx.t = t
        ...         return (1.0 - t) * x + t * y
        ...
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         gx = (1.0 - ctx.t) * g if ctx.needs_input_grad[0] else None
        ...         return gx, ctx.t * g, None
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> y = tg.tensor(3.0, requires_grad=True)
        >>> tnp.sum(Blend.apply(x, y, 0.25)).backward()
        >>> x.grad, y.grad  # y's gradient [0.25, 0.25] summed to its shape ()
        (array([0.75, 0.75]), array(0.5))
        """
        raise NotImplementedError("this Function defines neither backward nor backward_kernel")

    @staticmethod
    def jvp(ctx: FunctionCtx, *tangents: Any) -> Any:
        """Map the inputs' tangents to the outputs' tangents: the optional staticmethod
        for forward mode (``tg.jvp``, ``tg.jacfwd``).

        Forward mode through the function calls it after ``forward``, with the same
        ``ctx``. Without it, forward mode through the function raises; reverse mode
        does not need it. It computes on NumPy arrays, so forward mode through it
        inside a derivative that is differentiated again raises.

        Parameters
        ----------
        ctx : FunctionCtx
            The state ``forward`` left.
        *tangents : numpy.ndarray or None
            One per ``forward`` argument: for a tensor argument an array of its shape
            and dtype (zeros for a tensor that carries no tangent), None for any other
            argument.

        Returns
        -------
        array_like, None or tuple of them
            One tangent per output (a tuple for more than one), of the output's shape
            exactly (no broadcasting); None for a zero tangent. It is cast to the
            output's dtype. An output that gets no gradient in reverse mode (integer or
            bool dtype, or marked with :meth:`FunctionCtx.mark_non_differentiable`)
            gets no tangent either: what is returned for it is checked, then unused.

        Raises
        ------
        NotImplementedError
            From forward mode: the subclass does not define ``jvp``, or forward mode
            runs inside a derivative that is differentiated again.
        RuntimeError
            From forward mode: it returned another number of tangents than
            ``forward`` has outputs, or a tangent of another shape than its output.
        TypeError
            From forward mode: a tangent that is not an array of real numbers
            (complex values, strings), as for ``backward``'s gradients.

        See Also
        --------
        Function.forward : What it differentiates.
        tapegrad.jvp : Forward mode.

        Examples
        --------
        >>> import numpy as np, tapegrad as tg
        >>> class Cube(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.x = x
        ...         return x**3
        ...
        ...     @staticmethod
        ...     def jvp(ctx, tx):
        ...         return 3.0 * ctx.x**2 * tx
        >>> tg.jvp(Cube.apply, (np.array([1.0, 2.0]),), (np.array([1.0, 0.5]),))
        (array([1., 8.]), array([3., 6.]))
        """
        raise NotImplementedError("this Function defines no jvp")

    @classmethod
    def apply(cls, *args: Any) -> Any:
        """Call the function: run ``forward`` on the values and record one node.

        ``forward`` runs without recording, on NumPy values (each tensor argument's
        values); its result becomes the node's outputs, which require grad when an input
        does and grad mode is on (float outputs not marked non-differentiable). The
        backward pass calls ``backward`` (or the compiled ``backward_kernel``), forward
        mode calls ``jvp``.

        Parameters
        ----------
        *args : Tensor, array_like or any
            The arguments of ``forward``, in its order (after ``ctx``); tensors are the
            node's inputs, anything else is passed through as it is.

        Returns
        -------
        Tensor or tuple of Tensor
            One tensor per array ``forward`` returned (a tuple when it returned one).

        Raises
        ------
        TypeError
            ``forward`` returned something tapegrad cannot hold (strings, objects,
            complex values), or a class with a compiled backward is called with another
            number of tensor inputs or outputs than before.

        Examples
        --------
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> class Cube(tg.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x**3
        ...
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 3 * x**2 * g
        >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
        >>> y = Cube.apply(x)
        >>> y
        tensor([1., 8.], requires_grad=True)
        >>> tnp.sum(y).backward()
        >>> x.grad
        array([ 3., 12.])
        """
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
        # Captured by tg.compile, forward runs again on every replay's values: reading
        # them here decides nothing (no guard, unlike .numpy())
        captured = cls.replays and current_tape().capture is not None
        values = [_forward_value(a, captured) if isinstance(a, Tensor) else a for a in args]
        before = _plain_state(args) if captured else None
        with no_grad():
            result = cls.forward(ctx, *values)
        # an argument forward changed in place passes information back that a replay
        # would leave as captured: refused when the capture ends (_record)
        changed = captured and _plain_state(args) != before
        single = not isinstance(result, tuple)
        outs = _output_arrays(result, dtype if compiled else None)
        raw = (result,) if single else result
        differentiable = any(needs)
        rg_mask = 0
        for j, (r, arr) in enumerate(zip(raw, outs)):
            if differentiable and arr.dtype.kind == "f" and id(r) not in ctx._non_differentiable:
                rg_mask |= 1 << j
        float_dt = [DTYPE_CODE[a.dtype] for a in outs if DTYPE_CODE[a.dtype] in FLOAT_CODES]
        sig = float_dt[0] if float_dt else F64
        code = cls._op_code() if compiled else dispatch.first_user_code()
        handles = _record(cls, ctx, args, inputs, outs, code, sig, rg_mask, changed)
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
    changed: bool = False,
) -> list[Tensor]:
    tape = current_tape()
    nin, nout = len(inputs), len(outs)
    if cls.backward_kernel is not None:
        known = cls.__dict__.get("_nin")
        if known is not None and (known, cls._nout) != (nin, nout):
            raise TypeError(
                f"{cls.__name__}: a compiled backward needs the same number of "
                f"tensor inputs and outputs on every call ({known}, {cls._nout}), got "
                f"({nin}, {nout}) (under tg.compile a float argument of the step is a "
                "0-d tensor: bind such a constant with functools.partial instead)"
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
        k = call(record_custom, tape.header, code, sig, nin, nout, rg_mask)
        if k >= 0:
            if tape.capture is not None:
                # what a replay calls forward with: the arguments that are not tensors
                # as given (constants of the program), the tensors' from their slots
                template = tuple(None if isinstance(a, Tensor) else a for a in args)
                refused = tape.capture.refused  # (compile refuses these, naming them)
                if not cls.replays:
                    refused[k] = (
                        f"a replay cannot run its forward again ({cls.__name__} sets "
                        "Function.replays = False). Call the function without tg.compile"
                    )
                elif any(isinstance(v, Tensor) for v in flatten(template)[0]):
                    refused[k] = (
                        "it was given a tensor inside a container or a keyword argument "
                        "(under tg.compile a float argument of the step is a 0-d tensor), "
                        "which a replay would pass as it was captured. Pass tensors as "
                        "positional arguments"
                    )
                elif changed:
                    refused[k] = (
                        "its forward changed an argument that is not a tensor in place (an "
                        "array, a list or a dict), and what was computed from it would "
                        "stay as captured. Return that value as an output instead"
                    )
                else:
                    tape.capture.calls[k] = (template, ctx.needs_input_grad)
            return [result_handle(tape, s, ep) for s in out_slots]
        del tape.custom[n_custom:]
        tape.fix(k)


def _forward_value(t: Tensor, captured: bool) -> np.ndarray:
    """What ``forward`` gets for tensor argument ``t``: a copy of its values (read
    without a guard while tg.compile captures the call: a replay runs forward again)."""
    return np.array(t._peek(), copy=True) if captured else t.numpy()


def _plain_state(args: tuple) -> list:
    """What a forward could change in place among the arguments that are not tensors:
    the leaves of lists, tuples and dicts, arrays by their bytes (compared before and
    after a captured call)."""
    leaves, _ = flatten(tuple(a for a in args if not isinstance(a, Tensor)))
    return [
        (v.shape, v.dtype, v.tobytes()) if isinstance(v, np.ndarray) else (type(v), id(v))
        for v in leaves
    ]


def _output_arrays(result: Any, dtype: np.dtype | None) -> list[np.ndarray]:
    """What ``forward`` returned, one array per output (float ones cast to ``dtype``,
    the dtype of a compiled backward, when given)."""
    outs = []
    for r in result if isinstance(result, tuple) else (result,):
        arr = r._value() if isinstance(r, Tensor) else r
        arr = normalize_array(arr, copy=True)
        if dtype is not None and arr.dtype.kind == "f":
            arr = arr.astype(dtype)
        outs.append(arr)
    return outs


def rerun_forward(tape: Tape, k: int, call_args: tuple, name: str) -> bool:
    """Run custom node ``k``'s ``forward`` again on the current values of its input
    slots and write what it returns into its output slots (a replay of a captured
    program, ``tapegrad.program``); the node's ``ctx`` is the new call's, for its
    backward. ``call_args``: ``(template, needs_input_grad)`` as captured (``_record``).
    Returns False when the outputs marked non-differentiable are not those of the
    capture (the program does not hold for these values: it is captured again).

    Raises
    ------
    RuntimeError
        ``forward`` returned another number of outputs, or an output of another shape
        or dtype, than when the call was captured.
    """
    cls, _, nargs, positions = tape.custom_entry(k)
    template, needs = call_args
    ins, outs = tape.node_links(k)
    values = list(template)
    for p, s in zip(positions, ins):
        values[p] = tape.read(s)
    ctx = FunctionCtx(needs)
    with no_grad():
        result = cls.forward(ctx, *values)
    kernel_dtype = None
    if cls.backward_kernel is not None:  # outputs in the kernel's dtype, as apply casts
        floats = [tape.slot_dtype(s) for s in ins if tape.slot_dtype(s).kind == "f"]
        kernel_dtype = np.result_type(*floats) if floats else np.dtype(np.float64)
    arrays = _output_arrays(result, kernel_dtype)
    if len(arrays) != len(outs):
        raise RuntimeError(
            f"tapegrad.compile: {name} returned {len(arrays)} outputs on a replay, "
            f"{len(outs)} when it was captured"
        )
    raw = result if isinstance(result, tuple) else (result,)
    for j, (arr, s) in enumerate(zip(arrays, outs)):
        shape, dtype = tape.slot_shape(s), tape.slot_dtype(s)
        if arr.shape != shape or arr.dtype != dtype:
            raise RuntimeError(
                f"tapegrad.compile: {name} returned output {j} of shape {arr.shape} and "
                f"dtype {arr.dtype} on a replay, where the capture saw {shape} and "
                f"{dtype}; its outputs must depend only on its inputs' shapes and dtypes"
            )
        rg = any(needs) and dtype.kind == "f" and id(raw[j]) not in ctx._non_differentiable
        if rg != tape.slot_rg(s):
            return False
        np.copyto(tape.view(s), arr)
    tape.set_custom_entry(k, (cls, ctx, nargs, positions))
    return True


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
