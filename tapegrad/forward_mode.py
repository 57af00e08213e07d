"""Forward mode and second order: ``jvp``, ``jacfwd``, ``hessian``, ``hvp`` (the
reverse-mode transforms are in :mod:`tapegrad.transforms`).

Forward mode records ``f`` once and pushes tangents through the recording
(``rule_walks.forward``, each row's tangent rule from the op table). In plain mode the
recording is on a transform tape of its own and the results are NumPy values; when a
primal or tangent requires grad, or inside another transform, on the caller's tape,
and the results are tensors in its graph (``tg.jvp(tg.grad(f), ...)`` is a
forward-over-reverse Hessian-vector product). Second order is reverse over reverse
(``rule_walks.reverse`` records the inner gradient; the compiled scheduler
differentiates it), which measured fastest here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import rule_walks
from .function import Function
from .grad_mode import enable_grad, is_grad_enabled, no_grad
from .handles import home_of
from .layout import H_NNODES
from .ops.reduce.front import sum as rsum
from .ops.shape.front import concatenate, reshape, stack
from .pytree import flatten
from .recording import as_tensor
from .tape import TRANSFORM, Tape, current_tape, enter, leave
from .tensors import FREED_MESSAGE, Tensor, serial, values_of
from .transforms import (
    IN_VMAP,
    aliases,
    argnums_of,
    as_output,
    grad,
    in_vmap,
    jacobian,
    needs_graph,
    regroup,
    stacked_output,
)

__all__ = ["hessian", "hvp", "inner_product", "jacfwd", "jvp"]


# --- forward mode -------------------------------------------------------------------------


def _custom_jvp(tape: Tape, k: int, tangents: list) -> list:
    """Forward mode through a custom ``Function``: its ``jvp(ctx, *tangents)``, or, for
    tapegrad's own (``tg.checkpoint``, a compiled step), its ``jvp_graph(ctx, tape, k,
    tangents)``, which re-runs the function; ``refusal(ctx, mode)`` names the public
    function of one that has neither."""
    cls, ctx, nargs, positions = tape.custom_entry(k)
    if ctx is None:
        raise RuntimeError(FREED_MESSAGE)
    rule = getattr(cls, "jvp_graph", None)
    if rule is not None:
        return rule(ctx, tape, k, tangents)
    refusal = getattr(cls, "refusal", None)
    if refusal is not None:
        raise NotImplementedError(refusal(ctx, "forward"))
    if cls.jvp is Function.jvp:
        raise NotImplementedError(
            f"forward mode through custom function {cls.__name__}: it defines no "
            "jvp(ctx, *tangents) staticmethod (one tangent per output, as in PyTorch)"
        )
    if is_grad_enabled():
        raise NotImplementedError(
            f"forward mode through custom function {cls.__name__} inside a derivative "
            "that is differentiated again: its jvp computes on NumPy arrays"
        )
    ins, outs = tape.node_links(k)
    args: list[Any] = [None] * nargs
    for p, s, t in zip(positions, ins, tangents):
        zero = np.zeros(tape.slot_shape(s), tape.slot_dtype(s))
        args[p] = zero if t is None else np.asarray(values_of(t), zero.dtype)
    result = cls.jvp(ctx, *args)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(outs):
        raise RuntimeError(
            f"function {cls.__name__}.jvp returned {len(result)} tangents, expected "
            f"{len(outs)} (one per output)"
        )
    checked = []
    for j, (s, t) in enumerate(zip(outs, result)):
        shape = tape.slot_shape(s)
        if t is None:
            checked.append(None)
            continue
        t = _real_tangent(values_of(t), f"function {cls.__name__}.jvp (tangent {j}) returned")
        if t.shape != shape:
            raise RuntimeError(
                f"function {cls.__name__}.jvp returned a tangent of shape {t.shape} for "
                f"output {j}, expected {shape}"
            )
        # an output that gets no gradient in reverse mode (integers, bools, one marked
        # non-differentiable: its slot does not require grad) gets no tangent either,
        # rather than the returned one truncated to integers or used as it is
        checked.append(t.astype(tape.slot_dtype(s), copy=False) if tape.slot_rg(s) else None)
    return checked


def _real_tangent(value: Any, what: str) -> np.ndarray:
    """A tangent from the user (``jvp``'s tangents, what a custom ``jvp`` returns) as an
    array of real numbers; complex values (whose imaginary part a cast would drop),
    strings and objects are a ``TypeError`` naming ``what``, as for gradients."""
    arr = np.asarray(value)
    if arr.dtype.kind == "c":
        raise TypeError(
            f"{what} complex values (dtype {arr.dtype}); the tangent of a real tensor is real"
        )
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{what} values of dtype {arr.dtype}, not real numbers")
    return arr


def _tangent(t: Any, primal: Any, where: str, i: int) -> Any:
    """Tangent ``i`` for ``primal`` (its shape and dtype): checked, cast (a tensor stays
    one)."""
    shape = tuple(np.shape(t) if not isinstance(t, Tensor) else t.shape)
    if shape != primal.shape:
        raise ValueError(
            f"{where}: tangent {i} of shape {shape} for a primal of shape {primal.shape}"
        )
    if isinstance(t, Tensor):
        return t if t.dtype == primal.dtype else t.astype(primal.dtype)
    return _real_tangent(t, f"{where}: tangent {i} holds").astype(primal.dtype)


class _Recording:
    """Where forward mode records ``f``: the caller's tape in recorded mode (the
    tangents then carry the caller's dependences), else a transform tape of its own,
    released afterwards."""

    def __init__(self, graph: bool) -> None:
        self.graph = graph
        self.tape = current_tape() if graph else enter(TRANSFORM, True, born0=serial())

    def close(self) -> None:
        if not self.graph:
            leave(self.tape)

    def check_closures(self, outs: list[Tensor], hi: int) -> None:
        """Plain mode returns NumPy values, which cannot carry a dependence on a
        tensor from outside that requires grad: refuse, as the reverse transforms do."""
        if self.graph:
            return
        outside = {slot for slot, t in self.tape.foreign.values() if t.requires_grad}
        if not outside:
            return
        live, _ = rule_walks.reach(self.tape, outside, hi)
        if any(home_of(o) is not None and live[home_of(o)[1]] for o in outs):
            raise RuntimeError(
                "the function's result depends on a tensor that requires grad but is not "
                "one of the transform's arguments (a closure, global or attribute): pass "
                "it as an argument, or .detach() it"
            )

    def push(self, tangents: dict[int, Any], hi: int, outs: list | None = None) -> dict[int, Any]:
        """Tangents pushed from ``tangents`` through nodes before ``hi`` (only through
        those the tensors ``outs`` depend on, when given)."""
        targets = None
        if outs is not None:
            homes = [home_of(o) for o in outs if isinstance(o, Tensor)]
            targets = {h[1] for h in homes if h is not None and h[0] is self.tape}
        with enable_grad() if self.graph else no_grad():
            return rule_walks.forward(self.tape, tangents, hi, _custom_jvp, targets)


def _out_tangents(outs: list, pushed: dict[int, Any], graph: bool) -> list:
    found = []
    for o in outs:
        home = home_of(o) if isinstance(o, Tensor) else None
        t = pushed.get(home[1]) if home is not None else None
        if t is None:
            t = np.zeros(np.shape(values_of(o)), np.asarray(values_of(o)).dtype)
        found.append(as_tensor(t) if graph else np.asarray(values_of(t)))
    return found


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """Evaluate ``f(*primals)`` and its derivative along ``tangents`` by forward mode.

    ``f`` is recorded once and the tangents are pushed through the recording, each op
    by its tangent rule from the op table (see ``tapegrad.derivatives``). Custom
    functions (:class:`Function`) need a ``jvp`` staticmethod.

    Parameters
    ----------
    f : callable
        Function of the primals (arrays, tensors or pytrees of them).
    primals : tuple or list
        The point: one entry per positional argument of ``f``, each holding floats.
    tangents : tuple or list
        The direction: the same length and structure as ``primals``, one tangent per
        primal leaf, of its shape, of real numbers (cast to its dtype).

    Returns
    -------
    tuple
        ``(out, tangent_out)``: NumPy values in the structure ``f`` returns; tensors in
        the caller's graph when a primal or tangent requires grad (forward-over-reverse:
        ``tg.jvp(tg.grad(f), (x,), (v,))`` is a Hessian-vector product).

    Raises
    ------
    ValueError
        ``primals`` and ``tangents`` differ in length or structure, or a tangent's
        shape is not its primal's.
    TypeError
        A primal holds integers, bools or non-numbers; a tangent holds complex values
        or non-numbers (checked before ``f`` runs); a custom :class:`Function`'s ``jvp``
        returns them.
    RuntimeError
        With plain values: ``f``'s result depends on a tensor that requires grad but
        is not one of the primals (a closure, global or attribute).
    NotImplementedError
        ``f`` calls a custom :class:`Function` that defines no ``jvp``, or an op
        without a tangent rule (an ODE solve of :mod:`tapegrad.integrate`).

    See Also
    --------
    jacfwd : The whole Jacobian by forward mode.
    vjp : Reverse mode.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> out, t = tg.jvp(lambda x: x ** 2, (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),))
    >>> out, t
    (array([1., 4.]), array([2., 4.]))

    Forward over reverse: a Hessian-vector product.

    >>> f = lambda x: tnp.sum(x ** 3)
    >>> g, hv = tg.jvp(tg.grad(f), (np.array([1.0, 2.0]),), (np.array([1.0, 0.0]),))
    >>> g, hv
    (array([ 3., 12.]), array([6., 0.]))
    """
    if IN_VMAP and (batch := in_vmap()) is not None:
        batch.refuse("tg.jvp")
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    rec = _Recording(needs_graph(primals, tangents))
    try:
        args, groups, made = aliases(primals, tuple(range(len(primals))), "jvp", rec.graph)
        seeds: dict[int, Any] = {}  # checked before f runs
        t_leaves = []
        for (views, _, _), t in zip(groups, tangents):
            leaves, _ = flatten(t)
            if len(leaves) != len(views):
                raise ValueError("jvp: each tangent must have its primal's structure")
            t_leaves += leaves
        for i, (m, tv) in enumerate(zip(made, t_leaves)):
            seeds[m.slot] = _tangent(tv, m, "jvp", i)
        out = f(*args)
        outs, rebuild = flatten(out)
        hi = rec.tape.h[H_NNODES]
        rec.check_closures(outs, hi)
        pushed = rec.push(seeds, hi, outs)
        found = _out_tangents(outs, pushed, rec.graph)
        if rec.graph:
            return out, rebuild(found)
        values = [np.asarray(values_of(o)) for o in outs]
        return rebuild(values), rebuild(found)
    finally:
        rec.close()


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Make a function that returns the Jacobian of ``f`` by forward mode.

    ``f`` is recorded once and one tangent is pushed through per input element
    (cheaper than :func:`jacobian` when the arguments have fewer elements than the
    output). Same layout as ``jacobian``: ``out.shape + x.shape``; a tuple of
    Jacobians for a tuple ``argnums``, and one Jacobian per output, in the output's
    structure, for a tuple or dict of outputs.

    Parameters
    ----------
    f : callable
        The function to differentiate, of arrays, tensors or pytrees of them.
    argnums : int or tuple of int, optional
        Which positional argument(s) to differentiate (default 0).

    Returns
    -------
    callable
        ``J(*args, **kwargs)``: the Jacobian(s) as NumPy arrays, or tensors in the
        caller's graph when an argument requires grad.

    Raises
    ------
    TypeError
        When ``J`` is called: a differentiated argument holds integers, bools or
        non-numbers, or a custom :class:`Function`'s ``jvp`` returns complex values or
        non-numbers.
    ValueError
        When ``J`` is called: an entry of ``argnums`` is out of range.
    RuntimeError
        When ``J`` is called with plain values: ``f``'s result depends on a tensor
        that requires grad but is not one of the arguments.
    NotImplementedError
        ``f`` calls a custom :class:`Function` that defines no ``jvp``, or an op
        without a tangent rule.

    See Also
    --------
    jacobian : The same Jacobian by reverse mode.
    jvp : One Jacobian-vector product.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> f = lambda x: tnp.stack([x[0] * x[1], x[0] + x[1], x[0]])
    >>> tg.jacfwd(f)(np.array([2.0, 3.0]))
    array([[3., 2.],
           [1., 1.],
           [1., 0.]])
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if IN_VMAP and (batch := in_vmap()) is not None:
            batch.refuse("tg.jacfwd")
        nums, single = argnums_of(argnums, len(args), "jacfwd")
        rec = _Recording(needs_graph(args, kwargs))
        try:
            args2, groups, made = aliases(args, nums, "jacfwd", rec.graph)
            raw = f(*args2, **kwargs)
            leaves, rebuild = flatten(raw)
            # one array (a tensor, or a list of same-shaped parts, stacked), or several
            # outputs (a tuple, a dict...) with a Jacobian each, in their structure, as
            # jacobian (reverse mode) gives them
            several = not stacked_output(raw, leaves)
            outs = [as_output(o) for o in leaves] if several else [as_output(raw)]
            hi = rec.tape.h[H_NNODES]
            rec.check_closures(outs, hi)
            jacs: list[list] = [[] for _ in outs]
            for m in made:
                columns: list[list] = [[] for _ in outs]
                for idx in np.ndindex(m.shape):
                    e = np.zeros(m.shape, m.dtype)
                    e[idx] = 1
                    pushed = rec.push({m.slot: e}, hi, outs)
                    for col, t in zip(columns, _out_tangents(outs, pushed, rec.graph)):
                        col.append(t)
                for j, (out, col) in enumerate(zip(outs, columns)):
                    jacs[j].append(_assemble(out, m, col, rec.graph))
            per_out = [regroup(j, groups) for j in jacs]
            per_out = [p[0] if single else tuple(p) for p in per_out]
            return rebuild(per_out) if several else per_out[0]
        finally:
            rec.close()

    return wrapper


def _assemble(out: Any, m: Any, columns: list, graph: bool) -> Any:
    """One Jacobian, ``out.shape + m.shape``, from the tangents of ``out`` pushed from
    each element of argument leaf ``m``."""
    shape = out.shape + m.shape
    if not columns:
        jac = np.zeros(shape, np.result_type(out.dtype, m.dtype))
        return as_tensor(jac) if graph else jac
    if graph:
        return reshape(stack(columns, axis=-1), shape)
    return np.stack(columns, axis=-1).reshape(shape)


# --- second order ---------------------------------------------------------------------------


def hessian(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """Make a function that returns the Hessian of scalar-valued ``f``.

    The Hessian is the Jacobian (reverse mode) of the gradient, which is recorded once
    (reverse over reverse) and run backward once per element. For one array argument
    the result has shape ``x.shape + x.shape``. For a pytree argument, or a tuple
    ``argnums``, blocks are nested as in ``jax.hessian``: ``H[i][j]`` has shape
    ``x_i.shape + x_j.shape``.

    Parameters
    ----------
    f : callable
        Function returning a scalar (a one-element tensor or a number).
    argnums : int or tuple of int, optional
        Which positional argument(s) to differentiate (default 0).

    Returns
    -------
    callable
        ``H(*args, **kwargs)``: the Hessian as a NumPy array (nested tuples of blocks
        for a tuple ``argnums``), or tensors in the caller's graph when an argument
        requires grad.

    Raises
    ------
    TypeError
        When ``H`` is called: ``f`` returns more than one element, or a
        differentiated argument holds integers, bools or non-numbers.
    ValueError
        When ``H`` is called: an entry of ``argnums`` is out of range.
    NotImplementedError
        ``f`` goes through a node whose backward is not recorded: a custom
        :class:`Function` with a NumPy or compiled backward, or an ODE solve of
        :mod:`tapegrad.integrate`.

    See Also
    --------
    hvp : Hessian-vector products without forming the Hessian.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> f = lambda x: tnp.sum(x ** 3)
    >>> tg.hessian(f)(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])

    Blocks for two arguments, ``H[i][j]`` for arguments ``i`` and ``j``:

    >>> H = tg.hessian(lambda x, y: tnp.sum(x * y ** 2), argnums=(0, 1))
    >>> H(np.array([1.0]), np.array([2.0]))
    ((array([[0.]]), array([[4.]])), (array([[4.]]), array([[2.]])))
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if IN_VMAP and (batch := in_vmap()) is not None:
            batch.refuse("tg.hessian")
        nums, single = argnums_of(argnums, len(args), "hessian")
        shapes: list[tuple[int, ...]] = []

        def flat_gradient(*a: Any, **kw: Any) -> Tensor:
            g = grad(f, nums[0] if single else nums)(*a, **kw)
            leaves = flatten(g)[0]
            shapes[:] = [tuple(np.shape(values_of(x))) for x in leaves]
            return concatenate([reshape(as_tensor(x), -1) for x in leaves])

        jac = jacobian(flat_gradient, nums[0] if single else nums)(*args, **kwargs)
        groups = [jac] if single else list(jac)
        cols = []  # the Jacobian's blocks by column (argument leaf); their rebuilds
        rebuilds = []
        for group in groups:
            leaves, rebuild = flatten(group)
            rebuilds.append((rebuild, len(leaves)))
            cols.extend(leaves)
        offsets = np.cumsum([0, *[int(np.prod(s)) for s in shapes]])
        blocks = [
            [
                reshape(c[offsets[i] : offsets[i + 1]], shapes[i] + tuple(np.shape(c))[1:])
                if isinstance(c, Tensor)
                else c[offsets[i] : offsets[i + 1]].reshape(shapes[i] + c.shape[1:])
                for c in cols
            ]
            for i in range(len(shapes))
        ]

        def by_columns(row: list) -> Any:
            out, j = [], 0
            for rebuild, n in rebuilds:
                out.append(rebuild(row[j : j + n]))
                j += n
            return out[0] if single else tuple(out)

        rows = [by_columns(b) for b in blocks]
        out, i = [], 0
        for rebuild, n in rebuilds:
            out.append(rebuild(rows[i : i + n]))
            i += n
        return out[0] if single else tuple(out)

    return wrapper


