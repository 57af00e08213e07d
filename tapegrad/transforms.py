"""Function transforms with HIPS autograd's and JAX's spelling: ``grad``,
``value_and_grad``, ``vjp``, ``jacobian``.

Arguments may be NumPy arrays, Python numbers, tensors, or nested lists / tuples / dicts
of them ("pytrees"); gradients come back as NumPy arrays in the same structure. Each call
records ``f`` once on fresh leaf tensors and runs one backward pass per requested
cotangent (``jacobian``: one per output element).

A transform is a function of its arguments only, whatever surrounds it:

* it records on a tape of its own (``tape.enter``), with grad mode on even under an
  outer ``no_grad``; it may run inside a hook, a custom ``backward``, another transform
  or a capture, and never touches their tapes;
* it computes gradients with respect to its arguments and changes no ``.grad``
  (``engine.gradients``, PyTorch's ``torch.autograd.grad``);
* its results are NumPy values, so it refuses what they could not carry: a
  differentiated argument that already requires grad (differentiating a gradient), or a
  result that depends on a tensor from outside that requires grad; both raise
  "higher-order derivatives are not supported yet". Inside ``f``, ``float()`` and
  ``.item()`` of a tensor that requires grad raise (see ``tapegrad.boundary``).

``value_and_grad(f)`` plugs straight into ``scipy.optimize.minimize(fun, x0, jac=True)``:
it returns ``(float, ndarray)``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import graphwalk
from .engine import gradients, graph_gradients
from .frontends.reduce import sum as rsum
from .frontends.shape import concatenate, reshape, stack
from .function import Function
from .layout import DTYPE_CODE, H_NNODES
from .ops.shape import RESHAPE
from .pytree import flatten
from .tape import TRANSFORM, Tape, current_tape, enter, leave
from .tensors import (
    FREED_MESSAGE,
    Tensor,
    as_tensor,
    enable_grad,
    general,
    home_of,
    is_grad_enabled,
    mark_differentiated,
    no_grad,
    serial,
    tensor,
    values_of,
)

__all__ = [
    "checkpoint",
    "grad",
    "hessian",
    "hvp",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jvp",
    "value_and_grad",
    "vjp",
]


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


def _argnums(argnums: int | Sequence[int], n: int, where: str) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for a in nums:
        if not -n <= a < n:
            raise ValueError(f"{where}: argnums {a} out of range for {n} positional arguments")
    return tuple(a % n for a in nums), single


def _record(
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
            leaves, rebuild = flatten(args[a])
            ts = [_leaf_tensor(v, f"{where}: argument {a}") for v in leaves]
            leaves_per_arg.append((ts, leaves, rebuild))
            args[a] = rebuild(ts)
        out = f(*args, **kwargs)
    except BaseException:
        _done(tape, leaves_per_arg)
        raise
    return out, leaves_per_arg, tape


def _done(tape: Tape, leaves_per_arg: list, keep: bool = False) -> None:
    """The recording is over: the arguments are ordinary tensors again; leave the tape."""
    for ts, _, _ in leaves_per_arg:
        for t in ts:
            mark_differentiated(t, False)
    leave(tape, keep)


def _differentiate(
    out: Tensor, tape: Tape, leaves_per_arg: list, where: str, cotangent: Any = None
) -> list[Any]:
    """Gradients of ``out`` for each differentiated argument, in its structure."""
    flat = [t for ts, _, _ in leaves_per_arg for t in ts]
    home = home_of(out)
    mine = home[0] is tape if home is not None else any(out is t for t in flat)
    found = gradients(out, flat, cotangent, retain_graph=True) if mine else [None] * len(flat)
    if all(g is None for g in found):
        warnings.warn(
            f"{where}: the output does not depend on the differentiated argument(s) "
            "(no recorded op connects them); their gradient is zero",
            UserWarning,
            stacklevel=3,
        )
    values = [v for _, leaves, _ in leaves_per_arg for v in leaves]
    return _regroup(
        [_gradient_like(g, t, v) for g, t, v in zip(found, flat, values)], leaves_per_arg
    )


def _regroup(flat: list, groups: list) -> list:
    """Values for the flattened leaves of several arguments, back in each argument's
    structure (``groups``: ``(members, leaves, rebuild)`` per argument)."""
    out, i = [], 0
    for members, _, rebuild in groups:
        out.append(rebuild(flat[i : i + len(members)]))
        i += len(members)
    return out


def _as_output(out: Any) -> Tensor:
    """What ``f`` returned, as one tensor (lists and object arrays of tensors stacked)."""
    if isinstance(out, Tensor):
        return out
    if isinstance(out, list | tuple) or (isinstance(out, np.ndarray) and out.dtype == object):
        return as_tensor(out)
    return tensor(np.asarray(out, dtype=float))


def _scalar_output(out: Any, where: str) -> Tensor:
    out = _as_output(out)
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
# (``graphwalk.reverse``), so its results are tensors in the caller's graph. The alias
# makes it a derivative with respect to *this use* of the value: a closure over the
# same tensor stays a constant to the inner transform, as in JAX.


def _needs_graph(*trees: Any) -> bool:
    """Whether a transform must record: grad mode is on and its arguments require grad,
    or it runs inside another transform's function (whose variables it may close
    over, as ``jax.grad`` allows)."""
    if not is_grad_enabled():
        return False
    if current_tape().kind == TRANSFORM:
        return True
    return any(
        isinstance(v, Tensor) and v.requires_grad for tree in trees for v in flatten(tree)[0]
    )


def _alias(value: Any, where: str) -> Tensor:
    """A differentiated argument in recorded mode: a fresh node on the current tape."""
    if isinstance(value, Tensor) and value.requires_grad:
        _check_float(value.dtype, where)  # not its values: a capture would guard them
        t = value
    else:
        t = tensor(_float_values(value, where), requires_grad=True)
    dt = DTYPE_CODE[t.dtype]
    return general(RESHAPE, dt, [t], [(dt, t.shape)], alias=True)


def _aliases(args: tuple, argnums: tuple[int, ...], where: str) -> tuple[list, list]:
    args = list(args)
    groups = []
    for a in argnums:
        leaves, rebuild = flatten(args[a])
        views = [_alias(v, f"{where}: argument {a}") for v in leaves]
        groups.append((views, leaves, rebuild))
        args[a] = rebuild(views)
    return args, groups


def _no_dependence(where: str) -> None:
    warnings.warn(
        f"{where}: the output does not depend on the differentiated argument(s) "
        "(no recorded op connects them); their gradient is zero",
        UserWarning,
        stacklevel=4,
    )


def _graph_grads(out: Tensor, groups: list, where: str, cotangent: Any = None) -> list[Any]:
    """Recorded gradients of ``out`` for each group of aliases, in its structure."""
    flat = [v for views, _, _ in groups for v in views]
    slots = [home_of(v)[1] for v in flat]
    found: list[Any] = [None] * len(flat)
    home = home_of(out)
    if home is not None and home[0].slot_rg(home[1]):
        seed = np.ones(out.shape, out.dtype) if cotangent is None else cotangent
        grads = graph_gradients(home[0], home[1], seed, set(slots))
        found = [grads.get(s) for s in slots]
    if all(g is None for g in found):
        _no_dependence(where)
    found = [as_tensor(np.zeros(v.shape, v.dtype)) if g is None else g for g, v in zip(found, flat)]
    return _regroup(found, groups)


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
    args, groups = _aliases(args, nums, "value_and_grad")
    out, aux = _split_aux(f(*args, **kwargs), has_aux)
    grads = _graph_grads(out, groups, "value_and_grad")
    result = grads[0] if single else tuple(grads)
    return ((out, aux), result) if has_aux else (out, result)


def value_and_grad(
    f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable:
    """``f``'s value and gradient with respect to argument(s) ``argnums``.

    Parameters
    ----------
    f
        Function returning a scalar (a one-element tensor or number); with ``has_aux``,
        a pair ``(scalar, aux)``.
    argnums
        Which positional argument(s) to differentiate: an int or a tuple of ints.
    has_aux
        Return ``((value, aux), grad)``; ``aux`` tensors come back as NumPy arrays.

    Returns
    -------
    Callable
        ``g(*args, **kwargs) -> (value, grad)`` with ``value`` a Python float and
        ``grad`` shaped like the argument (a tuple of them for a tuple ``argnums``).
        When an argument is a tensor that requires grad (a transform inside another,
        ``tg.grad(tg.grad(f))``), the value and the gradients are tensors recorded in
        the caller's graph, so they can be differentiated again.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "value_and_grad")
        if _needs_graph(args, kwargs):
            return _value_and_grad_graph(f, args, kwargs, nums, single, has_aux)
        out, leaves, tape = _record(f, args, kwargs, nums, "value_and_grad")
        try:
            out, aux = _split_aux(out, has_aux)
            value = float(out._value().reshape(()))
            grads = _differentiate(out, tape, leaves, "value_and_grad")
            result = grads[0] if single else tuple(grads)
            if has_aux:
                return (value, _to_numpy(aux)), result
            return value, result
        finally:
            del out
            _done(tape, leaves)

    return wrapper


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of scalar-valued ``f`` with respect to argument(s) ``argnums``
    (see :func:`value_and_grad`); with ``has_aux`` returns ``(grad, aux)``."""
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return wrapper


def vjp(f: Callable, *args: Any) -> tuple[np.ndarray, Callable]:
    """Evaluate ``f(*args)`` and return ``(out, vjp_fn)``.

    ``vjp_fn(cotangent)`` returns a tuple with one gradient per argument (in the
    arguments' structure): ``cotangent`` pulled back through ``f``. It may be called many
    times; the graph (a tape of its own) is kept until ``vjp_fn`` is dropped.
    """
    if _needs_graph(args):
        return _vjp_graph(f, args)
    out, leaves, tape = _record(f, args, {}, tuple(range(len(args))), "vjp")
    _done(tape, leaves, keep=True)
    if not isinstance(out, Tensor):
        raise TypeError(f"vjp: f must return a tensor, got {type(out).__name__}")
    value = out.numpy()

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        c = np.asarray(cotangent._value() if isinstance(cotangent, Tensor) else cotangent)
        if c.shape != out.shape:
            raise ValueError(
                f"vjp: cotangent has shape {c.shape}, the output has shape {out.shape}"
            )
        return tuple(_differentiate(out, tape, leaves, "vjp", c))

    return value, vjp_fn


def _vjp_graph(f: Callable, args: tuple) -> tuple[Tensor, Callable]:
    args, groups = _aliases(args, tuple(range(len(args))), "vjp")
    out = f(*args)
    if not isinstance(out, Tensor):
        raise TypeError(f"vjp: f must return a tensor, got {type(out).__name__}")

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        c = cotangent if isinstance(cotangent, Tensor) else np.asarray(cotangent, out.dtype)
        if tuple(c.shape) != out.shape:
            raise ValueError(
                f"vjp: cotangent has shape {tuple(c.shape)}, the output has shape {out.shape}"
            )
        return tuple(_graph_grads(out, groups, "vjp", c))

    return out, vjp_fn


def _jacobian_graph(f: Callable, args: tuple, kwargs: dict, nums: tuple, single: bool) -> Any:
    args, groups = _aliases(args, nums, "jacobian")
    out = _as_output(f(*args, **kwargs))
    flat = [v for views, _, _ in groups for v in views]
    rows: list[list] = [[] for _ in flat]
    for idx in np.ndindex(out.shape):
        seed = np.zeros(out.shape, out.dtype)
        seed[idx] = 1
        found = [
            g for grads in _graph_grads(out, groups, "jacobian", seed) for g in flatten(grads)[0]
        ]
        for r, g in zip(rows, found):
            r.append(g)
    jacs = [
        reshape(stack(r), out.shape + v.shape) if r else as_tensor(np.zeros(v.shape, v.dtype))
        for r, v in zip(rows, flat)
    ]
    per_arg = _regroup(jacs, groups)
    return per_arg[0] if single else tuple(per_arg)


def jacobian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Jacobian of ``f`` by reverse mode, one backward pass per output element.

    ``jacobian(f)(x)`` has shape ``out.shape + x.shape``; for a tuple ``argnums`` a tuple
    of those. A pytree argument (list / tuple / dict of arrays) gets the same structure
    of Jacobians, one per array, as ``jax.jacrev``. The output is one tensor (a list or
    an object array of tensors is stacked).
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "jacobian")
        if _needs_graph(args, kwargs):
            return _jacobian_graph(f, args, kwargs, nums, single)
        out, leaves, tape = _record(f, args, kwargs, nums, "jacobian")
        try:
            out = _as_output(out)
            ts = [t for group, _, _ in leaves for t in group]
            jacs = [np.zeros(out.shape + t.shape, t.dtype) for t in ts]
            home = home_of(out)
            mine = home[0] is tape if home is not None else any(out is t for t in ts)
            if mine and out.requires_grad:
                for idx in np.ndindex(out.shape):
                    seed = np.zeros(out.shape, out.dtype)
                    seed[idx] = 1
                    for j, g in zip(jacs, gradients(out, ts, seed, retain_graph=True)):
                        if g is not None:
                            j[idx] = g
            else:
                warnings.warn(
                    "jacobian: the output does not depend on the differentiated "
                    "argument(s); the Jacobian is zero",
                    UserWarning,
                    stacklevel=2,
                )
            per_arg = _regroup(jacs, leaves)
            return per_arg[0] if single else tuple(per_arg)
        finally:
            del out
            _done(tape, leaves)

    return wrapper


jacrev = jacobian


# --- forward mode -------------------------------------------------------------------------


def _custom_jvp(tape: Tape, k: int, tangents: list) -> list:
    """Forward mode through a custom ``Function``: its ``jvp(ctx, *tangents)``."""
    cls, ctx, nargs, positions = tape.custom_entry(k)
    if ctx is None:
        raise RuntimeError(FREED_MESSAGE)
    if cls.jvp is Function.jvp:
        raise NotImplementedError(
            f"forward mode through custom function {cls.__name__}: it defines no "
            "jvp(ctx, *tangents) staticmethod (one tangent per output, as in PyTorch)"
        )
    if is_grad_enabled():
        raise NotImplementedError(
            f"forward mode through custom function {cls.__name__} inside a derivative "
            "that is differentiated again: its jvp computes on NumPy arrays"
        )
    ins, outs = tape.node_links(k)
    args: list[Any] = [None] * nargs
    for p, s, t in zip(positions, ins, tangents):
        zero = np.zeros(tape.slot_shape(s), tape.slot_dtype(s))
        args[p] = zero if t is None else np.asarray(values_of(t), zero.dtype)
    result = cls.jvp(ctx, *args)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(outs):
        raise RuntimeError(
            f"function {cls.__name__}.jvp returned {len(result)} tangents, expected "
            f"{len(outs)} (one per output)"
        )
    checked = []
    for j, (s, t) in enumerate(zip(outs, result)):
        shape = tape.slot_shape(s)
        if t is None:
            checked.append(None)
            continue
        t = np.asarray(values_of(t))
        if t.shape != shape:
            raise RuntimeError(
                f"function {cls.__name__}.jvp returned a tangent of shape {t.shape} for "
                f"output {j}, expected {shape}"
            )
        checked.append(t.astype(tape.slot_dtype(s), copy=False))
    return checked


def _tangent(t: Any, view: Tensor, where: str) -> Any:
    """A tangent for ``view``: its shape, cast to its dtype (a tensor stays one)."""
    if isinstance(t, Tensor):
        if t.shape != view.shape:
            raise ValueError(f"{where}: tangent of shape {t.shape} for a primal of {view.shape}")
        return t if t.dtype == view.dtype else t.astype(view.dtype)
    arr = np.asarray(t)
    if arr.shape != view.shape:
        raise ValueError(f"{where}: tangent of shape {arr.shape} for a primal of {view.shape}")
    return arr.astype(view.dtype)


class _Recording:
    """Where forward mode records ``f``: the caller's tape in recorded mode (the
    tangents then carry the caller's dependences), else a transform tape of its own,
    released afterwards."""

    def __init__(self, graph: bool) -> None:
        self.graph = graph
        self.tape = current_tape() if graph else enter(TRANSFORM, True, born0=serial())

    def close(self) -> None:
        if not self.graph:
            leave(self.tape)

    def check_closures(self, outs: list[Tensor], hi: int) -> None:
        """Plain mode returns NumPy values, which cannot carry a dependence on a
        tensor from outside that requires grad: refuse, as the reverse transforms do."""
        if self.graph:
            return
        outside = {slot for slot, t in self.tape.foreign.values() if t.requires_grad}
        if not outside:
            return
        live, _ = graphwalk.reach(self.tape, outside, hi)
        if any(home_of(o) is not None and home_of(o)[1] in live for o in outs):
            raise RuntimeError(
                "the function's result depends on a tensor that requires grad but is not "
                "one of the transform's arguments (a closure, global or attribute): pass "
                "it as an argument, or .detach() it"
            )

    def push(self, tangents: dict[int, Any], hi: int) -> dict[int, Any]:
        with enable_grad() if self.graph else no_grad():
            return graphwalk.forward(self.tape, tangents, hi, _custom_jvp)


def _out_tangents(outs: list, pushed: dict[int, Any], graph: bool) -> list:
    found = []
    for o in outs:
        home = home_of(o) if isinstance(o, Tensor) else None
        t = pushed.get(home[1]) if home is not None else None
        if t is None:
            t = np.zeros(np.shape(values_of(o)), np.asarray(values_of(o)).dtype)
        found.append(as_tensor(t) if graph else np.asarray(values_of(t)))
    return found


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """Forward mode: ``f(*primals)`` and its derivative along ``tangents``.

    Parameters
    ----------
    f
        Function of the primals (arrays, tensors or pytrees of them).
    primals, tangents
        Tuples (or lists) of the same length and structure: the point, and the
        direction (one tangent per primal leaf, of its shape).

    Returns
    -------
    tuple
        ``(out, tangent_out)``: NumPy values in the structure ``f`` returns; tensors in
        the caller's graph when a primal or tangent requires grad (forward-over-reverse:
        ``tg.jvp(tg.grad(f), (x,), (v,))`` is a Hessian-vector product).

    Each row's tangent rule comes from the op table (see ``tapegrad.derivatives``);
    custom functions need a ``jvp`` staticmethod.
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    rec = _Recording(_needs_graph(primals, tangents))
    try:
        args, groups = _aliases(primals, tuple(range(len(primals))), "jvp")
        out = f(*args)
        outs, rebuild = flatten(out)
        hi = rec.tape.h[H_NNODES]
        rec.check_closures(outs, hi)
        seeds: dict[int, Any] = {}
        for (views, _, _), t in zip(groups, tangents):
            t_leaves, _ = flatten(t)
            if len(t_leaves) != len(views):
                raise ValueError("jvp: each tangent must have its primal's structure")
            for v, tv in zip(views, t_leaves):
                seeds[home_of(v)[1]] = _tangent(tv, v, "jvp")
        pushed = rec.push(seeds, hi)
        found = _out_tangents(outs, pushed, rec.graph)
        if rec.graph:
            return out, rebuild(found)
        values = [np.asarray(values_of(o)) for o in outs]
        return rebuild(values), rebuild(found)
    finally:
        rec.close()


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Jacobian of ``f`` by forward mode: ``f`` is recorded once and one tangent is
    pushed through per input element (cheaper than :func:`jacobian` when the
    arguments have fewer elements than the output). Same layout as ``jacobian``:
    ``out.shape + x.shape``."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "jacfwd")
        rec = _Recording(_needs_graph(args, kwargs))
        try:
            args2, groups = _aliases(args, nums, "jacfwd")
            out = _as_output(f(*args2, **kwargs))
            hi = rec.tape.h[H_NNODES]
            rec.check_closures([out], hi)
            flat = [v for views, _, _ in groups for v in views]
            jacs = []
            for v in flat:
                columns = []
                for idx in np.ndindex(v.shape):
                    e = np.zeros(v.shape, v.dtype)
                    e[idx] = 1
                    pushed = rec.push({home_of(v)[1]: e}, hi)
                    columns.append(_out_tangents([out], pushed, rec.graph)[0])
                if rec.graph:
                    stacked = stack(columns, axis=-1) if columns else None
                    jac = (
                        reshape(stacked, out.shape + v.shape)
                        if stacked is not None
                        else as_tensor(np.zeros(out.shape + v.shape, v.dtype))
                    )
                else:
                    jac = np.zeros(out.shape + v.shape, np.result_type(out.dtype, v.dtype))
                    if columns:
                        jac = np.stack(columns, axis=-1).reshape(out.shape + v.shape)
                jacs.append(jac)
            per_arg = _regroup(jacs, groups)
            return per_arg[0] if single else tuple(per_arg)
        finally:
            rec.close()

    return wrapper


