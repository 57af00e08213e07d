"""Capture and replay: ``step = tg.compile(fn)``, then ``step.value_and_grad(*args)``.

The first call with a new *signature* (argument shapes and dtypes, which arguments are
differentiated, the values of non-array arguments) runs ``fn`` eagerly on a private
tape: that recording is the program. Later calls with the same signature copy the new
argument values into the program's input slots and run its forward and backward in one
compiled call (``tapegrad.replay``), with no Python per op and no compilation per
program. This is ``jax.jit(jax.value_and_grad(f))`` for tapegrad.

As with ``jax.jit``, Python control flow that depends on values is captured once: the
program replays the branch taken while capturing, and values computed outside the op
table (``x.item()``, ``argmax`` indices, integer arithmetic done by NumPy) are frozen
constants. ``check=True`` re-records ``fn`` on every call and raises if the recording
differs from the program (ops, shapes, parameters or constants). Custom functions
(``tg.Function``) and gradient hooks make capture refuse with an error: their Python
code would not run during replay.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import tape as tape_module
from .engine import is_anomaly_enabled
from .layout import (
    E_CALLBACK_HOOK,
    E_CALLBACK_PY,
    H_ANOMALY,
    H_ARENA,
    H_GEN,
    H_GRAD,
    H_NFP,
    H_NIP,
    H_NLINK,
    H_NNODES,
    H_NSHAPE,
    H_NSLOTS,
    N_FP,
    N_IP,
    N_LINK,
    N_NFP,
    N_NIN,
    N_NIP,
    N_NOUT,
    N_OP,
    N_SIG,
    OK,
    S_DTYPE,
    S_FLAGS,
    S_NDIM,
    S_NODE,
    S_SHAPE,
    S_SIZE,
    SLOT_CONST,
)
from .replay import backward_plan, forward_plan, replay, run_plan
from .tape import Tape
from .tensor import Tensor, bind, tensor

__all__ = ["Compiled", "compile"]

_NO_PLAN = np.empty((2, 0), np.int64)  # the backward plan of a value-only replay


def compile(
    fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, check: bool = False
) -> Compiled:
    """Capture ``fn`` once per signature and replay it in compiled code.

    Parameters
    ----------
    fn
        Function of arrays / tensors (and Python constants) returning a scalar loss, or
        ``(loss, aux)`` with ``has_aux``.
    argnums
        Argument(s) to differentiate (array-like or float arguments).
    has_aux
        ``fn`` returns ``(loss, aux)``; aux tensors come back as NumPy arrays.
    check
        Re-record on every call and raise if the computation differs from the captured
        one (data-dependent control flow); slow, for debugging.

    Returns
    -------
    Compiled
        ``step(*args)`` gives the loss, ``step.value_and_grad(*args)`` gives
        ``(loss, grads)``; ``step.stats`` counts captures (recordings kept as
        programs), replays (calls that ran a program: every call, the capturing one
        included, since its values come from running what it captured) and checks.
    """
    return Compiled(fn, argnums, has_aux, check)


class Program:
    """One captured recording: a private tape and where its inputs and outputs are."""

    def __init__(
        self,
        tape: Tape,
        inputs: list[np.ndarray],
        leaf_slots: list[int],
        root: int,
        aux: Any,
        n_nodes: int,
    ) -> None:
        self.tape = tape
        self.inputs = inputs  # arrays the input slots point at: replay writes into them
        self.leaf_slots = leaf_slots
        self.root = root
        self.aux = aux  # (slot ids, rebuild) of aux tensors
        self.n_nodes = n_nodes
        # Plans (``tapegrad.replay``): the forward kernels after the first successful
        # replay, the live backward nodes after the first complete backward. Both are
        # dropped on any failure, and the general path runs (and plans) again.
        self.fwd_plan: np.ndarray | None = None
        self.bwd_plan: np.ndarray | None = None
        self._views: tuple = ()  # (layout key, root value view, leaf gradient views)

    def run(self, arrays: list[np.ndarray], want_grad: bool) -> tuple[float, list, Any]:
        for dst, src in zip(self.inputs, arrays):
            np.copyto(dst, src, casting="same_kind")
        tape = self.tape
        h = tape.header
        # anomaly mode checks every gradient: the general path, not a plan
        anomaly = is_anomaly_enabled()
        h[H_ANOMALY] = int(anomaly)
        if anomaly:
            self.bwd_plan = None
        while True:
            fwd, bwd = self.fwd_plan, self.bwd_plan
            if fwd is not None and (bwd is not None or not want_grad):
                st = run_plan(h, fwd, bwd if want_grad else _NO_PLAN, self.root, want_grad)
            else:
                st = replay(h, self.n_nodes, self.root, want_grad)
            if st == OK:
                if fwd is None:
                    self.fwd_plan = forward_plan(h, self.n_nodes)
                if want_grad and bwd is None and not anomaly:
                    self.bwd_plan = backward_plan(h, self.root)
                break
            self.fwd_plan = self.bwd_plan = None
            if st in (E_CALLBACK_PY, E_CALLBACK_HOOK):
                raise RuntimeError("tapegrad.compile: a captured program cannot call Python")
            from .engine import _raise_backward_error

            _raise_backward_error(tape, st)
            tape.fix(st)  # a backward kernel compiled on first replay, a bigger grad arena
        value_view, grad_views = self._outputs()
        value = float(value_view[0])
        grads = [None if v is None else v.copy() for v in grad_views] if want_grad else []
        aux = None
        if self.aux is not None:
            slots, rebuild = self.aux
            aux = rebuild([tape.read(s) if isinstance(s, int) else s for s in slots])
        return value, grads, aux

    def _outputs(self) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Views of the loss value and the leaves' gradient buffers, rebuilt only when
        the layout changed (a new pruning or a moved arena): building a view costs
        microseconds, a copy of a small one a fraction of that."""
        h = self.tape.h
        key = (h[H_GEN], h[H_GRAD], h[H_ARENA])
        if not self._views or self._views[0] != key:
            tape = self.tape
            value = tape.view(self.root).reshape(-1)
            grads = [tape.grad_view(s) for s in self.leaf_slots]
            self._views = (key, value, grads)
        return self._views[1], self._views[2]

    def structure(self) -> dict[str, np.ndarray]:
        """Everything that defines the computation, for ``check=True``."""
        t = self.tape
        h = t.h
        n, ns = h[H_NNODES], h[H_NSLOTS]
        # the recorded structure; addresses, gradient offsets, scheduler flags and
        # versions change between recordings and replays
        slots = t.arrays["slot"][[S_DTYPE, S_NDIM, S_SIZE, S_SHAPE, S_FLAGS, S_NODE], :ns]
        consts = [
            t.read(s).tobytes() for s in range(ns) if t.arrays["slot"][S_FLAGS, s] & SLOT_CONST
        ]
        return {
            "nodes": t.arrays["node"][
                [N_OP, N_SIG, N_LINK, N_NIN, N_NOUT, N_IP, N_NIP, N_FP, N_NFP], :n
            ],
            "links": t.arrays["link"][0, : h[H_NLINK]].copy(),
            "iparams": t.arrays["ip"][0, : h[H_NIP]].copy(),
            "fparams": t.arrays["fp"][0, : h[H_NFP]].copy(),
            "shapes": t.arrays["shape"][0, : h[H_NSHAPE]].copy(),
            "slots": slots,
            "constants": np.frombuffer(b"".join(consts), np.uint8),
        }


