"""The arguments of ``odeint`` and ``solve_ivp`` read: which parameters are numbers,
arrays or containers of them, their values without recording, the times checked, and
the message that refuses higher-order derivatives through a solve."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import numpy as tnp
from .numpy_protocols import holds_tensor
from .pytree import flatten
from .recording import tensor
from .tensors import Tensor

MAX_STEPS = 100_000  # the default step limit of a solve (and of its adjoint)


def is_numeric(v: Any) -> bool:
    return isinstance(v, int | float | complex | np.ndarray | np.generic | list | tuple)


def is_tree(q: Any) -> bool:
    """A parameter passed to the function as a pytree, leaf by leaf: a dict, or a list or
    tuple that is not one regular array (``[(W1, b1), (W2, b2)]``, HIPS autograd's
    ``ode_net``; a list of objects). A regular one (``[k1, k2]``, ``(1.0, 2.0)``) is one
    array parameter, as NumPy and SciPy read it."""
    if isinstance(q, dict):
        return True
    if not isinstance(q, list | tuple):
        return False
    try:
        v = unrecorded_values(q)
    except (ValueError, TypeError):  # ragged
        return True
    return v.dtype.kind not in "fiub"


def parameter(q: Any) -> Any:
    """A parameter after ``t``: a pytree as it is (:func:`is_tree`), a regular container
    of tensors as one recorded tensor."""
    return q if is_tree(q) else recorded(q)


def recorded(v: Any) -> Any:
    """A container holding tensors (``[x0, v0]``) as one recorded tensor, so that their
    gradients flow; anything else as it is."""
    if not isinstance(v, Tensor) and isinstance(v, list | tuple) and holds_tensor(v):
        return tnp.asarray(v)
    return v


def unrecorded_values(v: Any) -> np.ndarray:
    """``v``'s values (a container of tensors' too), without recording."""
    if isinstance(v, Tensor):
        return v._value()
    if isinstance(v, list | tuple) and holds_tensor(v):
        return np.asarray([unrecorded_values(e) for e in v])
    return np.asarray(v)


def no_times(name: str, fun: Any, y0: Any, params: Sequence[Any], others: Any, shape: tuple) -> Any:
    """SciPy's answer for no output times: no states (``shape``; ``fun`` is not called),
    in the solvers' dtype, a tensor when an input (``y0``, ``params``, ``others``) is
    one, joined to ``y0``'s graph (its gradient: an empty sum, 0)."""
    if not callable(fun):
        raise TypeError(f"{name}: the right-hand side must be callable, got {type(fun).__name__}")
    y0v = unrecorded_values(y0)
    if y0v.dtype.kind not in "fiub":
        raise TypeError(f"{name}: y0 must be real, got dtype {y0v.dtype}")
    # the solvers' dtype: y0's and the array parameters' (float32 stays float32)
    leaves = [v for q in params for v in (flatten(q)[0] if is_tree(q) else [q])]
    arrays = [y0v, *(unrecorded_values(q) for q in leaves if isinstance(q, Tensor | np.ndarray))]
    dtype = np.result_type(*[a.dtype if a.dtype.kind == "f" else np.float64 for a in arrays])
    dtype = dtype if dtype.kind == "f" and dtype.itemsize >= 4 else np.dtype(np.float64)
    y0 = recorded(y0)
    if isinstance(y0, Tensor):
        return y0.astype(dtype).reshape(-1)[:0].reshape(shape)
    if any(holds_tensor(v) for v in (*params, others)):
        return tensor(np.zeros(shape, dtype))
    return np.zeros(shape, dtype)


def checked_times(name: str, t: Any) -> np.ndarray:
    ts = np.asarray(unrecorded_values(t), np.float64)
    if ts.ndim != 1 or ts.size < 1:
        raise ValueError(f"{name}: the times must be a 1-D array, got shape {ts.shape}")
    if not np.all(np.isfinite(ts)):
        raise ValueError(f"{name}: the times must be finite, got {ts}")
    d = np.diff(ts)
    if d.size and not (np.all(d > 0) or np.all(d < 0)):
        k = int(np.argmax(d <= 0) if d[0] > 0 else np.argmax(d >= 0)) + 1
        raise ValueError(
            f"{name}: the times must be strictly increasing or decreasing; "
            f"t[{k}] = {ts[k]!r} follows t[{k - 1}] = {ts[k - 1]!r}"
        )
    return np.ascontiguousarray(ts)


