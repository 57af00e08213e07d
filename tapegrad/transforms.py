"""Function transforms with HIPS autograd's and JAX's spelling: ``grad``,
``value_and_grad``, ``vjp``, ``jacobian``.

Arguments may be NumPy arrays, Python numbers, tensors, or nested lists / tuples / dicts
of them ("pytrees"); gradients come back as NumPy arrays in the same structure. Each call
records ``f`` once on fresh leaf tensors and runs one backward pass per requested
cotangent (``jacobian``: one per output element).

A transform has two modes:

* **plain** (its arguments are values, at top level): it records on a tape of its own
  (``tape.enter``), with grad mode on even under an outer ``no_grad``, computes
  gradients with respect to its arguments by the compiled scheduler and changes no
  ``.grad`` (``engine.gradients``, PyTorch's ``torch.autograd.grad``). It may run
  inside a hook, a custom ``backward`` or a capture and never touches their tapes. Its
  results are NumPy values, so a result that depends on a tensor from outside that
  requires grad (a closure) raises: the values could not carry that dependence;
* **recorded** (grad mode on and an argument requires grad, or inside another
  transform's function): it records on the caller's tape and returns tensors in the
  caller's graph (see "recorded mode" below), so transforms compose to any order.

Inside ``f``, ``float()`` and ``.item()`` of a tensor that requires grad raise (see
``tapegrad.boundary``). Forward mode and second order are in :mod:`tapegrad.forward_mode`.

``value_and_grad(f)`` plugs straight into ``scipy.optimize.minimize(fun, x0, jac=True)``:
it returns ``(float, ndarray)``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .engine import gradients, graph_gradients
from .grad_mode import is_grad_enabled
from .handles import graph_freed, home_of, mark_differentiated
from .layout import DTYPE_CODE
from .ops.reduce.front import sum as rsum
from .ops.shape.front import reshape, stack
from .ops.shape.rows import RESHAPE
from .pytree import flatten
from .recording import as_tensor, general, tensor
from .tape import TRANSFORM, Tape, current_tape, enter, leave
from .tensors import (
    FLAG_DIFF,
    FLAG_RG,
    FLOAT_DTYPES,
    FREED_MESSAGE,
    Tensor,
    bind,
    bind_leaf,
    scalar_value,
    serial,
    values_of,
)


def _first(leaves: list) -> Any:
    return leaves[0]


__all__ = ["grad", "jacobian", "jacrev", "value_and_grad", "vjp"]


def _check_float(dtype: np.dtype, where: str) -> None:
    if dtype.kind not in "fiub":
        raise TypeError(f"{where}: cannot differentiate with respect to {dtype} values")
    if dtype.kind != "f":
        raise TypeError(
            f"{where}: differentiating with respect to integer or bool values "
            f"({dtype}) is not defined; pass floats"
        )


def _float_values(value: Any, where: str) -> np.ndarray:
    """The values of a differentiated argument, which must be floats."""
    arr = np.asarray(value._value() if isinstance(value, Tensor) else value)
    _check_float(arr.dtype, where)
    return arr


def _leaf_tensor(value: Any, where: str) -> Tensor:
    t = tensor(_float_values(value, where), requires_grad=True)
    mark_differentiated(t, True)  # refused on other tapes while f runs
    return t


def _gradient_like(g: np.ndarray | None, t: Tensor, original: Any) -> Any:
    if g is None:
        g = np.zeros(t.shape, t.dtype)
    if isinstance(original, float | int) and not isinstance(original, bool):
        return g.dtype.type(g)  # a NumPy scalar for a Python number
    return g


# A transform called inside tg.vmap differentiates per example; tapegrad.batching puts
# its handler here when the first vmap runs (``IN_VMAP[0].active()`` says whether this
# thread is inside one). Nothing lower than it may import it, hence this slot.
IN_VMAP: list[Any] = []


def in_vmap() -> Any:
    """tg.vmap's handler when this thread is inside a vmapped function, else None."""
    return IN_VMAP[0] if IN_VMAP and IN_VMAP[0].active() else None


