"""``tapegrad.scipy.optimize``: SciPy's solvers, differentiable in their ``args``.

Each function runs SciPy's own solver as a black box, with SciPy's signature, on NumPy
values (its Jacobian or gradient supplied exactly by tapegrad), and differentiates the
solution implicitly in ``args`` (:mod:`tapegrad.implicit`): at a root ``F(x*, args) = 0``,
at a minimum the stationarity condition ``grad_x f(x*, args) = 0`` (the Hessian's
solve), for least squares the normal equations ``J^T r = 0``. The result's ``x`` (and
``fun``) are tensors of the graph when an ``args`` entry requires grad; derivatives go
to any order, in both modes.

A solution that is not one raises rather than giving the derivative of a wrong point:
a root with ``max |F|`` above ``check_tol``, a minimum whose gradient is not zero (an
active bound, or a solver that stopped short), or a singular Jacobian or Hessian there.

>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.scipy import optimize
>>> def fit(c):  # argmin_x (x - c)^2 + x^4 / 4
...     return optimize.minimize(lambda x, c: tnp.sum((x - c) ** 2 + x**4 / 4), np.zeros(1),
...                              args=(c,), method="BFGS", tol=1e-12).x
>>> round(float(tg.grad(lambda c: fit(c)[0])(1.0)), 6)  # 2 / (2 + 3 x*^2)
0.528689
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.optimize as _sp

from ..implicit import solve_implicitly
from ..tensors import Tensor, values_of
from ..transforms import grad, jacobian, value_and_grad

__all__ = ["brentq", "least_squares", "minimize", "root", "root_scalar"]


def _on_values(fun: Callable, args: tuple) -> Callable:
    """``fun(x, *args)`` on NumPy values, as SciPy calls it."""
    return lambda x: np.asarray(values_of(fun(x, *args)))


def _values(result: Any) -> Any:
    """A transform's result as NumPy values: inside a primitive's forward (a tape of
    its own) transforms record, and SciPy must see arrays."""
    if isinstance(result, tuple):
        return tuple(_values(r) for r in result)
    v = np.asarray(values_of(result))
    return float(v) if v.ndim == 0 else v


# SciPy's methods that take no derivative (passing one only makes SciPy warn)
_ROOT_WITHOUT_JAC = {
    "broyden1",
    "broyden2",
    "anderson",
    "linearmixing",
    "diagbroyden",
    "excitingmixing",
    "krylov",
    "df-sane",
}
_MINIMIZE_WITHOUT_JAC = {"nelder-mead", "powell", "cobyla", "cobyqa"}


def _args(args: Any) -> tuple:
    """SciPy's ``args``: a tuple, or one value standing for itself."""
    return tuple(args) if isinstance(args, tuple | list) else (args,)


def _own_derivative(name: str, jac: Any) -> None:
    """tapegrad supplies the exact derivative; a user's must be a function."""
    if jac is not None and not callable(jac):
        raise TypeError(
            f"{name}: jac must be a function or None (tapegrad's exact derivative), got {jac!r}"
        )


def _active_bound(x: np.ndarray, bounds: Any) -> bool:
    """Whether a component of ``x`` sits on one of ``bounds`` (SciPy's forms)."""
    b = bounds if isinstance(bounds, _sp.Bounds) else _sp.Bounds(*zip(*bounds))
    lo = np.broadcast_to(np.asarray(b.lb, float), x.shape)
    hi = np.broadcast_to(np.asarray(b.ub, float), x.shape)
    near = 1e-8 * np.maximum(1.0, np.abs(x))
    return bool(
        np.any(np.isfinite(lo) & (x - lo <= near)) or np.any(np.isfinite(hi) & (hi - x <= near))
    )


def _plain(v: Any) -> Any:
    """A bracket or a starting point as a plain number: the root does not depend on it
    (it gets no gradient, as an initial guess does not)."""
    if v is None or isinstance(v, float | int):
        return v
    if isinstance(v, tuple | list):
        return type(v)(_plain(u) for u in v)
    return float(np.asarray(values_of(v.detach() if isinstance(v, Tensor) else v)))


def _scalar_tangent(lin: Callable, y: Any) -> Any:
    return y / lin(1.0)


