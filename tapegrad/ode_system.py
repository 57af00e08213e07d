"""The right-hand side of an ODE, captured: ``tg.compile`` records it once per shape
and parameter structure in vector-Jacobian form (one replay gives ``f`` and, backward,
``a f_y``, ``a f_p`` and ``a f_t``), kept in a small cache of systems, with the compiled
context the solvers' loops take; and the driven fallback that evaluates it from Python
when a guard fails mid-solve."""

from __future__ import annotations

import math
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import numpy as tnp
from .compile import compile
from .layout import H_ARENA, H_GEN, H_GRAD
from .odesolve import ODE_OK
from .tensors import Tensor

if TYPE_CHECKING:
    from .integrate import _Solve


_CACHE_SIZE = 32


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


def captured_system(
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


class Driven:
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