# --- second order ---------------------------------------------------------------------------


def hessian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Hessian of scalar ``f``: the Jacobian (reverse mode) of its gradient, which
    is recorded once (reverse over reverse) and run backward once per element.

    For one array argument the result has shape ``x.shape + x.shape``. For a pytree
    argument, or a tuple ``argnums``, blocks are nested as in ``jax.hessian``:
    ``H[i][j]`` has shape ``x_i.shape + x_j.shape``.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "hessian")
        shapes: list[tuple[int, ...]] = []

        def flat_gradient(*a: Any, **kw: Any) -> Tensor:
            g = grad(f, nums[0] if single else nums)(*a, **kw)
            leaves = flatten(g)[0]
            shapes[:] = [tuple(np.shape(values_of(x))) for x in leaves]
            return concatenate([reshape(as_tensor(x), -1) for x in leaves])

        jac = jacobian(flat_gradient, nums[0] if single else nums)(*args, **kwargs)
        groups = [jac] if single else list(jac)
        cols = []  # the Jacobian's blocks by column (argument leaf); their rebuilds
        rebuilds = []
        for group in groups:
            leaves, rebuild = flatten(group)
            rebuilds.append((rebuild, len(leaves)))
            cols.extend(leaves)
        offsets = np.cumsum([0, *[int(np.prod(s)) for s in shapes]])
        blocks = [
            [
                reshape(c[offsets[i] : offsets[i + 1]], shapes[i] + tuple(np.shape(c))[1:])
                if isinstance(c, Tensor)
                else c[offsets[i] : offsets[i + 1]].reshape(shapes[i] + c.shape[1:])
                for c in cols
            ]
            for i in range(len(shapes))
        ]

        def by_columns(row: list) -> Any:
            out, j = [], 0
            for rebuild, n in rebuilds:
                out.append(rebuild(row[j : j + n]))
                j += n
            return out[0] if single else tuple(out)

        rows = [by_columns(b) for b in blocks]
        out, i = [], 0
        for rebuild, n in rebuilds:
            out.append(rebuild(rows[i : i + n]))
            i += n
        return out[0] if single else tuple(out)

    return wrapper


