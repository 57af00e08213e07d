"""Capture and replay: ``step = tg.compile(fn)``, then ``step.value_and_grad(*args)``.

The first call with a new *signature* (argument shapes and dtypes, which arguments are
differentiated, the values of other arguments except Python floats) runs ``fn`` eagerly
on a private tape: that recording is the program. Later calls copy the new argument
values into the program's input slots and run its forward and backward in one compiled
call (``tapegrad.replay``), with no Python per op and no compilation per program. This
is ``jax.jit(jax.value_and_grad(f))`` for tapegrad, with torch.compile's guards.

What a program depends on is made explicit while it is captured:

* **Arguments.** Arrays and Python floats are inputs (a float is a 0-d float64 tensor
  inside ``fn``: new values replay, as in ``jax.jit``); ints, bools, strings and other
  hashable values are part of the signature.
* **Tensors from outside** (closures, globals, attributes of ``self`` or of an argument)
  are inputs too: each call finds them again by the route ``fn`` reached them
  (``tapegrad.closures``) and reads their current values. One that requires grad gets its
  gradient accumulated into ``.grad`` by ``value_and_grad`` (PyTorch-style parameters);
  ``step(*args)`` then returns a tensor, so ``step(x).backward()`` does the same.
* **Guards.** A value Python reads during capture (``bool`` of a comparison,
  ``float()``, ``int()``, an index, ``.numpy()``) decides something the program takes for
  granted. Each read is a guard the compiled replay checks as soon as the value is
  computed (``tapegrad.replay``); when one fails, the other programs of the signature are
  tried, then the new branch is captured. ``float()`` / ``.item()`` of a tensor that
  requires grad raise instead (the gradient through a Python number is lost).
* **Randomness** drawn with NumPy during capture is a constant of the program; a change
  of ``numpy.random``'s global state during capture is warned about once.

A compiled step called on tensors that require grad is one node of the caller's graph
(its backward replays the program); called while another function is being captured it
is inlined, as nested ``jax.jit`` is. A signature keeps up to ``MAX_PROGRAMS`` programs
(least recently used dropped first); a step that captured more than ``RECAPTURE_WARNING``
programs warns once, saying why it keeps capturing. ``check=True`` re-records on every
call and raises when the recording differs from the program that ran (slow, for
debugging). Custom functions (``tg.Function``) and gradient hooks cannot be captured.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import closures
from .boundary import HIGHER_ORDER, user_line
from .engine import accumulate_grad, is_anomaly_enabled, raise_backward_error
from .function import Function
from .layout import (
    E_CALLBACK_HOOK,
    E_CALLBACK_PY,
    E_GUARD,
    H_ANOMALY,
    H_ARENA,
    H_ERR_A,
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
    SLOT_LEAF,
    SLOT_RG,
)
from .replay import backward_plan, forward_plan, replay, run_plan
from .tape import CAPTURE, Tape, enter, leave, tape_stack
from .tensor import Tensor, active_capture, bind, capture_started, is_grad_enabled, serial, tensor

__all__ = ["Compiled", "compile"]

MAX_PROGRAMS = 64  # programs kept per compiled step (all signatures together)
RECAPTURE_WARNING = 8  # captures after which a step warns once that it keeps capturing

_NO_PLAN = np.empty((2, 0), np.int64)  # the backward plan of a value-only replay
_NO_GUARDS = np.empty((4, 0), np.int64)
_NO_BYTES = np.empty(0, np.uint8)


def compile(
    fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, check: bool = False
) -> Compiled:
    """Capture ``fn`` once per signature (and branch) and replay it in compiled code.

    Parameters
    ----------
    fn
        Function of arrays / tensors (and Python constants) returning a scalar loss, or
        ``(loss, aux)`` with ``has_aux``. Tensors it reads from outside (closures,
        globals, attributes) are inputs of the program, read on every call.
    argnums
        Argument(s) to differentiate (array-like or float arguments).
    has_aux
        ``fn`` returns ``(loss, aux)``; aux tensors come back as NumPy arrays.
    check
        Re-record on every call and raise if the computation differs from the program
        that ran (control flow on values the guards do not see); slow, for debugging.

    Returns
    -------
    Compiled
        ``step(*args)`` gives the loss, ``step.value_and_grad(*args)`` gives
        ``(loss, grads)``; ``step.stats`` counts captures (recordings kept as
        programs), replays (calls that ran a program: every call, the capturing one
        included), guard failures, checks, and the programs kept.
    """
    return Compiled(fn, argnums, has_aux, check)


# --- capture -------------------------------------------------------------------------------


class _Input:
    """A tensor the function read from outside: an input slot of the program."""

    __slots__ = ("array", "dtype", "path", "rg", "shape", "slot", "tensor")

    def __init__(self, t: Tensor, array: np.ndarray, slot: int, rg: bool) -> None:
        self.tensor = t  # as found while capturing (the fallback when no path is known)
        self.array = array  # the program's copy: each call writes the current values here
        self.slot = slot
        self.rg = rg
        self.shape = t.shape
        self.dtype = t.dtype
        self.path: tuple | None = None


class _Capture:
    """What a capture learns besides the recording: inputs from outside and guards.

    Installed as ``tape.capture`` while ``fn`` runs; the tensor handle calls
    :meth:`foreign_input` when it binds a foreign tensor and :meth:`read` for every
    Python read of a value."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.inputs: list[_Input] = []
        self.input_slots: set[int] = set()
        self.guards: dict[int, tuple[np.ndarray, str]] = {}

    def foreign_input(self, tape: Tape, t: Tensor) -> int:
        value = np.array(t._peek(), order="C", copy=True)
        rg = t.requires_grad and tape.grad_enabled
        s = tape.import_array(value, SLOT_RG | SLOT_LEAF if rg else SLOT_CONST)
        self.inputs.append(_Input(t, value, s, rg))
        self.input_slots.add(s)
        return s

    def fixed(self, s: int) -> bool:
        """A constant of the program: the same in every replay."""
        tape = self.tape
        return (
            tape.slot_field(S_NODE, s) < 0
            and bool(tape.slot_field(S_FLAGS, s) & SLOT_CONST)
            and s not in self.input_slots
        )

    def read(self, t: Tensor) -> np.ndarray:
        """Python reads ``t``'s values while capturing: the program must replay only
        when they are the same, so the read becomes a guard (a tensor from outside
        becomes an input first)."""
        tape = self.tape
        bound = t._tape is tape and (t._data is None or t._epoch == tape.epoch)
        if bound:
            pass  # an argument, a constant or a result of the program: its slot
        elif t._data is not None:
            if getattr(t, "_born", 0) >= tape.born0:
                return t._data  # made while capturing: a constant of the program
        elif t._tape is not tape:
            stack = tape_stack()
            mine = next(i for i, x in enumerate(stack) if x is tape)
            if any(x is t._tape for x in stack[mine + 1 :]):
                # a transform's tape above the capture: its values come from reads
                # of the program that are guarded already
                return t._tape.read(t._slot)
        s = t._slot if bound else bind(tape, t)
        v = tape.read(s)
        if s not in self.guards and not self.fixed(s):
            self.guards[s] = (np.frombuffer(v.tobytes(), np.uint8).copy(), user_line(2))
        return v

    def guard_arrays(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The guards as ``replay`` takes them: ``[node, slot, offset, length]`` sorted
        by the node whose forward computes the value (-1: inputs; values that no node
        of their own computes, like a detached alias, after the last node)."""
        tape = self.tape
        last = tape.h[H_NNODES] - 1
        rows, blobs, where = [], [], []
        off = 0
        for s, (blob, line) in self.guards.items():
            node = tape.slot_field(S_NODE, s)
            if node < 0 and s not in self.input_slots:
                node = last
            rows.append((node, s, off, blob.size))
            blobs.append(blob)
            where.append(line)
            off += blob.size
        if not rows:
            return _NO_GUARDS, _NO_BYTES, []
        order = sorted(range(len(rows)), key=lambda i: rows[i][0])
        G = np.ascontiguousarray(np.array([rows[i] for i in order], np.int64).T)
        expect = np.concatenate(blobs) if blobs else _NO_BYTES
        return G, expect, [where[i] for i in order]


class Program:
    """One captured recording: a private tape, where its inputs and outputs are, and
    the guards under which it holds."""

    def __init__(
        self,
        tape: Tape,
        inputs: list[np.ndarray],
        leaf_slots: list[int],
        root: int,
        aux: Any,
        capture: _Capture,
    ) -> None:
        self.tape = tape
        self.inputs = inputs  # arrays the argument slots point at: replay writes into them
        self.leaf_slots = leaf_slots
        self.root = root
        self.aux = aux  # (slot ids, rebuild) of aux tensors
        self.n_nodes = tape.h[H_NNODES]
        self.outside = capture.inputs  # tensors read from outside (closures...)
        self.input_slots = capture.input_slots
        self.guards, self.expect, self.guard_lines = capture.guard_arrays()
        self.failed = ""  # why the last call did not replay (a guard, a changed closure)
        # Plans (``tapegrad.replay``): the forward kernels after the first successful
        # replay, the live backward nodes after the first complete backward. Both are
        # dropped on any failure but a guard's, and the general path runs (and plans)
        # again.
        self.fwd_plan: np.ndarray | None = None
        self.bwd_plan: np.ndarray | None = None
        self._views: tuple = ()  # (layout key, root value view, gradient views)

    def run(
        self, arrays: list[np.ndarray], outside: list[np.ndarray], want_grad: bool
    ) -> tuple[float, list, list, Any] | None:
        """Replay with these argument and outside values: ``(loss, argument grads,
        outside grads, aux)``, or None when a guard does not hold (``self.failed``)."""
        for dst, src in zip(self.inputs, arrays):
            np.copyto(dst, src, casting="same_kind")
        for inp, src in zip(self.outside, outside):
            np.copyto(inp.array, src, casting="same_kind")
        tape = self.tape
        h = tape.header
        # anomaly mode checks every gradient: the general path, not a plan
        anomaly = is_anomaly_enabled()
        h[H_ANOMALY] = int(anomaly)
        if anomaly:
            self.bwd_plan = None
        G, expect = self.guards, self.expect
        while True:
            fwd, bwd = self.fwd_plan, self.bwd_plan
            if fwd is not None and (bwd is not None or not want_grad):
                plan = bwd if want_grad else _NO_PLAN
                st = run_plan(h, fwd, plan, self.root, want_grad, G, expect)
            else:
                st = replay(h, self.n_nodes, self.root, want_grad, G, expect)
            if st == OK:
                if fwd is None:
                    self.fwd_plan = forward_plan(h, self.n_nodes)
                if want_grad and bwd is None and not anomaly:
                    self.bwd_plan = backward_plan(h, self.root)
                break
            if st == E_GUARD:
                self.failed = f"a value read in Python at {self.guard_lines[h[H_ERR_A]]} changed"
                return None
            self.fwd_plan = self.bwd_plan = None
            if st in (E_CALLBACK_PY, E_CALLBACK_HOOK):
                raise RuntimeError("tapegrad.compile: a captured program cannot call Python")
            raise_backward_error(tape, st)
            tape.fix(st)  # a backward kernel compiled on first replay, a bigger grad arena
        value_view, grad_views = self._outputs()
        value = float(value_view[0])
        grads, outside_grads = [], []
        if want_grad:
            n = len(self.leaf_slots)
            grads = [None if v is None else v.copy() for v in grad_views[:n]]
            outside_grads = [None if v is None else v.copy() for v in grad_views[n:]]
        aux = None
        if self.aux is not None:
            slots, rebuild = self.aux
            aux = rebuild([tape.read(s) if isinstance(s, int) else s for s in slots])
        return value, grads, outside_grads, aux

    def _outputs(self) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Views of the loss value and the gradient buffers of the leaves (arguments,
        then outside tensors that require grad), rebuilt only when the layout changed (a
        new pruning or a moved arena): building a view costs microseconds, a copy of a
        small one a fraction of that."""
        h = self.tape.h
        key = (h[H_GEN], h[H_GRAD], h[H_ARENA])
        if not self._views or self._views[0] != key:
            tape = self.tape
            value = tape.view(self.root).reshape(-1)
            slots = self.leaf_slots + [i.slot for i in self.outside if i.rg]
            grads = [tape.grad_view(s) for s in slots]
            self._views = (key, value, grads)
        return self._views[1], self._views[2]

    def structure(self) -> dict[str, np.ndarray]:
        """Everything that defines the computation, for ``check=True``."""
        t = self.tape
        h = t.h
        n, ns = h[H_NNODES], h[H_NSLOTS]
        # the recorded structure; addresses, gradient offsets, scheduler flags and
        # versions change between recordings and replays, inputs' values between calls
        slots = t.arrays["slot"][[S_DTYPE, S_NDIM, S_SIZE, S_SHAPE, S_FLAGS, S_NODE], :ns]
        consts = [
            t.read(s).tobytes()
            for s in range(ns)
            if t.arrays["slot"][S_FLAGS, s] & SLOT_CONST and s not in self.input_slots
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


def _random_state() -> tuple:
    # the legacy global generator: the one np.random.rand & co. draw from
    _, key, pos, has_gauss, gauss = np.random.get_state()  # noqa: NPY002
    return key.tobytes(), pos, has_gauss, gauss


class _StepNode(Function):
    """A compiled step inside a recorded graph: one node whose forward is the replayed
    loss and whose backward replays the program's backward (see ``Compiled.__call__``)."""

    @staticmethod
    def forward(ctx: Any, call: tuple, *values: Any) -> np.ndarray:
        ctx.call = call
        return call[0]

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        _, program, arrays, outside, grad_at = ctx.call
        result = program.run(arrays, outside, True)
        if result is None:  # the same values as the forward: guards cannot fail
            raise RuntimeError(f"tapegrad.compile: replay failed its guards ({program.failed})")
        _, grads, outside_grads, _ = result
        scale = g.reshape(())
        found = [None if v is None else v * scale for v in grads + outside_grads]
        out: list[Any] = [None] * (1 + len(grad_at))
        for j, where in enumerate(grad_at):
            if where >= 0:
                out[1 + j] = found[where]
        return tuple(out)


class Compiled:
    """A function captured once per signature (and branch) and replayed in compiled
    code; see :func:`compile`."""

    def __init__(
        self, fn: Callable, argnums: int | Sequence[int], has_aux: bool, check: bool
    ) -> None:
        self.fn = fn
        self.single = isinstance(argnums, int)
        self.argnums = (argnums,) if self.single else tuple(argnums)
        self.has_aux = has_aux
        self.check = check
        self.programs: dict[tuple, list[Program]] = {}  # by signature, most recent first
        self._stats = {"captures": 0, "replays": 0, "guard_failures": 0, "checks": 0}
        self._diffs: dict[int, frozenset[int]] = {}
        self._warned: set[str] = set()
        functools.update_wrapper(self, fn)

    @property
    def stats(self) -> dict[str, int]:
        """Counts: captures, replays, guard failures, checks, and programs kept."""
        programs = sum(len(c) for c in self.programs.values())
        return {**self._stats, "programs": programs}

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(message, RuntimeWarning, stacklevel=4)

    # --- signature -------------------------------------------------------------------
    def _diff(self, nargs: int) -> frozenset[int]:
        """The positions differentiated in a call with ``nargs`` arguments."""
        diff = self._diffs.get(nargs)
        if diff is None:
            diff = self._diffs[nargs] = (
                frozenset(a % nargs for a in self.argnums) if nargs else frozenset()
            )
        return diff

    def _split(
        self, args: tuple, diff: frozenset[int]
    ) -> tuple[tuple, list[np.ndarray], list[int]]:
        key, arrays, positions = [], [], []
        for i, a in enumerate(args):
            kind = type(a)
            if kind is np.ndarray and a.dtype.kind == "f":  # the common case, checked fast
                key.append(("array", a.shape, a.dtype, i in diff))
                arrays.append(a)
                positions.append(i)
            elif kind is float:  # a value, as in jax.jit: new values replay
                key.append(("array", (), np.dtype(np.float64), i in diff))
                arrays.append(np.array(a))
                positions.append(i)
            elif kind is int and i not in diff:
                key.append(("const", "int", a))
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

    def _new_signature(self, key: tuple) -> str:
        """Why a signature is new: how it differs from the last one seen."""
        if not self.programs:
            return "the first call"
        last = next(reversed(self.programs))
        if len(last) != len(key):
            return f"{len(key)} arguments instead of {len(last)}"
        for i, (a, b) in enumerate(zip(last, key)):
            if a != b:
                return f"argument {i} changed: {a[1:]} -> {b[1:]}"
        return "a new signature"

    # --- capture ----------------------------------------------------------------------
    def _capture(
        self, args: tuple, arrays: list[np.ndarray], positions: list[int], diff: frozenset
    ) -> Program:
        """Run ``fn`` eagerly on a fresh private tape and keep the recording."""
        from .transforms import _flatten

        tape = Tape()
        tape.pinned = True  # never rewound: the recording is the program
        cap = _Capture(tape)
        tape.capture = cap
        enter(CAPTURE, grad_enabled=True, born0=serial(), tape=tape)
        capture_started(1)
        random_before = _random_state()
        try:
            call = list(args)
            leaves = []
            for pos, arr in zip(positions, arrays):
                t = tensor(arr, requires_grad=pos in diff)
                bind(tape, t)
                cap.input_slots.add(t._slot)
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
            inputs = [t._data for _, t in leaves]
            leaf_slots = [t._slot for pos, t in leaves if pos in diff]
            program = Program(tape, inputs, leaf_slots, out._slot, aux_info, cap)
        finally:
            capture_started(-1)
            tape.capture = None
            leave(tape, keep=True)
        if _random_state() != random_before:
            self._warn_once(
                "random",
                f"tapegrad.compile({getattr(self.fn, '__name__', 'fn')}): numpy.random's "
                "global generator was used while capturing; the numbers drawn are "
                "constants of the program (the same on every replay). Pass random draws "
                "as arguments.",
            )
        paths = closures.locate(self.fn, args, [i.tensor for i in program.outside])
        for inp, path in zip(program.outside, paths):
            inp.path = path
            if path is None:
                self._warn_once(
                    "unlocated",
                    f"tapegrad.compile: fn reads a tensor (shape {inp.shape}, {inp.dtype}) "
                    "that is neither an argument nor found from its closure, globals or "
                    "arguments; that tensor object is read on every call, so a "
                    "replacement put where fn finds it would not be seen. Pass it as an "
                    "argument.",
                )
        self._stats["captures"] += 1
        return program

    def _outside_now(self, program: Program, args: tuple) -> list[Tensor] | None:
        """The tensors now where ``fn`` found its outside tensors, or None (with
        ``program.failed``) if one is gone or changed shape, dtype or requires_grad."""
        found = []
        for inp in program.outside:
            t = inp.tensor if inp.path is None else closures.resolve(self.fn, args, inp.path)
            if not (
                isinstance(t, Tensor)
                and t.shape == inp.shape
                and t.dtype == inp.dtype
                and (t.requires_grad and is_grad_enabled()) == inp.rg
            ):
                where = closures.describe(inp.path) if inp.path else "a tensor fn reads"
                program.failed = f"{where} is not a tensor of shape {inp.shape}, {inp.dtype}"
                program.failed += " that requires grad" if inp.rg else ""
                program.failed += " any more"
                return None
            found.append(t)
        return found

    # --- calls ------------------------------------------------------------------------
    def _run(
        self, args: tuple, want_grad: bool, diff: frozenset[int]
    ) -> tuple[tuple, Program, list[np.ndarray], list[Tensor], list[np.ndarray]]:
        """Replay the program for these arguments (capturing it first if needed):
        ``(result of Program.run, program, argument arrays, outside tensors, their
        values)``."""
        key, arrays, positions = self._split(args, diff)
        chain = self.programs.pop(key, None)
        reason = self._new_signature(key) if chain is None else ""
        chain = chain if chain is not None else []
        self.programs[key] = chain  # most recently used last: evicted last
        for i, program in enumerate(chain):
            outside = self._outside_now(program, args)
            values = [t._peek() for t in outside] if outside is not None else []
            result = None if outside is None else program.run(arrays, values, want_grad)
            if result is None:
                self._stats["guard_failures"] += 1
                reason = program.failed
                continue
            if i:  # the branch taken now is tried first next time
                chain.insert(0, chain.pop(i))
            if self.check:
                fresh = self._capture(args, arrays, positions, diff)
                self._stats["captures"] -= 1
                self._stats["checks"] += 1
                _compare(program.structure(), fresh.structure())
            self._stats["replays"] += 1
            return result, program, arrays, outside, values
        program = self._capture(args, arrays, positions, diff)
        chain.insert(0, program)
        self._evict()
        if self._stats["captures"] > RECAPTURE_WARNING:
            self._warn_once(
                "recapture",
                f"tapegrad.compile({getattr(self.fn, '__name__', 'fn')}) has captured "
                f"{self._stats['captures']} programs; it keeps capturing because "
                f"{reason}. Each capture runs fn eagerly: make that value an argument, "
                "or the decision a tensor op (tnp.where), or call fn without tg.compile.",
            )
        outside = self._outside_now(program, args)
        values = [t._peek() for t in outside] if outside is not None else []
        result = None if outside is None else program.run(arrays, values, want_grad)
        if result is None:
            raise RuntimeError(
                "tapegrad.compile: a program failed its guards right after it was captured "
                f"({program.failed}): fn gives different results for the same values"
            )
        self._stats["replays"] += 1
        return result, program, arrays, outside, values

    def _evict(self) -> None:
        """Keep at most MAX_PROGRAMS programs: drop the least recently used ones."""
        total = sum(len(c) for c in self.programs.values())
        while total > MAX_PROGRAMS:
            oldest = next(iter(self.programs))
            chain = self.programs[oldest]
            chain.pop()
            total -= 1
            if not chain:
                del self.programs[oldest]

    def __call__(self, *args: Any) -> Any:
        """The loss (and aux) for these arguments, replayed.

        A float; a tensor instead (one node of the caller's graph) when grad mode is on
        and an argument, or a tensor ``fn`` reads from outside, requires grad. While
        another function is being captured, ``fn`` runs inline in that capture."""
        if active_capture() is not None:
            return self.fn(*args)  # nested in a capture: part of the outer program
        grad_on = is_grad_enabled()
        diff = self._diff(len(args))
        rg_args = {i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad}
        if grad_on and rg_args:
            diff = diff | rg_args
        result, program, arrays, outside, values = self._run(args, False, diff)
        value, _, _, aux = result
        in_graph = grad_on and (rg_args or any(i.rg for i in program.outside))
        if not in_graph:
            return (value, aux) if self.has_aux else value
        # one node: its inputs are the tensor arguments that require grad and the
        # outside tensors that do; grad_at maps each to its place in the program's grads
        node_inputs: list[Any] = []
        grad_at: list[int] = []
        leaf_index = {pos: j for j, pos in enumerate(sorted(diff))}
        for i in sorted(rg_args):
            node_inputs.append(args[i])
            grad_at.append(leaf_index[i])
        j = len(diff)
        for inp, t in zip(program.outside, outside):
            if inp.rg:
                node_inputs.append(t)
                grad_at.append(j)
                j += 1
        loss = np.full(program.tape.slot_shape(program.root), value)
        loss = loss.astype(program.tape.slot_dtype(program.root))
        call = (loss, program, [a.copy() for a in arrays], [v.copy() for v in values], grad_at)
        out = _StepNode.apply(call, *node_inputs)
        return (out, aux) if self.has_aux else out

    def value_and_grad(self, *args: Any) -> Any:
        """``(loss, grads)`` (``((loss, aux), grads)`` with ``has_aux``): grads are NumPy
        arrays for the ``argnums`` arguments (one array for an int ``argnums``).

        Tensors that ``fn`` reads from outside and that require grad get their gradient
        accumulated into ``.grad``, as ``loss.backward()`` would."""
        if is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args):
            raise NotImplementedError(
                HIGHER_ORDER.format(
                    what="value_and_grad of a compiled step was given a tensor that requires "
                    "grad (its gradients would have to be differentiated); call the step "
                    "itself, step(*args), to make it one node of the graph"
                )
            )
        nargs = len(args)
        result, program, _, outside, _ = self._run(args, True, self._diff(nargs))
        value, grads, outside_grads, aux = result
        k = 0
        for inp, t in zip(program.outside, outside):
            if inp.rg:
                g = outside_grads[k]
                k += 1
                if g is not None:
                    accumulate_grad(t, g)
        tape = program.tape
        grads = [  # an argument the loss does not depend on has a zero gradient
            np.zeros(tape.slot_shape(s), tape.slot_dtype(s)) if g is None else g
            for g, s in zip(grads, program.leaf_slots)
        ]
        if self.single:
            grad = grads[0]  # one differentiated argument, one leaf
            if isinstance(args[self.argnums[0] % nargs], float | int):
                grad = grad.dtype.type(grad)
            out = grad
        else:
            # grads follow the differentiated positions in order; argnums may repeat
            by_pos = dict(zip(sorted(self._diff(nargs)), grads))
            parts = []
            for a in self.argnums:
                grad = by_pos[a % nargs]
                if isinstance(args[a % nargs], float | int):
                    grad = grad.dtype.type(grad)
                parts.append(grad)
            out = tuple(parts)
        return ((value, aux), out) if self.has_aux else (value, out)


def _compare(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> None:
    for name in old:
        a, b = old[name], new[name]
        if a.shape != b.shape or not np.array_equal(a, b):
            raise RuntimeError(
                f"tapegrad.compile(check=True): this call recorded a different computation "
                f"than the captured program ({name} differ): the function's control flow "
                "or constants depend on values the program's guards do not see (Python "
                "numbers or NumPy arrays it reads from outside, randomness), which a "
                "captured program cannot follow. Make them arguments, use eager mode for "
                "this function, or make the branch an op (tnp.where)."
            )
