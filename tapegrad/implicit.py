"""Differentiating through solvers: the derivative of the solution, not of the iterations.

A model that ends in a solver (an equilibrium, a self-consistent field, a steady state)
defines its output implicitly: ``x*`` with ``F(x*, theta) = 0``. By the implicit function
theorem, ``dx*/dtheta = -(dF/dx)^-1 dF/dtheta`` at the solution, so

* reverse mode pulls a cotangent ``g`` back with one adjoint solve,
  ``(dF/dx)^T w = -g``, then ``theta_bar = (dF/dtheta)^T w``;
* forward mode pushes a tangent with one tangent solve,
  ``(dF/dx) x_dot = -(dF/dtheta) theta_dot``.

The solver itself runs on NumPy values, untaped: its iterations cost no memory and its
path does not matter. :func:`fixed_point` (``x = f(x, *params)``, so ``F = f(x) - x``)
and :func:`custom_root` (``F = f(x, *params)``, JAX's ``lax.custom_root`` with the
parameters passed explicitly) are :mod:`tapegrad.extend` primitives whose rules are
written in tapegrad's own transforms (``vjp``, ``jvp``, ``jacobian``) and
:mod:`tapegrad.numpy` ops: differentiated again, the rules are recorded, so second
order (``tg.hessian``, ``jacfwd`` of ``grad``) works through the same formulas.

The linear solves are dense (``dF/dx`` built column by column, then LAPACK) up to
``DENSE_MAX`` unknowns and matrix-free above it at first order (GMRES over
vector-Jacobian or Jacobian-vector products); a derivative that is differentiated again
always uses the dense solve, whose every step is recorded.

What is checked, rather than returning a wrong number: the residual ``|F(x*)|`` at the
returned solution (a solver that stopped short raises with it), NaN anywhere in the
solution, and the linear solve (a singular ``dF/dx`` raises with the residual of the
solve). The parameters' gradients go through the parameters only; the initial guess
gets none (the solution does not depend on it), as in JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse.linalg as spla

from . import numpy as tnp
from .extend import Primitive, defjvp, defvjp
from .forward_mode import jvp
from .pytree import flatten
from .tensors import Tensor, values_of
from .transforms import vjp

__all__ = ["custom_root", "fixed_point"]

DENSE_MAX = 256  # above this many unknowns a first-order linear solve is matrix-free
SOLVE_RTOL = 1e-6  # a linear solve whose relative residual is above this raises


class _Problem:
    """One implicit function: its residual ``F(x, *params)``, how the parameters are
    packed into one vector ``theta`` (so that one adjoint solve serves them all), the
    solver and the tangent solve."""

    def __init__(
        self,
        name: str,
        residual: Callable,
        rebuild: Callable,
        shapes: list[tuple],
        solve: Callable,
        tangent_solve: Callable | None,
        tol: float,
    ) -> None:
        self.name = name
        self.f = residual
        self.rebuild = rebuild
        self.shapes = shapes
        self.solve = solve
        self.tangent_solve = tangent_solve
        self.tol = tol
        self.what = "max |F(x)|"  # how errors name the residual
        self.newton_check = False  # check the Newton step's size too (small problems)
        self.minimum = False  # F is a gradient: check the point is a minimum
        self.user_tangent = False  # tangent_solve is the user's (errors mention it)

    def params(self, theta: Any) -> tuple:
        """The parameters as the user passed them, cut from ``theta`` (an array, or a
        tensor of the graph when a rule is differentiated again)."""
        leaves, at = [], 0
        for shape in self.shapes:
            size = int(np.prod(shape, dtype=np.int64))
            leaves.append(theta[at : at + size].reshape(shape))
            at += size
        return self.rebuild(leaves)

    def residual(self, x: Any, theta: Any) -> Any:
        return self.f(x, *self.params(theta))


def _check_solution(problem: _Problem, x: np.ndarray, theta: np.ndarray) -> None:
    """Raise, with the residual, unless ``x`` solves the problem (and, where the
    problem says so, unless it is the kind of solution it asks for)."""
    if not np.all(np.isfinite(x)):
        raise RuntimeError(f"{problem.name}: the solver returned non-finite values")
    res = np.asarray(values_of(problem.residual(x, theta)))
    if res.shape != x.shape:
        raise ValueError(
            f"{problem.name}: the residual has shape {res.shape}, the solution {x.shape}: "
            "F(x, *params) must return an array of x's shape"
        )
    worst = float(np.max(np.abs(res), initial=0.0))
    scale = max(1.0, float(np.max(np.abs(x), initial=0.0)))
    if not np.isfinite(worst) or worst > problem.tol * scale:
        raise RuntimeError(
            f"{problem.name}: the solver did not converge: {problem.what} = "
            f"{worst:.3g} at the returned solution (tol={problem.tol:g}); its derivative "
            "would be wrong. Iterate longer, start closer, or pass a larger tol"
        )
    if problem.newton_check and x.size <= DENSE_MAX:
        _check_newton(problem, x, theta, res, scale)


def _check_newton(
    problem: _Problem, x: np.ndarray, theta: np.ndarray, res: np.ndarray, scale: float
) -> None:
    """A residual small in absolute terms may still lie far from the solution (a flat
    objective, a solver that stopped at once): the Newton step ``J^-1 F`` measures the
    distance, whatever F's scale. A minimum is also checked to be one (no negative
    curvature: not a maximum or a saddle)."""
    n = x.size
    _, back = vjp(lambda v: problem.residual(v, theta), x)
    eye = np.eye(n, dtype=x.dtype)
    J = np.stack([np.asarray(values_of(back(e.reshape(x.shape))[0])).ravel() for e in eye])
    step = np.linalg.lstsq(J, res.ravel(), rcond=None)[0]  # (row i of J: e_i^T J)
    dist = float(np.max(np.abs(step), initial=0.0))
    if not np.isfinite(dist) or dist > problem.tol * scale:
        raise RuntimeError(
            f"{problem.name}: the returned point is not a solution: a Newton step from it "
            f"moves x by {dist:.3g} (tol={problem.tol:g}), although {problem.what} is "
            "small: the problem is flat there, or the solver stopped early. Its derivative "
            "would be wrong"
        )
    if problem.minimum:
        H = 0.5 * (J + J.T)
        low = float(np.linalg.eigvalsh(H)[0]) if n else 0.0
        top = float(np.max(np.abs(H), initial=0.0))
        if low < -1e-8 * max(top, 1e-300):
            raise RuntimeError(
                f"{problem.name}: the returned point is stationary but not a minimum (the "
                f"Hessian has an eigenvalue {low:.3g}): a maximum or a saddle. Start "
                "elsewhere"
            )


def _solution(x0: np.ndarray, theta: np.ndarray, problem: _Problem) -> np.ndarray:
    """The primitive's forward: run the solver on values and check what it returns."""
    x = np.asarray(values_of(problem.solve(x0, problem.params(theta))), dtype=x0.dtype)
    if x.shape != x0.shape and x.size == x0.size:  # (SciPy makes a 0-d guess 1-D)
        x = x.reshape(x0.shape)
    if x.shape != x0.shape:
        raise ValueError(
            f"{problem.name}: the solver returned shape {x.shape} for an initial guess of "
            f"shape {x0.shape}"
        )
    _check_solution(problem, x, theta)
    return x