def argnums_of(argnums: int | Sequence[int], n: int, where: str) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    plain = True  # non-negative Python ints (the common case): kept as they are
    for a in nums:
        if not -n <= a < n:
            raise ValueError(f"{where}: argnums {a} out of range for {n} positional arguments")
        plain &= type(a) is int and a >= 0
    return (nums if plain else tuple(a % n for a in nums)), single


def record(
    f: Callable, args: tuple, kwargs: dict, argnums: tuple[int, ...], where: str
) -> tuple[Any, list, Tape]:
    """Call ``f`` on a transform tape (entered here; the caller leaves it) with the
    differentiated arguments replaced by fresh leaf tensors."""
    grad_on = is_grad_enabled()
    tape = enter(TRANSFORM, grad_enabled=True, born0=serial())
    tape.foreign_rg = grad_on  # under no_grad, outside tensors are constants here
    leaves_per_arg: list = []
    try:
        args = list(args)
        for a in argnums:
            v = args[a]
            # the common case, one float array: its leaf (a copy) without the pytree walk
            if type(v) is np.ndarray and v.dtype in FLOAT_DTYPES:
                t = Tensor._external(v.copy(), FLAG_RG | FLAG_DIFF)
                bind_leaf(tape, t)
                leaves_per_arg.append(([t], [v], _first))
                args[a] = t
                continue
            leaves, rebuild = flatten(v)
            ts = [_leaf_tensor(v, f"{where}: argument {a}") for v in leaves]
            for t in ts:
                bind(tape, t)
            leaves_per_arg.append((ts, leaves, rebuild))
            args[a] = rebuild(ts)
        out = f(*args, **kwargs)
    except BaseException:
        done(tape, leaves_per_arg)
        raise
    return out, leaves_per_arg, tape


def done(tape: Tape, leaves_per_arg: list, keep: bool = False) -> None:
    """The recording is over: the arguments are ordinary tensors again; leave the tape."""
    for ts, _, _ in leaves_per_arg:
        for t in ts:
            mark_differentiated(t, False)
    leave(tape, keep)


def differentiate(
    out: Tensor, tape: Tape, leaves_per_arg: list, where: str, cotangent: Any = None
) -> list[Any]:
    """Gradients of ``out`` for each differentiated argument, in its structure."""
    flat = [t for ts, _, _ in leaves_per_arg for t in ts]
    home = home_of(out)
    mine = home[0] is tape if home is not None else any(out is t for t in flat)
    found = gradients(out, flat, cotangent, retain_graph=True) if mine else [None] * len(flat)
    for g in found:  # (a loop, not all() of a generator: this runs on every call)
        if g is not None:
            break
    else:
        warnings.warn(
            f"{where}: the output does not depend on the differentiated argument(s) "
            "(no recorded op connects them); their gradient is zero",
            UserWarning,
            stacklevel=3,
        )
    values = [v for _, leaves, _ in leaves_per_arg for v in leaves]
    return regroup(
        [_gradient_like(g, t, v) for g, t, v in zip(found, flat, values)], leaves_per_arg
    )


def regroup(flat: list, groups: list) -> list:
    """Values for the flattened leaves of several arguments, back in each argument's
    structure (``groups``: ``(members, leaves, rebuild)`` per argument)."""
    out, i = [], 0
    for members, _, rebuild in groups:
        if rebuild is _first:  # one array argument (record's common case)
            out.append(flat[i])
            i += 1
            continue
        out.append(rebuild(flat[i : i + len(members)]))
        i += len(members)
    return out


def as_output(out: Any) -> Tensor:
    """What ``f`` returned, as one tensor (lists and object arrays of tensors stacked)."""
    if isinstance(out, Tensor):
        return out
    if isinstance(out, list | tuple) or (isinstance(out, np.ndarray) and out.dtype == object):
        return as_tensor(out)
    return tensor(np.asarray(out, dtype=float))


