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

import math
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.optimize import OptimizeResult

from . import numpy as tnp
from . import tiers
from ._protocols import holds_tensor
from .compile import compile
from .function import Function
from .layout import H_ARENA, H_GEN, H_GRAD
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
from .tensors import Tensor, is_grad_enabled, no_grad, tensor

__all__ = ["IntegrationError", "odeint", "solve_ivp"]

METHODS = {"rk45": DOPRI5, "dopri5": DOPRI5, "rk4": RK4}
SCIPY_ONLY = ("rk23", "dop853", "radau", "bdf", "lsoda")
MAX_STEPS = 100_000
_CACHE_SIZE = 32


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


# --- the right-hand side, captured -----------------------------------------------------
class _System:
    """One right-hand side at one set of shapes: its vector-Jacobian form, compiled."""

    def __init__(
        self,
        fun: Callable,
        tfirst: bool,
        y_shape: tuple,
        layout: list[tuple],
        trees: list[tuple[int, Callable | None]],
        dtype: np.dtype,
        name: str,
    ) -> None:
        self.name = name
        self.n = math.prod(y_shape)

        # the closure holds only what the function needs: tg.compile finds the tensors
        # ``fun`` reads from outside by walking from here
        def vjp_form(t: Tensor, y: Tensor, a: Tensor, p: Tensor) -> tuple:
            leaves, off = [], 0
            for kind, what in layout:
                if kind == "const":
                    leaves.append(what)
                    continue
                size = math.prod(what)
                # one node per parameter: a scalar is one item, an array one slice
                if what == ():
                    leaves.append(p[off])
                elif len(what) == 1:
                    leaves.append(p[off : off + size])
                else:
                    leaves.append(p[off : off + size].reshape(what))
                off += size
            params, i = [], 0
            for count, rebuild in trees:  # each parameter in the structure it came in
                params.append(leaves[i] if rebuild is None else rebuild(leaves[i : i + count]))
                i += count
            Y = y if len(y_shape) == 1 else y.reshape(y_shape)
            try:
                dy = fun(t, Y, *params) if tfirst else fun(Y, t, *params)
            except ValueError as e:
                if "sequence" not in str(e):
                    raise
                raise ValueError(
                    f"{name}: the right-hand side raised {e!r}; building an array of "
                    "tensors with np.array([...]) cannot record: use tnp.stack([...])"
                ) from e
            if dy is None:
                raise TypeError(f"{name}: the right-hand side returned None (no return?)")
            if isinstance(dy, list | tuple):
                dy = tnp.stack([tnp.asarray(v) for v in dy])
            if not isinstance(dy, Tensor):
                dy = np.asarray(dy)
                if dy.dtype == object:
                    raise ValueError(
                        f"{name}: the right-hand side returned a NumPy array of objects "
                        "(np.array of tensors cannot record): use tnp.stack([...])"
                    )
                if dy.dtype.kind not in "fiub":
                    raise TypeError(f"{name}: the right-hand side returned dtype {dy.dtype}")
            if tuple(dy.shape) != tuple(y_shape):
                raise ValueError(
                    f"{name}: the right-hand side returned shape {tuple(dy.shape)} "
                    f"({dy.dtype}) for y of shape {tuple(y_shape)} ({dtype})"
                )
            if not isinstance(dy, Tensor):  # a constant: f must be a value of the program
                dy = a * 0.0 + np.reshape(dy, -1)
            if dy.ndim != 1:
                dy = dy.reshape(-1)
            if dy.dtype != dtype:
                dy = dy.astype(dtype)
            return tnp.sum(dy * a), dy

        self.step = compile(vjp_form, argnums=(0, 1, 2, 3), has_aux=True)
        self._contexts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.last: tuple | None = None  # (program, tensors read from outside) of a solve
        # what fun reads from outside (tensors, and the plain values the program takes as
        # constants) is found from fun itself and from the constant parameters (an object
        # passed as an argument: odeint(rhs, y0, t, p) reading p.k), not through this
        # wrapper: a change of p.k captures again, a tensor put at p.W is read anew
        self.step.reach = _reach(fun, tuple(what for kind, what in layout if kind == "const"))

    def context(self, program: Any, m: int, dtype: np.dtype) -> tuple:
        """The compiled solvers' view of ``program`` (``odesolve.feval``), rebuilt only
        when its tape's arenas moved."""
        h = program.tape.header
        key = (int(h[H_GEN]), int(h[H_GRAD]), int(h[H_ARENA]))
        cached = self._contexts.get(program)
        if cached is None or cached[0] != key:
            cached = self._contexts[program] = (key, _compiled_ctx(program, self.n, m, dtype))
        return cached[1]