def inner_product(grads: Sequence[Any], vs: Sequence[Any], where: str) -> Tensor:
    """``sum_i <grads_i, vs_i>`` over matching pytrees, each ``v`` leaf of its gradient's
    shape exactly (a broadcastable one would silently give another product)."""
    total = None
    for g, d in zip(grads, vs, strict=True):
        g_leaves, d_leaves = flatten(g)[0], flatten(d)[0]
        if len(g_leaves) != len(d_leaves):
            raise ValueError(f"{where}: v must have the structure of the primals")
        for gl, dl in zip(g_leaves, d_leaves):
            gl = as_tensor(gl)
            shape = dl.shape if isinstance(dl, Tensor) else np.shape(dl)  # (no value read)
            if tuple(shape) != gl.shape:
                raise ValueError(
                    f"{where}: v has a part of shape {tuple(shape)} for an argument of "
                    f"shape {gl.shape}"
                )
            term = rsum(gl * dl)
            total = term if total is None else total + term
    return total


def hvp(f: Callable, primals: Any, v: Any) -> Any:
    """Compute the Hessian-vector product ``H(primals) v`` of scalar ``f``, without forming H.

    ``primals`` is one argument or a tuple of arguments (each may be a pytree), ``v``
    the same structure; the result has that structure too.

    Parameters
    ----------
    f : callable
        Function returning a scalar (a one-element tensor or a number).
    primals : array_like, Tensor, pytree, or tuple of them
        The point: one argument of ``f``, or a tuple of all its arguments.
    v : array_like, Tensor, pytree, or tuple of them
        The vector, with the structure of ``primals`` and each part of its
        argument's shape exactly.

    Returns
    -------
    ndarray, pytree, or tuple of them
        ``H v`` in the structure of ``primals``: NumPy values, or tensors in the
        caller's graph when an argument requires grad.

    Raises
    ------
    ValueError
        ``v`` has not the structure of ``primals``, or a part of it not the shape of
        its argument (a broadcastable one would silently give another product).
    TypeError
        ``f`` returns more than one element, or a primal holds integers, bools or
        non-numbers.
    NotImplementedError
        ``f`` goes through a node whose backward is not recorded (a custom
        :class:`Function` with a NumPy or compiled backward, an ODE solve).

    See Also
    --------
    hessian : The whole Hessian.
    jvp : ``tg.jvp(tg.grad(f), (x,), (v,))`` is forward-over-reverse ``H v``.

    Notes
    -----
    Computed as the gradient of ``<grad f(x), v>`` (reverse over reverse: the inner
    gradient is recorded, then one compiled backward pass), about four times the cost
    of one gradient.

    Examples
    --------
    >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
    >>> f = lambda x: tnp.sum(x ** 3)
    >>> tg.hvp(f, np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    array([6., 0.])

    A tuple of arguments takes a tuple of vectors:

    >>> g = lambda a, b: tnp.sum(a * b ** 2)
    >>> tg.hvp(g, (np.array([1.0]), np.array([2.0])), (np.array([1.0]), np.array([0.0])))
    (array([0.]), array([4.]))
    """
    if IN_VMAP and (batch := in_vmap()) is not None:
        batch.refuse("tg.hvp")
    single = not isinstance(primals, tuple)
    ps = (primals,) if single else primals
    vs = (v,) if single else tuple(v)
    if len(vs) != len(ps):
        raise ValueError(f"hvp: {len(ps)} primals but {len(vs)} vectors")
    nums = tuple(range(len(ps)))

    def inner(*args: Any) -> Tensor:
        return inner_product(grad(f, nums)(*args), vs, "hvp")

    result = grad(inner, nums)(*ps)
    return result[0] if single else result