def _scalar_output(out: Any, where: str) -> Tensor:
    out = as_output(out)
    if out.size != 1:
        raise TypeError(
            f"{where}: the function must return a scalar (one element), got "
            f"shape {out.shape}; use jacobian or vjp for non-scalar outputs"
        )
    return out


def _to_numpy(tree: Any) -> Any:
    leaves, rebuild = flatten(tree)
    return rebuild([v.numpy() if isinstance(v, Tensor) else v for v in leaves])


# --- recorded mode: transforms whose arguments require grad -------------------------------
#
# A transform called on tensors that require grad (``tg.grad(tg.grad(f))``, a gradient
# inside a loss, ``tg.jvp`` of ``tg.grad``) must return results that carry their
# dependence on those tensors. It records ``f`` on the current tape, with each
# differentiated argument replaced by a fresh alias node (a reshape to the same shape:
# no copy), and differentiates with respect to those nodes by the recording walk
# (``rule_walks.reverse``), so its results are tensors in the caller's graph. The alias
# makes it a derivative with respect to *this use* of the value: a closure over the
# same tensor stays a constant to the inner transform, as in JAX.


def needs_graph(*trees: Any) -> bool:
    """Whether a transform must record: grad mode is on and its arguments require grad,
    or it runs inside another transform's function (whose variables it may close
    over, as ``jax.grad`` allows)."""
    tape = current_tape()
    if not tape.grad_enabled:
        return False
    if tape.kind == TRANSFORM:
        return True
    for tree in trees:  # (a loop, not any() of a generator: this runs on every call)
        if _requires_grad(tree):
            return True
    return False


def _requires_grad(tree: Any) -> bool:
    """Whether a leaf of pytree ``tree`` (as ``flatten`` finds them) is a tensor that
    requires grad: a walk that builds nothing (flatten's closures cost microseconds on
    every call of a transform)."""
    if isinstance(tree, Tensor):
        return tree.requires_grad
    if isinstance(tree, list | tuple):
        for v in tree:  # (a loop, not any() of a generator: ~1 us less per call)
            if type(v) is not np.ndarray and _requires_grad(v):
                return True
        return False
    if isinstance(tree, dict):
        for v in tree.values():
            if _requires_grad(v):
                return True
    return False


def _alias(value: Any, where: str, graph: bool) -> Tensor:
    """A differentiated argument: a fresh node on the current tape, made from ``value``
    itself in recorded mode (``graph``), else from a fresh leaf holding its values."""
    if graph and isinstance(value, Tensor) and value.requires_grad:
        _check_float(value.dtype, where)  # not its values: a capture would guard them
        t = value
    else:
        t = tensor(_float_values(value, where), requires_grad=True)
    dt = DTYPE_CODE[t.dtype]
    return general(RESHAPE, dt, [t], [(dt, t.shape)], alias=True)


class Alias(NamedTuple):
    """Where a differentiated argument's alias lives, taken when it is made: an in-place
    op inside ``f`` (``x *= 2``) moves the handle to a new node, and the derivative is
    with respect to the argument, not its mutated value."""

    slot: int
    shape: tuple[int, ...]
    dtype: np.dtype


def aliases(
    args: tuple, argnums: tuple[int, ...], where: str, graph: bool = True
) -> tuple[list, list, list[Alias]]:
    """The arguments with the differentiated ones (pytree leaves) replaced by aliases;
    per argument ``(aliases, leaves, rebuild)``; and each alias's :class:`Alias`."""
    args = list(args)
    groups, made = [], []
    for a in argnums:
        leaves, rebuild = flatten(args[a])
        views = [_alias(v, f"{where}: argument {a}", graph) for v in leaves]
        made += [Alias(home_of(v)[1], v.shape, v.dtype) for v in views]
        groups.append((views, leaves, rebuild))
        args[a] = rebuild(views)
    return args, groups, made


def _no_dependence(where: str) -> None:
    warnings.warn(
        f"{where}: the output does not depend on the differentiated argument(s) "
        "(no recorded op connects them); their gradient is zero",
        UserWarning,
        stacklevel=4,
    )