def _reach(fun: Callable, constants: tuple) -> Callable:
    """Where ``tg.compile`` looks for what the right-hand side reads from outside: a
    function (never called) whose closure holds ``fun`` and the constant parameters, so
    that the walk reaches both (``tapegrad.closures``)."""

    def reach() -> tuple:
        return fun, constants

    reach.__name__ = getattr(fun, "__name__", "fun")  # (named in compile's warnings)
    return reach


_systems: OrderedDict[tuple, _System] = OrderedDict()
# a backward-only plan run (odesolve.vjp_saved): no forward kernels, no guards
_NO_FORWARD = np.empty((3, 0), np.int64)
_NO_GUARDS = np.empty((4, 0), np.int64)
_NO_EXPECT = np.empty(0, np.uint8)


def _system(
    fun: Callable,
    tfirst: bool,
    y_shape: tuple,
    layout: list,
    trees: list,
    structures: tuple,
    dtype,
    name: str,
):
    """The captured system for this function and these shapes (an LRU of the last few);
    ``structures``: each parameter's containers (``pytree.structure``)."""
    make = (fun, tfirst, y_shape, layout, trees, np.dtype(dtype), name)
    try:
        consts = tuple(
            ("array", w.shape, w.dtype.str, w.tobytes()) if isinstance(w, np.ndarray) else w
            for _, w in layout
        )
        key = (fun, tfirst, y_shape, consts, structures, np.dtype(dtype).str)
        hash(key)
    except TypeError:
        return _System(*make)
    system = _systems.get(key)
    if system is None:
        system = _systems[key] = _System(*make)
        while len(_systems) > _CACHE_SIZE:
            _systems.popitem(last=False)
    else:
        _systems.move_to_end(key)
    return system


def _compiled_ctx(program: Any, n: int, m: int, dtype: np.dtype) -> tuple:
    """The tuple the compiled solver loops read a program through (``odesolve.feval``)."""
    tape = program.tape
    tin, yin, ain, _ = program.inputs
    aux_slots, _ = program.aux
    fout = tape.view(aux_slots[0][1]).reshape(-1)
    # where each gradient lands in [g_t, g_y, g_p]: t, y, (not a), p, outside leaves
    rg_outside = [i for i in program.outside if i.rg]
    slots = [program.leaf_slots[0], program.leaf_slots[1], program.leaf_slots[3]]
    slots += [i.slot for i in rg_outside]
    offsets = [0, 1, 1 + n]
    off = 1 + n + m
    for i in rg_outside:
        offsets.append(off)
        off += int(np.prod(i.shape))
    rows = []
    for s, o in zip(slots, offsets):
        g = tape.grad_view(s)
        if g is None or g.size == 0:
            continue
        rows.append((g.ctypes.data, o, g.size, 1 if g.dtype == np.float32 else 0))
    gtab = np.array(rows, np.int64).T.reshape(4, -1).copy()
    gbuf = np.zeros(off, dtype)
    return (
        tape.header,
        program.fwd_plan,
        program.bwd_plan,
        int(program.root),
        program.guards,
        program.expect,
        tin.reshape(1),
        yin,
        ain,
        fout,
        gtab,
        gbuf,
        _NO_FORWARD,
        _NO_GUARDS,
        _NO_EXPECT,
    )


