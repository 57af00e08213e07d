"""A compiled step called on tensors that require grad is one node of the caller's
graph: its backward replays the program; differentiated again or in forward mode it
records ``fn`` eagerly from the node's inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .checkpoint import recorded_jvp, recorded_vjp, same_as_forward
from .function import Function
from .grad_mode import is_grad_enabled
from .handles import slot_handle
from .plain_guards import plain_hold
from .program import rebuilt_arguments
from .tape import Tape
from .tensors import Tensor


class StepNode(Function):
    """A compiled step inside a recorded graph: one node whose forward is the replayed
    loss and whose backward replays the program's backward (see ``Compiled.__call__``).
    Differentiated again (``create_graph``, ``tg.hessian``, ``tg.hvp``) or in forward
    mode (``tg.jacfwd``), it records ``fn`` eagerly from the node's inputs on the graph's
    tape (``vjp_graph``, ``jvp_graph``): the program's kernels are first-order only."""

    replays = False  # a compiled step inside a capture is inlined instead

    @staticmethod
    def forward(ctx: Any, call: tuple, *values: Any) -> np.ndarray:
        ctx.call = call
        return call[0]

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        _, step, program, arrays, outside, grad_at = ctx.call[:6]
        with step._lock:
            result = program.run(arrays, outside, True)
        if result is None:  # the same values as the forward: guards cannot fail
            raise RuntimeError(f"tapegrad.compile: replay failed its guards ({program.failed})")
        _, grads, outside_grads, _ = result
        scale = g.reshape(())
        found = [None if v is None else v * scale for v in grads + outside_grads]
        out: list[Any] = [None] * (1 + len(grad_at))
        for j, where in enumerate(grad_at):
            out[1 + j] = found[where]
        return tuple(out)

    @staticmethod
    def _rerun(ctx: Any) -> tuple[Callable, list, str]:
        """``fn`` as a function of the program's inputs (flat, each a value as the call
        gave it), those values, and how errors name the step. Raises when what ``fn``
        reads from outside changed since the call: the recording would be another
        function than the one whose value the graph holds."""
        _, step, program, arrays, values, _, call, args, outside = ctx.call
        where = f"tg.compile({getattr(step.fn, '__name__', 'fn')})"
        with step._lock:
            same = not program.plain or plain_hold(step.reach, program, args)
            now = step._outside_now(program, args) if same and program.outside else []
        same = same and now is not None and all(a is b for a, b in zip(now, outside))
        if not (same and all(np.array_equal(t._value(), v) for t, v in zip(outside, values))):
            raise RuntimeError(
                f"{where}: something the function reads from outside (a tensor, a number, "
                "an array) was replaced or modified between the call and its second "
                "derivative (or forward-mode derivative), which records the function again. "
                "Differentiate before changing it"
            )
        flat = [float(a) if k in call.scalar else a for k, a in enumerate(arrays)]

        def again(*inputs: Any) -> Any:
            out = step.fn(*rebuilt_arguments(call.entries, inputs))
            return out[0] if step.has_aux else out

        return again, flat, where

    @staticmethod
    def vjp_graph(ctx: Any, tape: Tape, k: int, needs: list, gs: list) -> list:
        """Recorded gradients of the node's inputs: ``fn`` recorded again on ``tape``
        from the differentiated arguments' tensors; the tensors it reads from outside
        that require grad are found where it reads them."""
        loss, _, program, _, _, grad_at, call, _, outside = ctx.call
        again, flat, where = StepNode._rerun(ctx)
        ins, _ = tape.node_links(k)
        n_diff = len(call.diff_inputs)
        rg_outside = [t for t, i in zip(outside, program.outside) if i.rg]
        nums, others, at, others_at = [], [], [], []
        for j, w in enumerate(grad_at):
            if not needs[j]:
                continue
            if w < n_diff:
                kk = call.diff_inputs[w]
                flat[kk] = slot_handle(tape, ins[j])
                nums.append(kk)
                at.append(j)
            else:
                others.append(rg_outside[w - n_diff])
                others_at.append(j)
        out, grads = recorded_vjp(again, flat, nums, others, gs[0], where)
        same_as_forward(np.asarray(out._value()).reshape(loss.shape), loss, where)
        found: list[Any] = [None] * len(ins)
        for j, g in zip(at + others_at, grads):
            found[j] = g
        return found

    @staticmethod
    def jvp_graph(ctx: Any, tape: Tape, k: int, tangents: list) -> list:
        """Forward mode: the loss's tangent, ``fn`` recorded again (on the graph's tape
        when forward mode records)."""
        loss, _, _, _, _, grad_at, call, _, _ = ctx.call
        again, flat, where = StepNode._rerun(ctx)
        ins, _ = tape.node_links(k)
        graph = is_grad_enabled()
        n_diff = len(call.diff_inputs)
        nums, ts = [], []
        for j, w in enumerate(grad_at):
            if w >= n_diff:
                if tangents[j] is not None:  # (a leaf read from outside: no tangent flows)
                    raise NotImplementedError(
                        f"forward mode through {where}: a tangent on a tensor the function "
                        "reads from outside; pass that tensor as an argument"
                    )
                continue
            kk = call.diff_inputs[w]
            if graph:
                flat[kk] = slot_handle(tape, ins[j])
            if tangents[j] is not None:
                nums.append(kk)
                ts.append(tangents[j])
        if not nums:
            return [None]
        out, tangent = recorded_jvp(again, flat, nums, ts)
        value = out._value() if isinstance(out, Tensor) else np.asarray(out)
        same_as_forward(value.reshape(loss.shape), loss, where)
        return [tangent]
