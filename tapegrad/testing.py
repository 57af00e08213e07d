"""Gradient checking for users' own functions (and tapegrad's own tests).

:func:`check_grads` compares reverse-mode gradients with central differences, the way
HIPS autograd's ``check_grads`` does: for a random output cotangent ``v`` and, for each
argument, a random input direction ``u``, the VJP ``<J^T v, u>`` must equal
``(<v, f(x + eps u)> - <v, f(x - eps u)>) / (2 eps)``. One scalar per argument checks
the whole Jacobian in expectation; on failure the report localises the error
element by element (for arguments of up to 4096 elements).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .tensors import Tensor, no_grad, tensor

__all__ = ["GradientCheckError", "check_grads", "gradcheck"]


class GradientCheckError(AssertionError):
    """Raised by :func:`check_grads` when a gradient disagrees with finite differences."""


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
        Derivative order; tapegrad computes first derivatives (1).
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
    """
    if order != 1:
        raise NotImplementedError("check_grads: only first-order gradients (order=1)")
    arrays = [np.array(_as_array(a)) for a in args]
    low = any(a.dtype == np.float32 for a in arrays)
    eps = eps if eps is not None else (1e-2 if low else 1e-6)
    rtol = rtol if rtol is not None else (2e-3 if low else 1e-6)
    atol = atol if atol is not None else (1e-4 if low else 1e-8)
    rng = np.random.default_rng(seed)

    leaves = [tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = f(*leaves)
    if not isinstance(out, Tensor):
        raise TypeError(f"check_grads: f must return a Tensor, got {type(out).__name__}")
    v = rng.standard_normal(out.shape)
    fx = np.asarray(_as_array(out), dtype=np.float64)
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

        def along(step: float, i: int = i, a: np.ndarray = a, u: np.ndarray = u) -> float:
            moved = list(arrays)
            moved[i] = (a.astype(np.float64) + step * u).astype(a.dtype)
            return float(np.vdot(v, _evaluate(f, moved)))

        numeric = (along(eps) - along(-eps)) / (2 * eps)
        # rounding in f(x +- eps u) is amplified by 1/eps: allow for it
        noise = 50 * np.finfo(a.dtype).eps * float(np.sum(np.abs(v * fx))) / eps
        tol = atol + rtol * max(abs(analytic), abs(numeric)) + noise
        if not abs(analytic - numeric) <= tol:
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
    """PyTorch-style wrapper of :func:`check_grads`: ``True`` when the gradients agree;
    otherwise raise (default) or return ``False``."""
    try:
        check_grads(f, inputs, eps=eps, rtol=rtol, atol=atol, seed=seed)
    except GradientCheckError:
        if raise_exception:
            raise
        return False
    return True
