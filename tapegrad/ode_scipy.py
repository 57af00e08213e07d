"""SciPy's ODE methods (``Radau``, ``BDF``, ``LSODA``, ``RK23``, ``DOP853``) driven by a
captured right-hand side, differentiated through the continuous adjoint.

SciPy's solver classes take each step; tapegrad supplies ``f`` and, for the implicit
methods, the exact Jacobian ``f_y`` (``n`` vector-Jacobian products of the captured
program, ``tapegrad.ode_system.Driven``), so Newton's iterations converge as they do with
an analytic Jacobian. The solution at the output times is read from each step's dense
output, as SciPy's ``t_eval`` is.

The gradient is the continuous adjoint: ``z = [a, g_p]`` with

    a' = -a f_y(t, y(t)),    g_p' = -a f_p(t, y(t)),

integrated backward from the last output time with Radau (whatever the forward's
method; ``ADJOINT_METHOD``) at tolerances ``ADJOINT_TOLERANCE`` times the forward's, ``a``
taking each output's cotangent at its time. ``y(t)`` is read from the dense output of a
Radau solve at those tolerances rather than integrated backward: a stiff system is
unstable when run backward. The adjoint's own Jacobian is ``[[-f_y^T, 0], [-f_p^T,
0]]`` (sparse when the parameters are many), so the backward pass is as stiff-stable as
the forward one. Memory grows with the steps (their interpolants).

Time gradients: ``dL/dt_i = <g_i, f(t_i, y_i)>`` for ``i > 0`` and ``dL/dt_0 = -<a(t_0),
f(t_0, y_0)>``, as in :func:`tapegrad.odesolve.adjoint`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from scipy.integrate import BDF, DOP853, LSODA, RK23, Radau

from .ode_system import Driven
from .odesolve import ODE_MAXSTEPS, ODE_NONFINITE, ODE_OK

if TYPE_CHECKING:
    from .integrate import _Solve

METHODS = {"radau": Radau, "bdf": BDF, "lsoda": LSODA, "rk23": RK23, "dop853": DOP853}
IMPLICIT = ("radau", "bdf", "lsoda")
EPS = float(np.finfo(float).eps)
# the adjoint (and the solve it reads y(t) from) runs at the forward's tolerances times
# this: at the same tolerances its error, amplified along a stiff trajectory, reached 10 %
# of the gradient where the solution's own was 1e-6 (Van der Pol, mu = 1000)
ADJOINT_TOLERANCE = 0.01
# the method that integrates each one's adjoint: a stiff system's adjoint is stiff too,
# and BDF's (and LSODA's) low-order start and error control lose it at the fast
# transients of a relaxation oscillation (30 % off on Van der Pol at mu = 1000, and BDF
# can fail to start there at tight tolerances), where Radau (order 5, L-stable) holds
ADJOINT_METHOD = {"radau": "radau", "bdf": "radau", "lsoda": "radau", "rk23": "rk23",
                  "dop853": "dop853"}  # fmt: skip
ODE_FAILED = 5  # SciPy's solver reported a failure (its message is kept)
# past this many unknowns the adjoint's Jacobian is passed sparse (Radau and BDF factor
# it with SuperLU); LSODA takes dense Jacobians only
_SPARSE_FROM = 200


class Steps:
    """The steps of one solve: their end times ``t`` (``t[0]`` the start), the states
    there ``y`` and, for each step ``k``, ``at(k, t)``, the state at ``t`` inside it."""

    def __init__(self, t: np.ndarray, y: np.ndarray, at: Callable, nfev: int) -> None:
        self.t, self.y, self.at, self.nfev = t, y, at, nfev
        self.stopped = False  # a watcher ended the solve early
        self.dense: list = []


class _Problem:
    """The captured system seen as SciPy wants it: float64 ``fun(t, y)`` and
    ``jac(t, y)`` over one driven context, counting evaluations; a non-finite ``f``
    stops the solve (SciPy would step on with it)."""

    def __init__(self, solve: _Solve) -> None:
        self.driven = Driven(solve)
        self.n = solve.system.n
        self.M = solve.M
        self.dtype = solve.dtype
        self.nfev = 0
        self.njev = 0
        self.bad_t: float | None = None

    def f(self, t: float, y: np.ndarray) -> np.ndarray:
        out = np.empty(self.n, self.dtype)
        self.driven.feval(t, y, out)
        self.nfev += 1
        if not np.all(np.isfinite(out)):
            self.bad_t = t
            raise _NonFinite
        return out.astype(np.float64)

    def rows(self, t: float, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``f_y`` and ``f_p`` at ``(t, y)``: row ``i`` is ``e_i^T f_y``, one
        vector-Jacobian product each."""
        n, M = self.n, self.M
        fy = np.empty((n, n))
        fp = np.empty((n, M))
        e = np.zeros(n, self.dtype)
        f, gy, gp = np.empty(n, self.dtype), np.empty(n, self.dtype), np.empty(M, self.dtype)
        yv = np.asarray(y, self.dtype)
        for i in range(n):
            e[i] = 1.0
            self.driven.vjp(t, yv, e, f, gy, gp)
            e[i] = 0.0
            fy[i], fp[i] = gy, gp
        self.njev += 1
        return fy, fp

    def jac(self, t: float, y: np.ndarray) -> np.ndarray:
        fy = self.rows(t, y)[0]
        if not np.all(np.isfinite(fy)):
            # (f_y infinite where f is not smooth, -sqrt(y) at 0: Newton's iterations
            # take a difference quotient there, as SciPy's own Jacobian is)
            f0 = self.f(t, y)
            for j in np.flatnonzero(~np.all(np.isfinite(fy), axis=0)):
                h = np.sqrt(np.finfo(float).eps) * max(1.0, abs(y[j]))
                yh = np.array(y, np.float64)
                yh[j] += h
                fy[:, j] = (self.f(t, yh) - f0) / h
        return fy


