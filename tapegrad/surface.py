"""Publish the op table: one public function per row, in its namespace.

``tapegrad.numpy``, ``tapegrad.numpy.linalg`` and ``tapegrad.special`` take their
differentiable functions from here; elementwise rows get generated functions, array
and composite rows their front ends. Rows with operator names (``dunder``) become Tensor
operators.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from . import devices, engine, recording
from . import families as _families  # noqa: F401  (attaches front ends and rules)
from . import graph as _graph
from .boundary import EQUIVALENTS
from .docstrings import DOCS
from .numpy_protocols import CPU_FUNCTION, DROPIN, UFUNC_CALLS, array_function, array_ufunc
from .ops import ROWS, Kind, Op
from .ops.elementwise.front import divmod as divmod_
from .ops.elementwise.front import floor_divide
from .ops.reduce.front import amax, amin
from .ops.shape.front import reshape as reshape_copy
from .ops.shape.front import write_in_place
from .recording import elementwise_function
from .tensors import Tensor
from .views import install as install_views

# the names of the tracers (devices.register_tracer) every array row routes to
TRACERS = ("vmap",)

NAMESPACES: dict[str, dict[str, Callable]] = {
    "numpy": {},
    "numpy.linalg": {},
    "special": {},
    "scipy.linalg": {},
    "scipy.integrate": {},
    "internal": {},  # rows only tapegrad itself calls (scatter_add: a gather's transpose)
}


def _operators(op: Op, f: Callable) -> None:
    names = op.dunder
    if not names:
        return
    setattr(Tensor, names[0], f)  # self is the first operand
    if len(names) > 1 and names[1]:
        setattr(Tensor, names[1], lambda self, other: f(other, self))


def _on_either_device(op: Op, f: Callable) -> Callable:
    """``f`` for CPU operands; the device target's function for the row when one of the
    first two arguments is a device tensor and the row has a device kernel, and a
    tracer's (``tg.vmap``'s batched values) when any argument holds one of its values
    (:mod:`tapegrad.devices`; elementwise rows route inside ``elementwise``)."""

    @functools.wraps(f)
    def routed(*args: Any, **kwargs: Any) -> Any:
        if recording.DEVICE_TYPES:
            target = devices.route_call(args, kwargs)
            if target is not None and (op.cuda is not None or target.name in TRACERS):
                return target.function(op)(*args, **kwargs)
        return f(*args, **kwargs)

    CPU_FUNCTION[routed] = f
    return routed


for _op in ROWS:
    if _op.kind in (Kind.UNARY, Kind.BINARY, Kind.COMPARE):
        _f = elementwise_function(_op)
        _f.__name__ = _f.__qualname__ = _op.name
        _f.__module__ = "tapegrad." + _op.namespace
        _f.__doc__ = (
            f"{_op.doc}. Elementwise{', with broadcasting' if _op.arity == 2 else ''}"
            f"; generated from the op table row ``{_op.name}``."
        )
        _op.front = _f  # the recorded face of formulas that call this row
    else:
        _f = _op.front
    _operators(_op, _f)
    if _op.kind not in (Kind.UNARY, Kind.BINARY, Kind.COMPARE):
        _f = _on_either_device(_op, _f)
    for _name in (_op.name, *_op.aliases):
        NAMESPACES[_op.namespace][_name] = _f
del _op, _f, _name

# Python's // and divmod: a composite of rows (exact NumPy values, gradient 0), not a row
NAMESPACES["numpy"].update(floor_divide=floor_divide, divmod=divmod_)
# NumPy's other names of max and min: the same rows, errors naming the name called
_ROW = {op.name: op for op in ROWS}
NAMESPACES["numpy"].update(
    amax=_on_either_device(_ROW["max"], amax), amin=_on_either_device(_ROW["min"], amin)
)
Tensor.__floordiv__ = lambda self, other: floor_divide(self, other)
Tensor.__rfloordiv__ = lambda self, other: floor_divide(other, self)
Tensor.__divmod__ = lambda self, other: divmod_(self, other)
Tensor.__rdivmod__ = lambda self, other: divmod_(other, self)

# Tensor methods that are tapegrad.numpy's functions with the tensor first (t.exp(),
# t.sum(axis=0)), by name; their docstrings are generated (tapegrad.docgen)
MIRRORED: list[str] = []


def _install(name: str, method: Callable, signature: inspect.Signature | None = None) -> None:
    """``Tensor.<name> = method``, with its generated docstring (and ``signature``)."""
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__doc__ = DOCS.get(f"Tensor.{name}")
    if signature is not None:
        method.__signature__ = signature
    setattr(Tensor, name, method)
    MIRRORED.append(name)


def _as_method(fn: Callable) -> inspect.Signature:
    """``fn``'s signature with ``self`` for its first parameter."""
    sig = inspect.signature(fn)
    first, *rest = sig.parameters.values()
    return sig.replace(parameters=[first.replace(name="self"), *rest])