def _is_arraylike(v: Any) -> bool:
    return isinstance(v, Tensor | np.ndarray | list | np.generic) or (
        isinstance(v, float | int) and not isinstance(v, bool)
    )


class Compiled:
    """A function captured once per signature and replayed in compiled code."""

    def __init__(
        self, fn: Callable, argnums: int | Sequence[int], has_aux: bool, check: bool
    ) -> None:
        self.fn = fn
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        self.has_aux = has_aux
        self.check = check
        self.programs: dict[tuple, Program] = {}
        self.stats = {"captures": 0, "replays": 0, "checks": 0}
        self._diffs: dict[int, frozenset[int]] = {}
        functools.update_wrapper(self, fn)

    # --- signature -------------------------------------------------------------------
    def _diff(self, nargs: int) -> frozenset[int]:
        """The positions differentiated in a call with ``nargs`` arguments."""
        diff = self._diffs.get(nargs)
        if diff is None:
            diff = self._diffs[nargs] = (
                frozenset(a % nargs for a in self.argnums) if nargs else frozenset()
            )
        return diff

    def _split(self, args: tuple) -> tuple[tuple, list[np.ndarray], list[int]]:
        key, arrays, positions = [], [], []
        diff = self._diff(len(args))
        for i, a in enumerate(args):
            kind = type(a)
            if kind is np.ndarray and a.dtype.kind == "f":  # the common case, checked fast
                key.append(("array", a.shape, a.dtype, i in diff))
                arrays.append(a)
                positions.append(i)
            elif (kind is int or kind is float) and i not in diff:
                key.append(("const", kind.__name__, a))
            elif i in diff or isinstance(a, Tensor | np.ndarray | list | np.generic):
                if not _is_arraylike(a):
                    raise TypeError(
                        f"compile: argument {i} to differentiate must be an array "
                        f"or a number, got {type(a).__name__}"
                    )
                arr = np.asarray(a._value() if isinstance(a, Tensor) else a)
                if (arr.dtype.kind in "iu" and i in diff) or arr.dtype.kind not in "fiub":
                    raise TypeError(
                        f"compile: cannot differentiate argument {i} of dtype {arr.dtype}"
                    )
                if i in diff and arr.dtype.kind != "f":
                    arr = arr.astype(np.float64)
                key.append(("array", arr.shape, arr.dtype, i in diff))
                arrays.append(arr)
                positions.append(i)
            else:
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(
                        f"compile: argument {i} ({type(a).__name__}) is neither "
                        "an array nor a hashable constant"
                    ) from None
                key.append(("const", type(a).__name__, a))
        return tuple(key), arrays, positions

    # --- capture ----------------------------------------------------------------------
    def _record(self, args: tuple, arrays: list[np.ndarray], positions: list[int]):
        """Run ``fn`` eagerly on a fresh private tape; returns (tape, leaves, out, aux)."""
        tape = Tape()
        tls = tape_module._tls
        previous = getattr(tls, "tape", None)
        tls.tape = tape
        try:
            diff = self._diff(len(args))
            call = list(args)
            leaves = []
            for pos, arr in zip(positions, arrays):
                t = tensor(arr, requires_grad=pos in diff)
                bind(tape, t)
                leaves.append((pos, t))
                call[pos] = t
            out = self.fn(*call)
            aux = None
            if self.has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise TypeError("compile: has_aux=True needs fn to return (loss, aux)")
                out, aux = out
            if not isinstance(out, Tensor) or out.size != 1:
                raise TypeError(
                    "compile: fn must return a scalar tensor (or (loss, aux) with has_aux=True)"
                )
            if out._tape is not tape:
                raise TypeError(
                    "compile: the loss does not depend on the arguments through recorded ops"
                )
            if tape.custom:
                raise TypeError(
                    "compile: custom functions (tg.Function) cannot be captured: "
                    "their Python forward would not run during replay"
                )
            if tape.hooks:
                raise TypeError("compile: gradient hooks cannot be captured")
        finally:
            if previous is None:
                del tls.tape
            else:
                tls.tape = previous
        return tape, leaves, out, aux

    def _capture(self, args: tuple, arrays: list[np.ndarray], positions: list[int]) -> Program:
        from .transforms import _flatten

        tape, leaves, out, aux = self._record(args, arrays, positions)
        diff = self._diff(len(args))
        inputs = [t._data for _, t in leaves]
        leaf_slots = [t._slot for pos, t in leaves if pos in diff]
        aux_info = None
        if aux is not None:
            items, rebuild = _flatten(aux)
            slots = [
                v._slot
                if isinstance(v, Tensor) and v._tape is tape
                else (v.numpy() if isinstance(v, Tensor) else v)
                for v in items
            ]
            aux_info = (slots, rebuild)
        tape.pinned = True
        self.stats["captures"] += 1
        return Program(tape, inputs, leaf_slots, out._slot, aux_info, tape.h[H_NNODES])

    # --- calls ------------------------------------------------------------------------
    def _run(self, args: tuple, want_grad: bool) -> tuple[float, list, Any, list[int]]:
        key, arrays, positions = self._split(args)
        program = self.programs.get(key)
        if program is None:
            program = self.programs[key] = self._capture(args, arrays, positions)
        elif self.check:
            fresh = self._capture(args, arrays, positions)
            self.stats["captures"] -= 1
            self.stats["checks"] += 1
            _compare(program.structure(), fresh.structure())
        self.stats["replays"] += 1
        value, grads, aux = program.run(arrays, want_grad)
        return value, grads, aux, positions

    def __call__(self, *args: Any) -> Any:
        """The loss (and aux) for these arguments, replayed."""
        value, _, aux, _ = self._run(args, False)
        return (value, aux) if self.has_aux else value

    def value_and_grad(self, *args: Any) -> Any:
        """``(loss, grads)`` (``((loss, aux), grads)`` with ``has_aux``): grads are NumPy
        arrays for the ``argnums`` arguments (one array for an int ``argnums``)."""
        value, grads, aux, _ = self._run(args, True)
        nargs = len(args)
        if self.single:
            grad = grads[0]  # one differentiated argument, one leaf
            if isinstance(args[self.argnums[0] % nargs], float | int):
                grad = grad.dtype.type(grad)
            result = grad
        else:
            # grads follow the differentiated positions in order; argnums may repeat
            by_pos = dict(zip(sorted(self._diff(nargs)), grads))
            out = []
            for a in self.argnums:
                grad = by_pos[a % nargs]
                if isinstance(args[a % nargs], float | int):
                    grad = grad.dtype.type(grad)
                out.append(grad)
            result = tuple(out)
        return ((value, aux), result) if self.has_aux else (value, result)


def _compare(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> None:
    for name in old:
        a, b = old[name], new[name]
        if a.shape != b.shape or not np.array_equal(a, b):
            raise RuntimeError(
                f"tapegrad.compile(check=True): this call recorded a different computation "
                f"than the captured program ({name} differ): the function's control flow "
                "or constants depend on argument values, which a captured program cannot "
                "follow. Use eager mode for this function, or make the branch an op "
                "(tnp.where)."
            )