class _Driven:
    """The solvers' context when Python drives each evaluation (``odesolve`` runs as
    Python): every evaluation replays through the compiled step, which captures the
    branch a guard asks for."""

    def __init__(self, solve: _Solve) -> None:
        self.solve = solve
        self.nparams = solve.M

    def _run(self, t: float, y: np.ndarray, a: np.ndarray, want_grad: bool) -> tuple:
        s = self.solve
        args = (np.array(t, s.dtype), y.astype(s.dtype), a.astype(s.dtype), s.p)
        result, program, outside = s.system.step.run_program(args, want_grad)
        rg = [t for t, i in zip(outside, program.outside) if i.rg]
        if any(not any(t is u for u in s.outside) for t in rg):
            raise RuntimeError(
                f"{s.name}: the right-hand side read a tensor that requires grad on one "
                "branch (a Python `if` on a value) and not on the one taken first; pass "
                "the tensors it differentiates as parameters"
            )
        return result, rg

    def feval(self, t: float, y: np.ndarray, out: np.ndarray) -> int:
        (_, _, _, aux), _ = self._run(t, y, np.zeros_like(y), False)
        out[:] = aux
        return ODE_OK

    def vjp(self, t, y, a, f, gy, gp) -> tuple[int, float]:
        s = self.solve
        (_, grads, outside_grads, aux), rg = self._run(t, y, a, True)
        f[:] = aux
        gt, gyy, _, gpp = (np.zeros(()) if g is None else g for g in grads)
        gy[:] = gyy
        gp[:] = 0.0
        gp[: s.m] = gpp
        by_id = {id(t): g for t, g in zip(rg, outside_grads)}
        off = s.m
        for t in s.outside:
            g = by_id.get(id(t))
            if g is not None:
                gp[off : off + t.size] = g.reshape(-1)
            off += t.size
        return ODE_OK, float(gt)


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
        use_adjoint: bool,
    ) -> None:
        self.name = name
        key = method.lower()
        if key in SCIPY_ONLY:
            raise NotImplementedError(
                f"{name}: method {method!r} is not implemented; tapegrad has 'RK45' "
                "(Dormand-Prince 5(4), adaptive) and 'RK4' (fixed steps)"
            )
        if key not in METHODS:
            raise ValueError(f"{name}: unknown method {method!r}; use 'RK45' or 'RK4'")
        self.tab = METHODS[key]
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
            if _is_tree(q):
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
            kind = np.asarray(v).dtype.kind if _is_numeric(v) else ""
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
        self.ts = _times(name, ts)
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
        self.system = _system(
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
            if what == "forward":
                program, outside = self._prepare()
                self.program = program
                self.outside = [t for t, i in zip(outside, program.outside) if i.rg]
                self.read = [(t, t._value().copy()) for t in outside]
                self.M = self.m + sum(t.size for t in self.outside)
            else:  # the forward's program, if what it reads is unchanged
                program = self.program
                self._check_unchanged(step.current_reads(program), program)
                np.copyto(program.inputs[3], self.p)  # another solve may have replayed it
            compiled = program.fwd_plan is not None and program.bwd_plan is not None
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
            return self._core(what, False)(_Driven(self), *args)

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
            _Driven(self).feval(t, y, out)
        return out

    @staticmethod
    def _core(what: str, compiled: bool) -> Callable:
        table = {
            "forward": (forward_compiled, forward),
            "reverse": (reverse_compiled, reverse),
            "adjoint": (adjoint_compiled, adjoint),
        }
        return table[what][0 if compiled else 1]

    def _raise(self, st: int, info: np.ndarray, phase: str) -> None:
        if st == ODE_OK:
            return
        where = f"{self.name} ({phase})"
        if st == ODE_MAXSTEPS:
            raise IntegrationError(
                f"{where}: more than max_steps={self.max_steps} steps before t = "
                f"{info[0]:.6g}; the system may be stiff or the tolerances too tight"
            )
        raise IntegrationError(f"{where}: {_STATUS_TEXT[st]} at t = {info[0]:.6g}")

    def solve(self) -> np.ndarray:
        """The forward solution at ``ts``: ``(len(ts), *y0.shape)``."""
        record = not self.adjoint
        st, ys, info, meta, Ys, Ks, Ss, count = self.run(
            "forward", self.tab, self.y0, self.ts, self.nsub, self.rtol, self.atol,
            self.first_step, self.max_step, self.max_steps, record,
        )  # fmt: skip
        self._raise(st, info, "forward solve")
        self.info = info
        self.ys = ys
        self.steps = (meta, Ys, Ks, Ss, count) if record else None
        return ys.reshape((self.ts.size, *self.y_shape))

    def gradients(self, gys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(g_y0, g_ts, g_params)`` (flat; the parameters then the outside tensors) for
        the cotangent ``gys`` of the solution."""
        gys = np.ascontiguousarray(gys, self.dtype).reshape(self.ts.size, -1)
        if self.adjoint:
            st, gy0, gts, gp, info = self.run(
                "adjoint", self.tab, self.ts, self.ys, gys, self.nsub, self.rtol, self.atol,
                self.max_step, self.max_steps, self.M,
            )  # fmt: skip
            self._raise(st, info, "adjoint solve")
        else:
            meta, Ys, Ks, Ss, count = self.steps
            st, gy0, gts, gp = self.run(
                "reverse", self.tab, self.ts, gys, meta, Ys, Ks, Ss, count, self.M
            )
            self._raise(st, np.array([self.ts[0]]), "reverse pass")
        return gy0, gts, gp


def _is_numeric(v: Any) -> bool:
    return isinstance(v, int | float | complex | np.ndarray | np.generic | list | tuple)


def _is_tree(q: Any) -> bool:
    """A parameter passed to the function as a pytree, leaf by leaf: a dict, or a list or
    tuple that is not one regular array (``[(W1, b1), (W2, b2)]``, HIPS autograd's
    ``ode_net``; a list of objects). A regular one (``[k1, k2]``, ``(1.0, 2.0)``) is one
    array parameter, as NumPy and SciPy read it."""
    if isinstance(q, dict):
        return True
    if not isinstance(q, list | tuple):
        return False
    try:
        v = _values(q)
    except (ValueError, TypeError):  # ragged
        return True
    return v.dtype.kind not in "fiub"


def _parameter(q: Any) -> Any:
    """A parameter after ``t``: a pytree as it is (:func:`_is_tree`), a regular container
    of tensors as one recorded tensor."""
    return q if _is_tree(q) else _recorded(q)


def _recorded(v: Any) -> Any:
    """A container holding tensors (``[x0, v0]``) as one recorded tensor, so that their
    gradients flow; anything else as it is."""
    if not isinstance(v, Tensor) and isinstance(v, list | tuple) and holds_tensor(v):
        return tnp.asarray(v)
    return v


def _values(v: Any) -> np.ndarray:
    """``v``'s values (a container of tensors' too), without recording."""
    if isinstance(v, Tensor):
        return v._value()
    if isinstance(v, list | tuple) and holds_tensor(v):
        return np.asarray([_values(e) for e in v])
    return np.asarray(v)


def _no_times(
    name: str, fun: Any, y0: Any, params: Sequence[Any], others: Any, shape: tuple
) -> Any:
    """SciPy's answer for no output times: no states (``shape``; ``fun`` is not called),
    in the solvers' dtype, a tensor when an input (``y0``, ``params``, ``others``) is
    one, joined to ``y0``'s graph (its gradient: an empty sum, 0)."""
    if not callable(fun):
        raise TypeError(f"{name}: the right-hand side must be callable, got {type(fun).__name__}")
    y0v = _values(y0)
    if y0v.dtype.kind not in "fiub":
        raise TypeError(f"{name}: y0 must be real, got dtype {y0v.dtype}")
    # the solvers' dtype: y0's and the array parameters' (float32 stays float32)
    leaves = [v for q in params for v in (flatten(q)[0] if _is_tree(q) else [q])]
    arrays = [y0v, *(_values(q) for q in leaves if isinstance(q, Tensor | np.ndarray))]
    dtype = np.result_type(*[a.dtype if a.dtype.kind == "f" else np.float64 for a in arrays])
    dtype = dtype if dtype.kind == "f" and dtype.itemsize >= 4 else np.dtype(np.float64)
    y0 = _recorded(y0)
    if isinstance(y0, Tensor):
        return y0.astype(dtype).reshape(-1)[:0].reshape(shape)
    if any(holds_tensor(v) for v in (*params, others)):
        return tensor(np.zeros(shape, dtype))
    return np.zeros(shape, dtype)


def _times(name: str, t: Any) -> np.ndarray:
    ts = np.asarray(_values(t), np.float64)
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


def _refusal(name: str, mode: str) -> str:
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


class _SolveNode(Function):
    """The whole solve as one node: its inputs are y0, the time arrays, the parameters
    and the outside tensors that require grad; its backward runs the reverse pass or the
    adjoint (``_Solve.gradients``). Not differentiated again, nor in forward mode: the
    error names the solver (``refusal``, see ``tapegrad.graphwalk``)."""

    @staticmethod
    def refusal(ctx: Any, mode: str) -> str:
        return _refusal(ctx.call[0].name, mode)

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
    adjoint: bool = False,
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
    method : {'RK45', 'RK4'}, optional
        Adaptive Dormand-Prince 5(4) (``'dopri5'`` too), or classic RK4 with fixed
        steps.
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
        tolerance, ``step``, ``first_step`` or ``max_step`` that is not positive;
        ``step`` with ``'RK45'``; or ``func`` returns a shape other than ``y0``'s.
    TypeError
        ``func`` is not callable or returns None or non-real values; ``y0`` or a
        parameter is complex.
    NotImplementedError
        A SciPy method tapegrad does not have (``'LSODA'``, ``'BDF'``, ``'Radau'``...);
        and, when they are taken, second derivatives or forward mode through the
        solve (its backward is one compiled node, not recorded ops).

    See Also
    --------
    solve_ivp : SciPy's ``solve_ivp`` interface.

    Notes
    -----
    With ``adjoint=False`` the gradient is that of the computed solution, exactly: the
    reverse pass goes through the steps taken, with their sizes held fixed; memory
    grows with the number of steps. With ``adjoint=True`` the adjoint equations are
    integrated backward with the same method and tolerances: constant memory, and
    gradients accurate to the solver's tolerance.

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
    if np.shape(t._value() if isinstance(t, Tensor) else t) == (0,):
        return _no_times("odeint", func, y0, (*params, *args), t, (0, *np.shape(_values(y0))))
    ts = _times("odeint", t)
    options = dict(
        method=method, rtol=rtol, atol=atol, step=step, first_step=first_step,
        max_step=max_step, max_steps=max_steps, use_adjoint=adjoint,
    )  # fmt: skip
    params = tuple(_parameter(q) for q in (*params, *args))
    t = _recorded(t)
    times = [(t, lambda g, _: g)]
    _, ys = _run("odeint", func, tfirst, _recorded(y0), ts, times, params, **options)
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
    adjoint: bool = False,
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
    method : {'RK45', 'RK4'}, optional
        As in :func:`odeint`.
    t_eval : array_like or Tensor, optional
        Times at which to return the solution, within ``t_span`` and sorted in its
        direction.
    dense_output : bool, optional
        Not implemented: True raises.
    events : optional
        Not implemented: anything but None raises.
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

    Returns
    -------
    scipy.optimize.OptimizeResult
        SciPy's fields: ``t``, ``y`` (``(n, len(t))``, a tensor when any input is
        one), ``nfev``, ``status`` (0), ``message``, ``success`` (True); ``sol``,
        ``t_events`` and ``y_events`` are None.

    Raises
    ------
    IntegrationError
        ``fun`` returns NaN or inf, the step size underflows, or more than
        ``max_steps`` steps are needed.
    ValueError
        ``t_span`` is not a pair, ``y0`` is not 1-D, ``t_eval`` is outside ``t_span``
        or not sorted in its direction, or an option is invalid (as in
        :func:`odeint`).
    TypeError
        ``fun`` is not callable or returns None or non-real values; ``y0`` or an
        argument is complex.
    NotImplementedError
        ``dense_output`` or ``events`` is given, or a SciPy method tapegrad does not
        have (``'BDF'``, ``'Radau'``, ``'LSODA'``...).

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
    """
    name = "solve_ivp"
    if dense_output or events is not None:
        raise NotImplementedError(f"{name}: dense_output and events are not implemented")
    # (0.0, T) with T a tensor: its values here; the span is recorded (stacked) below
    span = np.asarray(_values(t_span), np.float64)
    if span.shape != (2,):
        raise ValueError(f"{name}: t_span must be (t0, t1), got shape {span.shape}")
    y0v = y0._value() if isinstance(y0, Tensor) else np.asarray(y0)
    if y0v.ndim != 1:
        raise ValueError(f"{name}: y0 must be 1-D, got shape {y0v.shape}")
    params = tuple(args) if args is not None else ()
    te = None if t_eval is None else _eval_times(name, t_eval, span)
    if span[1] == span[0]:  # SciPy's: no step; y0 at t0 twice, and nothing with t_eval
        y = _no_step(name, fun, t_span, span, y0, params)
        if te is None:
            return _ivp_result(span, y, 1)
        nothing = _no_times(name, fun, y0, params, (t_span, t_eval), (y0v.shape[0], 0))
        return _ivp_result(np.zeros(0), nothing, 1)
    options = dict(
        method=method, rtol=rtol, atol=atol, step=step, first_step=first_step,
        max_step=max_step, max_steps=max_steps, use_adjoint=adjoint,
    )  # fmt: skip

    y0, t_span, t_eval = _recorded(y0), _recorded(t_span), _recorded(t_eval)
    params = tuple(_parameter(q) for q in params)
    # t_eval[0] == t_span[0]: one time in the solve, two inputs. Moving t_eval[0] alone
    # moves that output along the solution (<g_0, f(t_0, y_0)>); t_span[0] gets the rest
    # of the joint derivative
    drop = 0

    def shared(gys: np.ndarray) -> float:
        if t_eval is None or drop:
            return 0.0
        return float(np.sum(gys[0] * solve.f_at(ts[0], solve.y0)))

    def span_grad(g: np.ndarray, gys: np.ndarray) -> np.ndarray:
        end = 0.0 if t_eval is not None or g.size < 2 else g[-1]
        return np.array([g[0] - shared(gys), end])

    if t_eval is None or te.size == 0:
        # the adaptive steps' end points (one solve without gradients), then the solve
        # through exactly those times, which takes the same steps
        probe = _Solve(name, fun, True, y0, span, params, **{**options, "use_adjoint": True})
        st, _, info, meta, _, _, _, count = probe.run(
            "forward", probe.tab, probe.y0, span, probe.nsub, probe.rtol, probe.atol,
            probe.first_step, probe.max_step, probe.max_steps, True,
        )  # fmt: skip
        probe._raise(st, info, "forward solve")
        nfev = int(info[2])  # the solve that chose the steps (the rerun rejects none)
        if te is not None:  # no times to answer at: SciPy's empty solution
            nothing = _no_times(name, fun, y0, params, (t_span, t_eval), (y0v.shape[0], 0))
            return _ivp_result(te, nothing, nfev)
        ts = np.concatenate([span[:1], meta[:count, 0] + meta[:count, 1]])
        ts[-1] = span[1]
        times = [(t_span, span_grad)]
        drop = 0
    else:
        drop = 0 if te[0] == span[0] else 1
        ts = te if drop == 0 else np.concatenate([span[:1], te])

        def eval_grad(g: np.ndarray, gys: np.ndarray) -> np.ndarray:
            g = g[drop:].copy()
            if drop == 0:
                g[0] = shared(gys)
            return g

        times = [(t_span, span_grad), (t_eval, eval_grad)]
        nfev = None
    solve, ys = _run(name, fun, True, y0, ts, times, params, **options)
    y = ys[drop:].T if drop else ys.T
    return _ivp_result(ts[drop:], y, int(solve.info[2]) if nfev is None else nfev)


def _ivp_result(t: np.ndarray, y: Any, nfev: int) -> OptimizeResult:
    """SciPy's result of a successful ``solve_ivp``."""
    return OptimizeResult(
        t=t,
        y=y,
        sol=None,
        t_events=None,
        y_events=None,
        nfev=nfev,
        njev=0,
        nlu=0,
        status=0,
        message="The solver successfully reached the end of the integration interval.",
        success=True,
    )