def hvp(f: Callable, primals: Any, v: Any) -> Any:
    """Hessian-vector product ``H(primals) v`` of scalar ``f``, without forming H.

    ``primals`` is one argument or a tuple of arguments (each may be a pytree), ``v``
    the same structure; the result has that structure too. Computed as the gradient of
    ``<grad f(x), v>`` (reverse over reverse: the inner gradient is recorded, then one
    compiled backward pass), about four times the cost of one gradient.
    """
    single = not isinstance(primals, tuple)
    ps = (primals,) if single else primals
    vs = (v,) if single else tuple(v)
    if len(vs) != len(ps):
        raise ValueError(f"hvp: {len(ps)} primals but {len(vs)} vectors")
    nums = tuple(range(len(ps)))

    def inner(*args: Any) -> Tensor:
        gs = grad(f, nums)(*args)
        total = None
        for g, d in zip(gs, vs):
            g_leaves, _ = flatten(g)
            d_leaves, _ = flatten(d)
            if len(g_leaves) != len(d_leaves):
                raise ValueError("hvp: v must have the structure of primals")
            for gl, dl in zip(g_leaves, d_leaves):
                term = rsum(as_tensor(gl) * dl)
                total = term if total is None else total + term
        return total

    result = grad(inner, nums)(*ps)
    return result[0] if single else result


