"""Declaring your own primitives, differentiable to any order.

A primitive is a function whose forward pass tapegrad does not look into (NumPy, SciPy,
compiled code, a solver) and whose derivatives you state, written in
:mod:`tapegrad.numpy` ops. Because the rules are ops, tapegrad records them when it
differentiates through the primitive again: the primitive works in ``backward()``,
``backward(create_graph=True)``, ``tg.grad`` of ``tg.grad``, ``tg.hessian``,
``tg.jvp`` and ``tg.jacfwd``, to any order.

The spelling is HIPS autograd's ``autograd.extend``:

>>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
>>> from tapegrad.extend import primitive, defvjp, defjvp
>>> @primitive
... def logsumexp(x):
...     m = np.max(x)
...     return m + np.log(np.sum(np.exp(x - m)))
>>> defvjp(logsumexp, lambda ans, x: lambda g: g * tnp.exp(x - ans))
>>> defjvp(logsumexp, lambda t, ans, x: tnp.sum(t * tnp.exp(x - ans)))
>>> x = np.array([0.5, -1.0, 2.0])
>>> h = tg.hessian(logsumexp)(x)  # diag(p) - p p^T, with p = softmax(x)
>>> p = np.exp(x - logsumexp(x))
>>> bool(np.allclose(h, np.diag(p) - np.outer(p, p)))
True

* ``primitive(f)``: ``f`` receives NumPy arrays for its tensor arguments and any other
  argument as given, and returns an array (or a tuple of arrays). Called without a
  tensor among its arguments it is ``f`` itself.
* ``defvjp(f, *makers, argnums=None)``: ``maker(ans, *args, **kwargs)`` returns the
  function ``g -> gradient`` for one argument; ``makers`` go with ``argnums`` (default
  ``0, 1, ...``). A maker of ``None`` declares a zero gradient (a constant argument);
  an argument with no maker cannot be differentiated, and a derivative that needs it
  raises naming the primitive.
* ``defjvp(f, *rules, argnums=None)``: ``rule(t, ans, *args, **kwargs)`` returns that
  argument's contribution to the output's tangent, for tangent ``t``; contributions
  add up. ``None`` declares a zero contribution.

The rules see the arguments and outputs as they were at the call (arrays are copied,
so a forward that works in place or reuses an output buffer changes nothing). A rule
sees arrays in a first-order backward pass (it runs once, with grad mode off)
and tensors of the graph when it is differentiated again; written with
:mod:`tapegrad.numpy` (or NumPy's functions, which dispatch to it on tensors) it serves
both. A gradient of a shape the argument broadcasts to is summed down to it; any other
shape raises, naming the primitive.

JAX users: ``jax.custom_vjp(f)`` with ``f.defvjp(fwd, bwd)`` is ``primitive(f)`` with
one ``defvjp`` maker per argument, ``maker(ans, *args) = lambda g: bwd(res, g)[i]``
where ``res`` is what ``fwd`` would save (computed from ``ans`` and ``args``); a
``jax.custom_jvp`` rule is the sum of the ``defjvp`` rules. PyTorch users keep
:class:`tapegrad.Function` (NumPy backward, first order only).

What a primitive refuses, rather than give a wrong number:

* a tensor that requires grad inside a container argument or a keyword argument, read
  by ``f`` from outside (a closure, a global), or returned by ``f``: its gradient would
  be lost;
* a rule's result of the wrong shape (a gradient may be of a shape its argument
  broadcasts to: it is summed down), ``None``, or a tuple where one array is due;
* under ``tg.compile``, a tensor inside a container or keyword argument (a replay would
  pass it as it was captured), and a ``f`` that changes an argument that is not a
  tensor in place (what it passes back would stay as captured).

Under ``tg.compile`` a primitive is one node of the captured program: every replay runs
``f`` again on that replay's values, in Python, and its first-order rules in the
backward (inside ``step.hvp`` or a ``tg.grad`` in the compiled function, the rules are
recorded into the program like any op).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .derivatives import sum_to
from .function import Function
from .grad_mode import is_grad_enabled
from .handles import slot_handle
from .numpy_protocols import holds_grad_tensor
from .ops.shape.front import astype
from .tape import TRANSFORM, Tape, enter, leave
from .tensors import Tensor, serial, values_of

__all__ = ["Primitive", "defjvp", "defvjp", "primitive"]

# what ``defvjp`` / ``defjvp`` store for a ``None`` rule: a zero derivative
_ZERO = object()


class Primitive:
    """A function tapegrad treats as one op, with the derivatives declared for it.

    Made by :func:`primitive`; called like the function it wraps. On tensors it records
    one node; without a tensor among its arguments it returns ``fun(*args, **kwargs)``.

    Parameters
    ----------
    fun : callable
        The function, on NumPy values.

    Raises
    ------
    TypeError
        From a call: a tensor that requires grad inside a container argument or in a
        keyword argument (its gradient would be lost).
    RuntimeError
        From a call: ``fun`` reads a tensor that requires grad from outside its
        arguments.
    NotImplementedError
        From a derivative: it needs a rule that was not declared.

    See Also
    --------
    primitive : The decorator that makes one.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg
    >>> from tapegrad.extend import Primitive, defvjp
    >>> square = Primitive(lambda x: x * x)
    >>> defvjp(square, lambda ans, x: lambda g: 2 * x * g)
    >>> tg.grad(square)(3.0)
    np.float64(6.0)

    Attributes
    ----------
    fun : callable
        The wrapped function, on NumPy values.
    vjps : dict
        Argument position -> VJP maker (:func:`defvjp`).
    jvps : dict
        Argument position -> JVP rule (:func:`defjvp`).
    """

    def __init__(self, fun: Callable) -> None:
        self.fun = fun
        self.vjps: dict[int, Any] = {}
        self.jvps: dict[int, Any] = {}
        functools.update_wrapper(self, fun)

    def __repr__(self) -> str:
        return f"<tapegrad primitive {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _refuse_hidden(self, args, kwargs)
        if not any(isinstance(a, Tensor) for a in args):
            # no node to record, but a tensor that requires grad read from outside
            # would still lose its gradient: refused as on a recorded call
            return _isolated(self, args, kwargs)
        return _PrimitiveNode.apply(self, kwargs, *args)


def primitive(fun: Callable) -> Primitive:
    """Declare ``fun`` a primitive: one op of the graph, differentiated by the rules
    :func:`defvjp` and :func:`defjvp` give it.

    Parameters
    ----------
    fun : callable
        A function of arrays (and other arguments) returning an array or a tuple of
        arrays. It receives each tensor argument's values as a NumPy array.

    Returns
    -------
    Primitive
        Callable like ``fun``: on tensors it records one node; without a tensor among
        its arguments it returns ``fun(*args, **kwargs)``.

    Raises
    ------
    TypeError
        ``fun`` is not callable.

    See Also
    --------
    defvjp : Its reverse-mode rules.
    defjvp : Its forward-mode rules.
    tapegrad.Function : A custom op with a NumPy backward (first order).

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.extend import primitive, defvjp
    >>> @primitive
    ... def cube(x):
    ...     return x**3
    >>> defvjp(cube, lambda ans, x: lambda g: 3 * x**2 * g)
    >>> tg.grad(tg.grad(lambda x: cube(x)))(2.0)  # 6 x
    np.float64(12.0)
    """
    if isinstance(fun, Primitive):
        return fun
    if not callable(fun):
        raise TypeError(f"primitive: expected a function, got {type(fun).__name__}")
    return Primitive(fun)


def _rules(prim: Any, rules: Sequence[Any], argnums: Any, where: str) -> dict[int, Any]:
    if not isinstance(prim, Primitive):
        raise TypeError(
            f"{where}: expected a primitive (made by tapegrad.extend.primitive), got "
            f"{type(prim).__name__}"
        )
    if argnums is None:
        nums: tuple = tuple(range(len(rules)))
    else:
        given = (argnums,) if isinstance(argnums, int | np.integer) else tuple(argnums)
        nums = tuple(
            operator.index(i) if isinstance(i, int | np.integer) and not isinstance(i, bool) else i
            for i in given
        )
    if (
        len(nums) != len(rules)
        or len(set(nums)) != len(nums)
        or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in nums)
    ):
        raise ValueError(
            f"{where}({prim.__name__}): {len(rules)} rules for argnums {nums}; give one "
            "distinct non-negative argument position per rule"
        )
    for r in rules:
        if r is not None and not callable(r):
            raise TypeError(f"{where}({prim.__name__}): a rule must be callable or None")
    return {i: (_ZERO if r is None else r) for i, r in zip(nums, rules)}


def defvjp(prim: Primitive, *makers: Callable | None, argnums: Sequence[int] | None = None) -> None:
    """Give primitive ``prim`` its reverse-mode rules, one per argument.

    Parameters
    ----------
    prim : Primitive
        Made by :func:`primitive`.
    *makers : callable or None
        ``maker(ans, *args, **kwargs)`` returns ``g -> gradient of that argument``:
        ``ans`` is the primitive's output (a tuple for several outputs), ``args`` and
        ``kwargs`` its arguments, ``g`` the output's cotangent (a tuple for several
        outputs). Written in :mod:`tapegrad.numpy` ops, it is differentiated again for
        higher orders. ``None``: a zero gradient (a constant argument).
    argnums : sequence of int, optional
        The argument position of each maker; default ``0, 1, ...``.

    Raises
    ------
    TypeError
        ``prim`` is not a primitive, or a maker is not callable.
    ValueError
        ``argnums`` does not give one position per maker.

    See Also
    --------
    defjvp : The forward-mode rules.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.extend import primitive, defvjp
    >>> @primitive
    ... def scale(x, k):
    ...     return k * x
    >>> defvjp(scale, lambda ans, x, k: lambda g: k * g, lambda ans, x, k: lambda g: tnp.sum(x * g))
    >>> tg.grad(lambda x, k: tnp.sum(scale(x, k)), argnums=(0, 1))(np.ones(3), 2.0)
    (array([2., 2., 2.]), np.float64(3.0))
    """
    rules = _rules(prim, makers, argnums, "defvjp")
    prim.vjps.update(rules)


def defjvp(prim: Primitive, *rules: Callable | None, argnums: Sequence[int] | None = None) -> None:
    """Give primitive ``prim`` its forward-mode rules, one per argument.

    Parameters
    ----------
    prim : Primitive
        Made by :func:`primitive`.
    *rules : callable or None
        ``rule(t, ans, *args, **kwargs)`` returns that argument's contribution to the
        output's tangent (a tuple for several outputs), for its tangent ``t``; the
        contributions of the arguments add up. Written in :mod:`tapegrad.numpy` ops,
        it is differentiated again for higher orders. ``None``: no contribution.
    argnums : sequence of int, optional
        The argument position of each rule; default ``0, 1, ...``.

    Raises
    ------
    TypeError
        ``prim`` is not a primitive, or a rule is not callable.
    ValueError
        ``argnums`` does not give one position per rule.

    See Also
    --------
    defvjp : The reverse-mode rules.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> from tapegrad.extend import primitive, defjvp
    >>> @primitive
    ... def cube(x):
    ...     return x**3
    >>> defjvp(cube, lambda t, ans, x: 3 * x**2 * t)
    >>> tg.jvp(cube, (np.array([1.0, 2.0]),), (np.ones(2),))
    (array([1., 8.]), array([ 3., 12.]))
    """
    found = _rules(prim, rules, argnums, "defjvp")
    prim.jvps.update(found)


# --- the node -----------------------------------------------------------------------------


def _refuse_hidden(prim: Primitive, args: tuple, kwargs: dict) -> None:
    """A tensor that requires grad where the primitive does not differentiate (inside a
    container argument, a keyword argument) would lose its gradient: refused."""
    if not is_grad_enabled():
        return
    for i, a in enumerate(args):
        if not isinstance(a, Tensor) and holds_grad_tensor(a):
            raise TypeError(
                f"primitive {prim.__name__}: argument {i} holds a tensor that requires "
                "grad inside a container; a primitive differentiates only tensors passed "
                "as arguments themselves, so its gradient would be lost. Pass it as an "
                "argument of its own"
            )
    for k, v in kwargs.items():
        if holds_grad_tensor(v):
            raise TypeError(
                f"primitive {prim.__name__}: keyword argument {k!r} holds a tensor that "
                "requires grad; keyword arguments are not differentiated, so its "
                "gradient would be lost. Pass it as a positional argument"
            )


def _rule(prim: Primitive, table: dict, i: int, mode: str) -> Any:
    rule = table.get(i)
    if rule is None:
        how = "defvjp" if mode == "reverse" else "defjvp"
        raise NotImplementedError(
            f"{mode} mode through primitive {prim.__name__}: no rule for argument {i} "
            f"(give one with tapegrad.extend.{how}, or None for a constant argument)"
        )
    return rule


def _fit(value: Any, shape: tuple, dtype: np.dtype, prim: Primitive, what: str) -> Any:
    """A rule's result as an array or tensor of ``shape`` and ``dtype``. A gradient of a
    shape the argument broadcasts to is summed down to it (as a :class:`Function`'s
    is); a tangent must have the output's shape. Anything else raises, naming the
    primitive."""
    if value is None or isinstance(value, tuple | list):
        got = "None" if value is None else f"a {type(value).__name__}"
        raise RuntimeError(
            f"primitive {prim.__name__}: a rule returned {got} for the {what}, expected "
            f"an array or tensor of shape {shape}"
        )
    # (its shape only: reading a tensor's values inside tg.compile would be a guard)
    vshape = value.shape if isinstance(value, Tensor) else np.shape(value)
    if vshape != shape:
        try:
            full = np.broadcast_shapes(vshape, shape)
        except ValueError:
            full = None
        if not (what.startswith("gradient") and full == vshape):
            raise RuntimeError(
                f"primitive {prim.__name__}: the {what} has shape {vshape}, expected {shape}"
            )
        value = sum_to(value, shape, dtype)
    if isinstance(value, Tensor):
        return value if value.dtype == dtype else astype(value, dtype)
    return np.asarray(value, dtype=dtype)


def _kept(v: Any) -> Any:
    """An argument as the rules will see it: arrays copied, so that what the forward or
    the caller does to them later changes nothing (a constant array is kept as it was
    at the call, as ``x * w`` keeps ``w``)."""
    return np.array(v, copy=True) if isinstance(v, np.ndarray) else v


def _isolated(prim: Primitive, values: Sequence[Any], kwargs: dict) -> Any:
    """``prim.fun`` on a tape of its own, so that a tensor that requires grad read from
    outside its arguments (a closure, a global) shows as foreign, and raises."""
    tape = enter(TRANSFORM, True, born0=serial())
    try:
        out = prim.fun(*values, **kwargs)
        outside = [t for _, t in tape.foreign.values() if t.requires_grad]
        if outside:
            raise RuntimeError(
                f"primitive {prim.__name__} reads a tensor that requires grad but is "
                f"not one of its arguments (shape {outside[0].shape}): its gradient "
                "would be lost. Pass it as an argument"
            )
    finally:
        leave(tape)
    return out


class _PrimitiveNode(Function):
    """One call of a primitive: its forward on NumPy values; its first-order backward
    runs the VJP rules on those values; differentiated again or in forward mode, the
    rules run on the graph's tensors, so what they compute is recorded
    (rule_walks's ``vjp_graph`` / ``jvp_graph``)."""

    @staticmethod
    def forward(ctx: Any, prim: Primitive, kwargs: dict, *values: Any) -> Any:
        ctx.prim = prim
        ctx.values = tuple(_kept(v) for v in values)
        ctx.kwargs = {k: _kept(v) for k, v in kwargs.items()}
        out = _isolated(prim, values, kwargs)
        ctx.single = not isinstance(out, tuple)
        outs = (out,) if ctx.single else out
        for o in outs:
            if isinstance(o, Tensor) and o.requires_grad:
                raise RuntimeError(
                    f"primitive {prim.__name__} returns a tensor that requires grad "
                    f"(shape {o.shape}): a primitive's outputs are new values, so its "
                    "gradient would be lost. Pass it as an argument"
                )
        # copies: a forward that writes into a buffer it reuses must not change the
        # ``ans`` the rules of an earlier call see
        ctx.out = tuple(np.array(values_of(o), copy=True) for o in outs)
        return ctx.out[0] if ctx.single else ctx.out

    @staticmethod
    def describe(ctx: Any) -> str:
        """How errors name this node: the primitive, not the class."""
        return f"primitive {ctx.prim.__name__}"

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        prim, values = ctx.prim, ctx.values
        ans = ctx.out[0] if ctx.single else ctx.out
        g = grads[0] if ctx.single else grads
        found: list[Any] = [None, None] + [None] * len(values)
        for i in range(len(values)):
            if not ctx.needs_input_grad[2 + i]:
                continue
            rule = _rule(prim, prim.vjps, i, "reverse")
            if rule is not _ZERO:
                v = np.asarray(values[i])
                value = rule(ans, *values, **ctx.kwargs)(g)
                fitted = _fit(values_of(value), v.shape, v.dtype, prim, f"gradient of argument {i}")
                found[2 + i] = np.asarray(values_of(fitted))
        return tuple(found)

    @staticmethod
    def _operands(ctx: Any, tape: Tape, k: int, graph: bool) -> tuple[list, Any, list]:
        """The arguments and ``ans`` for a rule run on node ``k``: tensors of the graph
        where the value requires grad (``graph``), the forward's values elsewhere; and
        ``(input index, argument index, slot)`` per tensor input."""
        ins, outs = tape.node_links(k)
        positions = tape.custom_entry(k)[3]  # apply(prim, kwargs, *args): argument p - 2
        args = list(ctx.values)
        inputs = [(j, p - 2, s) for j, (p, s) in enumerate(zip(positions, ins))]
        for _, i, s in inputs:
            if graph and tape.slot_rg(s):
                args[i] = slot_handle(tape, s)
        ans = [
            slot_handle(tape, s) if graph and tape.slot_rg(s) else v for s, v in zip(outs, ctx.out)
        ]
        return args, (ans[0] if ctx.single else tuple(ans)), inputs

    @staticmethod
    def vjp_graph(ctx: Any, tape: Tape, k: int, needs: list, gs: list) -> list:
        """Recorded gradients (``backward(create_graph=True)``, second order): the VJP
        rules run on the node's tensors."""
        prim = ctx.prim
        args, ans, inputs = _PrimitiveNode._operands(ctx, tape, k, True)
        found: list[Any] = [None] * len(inputs)
        if all(g is None for g in gs):
            return found
        gs = [np.zeros_like(o) if g is None else g for g, o in zip(gs, ctx.out)]
        g = gs[0] if ctx.single else tuple(gs)
        for j, i, s in inputs:
            if not needs[j]:
                continue
            rule = _rule(prim, prim.vjps, i, "reverse")
            if rule is not _ZERO:
                value = rule(ans, *args, **ctx.kwargs)(g)
                found[j] = _fit(
                    value, tape.slot_shape(s), tape.slot_dtype(s), prim, f"gradient of argument {i}"
                )
        return found

    @staticmethod
    def jvp_graph(ctx: Any, tape: Tape, k: int, tangents: list) -> list:
        """Forward mode: the JVP rules' contributions summed (recorded on the graph's
        tape when forward mode records, so the tangent is a tensor of it)."""
        prim = ctx.prim
        args, ans, inputs = _PrimitiveNode._operands(ctx, tape, k, is_grad_enabled())
        total: list[Any] | None = None
        for j, i, _ in inputs:
            if tangents[j] is None:
                continue
            rule = _rule(prim, prim.jvps, i, "forward")
            if rule is _ZERO:
                continue
            part = rule(tangents[j], ans, *args, **ctx.kwargs)
            parts = [part] if ctx.single else list(part)
            if len(parts) != len(ctx.out):
                raise RuntimeError(
                    f"primitive {prim.__name__}: a JVP rule returned {len(parts)} "
                    f"tangents, expected {len(ctx.out)} (one per output)"
                )
            total = parts if total is None else [a + b for a, b in zip(total, parts)]
        _, outs = tape.node_links(k)
        if total is None:
            return [None] * len(outs)
        return [
            _fit(t, tape.slot_shape(s), tape.slot_dtype(s), prim, f"tangent of output {n}")
            if tape.slot_rg(s)
            else None
            for n, (t, s) in enumerate(zip(total, outs))
        ]
