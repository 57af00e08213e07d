"""Gradient checking for users' own functions (and tapegrad's own tests).

:func:`check_grads` compares derivatives with central differences, the way HIPS
autograd's ``check_grads`` does: for a random output cotangent ``v`` and, for each
argument, a random input direction ``u``, the VJP ``<J^T v, u>`` (reverse mode) and the
JVP ``<v, J u>`` (forward mode) must equal ``(<v, f(x + eps u)> - <v, f(x - eps u)>) /
(2 eps)``. One scalar per argument checks the whole Jacobian in expectation; on failure
the report localises the error element by element (for arguments of up to 4096
elements). Higher orders check the derivative itself, as a function of the arguments,
one order down, in every mode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .forward_mode import jvp
from .grad_mode import no_grad
from .ops.reduce.front import sum as rsum
from .ops.shape.front import concatenate, reshape
from .recording import tensor
from .tensors import Tensor
from .transforms import grad

__all__ = ["GradientCheckError", "check_grads", "gradcheck"]


class GradientCheckError(AssertionError):
    """Raised by :func:`check_grads` when a derivative disagrees with finite differences.

    An ``AssertionError``, so test runners report it as a failed check. The message
    names the argument, the two directional derivatives and, for arguments of up to
    4096 elements, the element with the largest error. Also raised when rounding in
    the finite differences is too large next to the derivative for the check to
    decide.

    See Also
    --------
    check_grads : The check that raises it.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> from tapegrad.testing import GradientCheckError, check_grads
    >>> class Wrong(tg.Function):  # the derivative of x**2 is not 3x
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 2
    ...
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 3.0 * x * g
    >>> try:
    ...     check_grads(Wrong.apply, [np.array([0.5, 1.5])])
    ... except GradientCheckError as e:
    ...     print(str(e).splitlines()[0])
    check_grads: gradient of argument 0 (shape (2,), ...) disagrees with central differences:
    """


def _as_array(v: Any) -> np.ndarray:
    return v.numpy() if isinstance(v, Tensor) else np.asarray(v)


def _evaluate(f: Callable, args: Sequence[np.ndarray]) -> np.ndarray:
    with no_grad():
        return np.asarray(_as_array(f(*[tensor(a) for a in args])), dtype=np.float64)


def check_grads(
    f: Callable[..., Any],
    args: Sequence[Any],
    *,
    order: int = 1,
    modes: Sequence[str] = ("rev",),
    eps: float | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
) -> None:
    """Check ``f``'s gradients against central differences.

    Parameters
    ----------
    f
        Function of tensors returning a tensor (any shape).
    args
        The point to check at: arrays (float64 recommended; float32 works with looser
        ``eps`` and tolerances). Every argument is checked.
    order
        Derivative order: 2 also checks the derivative of the derivative (by the
        modes asked), and so on.
    modes
        ``"rev"`` (VJP, backward) and/or ``"fwd"`` (JVP, forward mode).
    eps
        Finite-difference step (default 1e-6 for float64, 1e-2 for float32).
    rtol, atol
        Tolerances on each directional derivative (defaults 1e-6 and 1e-8 for float64,
        2e-3 and 1e-4 for float32), relative to its magnitude.
    seed
        Seed of the random cotangent and directions.

    Raises
    ------
    GradientCheckError
        Naming the argument, the two directional derivatives, and where (which
        element) the largest error is.
    ValueError
        ``modes`` is empty or names a mode other than ``"rev"`` and ``"fwd"``, or
        ``order`` is less than 1.
    TypeError
        ``f`` does not return a tensor.

    See Also
    --------
    gradcheck : PyTorch's spelling, returning a bool.

    Notes
    -----
    For a random output cotangent ``v`` and, for each argument, a random input
    direction ``u``, the VJP ``<J^T v, u>`` (reverse mode) and the JVP ``<v, J u>``
    (forward mode) must equal ``(<v, f(x + eps u)> - <v, f(x - eps u)>) / (2 eps)``,
    as in HIPS autograd's ``check_grads``. One scalar per argument checks the whole
    Jacobian in expectation. Higher orders check the derivative itself, as a function
    of the arguments, one order down, in every mode.

    Examples
    --------
    >>> import numpy as np, tapegrad.numpy as tnp
    >>> from tapegrad.testing import check_grads
    >>> def f(x, y):
    ...     return tnp.sin(x) * y ** 2
    >>> check_grads(f, [np.array([0.5, 1.5]), np.array([2.0, -1.0])], order=2, modes=("rev", "fwd"))
    """
    unknown = set(modes) - {"rev", "fwd"}
    if unknown or not modes:
        raise ValueError(f"check_grads: modes must be 'rev' and/or 'fwd', got {tuple(modes)}")
    if order < 1:
        raise ValueError(f"check_grads: order must be >= 1, got {order}")
    tolerances = dict(eps=eps, rtol=rtol, atol=atol, seed=seed)
    if "rev" in modes:
        _check_reverse(f, args, **tolerances)
    if "fwd" in modes:
        _check_forward(f, args, **tolerances)
    if order > 1:
        for mode in modes:
            derivative = _derivative(f, args, mode, seed)
            check_grads(derivative, args, order=order - 1, modes=modes, **tolerances)


def _derivative(f: Callable, args: Sequence[Any], mode: str, seed: int) -> Callable:
    """``f``'s derivative as a function of the same arguments, for the next order: the
    VJP with a fixed random cotangent (all arguments' gradients, flattened and joined),
    or the JVP along fixed random directions."""
    arrays = [np.array(_as_array(a)) for a in args]
    rng = np.random.default_rng(seed + 1)
    with no_grad():
        shape = np.shape(_as_array(f(*[tensor(a) for a in arrays])))
    v = rng.standard_normal(shape)
    us = [rng.standard_normal(a.shape).astype(a.dtype) for a in arrays]
    nums = tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f")

    def vjp_of(*xs: Any) -> Any:
        gs = grad(lambda *ys: rsum(f(*ys) * v), nums)(*xs)
        return concatenate([reshape(g, -1) for g in gs])

    def jvp_of(*xs: Any) -> Any:
        return jvp(f, xs, us)[1]

    return vjp_of if mode == "rev" else jvp_of


def _tolerances(arrays: list[np.ndarray], eps: Any, rtol: Any, atol: Any) -> tuple:
    low = any(a.dtype == np.float32 for a in arrays)
    eps = eps if eps is not None else (1e-2 if low else 1e-6)
    rtol = rtol if rtol is not None else (2e-3 if low else 1e-6)
    atol = atol if atol is not None else (1e-4 if low else 1e-8)
    return eps, rtol, atol


def _check_forward(
    f: Callable, args: Sequence[Any], eps: Any, rtol: Any, atol: Any, seed: int
) -> None:
    """``<v, J u>`` by forward mode against central differences, all arguments moved."""
    arrays = [np.array(_as_array(a)) for a in args]
    eps, rtol, atol = _tolerances(arrays, eps, rtol, atol)
    rng = np.random.default_rng(seed + 2)
    us = [rng.standard_normal(a.shape) * (a.dtype.kind == "f") for a in arrays]
    out, t = jvp(f, arrays, [u.astype(a.dtype) for u, a in zip(us, arrays)])
    v = rng.standard_normal(np.shape(out))
    analytic = float(np.vdot(v, np.asarray(t, np.float64)))

    def move(step: float) -> list[np.ndarray]:
        return [(a.astype(np.float64) + step * u).astype(a.dtype) for a, u in zip(arrays, us)]

    unit = max(np.finfo(a.dtype).eps for a in arrays if a.dtype.kind == "f")
    numeric, noise = _central(f, move, v, eps, unit)
    if not _agree(analytic, numeric, noise, rtol, atol, eps):
        raise GradientCheckError(
            "check_grads: forward mode disagrees with central differences: directional "
            f"derivative {analytic:.10g} by JVP, {numeric:.10g} by finite differences"
        )


def _central(f: Callable, move: Callable, v: np.ndarray, eps: float, unit: float) -> tuple:
    """``<v, (f(x + eps u) - f(x - eps u)) / (2 eps)>`` and the rounding it may carry.

    The difference is taken element by element before the product with ``v``: values
    that do not move cancel exactly however large they are (a constant offset), and
    only the values that moved contribute rounding noise, amplified by ``1 / eps``."""
    hi, lo = _evaluate(f, move(eps)), _evaluate(f, move(-eps))
    diff = hi - lo
    numeric = float(np.vdot(v, diff)) / (2 * eps)
    moved = diff != 0
    noise = 50 * unit * float(np.sum(np.abs(v * hi)[moved])) / eps
    return numeric, noise


def _agree(analytic: float, numeric: float, noise: float, rtol: float, atol: float, eps: float):
    """Whether the two directional derivatives agree; raises when rounding noise is so
    large next to them that the check could not tell a wrong one from a right one."""
    scale = max(abs(analytic), abs(numeric))
    if noise > atol and noise > 0.25 * scale:
        raise GradientCheckError(
            f"check_grads: inconclusive: f's values are so large next to its derivative "
            f"({scale:.3g}) that rounding in central differences with eps={eps:g} (about "
            f"{noise:.3g}) hides any error; check a function with the large constant part "
            "removed, or pass a larger eps"
        )
    return abs(analytic - numeric) <= atol + rtol * scale + noise


def _check_reverse(
    f: Callable, args: Sequence[Any], eps: Any, rtol: Any, atol: Any, seed: int
) -> None:
    arrays = [np.array(_as_array(a)) for a in args]
    eps, rtol, atol = _tolerances(arrays, eps, rtol, atol)
    rng = np.random.default_rng(seed)

    leaves = [tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = f(*leaves)
    if not isinstance(out, Tensor):
        raise TypeError(f"check_grads: f must return a Tensor, got {type(out).__name__}")
    v = rng.standard_normal(out.shape)
    if out.requires_grad:
        out.backward(gradient=v.astype(out.dtype))

    for i, (a, leaf) in enumerate(zip(arrays, leaves, strict=True)):
        if a.dtype.kind != "f":
            continue
        g = leaf.grad if leaf.grad is not None else np.zeros_like(a)
        if g.shape != a.shape or g.dtype != a.dtype:
            raise GradientCheckError(
                f"check_grads: gradient of argument {i} has shape {g.shape} and dtype "
                f"{g.dtype}; the argument has shape {a.shape} and dtype {a.dtype}"
            )
        u = rng.standard_normal(a.shape)
        analytic = float(np.vdot(g.astype(np.float64), u))

        def move(step: float, i: int = i, a: np.ndarray = a, u: np.ndarray = u) -> list:
            moved = list(arrays)
            moved[i] = (a.astype(np.float64) + step * u).astype(a.dtype)
            return moved

        numeric, noise = _central(f, move, v, eps, np.finfo(a.dtype).eps)
        if not _agree(analytic, numeric, noise, rtol, atol, eps):
            raise GradientCheckError(_report(f, arrays, i, v, g, eps, analytic, numeric))


def _report(
    f: Callable,
    arrays: list[np.ndarray],
    i: int,
    v: np.ndarray,
    g: np.ndarray,
    eps: float,
    analytic: float,
    numeric: float,
) -> str:
    lines = [
        f"check_grads: gradient of argument {i} (shape {arrays[i].shape}, "
        f"dtype {arrays[i].dtype}) disagrees with central differences:",
        f"  directional derivative: reverse mode {analytic:.10g}, "
        f"finite differences {numeric:.10g}",
    ]
    a = arrays[i]
    if a.size <= 4096:
        fd = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            hi, lo = list(arrays), list(arrays)
            hi[i] = a.astype(np.float64).copy()
            lo[i] = a.astype(np.float64).copy()
            hi[i][idx] += eps
            lo[i][idx] -= eps
            hi[i], lo[i] = hi[i].astype(a.dtype), lo[i].astype(a.dtype)
            fd[idx] = (np.vdot(v, _evaluate(f, hi)) - np.vdot(v, _evaluate(f, lo))) / (2 * eps)
        err = np.abs(g - fd)
        where = np.unravel_index(int(np.argmax(err)), a.shape) if a.ndim else ()
        lines.append(
            f"  max elementwise error {float(np.max(err)):.3g} at index {where}: "
            f"reverse mode {g[where]!r}, finite differences {fd[where]!r}"
        )
    return "\n".join(lines)


def gradcheck(
    f: Callable[..., Any],
    inputs: Sequence[Any],
    *,
    eps: float | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    raise_exception: bool = True,
    seed: int = 0,
) -> bool:
    """Check ``f``'s gradients against central differences, PyTorch's spelling.

    A wrapper of :func:`check_grads` (first order, reverse mode): ``True`` when the
    gradients agree; otherwise raise (default) or return ``False``.

    Parameters
    ----------
    f : callable
        Function of tensors returning a tensor (any shape).
    inputs : sequence of array_like
        The point to check at (float64 recommended).
    eps : float, optional
        Finite-difference step (default 1e-6 for float64, 1e-2 for float32).
    atol, rtol : float, optional
        Tolerances on each directional derivative (see :func:`check_grads`).
    raise_exception : bool, optional
        Raise :class:`GradientCheckError` on a disagreement (default) instead of
        returning ``False``.
    seed : int, optional
        Seed of the random cotangent and directions.

    Returns
    -------
    bool
        ``True`` when the gradients agree; ``False`` when they do not and
        ``raise_exception`` is false.

    Raises
    ------
    GradientCheckError
        The gradients disagree and ``raise_exception`` is true.
    TypeError
        ``f`` does not return a tensor.

    See Also
    --------
    check_grads : Forward mode and higher orders too.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> tg.gradcheck(lambda a, b: a @ b, [np.eye(2), np.array([1.0, 2.0])])
    True
    """
    try:
        check_grads(f, inputs, eps=eps, rtol=rtol, atol=atol, seed=seed)
    except GradientCheckError:
        if raise_exception:
            raise
        return False
    return True