def root(
    fun: Callable,
    x0: Any,
    args: Sequence[Any] = (),
    method: str = "hybr",
    jac: Callable | None = None,
    tol: float | None = None,
    options: dict | None = None,
    check_tol: float = 1e-8,
) -> _sp.OptimizeResult:
    """A root of ``fun(x, *args) = 0`` (SciPy's ``root``), differentiable in ``args``.

    Parameters
    ----------
    fun : callable
        ``fun(x, *args)`` of ``x``'s shape, written with :mod:`tapegrad.numpy`.
    x0 : array_like
        The initial guess (no gradient).
    args : sequence, optional
        Arrays, numbers or tensors (or pytrees of them): what the root is
        differentiated in.
    method, tol, options
        As for :func:`scipy.optimize.root`.
    jac : callable, optional
        As for SciPy; by default tapegrad's exact Jacobian of ``fun``.
    check_tol : float, optional
        The largest ``max |fun(x*)|`` accepted (relative to ``max(1, |x*|)``).

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's result, with ``x`` the differentiable root.

    Raises
    ------
    RuntimeError
        SciPy's root does not satisfy ``check_tol``; a derivative meets a singular
        Jacobian.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.scipy.optimize import root
    >>> r = lambda a: root(lambda x, a: x**2 - a, np.ones(1), args=(a,)).x[0]
    >>> round(float(tg.grad(r)(4.0)), 10)  # 1 / (2 sqrt(a))
    0.25
    """

    _own_derivative("root", jac)

    def solve(x0v: np.ndarray, values: tuple) -> np.ndarray:
        exact = jac or (lambda x: _values(jacobian(fun)(x, *values)).reshape(x.size, x.size))
        if method in _ROOT_WITHOUT_JAC:
            exact = None
        res = _sp.root(
            _on_values(fun, values), x0v, method=method, jac=exact, tol=tol, options=options
        )
        info.update(res)
        return res.x

    info: dict = {}
    x = solve_implicitly("root", fun, x0, _args(args), solve, None, check_tol, newton_check=True)
    return _sp.OptimizeResult({**info, "x": x})


def minimize(
    fun: Callable,
    x0: Any,
    args: Sequence[Any] = (),
    method: str | None = None,
    jac: Callable | None = None,
    bounds: Any = None,
    tol: float | None = None,
    options: dict | None = None,
    check_tol: float = 1e-5,
) -> _sp.OptimizeResult:
    """A minimum of the scalar ``fun(x, *args)`` (SciPy's ``minimize``), differentiable
    in ``args``: at a stationary point, ``dx*/dargs = -H^-1 d(grad_x f)/dargs``.

    Parameters
    ----------
    fun : callable
        ``fun(x, *args)`` returning a scalar, written with :mod:`tapegrad.numpy`.
    x0 : array_like
        The initial guess (no gradient).
    args : sequence, optional
        What the minimum is differentiated in.
    method, bounds, tol, options
        As for :func:`scipy.optimize.minimize`.
    jac : callable, optional
        As for SciPy; by default tapegrad's exact gradient of ``fun``.
    check_tol : float, optional
        The largest ``max |grad_x fun(x*)|`` accepted (relative to ``max(1, |x*|)``):
        a minimum on an active bound, or one the solver stopped short of, raises.

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's result, with ``x`` the differentiable minimiser and ``fun`` the
        differentiable minimum.

    Raises
    ------
    RuntimeError
        The returned point is not stationary within ``check_tol``; a derivative meets
        a singular Hessian.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.scipy.optimize import minimize
    >>> best = lambda c: minimize(lambda x, c: tnp.sum((x - c) ** 2), np.zeros(2), args=(c,)).x
    >>> np.round(tg.jacobian(best)(np.array([1.0, 2.0])), 6)
    array([[1., 0.],
           [0., 1.]])
    """
    gradient = grad(fun, argnums=0)
    _own_derivative("minimize", jac)
    free = method is not None and method.lower() in _MINIMIZE_WITHOUT_JAC

    def solve(x0v: np.ndarray, values: tuple) -> np.ndarray:
        if free:
            res = _sp.minimize(
                _on_values(fun, values),
                x0v,
                method=method,
                bounds=bounds,
                tol=tol,
                options=options,
            )
        elif jac is None:
            res = _sp.minimize(
                lambda x: _values(value_and_grad(fun, argnums=0)(x, *values)),
                x0v,
                method=method,
                jac=True,
                bounds=bounds,
                tol=tol,
                options=options,
            )
        else:
            res = _sp.minimize(
                _on_values(fun, values),
                x0v,
                args=(),
                method=method,
                jac=lambda x: jac(x, *values),
                bounds=bounds,
                tol=tol,
                options=options,
            )
        info.update(res)
        if bounds is not None and _active_bound(np.asarray(res.x), bounds):
            raise RuntimeError(
                "minimize: the minimum lies on an active bound, where the gradient is not "
                "zero: it is not a stationary point, and its derivative is not the "
                "implicit one. Differentiate without the bound, or reparametrise"
            )
        return res.x

    info: dict = {}
    stationary = "max |grad_x fun(x)|"
    x = solve_implicitly(
        "minimize",
        gradient,
        x0,
        _args(args),
        solve,
        None,
        check_tol,
        what=stationary,
        newton_check=True,
        minimum=True,
    )
    return _sp.OptimizeResult({**info, "x": x, "fun": fun(x, *_args(args))})


