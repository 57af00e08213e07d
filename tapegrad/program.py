"""What ``tg.compile`` captures and replays: the bookkeeping of one capture (which
tensors are inputs, which values Python read: the guards), the :class:`Program` it
makes, whose ``run`` replays forward and backward in one compiled call, and a call's
arguments split into the signature and the program's inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import fused, tiers
from ._jit import entry_point
from .boundary import user_line
from .engine import is_anomaly_enabled, raise_backward_error, run_python_node
from .function import rerun_forward
from .layout import (
    E_CALLBACK_FWD,
    E_CALLBACK_HOOK,
    E_CALLBACK_PY,
    E_GUARD,
    H_ANOMALY,
    H_ARENA,
    H_ERR_A,
    H_ERR_B,
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
    SLOT_GRAD_SET,
    SLOT_LEAF,
    SLOT_RG,
)
from .replay import backward_plan, forward_plan, replay, resume_plan
from .rule_walks import node_name
from .scheduler import resume
from .tape import Tape, tape_stack
from .tensors import Tensor, bind

_NO_PLAN = np.empty((4, 0), np.int64)  # the backward plan of a value-only replay
_NO_GUARDS = np.empty((4, 0), np.int64)
_NO_BYTES = np.empty(0, np.uint8)

# resume_plan's compiled entry point (numba's dispatcher costs ~0.5 us a call to resolve
# nine arguments' types): every argument is C-contiguous and of fixed type here
_run_plan: Any = None


def _plan_call(h: np.ndarray, *args: Any) -> int:
    global _run_plan
    if _run_plan is None:
        _run_plan = entry_point(resume_plan, h, *args)
    return _run_plan(h, *args)


# --- capture -------------------------------------------------------------------------------


class _Input:
    """A tensor the function read from outside: an input slot of the program."""

    __slots__ = ("array", "dtype", "paths", "requires_grad", "rg", "shape", "slot", "tensor")

    def __init__(self, t: Tensor, array: np.ndarray, slot: int, rg: bool) -> None:
        self.tensor = t  # as found while capturing (the fallback when no path is known)
        self.array = array  # the program's copy: each call writes the current values here
        self.slot = slot
        self.rg = rg  # a leaf of the program (its gradient goes to .grad)
        self.requires_grad = t.requires_grad
        self.shape = t.shape
        self.dtype = t.dtype
        self.paths: list[tuple] = []  # routes to it from fn and the arguments


class Capture:
    """What a capture learns besides the recording: inputs from outside and guards.

    Installed as ``tape.capture`` while ``fn`` runs; the tensor handle calls
    :meth:`foreign_input` when it binds a foreign tensor, :meth:`read` for every
    Python read of a value and :meth:`check_inplace` before an in-place op."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.inputs: list[_Input] = []
        self.input_slots: set[int] = set()
        self.guards: dict[int, tuple[np.ndarray, str]] = {}
        # custom function nodes whose forward a replay runs again: node -> (arguments
        # that are not tensors, needs_input_grad), filled by Function.apply
        self.calls: dict[int, tuple] = {}
        self.refused: dict[int, str] = {}  # custom nodes a replay cannot run, and why

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

    def _above(self, home: Tape) -> bool:
        """``home`` is a tape entered on top of the capture (a transform inside it)."""
        stack = tape_stack()
        mine = next(i for i, x in enumerate(stack) if x is self.tape)
        return any(x is home for x in stack[mine + 1 :])

    def outside(self, t: Tensor) -> bool:
        """``t`` comes from outside the function being captured."""
        tape = self.tape
        if t._data is not None:
            return getattr(t, "_born", 0) < tape.born0
        return t._tape is not tape and not self._above(t._tape)

    def check_inplace(self, t: Tensor) -> None:
        """An in-place op while capturing: on a tensor from outside it is a side effect
        that the replays would not repeat (the capturing call would have done it once
        more than the others)."""
        if self.outside(t):
            raise RuntimeError(
                f"tapegrad.compile: the function modifies a tensor from outside it in place "
                f"(shape {t.shape}, {t.dtype}); a captured program does not repeat side "
                "effects. Return the new value (has_aux=True) and update it outside, or "
                "call the function without tg.compile"
            )

    def read(self, t: Tensor) -> np.ndarray:
        """Python reads ``t``'s values while capturing: the program must replay only
        when they are the same, so the read becomes a guard (a tensor from outside
        becomes an input first)."""
        tape = self.tape
        bound = t._tape is tape and (t._data is None or t._epoch == tape.epoch)
        if not bound:
            if t._data is not None and getattr(t, "_born", 0) >= tape.born0:
                return t._data  # made while capturing: a constant of the program
            if t._data is None and t._tape is not tape and self._above(t._tape):
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
        capture: Capture,
    ) -> None:
        self.tape = tape
        self.inputs = inputs  # arrays the argument slots point at: replay writes into them
        self.leaf_slots = leaf_slots  # of the differentiated arguments' arrays, in order
        self.root = root
        self.aux = aux  # (("slot", id) or ("value", v) per aux leaf, rebuild)
        self.n_nodes = tape.h[H_NNODES]
        self.outside = capture.inputs  # tensors read from outside (closures...)
        self.input_slots = capture.input_slots
        self.guards, self.expect, self.guard_lines = capture.guard_arrays()
        self.calls = capture.calls  # custom functions: their forwards run in Python
        # the call that captured replays on the values it captured: the custom nodes'
        # outputs and contexts are those of the capture (a forward runs once per call)
        self.just_captured = True
        self.running = False  # a custom function's Python may call the step again
        self.failed = ""  # why the last call did not replay (a guard, a changed closure)
        # plain values fn can reach from outside (numbers, strings, NumPy arrays): each a
        # constant of the recording, so each is checked before a replay (plain_hold)
        self.plain: list[tuple[tuple, Any, Any]] = []
        self.plain_checks: tuple = ((), [])  # (self.plain, its checks: _plain_checks)
        # Plans (``tapegrad.replay``): the forward kernels after the first successful
        # replay, the live backward nodes after the first complete backward. Both are
        # dropped on any failure but a guard's, and the general path runs (and plans)
        # again.
        self.fwd_plan: np.ndarray | None = None
        self.bwd_plan: np.ndarray | None = None
        # whether each plan went through tapegrad.fused with its executors compiled (on
        # a cold cache they come later, from the background compiler: fuse_plans)
        self.fused = [False, False]
        self._views: tuple = ()  # (layout key, root value view, gradient views)
        N = tape.arrays["node"][:, : self.n_nodes]
        tiers.expect_loop(N[N_OP], N[N_SIG])  # (a cold cache: its kernels go first)

    def run(
        self, arrays: list[np.ndarray], outside: list[np.ndarray], want_grad: bool
    ) -> tuple[float, list, list, Any] | None:
        """Replay with these argument and outside values: ``(loss, argument grads,
        outside grads, aux)``, or None when a guard does not hold (``self.failed``)."""
        if self.running:
            raise RuntimeError(
                "tapegrad.compile: a custom function's forward or backward called the "
                "compiled step whose program is replaying it; the inner call would "
                "overwrite the values the outer one stands on. Call the function itself "
                "(not the compiled step) from inside the custom function"
            )
        self.running = True
        try:
            return self._run(arrays, outside, want_grad)
        finally:
            self.running = False
            self.just_captured = False

    def _run(
        self, arrays: list[np.ndarray], outside: list[np.ndarray], want_grad: bool
    ) -> tuple[float, list, list, Any] | None:
        for dst, src in zip(self.inputs, arrays):
            np.copyto(dst, src, casting="same_kind")
        if outside:
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
        f0 = b0 = 0  # where a call resumes after a custom function's Python ran
        while True:
            fwd, bwd = self.fwd_plan, self.bwd_plan
            planned = fwd is not None and (bwd is not None or not want_grad)
            if planned:
                plan = bwd if want_grad else _NO_PLAN
                st = _plan_call(h, fwd, plan, self.root, want_grad, G, expect, f0, b0)
            else:
                st = replay(h, f0, self.n_nodes, self.root, want_grad, G, expect)
            if st == E_CALLBACK_FWD:  # a custom function's forward, then on from the next
                k = int(h[H_ERR_A])
                if not self.just_captured and not rerun_forward(
                    tape, k, self.calls[k], node_name(tape, k)
                ):
                    self.failed = f"{node_name(tape, k)} marked other outputs non-differentiable"
                    return None
                f0 = k + 1
                continue
            if st == E_CALLBACK_PY and planned:  # its backward, then on from the next entry
                run_python_node(tape, int(h[H_ERR_A]), True)
                f0, b0 = fwd.shape[1], int(h[H_ERR_B]) + 1
                continue
            while st == E_CALLBACK_PY:  # the scheduler's first backward: as the engine does
                k = int(h[H_ERR_A])
                run_python_node(tape, k, True)
                st = resume(h, k - 1, True, False)
            if st == OK:
                if fwd is None:
                    self.fwd_plan = forward_plan(h, self.n_nodes)
                    self.fused[0] = False
                if want_grad and bwd is None and not anomaly:
                    self.bwd_plan = backward_plan(h, self.root)
                    self.fused[1] = False
                self.fuse_plans()
                tiers.upgrade()  # (full kernels a background compiler just finished)
                break
            if st == E_GUARD:
                self.failed = f"a value read in Python at {self.guard_lines[h[H_ERR_A]]} changed"
                return None
            self.fwd_plan = self.bwd_plan = None
            f0 = b0 = 0
            if st == E_CALLBACK_HOOK:
                raise RuntimeError("tapegrad.compile: a captured program cannot call hooks")
            raise_backward_error(tape, st)
            tape.fix(st)  # a backward kernel compiled on first replay, a bigger grad arena
        value_view, grad_views = self._outputs()
        value = float(value_view[0])
        grads, outside_grads = [], []
        if want_grad:
            grads = [None if v is None else v.copy() for v in grad_views]
            n = len(self.leaf_slots)
            if len(grads) > n:
                grads, outside_grads = grads[:n], grads[n:]
        aux = None
        if self.aux is not None:
            slots, rebuild = self.aux
            aux = rebuild([tape.read(v) if kind == "slot" else v for kind, v in slots])
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

    def fuse_plans(self) -> None:
        """Fuse the runs of scalar nodes of each plan not fused yet, once the executors
        are compiled (``tapegrad.fused``; a cheap test while they are not). The backward
        plan keeps the gradient offsets and fresh bits of the backward that made it,
        whenever it is fused: plans run on exactly those."""
        if fused.executors() is None:
            return
        if self.fwd_plan is not None and not self.fused[0]:
            self.fwd_plan = fused.fuse_forward(self.tape, self.fwd_plan)
            self.fused[0] = True
        if self.bwd_plan is not None and not self.fused[1]:
            self.bwd_plan = fused.fuse_backward(self.tape, self.bwd_plan)
            self.fused[1] = True

    def structure(self) -> dict[str, np.ndarray]:
        """Everything that defines the computation, for ``check=True``."""
        t = self.tape
        h = t.h
        n, ns = h[H_NNODES], h[H_NSLOTS]
        # the recorded structure; addresses, gradient offsets, scheduler flags and
        # versions change between recordings and replays, inputs' values between calls
        slots = t.arrays["slot"][[S_DTYPE, S_NDIM, S_SIZE, S_SHAPE, S_FLAGS, S_NODE], :ns]
        slots[4] &= ~SLOT_GRAD_SET  # the scheduler's scratch bit
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


def rebuilt_arguments(entries: list[tuple], inputs: Sequence[Any]) -> list[Any]:
    """The arguments of a call rebuilt from its entries (``SplitCall``) with ``inputs`` for
    the program's inputs."""

    def rebuild(entry: tuple) -> Any:
        if entry[0] == "const":
            return entry[1]
        if entry[0] == "input":
            return inputs[entry[1]]
        return entry[1]([rebuild(e) for e in entry[2]])

    return [rebuild(e) for e in entries]


class SplitCall:
    """One call's arguments, split: the signature key, the arrays that are program
    inputs, and how to rebuild the arguments (``entries``, per argument: ``("const",
    value)``, ``("input", k)`` or ``("tree", rebuild, entries)``)."""

    __slots__ = ("arrays", "diff_inputs", "entries", "key", "scalar")

    def __init__(self) -> None:
        self.key: list = []
        self.arrays: list[np.ndarray] = []
        self.entries: list[tuple] = []
        self.diff_inputs: list[int] = []  # indices into arrays, differentiated, in order
        self.scalar: set[int] = set()  # inputs given as Python numbers (scalar gradients)