def _mirror(name: str, fn: Callable, signature: inspect.Signature | None = None) -> None:
    """``Tensor.<name>``: ``fn(self, ...)``, with fn's parameters."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    _install(name, method, signature or _as_method(fn))


# NumPy's loops over object arrays call a method named like the ufunc on each element
# (np.exp(np.array([t0, t1])) calls t0.exp()): the unary rows are also methods, as in
# PyTorch; real tensors are their own conjugate
_UNARY = None  # their common signature, (self, /, out=None)
for _op in ROWS:
    if _op.kind is Kind.UNARY and _op.namespace == "numpy" and not hasattr(Tensor, _op.name):
        _f = NAMESPACES["numpy"][_op.name]
        _UNARY = _UNARY or _as_method(_f)
        _mirror(_op.name, _f, _UNARY)
del _op, _f, _UNARY


def _conj(self: Tensor) -> Tensor:
    return self


def _conjugate(self: Tensor) -> Tensor:
    return self


_install("conj", _conj)
_install("conjugate", _conjugate)

install_views(NAMESPACES["numpy"])  # NumPy's view semantics for the public entry points

# error messages name tapegrad's function for the NumPy / SciPy one a user called
for _ns, _fns in NAMESPACES.items():
    for _name in _fns if _ns in DROPIN else ():
        EQUIVALENTS[f"{DROPIN[_ns]}.{_name}"] = f"tapegrad.{_ns}.{_name}"
del _ns, _fns, _name


def _install_methods() -> None:
    """NumPy's array methods (``t.sum()``, ``t.T``...) and in-place operators."""
    ns = NAMESPACES["numpy"]

    for name in (op.name for op in ROWS if op.method):  # declared on the rows
        _mirror(name, ns[name])

    def reshape(self: Tensor, *shape: Any) -> Tensor:
        return ns["reshape"](self, *shape)

    def transpose(self: Tensor, *axes: Any) -> Tensor:
        single = len(axes) == 1 and not isinstance(axes[0], int | np.integer)
        return ns["transpose"](self, axes[0] if single else (axes or None))

    def flatten(self: Tensor) -> Tensor:
        return reshape_copy(self, -1)  # a copy in NumPy: no view

    def copy(self: Tensor) -> Tensor:
        return reshape_copy(self, self.shape)  # a new handle, recorded

    for f in (reshape, transpose, flatten, copy):
        _install(f.__name__, f)

    def transposed(self: Tensor) -> Tensor:
        """The tensor with its axes reversed: ``tapegrad.numpy.transpose(t)``."""
        return ns["transpose"](self)

    transposed.__qualname__ = "Tensor.T"
    Tensor.T = property(transposed)
    Tensor.__pos__ = lambda self: self
    # round(t) as PyTorch's and NumPy's arrays: a tensor (recorded, gradient 0)
    Tensor.__round__ = lambda self, ndigits=None: ns["round"](self, ndigits or 0)

    def inplace(name: str | Callable, symbol: str) -> Any:
        fn = ns[name] if isinstance(name, str) else name

        def method(self: Tensor, other: Any) -> Tensor:
            def new_value() -> Tensor:
                result = fn(self, other)
                if result.shape != self.shape:
                    raise ValueError(
                        f"{symbol}: non-broadcastable output operand with shape "
                        f"{self.shape} doesn't match the broadcast shape "
                        f"{result.shape}"
                    )
                if not np.can_cast(result.dtype, self.dtype, "same_kind"):
                    raise TypeError(
                        f"{symbol}: cannot cast the result ({result.dtype}) to the "
                        f"tensor's dtype {self.dtype}"
                    )
                return result if result.dtype == self.dtype else result.astype(self.dtype)

            # (the version first, taken back if the operand is refused)
            write_in_place(self, symbol, new_value)
            return self

        return method

    for ufunc, symbol, dunder, rdunder in (
        (np.invert, "~", "__invert__", None),
        (np.bitwise_and, "&", "__and__", "__rand__"),
        (np.bitwise_or, "|", "__or__", "__ror__"),
        (np.bitwise_xor, "^", "__xor__", "__rxor__"),
    ):
        f = UFUNC_CALLS[ufunc] = _bitwise(ufunc, symbol)  # also np.invert(t), array & t
        setattr(Tensor, dunder, f)
        if rdunder:
            setattr(Tensor, rdunder, lambda self, other, f=f: f(other, self))
            # in place, as NumPy's (and +=): a view or another name of the mask sees it
            setattr(Tensor, f"__i{dunder[2:]}", inplace(f, f"{symbol}="))

    for dunder, name, symbol in (
        ("__iadd__", "add", "+="),
        ("__isub__", "subtract", "-="),
        ("__imul__", "multiply", "*="),
        ("__itruediv__", "true_divide", "/="),
        ("__ipow__", "power", "**="),
        ("__imatmul__", "matmul", "@="),
        ("__ifloordiv__", "floor_divide", "//="),
        ("__imod__", "remainder", "%="),
    ):
        setattr(Tensor, dunder, inplace(name, symbol))


