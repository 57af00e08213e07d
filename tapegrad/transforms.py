"""Function transforms with HIPS autograd's and JAX's spelling: ``grad``,
``value_and_grad``, ``vjp``, ``jacobian``.

Arguments may be NumPy arrays, Python numbers, tensors, or nested lists / tuples / dicts
of them ("pytrees"); gradients come back as NumPy arrays in the same structure. Each call
records ``f`` once on fresh leaf tensors and runs one backward pass per requested
cotangent (``jacobian``: one per output element).

``value_and_grad(f)`` plugs straight into ``scipy.optimize.minimize(fun, x0, jac=True)``:
it returns ``(float, ndarray)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .tensor import Tensor, tensor

__all__ = ["grad", "jacobian", "value_and_grad", "vjp"]


# --- pytrees -----------------------------------------------------------------------------


def _flatten(tree: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """Leaves of a nested list/tuple/dict and a function rebuilding the structure."""
    if isinstance(tree, list | tuple) and not isinstance(tree, Tensor):
        parts = [_flatten(t) for t in tree]
        counts = [len(p[0]) for p in parts]
        kind = type(tree)

        def unflatten(leaves: list[Any]) -> Any:
            out, i = [], 0
            for (_, rebuild), n in zip(parts, counts):
                out.append(rebuild(leaves[i : i + n]))
                i += n
            return kind(out) if kind in (list, tuple) else kind(*out)

        return [leaf for p in parts for leaf in p[0]], unflatten
    if isinstance(tree, dict):
        keys = list(tree)
        parts = [_flatten(tree[k]) for k in keys]
        counts = [len(p[0]) for p in parts]

        def unflatten_dict(leaves: list[Any]) -> dict:
            out, i = {}, 0
            for k, (_, rebuild), n in zip(keys, parts, counts):
                out[k] = rebuild(leaves[i : i + n])
                i += n
            return out

        return [leaf for p in parts for leaf in p[0]], unflatten_dict
    return [tree], lambda leaves: leaves[0]


def _leaf_tensor(value: Any, where: str) -> Tensor:
    data = value._value() if isinstance(value, Tensor) else value
    arr = np.asarray(data)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{where}: cannot differentiate with respect to {arr.dtype} values")
    if arr.dtype.kind != "f":
        raise TypeError(
            f"{where}: differentiating with respect to integer or bool values "
            f"({arr.dtype}) is not defined; pass floats"
        )
    return tensor(arr, requires_grad=True)


def _gradient_like(t: Tensor, original: Any) -> Any:
    g = t.grad if t.grad is not None else np.zeros(t.shape, t.dtype)
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


def _record(f: Callable, args: tuple, kwargs: dict, argnums: tuple[int, ...], where: str):
    """Call ``f`` with the differentiated arguments replaced by leaf tensors."""
    args = list(args)
    leaves_per_arg = []
    for a in argnums:
        leaves, rebuild = _flatten(args[a])
        ts = [_leaf_tensor(v, f"{where}: argument {a}") for v in leaves]
        leaves_per_arg.append((ts, leaves, rebuild))
        args[a] = rebuild(ts)
    return f(*args, **kwargs), leaves_per_arg


def _grads(leaves_per_arg: list) -> list[Any]:
    return [
        rebuild([_gradient_like(t, v) for t, v in zip(ts, leaves)])
        for ts, leaves, rebuild in leaves_per_arg
    ]


def _scalar_output(out: Any, where: str) -> Tensor:
    if not isinstance(out, Tensor):
        out = tensor(np.asarray(out, dtype=float))
    if out.size != 1:
        raise TypeError(
            f"{where}: the function must return a scalar (one element), got "
            f"shape {out.shape}; use jacobian or vjp for non-scalar outputs"
        )
    return out


def _to_numpy(tree: Any) -> Any:
    leaves, rebuild = _flatten(tree)
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
        out, leaves = _record(f, args, kwargs, nums, "value_and_grad")
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError("value_and_grad: has_aux=True needs f to return (value, aux)")
            out, aux = out
        out = _scalar_output(out, "value_and_grad")
        if out.requires_grad:
            out.backward()
        grads = _grads(leaves)
        value = float(out.item())
        result = grads[0] if single else tuple(grads)
        if has_aux:
            return (value, _to_numpy(aux)), result
        return value, result

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
    times; the graph is kept until ``vjp_fn`` is dropped.
    """
    out, leaves = _record(f, args, {}, tuple(range(len(args))), "vjp")
    if not isinstance(out, Tensor):
        raise TypeError(f"vjp: f must return a tensor, got {type(out).__name__}")
    value = out.numpy()

    def vjp_fn(cotangent: Any) -> tuple[Any, ...]:
        c = np.asarray(cotangent._value() if isinstance(cotangent, Tensor) else cotangent)
        if c.shape != out.shape:
            raise ValueError(
                f"vjp: cotangent has shape {c.shape}, the output has shape {out.shape}"
            )
        for ts, _, _ in leaves:
            for t in ts:
                t.grad = None
        if out.requires_grad:
            out.backward(gradient=c, retain_graph=True)
        return tuple(_grads(leaves))

    return value, vjp_fn


def jacobian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The Jacobian of ``f`` by reverse mode, one backward pass per output element.

    ``jacobian(f)(x)`` has shape ``out.shape + x.shape``; for a tuple ``argnums`` a tuple
    of those. Pytree arguments are not supported here (arrays and numbers are).
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "jacobian")
        args = list(args)
        ts = []
        for a in nums:
            ts.append(_leaf_tensor(args[a], f"jacobian: argument {a}"))
            args[a] = ts[-1]
        out = f(*args, **kwargs)
        if not isinstance(out, Tensor):
            out = tensor(np.asarray(out, dtype=float))
        jacs = [np.zeros(out.shape + t.shape, t.dtype) for t in ts]
        if out.requires_grad:
            for idx in np.ndindex(out.shape):
                seed = np.zeros(out.shape, out.dtype)
                seed[idx] = 1
                for t in ts:
                    t.grad = None
                out.backward(gradient=seed, retain_graph=True)
                for j, t in zip(jacs, ts):
                    if t.grad is not None:
                        j[idx] = t.grad
        return jacs[0] if single else tuple(jacs)

    return wrapper
