"""Checkpointing (``tg.checkpoint``), and what nodes that re-run their function share:
recorded again on the graph's tape to be differentiated again or in forward mode
(``recorded_vjp``, ``recorded_jvp``), with NumPy's global random state restored
(``random_state``) and the result checked against the forward (``same_as_forward``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .engine import graph_gradients
from .forward_mode import jvp
from .function import Function
from .grad_mode import is_grad_enabled
from .handles import home_of, slot_handle
from .recording import as_tensor
from .tape import TRANSFORM, Tape, current_tape, enter, leave
from .tensors import Tensor, bind, serial, values_of
from .transforms import (
    aliases,
    as_output,
    differentiate,
    done,
    record,
)

__all__ = ["checkpoint", "random_state", "recorded_jvp", "recorded_vjp", "same_as_forward"]


# --- nodes that re-run their function to be differentiated again ---------------------------
#
# tg.checkpoint and a compiled step called inside a graph are one custom node each, whose
# first-order backward runs on NumPy values. Differentiated again (create_graph, hessian,
# hvp, a nested tg.grad) or in forward mode, they record their function once more on the
# tape being differentiated, from the node's inputs, and differentiate that recording: the
# derivatives are then ordinary recorded ops (rule_walks's ``vjp_graph`` / ``jvp_graph``).


def recorded_vjp(
    f: Callable,
    args: Sequence[Any],
    nums: Sequence[int],
    others: Sequence[Tensor],
    seed: Any,
    where: str,
) -> tuple[Tensor, list]:
    """``f(*args)`` recorded on the current tape with the arguments at ``nums`` (tensors
    of the graph) replaced by aliases, and its vector-Jacobian product with ``seed``
    as recorded ops: one gradient (or None) for each argument at ``nums``, then for each
    of ``others`` (tensors ``f`` reads from outside, leaves of the graph)."""
    tape = current_tape()
    args2, _, made = aliases(tuple(args), tuple(nums), where)
    out = as_output(f(*args2))
    slots = [m.slot for m in made] + [bind(tape, t) for t in others]
    home = home_of(out)
    if seed is None or home is None or home[0] is not tape or not tape.slot_rg(home[1]):
        return out, [None] * len(slots)
    grads = graph_gradients(tape, home[1], seed, set(slots))
    return out, [grads.get(s) for s in slots]


def recorded_jvp(
    f: Callable, args: Sequence[Any], nums: Sequence[int], tangents: Sequence[Any]
) -> tuple[Any, Any]:
    """``jvp`` of ``f(*args)`` along ``tangents`` for the arguments at ``nums`` (tensors
    of the graph when forward mode records, NumPy values otherwise)."""

    def at(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(nums, xs):
            full[i] = x
        return f(*full)

    return jvp(at, tuple(args[i] for i in nums), tuple(tangents))


@contextlib.contextmanager
def random_state(state: tuple) -> Iterator[None]:
    """NumPy's global random state set to ``state`` for a re-run (and restored): the
    draws of the forward are drawn again."""
    now = np.random.get_state()  # noqa: NPY002
    np.random.set_state(state)  # noqa: NPY002
    try:
        yield
    finally:
        np.random.set_state(now)  # noqa: NPY002


# --- checkpointing --------------------------------------------------------------------------


class _Checkpoint(Function):
    """``checkpoint(f, *args)`` as one node: the forward keeps only the inputs; the
    backward records ``f`` again and pulls the cotangent back through it. Differentiated
    again, or in forward mode, it records ``f`` on the graph's own tape (``vjp_graph``,
    ``jvp_graph``)."""

    # its backward records f again on the graph's tape: not a node a replay reruns
    replays = False

    @staticmethod
    def forward(ctx: Any, f: Callable, diff: tuple[int, ...], *values: Any) -> Any:
        ctx.f, ctx.diff = f, diff
        ctx.save_for_backward(*values)
        ctx.rng = np.random.get_state()  # noqa: NPY002  (the legacy global state, on purpose)
        tape = enter(TRANSFORM, True, born0=serial())
        try:
            out = f(*[as_tensor(v) if i in diff else v for i, v in enumerate(values)])
            if not isinstance(out, Tensor):
                raise TypeError(f"checkpoint: f must return a tensor, got {type(out).__name__}")
            outside = [t for _, t in tape.foreign.values() if t.requires_grad]
            if outside:
                raise RuntimeError(
                    "checkpoint: f reads a tensor that requires grad but is not one of its "
                    f"arguments (shape {outside[0].shape}): its gradient would be lost. "
                    "Pass it as an argument of checkpoint"
                )
            ctx.out = out.numpy()
            return ctx.out
        finally:
            leave(tape)

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        values = list(ctx.saved_tensors)
        diff = ctx.diff

        def again(*xs: Any) -> Any:
            full = list(values)
            for i, x in zip(diff, xs):
                full[i] = x
            return ctx.f(*full)

        # recorded on a transform tape that goes back to the pool afterwards, so the
        # blocks of a long loop reuse one tape's memory one after the other
        nums = tuple(range(len(diff)))
        with random_state(ctx.rng):
            rec, leaves, tape = record(
                again, tuple(values[i] for i in diff), {}, nums, "checkpoint"
            )
        try:
            rec = as_output(rec)
            same_as_forward(rec.numpy(), ctx.out, "checkpoint")
            grads = differentiate(rec, tape, leaves, "checkpoint", g)
        finally:
            del rec
            done(tape, leaves)
        out: list[Any] = [None, None] + [None] * len(values)
        for i, gi in zip(diff, grads):
            out[2 + i] = gi
        return tuple(out)

    @staticmethod
    def _arguments(ctx: Any, tape: Tape, k: int) -> tuple[list, list[tuple[int, int, int]]]:
        """``f``'s arguments (the saved values) and, per tensor input of node ``k``,
        ``(input index, argument index, slot)``."""
        ins, _ = tape.node_links(k)
        positions = tape.custom_entry(k)[3]
        # apply(f, diff, *values): argument i of f is position 2 + i
        return list(ctx.saved_tensors), [
            (j, p - 2, s) for j, (p, s) in enumerate(zip(positions, ins))
        ]

    @staticmethod
    def vjp_graph(ctx: Any, tape: Tape, k: int, needs: list, gs: list) -> list:
        """Recorded gradients for ``backward(create_graph=True)`` and second order: ``f``
        recorded again from the node's inputs, on ``tape``."""
        args, inputs = _Checkpoint._arguments(ctx, tape, k)
        nums, at = [], []
        for j, i, s in inputs:
            if needs[j] and i in ctx.diff:
                args[i] = slot_handle(tape, s)
                nums.append(i)
                at.append(j)
        found: list[Any] = [None] * len(inputs)
        if not nums or gs[0] is None:
            return found
        with random_state(ctx.rng):
            out, grads = recorded_vjp(ctx.f, args, nums, (), gs[0], "checkpoint")
        same_as_forward(np.asarray(values_of(out)), ctx.out, "checkpoint")
        for j, g in zip(at, grads):
            found[j] = g
        return found

    @staticmethod
    def jvp_graph(ctx: Any, tape: Tape, k: int, tangents: list) -> list:
        """Forward mode: the tangent of ``f``'s output, ``f`` recorded again (on the
        graph's tape when forward mode records, so the tangent is a tensor of it)."""
        graph = is_grad_enabled()
        args, inputs = _Checkpoint._arguments(ctx, tape, k)
        nums, ts = [], []
        for j, i, s in inputs:
            if graph and tape.slot_rg(s):
                args[i] = slot_handle(tape, s)
            if tangents[j] is not None and i in ctx.diff:
                nums.append(i)
                ts.append(tangents[j])
        if not nums:
            return [None]
        with random_state(ctx.rng):
            out, tangent = recorded_jvp(ctx.f, args, nums, ts)
        same_as_forward(np.asarray(values_of(out)), ctx.out, "checkpoint")
        return [tangent]