def least_squares(
    fun: Callable,
    x0: Any,
    args: Sequence[Any] = (),
    method: str = "trf",
    check_tol: float = 1e-6,
    **kwargs: Any,
) -> _sp.OptimizeResult:
    """Minimise ``0.5 sum(fun(x, *args) ** 2)`` (SciPy's ``least_squares``, without
    bounds), differentiable in ``args`` through the normal equations ``J^T r = 0``.

    Parameters
    ----------
    fun : callable
        The residuals ``fun(x, *args)`` (1-D), written with :mod:`tapegrad.numpy`.
    x0 : array_like
        The initial guess (no gradient).
    args : sequence, optional
        What the fit is differentiated in.
    method : str, optional
        As for :func:`scipy.optimize.least_squares`; its Jacobian is tapegrad's.
    check_tol : float, optional
        The largest ``max |J^T r|`` accepted at the fit (relative to ``max(1, |x*|)``).
    **kwargs
        SciPy's other options (``ftol``, ``xtol``, ``gtol``, ``max_nfev``...).

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's result, with ``x`` the differentiable fit.

    Raises
    ------
    RuntimeError
        The fit is not stationary within ``check_tol``; a derivative meets a singular
        ``J^T J``.
    TypeError
        ``bounds`` (a fit on a bound is not stationary).

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> from tapegrad.scipy.optimize import least_squares
    >>> t = np.linspace(0.0, 1.0, 5)
    >>> line = lambda y: least_squares(lambda p, y: p[0] + p[1] * t - y, np.zeros(2),
    ...                                args=(y,), gtol=1e-14).x
    >>> bool(np.allclose(tg.jacobian(line)(2 * t), np.linalg.pinv(np.c_[np.ones(5), t])))
    True
    """
    if "bounds" in kwargs:
        raise TypeError(
            "least_squares: bounds are not supported (a fit on a bound is not stationary)"
        )
    if kwargs.get("loss", "linear") != "linear" or "jac" in kwargs:
        raise TypeError(
            "least_squares: only loss='linear' and tapegrad's own Jacobian are supported "
            "(the derivative is taken through the normal equations J^T r = 0)"
        )

    def half_square(x: Any, *a: Any) -> Any:
        r = fun(x, *a)
        return 0.5 * (r * r).sum()

    def solve(x0v: np.ndarray, values: tuple) -> np.ndarray:
        res = _sp.least_squares(
            _on_values(fun, values),
            x0v,
            jac=lambda x: _values(jacobian(fun)(x, *values)),
            method=method,
            **kwargs,
        )
        info.update(res)
        return res.x

    info: dict = {}
    x = solve_implicitly(
        "least_squares",
        grad(half_square, argnums=0),
        x0,
        _args(args),
        solve,
        None,
        check_tol,
        what="max |J^T r|",
        newton_check=True,
    )
    return _sp.OptimizeResult({**info, "x": x})


