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

from .boundary import HIGHER_ORDER
from .engine import gradients
from .pytree import flatten
from .tape import TRANSFORM, Tape, enter, leave
from .tensors import (
    Tensor,
    as_tensor,
    home_of,
    is_grad_enabled,
    mark_differentiated,
    serial,
    tensor,
)

__all__ = ["grad", "jacobian", "value_and_grad", "vjp"]


def _leaf_tensor(value: Any, where: str, grad_on: bool) -> Tensor:
    if isinstance(value, Tensor):
        if value.requires_grad and grad_on:
            raise NotImplementedError(
                HIGHER_ORDER.format(
                    what=f"{where} is a tensor that requires grad (differentiating a "
                    "gradient, or a transform nested in another one)"
                )
            )
        data = value._value()
    else:
        data = value
    arr = np.asarray(data)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{where}: cannot differentiate with respect to {arr.dtype} values")
    if arr.dtype.kind != "f":
        raise TypeError(
            f"{where}: differentiating with respect to integer or bool values "
            f"({arr.dtype}) is not defined; pass floats"
        )
    t = tensor(arr, requires_grad=True)
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
            ts = [_leaf_tensor(v, f"{where}: argument {a}", grad_on) for v in leaves]
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
    grads, i = [], 0
    for ts, leaves, rebuild in leaves_per_arg:
        part = found[i : i + len(ts)]
        grads.append(rebuild([_gradient_like(g, t, v) for g, t, v in zip(part, ts, leaves)]))
        i += len(ts)
    return grads


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
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "value_and_grad")
        out, leaves, tape = _record(f, args, kwargs, nums, "value_and_grad")
        try:
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError("value_and_grad: has_aux=True needs f to return (value, aux)")
                out, aux = out
            out = _scalar_output(out, "value_and_grad")
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
            per_arg, i = [], 0
            for group, _, rebuild in leaves:
                per_arg.append(rebuild(jacs[i : i + len(group)]))
                i += len(group)
            return per_arg[0] if single else tuple(per_arg)
        finally:
            del out
            _done(tape, leaves)

    return wrapper