def _graph_grads(
    out: Tensor, groups: list, made: list[Alias], where: str, cotangent: Any = None
) -> list[Any]:
    """Recorded gradients of ``out`` for each group of aliases, in its structure."""
    slots = [m.slot for m in made]
    found: list[Any] = [None] * len(made)
    home = home_of(out)
    if home is None and graph_freed(out):
        raise RuntimeError(FREED_MESSAGE)
    if home is not None and home[0].slot_rg(home[1]):
        seed = np.ones(out.shape, out.dtype) if cotangent is None else cotangent
        grads = graph_gradients(home[0], home[1], seed, set(slots))
        found = [grads.get(s) for s in slots]
    if all(g is None for g in found):
        _no_dependence(where)
    found = [as_tensor(np.zeros(m.shape, m.dtype)) if g is None else g for g, m in zip(found, made)]
    return regroup(found, groups)


def _split_aux(out: Any, has_aux: bool) -> tuple[Tensor, Any]:
    """value_and_grad's ``(scalar, aux)``: ``f``'s result, checked."""
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("value_and_grad: has_aux=True needs f to return (value, aux)")
        out, aux = out
    return _scalar_output(out, "value_and_grad"), aux


def _value_and_grad_graph(
    f: Callable, args: tuple, kwargs: dict, nums: tuple, single: bool, has_aux: bool
) -> Any:
    args, groups, made = aliases(args, nums, "value_and_grad")
    out, aux = _split_aux(f(*args, **kwargs), has_aux)
    grads = _graph_grads(out, groups, made, "value_and_grad")
    result = grads[0] if single else tuple(grads)
    return ((out, aux), result) if has_aux else (out, result)