def _bitwise(ufunc: np.ufunc, symbol: str) -> Callable:
    """Operator ``symbol`` (``~ & | ^``) on tensors: NumPy's ``ufunc`` on the values of
    bool or integer tensors (masks: ``t[~(t > 0)]``, ``(t > 0) & (t < 1)``), a constant
    tensor as ``tnp.logical_not`` gives. tapegrad's integer and bool tensors never
    require grad, so nothing leaves a graph; NumPy defines these operators for no float
    dtype, and a float operand is refused with the operands' shapes and dtypes."""

    def apply(*operands: Any) -> Any:
        values = [v._value() if isinstance(v, Tensor) else np.asarray(v) for v in operands]
        if any(v.dtype.kind not in "biu" for v in values):
            found = " and ".join(f"{v.shape} {v.dtype}" for v in values)
            raise TypeError(
                f"{symbol} on tensors ({ufunc.__name__}): operands {found}; NumPy defines it "
                "for bool and integer values only (a mask of a float tensor is a "
                "comparison, such as t > 0)"
            )
        return recording.as_tensor(ufunc(*values))

    apply.__name__ = apply.__qualname__ = ufunc.__name__
    return apply


_install_methods()


# --- the rest of Tensor's surface: NumPy's protocols and autograd ---------------------------