# --- checkpointing --------------------------------------------------------------------------


class _Checkpoint(Function):
    """``checkpoint(f, *args)`` as one node: the forward keeps only the inputs; the
    backward records ``f`` again and pulls the cotangent back through it."""

    @staticmethod
    def forward(ctx: Any, f: Callable, diff: tuple[int, ...], *values: Any) -> Any:
        ctx.f, ctx.diff = f, diff
        ctx.save_for_backward(*values)
        tape = enter(TRANSFORM, True, born0=serial())
        try:
            out = f(*[as_tensor(v) if i in diff else v for i, v in enumerate(values)])
            if not isinstance(out, Tensor):
                raise TypeError(f"checkpoint: f must return a tensor, got {type(out).__name__}")
            outside = [t for _, t in tape.foreign.values() if t.requires_grad]
            if outside:
                raise RuntimeError(
                    "checkpoint: f reads a tensor that requires grad but is not one of its "
                    f"arguments (shape {outside[0].shape}): its gradient would be lost. "
                    "Pass it as an argument of checkpoint"
                )
            return out.numpy()
        finally:
            leave(tape)

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        values = list(ctx.saved_tensors)
        diff = ctx.diff

        def again(*xs: Any) -> Any:
            full = list(values)
            for i, x in zip(diff, xs):
                full[i] = x
            return ctx.f(*full)

        # recorded on a transform tape that goes back to the pool afterwards, so the
        # blocks of a long loop reuse one tape's memory one after the other
        nums = tuple(range(len(diff)))
        rec, leaves, tape = _record(again, tuple(values[i] for i in diff), {}, nums, "checkpoint")
        try:
            grads = _differentiate(_as_output(rec), tape, leaves, "checkpoint", g)
        finally:
            del rec
            _done(tape, leaves)
        out: list[Any] = [None, None] + [None] * len(values)
        for i, gi in zip(diff, grads):
            out[2 + i] = gi
        return tuple(out)


def checkpoint(f: Callable, *args: Any) -> Tensor:
    """``f(*args)``, keeping only ``args`` for the backward pass, which runs ``f``
    again to get its gradients (HIPS autograd's ``checkpoint``,
    ``torch.utils.checkpoint``): memory for time.

    A time-stepping loop that checkpoints every ``k`` steps keeps one state per ``k``
    steps instead of every intermediate. ``f`` must return one tensor and read every
    tensor that requires grad through its arguments (parameters included); one it
    reads from a closure raises. Higher-order derivatives through a checkpoint are not
    supported (its backward is a recomputation in NumPy values).
    """
    diff = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor) and a.dtype.kind == "f")
    return _Checkpoint.apply(f, diff, *args)