def value_and_grad(
    f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable:
    """Make a function that returns ``f``'s value and its gradient.

    The returned function records ``f`` once on fresh leaf tensors and runs one
    compiled backward pass. It plugs straight into ``scipy.optimize.minimize(fun, x0,
    jac=True)``: it returns ``(float, ndarray)``. It changes no ``.grad`` and records
    with grad mode on even under an outer :class:`no_grad`.

    Parameters
    ----------
    f : callable
        Function returning a scalar (a one-element tensor or a number); with
        ``has_aux``, a pair ``(scalar, aux)``. Its arguments may be NumPy arrays,
        Python numbers, tensors, or nested lists / tuples / dicts of them (pytrees).
    argnums : int or tuple of int, optional
        Which positional argument(s) to differentiate (default 0). Negative values
        count from the end.
    has_aux : bool, optional
        ``f`` returns ``(value, aux)``; the result is then ``((value, aux), grad)``,
        with ``aux`` tensors turned into NumPy arrays.

    Returns
    -------
    callable
        ``g(*args, **kwargs) -> (value, grad)`` with ``value`` a Python float and
        ``grad`` a NumPy array shaped like the argument (a NumPy scalar for a Python
        number; the argument's pytree structure for a pytree; a tuple of them for a
        tuple ``argnums``). When an argument is a tensor that requires grad (a
        transform inside another, ``tg.grad(tg.grad(f))``), the value and the
        gradients are tensors recorded in the caller's graph, so they can be
        differentiated again.

    Raises
    ------
    TypeError
        When ``g`` is called: ``f`` returns more than one element (use
        :func:`jacobian` or :func:`vjp`), a differentiated argument holds integers,
        bools or non-numbers, ``has_aux=True`` but ``f`` does not return a pair, or
        ``f`` calls ``float()`` / ``.item()`` on a tensor that requires grad.
    ValueError
        When ``g`` is called: an entry of ``argnums`` is out of range for the
        number of positional arguments.
    RuntimeError
        When ``g`` is called with plain values: ``f``'s result depends on a tensor
        that requires grad but is not one of the arguments (a closure, global or
        attribute); pass it as an argument, or ``.detach()`` it.

    Warns
    -----
    UserWarning
        The output does not depend on the differentiated argument(s); their
        gradient is zero.

    See Also
    --------
    grad : The gradient alone.
    vjp : Vector-Jacobian products of non-scalar functions.
    tapegrad.compile : The same, captured once and replayed in compiled code.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> f = lambda x: tnp.sum(x ** 2)
    >>> value, g = tg.value_and_grad(f)(np.array([1.0, 2.0, 3.0]))
    >>> value, g
    (14.0, array([2., 4., 6.]))

    Several arguments, and an auxiliary output:

    >>> def loss(w, x):
    ...     r = x @ w
    ...     return tnp.sum(r ** 2), r
    >>> w, x = np.array([1.0, -1.0]), np.array([[1.0, 2.0], [3.0, 5.0]])
    >>> (value, r), (gw, gx) = tg.value_and_grad(loss, argnums=(0, 1), has_aux=True)(w, x)
    >>> value, r
    (5.0, array([-1., -2.]))
    >>> gw
    array([-14., -24.])

    With SciPy's optimisers:

    >>> import scipy.optimize
    >>> def rosen(x):
    ...     return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)
    >>> res = scipy.optimize.minimize(tg.value_and_grad(rosen), np.zeros(3), jac=True)
    >>> np.round(res.x, 4)
    array([1., 1., 1.])
    """

    plans: dict[int, tuple] = {}  # argnums_of's answer by argument count

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if IN_VMAP and (batch := in_vmap()) is not None:
            return batch.value_and_grad(f, args, kwargs, argnums, has_aux)
        plan = plans.get(len(args))
        if plan is None:
            plan = argnums_of(argnums, len(args), "value_and_grad")
            if isinstance(argnums, int | tuple):  # (a list could change between calls)
                plans[len(args)] = plan
        nums, single = plan
        if needs_graph(args, kwargs):
            return _value_and_grad_graph(f, args, kwargs, nums, single, has_aux)
        out, leaves, tape = record(f, args, kwargs, nums, "value_and_grad")
        try:
            out, aux = _split_aux(out, has_aux)
            value = scalar_value(out, tape)
            grads = differentiate(out, tape, leaves, "value_and_grad")
            result = grads[0] if single else tuple(grads)
            if has_aux:
                return (value, _to_numpy(aux)), result
            return value, result
        finally:
            del out
            done(tape, leaves)

    return wrapper


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """Make a function that returns the gradient of scalar-valued ``f``.

    The gradient with respect to argument(s) ``argnums``, computed as by
    :func:`value_and_grad` (one recording, one compiled backward pass; no ``.grad``
    is changed). Transforms compose: ``tg.grad(tg.grad(f))`` is the second
    derivative.

    Parameters
    ----------
    f : callable
        Function returning a scalar (a one-element tensor or a number); with
        ``has_aux``, a pair ``(scalar, aux)``. Its arguments may be NumPy arrays,
        Python numbers, tensors, or pytrees of them.
    argnums : int or tuple of int, optional
        Which positional argument(s) to differentiate (default 0).
    has_aux : bool, optional
        ``f`` returns ``(value, aux)``; the result is then ``(grad, aux)``.

    Returns
    -------
    callable
        ``g(*args, **kwargs) -> grad``, shaped like the differentiated argument (a
        tuple of gradients for a tuple ``argnums``); NumPy values, or tensors in the
        caller's graph when an argument requires grad.

    Raises
    ------
    TypeError
        When ``g`` is called: ``f`` returns more than one element, a
        differentiated argument holds integers, bools or non-numbers, or
        ``has_aux=True`` but ``f`` does not return a pair.
    ValueError
        When ``g`` is called: an entry of ``argnums`` is out of range.
    RuntimeError
        When ``g`` is called with plain values: ``f``'s result depends on a tensor
        that requires grad but is not one of the arguments.

    See Also
    --------
    value_and_grad : The value and the gradient together.
    hessian : Second derivatives.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> tg.grad(lambda x: tnp.sum(x ** 3))(np.array([1.0, 2.0]))
    array([ 3., 12.])

    A Python number gives a NumPy scalar; nested, the second derivative:

    >>> d2 = tg.grad(tg.grad(lambda x: x ** 3))
    >>> print(d2(2.0))
    12.0
    """
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return wrapper


def vjp(f: Callable, *args: Any) -> tuple[np.ndarray, Callable]:
    """Evaluate ``f(*args)`` and return its value and a vector-Jacobian product function.

    ``vjp_fn(cotangent)`` returns a tuple with one gradient per argument (in the
    arguments' structure): ``cotangent`` pulled back through ``f``. ``f`` may return a
    tensor or a list / tuple / dict of them (``out`` has that structure, as NumPy
    values, and so does ``cotangent``); a part that is a NumPy value does not depend on
    the arguments (zero, with a warning if nothing does). ``vjp_fn`` may be called
    many times; the graph (a tape of its own) is kept until ``vjp_fn`` is dropped.

    Parameters
    ----------
    f : callable
        The function to differentiate, of tensors (or pytrees of them).
    *args : array_like, Tensor or pytree
        The point: every positional argument is differentiated, so each must hold
        floats.

    Returns
    -------
    out : ndarray or pytree
        ``f(*args)``, as NumPy values in the structure ``f`` returns (tensors in the
        caller's graph when an argument requires grad).
    vjp_fn : callable
        ``vjp_fn(cotangent) -> tuple``: one gradient per argument, each the
        argument's shape and structure.

    Raises
    ------
    TypeError
        An argument holds integers, bools or non-numbers (every argument is
        differentiated).
    ValueError
        From ``vjp_fn``: the cotangent does not have the output's structure, or a
        part of it does not have its output's shape.
    RuntimeError
        From ``vjp_fn``: the cotangent is a tensor that requires grad but ``vjp_fn``
        was made from plain values (its NumPy results could not carry that
        dependence); or ``f``'s result depends on a tensor from outside that requires
        grad.

    See Also
    --------
    jacobian : All the vector-Jacobian products at once.
    jvp : Forward mode, Jacobian-vector products.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> out, vjp_fn = tg.vjp(lambda a, b: a * b, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> out
    array([3., 8.])
    >>> vjp_fn(np.array([1.0, 1.0]))
    (array([3., 4.]), array([1., 2.]))

    Outputs in a dict take a cotangent of the same structure:

    >>> out, vjp_fn = tg.vjp(lambda x: {"s": tnp.sum(x), "p": tnp.prod(x)}, np.array([2.0, 3.0]))
    >>> vjp_fn({"s": 1.0, "p": 0.0})
    (array([1., 1.]),)
    """
    if IN_VMAP and (batch := in_vmap()) is not None:
        batch.refuse("tg.vjp")
    if needs_graph(args):
        return _vjp_graph(f, args)
    out, leaves, tape = record(f, args, {}, tuple(range(len(args))), "vjp")
    done(tape, leaves, keep=True)
    outs, rebuild = flatten(out)
    value = rebuild([np.asarray(values_of(o)) for o in outs])

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        cs = _cotangent_leaves(cotangent, outs, "vjp")
        for c in cs:
            if isinstance(c, Tensor) and c.requires_grad and is_grad_enabled():
                raise RuntimeError(
                    "vjp: the cotangent requires grad, but this vjp function was made from "
                    "values and returns NumPy arrays, which cannot carry that dependence. "
                    "Make it from tensors that require grad (or inside the transform that "
                    "differentiates), so that it records"
                )
        cs = [np.asarray(values_of(c)) for c in cs]
        if len(outs) == 1 and isinstance(outs[0], Tensor):  # the common case: one root
            return tuple(differentiate(outs[0], tape, leaves, "vjp", cs[0]))
        # several outputs: the gradient of sum_i <out_i, c_i>, recorded on f's tape
        outside = tape.foreign_rg
        enter(TRANSFORM, True, born0=tape.born0, tape=tape)
        tape.foreign_rg = outside
        try:
            root = _pairing(outs, cs)
        finally:
            leave(tape, keep=True)
        return tuple(differentiate(root, tape, leaves, "vjp"))

    return value, vjp_fn


def _cotangent_leaves(cotangent: Any, outs: list, where: str) -> list:
    """The cotangent's leaves, one per output leaf, each of its output's shape."""
    cs, _ = flatten(cotangent)
    if len(cs) != len(outs):
        raise ValueError(
            f"{where}: the cotangent has {len(cs)} parts, the output {len(outs)} (the "
            "cotangent has the output's structure)"
        )
    for c, o in zip(cs, outs):
        cshape = c.shape if isinstance(c, Tensor) else np.shape(c)
        oshape = o.shape if isinstance(o, Tensor) else np.shape(o)
        if tuple(cshape) != tuple(oshape):
            raise ValueError(
                f"{where}: cotangent has shape {tuple(cshape)}, the output has shape "
                f"{tuple(oshape)}"
            )
    return cs


def _pairing(outs: list, cs: list) -> Tensor:
    """``sum_i sum(out_i * c_i)`` over the output leaves that are tensors (a NumPy value
    does not depend on anything): its gradient is the VJP of every output at once."""
    total = None
    for o, c in zip(outs, cs):
        if isinstance(o, Tensor):
            term = rsum(o * c)
            total = term if total is None else total + term
    return total if total is not None else tensor(0.0)


def _vjp_graph(f: Callable, args: tuple) -> tuple[Tensor, Callable]:
    args, groups, made = aliases(args, tuple(range(len(args))), "vjp")
    out = f(*args)
    outs, _ = flatten(out)

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        cs = _cotangent_leaves(cotangent, outs, "vjp")
        if len(outs) == 1 and isinstance(outs[0], Tensor):
            c = cs[0] if isinstance(cs[0], Tensor) else np.asarray(cs[0], outs[0].dtype)
            return tuple(_graph_grads(outs[0], groups, made, "vjp", c))
        return tuple(_graph_grads(_pairing(outs, cs), groups, made, "vjp"))

    return out, vjp_fn


def _jacobian_graph(f: Callable, args: tuple, kwargs: dict, nums: tuple, single: bool) -> Any:
    args, groups, made = aliases(args, nums, "jacobian")
    out = as_output(f(*args, **kwargs))
    rows: list[list] = [[] for _ in made]
    for idx in np.ndindex(out.shape):
        seed = np.zeros(out.shape, out.dtype)
        seed[idx] = 1
        grads = _graph_grads(out, groups, made, "jacobian", seed)
        for r, g in zip(rows, [g for tree in grads for g in flatten(tree)[0]]):
            r.append(g)
    jacs = [
        reshape(stack(r), out.shape + m.shape)
        if r
        else as_tensor(np.zeros(out.shape + m.shape, m.dtype))
        for r, m in zip(rows, made)
    ]
    per_arg = regroup(jacs, groups)
    return per_arg[0] if single else tuple(per_arg)


def jacobian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Make a function that returns the Jacobian of ``f`` by reverse mode.

    ``f`` is recorded once and run backward once per output element. ``jacobian(f)(x)``
    has shape ``out.shape + x.shape``; for a tuple ``argnums`` a tuple of those. A
    pytree argument (list / tuple / dict of arrays) gets the same structure of
    Jacobians, one per array, as ``jax.jacrev``. The output is one tensor (a list of
    same-shaped parts, or an object array of tensors, is stacked as NumPy would); a
    tuple or dict of outputs, or a list of parts of different shapes (``split``), gives
    one Jacobian per output, in the output's structure. ``jacrev`` is the same
    function.

    Parameters
    ----------
    f : callable
        The function to differentiate, of arrays, tensors or pytrees of them.
    argnums : int or tuple of int, optional
        Which positional argument(s) to differentiate (default 0).

    Returns
    -------
    callable
        ``J(*args, **kwargs)``: the Jacobian(s) as NumPy arrays, or tensors in the
        caller's graph when an argument requires grad.

    Raises
    ------
    TypeError
        When ``J`` is called: a differentiated argument holds integers, bools or
        non-numbers.
    ValueError
        When ``J`` is called: an entry of ``argnums`` is out of range.
    RuntimeError
        When ``J`` is called with plain values: ``f``'s result depends on a tensor
        that requires grad but is not one of the arguments.

    Warns
    -----
    UserWarning
        The output does not depend on the differentiated argument(s); the Jacobian is
        zero.

    See Also
    --------
    jacfwd : The same Jacobian by forward mode, cheaper for fewer inputs than outputs.
    vjp : One row combination at a time.

    Notes
    -----
    The cost is one backward pass per output element: reverse mode suits functions
    with fewer outputs than inputs; :func:`jacfwd` suits the opposite.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> tg.jacobian(lambda x: A @ tnp.sin(x))(np.array([0.0, 0.0]))
    array([[1., 2.],
           [3., 4.]])

    Two arguments, and a tuple of outputs:

    >>> x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    >>> jx, jy = tg.jacobian(lambda x, y: x * y, argnums=(0, 1))(x, y)
    >>> jy
    array([[1., 0.],
           [0., 2.]])
    >>> tg.jacobian(lambda x: (x ** 2, tnp.sum(x)))(x)
    (array([[2., 0.],
           [0., 4.]]), array([1., 1.]))
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if IN_VMAP and (batch := in_vmap()) is not None:
            batch.refuse("tg.jacobian")
        nums, single = argnums_of(argnums, len(args), "jacobian")
        if needs_graph(args, kwargs):
            return _jacobian_graph(f, args, kwargs, nums, single)
        out, leaves, tape = record(f, args, kwargs, nums, "jacobian")
        try:
            ts = [t for group, _, _ in leaves for t in group]
            outs, rebuild = flatten(out)
            if stacked_output(out, outs):
                per_out = [_jacobian_rows(as_output(out), ts, tape)]
            else:  # a tuple or dict of outputs: one Jacobian each, in its structure
                per_out = [_jacobian_rows(as_output(o), ts, tape) for o in outs]
            if all(j is None for j in per_out):
                warnings.warn(
                    "jacobian: the output does not depend on the differentiated "
                    "argument(s); the Jacobian is zero",
                    UserWarning,
                    stacklevel=2,
                )
            results = []
            for o, jacs in zip([out] if len(per_out) == 1 else outs, per_out):
                o = as_output(o)
                jacs = jacs or [np.zeros(o.shape + t.shape, t.dtype) for t in ts]
                per_arg = regroup(jacs, leaves)
                results.append(per_arg[0] if single else tuple(per_arg))
            return results[0] if len(per_out) == 1 else rebuild(results)
        finally:
            del out
            done(tape, leaves)

    return wrapper


def stacked_output(out: Any, outs: list) -> bool:
    """Whether ``f``'s output is one array: a tensor, or a list (or object array) of
    same-shaped parts, stacked as NumPy would; a tuple or dict, or parts of different
    shapes, are several outputs."""
    if isinstance(out, Tensor) or not isinstance(out, list | tuple | dict):
        return True
    if not isinstance(out, list):
        return False
    shapes = {tuple(np.shape(values_of(o))) for o in outs}
    return len(shapes) <= 1


def _jacobian_rows(out: Tensor, ts: list[Tensor], tape: Tape) -> list[np.ndarray] | None:
    """d out / d t for each leaf ``t``, one backward pass per element of ``out``; None if
    ``out`` does not depend on them."""
    home = home_of(out)
    mine = home[0] is tape if home is not None else any(out is t for t in ts)
    if not (mine and out.requires_grad):
        return None
    jacs = [np.zeros(out.shape + t.shape, t.dtype) for t in ts]
    for idx in np.ndindex(out.shape):
        seed = np.zeros(out.shape, out.dtype)
        seed[idx] = 1
        for j, g in zip(jacs, gradients(out, ts, seed, retain_graph=True)):
            if g is not None:
                j[idx] = g
    return jacs


jacrev = jacobian