def root_scalar(
    f: Callable,
    args: Sequence[Any] = (),
    method: str | None = None,
    bracket: Sequence[float] | None = None,
    x0: float | None = None,
    x1: float | None = None,
    xtol: float | None = None,
    rtol: float | None = None,
    maxiter: int | None = None,
    check_tol: float = 1e-8,
) -> _sp.RootResults:
    """A root of the scalar ``f(x, *args)`` (SciPy's ``root_scalar``), differentiable in
    ``args``: ``dx*/dargs = -(df/dargs) / (df/dx)``.

    Parameters
    ----------
    f : callable
        ``f(x, *args)`` for a scalar ``x``, written with :mod:`tapegrad.numpy`.
    args : sequence, optional
        What the root is differentiated in.
    method, bracket, x0, x1, xtol, rtol, maxiter
        As for :func:`scipy.optimize.root_scalar` (``fprime`` is tapegrad's).
    check_tol : float, optional
        The largest ``|f(x*)|`` accepted (relative to ``max(1, |x*|)``).

    Returns
    -------
    scipy.optimize.RootResults
        SciPy's result, with ``root`` the differentiable root.

    Raises
    ------
    RuntimeError
        The root does not satisfy ``check_tol``; ``df/dx`` is zero there.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.scipy.optimize import root_scalar
    >>> sqrt = lambda c: root_scalar(lambda x, c: x**2 - c, args=(c,), x0=1.0).root
    >>> round(float(tg.grad(sqrt)(4.0)), 10)  # 1 / (2 sqrt(c))
    0.25
    """
    found: list = []

    def solve(guess: np.ndarray, values: tuple) -> np.ndarray:
        fprime = grad(f, argnums=0)
        res = _sp.root_scalar(
            lambda x: float(values_of(f(x, *values))),
            args=(),
            method=method,
            bracket=_plain(bracket),
            fprime=lambda x: _values(fprime(float(x), *values)),
            x0=_plain(x0),
            x1=_plain(x1),
            xtol=xtol,
            rtol=rtol,
            maxiter=maxiter,
        )
        found.append(res)
        return np.asarray(res.root, dtype=guess.dtype)

    start = 0.0 if x0 is None else _plain(x0)
    x = solve_implicitly(
        "root_scalar",
        f,
        np.float64(start),
        _args(args),
        solve,
        _scalar_tangent,
        check_tol,
    )
    res = found[-1]
    res.root = x
    return res


def brentq(
    f: Callable,
    a: float,
    b: float,
    args: Sequence[Any] = (),
    xtol: float = 2e-12,
    rtol: float = 4 * np.finfo(float).eps,
    maxiter: int = 100,
    check_tol: float = 1e-8,
) -> Any:
    """A root of ``f(x, *args)`` in ``[a, b]`` by Brent's method (SciPy's ``brentq``),
    differentiable in ``args``.

    Parameters
    ----------
    f : callable
        ``f(x, *args)`` for a scalar ``x``, written with :mod:`tapegrad.numpy`; of
        opposite signs at ``a`` and ``b``.
    a, b : float
        The bracket.
    args : sequence, optional
        What the root is differentiated in.
    xtol, rtol, maxiter
        As for :func:`scipy.optimize.brentq`.
    check_tol : float, optional
        The largest ``|f(x*)|`` accepted (relative to ``max(1, |x*|)``).

    Returns
    -------
    float or Tensor
        The root: a 0-d tensor of the graph when an ``args`` entry requires grad.

    Raises
    ------
    RuntimeError
        The root does not satisfy ``check_tol``; ``df/dx`` is zero there.

    Examples
    --------
    >>> import tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.scipy.optimize import brentq
    >>> cbrt = lambda c: brentq(lambda x, c: x**3 - c, 0.0, 10.0, args=(c,))
    >>> round(float(tg.grad(cbrt)(8.0)), 10)  # 1 / (3 c^(2/3))
    0.0833333333
    """
    return root_scalar(
        f,
        args=args,
        method="brentq",
        bracket=(a, b),
        xtol=xtol,
        rtol=rtol,
        maxiter=maxiter,
        check_tol=check_tol,
    ).root