class _NonFinite(Exception):
    """``f`` returned NaN or inf (raised through SciPy's step)."""


def _run(
    problem: _Problem, fun: Callable, jac: Callable, t0: float, z0: np.ndarray, t1: float,
    method: str, solve: _Solve, on_step: Callable, budget: int, first_step: float = 0.0,
    tighter: float = 1.0,
) -> tuple[int, int, str, float]:  # fmt: skip
    """Step SciPy's ``method`` on ``fun`` from ``t0`` to ``t1`` with the solve's
    tolerances, calling ``on_step(solver)`` after each step: ``(status, steps, message,
    time reached)``."""
    cls = METHODS[method]
    options: dict[str, Any] = dict(
        rtol=max(solve.rtol * tighter, 100 * EPS),
        atol=solve.atol * tighter,
        max_step=solve.max_step,
    )
    if method not in IMPLICIT:
        jac = None
    if first_step:
        options["first_step"] = min(first_step, abs(t1 - t0))
    if jac is not None:
        options["jac"] = jac
    solver = cls(fun, t0, z0, t1, **options)
    steps = 0
    while solver.status == "running":
        if steps >= budget:
            return ODE_MAXSTEPS, steps, "", solver.t
        message = solver.step()
        if solver.status == "failed":
            return ODE_FAILED, steps, str(message), solver.t
        steps += 1
        if on_step(solver):
            break
    return ODE_OK, steps, "", solver.t


def forward(solve: _Solve, keep: bool, watch: Callable | None = None) -> tuple:
    """Solve through ``solve.ts`` with SciPy's ``solve.scipy_method``: ``(status, ys,
    info [time, steps, evaluations], message, steps)``, ``steps`` a :class:`Steps` (with
    the interpolants the adjoint reads ``y(t)`` from) when ``keep``. ``watch(t_old,
    t_new, y_new, at)`` sees each step and stops the solve after it by returning True
    (``steps.stopped``; the solution is then not filled in)."""
    problem = _Problem(solve)
    steps = Steps(np.zeros(0), np.zeros((0, problem.n)), dense_at([]), 0)
    try:
        return _forward(problem, solve, keep, watch, steps)
    except _NonFinite:
        info = np.array([problem.bad_t, 0, problem.nfev])
        return ODE_NONFINITE, None, info, "", steps if steps.stopped else None


def adjoint(solve: _Solve, gys: np.ndarray) -> tuple:
    """The continuous adjoint for the cotangents ``gys`` (``len(ts), n``): ``(status,
    g_y0, g_ts, g_p, info, message)``."""
    problem = _Problem(solve)
    try:
        return _adjoint(problem, solve, gys)
    except _NonFinite:
        info = np.array([problem.bad_t, 0, problem.nfev])
        return ODE_NONFINITE, None, None, None, info, ""


def dense_at(dense: list) -> Callable:
    """``at(k, t)`` over SciPy's interpolants, one per step."""

    def at(k: int, when: float) -> np.ndarray:
        return dense[k](when)

    return at