_PRIMITIVES: dict[str, Primitive] = {}


def _primitive(name: str) -> Primitive:
    """The primitive of the solves called ``name`` (errors name it: ``primitive
    fixed_point``); one per name, sharing the forward and the rules."""
    prim = _PRIMITIVES.get(name)
    if prim is None:
        prim = Primitive(_solution)
        prim.__name__ = name
        defvjp(prim, None, _theta_vjp, argnums=(0, 1))
        defjvp(prim, None, _theta_jvp, argnums=(0, 1))
        _PRIMITIVES[name] = prim
    return prim


def _is_graph(*values: Any) -> bool:
    """A rule runs on tensors of the graph (it is being differentiated again)."""
    return any(isinstance(v, Tensor) for v in values)


def _singular(name: str, detail: str) -> RuntimeError:
    return RuntimeError(
        f"{name}: dF/dx is singular (or nearly) at the solution ({detail}); the solution "
        "is not a differentiable function of the parameters there"
    )


def _dense_solve(matrix_of: Callable, n: int, rhs: Any, name: str) -> Any:
    """Solve ``A z = rhs`` (flat, length ``n``) for the matrix whose ``i``-th column is
    ``matrix_of(e_i)``; recorded when ``rhs`` or the columns are tensors. A singular
    ``A`` raises even when ``rhs`` lies in its range (a consistent system has many
    solutions, and the derivative none)."""
    eye = np.eye(n, dtype=np.result_type(rhs.dtype, np.float32))
    cols = [matrix_of(eye[i]) for i in range(n)]
    graph = _is_graph(rhs, *cols)
    A = tnp.stack(cols, axis=1) if graph else np.stack([np.asarray(c) for c in cols], axis=1)
    values = A._peek() if isinstance(A, Tensor) else A
    cond = np.linalg.cond(values) if n else 1.0
    if not np.isfinite(cond) or cond > 1e-2 / np.finfo(values.dtype).eps:
        raise _singular(name, f"condition number {cond:.3g}")
    if not graph:
        z = np.linalg.solve(A, rhs)
        scale = max(float(np.linalg.norm(rhs)), 1e-300)
        err = float(np.linalg.norm(A @ z - rhs)) / scale
        if not np.isfinite(err) or err > SOLVE_RTOL:
            raise _singular(name, f"the linear solve leaves a relative residual of {err:.3g}")
        return z
    z = tnp.linalg.solve(A, rhs)
    _check_finite(z, name)
    return z


