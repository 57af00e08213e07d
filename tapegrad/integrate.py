"""Differentiable ODE solvers: ``odeint`` (SciPy's and HIPS autograd's calling
convention) and ``solve_ivp`` (SciPy's).

The right-hand side is an ordinary tapegrad function. It is captured once per shape
(``tg.compile``) in a vector-Jacobian form, ``(t, y, a, p) -> (<f(t, y; p), a>, f)``:
one replay gives ``f`` and, backward, ``a f_y``, ``a f_p`` and ``a f_t``. The solvers
(``tapegrad.odesolve``) run that program's plans inside their compiled loops: no Python
and no recording per step. The whole solve is then one node of the caller's graph,
whose backward is

* ``adjoint=False`` (default): the discrete reverse pass through the steps taken, with
  their sizes held fixed (as fractions of each output interval): the exact gradient of
  the computed solution. Memory grows with the number of steps (each step's state and
  stages are kept).
* ``adjoint=True``: the continuous adjoint method, integrated backward with the same
  method and tolerances; constant memory in the number of steps, and gradients accurate
  to the solver's tolerance rather than exact for the discrete solution.

SciPy's methods (``Radau``, ``BDF`` and ``LSODA`` for stiff systems, ``RK23``,
``DOP853``) step the same captured function from Python with its exact Jacobian, and
are differentiated through the continuous adjoint alone (``tapegrad.ode_scipy``).
``solve_ivp``'s ``events`` are located along the solution, and their times and states
differentiated by the implicit function theorem (``tapegrad.ode_events``).

Gradients flow to ``y0``, the times ``t``, the parameters passed after ``t`` (or in
``args``) and tensors that require grad read from the function's closure, globals,
``self`` or attributes of a parameter object (found as ``tg.compile`` finds them). A
list or tuple parameter that is one regular array (``[k1, k2]``) is stacked, recorded;
any other container (nested lists, tuples and dicts: HIPS autograd's ``ode_net`` passes
``[(W, b), ...]``) is a pytree, passed to the function in its structure, each leaf a
parameter. Integer parameters are constants (indices, counts), and so are other objects
(``p`` in ``odeint(f, y0, t, p)``). Plain values the function reads from outside
(numbers, arrays, attributes, ``p.k`` included) are compared on every solve, and a
change captures again; anything it reads that changes between a solve and its backward
raises. Higher-order
derivatives and forward mode through a solve raise (the node's backward is not
recorded).

The discrete reverse pass of a small system does not replay the forward: the solve keeps
each accepted stage's program values (``odesolve.snapshot``) and the reverse pass runs
only the backward kernels on them.

A right-hand side that branches in Python on a value (``if y[0] > 0``) has guards; when
one fails mid-solve the solve is rerun with Python driving each evaluation (each still a
compiled replay), slower but the same result. One that cannot be captured at all (custom
``tg.Function``, hooks) raises.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.optimize import OptimizeResult

from . import batching, ode_events, ode_scipy, tiers
from . import numpy as tnp
from .function import Function
from .grad_mode import is_grad_enabled, no_grad
from .numpy_protocols import holds_tensor
from .ode_arguments import (
    MAX_STEPS,
    checked_times,
    eval_times,
    is_numeric,
    is_tree,
    no_times,
    parameter,
    recorded,
    refusal_message,
    step_limit,
    stiff_at,
    unrecorded_values,
)
from .ode_events import ivp_result
from .ode_system import Driven, captured_system
from .odesolve import (
    DOPRI5,
    ODE_MAXSTEPS,
    ODE_NONFINITE,
    ODE_OK,
    ODE_REPLAY,
    ODE_UNDERFLOW,
    RK4,
    adjoint,
    adjoint_compiled,
    forward,
    forward_compiled,
    reverse,
    reverse_compiled,
)
from .pytree import flatten, structure
from .recording import tensor
from .tensors import Tensor

__all__ = ["IntegrationError", "odeint", "solve_ivp"]

METHODS = {"rk45": DOPRI5, "dopri5": DOPRI5, "rk4": RK4}


class IntegrationError(RuntimeError):
    """Raised when a solver cannot integrate.

    The right-hand side returned NaN or inf, the step size underflowed (the solution
    blows up, or the system is too stiff for an explicit method), or more than
    ``max_steps`` steps were needed. A ``RuntimeError``; :func:`solve_ivp` raises it
    instead of returning ``success=False``.

    See Also
    --------
    odeint, solve_ivp : The solvers that raise it.

    Examples
    --------
    ``dy/dt = y**2`` with ``y(0) = 1`` blows up at ``t = 1``:

    >>> from tapegrad.integrate import odeint
    >>> odeint(lambda y, t: y ** 2, [1.0], [0.0, 2.0])
    Traceback (most recent call last):
    ...
    tapegrad.integrate.IntegrationError: odeint (forward solve): the step size underflowed ...
    """


_STATUS_TEXT = {
    ODE_NONFINITE: "the right-hand side returned nan or inf",
    ODE_UNDERFLOW: (
        "the step size underflowed (fell below the spacing of floats near t): the "
        "solution blows up there, the right-hand side is nan or inf just beyond it, or "
        "the system is too stiff for an explicit method"
    ),
}


class _Solve:
    """One solve: the problem, its forward solution, and what its gradient needs."""

    def __init__(
        self,
        name: str,
        fun: Callable,
        tfirst: bool,
        y0: Any,
        ts: Any,
        params: Sequence[Any],
        method: str,
        rtol: float,
        atol: float,
        step: float | None,
        first_step: float | None,
        max_step: float,
        max_steps: int,
        use_adjoint: bool | None,
    ) -> None:
        self.name = name
        key = method.lower() if isinstance(method, str) else method
        if key not in METHODS and key not in ode_scipy.METHODS:
            raise ValueError(
                f"{name}: unknown method {method!r}; use 'RK45', 'RK4', 'DOP853', 'RK23', "
                "'Radau', 'BDF' or 'LSODA'"
            )
        # SciPy's methods take their own steps: differentiated through the adjoint alone
        self.scipy_method = key if key in ode_scipy.METHODS else None
        if use_adjoint is None:
            use_adjoint = self.scipy_method is not None
        elif self.scipy_method and not use_adjoint:
            raise ValueError(
                f"{name}: method {method!r} is differentiated through the continuous "
                "adjoint only (SciPy takes its steps, so there is no discrete reverse pass "
                "through them); leave adjoint out or pass adjoint=True"
            )
        self.tab = METHODS.get(key, DOPRI5)
        self.fixed = key == "rk4"
        for what, v in (("rtol", rtol), ("atol", atol)):
            if not (np.ndim(v) == 0 and float(v) > 0 and math.isfinite(float(v))):
                raise ValueError(f"{name}: {what} must be a positive number, got {v!r}")
        self.rtol, self.atol = float(rtol), float(atol)
        self.max_step = float(max_step)
        if not self.max_step > 0:
            raise ValueError(f"{name}: max_step must be positive, got {max_step!r}")
        self.first_step = 0.0 if first_step is None else float(first_step)
        if first_step is not None and not self.first_step > 0:
            raise ValueError(f"{name}: first_step must be positive, got {first_step!r}")
        self.max_steps = int(max_steps)
        self.adjoint = bool(use_adjoint)

        # values: y0 and the parameters as one float dtype (NumPy's result type)
        y0v = y0._value() if isinstance(y0, Tensor) else np.asarray(y0)
        if y0v.dtype.kind not in "fiub":
            raise TypeError(f"{name}: y0 must be real, got dtype {y0v.dtype}")
        # each parameter's leaves: itself, or a pytree's (nested lists, tuples and dicts
        # of arrays, as HIPS autograd's odeint takes args), each leaf one parameter
        self.leaves, trees, structures = [], [], []
        for q in params:
            if is_tree(q):
                leaves, rebuild = flatten(q)
                trees.append((len(leaves), rebuild))
                structures.append(structure(q))
            else:
                leaves = [q]
                trees.append((1, None))
                structures.append(None)
            self.leaves += leaves
        layout, floats, values = [], [y0v.dtype], []
        for k, q in enumerate(self.leaves):
            v = q._value() if isinstance(q, Tensor) else q
            kind = np.asarray(v).dtype.kind if is_numeric(v) else ""
            if kind == "c":
                raise TypeError(f"{name}: parameter {k} is complex; the solvers are real")
            if kind == "f" or isinstance(q, Tensor):
                v = np.asarray(v)
                layout.append(("array", tuple(v.shape)))
                values.append(v)
                if not isinstance(q, float):
                    floats.append(v.dtype)
            else:  # ints, bools, integer arrays (indices), anything else: constants
                layout.append(("const", q))
        dtype = np.result_type(*[d if d.kind == "f" else np.float64 for d in floats])
        if dtype.kind != "f" or dtype.itemsize < 4:
            dtype = np.dtype(np.float64)
        self.dtype = dtype
        self.y_shape = tuple(y0v.shape)
        self.y0 = np.ascontiguousarray(y0v, dtype).reshape(-1)
        self.p = (
            np.concatenate([np.asarray(v, dtype).reshape(-1) for v in values])
            if values
            else np.zeros(0, dtype)
        )
        self.m = self.p.size
        self.layout = layout
        self.ts = checked_times(name, ts)
        if self.fixed:
            d = np.abs(np.diff(self.ts))
            self.nsub = (
                np.ones(d.size, np.int64)
                if step is None
                else np.maximum(1, np.ceil(d / float(step) - 1e-9)).astype(np.int64)
            )
            if step is not None and not float(step) > 0:
                raise ValueError(f"{name}: step must be positive, got {step!r}")
        else:
            if step is not None:
                raise ValueError(f"{name}: step= is for the fixed-step method 'RK4'")
            self.nsub = np.zeros(max(self.ts.size - 1, 1), np.int64)
        self.system = captured_system(
            fun, tfirst, self.y_shape, layout, trees, tuple(structures), dtype, name
        )

    # --- running the core, compiled or driven ------------------------------------------
    def _prepare(self) -> tuple:
        """Capture (or find) the program for these values; records the tensors the
        function reads from outside. The last solve's program is reused without a replay
        when what it reads is unchanged (its plain values, the same tensors from outside,
        whose current values are copied in); the compiled loop checks its guards."""
        system = self.system
        last = system.last
        if last is not None:
            program, tensors = last
            now = system.step.current_reads(program)
            if (
                now is not None
                and len(now) == len(tensors)
                and all(a is b for a, b in zip(now, tensors))
                and program.fwd_plan is not None
                and program.bwd_plan is not None
            ):
                for inp, t in zip(program.outside, now):
                    np.copyto(inp.array, t._value(), casting="same_kind")
                np.copyto(program.inputs[3], self.p)
                return program, now
        args = (
            np.array(self.ts[0], self.dtype),
            self.y0.copy(),
            np.zeros(self.system.n, self.dtype),
            self.p,
        )
        _, program, outside = system.step.run_program(args, True)
        system.last = (program, outside)
        return program, outside

    def run(self, what: str, *args: Any) -> tuple:
        """Run ``forward``/``reverse``/``adjoint`` compiled; rerun driven by Python if the
        program cannot replay throughout (a guard failed mid-solve)."""
        step = self.system.step
        with step.lock:
            program = self._bind(what == "forward")
            # (a custom function's forward is Python: Python drives the solve)
            compiled = (
                program.fwd_plan is not None and program.bwd_plan is not None and not program.calls
            )
            if compiled:
                program.fuse_plans()  # (executors a background compiler just finished)
                tiers.upgrade()  # (and full kernels)
                ctx = self.system.context(program, self.m, self.dtype)
                loop = self._core(what, True)
                # on a cold cache the float64 loop compiles in the background (20-30 s) and
                # Python drives the same source meanwhile: the same numbers, step for step.
                # Not float32: NumPy keeps float32 * 0.2 in float32 where numba promotes,
                # so driven float32 steps would round differently; it compiles here.
                f64 = np.dtype(self.dtype) == np.float64
                if not f64 or tiers.loop_ready(loop, (ctx, *args), "ode float64"):
                    result = loop(ctx, *args)
                    if result[0] != ODE_REPLAY:
                        return result
            return self._core(what, False)(Driven(self), *args)

    def _bind(self, first: bool) -> Any:
        """The program the solve runs (under the step's lock): captured or found for the
        forward, which records what it reads from outside; the forward's for a backward,
        if what it reads is unchanged."""
        step = self.system.step
        if first:
            program, outside = self._prepare()
            self.program = program
            self.outside = [t for t, i in zip(outside, program.outside) if i.rg]
            self.read = [(t, t._value().copy()) for t in outside]
            self.M = self.m + sum(t.size for t in self.outside)
        else:
            program = self.program
            self._check_unchanged(step.current_reads(program), program)
            np.copyto(program.inputs[3], self.p)  # another solve may have replayed it
        return program

    def _check_unchanged(self, outside: list | None, program: Any) -> None:
        """The backward must see what the forward saw: the plain values the program took
        as constants, and the same tensors from outside with the same values."""
        same = outside is not None and len(outside) == len(self.read)
        same = same and all(
            t is u and np.array_equal(t._value(), v) for t, (u, v) in zip(outside, self.read)
        )
        if not same:
            raise RuntimeError(
                f"{self.name}: something the right-hand side reads from outside (a tensor, "
                "a number, an array) was replaced or modified in place between the solve "
                "and its backward; the gradient would be computed with other values than "
                "the solution. Solve again after changing it"
            )

    def f_at(self, t: float, y: np.ndarray) -> np.ndarray:
        """f(t, y) (one replay)."""
        out = np.empty(self.system.n, self.dtype)
        with self.system.step.lock:
            Driven(self).feval(t, y, out)
        return out

    @staticmethod
    def _core(what: str, compiled: bool) -> Callable:
        table = {
            "forward": (forward_compiled, forward),
            "reverse": (reverse_compiled, reverse),
            "adjoint": (adjoint_compiled, adjoint),
        }
        return table[what][0 if compiled else 1]

    def _raise(self, st: int, info: np.ndarray, phase: str, message: str = "") -> None:
        if st == ODE_OK:
            return
        where = f"{self.name} ({phase})"
        if st == ode_scipy.ODE_FAILED:
            raise IntegrationError(
                f"{where}: SciPy's solver failed at t = {info[0]:.6g}: {message}"
            )
        if st == ODE_MAXSTEPS:
            raise IntegrationError(
                f"{where}: more than max_steps={self.max_steps} steps before t = "
                f"{info[0]:.6g}; the system may be stiff or the tolerances too tight"
            )
        raise IntegrationError(f"{where}: {_STATUS_TEXT[st]} at t = {info[0]:.6g}")

    def solve(self) -> np.ndarray:
        """The forward solution at ``ts``: ``(len(ts), *y0.shape)``."""
        if self.scipy_method:
            with self.system.step.lock:
                self._bind(True)
                st, ys, info, message, _ = ode_scipy.forward(self, False)
            self._raise(st, info, "forward solve", message)
            self.info, self.ys = info, ys
            return ys.reshape((self.ts.size, *self.y_shape))
        record = not self.adjoint
        st, ys, info, meta, Ys, Ks, Ss, count = self.run(
            "forward", self.tab, self.y0, self.ts, self.nsub, self.rtol, self.atol,
            self.first_step, self.max_step, self.max_steps, record,
        )  # fmt: skip
        self._raise(st, info, "forward solve")
        self.info = info
        self.ys = ys
        self.recorded = (meta, Ys, Ks, Ss, count) if record else None
        self.stiff_at = (
            stiff_at(self.tab, meta, Ys, Ks, count) if record and not self.fixed else None
        )
        return ys.reshape((self.ts.size, *self.y_shape))

    def steps(self, watch: Callable | None = None) -> ode_scipy.Steps:
        """The steps a solve through ``ts`` takes (no gradient is kept): their end times,
        the states there and the state inside each (a step of the method cut short, or
        SciPy's interpolant). ``watch(t_old, t_new, y_new, at)`` is shown each step in
        turn (``at(t)``: the state inside it) and ends the solve there by returning
        True; a failure after it did is not an error."""
        if self.scipy_method:
            with self.system.step.lock:
                self._bind(True)
                st, _, info, message, steps = ode_scipy.forward(self, True, watch)
            if not (steps is not None and steps.stopped):
                self._raise(st, info, "forward solve", message)
            return steps
        st, ys, info, meta, Ys, _, _, count = self.run(
            "forward", self.tab, self.y0, self.ts, self.nsub, self.rtol, self.atol,
            self.first_step, self.max_step, self.max_steps, True,
        )  # fmt: skip
        t = np.concatenate([self.ts[:1], meta[:count, 0] + meta[:count, 1]])
        y = np.concatenate([Ys[:count], ys[-1:]]).astype(np.float64)
        if st == ODE_OK:
            t[-1] = self.ts[-1]

        def at(k: int, when: float) -> np.ndarray:
            if when == t[k]:
                return y[k]
            with self.system.step.lock:
                st, out, info, *_ = forward(
                    Driven(self), self.tab, y[k].astype(self.dtype), np.array([t[k], when]),
                    np.ones(1, np.int64), self.rtol, self.atol, 0.0, np.inf, 1, False,
                )  # fmt: skip
            self._raise(st, info, "event search")
            return out[1].astype(np.float64)

        if st != ODE_OK and count:  # the last step's end (not returned by a failed solve)
            y[count] = at(count - 1, t[count])
        steps = ode_scipy.Steps(t, y, at, int(info[2]))
        for k in range(count if watch is not None else 0):
            if watch(t[k], t[k + 1], y[k + 1], lambda when, k=k: at(k, when)):
                steps.t, steps.y, steps.stopped = t[: k + 2], y[: k + 2], True
                return steps
        self._raise(st, info, "forward solve")
        return steps

    def gradients(self, gys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(g_y0, g_ts, g_params)`` (flat; the parameters then the outside tensors) for
        the cotangent ``gys`` of the solution."""
        gys = np.ascontiguousarray(gys, self.dtype).reshape(self.ts.size, -1)
        if self.scipy_method:
            with self.system.step.lock:
                self._bind(False)
                st, gy0, gts, gp, info, message = ode_scipy.adjoint(self, gys)
            self._raise(st, info, "adjoint solve", message)
            gy0, gp = gy0.astype(self.dtype), gp.astype(self.dtype)
        elif self.adjoint:
            st, gy0, gts, gp, info = self.run(
                "adjoint", self.tab, self.ts, self.ys, gys, self.nsub, self.rtol, self.atol,
                self.max_step, self.max_steps, self.M,
            )  # fmt: skip
            self._raise(st, info, "adjoint solve")
        else:
            if self.stiff_at is not None:
                raise IntegrationError(
                    f"{self.name} (reverse pass): the solve is stiff from t = "
                    f"{self.stiff_at:.6g} on (RK45's steps were held to its stability limit "
                    "there, not to the tolerance), and the reverse pass through such steps "
                    "amplifies their errors without bound: the gradient would be wrong. Use "
                    "method='Radau' (or 'BDF'), which is made for stiff systems"
                )
            meta, Ys, Ks, Ss, count = self.recorded
            st, gy0, gts, gp = self.run(
                "reverse", self.tab, self.ts, gys, meta, Ys, Ks, Ss, count, self.M
            )
            self._raise(st, np.array([self.ts[0]]), "reverse pass")
        return gy0, gts, gp


class _SolveNode(Function):
    """The whole solve as one node: its inputs are y0, the time arrays, the parameters
    and the outside tensors that require grad; its backward runs the reverse pass or the
    adjoint (``_Solve.gradients``). Not differentiated again, nor in forward mode: the
    error names the solver (``refusal``, see ``tapegrad.rule_walks``)."""

    # a solve drives its own program (tapegrad.ode_system): not captured again
    replays = False

    @staticmethod
    def refusal(ctx: Any, mode: str) -> str:
        return refusal_message(ctx.call[0].name, mode)

    @staticmethod
    def forward(ctx: Any, call: tuple, *values: Any) -> np.ndarray:
        ctx.call = call
        return call[0].result

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        solve, time_maps = ctx.call
        gy0, gts, gp = solve.gradients(g)
        gys = np.asarray(g).reshape(solve.ts.size, -1)
        out: list[Any] = [None, gy0.reshape(solve.y_shape)]
        out += [to_input(gts, gys) for to_input in time_maps]
        off = 0
        for kind, shape in solve.layout:  # one gradient per parameter leaf
            if kind == "const":
                out.append(None)
                continue
            size = math.prod(shape)
            out.append(gp[off : off + size].reshape(shape))
            off += size
        off = solve.m
        for t in solve.outside:
            out.append(gp[off : off + t.size].reshape(t.shape))
            off += t.size
        return tuple(out)


def _run(
    name: str,
    fun: Callable,
    tfirst: bool,
    y0: Any,
    ts: np.ndarray,
    times: Sequence[tuple[Any, Callable[[np.ndarray], np.ndarray]]],
    params: Sequence[Any],
    **options: Any,
) -> tuple[_Solve, Any]:
    """Solve through ``ts``; when anything requires grad, record the solve as one node.
    ``times``: the user's time arguments, each with the map from the gradients at ``ts``
    (and the output cotangents) to its own."""
    if not callable(fun):
        raise TypeError(f"{name}: the right-hand side must be callable, got {type(fun).__name__}")
    solve = _Solve(name, fun, tfirst, y0, ts, params, **options)
    solve.result = solve.solve()
    inputs = [y0, *(t for t, _ in times), *solve.leaves, *solve.outside]
    if is_grad_enabled() and any(isinstance(v, Tensor) and v.requires_grad for v in inputs):
        call = (solve, [to_input for _, to_input in times])
        return solve, _SolveNode.apply(call, *inputs)
    if any(isinstance(v, Tensor) for v in inputs):
        return solve, tensor(solve.result)
    return solve, solve.result


def odeint(
    func: Callable,
    y0: Any,
    t: Any,
    *params: Any,
    args: Sequence[Any] = (),
    tfirst: bool = False,
    method: str = "RK45",
    rtol: float = 1.49012e-8,
    atol: float = 1.49012e-8,
    step: float | None = None,
    first_step: float | None = None,
    max_step: float = np.inf,
    max_steps: int = MAX_STEPS,
    adjoint: bool | None = None,
    max_num_steps: int | None = None,
) -> Any:
    """Integrate ``dy/dt = func(y, t, *params)`` and return ``y`` at the times ``t``.

    SciPy's ``odeint`` calling convention (``tfirst=True`` for ``func(t, y, ...)``),
    with tapegrad's explicit Runge-Kutta solvers instead of LSODA. ``func`` is captured
    once per shape (``tg.compile``) and the solve runs in compiled loops; the whole
    solve is one node of the caller's graph. Gradients flow to ``y0``, the times ``t``,
    the parameters and tensors that require grad read from ``func``'s closure,
    globals, ``self`` or attributes of a parameter object.

    Parameters
    ----------
    func : callable
        The right-hand side, written with tapegrad (or NumPy-style) operations on its
        tensor arguments; it returns an array (or list of arrays) shaped like ``y0``.
    y0 : array_like or Tensor
        The initial state, any shape, at ``t[0]``.
    t : array_like or Tensor
        Output times, strictly increasing or decreasing; ``t[0]`` is the initial time.
    *params
        Extra arguments passed to ``func`` after ``y`` and ``t`` (arrays, tensors and
        floats are differentiable; integers and other values are constants). A nested
        list, tuple or dict of them that is not one regular array is passed as it is,
        every leaf differentiable (HIPS autograd's ``odeint``); an object's attributes
        that ``func`` reads are checked on every solve.
    args : sequence, optional
        More extra arguments, after ``params`` (SciPy's keyword).
    tfirst : bool, optional
        ``func(t, y, *params)`` instead of ``func(y, t, *params)``.
    method : {'RK45', 'RK4', 'DOP853', 'RK23', 'Radau', 'BDF', 'LSODA'}, optional
        tapegrad's adaptive Dormand-Prince 5(4) (``'dopri5'`` too) or classic RK4 with
        fixed steps, run in compiled loops; or one of SciPy's solvers, stepping a
        captured right-hand side with its exact Jacobian (the implicit ``'Radau'``,
        ``'BDF'`` and ``'LSODA'`` are for stiff systems), differentiated through the
        continuous adjoint.
    rtol, atol : float, optional
        Tolerances of the adaptive method, with SciPy's meaning (defaults: SciPy
        ``odeint``'s).
    step : float, optional
        ``'RK4'`` only: the largest step (default: one step per output interval).
    first_step, max_step : float, optional
        As in SciPy's ``solve_ivp``.
    max_steps : int, optional
        The most steps the solve (and its adjoint) may take before it raises.
    adjoint : bool, optional
        Differentiate with the continuous adjoint (constant memory) instead of the
        discrete reverse pass through the steps (exact for the computed solution).
        The default is False for ``'RK45'`` and ``'RK4'``; SciPy's methods have the
        adjoint only (False raises).
    max_num_steps : int, optional
        Another name for ``max_steps`` (pass one of them).

    Returns
    -------
    ndarray or Tensor
        ``(len(t), *y0.shape)``; a tensor when any input is one.

    Raises
    ------
    IntegrationError
        When ``func`` returns NaN or inf, the step size underflows, or more than
        ``max_steps`` steps are needed.
    ValueError
        ``t`` is not 1-D, finite and strictly monotonic; an unknown ``method``; a
        tolerance, ``step``, ``first_step``, ``max_step`` or ``max_steps`` that is not
        positive; ``step`` with an adaptive method; ``adjoint=False`` with one of
        SciPy's methods; or ``func`` returns a shape other than ``y0``'s.
    TypeError
        ``func`` is not callable or returns None or non-real values; ``y0`` or a
        parameter is complex.
    NotImplementedError
        When they are taken, second derivatives or forward mode through the solve (its
        backward is one compiled node, not recorded ops).

    See Also
    --------
    solve_ivp : SciPy's ``solve_ivp`` interface.

    Notes
    -----
    With ``adjoint=False`` the gradient is that of the computed solution, exactly: the
    reverse pass goes through the steps taken, with their sizes held fixed; memory
    grows with the number of steps. With ``adjoint=True`` the adjoint equations are
    integrated backward with the same method and tolerances: constant memory, and
    gradients accurate to the solver's tolerance. SciPy's methods read ``y(t)`` in the
    adjoint from a ``Radau`` solve (a stiff system cannot be integrated backward), and
    the adjoint runs with ``Radau`` too, both at tolerances 100 times tighter than the
    forward's. ``RK45`` on a stiff system (steps held at its stability limit) raises in
    the discrete reverse pass rather than return its unbounded amplification.

    Examples
    --------
    Exponential decay, ``dy/dt = -k y``, and the derivative of ``y(2)`` in ``k``,
    ``-2 exp(-2 k)``:

    >>> import numpy as np, tapegrad as tg
    >>> from tapegrad.integrate import odeint
    >>> t = np.array([0.0, 1.0, 2.0])
    >>> y = odeint(lambda y, t, k: -k * y, np.array([1.0]), t, 0.5)
    >>> y.shape, np.allclose(y[:, 0], np.exp(-0.5 * t))
    ((3, 1), True)
    >>> k = tg.tensor(0.5, requires_grad=True)
    >>> y = odeint(lambda y, t, k: -k * y, np.array([1.0]), t, k)
    >>> y[-1, 0].backward()
    >>> np.allclose(k.grad, -2.0 * np.exp(-1.0))
    True
    """
    level, n = batching.level_of((func, y0, t, params, args))
    if level:  # inside tg.vmap: one solve per example, each with its own steps
        return batching.loop(
            "odeint", functools.partial(odeint, func), (y0, t, *params), dict(
                args=args, tfirst=tfirst, method=method, rtol=rtol, atol=atol, step=step,
                first_step=first_step, max_step=max_step, max_steps=max_steps,
                adjoint=adjoint, max_num_steps=max_num_steps,
            ), level, n, per_example=True,
        )  # fmt: skip
    if np.shape(t._value() if isinstance(t, Tensor) else t) == (0,):
        return no_times(
            "odeint", func, y0, (*params, *args), t, (0, *np.shape(unrecorded_values(y0)))
        )
    ts = checked_times("odeint", t)
    options = dict(
        method=method, rtol=rtol, atol=atol, step=step, first_step=first_step,
        max_step=max_step, max_steps=step_limit("odeint", max_steps, max_num_steps),
        use_adjoint=adjoint,
    )  # fmt: skip
    params = tuple(parameter(q) for q in (*params, *args))
    t = recorded(t)
    times = [(t, lambda g, _: g)]
    _, ys = _run("odeint", func, tfirst, recorded(y0), ts, times, params, **options)
    return ys


def solve_ivp(
    fun: Callable,
    t_span: Any,
    y0: Any,
    method: str = "RK45",
    t_eval: Any = None,
    dense_output: bool = False,
    events: Any = None,
    vectorized: bool = False,
    args: Sequence[Any] | None = None,
    *,
    rtol: float = 1e-3,
    atol: float = 1e-6,
    step: float | None = None,
    first_step: float | None = None,
    max_step: float = np.inf,
    max_steps: int = MAX_STEPS,
    adjoint: bool | None = None,
    max_num_steps: int | None = None,
) -> OptimizeResult:
    """Solve an initial value problem, SciPy's ``solve_ivp``, differentiably.

    ``fun(t, y, *args)`` with ``y`` 1-D. Without ``t_eval`` the solution is returned at
    the steps the adaptive solver took (those times are constants; the end points of
    ``t_span`` are differentiable). Gradients flow to ``y0``, ``t_span``, ``t_eval``,
    ``args`` and tensors ``fun`` reads from outside. A failed integration raises
    :class:`IntegrationError` instead of returning ``success=False``.

    Parameters
    ----------
    fun : callable
        The right-hand side ``fun(t, y, *args)``, written with tapegrad (or
        NumPy-style) operations; it returns an array shaped like ``y``.
    t_span : pair of float or Tensor
        ``(t0, t1)``, the interval of integration (``t1 < t0`` integrates backward).
    y0 : array_like or Tensor
        The initial state, 1-D.
    method : {'RK45', 'RK4', 'DOP853', 'RK23', 'Radau', 'BDF', 'LSODA'}, optional
        As in :func:`odeint`: the implicit ``'Radau'``, ``'BDF'`` and ``'LSODA'`` for
        stiff systems.
    t_eval : array_like or Tensor, optional
        Times at which to return the solution, within ``t_span`` and sorted in its
        direction.
    dense_output : bool, optional
        Not implemented: True raises.
    events : callable or list of callables, optional
        SciPy's events: ``event(t, y, *args)`` returns a number whose zeros are
        located (a sign change across a step, then Brent's method inside it). Its
        attributes as in SciPy: ``terminal`` (True, or the number of occurrences, ends
        the integration there) and ``direction`` (positive: rising zeros only,
        negative: falling, 0: both). The event times and the states there are
        differentiable, in everything the solution depends on and the tensors the
        event function reads.
    vectorized : bool, optional
        Accepted for SciPy's signature and ignored: ``fun`` is called on one state.
    args : sequence, optional
        Extra arguments of ``fun`` (arrays, tensors and floats are differentiable).
    rtol, atol : float, optional
        Tolerances of the adaptive method (defaults: SciPy ``solve_ivp``'s).
    step : float, optional
        ``'RK4'`` only: the largest step.
    first_step, max_step : float, optional
        As in SciPy.
    max_steps : int, optional
        The most steps the solve (and its adjoint) may take before it raises.
    adjoint : bool, optional
        Differentiate with the continuous adjoint (see :func:`odeint`).
    max_num_steps : int, optional
        Another name for ``max_steps`` (pass one of them).

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's fields: ``t``, ``y`` (``(n, len(t))``, a tensor when any input is
        one), ``nfev``, ``status`` (0, or 1 when a terminal event stopped the
        integration), ``message``, ``success`` (True); ``t_events`` and ``y_events``
        (with ``events``: per event, its times ``(k,)`` and states ``(k, n)``, tensors
        when anything requires grad; else None); ``sol`` is None.

    Raises
    ------
    IntegrationError
        ``fun`` returns NaN or inf, the step size underflows, or more than
        ``max_steps`` steps are needed.
    ValueError
        ``t_span`` is not a pair, ``y0`` is not 1-D, ``t_eval`` is outside ``t_span``
        or not sorted in its direction, an option is invalid (as in :func:`odeint`),
        an event function returns anything but one finite number or has an invalid
        ``terminal`` or ``direction``, or, when it is differentiated, an event's slope
        along the solution is zero at its zero (no derivative there).
    TypeError
        ``fun`` is not callable or returns None or non-real values; ``y0`` or an
        argument is complex.
    NotImplementedError
        ``dense_output`` is given; second derivatives or forward mode through the
        solve, when they are taken.

    See Also
    --------
    odeint : SciPy's ``odeint`` interface, any shape of state.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.integrate import solve_ivp
    >>> sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 2.0), np.array([1.0, 2.0]),
    ...                 t_eval=np.array([0.0, 1.0, 2.0]), args=(0.5,), rtol=1e-8, atol=1e-10)
    >>> sol.success, sol.t
    (True, array([0., 1., 2.]))
    >>> np.round(sol.y, 6)
    array([[1.      , 0.606531, 0.367879],
           [2.      , 1.213061, 0.735759]])

    The gradient of the final state with respect to the initial one, ``exp(-1)``:

    >>> def final(y0):
    ...     sol = solve_ivp(lambda t, y: -0.5 * y, (0.0, 2.0), y0, rtol=1e-10, atol=1e-12)
    ...     return tnp.sum(sol.y[:, -1])
    >>> np.allclose(tg.grad(final)(np.array([1.0, 2.0])), np.exp(-1.0))
    True

    A ball thrown up at 3 m/s from 2 m lands (a terminal event) at ``t = (3 + sqrt(9 +
    4 g)) / g``; the landing time's derivative in the launch height is ``1 / sqrt(9 + 4
    g)``:

    >>> def ground(t, y, g):
    ...     return y[0]
    >>> ground.terminal, ground.direction = True, -1
    >>> def landing(h):
    ...     sol = solve_ivp(lambda t, y, g: tnp.stack([y[1], -g + 0.0 * y[0]]), (0.0, 5.0),
    ...                     tnp.stack([h, 3.0]), events=ground, args=(9.81,), rtol=1e-10)
    ...     return sol.t_events[0][0]
    >>> print(f"{float(landing(2.0)):.6f} {tg.grad(landing)(2.0):.6f}")
    1.013813 0.143978
    >>> print(f"{(3 + np.sqrt(9 + 4 * 9.81)) / 9.81:.6f} {1 / np.sqrt(9 + 4 * 9.81):.6f}")
    1.013813 0.143978
    """
    name = "solve_ivp"
    if dense_output:
        raise NotImplementedError(f"{name}: dense_output is not implemented")
    if batching.level_of((fun, t_span, y0, t_eval, args))[0]:
        raise NotImplementedError(
            f"{name} inside tg.vmap: each example's adaptive steps (its sol.t) differ, so "
            "the results do not stack. Use tapegrad.integrate.odeint, which solves each "
            "example with its own steps at the times t, or loop over the examples"
        )
    evs = ode_events.event_list(name, events)
    # (0.0, T) with T a tensor: its values here; the span is recorded (stacked) below
    span = np.asarray(unrecorded_values(t_span), np.float64)
    if span.shape != (2,):
        raise ValueError(f"{name}: t_span must be (t0, t1), got shape {span.shape}")
    y0v = y0._value() if isinstance(y0, Tensor) else np.asarray(y0)
    if y0v.ndim != 1:
        raise ValueError(f"{name}: y0 must be 1-D, got shape {y0v.shape}")
    params = tuple(args) if args is not None else ()
    te = None if t_eval is None else eval_times(name, t_eval, span)
    if span[1] == span[0]:  # SciPy's: no step; y0 at t0 twice, and nothing with t_eval
        y = _no_step(name, fun, t_span, span, y0, params)
        if te is None:
            return ivp_result(span, y, 1, [], evs, y0v.shape[0])
        nothing = no_times(name, fun, y0, params, (t_span, t_eval), (y0v.shape[0], 0))
        return ivp_result(np.zeros(0), nothing, 1, [], evs, y0v.shape[0])
    direction = 1.0 if span[1] > span[0] else -1.0
    options = dict(
        method=method, rtol=rtol, atol=atol, step=step, first_step=first_step,
        max_step=max_step, max_steps=step_limit(name, max_steps, max_num_steps),
        use_adjoint=adjoint,
    )  # fmt: skip

    y0, t_span, t_eval = recorded(y0), recorded(t_span), recorded(t_eval)
    params = tuple(parameter(q) for q in params)
    found, stop, nfev = [], None, None
    if t_eval is None or te.size == 0 or evs:
        # the steps (one solve without gradients): the times to answer at without t_eval
        # (the rerun through exactly those times takes the same steps), and where the
        # events are
        probe = _Solve(name, fun, True, y0, span, params, **options)
        watch = ode_events.Locator(evs, params, span[0], probe.y0) if evs else None
        steps = probe.steps(watch)
        nfev = steps.nfev  # the solve that chose the steps (the rerun rejects none)
        if watch is not None:
            found, stop = watch.found, watch.stop
    out = steps.t if te is None else te
    if stop is not None:  # a terminal event: the solution ends there (SciPy's points)
        if te is None:  # the start, the steps before the event, the event
            out = np.concatenate([out[:1], out[1:][direction * (out[1:] - stop) < 0], [stop]])
        else:
            out = out[direction * (out - stop) <= 0]
    if out.size == 0 and not found:  # no times to answer at: SciPy's empty solution
        nothing = no_times(name, fun, y0, params, (t_span, t_eval), (y0v.shape[0], 0))
        return ivp_result(out, nothing, nfev, [], evs, y0v.shape[0])
    # the solve's times: t0, the outputs and the events, each once
    ts = np.array(sorted({span[0], *out, *(w for _, w in found)}, key=lambda w: direction * w))
    row = {w: j for j, w in enumerate(ts)}
    outs = np.array([row[w] for w in out], np.int64)
    # which time input moves each row (its output time): t_eval's own, else t_span's ends
    mover: dict[int, Any] = {}
    if te is not None:
        mover.update((row[w], (t_eval, q)) for q, w in enumerate(te) if w in row)
    else:
        if stop is None:
            mover[row[span[1]]] = (t_span, 1)
    mover.setdefault(0, (t_span, 0))
    # t_eval[0] == t_span[0]: one time in the solve, two inputs. Moving t_eval[0] alone
    # moves that output along the solution (<g_0, f(t_0, y_0)>); t_span[0] gets the rest
    # of the joint derivative
    shares = te is not None and te.size > 0 and te[0] == span[0]

    def shared(gys: np.ndarray) -> float:
        return float(np.sum(gys[0] * solve.f_at(ts[0], solve.y0))) if shares else 0.0

    def span_grad(g: np.ndarray, gys: np.ndarray) -> np.ndarray:
        end = [j for j, (who, q) in mover.items() if who is t_span and q == 1]
        return np.array([g[0] - shared(gys), g[end[0]] if end else 0.0])

    times = [(t_span, span_grad)]
    if te is not None:

        def eval_grad(g: np.ndarray, gys: np.ndarray) -> np.ndarray:
            mine = np.zeros(te.size)
            for j, (who, q) in mover.items():
                if who is t_eval:
                    mine[q] = shared(gys) if j == 0 else g[j]
            return mine

        times.append((t_eval, eval_grad))
    solve, ys = _run(name, fun, True, y0, ts, times, params, **options)
    t_events, y_events = [[] for _ in evs], [[] for _ in evs]
    for i, when in found:
        j = row[when]
        y_row = ys[j]
        who = mover.get(j)
        if who is not None and isinstance(who[0], Tensor) and who[0].requires_grad:
            # the row's time is an input: hold it fixed (its own derivative is f)
            moved = who[0][who[1]]
            f = solve.f_at(when, unrecorded_values(y_row).astype(solve.dtype))
            y_row = y_row - f * (moved - unrecorded_values(moved))
        t_e, y_e = ode_events.differentiable(evs[i], when, y_row, solve.f_at, params, solve.dtype)
        t_events[i].append(t_e)
        y_events[i].append(y_e)
    if not outs.size:
        y = no_times(name, fun, y0, params, (t_span, t_eval), (y0v.shape[0], 0))
    elif stop is not None and te is None:  # the last state is the terminal event's
        last = y_events[found[-1][0]][-1]
        stack = tnp if isinstance(ys, Tensor) or isinstance(last, Tensor) else np
        y = stack.concatenate([ys[outs[:-1]], stack.asarray(last)[None]]).T
    else:
        y = ys[outs].T
    nfev = int(solve.info[2]) if nfev is None else nfev
    result = ivp_result(out, y, nfev, list(zip(t_events, y_events)), evs, y0v.shape[0])
    if stop is not None:
        result.status = 1
        result.message = "A termination event occurred."
    return result


def _no_step(
    name: str, fun: Callable, t_span: Any, span: np.ndarray, y0: Any, params: tuple
) -> Any:
    """``solve_ivp``'s states for equal ends of ``t_span``: SciPy's ``[y0, y0]`` (no step
    is taken; ``fun`` is called once, as SciPy's, on the values). Differentiable as the
    solution is (see :class:`_NoStepNode`)."""
    if not callable(fun):
        raise TypeError(f"{name}: the right-hand side must be callable, got {type(fun).__name__}")
    y0, t_span = recorded(y0), recorded(t_span)
    y0v = unrecorded_values(y0)
    if y0v.dtype.kind not in "fiub":
        raise TypeError(f"{name}: y0 must be real, got dtype {y0v.dtype}")
    y0v = y0v.astype(np.float64) if y0v.dtype.kind != "f" else y0v.copy()  # (SciPy's floats)
    with no_grad():
        f = fun(float(span[0]), y0v.copy(), *params)
    fv = unrecorded_values(recorded(f))
    if fv.shape != y0v.shape:
        raise ValueError(f"{name}: fun returned shape {fv.shape} for y0 of shape {y0v.shape}")
    if not np.all(np.isfinite(fv)):
        raise IntegrationError(f"{name}: {_STATUS_TEXT[ODE_NONFINITE]} at t = {span[0]:.6g}")
    inputs = (y0, t_span)
    if is_grad_enabled() and any(isinstance(v, Tensor) and v.requires_grad for v in inputs):
        y0 = y0.astype(y0v.dtype) if isinstance(y0, Tensor) else y0v
        return _NoStepNode.apply(fv.astype(y0v.dtype), y0, t_span)
    ys = np.stack([y0v, y0v], axis=1)
    return tensor(ys) if any(holds_tensor(v) for v in (*inputs, *params, f)) else ys


class _NoStepNode(Function):
    """The solution over an interval of no length, ``[y0, y0]``, with its first
    derivatives: ``f(t0, y0)`` in t1, ``-f`` in t0, the identity in y0 (and 0 in what
    f reads). Like a solve, it is not differentiated twice."""

    replays = False  # part of a solve, as _SolveNode

    @staticmethod
    def refusal(ctx: Any, mode: str) -> str:
        return refusal_message("solve_ivp", mode)

    @staticmethod
    def forward(ctx: Any, f: np.ndarray, y0: np.ndarray, t_span: Any) -> np.ndarray:
        ctx.f = f
        return np.stack([y0, y0], axis=1)

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        moved = float(np.sum(np.asarray(g)[:, 1] * ctx.f))
        return None, g[:, 0] + g[:, 1], np.array([-moved, moved])