def refusal_message(name: str, mode: str) -> str:
    """The error for second-order or forward-mode derivatives through a solve (by the
    public function's name): the solve is one node whose backward runs compiled."""
    if mode == "reverse":
        return (
            f"second derivatives (tg.hessian, tg.hvp, tg.grad of tg.grad, "
            f"backward(create_graph=True)) through tapegrad.integrate.{name} are not "
            "supported: the solve is one node whose backward (the discrete reverse pass "
            "or the adjoint) runs compiled, not as recorded ops. To differentiate twice, "
            "write the time steps with tapegrad.numpy ops (a fixed-step RK4 loop, as "
            f"examples/lotka_volterra_uncertainty.py does), or take finite differences "
            f"of {name}'s gradients"
        )
    return (
        f"forward mode (tg.jvp, tg.jacfwd) through tapegrad.integrate.{name} is not "
        "supported: the solve has no tangent rule. Use reverse mode (tg.grad, "
        "tg.jacobian, tg.vjp) for its first derivatives"
    )


def step_limit(name: str, max_steps: int, max_num_steps: int | None) -> int:
    """The step limit, from ``max_steps`` or its other name ``max_num_steps`` (one of
    them)."""
    if max_num_steps is not None:
        if max_steps != MAX_STEPS and max_steps != max_num_steps:
            raise ValueError(
                f"{name}: max_steps={max_steps!r} and max_num_steps={max_num_steps!r} "
                "are two names of one limit; pass one"
            )
        max_steps = max_num_steps
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"{name}: max_steps must be a positive integer, got {max_steps!r}")
    return int(max_steps)


def eval_times(name: str, t_eval: Any, span: np.ndarray) -> np.ndarray:
    """``t_eval``'s times, SciPy's checks against ``span`` (none at all are allowed)."""
    if np.shape(unrecorded_values(t_eval)) == (0,):
        return np.zeros(0)
    te = checked_times(name, t_eval)
    lo, hi = min(span), max(span)
    if np.any(te < lo) or np.any(te > hi):
        raise ValueError(f"{name}: t_eval must lie within t_span {tuple(span)}")
    if te.size > 1 and (te[1] - te[0]) * (span[1] - span[0]) < 0:
        raise ValueError(f"{name}: t_eval must be sorted in the direction of t_span")
    return te


# Hairer and Wanner's stiffness test for Dormand-Prince 5(4) (Solving ODEs II, IV.2):
# ``|h lambda| ~ |h| |k7 - k6| / |y_new - Y6|`` estimates where the step sits on the
# method's stability boundary (about 3.3 on the real axis); many accepted steps in a row
# near it mean the step size is held by stability, not accuracy (the step controller
# keeps it oscillating about the boundary: 3.0, below it, catches the runs)
STIFF_H_LAMBDA = 3.0
STIFF_STEPS = 15


def stiff_at(tab: tuple, meta: np.ndarray, Ys: np.ndarray, Ks: np.ndarray, count: int):
    """The time from which a recorded Dormand-Prince solve was stiff (``STIFF_STEPS``
    accepted steps in a row at the stability boundary), or None."""
    if count < STIFF_STEPS or Ks.shape[1] != 7:
        return None
    A, B = tab[0], tab[1]
    h = meta[:count, 1][:, None]
    K = Ks[:count].astype(np.float64)
    Y6 = Ys[:count] + h * np.einsum("j,kjn->kn", A[5, :5], K[:, :5])
    ynew = Ys[:count] + h * np.einsum("j,kjn->kn", B, K)
    den = np.linalg.norm(ynew - Y6, axis=1)
    num = np.abs(h[:, 0]) * np.linalg.norm(K[:, 6] - K[:, 5], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        boundary = np.where(den > 0, num / den, 0.0) > STIFF_H_LAMBDA
    run = 0
    for k in range(count):
        run = run + 1 if boundary[k] else 0
        if run >= STIFF_STEPS:
            return float(meta[k - STIFF_STEPS + 1, 0])
    return None