def _matrix_free_solve(apply: Callable, n: int, rhs: np.ndarray, name: str) -> np.ndarray:
    """Solve ``A z = rhs`` by GMRES with ``apply(v) = A v`` (first order, on values)."""
    op = spla.LinearOperator((n, n), matvec=lambda v: np.asarray(apply(v)), dtype=rhs.dtype)
    # (asked for well below the accepted residual, but within the dtype's reach)
    target = max(SOLVE_RTOL * 1e-2, 50 * float(np.finfo(rhs.dtype).eps))
    z, _ = spla.gmres(op, rhs, rtol=target, atol=0.0, restart=min(n, 50))  # (checked below)
    scale = max(float(np.linalg.norm(rhs)), 1e-300)
    err = float(np.linalg.norm(op.matvec(z) - rhs)) / scale
    if not np.isfinite(err) or err > max(SOLVE_RTOL, 100 * target):
        raise RuntimeError(
            f"{name}: the matrix-free linear solve with dF/dx did not converge (relative "
            f"residual {err:.3g}); dF/dx may be singular"
        )
    return z


def _check_finite(z: Any, name: str) -> None:
    """A recorded solve's result is finite (read for display, not as a guard: under
    tg.compile this checks the captured values)."""
    v = z._peek() if isinstance(z, Tensor) else np.asarray(z)
    if not np.all(np.isfinite(v)):
        raise _singular(name, "the linear solve gave non-finite values")


def _linear_solve(problem: _Problem, apply: Callable, rhs: Any, shape: tuple) -> Any:
    """``z`` (of ``shape``) with ``apply(z) = rhs``: the user's ``tangent_solve`` when
    given (custom_root), else dense or matrix-free (flat vectors inside)."""
    if problem.tangent_solve is not None:
        with np.errstate(divide="ignore", invalid="ignore"):  # (checked below)
            z = problem.tangent_solve(apply, rhs)
        if _is_graph(z, rhs):
            _check_finite(z, problem.name)
        else:  # the user's solve is checked as tapegrad's own is
            z = np.asarray(z)
            got = np.asarray(apply(z))
            scale = max(float(np.linalg.norm(rhs)), 1e-300)
            err = float(np.linalg.norm(got - rhs)) if np.all(np.isfinite(z)) else np.inf
            if not err <= SOLVE_RTOL * scale:
                detail = f"the tangent solve leaves a relative residual of {err / scale:.3g}"
                if problem.user_tangent:
                    detail += ", or tangent_solve does not solve it"
                raise _singular(problem.name, detail)
        return z
    n = int(np.prod(shape, dtype=np.int64))
    flat = rhs.reshape(n)

    def flat_apply(v: Any) -> Any:
        return apply(v.reshape(shape)).reshape(n)

    if n <= DENSE_MAX or _is_graph(rhs):
        z = _dense_solve(flat_apply, n, flat, problem.name)
    else:
        z = _matrix_free_solve(flat_apply, n, np.asarray(flat), problem.name)
    return z.reshape(shape)