def _forward(
    problem: _Problem, solve: _Solve, keep: bool, watch: Callable | None, steps: Steps,
    method: str | None = None, tighter: float = 1.0,
) -> tuple:  # fmt: skip
    ts = solve.ts
    n = problem.n
    ys = np.empty((ts.size, n), solve.dtype)
    ys[0] = solve.y0
    ends, states, dense = [ts[0]], [solve.y0.astype(np.float64)], []
    direction = 1.0 if ts[-1] > ts[0] else -1.0
    nxt = [1]

    def on_step(solver: Any) -> bool:
        out = solver.dense_output() if keep or watch or nxt[0] < ts.size else None
        while nxt[0] < ts.size and direction * (ts[nxt[0]] - solver.t) <= 0:
            i = nxt[0]
            ys[i] = solver.y if ts[i] == solver.t else out(ts[i])
            nxt[0] += 1
        if keep:
            ends.append(solver.t)
            states.append(solver.y.copy())
            dense.append(out)
        if watch is not None and watch(solver.t_old, solver.t, solver.y, out):
            steps.stopped = True
        return steps.stopped

    y0 = solve.y0.astype(np.float64)
    if ts.size == 1:
        st, count, message, reached = ODE_OK, 0, "", ts[0]
        problem.f(ts[0], y0)
    else:
        st, count, message, reached = _run(
            problem, problem.f, problem.jac, ts[0], y0, ts[-1], method or solve.scipy_method,
            solve, on_step, solve.max_steps, solve.first_step, tighter,
        )  # fmt: skip
    info = np.array([reached, count, problem.nfev])
    if keep and (st == ODE_OK or steps.stopped):
        steps.t, steps.y, steps.at, steps.nfev = (
            np.array(ends),
            np.array(states),
            dense_at(dense),
            problem.nfev,
        )
        steps.dense = dense
        return st, ys, info, message, steps
    return st, ys, info, message, None


def _adjoint(problem: _Problem, solve: _Solve, gys: np.ndarray) -> tuple:
    n, M = problem.n, problem.M
    # y(t) from a solve by the adjoint's method at its tolerances: the forward's own
    # interpolants (BDF's, LSODA's, or Radau's at the user's tolerances) miss a relaxation
    # oscillation's fast transients by enough to move its gradient by 10-30 % (Van der
    # Pol, mu = 1000, tolerances 1e-6), where these agree with finite differences of the
    # solution to 1e-4
    st, _, info, message, steps = _forward(
        problem, solve, True, None, Steps(np.zeros(0), np.zeros((0, n)), dense_at([]), 0),
        ADJOINT_METHOD[solve.scipy_method], ADJOINT_TOLERANCE,
    )  # fmt: skip
    if st != ODE_OK:
        return st, None, None, None, info, message
    ends, dense = steps.t, steps.dense
    forward_dir = 1.0 if ends[-1] > ends[0] else -1.0
    keys = list(forward_dir * ends)

    def y_at(t: float) -> np.ndarray:
        k = min(max(bisect.bisect_left(keys, forward_dir * t) - 1, 0), len(dense) - 1)
        return dense[k](t)

    f, gy, gp = np.empty(n, solve.dtype), np.empty(n, solve.dtype), np.empty(M, solve.dtype)

    def fun(t: float, z: np.ndarray) -> np.ndarray:
        problem.driven.vjp(t, y_at(t).astype(solve.dtype), z[:n].astype(solve.dtype), f, gy, gp)
        problem.nfev += 1
        out = -np.concatenate([gy, gp]).astype(np.float64)
        if not np.all(np.isfinite(out)):
            problem.bad_t = t
            raise _NonFinite
        return out

    def jac(t: float, z: np.ndarray) -> Any:
        fy, fp = problem.rows(t, y_at(t))
        if not (np.all(np.isfinite(fy)) and np.all(np.isfinite(fp))):
            problem.bad_t = t
            raise _NonFinite  # (the derivative of f is infinite: no gradient there)
        if n + M > _SPARSE_FROM and solve.scipy_method in ("radau", "bdf"):
            return sp.bmat(
                [[sp.csr_matrix(-fy.T), None], [sp.csr_matrix(-fp.T), sp.csr_matrix((M, M))]],
                format="csc",
            )
        J = np.zeros((n + M, n + M))
        J[:n, :n] = -fy.T
        J[n:, :n] = -fp.T
        return J

    ts = solve.ts
    z = np.zeros(n + M)
    gts = np.zeros(ts.size)
    info = np.zeros(3)
    total = 0

    for i in range(ts.size - 1, 0, -1):
        z[:n] += gys[i]
        gts[i] += float(np.sum(gys[i] * problem.f(ts[i], solve.ys[i].astype(np.float64))))

        def keep(solver: Any) -> None:  # the next interval restarts from the last state
            z[:] = solver.y

        start = z.copy()
        st, count, message, reached = _run(
            problem, fun, jac, ts[i], start, ts[i - 1], ADJOINT_METHOD[solve.scipy_method],
            solve, keep, solve.max_steps - total, 0.0, ADJOINT_TOLERANCE,
        )  # fmt: skip
        total += count
        info[:] = reached, total, problem.nfev
        if st != ODE_OK:
            return st, z[:n].copy(), gts, z[n:].copy(), info, message
    gts[0] -= float(np.sum(z[:n] * problem.f(ts[0], solve.y0.astype(np.float64))))
    info[2] = problem.nfev
    return ODE_OK, z[:n] + gys[0], gts, z[n:].copy(), info, ""