def same_as_forward(again: np.ndarray, first: np.ndarray, where: str) -> None:
    """The recomputation must reproduce the forward, or its gradient belongs to another
    function (draws from a ``numpy.random.Generator``, which cannot be rewound; a
    global changed in between)."""
    if again.shape == first.shape:
        tol = 1e-4 if first.dtype == np.float32 else 1e-10
        scale = float(np.max(np.abs(first), initial=0.0))
        if np.allclose(again, first, rtol=tol, atol=tol * scale, equal_nan=True):
            return
    raise RuntimeError(
        f"{where}: running f again in the backward pass gave a different result than "
        "its forward (random draws from a numpy Generator, or state that changed in "
        "between), so its gradient would not belong to the value used. Make f "
        "deterministic (pass random draws in as arguments); numpy's global random state "
        "is restored for it"
    )


def checkpoint(f: Callable, *args: Any) -> Tensor:
    """Compute ``f(*args)``, keeping only ``args`` for the backward pass.

    The backward pass runs ``f`` again to get its gradients (HIPS autograd's
    ``checkpoint``, ``torch.utils.checkpoint``): memory for time. A time-stepping loop
    that checkpoints every ``k`` steps keeps one state per ``k`` steps instead of every
    intermediate. ``f`` must return one tensor and read every tensor that requires
    grad through its arguments (parameters included); one it reads from a closure
    raises. NumPy's global random state is restored for the recomputation; any other
    difference between the two runs raises. Differentiated again (``tg.hessian``,
    ``tg.hvp``, ``backward(create_graph=True)``) or in forward mode (``tg.jvp``,
    ``tg.jacfwd``), ``f`` is recorded again on the graph's tape and differentiated as
    ordinary ops: its intermediates are kept for that derivative.

    Parameters
    ----------
    f : callable
        Function of ``args`` returning one tensor.
    *args : Tensor or any
        Its arguments; float tensors are differentiated, anything else is passed as
        it is.

    Returns
    -------
    Tensor
        ``f(*args)``, one node of the caller's graph.

    Raises
    ------
    TypeError
        ``f`` does not return a tensor.
    RuntimeError
        ``f`` reads a tensor that requires grad but is not one of ``args`` (its
        gradient would be lost); or, in the backward pass, running ``f`` again gave a
        different result (draws from a ``numpy.random.Generator``, or state that
        changed in between).

    See Also
    --------
    tapegrad.compile : Capture and replay a whole step.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> def block(y, w):
    ...     return tnp.tanh(w * y)
    >>> w = tg.tensor(0.5, requires_grad=True)
    >>> y = tg.tensor([1.0, 2.0])
    >>> for _ in range(3):
    ...     y = tg.checkpoint(block, y, w)
    >>> tnp.sum(y).backward()
    >>> print(np.round(w.grad, 6))
    1.47244
    """
    diff = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor) and a.dtype.kind == "f")
    return _Checkpoint.apply(f, diff, *args)