def _theta_vjp(ans: Any, x0: Any, theta: Any, problem: _Problem) -> Callable:
    shape = tuple(np.shape(ans))

    def pull(g: Any) -> Any:
        if _is_graph(ans, theta, g):  # recorded: one graph serves both products
            _, back = vjp(problem.residual, ans, theta)
            w = _linear_solve(problem, lambda v: back(v)[0], -g, shape)
            return back(w)[1]
        # on values, each product of the solve pulls back to x only (not to every
        # parameter, which may be a matrix), and the parameters' once at the end
        _, back_x = vjp(lambda x: problem.residual(x, theta), ans)
        w = _linear_solve(problem, lambda v: back_x(v)[0], -g, shape)
        _, back_theta = vjp(lambda th: problem.residual(ans, th), theta)
        return back_theta(w)[0]

    return pull


def _theta_jvp(t: Any, ans: Any, x0: Any, theta: Any, problem: _Problem) -> Any:
    if _is_graph(t, ans, theta):
        _, rhs = jvp(problem.residual, (ans, theta), (ans * 0.0, t))
        zero_t = theta * 0.0

        def apply(v: Any) -> Any:
            return jvp(problem.residual, (ans, theta), (v, zero_t))[1]

    else:  # on values: each product pushes a tangent of x alone
        _, rhs = jvp(lambda th: problem.residual(ans, th), (theta,), (t,))

        def apply(v: Any) -> Any:
            return jvp(lambda x: problem.residual(x, theta), (ans,), (v,))[1]

    return _linear_solve(problem, apply, -rhs, tuple(np.shape(ans)))


def solve_implicitly(
    name: str,
    residual: Callable,
    x0: Any,
    params: tuple,
    solve: Callable,
    tangent_solve: Callable | None,
    tol: float,
    what: str = "max |F(x)|",
    newton_check: bool = False,
    minimum: bool = False,
    user_tangent: bool = False,
) -> Any:
    """The solution of ``residual(x, *params) = 0`` that ``solve(x0, params_values)``
    finds on NumPy values, differentiable in ``params`` (any order, both modes):
    the parameters are packed into one vector ``theta`` (one adjoint solve serves them
    all) and passed to the primitive. ``tangent_solve``: as for :func:`custom_root`
    (None: tapegrad's own). ``tol``: the largest ``max |residual|`` accepted at the
    solution, relative to ``max(1, |x|)``; ``what``: how the error names the residual;
    ``newton_check``: the Newton step from the solution must be within ``tol`` too (a
    black-box solver on a flat problem); ``minimum``: the residual is a gradient, and
    the solution must be a minimum; ``user_tangent``: ``tangent_solve`` is the user's
    (errors mention it).
    What :func:`fixed_point`, :func:`custom_root` and :mod:`tapegrad.scipy.optimize`
    are built on."""
    leaves, rebuild = flatten(params)
    for i, leaf in enumerate(leaves):
        kind = leaf.dtype.kind if isinstance(leaf, Tensor) else np.asarray(leaf).dtype.kind
        if kind != "f" and not (kind in "iu" and not isinstance(leaf, np.ndarray | Tensor)):
            what = f"of dtype {np.asarray(leaf).dtype}" if kind in "iubO" else "not a number"
            raise TypeError(
                f"{name}: parameter leaf {i} ({type(leaf).__name__}, {what}) cannot be "
                "differentiated; parameters are floating-point arrays, numbers or tensors "
                "(or lists / tuples / dicts of them): pass integers, indices and anything "
                "else through f's closure"
            )
    x0v = x0.detach() if isinstance(x0, Tensor) else np.asarray(x0)
    dtypes = [x0v.dtype] + [
        leaf.dtype if isinstance(leaf, Tensor) else np.asarray(leaf).dtype for leaf in leaves
    ]
    dtype = np.result_type(np.float32, *dtypes)
    # (a tensor stays one, detached: under tg.compile a replay reads the new guess)
    x0v = x0v if x0v.dtype == dtype else x0v.astype(dtype)
    shapes = [tuple(np.shape(leaf)) for leaf in leaves]
    graph = any(isinstance(leaf, Tensor) for leaf in leaves)
    if graph:
        parts = [tnp.ravel(tnp.asarray(leaf).astype(dtype)) for leaf in leaves]
        theta: Any = tnp.concatenate(parts)
    else:
        parts = [np.ravel(np.asarray(leaf, dtype=dtype)) for leaf in leaves]
        theta = np.concatenate(parts) if parts else np.zeros(0, dtype)
    problem = _Problem(name, residual, rebuild, shapes, solve, tangent_solve, tol)
    problem.what = what
    problem.newton_check = newton_check
    problem.minimum = minimum
    problem.user_tangent = user_tangent
    return _primitive(name)(x0v, theta, problem)