def _eval_times(name: str, t_eval: Any, span: np.ndarray) -> np.ndarray:
    """``t_eval``'s times, SciPy's checks against ``span`` (none at all are allowed)."""
    if np.shape(_values(t_eval)) == (0,):
        return np.zeros(0)
    te = _times(name, t_eval)
    lo, hi = min(span), max(span)
    if np.any(te < lo) or np.any(te > hi):
        raise ValueError(f"{name}: t_eval must lie within t_span {tuple(span)}")
    if te.size > 1 and (te[1] - te[0]) * (span[1] - span[0]) < 0:
        raise ValueError(f"{name}: t_eval must be sorted in the direction of t_span")
    return te


def _no_step(
    name: str, fun: Callable, t_span: Any, span: np.ndarray, y0: Any, params: tuple
) -> Any:
    """``solve_ivp``'s states for equal ends of ``t_span``: SciPy's ``[y0, y0]`` (no step
    is taken; ``fun`` is called once, as SciPy's, on the values). Differentiable as the
    solution is (see :class:`_NoStepNode`)."""
    if not callable(fun):
        raise TypeError(f"{name}: the right-hand side must be callable, got {type(fun).__name__}")
    y0, t_span = _recorded(y0), _recorded(t_span)
    y0v = _values(y0)
    if y0v.dtype.kind not in "fiub":
        raise TypeError(f"{name}: y0 must be real, got dtype {y0v.dtype}")
    y0v = y0v.astype(np.float64) if y0v.dtype.kind != "f" else y0v.copy()  # (SciPy's floats)
    with no_grad():
        f = fun(float(span[0]), y0v.copy(), *params)
    fv = _values(_recorded(f))
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

    @staticmethod
    def refusal(ctx: Any, mode: str) -> str:
        return _refusal("solve_ivp", mode)

    @staticmethod
    def forward(ctx: Any, f: np.ndarray, y0: np.ndarray, t_span: Any) -> np.ndarray:
        ctx.f = f
        return np.stack([y0, y0], axis=1)

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        moved = float(np.sum(np.asarray(g)[:, 1] * ctx.f))
        return None, g[:, 0] + g[:, 1], np.array([-moved, moved])
