"""``tg.vmap``: a function written for one example, run on a batch.

``vmap(f)(x)`` calls ``f`` once, on :class:`Batched` values: each holds a tensor whose
axis 0 is the batch and shows ``f`` the shape of one example. Every op that meets one
routes (as to a device target: :func:`tapegrad.devices.register_tracer`) to its row's
*batching rule* (``tapegrad.ops.<family>.batching``), which records the op once on the
whole batch: an elementwise op aligns the batch axis and broadcasts, a reduction shifts
its axes, a matrix product stacks. What is recorded is ordinary tapegrad ops on
ordinary tensors, so ``tg.grad`` of a vmapped function, ``tg.compile`` of one and
checkpoints see one graph. A row without a rule runs once per example and its results
are stacked (a loop, recorded too), with a warning naming the row once.

Nesting (``vmap(vmap(f))``) gives each vmap a *level*: a batched value's tensor may be a
batched value of an outer vmap, and a rule handles the values of its own level, taking
the others (lower levels) as unbatched operands whose own ops route again. This is
JAX's batching interpreter (``jax.vmap``); ``in_axes`` and ``out_axes`` are JAX's.

Transforms inside a vmap (``vmap(grad(f))``, per-example gradients) differentiate the
sum over the batch with respect to per-example copies of the arguments: the examples
are independent, so each copy's gradient is that example's (``tapegrad.transforms``
asks :func:`per_example` for it).

A Python branch or conversion on a batched value (``if x > 0``, ``float(x)``) would
take one branch for the whole batch: it raises :class:`BatchingError`, as JAX's and
``torch.func``'s do.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import devices, recording
from .numpy_protocols import array_function, array_ufunc
from .ops import ROWS, Kind
from .ops.linalg import batching as linalg_rules
from .ops.reduce import batching as reduce_rules
from .ops.shape import batching as shape_rules
from .pytree import flatten
from .surface import MIRRORED, NAMESPACES
from .tensors import Tensor
from .transforms import IN_VMAP, argnums_of
from .transforms import value_and_grad as transforms_value_and_grad

__all__ = ["Batched", "BatchingError", "vmap"]

NP = NAMESPACES["numpy"]
LINALG = NAMESPACES["numpy.linalg"]


class BatchingError(ValueError):
    """A value that differs across a vmap's batch was used as one Python value (a
    branch, ``float()``, ``.item()``, ``np.asarray``), or an op cannot be batched."""


class Batched:
    """A batch of values seen as one example (``tg.vmap``'s stand-in for a tensor).

    ``value`` holds the batch on axis 0 (a tensor, an array, or a batched value of an
    outer vmap); ``shape``, ``ndim`` and ``dtype`` are one example's.
    """

    __slots__ = ("level", "n", "value")
    __array_priority__ = 1000.0  # NumPy's binary operators defer to ours

    def __init__(self, value: Any, level: int, n: int) -> None:
        self.value, self.level, self.n = value, level, n

    # --- one example's view ---------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.value.shape) - 1

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def requires_grad(self) -> bool:
        return bool(getattr(self.value, "requires_grad", False))

    @property
    def T(self) -> Batched:
        return NP["transpose"](self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d batched value (one example is a scalar)")
        return self.shape[0]

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key: Any) -> Any:
        return NP["getitem"](self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise BatchingError(
            "tg.vmap: assigning into a batched value in place (x[i] = v) is not "
            "supported; build the new value with tnp.where or tnp.concatenate"
        )

    def __repr__(self) -> str:
        return (
            f"Batched(level={self.level}, batch={self.n}, shape={self.shape}, dtype={self.dtype})"
        )

    # --- what a batch cannot be -----------------------------------------------------
    def _one_value(self, what: str) -> Any:
        raise BatchingError(
            f"tg.vmap: {what} of a batched value (one example's shape {self.shape}): its "
            "value differs across the batch, so one Python value (a branch, a number, an "
            "array) cannot stand for it. Use tnp.where for a branch, or compute it "
            "outside the vmapped function"
        )

    def __bool__(self) -> bool:
        return self._one_value("bool()")

    def __float__(self) -> float:
        return self._one_value("float()")

    def __int__(self) -> int:
        return self._one_value("int()")

    def __index__(self) -> int:
        return self._one_value("an index from")

    def __complex__(self) -> complex:
        return self._one_value("complex()")

    def item(self) -> Any:
        return self._one_value(".item()")

    def tolist(self) -> Any:
        return self._one_value(".tolist()")

    def numpy(self) -> Any:
        return self._one_value(".numpy()")

    def _value(self) -> Any:
        return self._one_value("the NumPy value")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._one_value("np.asarray()")

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kw: Any) -> Any:
        return array_ufunc(ufunc, method, inputs, kw)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        name = getattr(func, "__name__", "")
        if name in ("shape", "ndim", "size") and len(args) == 1 and not kwargs:
            return getattr(self, name)  # one example's
        if id(NP.get(name)) in ROW_FUNCTIONS:  # a row: its batching rule
            return array_function(func, args, kwargs)
        # any other NumPy function: once per example, on tensors (their own protocols)
        level, n = level_of((args, kwargs))
        return loop(f"numpy.{name}", func, args, kwargs, level, n)

    # --- methods: tapegrad.numpy's functions with the value first -----------------
    def reshape(self, *shape: Any) -> Any:
        return NP["reshape"](self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes: Any) -> Any:
        single = len(axes) == 1 and not isinstance(axes[0], int | np.integer)
        return NP["transpose"](self, axes[0] if single else (axes or None))

    def flatten(self) -> Any:
        return NP["reshape"](self, -1)

    def astype(self, dtype: Any) -> Any:
        return NP["astype"](self, dtype)

    def conj(self) -> Batched:
        return self

    conjugate = conj


def _looped(name: str, *args: Any) -> Any:
    """A function without a batching rule, once per example (``//``: floor_divide)."""
    level, n = level_of(args)
    return loop(name, NP[name], args, {}, level, n)


def _method(fn: Callable) -> Callable:
    def method(self: Batched, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    return method


for _name in MIRRORED:
    if _name in NP and not hasattr(Batched, _name):
        setattr(Batched, _name, _method(NP[_name]))
for _op in ROWS:
    _names = _op.dunder
    if not _names:
        continue
    _f = NP.get(_op.name) or NAMESPACES[_op.namespace].get(_op.name)
    if _names[0] in Batched.__dict__:  # (x[i] = v is refused above)
        continue
    setattr(Batched, _names[0], _method(_f))
    if len(_names) > 1 and _names[1]:
        setattr(Batched, _names[1], lambda self, other, f=_f: f(other, self))
Batched.__floordiv__ = lambda self, other: _looped("floor_divide", self, other)
Batched.__rfloordiv__ = lambda self, other: _looped("floor_divide", other, self)
Batched.__pos__ = lambda self: self
Batched.__hash__ = None  # (== is elementwise)
del _name, _op, _names, _f


# --- levels: one per active vmap, innermost highest ------------------------------------
_state = threading.local()


def _depth() -> int:
    return getattr(_state, "depth", 0)


def _sizes() -> list[int]:
    """The batch sizes of the active vmaps, outermost first."""
    sizes = getattr(_state, "sizes", None)
    if sizes is None:
        sizes = _state.sizes = []
    return sizes


def level_of(args: Any) -> tuple[int, int]:
    """The highest level among the batched values in ``args`` (nested lists, tuples and
    dicts too) and its batch size; ``(0, 0)`` when there is none."""
    found = [0, 0]

    def visit(obj: Any) -> None:
        if isinstance(obj, Batched):
            if obj.level > found[0]:
                found[0], found[1] = obj.level, obj.n
        elif isinstance(obj, list | tuple):
            for o in obj:
                visit(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                visit(o)

    visit(args)
    return found[0], found[1]


def at(x: Any, level: int) -> bool:
    """Whether ``x`` is batched at ``level``."""
    return isinstance(x, Batched) and x.level == level


def ndim(x: Any) -> int:
    """One example's number of axes (a batched value's), or a value's own."""
    if isinstance(x, Batched | Tensor | np.ndarray):
        return x.ndim
    return np.ndim(x)


def shape(x: Any) -> tuple[int, ...]:
    if isinstance(x, Batched | Tensor | np.ndarray):
        return tuple(x.shape)
    return np.shape(x)


def aligned(x: Any, level: int, rank: int) -> Any:
    """``x``'s batch (axis 0) with unit axes after it, for ``rank`` example axes: the
    operand of a broadcasting op whose other operands are unbatched or aligned too."""
    if not at(x, level):
        return x
    v = x.value
    missing = rank - x.ndim
    return v if missing <= 0 else NP["reshape"](v, (x.n, *(1,) * missing, *x.shape))


def materialized(x: Any, n: int) -> Any:
    """An unbatched value repeated along a new batch axis (``n`` copies)."""
    return NP["broadcast_to"](x, (n, *shape(x)))


def moved(v: Any, source: int, destination: int) -> Any:
    return v if source == destination else NP["moveaxis"](v, source, destination)


# --- routing ------------------------------------------------------------------------
_warned: set[str] = set()


def loop(
    name: str, fn: Callable, args: tuple, kwargs: dict, level: int, n: int,
    per_example: bool = False,
) -> Any:  # fmt: skip
    """``fn`` once per example (the batched values of ``level`` sliced, the rest as they
    are), the results stacked on a new axis 0: the rule of a row that has none (warned
    once), or of a function whose examples must run apart (``per_example``: an ODE
    solve, each with its own adaptive steps)."""
    if name not in _warned and not per_example:
        _warned.add(name)
        warnings.warn(
            f"tg.vmap: {name} has no batching rule (for these arguments); it runs once per "
            "example (a loop)",
            RuntimeWarning,
            stacklevel=4,
        )

    def example(b: int) -> tuple:
        leaves, rebuild = flatten((args, kwargs))
        return rebuild([leaf.value[b] if at(leaf, level) else leaf for leaf in leaves])

    outs = []
    for b in range(n):
        a, k = example(b)
        outs.append(fn(*a, **k))
    return stacked(outs, level, n)


def stacked(outs: list, level: int, n: int) -> Any:
    """Per-example results (tensors, or tuples and lists of them) as batched values."""
    first = outs[0]
    if isinstance(first, tuple | list):
        parts = [stacked([o[i] for o in outs], level, n) for i in range(len(first))]
        return type(first)(parts) if not hasattr(first, "_fields") else type(first)(*parts)
    if first is None:
        return None
    return Batched(NP["stack"](outs), level, n)


class _Tracer:
    """The entry points the ops route to (``tapegrad.devices.Device``)."""

    name = "vmap"

    @staticmethod
    def elementwise(op: Any, x: Any, y: Any = None) -> Batched:
        level, n = level_of((x, y))
        if op.is_unary:
            return Batched(op.front(x.value), level, n)
        rank = max(ndim(x), ndim(y))
        return Batched(op.front(aligned(x, level, rank), aligned(y, level, rank)), level, n)

    @staticmethod
    def function(op: Any) -> Callable:
        name = op.name
        public = NAMESPACES[op.namespace][name]

        def batched(*args: Any, **kwargs: Any) -> Any:
            level, n = level_of((args, kwargs))
            rule = RULES.get(name)
            if rule is not None:
                out = rule(level, n, *args, **kwargs)
                if out is not NotImplemented:
                    return out
            elif op.kind is Kind.COMPOSITE and name not in LOOPED:
                # a composition of rows: run it on the batched values, each row routing;
                # one that reads a value or calls a front end directly cannot: a loop
                try:
                    return public.__wrapped__(*args, **kwargs)
                except BatchingError:
                    LOOPED.add(name)
            return loop(name, public, args, kwargs, level, n)

        return batched


def _no_device(*args: Any, **kwargs: Any) -> Any:
    raise TypeError("tg.vmap's batched values live inside a vmapped function only")


_active: list[bool] = []


def _activate() -> None:
    """Route ops to the batching rules from the first vmap on (until then, the ops'
    hot paths check for no tracer type at all)."""
    if _active and Batched in recording.DEVICE_TYPES:
        return
    if not _active:
        _active.append(True)
        devices.register_tracer(
            devices.Device(
                name="vmap",
                tensor_type=Batched,
                to_device=_no_device,
                elementwise=_Tracer.elementwise,
                function=_Tracer.function,
            )
        )
    else:  # (the tests run most of themselves without tracer or device types)
        recording.DEVICE_TYPES = devices.TYPES


# row name -> rule(level, n, *args, **kwargs): the batched result, or NotImplemented
# for a call the rule does not cover (the loop then runs it); filled by the families
RULES: dict[str, Callable] = {}
# composite rows found unable to run on batched values (they read a value, or call a
# front end directly): a loop from then on
LOOPED: set[str] = set()
# the rows that run once per example, and why (tests/test_vmap.py keeps it complete)
FALLBACK: dict[str, str] = {
    "scatter_add": "tapegrad's own (a gather's transpose); vmap records gathers instead",
    "convolve": "NumPy's convolve is 1-D only: one convolution per example",
    "solve_triangular": "SciPy's takes one matrix (no stacks)",
    "lu_factor": "SciPy's takes one matrix (no stacks)",
    "deg2rad": "its front end makes one tensor of its argument before its rows",
    "sinc": "its front end makes one tensor of its argument before its rows",
    "multigammaln": "its front end makes one tensor of its argument before its rows",
}


# --- vmap ---------------------------------------------------------------------------
def _axes_for(tree: Any, axes: Any, what: str) -> list:
    """One axis (or None) per leaf of ``tree``, ``axes`` being a prefix of its
    structure (JAX's rule for ``in_axes`` and ``out_axes``)."""
    if axes is None or isinstance(axes, int | np.integer):
        return [axes] * len(flatten(tree)[0])
    if isinstance(axes, list | tuple) and isinstance(tree, list | tuple):
        if len(axes) != len(tree):
            raise ValueError(
                f"tg.vmap: {what} has {len(axes)} entries for {len(tree)} values; give one "
                "per argument (or one int or None for all)"
            )
        return [a for sub, ax in zip(tree, axes) for a in _axes_for(sub, ax, what)]
    if isinstance(axes, dict) and isinstance(tree, dict):
        if set(axes) != set(tree):
            raise ValueError(f"tg.vmap: {what} has keys {sorted(axes)}, the value {sorted(tree)}")
        return [a for k in tree for a in _axes_for(tree[k], axes[k], what)]
    raise ValueError(
        f"tg.vmap: {what} {axes!r} does not match the structure of the values "
        f"({type(tree).__name__}); use an int, None, or a tuple/list/dict like them"
    )


def _check_axis(axis: int, nd: int, what: str) -> int:
    if not -nd <= axis < nd:
        raise ValueError(f"tg.vmap: {what} {axis} is out of range for a value with {nd} axes")
    return axis % nd


def vmap(
    f: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None
) -> Callable:
    """Vectorize ``f`` over a batch axis of its arguments (``jax.vmap``'s semantics).

    ``f`` is written for one example; the vmapped function takes a batch and runs ``f``
    once on it, each op recorded once on the whole batch by its row's batching rule.

    Parameters
    ----------
    f : callable
        Function of tensors and arrays (and pytrees of them: lists, tuples, dicts).
    in_axes : int, None or pytree, optional
        For each argument, the axis that holds the batch, or None for an argument shared
        by every example; a tuple with one entry per argument (each entry an int, None or
        a pytree prefix of that argument), or one int or None for all.
    out_axes : int, None or pytree, optional
        Where the batch axis goes in each output; None for an output that does not depend
        on the batch (an error if it does).
    axis_size : int, optional
        The batch size when no argument is batched.

    Returns
    -------
    callable
        The batched function; its outputs are tensors where an input requires grad or is
        a tensor, else arrays, as ``f``'s are.

    Raises
    ------
    ValueError
        ``in_axes`` or ``out_axes`` do not match the arguments or outputs; batched
        arguments of different batch sizes; no batched argument and no ``axis_size``; an
        output with ``out_axes`` None that depends on the batch.
    BatchingError
        ``f`` branches on or converts a batched value (``if x > 0``, ``float(x)``).

    See Also
    --------
    grad, jacobian

    Notes
    -----
    Rows without a batching rule run once per example and warn once; the docs' Batching
    section lists them. Composites of rows batch through their rows.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> W = np.arange(6.0).reshape(3, 2)
    >>> tg.vmap(lambda x: tnp.tanh(x @ W))(np.ones((4, 3))).shape
    (4, 2)
    >>> tg.vmap(lambda a, b: a * b, in_axes=(0, None))(np.arange(3.0), 2.0)
    array([0., 2., 4.])
    """
    if not callable(f):
        raise TypeError(f"tg.vmap: f must be callable, got {type(f).__name__}")

    @functools.wraps(f)
    def batched(*args: Any) -> Any:
        _activate()
        axes = in_axes if isinstance(in_axes, list | tuple) else (in_axes,) * len(args)
        if isinstance(in_axes, list | tuple) and len(in_axes) != len(args):
            raise ValueError(
                f"tg.vmap: in_axes has {len(in_axes)} entries for {len(args)} arguments"
            )
        leaves, rebuild = flatten(args)
        leaf_axes = _axes_for(args, tuple(axes), "in_axes")
        sizes = {}
        for leaf, ax in zip(leaves, leaf_axes):
            if ax is None:
                continue
            nd = ndim(leaf)
            if nd == 0:
                raise ValueError(
                    f"tg.vmap: in_axes {ax} for a scalar argument; use None for values "
                    "shared by every example"
                )
            sizes.setdefault(shape(leaf)[_check_axis(ax, nd, "in_axes")], []).append(leaf)
        if len(sizes) > 1:
            raise ValueError(
                f"tg.vmap: the batched arguments have different batch sizes {sorted(sizes)}"
            )
        n = next(iter(sizes)) if sizes else axis_size
        if sizes and axis_size is not None and axis_size != n:
            raise ValueError(
                f"tg.vmap: axis_size {axis_size} but the batched arguments have {n} examples"
            )
        if n is None:
            raise ValueError("tg.vmap: no argument is batched (in_axes all None); give axis_size")
        level = _depth() + 1
        sizes = _sizes()
        wrapped = [
            leaf
            if ax is None
            else Batched(
                moved(_as_value(leaf), _check_axis(ax, ndim(leaf), "in_axes"), 0), level, n
            )
            for leaf, ax in zip(leaves, leaf_axes)
        ]
        _state.depth = level
        sizes.append(n)
        try:
            out = f(*rebuild(wrapped))
        finally:
            _state.depth = level - 1
            sizes.pop()
        plain = not any(isinstance(leaf, Tensor | Batched) for leaf in leaves)
        return _unbatched(out, out_axes, level, n, plain)

    return batched


def _as_value(leaf: Any) -> Any:
    """An argument as the batch's value: tensors and batched values as they are, others
    as NumPy arrays (lists of numbers, scalars)."""
    if isinstance(leaf, Tensor | Batched | np.ndarray):
        return leaf
    return np.asarray(leaf)


def _unbatched(out: Any, out_axes: Any, level: int, n: int, plain: bool) -> Any:
    leaves, rebuild = flatten(out)
    leaf_axes = _axes_for(out, out_axes, "out_axes")
    done = []
    for leaf, ax in zip(leaves, leaf_axes):
        if ax is None:
            if level_of(leaf)[0] >= level:
                raise ValueError("tg.vmap: out_axes None for an output that depends on the batch")
            done.append(leaf)
            continue
        if at(leaf, level):
            v = leaf.value
        else:
            v = materialized(_as_value(leaf), n)  # the same for every example
        nd = ndim(v)
        v = moved(v, 0, _check_axis(ax, nd, "out_axes"))
        if plain and isinstance(v, Tensor) and not v.requires_grad:
            v = v.numpy()  # plain arguments, plain results (as f's own would be)
        done.append(v)
    return rebuild(done)


# --- transforms inside a vmap ----------------------------------------------------------
class _Transforms:
    """What ``tapegrad.transforms`` asks of tg.vmap (``transforms.IN_VMAP``)."""

    @staticmethod
    def active() -> bool:
        return _depth() > 0

    @staticmethod
    def refuse(name: str) -> None:
        raise NotImplementedError(
            f"{name} inside tg.vmap is not supported yet; tg.grad and tg.value_and_grad "
            f"are (per-example gradients). Call {name} outside the vmapped function, or "
            "loop over the examples"
        )

    @staticmethod
    def value_and_grad(f: Callable, args: tuple, kwargs: dict, argnums: Any, aux: bool) -> Any:
        return _value_and_grad(f, args, kwargs, argnums, aux)


def _value_and_grad(f: Callable, args: tuple, kwargs: dict, argnums: Any, has_aux: bool):
    """``value_and_grad(f)`` inside the innermost vmap: the gradient of the sum over the
    batch with respect to per-example copies of the differentiated arguments (an
    unbatched one repeated), which is each example's gradient (the examples are
    independent). Computed by ``value_and_grad`` one level out (0: plain), so nested
    vmaps and transforms inside ``f`` each see their own level."""
    level, sizes = _depth(), _sizes()
    n = sizes[-1]
    nums, single = argnums_of(argnums, len(args), "value_and_grad")
    args = list(args)
    for a in nums:
        leaves, rebuild = flatten(args[a])
        args[a] = rebuild(
            [leaf.value if at(leaf, level) else materialized(_as_value(leaf), n) for leaf in leaves]
        )

    def summed(*values: Any, **kw: Any) -> Any:
        call = list(values)
        for a in nums:
            leaves, rebuild = flatten(call[a])
            call[a] = rebuild([Batched(v, level, n) for v in leaves])
        _state.depth = level
        sizes.append(n)
        try:
            out = f(*call, **kw)
        finally:
            _state.depth = level - 1
            sizes.pop()
        out, user_aux = out if has_aux else (out, None)
        if ndim(out) != 0:
            raise TypeError(
                f"value_and_grad inside tg.vmap: f must return one number per example, got "
                f"shape {shape(out)}"
            )
        per = out.value if at(out, level) else materialized(out, n)
        if not has_aux:
            return NP["sum"](per), (per, None)
        aux_leaves, aux_rebuild = flatten(user_aux)
        aux_values = [  # each example's aux (one that does not depend on it, repeated)
            x.value if at(x, level) else materialized(_as_value(x), n) for x in aux_leaves
        ]
        return NP["sum"](per), (per, aux_rebuild(aux_values))

    _state.depth = level - 1
    sizes.pop()
    try:
        (_, (per, user_aux)), grads = transforms_value_and_grad(summed, nums, has_aux=True)(
            *args, **kwargs
        )
    finally:
        _state.depth = level
        sizes.append(n)
    if has_aux:
        aux_leaves, aux_rebuild = flatten(user_aux)
        user_aux = aux_rebuild([Batched(x, level, n) for x in aux_leaves])
    value = Batched(per, level, n)
    out = []
    for g in grads:
        leaves, rebuild = flatten(g)
        out.append(rebuild([Batched(v, level, n) for v in leaves]))
    result = out[0] if single else tuple(out)
    return ((value, user_aux) if has_aux else value), result


IN_VMAP.append(_Transforms)


# --- rules the families share --------------------------------------------------------
def shifted(axis: Any, nd: int, name: str) -> Any:
    """One example's axis (an int or a tuple of them) as the batch's: 0 and up move past
    the batch axis; negative ones count from the end, where nothing moved."""
    if isinstance(axis, tuple | list):
        return tuple(shifted(a, nd, name) for a in axis)
    a = int(axis)
    if not -nd <= a < nd:  # (a 0-d example has no axis: -1 would be the batch's)
        raise np.exceptions.AxisError(
            f"{name}: axis {a} is out of bounds for array of dimension {nd}"
        )
    return a + 1 if a >= 0 else a


ROW_NAMESPACE = {op.name: op.namespace for op in ROWS}
# the published functions of the rows (and NumPy's other names of max and min)
ROW_FUNCTIONS = {id(NAMESPACES[op.namespace][op.name]) for op in ROWS} | {
    id(NP["amax"]),
    id(NP["amin"]),
}


def public(name: str) -> Callable:
    """Row ``name``'s published function."""
    return NAMESPACES[ROW_NAMESPACE[name]][name]


def axis_rule(
    name: str, pos: int = 1, none: str = "all", default: Any = None, keyword: str = "axis"
) -> Callable:
    """The rule of a row that works along ``axis`` (argument ``pos`` or the keyword) of
    its first argument, batched: the axis shifted past the batch. ``axis=None`` is
    every axis (``none="all"``) or the flattened example (``"flatten"``)."""

    def rule(level: int, n: int, *args: Any, **kwargs: Any) -> Any:
        x = args[0]
        if not at(x, level) or level_of((args[1:], kwargs))[0] >= level:
            return NotImplemented
        args = list(args)
        if keyword in kwargs:
            axis = kwargs[keyword]
        elif len(args) > pos:
            axis = args[pos]
        else:
            axis = default
        value = x.value
        keep = bool(kwargs.get("keepdims", False))
        if axis is None:
            if none == "all":
                new = tuple(range(1, x.ndim + 1))
            else:  # the example flattened, then along its one axis
                value = NP["reshape"](value, (n, -1))
                new = 1
        else:
            new = shifted(axis, x.ndim, name)
        if keyword in kwargs or len(args) <= pos:
            kwargs[keyword] = new
        else:
            args[pos] = new
        out = public(name)(value, *args[1:], **kwargs)
        if axis is None and none == "flatten" and keep:
            out = NP["reshape"](out, (n, *(1,) * x.ndim))
        return stacked_result(out, level, n)

    return rule


def stacked_result(out: Any, level: int, n: int) -> Any:
    """A batched op's result(s) (batch on axis 0) as batched values."""
    if isinstance(out, tuple | list):
        parts = [stacked_result(o, level, n) for o in out]
        return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)
    return Batched(out, level, n)


def each_batched(level: int, n: int, operands: Sequence[Any]) -> list:
    """The operands' batches (an unbatched one repeated ``n`` times)."""
    return [x.value if at(x, level) else materialized(x, n) for x in operands]


def stack_rule(name: str, matrices: int = 1) -> Callable:
    """The rule of a row over stacks of matrices (NumPy's ``linalg``): the batch is one
    more stack axis. The first ``matrices`` arguments must be at least 2-D."""

    def rule(level: int, n: int, *args: Any, **kwargs: Any) -> Any:
        operands = args[:matrices]
        if level_of((args[matrices:], kwargs))[0] >= level:
            return NotImplemented
        if any(ndim(a) < 2 for a in operands):
            return NotImplemented
        values = each_batched(level, n, operands) if matrices > 1 else [operands[0].value]
        out = public(name)(*values, *args[matrices:], **kwargs)
        return stacked_result(out, level, n)

    return rule


# the families' rules (``tapegrad.ops.<family>.batching``), given this module's helpers
for _family in (reduce_rules, shape_rules, linalg_rules):
    RULES.update(_family.rules(sys.modules[__name__]))
del _family