def fixed_point(
    f: Callable,
    x0: Any,
    *params: Any,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    unroll: bool = False,
) -> Any:
    """The fixed point ``x* = f(x*, *params)``, differentiable in ``params``.

    ``f`` is iterated on NumPy values from ``x0`` until successive iterates differ by
    less than ``tol`` (relative to ``max(1, |x|)``, in the max norm); nothing is
    recorded. The derivative is the implicit one at ``x*``: with
    ``F(x) = f(x, *params) - x``, one adjoint solve with ``(dF/dx)^T`` per backward
    (dense up to ``DENSE_MAX`` unknowns, GMRES above), one tangent solve per forward-mode
    push, and second order through the same rules.

    Parameters
    ----------
    f : callable
        ``f(x, *params) -> x_next``, written with :mod:`tapegrad.numpy` (or NumPy's
        functions, which dispatch to it on tensors), of ``x``'s shape.
    x0 : array_like
        The initial guess; it gets no gradient (the solution does not depend on it).
    *params : array_like, Tensor or pytree of them
        What the solution is differentiated in.
    tol : float, optional
        Convergence tolerance (also the residual accepted at the solution).
    max_iter : int, optional
        Iterations before giving up (an error with the last step's size).
    unroll : bool, optional
        Record every iteration instead (the derivative of the iterations, for
        comparison): memory grows with the iterations.

    Returns
    -------
    ndarray or Tensor
        ``x*``: a tensor of the graph when a parameter requires grad.

    Raises
    ------
    RuntimeError
        The iteration did not converge in ``max_iter`` steps or produced NaN, or
        ``I - df/dx`` is singular at the solution (in a derivative).
    TypeError
        A parameter that is not an array, a number or a tensor.

    See Also
    --------
    custom_root : Any root-finder, with its own linear solve.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> def babylon(x, a):  # x -> (x + a / x) / 2 has the fixed point sqrt(a)
    ...     return 0.5 * (x + a / x)
    >>> float(tg.fixed_point(babylon, 1.0, 2.0))
    1.414213562373095
    >>> round(float(tg.grad(lambda a: tg.fixed_point(babylon, 1.0, a))(2.0)), 12)
    0.353553390593
    """
    name = "fixed_point"
    if unroll:
        return _unrolled(f, x0, params, tol, max_iter)

    def iterate(x: np.ndarray, args: tuple) -> np.ndarray:
        step = np.inf
        for _ in range(max_iter):
            nxt = np.asarray(values_of(f(x, *args)), dtype=x.dtype)
            if nxt.shape != x.shape:
                raise ValueError(f"{name}: f returned shape {nxt.shape} for x of shape {x.shape}")
            if not np.all(np.isfinite(nxt)):
                raise RuntimeError(f"{name}: the iteration produced non-finite values")
            step = float(np.max(np.abs(nxt - x), initial=0.0))
            x = nxt
            if step <= tol * max(1.0, float(np.max(np.abs(x), initial=0.0))):
                return x
        raise RuntimeError(
            f"{name}: no convergence in {max_iter} iterations (last step {step:.3g}); "
            "the derivative of a point that is not a fixed point would be wrong"
        )

    def residual(x: Any, *args: Any) -> Any:
        return f(x, *args) - x

    return solve_implicitly(name, residual, x0, params, iterate, None, tol)