def __array_ufunc__(self: Tensor, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """NumPy's ufunc protocol: ``np.sin(t)``, ``ndarray + t``... record tapegrad's ops."""
    if method == "__call__" and not kwargs:  # the common case, found before
        f = UFUNC_CALLS.get(ufunc)
        if f is not None:
            return f(*inputs)
    return array_ufunc(ufunc, method, inputs, kwargs)


def __array_function__(self: Tensor, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    """NumPy's function protocol: ``np.sum(t)``... record tapegrad's ops."""
    return array_function(func, args, kwargs)


def backward(
    self: Tensor, gradient: Any = None, retain_graph: bool = False, create_graph: bool = False
) -> None:
    """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad.

    One compiled pass over the tape, from this tensor back to the leaves; gradients
    are added to what ``.grad`` already holds (set it to None to start afresh).
    Non-leaf tensors keep no ``.grad`` unless :meth:`retain_grad` asked for it.

    Parameters
    ----------
    gradient : array_like or Tensor, optional
        The cotangent (same shape as ``self``); required unless ``self`` has one
        element, where it defaults to 1.
    retain_graph : bool, optional
        Keep the graph so ``backward`` can run through it again; by default its
        saved values are freed and a second backward raises.
    create_graph : bool, optional
        Record the backward pass as ops, so that the gradients are themselves
        differentiable: ``.grad`` then holds tensors in the graph (PyTorch's double
        backward). The graph is kept, whatever ``retain_graph`` says.

    Raises
    ------
    RuntimeError
        This tensor does not require grad; ``gradient`` is missing for a tensor of
        more than one element, or has another shape; the graph was freed by an
        earlier backward pass (pass ``retain_graph=True`` to the first); a saved
        value was changed in place since it was recorded; or it is called inside a
        function that ``tg.compile`` captures, or inside a hook of a running
        backward pass.
    TypeError
        ``gradient`` is not of a real dtype.
    NotImplementedError
        With ``create_graph=True``: the graph holds a node whose backward is not
        recorded (a custom :class:`Function` with a NumPy or compiled backward, an
        ODE solve).

    See Also
    --------
    tapegrad.grad : Gradients of a function, without touching ``.grad``.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> tnp.sum(x ** 2).backward()
    >>> x.grad
    array([2., 4.])
    >>> x.grad = None
    >>> (x * 3.0).backward(gradient=np.array([1.0, -1.0]))
    >>> x.grad
    array([ 3., -3.])

    With ``create_graph=True`` the gradient is a tensor that can be differentiated
    again:

    >>> x.grad = None
    >>> tnp.sum(x ** 3).backward(create_graph=True)
    >>> x.grad
    tensor([ 3., 12.], requires_grad=True)
    """
    if create_graph:
        engine.backward_graph(self, gradient)
        return
    engine.backward(self, gradient, retain_graph)


def register_hook(self: Tensor, hook: Callable[[Any], Any]) -> Any:
    """Call ``hook(grad)`` when this tensor's gradient has been computed.

    The hook runs before the gradient flows on or, for a leaf, before it is added to
    ``.grad``, with grad mode off; a returned array replaces the gradient, None keeps
    it.

    Parameters
    ----------
    hook : callable
        ``hook(grad) -> array or None``; ``grad`` is a NumPy array (a copy) of this
        tensor's shape.

    Returns
    -------
    RemovableHandle
        Its ``remove()`` unregisters the hook.

    Raises
    ------
    RuntimeError
        This tensor does not require grad; or, in a backward pass, the hook returned
        an array of another shape.
    TypeError
        In a backward pass: the hook returned something that is not real numbers.

    See Also
    --------
    Tensor.register_post_accumulate_grad_hook : After ``.grad`` of a leaf is updated.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> handle = x.register_hook(lambda g: 10.0 * g)
    >>> tnp.sum(x * 1.0).backward()
    >>> x.grad
    array([10., 10.])
    >>> handle.remove()
    """
    return engine.register_hook(self, hook)


def register_post_accumulate_grad_hook(self: Tensor, hook: Callable[[Tensor], Any]) -> Any:
    """Call ``hook(tensor)`` after a backward pass has added to this leaf's ``.grad``.

    Where an optimiser can step a parameter as soon as its gradient is complete.

    Parameters
    ----------
    hook : callable
        ``hook(tensor)``; its return value is ignored.

    Returns
    -------
    RemovableHandle
        Its ``remove()`` unregisters the hook.

    Raises
    ------
    RuntimeError
        This tensor is not a leaf that requires grad.

    See Also
    --------
    Tensor.register_hook : Read or replace a gradient before it is used.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> w = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> seen = []
    >>> handle = w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.copy()))
    >>> tnp.sum(3.0 * w).backward()
    >>> seen
    [array([3., 3.])]
    >>> handle.remove()
    """
    return engine.register_post_accumulate_grad_hook(self, hook)


def retain_grad(self: Tensor) -> None:
    """Populate ``.grad`` of this non-leaf tensor in backward passes.

    Its gradient is then accumulated into ``.grad`` as a leaf's is (after its other
    hooks ran). On a leaf it does nothing: a leaf keeps its gradient anyway.

    Raises
    ------
    RuntimeError
        This tensor does not require grad.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> y = 2.0 * x
    >>> y.retain_grad()
    >>> tnp.sum(y ** 2).backward()
    >>> y.grad, x.grad
    (array([4., 8.]), array([ 8., 16.]))
    """
    engine.retain_grad(self)


def _grad_fn(self: Tensor) -> Any:
    """The node that made this tensor, as a read-only view (``name``, ``next_functions``,
    ``metadata``, ``saved()``, ``functional()``); None for a leaf or a tensor that does
    not require grad. See :mod:`tapegrad.graph`."""
    return _graph.grad_fn(self)


Tensor.grad_fn = property(_grad_fn)
Tensor.output_nr = property(_graph.output_nr, doc="Which output of its grad_fn it is.")


for _method in (
    __array_ufunc__,
    __array_function__,
    backward,
    register_hook,
    register_post_accumulate_grad_hook,
    retain_grad,
):
    _method.__qualname__ = f"Tensor.{_method.__name__}"
    setattr(Tensor, _method.__name__, _method)
del _method