def _unrolled(f: Callable, x0: Any, params: tuple, tol: float, max_iter: int) -> Any:
    """:func:`fixed_point` with every iteration recorded."""
    x = x0
    for _ in range(max_iter):
        nxt = f(x, *params)
        step = np.max(np.abs(np.asarray(values_of(nxt)) - np.asarray(values_of(x))), initial=0.0)
        x = nxt
        if step <= tol * max(1.0, float(np.max(np.abs(np.asarray(values_of(x))), initial=0.0))):
            return x
    raise RuntimeError(f"fixed_point: no convergence in {max_iter} iterations (unrolled)")


def custom_root(
    f: Callable,
    x0: Any,
    solve: Callable,
    tangent_solve: Callable | None,
    *params: Any,
    tol: float = 1e-8,
) -> Any:
    """The root ``x*`` of ``f(x*, *params) = 0`` found by ``solve``, differentiable in
    ``params`` by the implicit function theorem (JAX's ``lax.custom_root``, with the
    parameters explicit rather than closed over).

    Parameters
    ----------
    f : callable
        ``f(x, *params)``, of ``x``'s shape, written with :mod:`tapegrad.numpy`.
    x0 : array_like
        The initial guess (no gradient).
    solve : callable
        ``solve(g, x0) -> x*``: any root-finder on NumPy values (SciPy's, your own),
        with ``g(x) = f(x, *params)`` on values.
    tangent_solve : callable
        ``tangent_solve(lin, y) -> z`` with ``lin(z) = y`` for a linear map ``lin``
        (``dF/dx`` in forward mode, its transpose in reverse mode), written with
        :mod:`tapegrad.numpy` so that it can be differentiated again; for a scalar
        ``x``, ``lambda lin, y: y / lin(1.0)``. None: tapegrad's own (dense, or GMRES
        above ``DENSE_MAX`` unknowns).
    *params : array_like, Tensor or pytree of them
        What the root is differentiated in.
    tol : float, optional
        The largest ``|f(x*)|`` accepted at the returned root (relative to
        ``max(1, |x*|)``); a larger one raises.

    Returns
    -------
    ndarray or Tensor
        ``x*``: a tensor of the graph when a parameter requires grad.

    Raises
    ------
    RuntimeError
        ``solve`` returned a point where ``|f|`` exceeds ``tol``, or non-finite values;
        a derivative meets a singular ``df/dx``.

    See Also
    --------
    fixed_point : Iterating ``x = f(x)``.
    tapegrad.scipy.optimize.root : SciPy's root-finders, differentiable.

    Examples
    --------
    >>> import numpy as np, scipy.optimize, tapegrad as tg
    >>> f = lambda x, a: x**3 - a  # the cube root of a
    >>> solve = lambda g, x0: scipy.optimize.brentq(g, 0.0, 10.0, xtol=1e-14)
    >>> cbrt = lambda a: tg.custom_root(f, 1.0, solve, lambda lin, y: y / lin(1.0), a)
    >>> round(float(tg.grad(cbrt)(8.0)), 12)  # d a^(1/3) / da = 1 / (3 a^(2/3)) = 1/12
    0.083333333333
    """

    def run(x0v: np.ndarray, args: tuple) -> np.ndarray:
        def g(x: Any) -> Any:
            x = np.asarray(x, dtype=x0v.dtype).reshape(x0v.shape)
            return np.asarray(values_of(f(x, *args)))

        return solve(g, x0v)

    return solve_implicitly(
        "custom_root",
        f,
        x0,
        params,
        run,
        tangent_solve,
        tol,
        user_tangent=tangent_solve is not None,
    )
