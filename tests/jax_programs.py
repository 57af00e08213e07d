"""Random programs over ``tapegrad.numpy``'s op families, run by tapegrad and by JAX.

A program is data: input values, a list of steps (an op of the table below, its
operands among the inputs and earlier steps, its parameters) and a scalar loss over some
of the steps. It becomes Python source, ``def f(m, sp, x0, x1): ...``, in which ``m`` is
the array module and ``sp`` the special-function module, so tapegrad
(``tapegrad.numpy``, ``tapegrad.special``) and JAX (``jax.numpy``,
``jax.scipy.special``) run the same code. NumPy and SciPy run it too, while a program is
generated: each step is kept only if its operands are inside the op's domain at both
input points (no ties for ``max``, no zero under ``abs``, well-conditioned matrices),
so every derivative compared is finite and unique.

:func:`check` compares every mode of tapegrad (gradient, forward mode, Hessian, HVP,
gradient of a gradient, ``jacfwd`` of a gradient, reverse over forward, and the same
under ``tg.compile``, replayed at a second point) with JAX; :func:`shrink` reduces a
failing program to a minimal one and :func:`Program.source` prints it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.special

Shape = tuple[int, ...]

RTOL = 1e-9  # relative agreement required in every mode (see ``close``)
FLOOR = 1e-3  # ... relative to at least this: where JAX has exact zeros, |error| <= 1e-12

# input shapes: data, and parameters of size 1 that broadcast against data
DATA_SHAPES: list[Shape] = [(2,), (3,), (2, 3), (3, 2), (2, 2), (1, 3), (2, 1), (3, 3), (2, 1, 3)]
PARAM_SHAPES: list[Shape] = [(), (), (1,), (1, 1)]
MAX_SIZE = 24  # elements in any value
MAX_ABS = 1e3  # values larger than this are out of the domain (derivatives blow up)


# --- the op table -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One row: ``src(names, params, shapes)`` is the expression's source;
    ``params(rng, shapes)`` picks parameters for operands of these shapes (None: the op
    does not apply); ``ok(values, params)`` says whether NumPy operand values are in
    the domain; ``kink``: the op decides on values (max, abs...)."""

    name: str
    family: str
    arity: int
    src: Callable[[list[str], dict, list[Shape]], str]
    params: Callable[[np.random.Generator, list[Shape]], dict | None]
    ok: Callable[[list[np.ndarray], dict], bool] | None = None
    kink: bool = False
    weight: float = 1.0


OPS: dict[str, Op] = {}


def _always(rng: np.random.Generator, shapes: list[Shape]) -> dict:
    return {}


def _broadcastable(rng: np.random.Generator, shapes: list[Shape]) -> dict | None:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return None
    return {}


def op(name, family, arity, src, params=None, ok=None, kink=False, weight=1.0):
    if isinstance(src, str):
        template = src
        src = lambda a, p, s: template.format(*a, **p)  # noqa: E731
    if params is None:
        params = _broadcastable if arity > 1 else _always
    OPS[name] = Op(name, family, arity, src, params, ok, kink, weight)


def lit(a: Any) -> str:
    """Python source for a constant array."""
    a = np.asarray(a)
    return f"np.array({a.tolist()!r})"


def const(seed: int, shape: Shape, low: float = 0.3, high: float = 2.0) -> np.ndarray:
    """A constant of the program: signed values of magnitude in [low, high], one decimal
    (short to print, away from 0)."""
    rng = np.random.default_rng(seed)
    mag = np.round(rng.uniform(low, high, shape), 1)
    return mag * rng.choice([-1.0, 1.0], shape)


def mask(seed: int, shape: Shape) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.random(shape) < 0.5


def _far(x: np.ndarray, points: Sequence[float], gap: float = 0.05) -> bool:
    return all(np.all(np.abs(x - p) > gap) for p in points)


def _gap(x: np.ndarray, axis: Any, top: int) -> float:
    """The smallest gap, over reduced groups, between the ``top`` largest values (and
    the ``top`` smallest): the room a max/min/sort has before a tie."""
    x = np.asarray(x)
    if axis is None:
        g = x.reshape(1, -1)
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(a % x.ndim for a in axes)
        rest = [a for a in range(x.ndim) if a not in axes]
        g = np.transpose(x, rest + list(axes)).reshape(-1, math.prod(x.shape[a] for a in axes))
    if g.shape[1] < 2 or g.size == 0:
        return np.inf
    s = np.sort(g, axis=1)
    d = np.diff(s, axis=1)
    if top == 0:
        return float(d.min())
    return float(min(d[:, -top:].min(), d[:, :top].min()))


# elementwise, one operand --------------------------------------------------------------------

for _name, _src, _ok in [
    ("exp", "m.exp({0})", lambda v, p: v[0].max() < 3),
    ("log_sq", "m.log(1 + {0} * {0})", None),
    ("log_exp", "m.log(m.exp({0}) + 0.5)", lambda v, p: v[0].max() < 5),
    ("log_pos", "m.log({0} * {0} + 0.5)", None),
    ("sin", "m.sin({0})", None),
    ("cos", "m.cos({0})", None),
    ("tan", "m.tan(m.tanh({0}))", None),
    ("tanh", "m.tanh({0})", None),
    ("arctan", "m.arctan({0})", None),
    ("arcsin", "m.arcsin(0.9 * m.tanh({0}))", None),
    ("arccos", "m.arccos(0.9 * m.tanh({0}))", None),
    ("arcsinh", "m.arcsinh({0})", None),
    ("arccosh", "m.arccosh(1.5 + {0} * {0})", None),
    ("arctanh", "m.arctanh(0.9 * m.tanh({0}))", None),
    ("sinh", "m.sinh({0})", lambda v, p: np.abs(v[0]).max() < 4),
    ("cosh", "m.cosh({0})", lambda v, p: np.abs(v[0]).max() < 4),
    ("sqrt", "m.sqrt({0} * {0} + 0.25)", None),
    ("sqrt_abs", "m.sqrt(m.abs({0}))", lambda v, p: _far(v[0], [0], 0.1)),
    ("log1p", "m.log1p({0} * {0})", None),
    ("expm1", "m.expm1({0})", lambda v, p: v[0].max() < 3),
    ("exp2", "m.exp2({0})", lambda v, p: v[0].max() < 3),
    ("log2", "m.log2(2 + m.sin({0}))", None),
    ("log10", "m.log10(1 + {0} * {0})", None),
    ("abs", "m.abs({0})", lambda v, p: _far(v[0], [0])),
    ("square", "m.square({0})", None),
    ("reciprocal", "m.reciprocal(1 + {0} * {0})", None),
    ("one_over", "1 / {0}", lambda v, p: _far(v[0], [0], 0.3)),
    ("negative", "-{0}", None),
    ("cube", "{0} ** 3", None),
    ("pow_half", "(1 + {0} * {0}) ** -0.5", None),
    ("pow_abs", "m.abs({0}) ** 1.5", lambda v, p: _far(v[0], [0], 0.1)),
    ("power_int", "m.power({0}, 2)", None),
    ("cbrt", "m.cbrt({0})", lambda v, p: _far(v[0], [0], 0.1)),
    ("sinc", "m.sinc({0})", lambda v, p: _far(v[0], [0], 0.1)),
    ("clip", "m.clip({0}, -0.5, 0.7)", lambda v, p: _far(v[0], [-0.5, 0.7])),
    ("deg2rad", "m.deg2rad({0})", None),
    ("scale", "2.5 * {0}", None),
]:
    op(_name, "unary", 1, _src, ok=_ok, kink=_name in ("abs", "sqrt_abs", "pow_abs", "clip"))


# elementwise, two operands that broadcast ------------------------------------------------------

for _name, _src, _ok, _kink in [
    ("add", "{0} + {1}", None, False),
    ("subtract", "m.subtract({0}, {1})", None, False),
    ("multiply", "{0} * {1}", None, False),
    ("mul_fn", "m.multiply({0}, {1})", None, False),
    ("divide_safe", "{0} / (1 + {1} * {1})", None, False),
    ("divide", "{0} / {1}", lambda v, p: _far(v[1], [0], 0.3), False),
    ("true_divide", "m.true_divide({0}, 2 + m.cos({1}))", None, False),
    ("pow", "(1 + {0} * {0}) ** {1}", None, False),
    ("power", "m.power(m.exp({0}), {1})", lambda v, p: np.abs(v[0] * v[1]).max() < 4, False),
    ("maximum", "m.maximum({0}, {1})", lambda v, p: _far(v[0] - v[1], [0]), True),
    ("minimum", "m.minimum({0}, {1})", lambda v, p: _far(v[0] - v[1], [0]), True),
    ("fmax", "m.fmax({0}, {1})", lambda v, p: _far(v[0] - v[1], [0]), True),
    ("fmin", "m.fmin({0}, {1})", lambda v, p: _far(v[0] - v[1], [0]), True),
    # JAX's hypot (max * sqrt(1 + (min / max)**2)) has a wrong second derivative where
    # |x| == |y| (0 for hypot(x, 0.5) at 0.5; it is 0.707): away from that
    ("hypot", "m.hypot({0}, {1})", lambda v, p: _far(np.abs(v[0]) - np.abs(v[1]), [0]), False),
    ("logaddexp", "m.logaddexp({0}, {1})", None, False),
    ("logaddexp2", "m.logaddexp2({0}, {1})", None, False),
    ("arctan2", "m.arctan2({0}, {1})", lambda v, p: (v[0] ** 2 + v[1] ** 2).min() > 0.01, False),
]:
    op(_name, "binary", 2, _src, ok=_ok, kink=_kink)


def _where_params(rng, shapes):
    if not _broadcasts(*shapes):
        return None
    # the mask: of the result's shape, or of its last axis only (broadcast itself)
    return {"seed": int(rng.integers(1 << 30)), "full": bool(rng.random() < 0.7)}


def _where_src(a, p, s):
    out = np.broadcast_shapes(*s)
    shape = out if p["full"] else out[len(out) - 1 :] if out else ()
    return f"m.where({lit(mask(p['seed'], shape))}, {a[0]}, {a[1]})"


op("where", "binary", 2, _where_src, _where_params)


# one operand and a constant that broadcasts against it (often to a larger shape) ------------


def _const_shape(rng: np.random.Generator, shape: Shape) -> Shape:
    """A shape that broadcasts with ``shape``, usually to a larger result."""
    options = [s for s in [*DATA_SHAPES, (), (1,)] if _broadcasts(s, shape)]
    bigger = [s for s in options if np.broadcast_shapes(s, shape) != shape]
    if bigger and rng.random() < 0.75:
        return bigger[rng.integers(len(bigger))]
    return options[rng.integers(len(options))]


def _broadcasts(a: Shape, b: Shape) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _cparams(rng, shapes):
    return {"seed": int(rng.integers(1 << 30)), "shape": _const_shape(rng, shapes[0])}


def _cop(template: str) -> Callable:
    def src(a, p, s):
        shape = p["shape"] if _broadcasts(p["shape"], s[0]) else s[0]
        return template.format(a[0], C=lit(const(p["seed"], shape)))

    return src


for _name, _tpl, _ok, _kink in [
    ("add_c", "{0} + {C}", None, False),
    ("c_sub", "{C} - {0}", None, False),
    ("mul_c", "{0} * {C}", None, False),
    ("c_mul", "{C} * {0}", None, False),
    ("div_c", "{0} / {C}", None, False),
    ("c_div", "{C} / (1 + {0} * {0})", None, False),
    ("maximum_c", "m.maximum({0}, {C})", "c", True),
    ("hypot_c", "m.hypot({0}, {C})", "c_abs", False),
    ("logaddexp_c", "m.logaddexp({C}, {0})", None, False),
]:
    if _ok in ("c", "c_abs"):
        # the constant's values (magnitudes), at the shape the source will use, away from
        # the operand's
        def _ok(v, p, f=np.abs if _ok == "c_abs" else np.asarray):
            shape = p["shape"] if _broadcasts(p["shape"], v[0].shape) else v[0].shape
            return _far(f(v[0]) - f(const(p["seed"], shape)), [0])

    op(_name, "bconst", 1, _cop(_tpl), _cparams, ok=_ok, kink=_kink)


# reductions --------------------------------------------------------------------------------


def _axis(rng: np.random.Generator, ndim: int, tuples: bool = True, none: bool = True) -> Any:
    choices: list[Any] = [None] if none else []
    choices += list(range(-ndim, ndim))
    if tuples and ndim >= 2:
        choices += [(0, 1), (-1, 0), (0, -1)] if ndim == 2 else [(0, 2), (1, 2), (0, 1, 2)]
    if not choices:
        return "skip"
    return choices[rng.integers(len(choices))]


def _red_params(rng, shapes, tuples=True, none=True, keepdims=True):
    if len(shapes) > 1 and not _broadcasts(*shapes):
        return None
    ndim = len(np.broadcast_shapes(*shapes))
    axis = _axis(rng, ndim, tuples, none)
    if isinstance(axis, str):
        return None
    return {"axis": axis, "keepdims": bool(keepdims and rng.random() < 0.35)}


def _ax(p: dict) -> str:
    s = ""
    if p.get("axis") is not None:
        s += f", axis={p['axis']!r}"
    if p.get("keepdims"):
        s += ", keepdims=True"
    if p.get("ddof"):
        s += f", ddof={p['ddof']}"
    return s


def _red(fn: str) -> Callable:
    return lambda a, p, s: f"{fn}({a[0]}{_ax(p)})"


def _no_ties(top):
    return lambda v, p: _gap(v[0], p["axis"], top) > 0.05


def _var_params(rng, shapes):
    p = _red_params(rng, shapes)
    if p is not None and rng.random() < 0.3:
        p["ddof"] = 1
    return p


def _group(shape: Shape, axis: Any) -> int:
    if axis is None:
        return math.prod(shape)
    axes = (axis,) if isinstance(axis, int) else axis
    return math.prod(shape[a] for a in axes)


def _std_ok(v, p):
    x = v[0]
    n = _group(x.shape, p["axis"])
    return n >= 2 and np.min(np.var(x, axis=p["axis"])) > 0.01


def _var_ok(v, p):
    return _group(v[0].shape, p["axis"]) > p.get("ddof", 0)


for _name, _fn, _ok, _kink in [
    ("sum", "m.sum", None, False),
    ("mean", "m.mean", None, False),
    ("nansum", "m.nansum", None, False),
    ("nanmean", "m.nanmean", None, False),
    ("prod", "m.prod", None, False),
    ("max", "m.max", _no_ties(1), True),
    ("min", "m.min", _no_ties(1), True),
    ("amax", "m.amax", _no_ties(1), True),
    ("amin", "m.amin", _no_ties(1), True),
    ("ptp", "m.ptp", _no_ties(1), True),
    ("logsumexp", "sp.logsumexp", None, False),
]:
    op(_name, "reduce", 1, _red(_fn), _red_params, ok=_ok, kink=_kink, weight=1.5)

op("var", "reduce", 1, _red("m.var"), _var_params, ok=_var_ok, weight=1.5)
op("std", "reduce", 1, _red("m.std"), _var_params, ok=_std_ok, weight=1.5)
op(
    "median",
    "reduce",
    1,
    _red("m.median"),
    # a 0-d median with keepdims is 0-d in NumPy and tapegrad, (1,) in JAX: 1-d and up
    lambda rng, s: _red_params(rng, s, tuples=False) if s[0] else None,
    ok=_no_ties(0),
    kink=True,
    weight=0.5,
)


def _cum_params(rng, shapes):
    ndim = len(shapes[0])
    axis = _axis(rng, ndim, tuples=False, none=True)
    return {"axis": axis}


op("cumsum", "reduce", 1, _red("m.cumsum"), _cum_params)
op("cumprod", "reduce", 1, _red("m.cumprod"), _cum_params)


def _norm_ok(v, p):
    x = v[0]
    if p["axis"] is None:
        return float(np.sum(x * x)) > 0.01
    return np.min(np.sum(x * x, axis=p["axis"])) > 0.01


op(
    "norm",
    "reduce",
    1,
    _red("m.linalg.norm"),
    lambda rng, s: (
        None
        if len(s[0]) > 2
        else _red_params(rng, s, tuples=len(s[0]) == 2, keepdims=True)
        if s[0]
        else {"axis": None}
    ),
    ok=_norm_ok,
)
op(
    "sort",
    "reduce",
    1,
    lambda a, p, s: f"m.sort({a[0]}, axis={p['axis']})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False, False)} if s[0] else None,
    ok=_no_ties(0),
    kink=True,
    weight=0.5,
)
op(
    "log_softmax",
    "reduce",
    1,
    lambda a, p, s: f"sp.log_softmax({a[0]}, axis={p['axis']})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False, False)} if s[0] else None,
)
op(
    "softmax",
    "reduce",
    1,
    lambda a, p, s: f"sp.softmax({a[0]}, axis={p['axis']})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False, False)} if s[0] else None,
)


# reductions of a broadcasting op, in one expression ------------------------------------------


def _bred_src(fn: str, inner: str) -> Callable:
    return lambda a, p, s: f"{fn}({inner.format(*a)}{_ax(p)})"


for _name, _fn, _inner in [
    ("sum_add", "m.sum", "{0} + {1}"),
    ("sum_mul", "m.sum", "{0} * {1}"),
    ("mean_sub", "m.mean", "{0} - {1}"),
    ("prod_add", "m.prod", "{0} + {1}"),
    ("var_mul", "m.var", "{0} * {1}"),
    ("lse_add", "sp.logsumexp", "{0} + {1}"),
]:
    op(_name, "bred", 2, _bred_src(_fn, _inner), _red_params, weight=1.5)


def _bred_c_params(rng, shapes):
    shape = _const_shape(rng, shapes[0])
    p = _red_params(rng, [np.broadcast_shapes(shape, shapes[0])])
    if p is not None:
        p.update(seed=int(rng.integers(1 << 30)), shape=shape)
    return p


def _bred_c_src(fn: str, inner: str) -> Callable:
    def src(a, p, s):
        shape = p["shape"] if _broadcasts(p["shape"], s[0]) else s[0]
        return f"{fn}({inner.format(a[0], C=lit(const(p['seed'], shape)))}{_ax(p)})"

    return src


for _name, _fn, _inner in [
    ("sum_add_c", "m.sum", "{0} + {C}"),
    ("sum_mul_c", "m.sum", "{0} * {C}"),
    ("mean_add_c", "m.mean", "{C} + {0}"),
    ("sum_sin_c", "m.sum", "m.sin({0} * {C})"),
]:
    op(_name, "bred", 1, _bred_c_src(_fn, _inner), _bred_c_params, weight=1.5)


# shape ops ---------------------------------------------------------------------------------


def _factorizations(n: int) -> list[Shape]:
    out: list[Shape] = [(n,), (1, n), (n, 1)]
    for a in range(2, n):
        if n % a == 0:
            out.append((a, n // a))
    if n == 1:
        out.append(())
    return out


def _reshape_params(rng, s):
    opts = _factorizations(math.prod(s[0]))
    return {"shape": opts[rng.integers(len(opts))], "method": bool(rng.random() < 0.5)}


def _reshape_src(a, p, s):
    shape = p["shape"] if math.prod(p["shape"]) == math.prod(s[0]) else (-1,)
    if p["method"]:
        return f"{a[0]}.reshape({shape!r})"
    return f"m.reshape({a[0]}, {shape!r})"


op("reshape", "shape", 1, _reshape_src, _reshape_params)
op("ravel", "shape", 1, "m.ravel({0})")
op("transpose", "shape", 1, "m.transpose({0})", lambda rng, s: {} if len(s[0]) >= 2 else None)
op("dot_T", "shape", 1, "{0}.T", lambda rng, s: {} if len(s[0]) >= 2 else None)
op(
    "transpose_perm",
    "shape",
    1,
    "m.transpose({0}, {perm})",
    lambda rng, s: {"perm": tuple(int(i) for i in rng.permutation(len(s[0])))} if s[0] else None,
)
op("swapaxes", "shape", 1, "m.swapaxes({0}, 0, -1)", lambda rng, s: {} if len(s[0]) >= 2 else None)
op("moveaxis", "shape", 1, "m.moveaxis({0}, 0, -1)", lambda rng, s: {} if len(s[0]) >= 2 else None)
op(
    "expand_dims",
    "shape",
    1,
    "m.expand_dims({0}, {axis})",
    lambda rng, s: {"axis": int(rng.integers(-len(s[0]) - 1, len(s[0]) + 1))},
)
op("squeeze", "shape", 1, "m.squeeze({0})", lambda rng, s: {} if 1 in s[0] else None)
op(
    "squeeze_axis",
    "shape",
    1,
    "m.squeeze({0}, axis={axis})",
    lambda rng, s: (
        {"axis": s[0].index(1) - len(s[0]) * int(rng.random() < 0.5)} if 1 in s[0] else None
    ),
)


def _bcast_to_params(rng, s):
    opts = [t for t in DATA_SHAPES if _broadcasts(t, s[0]) and len(t) >= len(s[0])]
    opts = [np.broadcast_shapes(t, s[0]) for t in opts]
    opts += [(2, *s[0])]
    return {"shape": tuple(opts[rng.integers(len(opts))])}


op("broadcast_to", "shape", 1, "m.broadcast_to({0}, {shape!r})", _bcast_to_params, weight=1.5)


def _cat_params(rng, s):
    a, b = s
    if len(a) != len(b) or not a:
        return None
    axes = [i for i in range(len(a)) if a[:i] + a[i + 1 :] == b[:i] + b[i + 1 :]]
    if not axes:
        return None
    return {"axis": int(axes[rng.integers(len(axes))]) - len(a) * int(rng.random() < 0.3)}


op("concatenate", "shape", 2, "m.concatenate([{0}, {1}], axis={axis})", _cat_params)
op(
    "concat_self",
    "shape",
    1,
    "m.concatenate([{0}, m.sin({0})], axis={axis})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False, False)} if s[0] else None,
)
op(
    "stack",
    "shape",
    2,
    "m.stack([{0}, {1}], axis={axis})",
    lambda rng, s: (
        {"axis": int(rng.integers(-len(s[0]) - 1, len(s[0]) + 1))} if s[0] == s[1] else None
    ),
)


def _index_params(rng, s):
    shape = s[0]
    if not shape:
        return {"key": ["None", "...", "None, None"][rng.integers(3)]}
    parts = []
    advanced = False
    for d in shape:
        r = rng.random()
        if r < 0.3:
            parts.append(":")
        elif r < 0.45:
            parts.append(str(int(rng.integers(-d, d))))
        elif r < 0.6 and d > 1:
            lo = int(rng.integers(0, d - 1))
            parts.append(f"{lo}:{int(rng.integers(lo + 1, d + 1))}")
        elif r < 0.7:
            parts.append("::-1")
        elif r < 0.85 and not advanced:
            advanced = True
            idx = rng.integers(0, d, int(rng.integers(1, 4)))
            parts.append(lit(idx))
        elif r < 0.92:
            parts.append("None, :")
        else:
            parts.append(":")
    if rng.random() < 0.3 and parts[0] == ":":
        parts[0] = "..."
    return {"key": ", ".join(parts)}


op("getitem", "shape", 1, "{0}[{key}]", _index_params, weight=2.0)
op(
    "flip",
    "shape",
    1,
    lambda a, p, s: f"m.flip({a[0]}{_ax(p)})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False)} if s[0] else None,
)
op(
    "roll",
    "shape",
    1,
    "m.roll({0}, 1, axis={axis})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False, False)} if s[0] else None,
)
op("tile", "shape", 1, "m.tile({0}, 2)")
op(
    "repeat",
    "shape",
    1,
    "m.repeat({0}, 2, axis={axis})",
    lambda rng, s: {"axis": _axis(rng, len(s[0]), False, False)} if s[0] else None,
)


def _take_params(rng, s):
    if not s[0]:
        return None
    axis = _axis(rng, len(s[0]), False, False)
    d = s[0][axis]
    return {"axis": axis, "idx": lit(rng.integers(0, d, int(rng.integers(1, 4))))}


op("take", "shape", 1, "m.take({0}, {idx}, axis={axis})", _take_params)
op("pad", "shape", 1, "m.pad({0}, 1)", lambda rng, s: {} if 1 <= len(s[0]) <= 2 else None)
op("tril", "shape", 1, "m.tril({0})", lambda rng, s: {} if len(s[0]) == 2 else None)
op("triu", "shape", 1, "m.triu({0}, 1)", lambda rng, s: {} if len(s[0]) == 2 else None)
op("diagonal", "shape", 1, "m.diagonal({0})", lambda rng, s: {} if len(s[0]) == 2 else None)
op("diag", "shape", 1, "m.diag({0})", lambda rng, s: {} if len(s[0]) == 1 else None)
op("atleast_2d", "shape", 1, "m.atleast_2d({0})")


# linear algebra ------------------------------------------------------------------------------


def _mm_params(rng, s):
    a, b = s
    if not a or not b:
        return None
    k = b[-2] if len(b) >= 2 else b[0]
    if a[-1] != k or not _broadcasts(a[:-2], b[:-2]):
        return None
    return {}


op("matmul", "linalg", 2, "{0} @ {1}", _mm_params, weight=1.5)
op("matmul_fn", "linalg", 2, "m.matmul({0}, {1})", _mm_params)


def _mmc_params(rng, s):
    if not s[0]:
        return None
    return {
        "seed": int(rng.integers(1 << 30)),
        "k": int(rng.integers(1, 4)),
        "left": rng.random() < 0.4,
    }


def _mmc_src(a, p, s):
    shape = s[0]
    if p["left"]:
        c = const(p["seed"], (p["k"], shape[-2] if len(shape) >= 2 else shape[0]))
        return f"{lit(c)} @ {a[0]}"
    return f"{a[0]} @ {lit(const(p['seed'], (shape[-1], p['k'])))}"


op("matmul_c", "linalg", 1, _mmc_src, _mmc_params, weight=1.5)


def _dot_params(rng, s):
    a, b = s
    if not 1 <= len(a) <= 2 or not 1 <= len(b) <= 2:
        return None
    k = b[-2] if len(b) >= 2 else b[0]
    return {} if a[-1] == k else None


op("dot", "linalg", 2, "m.dot({0}, {1})", _dot_params)
op(
    "tensordot",
    "linalg",
    2,
    "m.tensordot({0}, {1}, axes={axes})",
    lambda rng, s: (
        {"axes": 1}
        if s[0] and s[1] and s[0][-1] == s[1][0]
        else {"axes": 0}
        if math.prod(s[0]) * math.prod(s[1]) <= MAX_SIZE
        else None
    ),
)
op("outer", "linalg", 2, "m.outer({0}, {1})")
op(
    "inner",
    "linalg",
    2,
    "m.inner({0}, {1})",
    lambda rng, s: {} if s[0] and s[1] and s[0][-1] == s[1][-1] else None,
)
op("trace", "linalg", 1, "m.trace({0})", lambda rng, s: {} if len(s[0]) == 2 else None)

EINSUM_SPECS = [
    "ij->ji",
    "ij->i",
    "ij->j",
    "ii->",
    "ii->i",
    "ij,ij->",
    "ij,ij->i",
    "ij,jk->ik",
    "ij,kj->ik",
    "i,i->",
    "i,j->ij",
    "ij,j->i",
    "i,ij->j",
    "ijk->kj",
    "ijk,ik->j",
    "...i,...i->...",
    "...ij,...j->...i",
]


def _einsum_params(rng, s):
    order = rng.permutation(len(EINSUM_SPECS))
    for k in order:
        spec = EINSUM_SPECS[k]
        if spec.split("->")[0].count(",") + 1 != len(s):
            continue
        try:
            np.einsum(spec, *[np.zeros(x) for x in s])
        except ValueError:
            continue
        return {"spec": spec}
    return None


op("einsum1", "linalg", 1, "m.einsum({spec!r}, {0})", _einsum_params)
op("einsum2", "linalg", 2, "m.einsum({spec!r}, {0}, {1})", _einsum_params, weight=1.5)


def _matrix(name: str, shape: Shape, seed: int) -> tuple[str, int]:
    """Source of a matrix ``G`` (batched for a 3-d value) made from value ``name``, and
    its number of rows."""
    if len(shape) == 0:
        return f"{name} * {lit(const(seed, (2, 2)))}", 2
    if len(shape) == 1:
        return f"m.outer({name}, {lit(const(seed, (2,)))})", shape[0]
    return name, shape[-2]


def _square(kind: str):
    """Ops on a square matrix built from one value: ``spd`` is ``G G^T + I`` (symmetric
    positive definite: cholesky, eigh), ``general`` is ``G C + 2 I``."""

    def src(a, p, s, fn=None):
        g, n = _matrix(a[0], s[0], p["seed"])
        if kind == "spd":
            mat = f"{g} @ m.swapaxes({g}, -1, -2) + np.eye({n})"
        else:
            q = s[0][-1] if len(s[0]) >= 2 else 2
            mat = f"{g} @ {lit(const(p['seed'] + 1, (q, n), 0.2, 1.0))} + 2 * np.eye({n})"
        return p["fn"].format(A=mat, G=g)

    return src


def _sq_params(fn: str):
    def params(rng, s):
        if len(s[0]) > 3:
            return None
        return {"seed": int(rng.integers(1 << 30)), "fn": fn}

    return params


def _matrix_values(v: np.ndarray, p: dict, kind: str) -> np.ndarray:
    a = v
    seed = p["seed"]
    if a.ndim == 0:
        g = a * const(seed, (2, 2))
    elif a.ndim == 1:
        g = np.outer(a, const(seed, (2,)))
    else:
        g = a
    n = g.shape[-2]
    if kind == "spd":
        return g @ np.swapaxes(g, -1, -2) + np.eye(n)
    q = a.shape[-1] if a.ndim >= 2 else 2
    return g @ const(seed + 1, (q, n), 0.2, 1.0) + 2 * np.eye(n)


def _well_conditioned(kind: str, eig_gap: bool = False):
    def ok(v, p):
        mat = _matrix_values(v[0], p, kind)
        if np.max(np.linalg.cond(mat)) > 50:
            return False
        if eig_gap:
            w = np.linalg.eigvalsh(mat)
            return w.shape[-1] < 2 or np.min(np.diff(w, axis=-1)) > 0.05
        return True

    return ok


for _name, _kind, _fn, _gap_needed in [
    ("solve", "general", "m.linalg.solve({A}, m.sin({G}))", False),
    ("inv", "general", "m.linalg.inv({A})", False),
    ("det", "general", "m.linalg.det({A})", False),
    ("slogdet", "general", "m.linalg.slogdet({A})[1]", False),
    ("matrix_power", "general", "m.linalg.matrix_power({A}, 3)", False),
    ("solve_spd", "spd", "m.linalg.solve({A}, {G})", False),
    ("logdet_spd", "spd", "m.linalg.slogdet({A})[1]", False),
    ("cholesky", "spd", "m.linalg.cholesky({A})", False),
    ("eigh_w", "spd", "m.linalg.eigh({A})[0]", True),
    ("eigh_v", "spd", "m.linalg.eigh({A})[1] ** 2", True),
    ("eigvalsh", "spd", "m.linalg.eigvalsh({A})", True),
]:
    op(
        _name,
        "linalg",
        1,
        _square(_kind),
        _sq_params(_fn),
        ok=_well_conditioned(_kind, _gap_needed),
        weight=0.8,
    )


def _gmat_ok(v, p):
    a = v[0]
    if a.ndim != 2:
        return False
    sv = np.linalg.svd(a, compute_uv=False)
    if sv.min() < 0.1:
        return False
    return sv.size < 2 or np.min(-np.diff(sv)) > 0.05


op(
    "norm_fro",
    "linalg",
    1,
    "m.linalg.norm({0}, 'fro')",
    lambda rng, s: {} if len(s[0]) == 2 else None,
    ok=lambda v, p: float(np.sum(v[0] ** 2)) > 0.01,
)
op(
    "norm_2",
    "linalg",
    1,
    "m.linalg.norm({0}, 2)",
    lambda rng, s: {} if len(s[0]) == 2 else None,
    ok=_gmat_ok,
    kink=True,  # the largest singular value: a pick by value
    weight=0.5,
)
op(
    "svdvals",
    "linalg",
    1,
    "m.linalg.svdvals({0})",
    lambda rng, s: {} if len(s[0]) == 2 else None,
    ok=_gmat_ok,
    weight=0.5,
)
op(
    "pinv",
    "linalg",
    1,
    "m.linalg.pinv({0})",
    lambda rng, s: {} if len(s[0]) == 2 else None,
    ok=_gmat_ok,
    weight=0.5,
)


# special functions ---------------------------------------------------------------------------

for _name, _src, _ok in [
    ("gammaln", "sp.gammaln(1 + {0} * {0})", None),
    ("gammaln_exp", "sp.gammaln(m.exp({0}) + 0.5)", lambda v, p: v[0].max() < 3),
    ("digamma", "sp.digamma(1 + {0} * {0})", None),
    ("gamma", "sp.gamma(1 + {0} * {0})", lambda v, p: np.abs(v[0]).max() < 2),
    ("erf", "sp.erf({0})", None),
    ("erfc", "sp.erfc({0})", None),
    # where tanh saturates (|x| > 5) both lose digits, JAX more: 2.5e-9 at -9
    ("erfinv", "sp.erfinv(0.9 * m.tanh({0}))", lambda v, p: np.abs(v[0]).max() < 5),
    ("erfcx", "sp.erfcx({0})", None),
    ("expit", "sp.expit({0})", None),
    ("logit", "sp.logit(0.5 + 0.4 * m.tanh({0}))", lambda v, p: np.abs(v[0]).max() < 5),
    ("ndtr", "sp.ndtr({0})", None),
    # JAX's log_ndtr loses digits above 5 (its derivative at 7.5 is 1.4e-3 off)
    ("log_ndtr", "sp.log_ndtr({0})", lambda v, p: v[0].max() < 5),
    ("ndtri", "sp.ndtri(0.5 + 0.4 * m.tanh({0}))", lambda v, p: np.abs(v[0]).max() < 5),
    # JAX's i0 has derivative 1 at 0 (it is i1(0) = 0): away from 0
    ("i0", "sp.i0({0})", lambda v, p: _far(v[0], [0], 0.1)),
    ("i1", "sp.i1({0})", lambda v, p: _far(v[0], [0], 0.1)),
    ("i0e", "sp.i0e({0})", lambda v, p: _far(v[0], [0], 0.1)),
    ("i1e", "sp.i1e({0})", lambda v, p: _far(v[0], [0], 0.1)),
    ("multigammaln", "sp.multigammaln(2 + {0} * {0}, 2)", None),
    ("polygamma", "sp.polygamma(1, 1 + {0} * {0})", None),
]:
    op(_name, "special", 1, _src, ok=_ok, kink=_name in ("i0e", "i1e"), weight=0.7)


def _beta_ok(v, p):
    """JAX's betaln and beta lose 1e-7 relative (values and derivatives) once an
    argument reaches 8, and have wrong second derivatives where a == b (betaln(a, 2)'s
    at a = 2 is 0.039; it is 0.361): arguments 1 + x^2 up to 6, apart."""
    a, b = 1 + v[0] ** 2, 1 + v[1] ** 2
    return max(a.max(), b.max()) <= 6 and _far(a - b, [0])


for _name, _src, _ok in [
    ("xlogy", "sp.xlogy({0}, 1 + {1} * {1})", None),
    ("xlog1py", "sp.xlog1py({0}, {1} * {1})", None),
    ("betaln", "sp.betaln(1 + {0} * {0}, 1 + {1} * {1})", _beta_ok),
    ("beta", "sp.beta(1 + {0} * {0}, 1 + {1} * {1})", _beta_ok),
]:
    op(_name, "special", 2, _src, ok=_ok, weight=0.7)


FAMILY_WEIGHTS = {
    "unary": 2.0,
    "binary": 2.5,
    "bconst": 2.0,
    "reduce": 2.5,
    "bred": 2.0,
    "shape": 2.0,
    "linalg": 2.0,
    "special": 1.0,
}
KINKS = {name for name, o in OPS.items() if o.kink}

LOSSES = {
    "sum_sq": "m.sum({0}) ** 2",
    "sumsq": "m.sum({0} ** 2)",
    "tanh": "m.sum(m.tanh({0}))",
    "log": "m.log(1 + m.sum({0} * {0}))",
    "sin": "m.sum(m.sin({0}) * {0})",
    "mean_cube": "m.mean({0}) ** 3",
    "gauss": "m.sum(m.exp(-{0} * {0}))",
}


# --- programs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple[int, ...]  # values: the inputs 0 .. n-1, then the steps n, n+1, ...
    params: dict = field(hash=False, compare=False)

    def replace_args(self, args: tuple[int, ...]) -> Step:
        return Step(self.op, args, self.params)


@dataclass(frozen=True, eq=False)
class Program:
    inputs: tuple[np.ndarray, ...]
    steps: tuple[Step, ...]
    losses: tuple[tuple[int, str], ...]  # (value, loss name): the loss is their sum
    seed: int = -1

    @property
    def n(self) -> int:
        return len(self.inputs)

    def name(self, k: int) -> str:
        return f"x{k}" if k < self.n else f"v{k - self.n}"

    def lines(self) -> list[str]:
        """The steps' source lines (``v3 = ...``), shapes taken from a NumPy run."""
        return self._trace(self.inputs)[0]

    def _trace(self, xs: Sequence[np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
        env = {f"x{k}": np.asarray(x, np.float64) for k, x in enumerate(xs)}
        values = list(env.values())
        lines = []
        for k, step in enumerate(self.steps):
            o = OPS[step.op]
            operands = [values[j] for j in step.args]
            expr = o.src(
                [self.name(j) for j in step.args], step.params, [v.shape for v in operands]
            )
            value = np_eval(expr, env)
            name = f"v{k}"
            env[name] = value
            values.append(value)
            lines.append(f"{name} = {expr}")
        return lines, values

    def body_source(self) -> str:
        args = ", ".join(f"x{k}" for k in range(self.n))
        lines = self.lines()
        terms = [LOSSES[loss].format(self.name(v)) for v, loss in self.losses]
        body = "".join(f"    {line}\n" for line in lines)
        out = self.name(self.losses[0][0])
        return (
            f"def f(m, sp, {args}):\n{body}    return {' + '.join(terms)}\n\n\n"
            f"def body(m, sp, {args}):\n{body}    return {out}\n"
        )

    def case(self) -> Case:
        src = self.body_source()
        env: dict[str, Any] = {"np": np}
        exec(compile(src, f"<program {self.seed}>", "exec"), env)
        return Case(env["f"], list(self.inputs), body=env["body"], source=src, kinks=self.kinks)

    @property
    def kinks(self) -> bool:
        return any(s.op in KINKS for s in self.steps)

    def source(self, failure: Failure | None = None) -> str:
        """The program as two pasteable snippets: a regression entry (``m``, ``sp``),
        and a stand-alone tapegrad reproducer (``tnp``, ``tsp``) that ends with the call
        of the failing mode, JAX's result and tapegrad's in a comment."""
        xs = ", ".join(lit(x) for x in self.inputs)
        src, body = self.body_source().split("\n\n\n")
        out = f"# regression entry\n{src}\nINPUTS = [{xs}]\n\n# stand-alone\n"
        out += (
            "import numpy as np\nimport tapegrad as tg\nimport tapegrad.numpy as tnp\n"
            "import tapegrad.special as tsp\n\n"
        )
        out += _to_tapegrad(src) + "\n"
        if failure is not None and failure.mode == "jvp":
            out += "\n" + _to_tapegrad(body) + "\n"
        args = tuple(f"x{k}" for k in range(self.n))
        out += "".join(f"{a} = {lit(x)}\n" for a, x in zip(args, self.inputs))
        if failure is None:
            return out
        if failure.mode in MODE_CALLS:
            out += f"ts = ({''.join(lit(t) + ', ' for t in tangents(self.inputs))})\n"
            nums = repr(tuple(range(self.n)))
            call = MODE_CALLS[failure.mode]
            if isinstance(call, tuple):  # a compiled step: capture, then replay
                fn, method = call
                out += f"step = tg.compile({fn.format(nums=nums)}, {nums})\n"
                out += f"print(step.{method.format(args=', '.join(args))})\n"
                out += "".join(
                    f"{a}_ = {lit(x)}\n" for a, x in zip(args, second_point(self.inputs))
                )
                args = tuple(a + "_" for a in args)
                out += f"print(step.{method.format(args=', '.join(args))})\n"
            else:
                out += f"print({call.format(args=', '.join(args), nums=nums)})\n"
        msg = failure.message.replace("\n", " ")
        return out + f"# {failure.what}: {re.sub(' +', ' ', msg)}\n"


def _to_tapegrad(src: str) -> str:
    src = re.sub(r"\bm\.", "tnp.", src)
    return re.sub(r"\bsp\.", "tsp.", src).replace("(m, sp, ", "(")


# each mode's call, as the stand-alone reproducer spells it (``f`` the loss, ``body`` its
# array-valued part, ``ts`` the tangents; a compiled step's function and the call that
# captures it at the first point, then replays it at the second, ``x0_``...)
_GG = "lambda *a: sum(tnp.sum(g**2) for g in tg.grad(f, {nums})(*a))"
_D = "lambda *a: tg.jvp(f, a, ts)[1]"
MODE_CALLS: dict[str, Any] = {
    "value_and_grad": "tg.value_and_grad(f, {nums})({args})",
    "grad": "tg.grad(f, {nums})({args})",
    "jvp": "tg.jvp(body, ({args},), ts), tg.jvp(f, ({args},), ts)",
    "hessian": "tg.hessian(f, {nums})({args})",
    "hvp": "tg.hvp(f, ({args},), ts)",
    "grad_grad": "tg.value_and_grad(" + _GG + ", {nums})({args})",
    "line": "tg.grad(tg.grad(lambda s: f(*[x + s * t for x, t in zip(({args},), ts)])))(0.0)",
    "jacfwd_grad": "[tg.jacfwd(tg.grad(f, i), {nums})({args}) for i in {nums}]",
    "grad_jvp": "tg.grad(" + _D + ", {nums})({args})",
    "jvp_grad": "tg.jvp(tg.grad(f, {nums}), ({args},), ts)[1]",
    "compile": ("f", "value_and_grad({args})"),
    "compile_hvp": ("f", "hvp({args}, ts)"),
    "compile_grad_grad": (_GG, "value_and_grad({args})"),
    "compile_grad_jvp": (_D, "value_and_grad({args})"),
}


class _SciPySpecial:
    """``scipy.special`` with JAX's (and NumPy's) shape rules: SciPy's ``logsumexp``
    with ``keepdims`` makes a 0-d array 1-d."""

    def __getattr__(self, name: str) -> Any:
        return getattr(scipy.special, name)

    @staticmethod
    def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> np.ndarray:
        top = np.max(x, axis=axis, keepdims=True)
        out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
        return out if keepdims else np.squeeze(out, axis=axis)


_NUMPY_GLOBALS = {"m": np, "sp": _SciPySpecial(), "np": np}


def reductions_on_broadcasts(p: Program) -> int:
    """Steps that reduce a broadcasting op's result: a fused one (``m.sum(x0 + x1)``)
    or a reduction whose operand is a binary step that broadcast one of its operands."""
    values = p._trace(p.inputs)[1]
    hits = 0
    for st in p.steps:
        family = OPS[st.op].family
        j = st.args[0]
        if family == "bred":
            hits += 1
        elif family == "reduce" and j >= p.n:
            made = p.steps[j - p.n]
            grew = any(values[a].shape != values[j].shape for a in made.args)
            hits += OPS[made.op].family in ("binary", "bconst") and grew
    return hits


def np_eval(expr: str, env: dict) -> np.ndarray:
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's "degrees of freedom <= 0" and such
        out = eval(expr, _NUMPY_GLOBALS, env)
    return np.asarray(out, np.float64)


def second_point(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Where a compiled step is replayed: near the first point, so still in the domain."""
    return [
        np.asarray(x + 0.03 * np.sin(1.3 * np.arange(np.size(x)) + k + 0.5).reshape(np.shape(x)))
        for k, x in enumerate(xs)
    ]


def tangents(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [
        np.asarray(np.cos(1.7 * np.arange(np.size(x)) + 0.9 * k + 0.3).reshape(np.shape(x)))
        for k, x in enumerate(xs)
    ]


def valid(p: Program) -> bool:
    """Every step in its op's domain at both points, values finite and moderate."""
    for xs in (list(p.inputs), second_point(p.inputs)):
        try:
            values = p._trace(xs)[1]
        except (ValueError, IndexError, TypeError, ArithmeticError, Warning):
            return False  # outside the op's domain or its shapes (LinAlgError: a ValueError)
        for k, step in enumerate(p.steps):
            v = values[p.n + k]
            if v.size > MAX_SIZE or v.ndim > 4 or not np.all(np.isfinite(v)):
                return False
            if np.abs(v).max(initial=0) > MAX_ABS:
                return False
            o = OPS[step.op]
            if o.ok is not None:
                with np.errstate(all="ignore"):
                    if not o.ok([values[j] for j in step.args], step.params):
                        return False
        for v, _ in p.losses:
            if values[v].size == 0:
                return False
    return True


def _weighted(rng: np.random.Generator, items: list, weights: list[float]) -> Any:
    w = np.asarray(weights, float)
    return items[rng.choice(len(items), p=w / w.sum())]


def generate(seed: int, max_steps: int = 6, max_inputs: int = 3) -> Program:
    """A random valid program, the same for the same arguments. Program ``seed`` uses op
    ``seed % len(OPS)`` (new inputs are drawn until it fits), so that a run over
    ``len(OPS)`` consecutive seeds covers the whole table."""
    for attempt in range(20):
        program, placed = _generate(
            np.random.default_rng([seed, attempt]), seed, max_steps, max_inputs
        )
        if placed:
            break
    return program


def _generate(
    rng: np.random.Generator, seed: int, max_steps: int, max_inputs: int
) -> tuple[Program, bool]:
    n = int(rng.integers(1, max_inputs + 1))
    shapes: list[Shape] = []
    for k in range(n):
        pool = PARAM_SHAPES if (k > 0 or n == 1) and rng.random() < 0.5 else DATA_SHAPES
        shapes.append(pool[rng.integers(len(pool))])
    # two decimals, and exact zeros now and then (where formulas select on x == 0)
    inputs = tuple(
        np.where(rng.random(s) < 0.05, 0.0, np.round(rng.normal(0, 0.8, s), 2)) for s in shapes
    )
    by_family: dict[str, list[Op]] = {}
    for o in OPS.values():
        by_family.setdefault(o.family, []).append(o)
    families = list(FAMILY_WEIGHTS)
    program = Program(inputs, (), ((0, "sum_sq"),), seed)
    _, values = program._trace(inputs)
    nsteps = int(rng.integers(1, max_steps + 1))
    # every op gets its turn: program ``seed`` tries op ``seed % len(OPS)`` first
    focus: Op | None = list(OPS.values())[seed % len(OPS)]
    broadcast_last = False
    for attempt in range(60 * nsteps):
        if len(program.steps) >= nsteps and focus is None:
            break
        if len(program.steps) >= nsteps + 2:
            break
        used = {j for s in program.steps for j in s.args}
        if focus is not None and (attempt < 30 or rng.random() < 0.3):
            o = focus
        elif broadcast_last and rng.random() < 0.6:
            o = _weighted(rng, by_family["reduce"], [x.weight for x in by_family["reduce"]])
        else:
            family = _weighted(rng, families, [FAMILY_WEIGHTS[f] for f in families])
            ops = by_family[family]
            o = _weighted(rng, ops, [x.weight for x in ops])
        nvals = len(values)
        args: list[int] = []
        for i in range(o.arity):
            pool = list(range(nvals))
            if i == 1:  # a second operand the op accepts (a shape that broadcasts...)
                fits = np.random.default_rng(0)
                first = values[args[0]].shape
                pool = [j for j in pool if o.params(fits, [first, values[j].shape]) is not None]
                if not pool:
                    break
            unused = [k for k in pool if k < n and k not in used and k not in args]
            r = rng.random()
            if i == 0 and r < 0.5:
                args.append(nvals - 1)
            elif unused and r < 0.8:
                args.append(unused[rng.integers(len(unused))])
            else:
                args.append(pool[rng.integers(len(pool))])
        if len(args) < o.arity:
            continue
        shapes_now = [values[j].shape for j in args]
        params = o.params(rng, shapes_now)
        if params is None:
            continue
        step = Step(o.name, tuple(args), params)
        candidate = dataclasses.replace(program, steps=(*program.steps, step))
        if not valid(candidate):
            continue
        program = candidate
        _, values = program._trace(inputs)
        if o is focus:
            focus = None
        out_shape = values[-1].shape
        broadcast_last = o.family in ("binary", "bconst") and any(
            s != out_shape for s in shapes_now
        )
    # the loss: a term on the last value, and one on each value nothing else reads (so
    # that every step and every input counts)
    last = len(values) - 1
    used = {j for s in program.steps for j in s.args} | {last}
    losses = [
        (k, list(LOSSES)[rng.integers(len(LOSSES))])
        for k in range(last + 1)
        if k == last or k not in used
    ]
    losses.insert(0, losses.pop())
    return dataclasses.replace(program, losses=tuple(losses)), focus is None


# --- running both ------------------------------------------------------------------------------


@dataclass
class Case:
    """A scalar function ``f(m, sp, *xs)`` at ``inputs``; ``body`` (same arguments,
    array-valued) is what forward mode pushes a tangent through (``f`` if None)."""

    f: Callable
    inputs: list
    body: Callable | None = None
    source: str = ""
    kinks: bool = False


@dataclass
class Failure:
    mode: str  # an entry of MODES
    what: str  # the result compared (``compile_grad@1``: a gradient replayed at point 1)
    message: str
    got: Any = None
    want: Any = None

    def __str__(self) -> str:
        return f"{self.what}: {self.message}"


class InvalidProgram(Exception):
    """JAX's own reference is not finite: the program left the domain."""


class OracleError(Exception):
    """JAX could not run the program: a bug of the generator or of this file."""


def _leaves(tree: Any) -> list[np.ndarray]:
    if isinstance(tree, tuple | list):
        return [x for t in tree for x in _leaves(t)]
    return [np.asarray(tree)]


def close(what: str, got: Any, want: Any) -> Failure | None:
    """``got`` agrees with ``want`` (same structure and shapes) to ``RTOL`` relative:
    each element's error is measured against the largest element of the reference in
    this mode (its own size cannot be the measure: an entry that cancels to 1e-17 has
    rounding errors of its terms' size), and against ``FLOOR`` at least."""
    g, w = _leaves(got), _leaves(want)
    if len(g) != len(w):
        return Failure("", what, f"{len(g)} results, JAX has {len(w)}", got, want)
    scale = max((float(np.max(np.abs(x), initial=0)) for x in w), default=0.0)
    floor = max(scale, FLOOR)
    for i, (a, b) in enumerate(zip(g, w)):
        if a.shape != b.shape:
            return Failure("", what, f"result {i}: shape {a.shape}, JAX {b.shape}", got, want)
        if not np.all(np.isfinite(a)):
            return Failure("", what, f"result {i}: not finite: {a!r} (JAX {b!r})", got, want)
        err = np.abs(a - b) / floor
        if err.size and err.max() > RTOL:
            return Failure(
                "",
                what,
                f"result {i}: relative error {err.max():.3g}; tapegrad {a!r}, JAX {b!r}",
                got,
                want,
            )
    return None


def _hvp_from(H: Any, ts: list[np.ndarray]) -> list[np.ndarray]:
    n = len(ts)
    return [
        sum(np.tensordot(np.asarray(H[i][j]), ts[j], axes=ts[j].ndim) for j in range(n))
        for i in range(n)
    ]


class Reference:
    """JAX's results at both points, from one ``jax.jit``-compiled function (value,
    gradient, ``jax.hessian``, and ``jax.jvp`` of the body) run at each point: compiling
    once costs less than JAX's op-by-op execution, which compiles each primitive for
    each new shape. Second-order references that are contractions of the Hessian (HVP,
    gradient of ``sum(grad**2)``, ``t^T H t``) are computed from its blocks in NumPy."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.n = len(case.inputs)
        self.nums = tuple(range(self.n))
        self.points = [list(case.inputs), second_point(case.inputs)]
        self.ts = tangents(case.inputs)
        self._results: list | None = None

    def _compute(self) -> list:
        import jax
        import jax.numpy as jnp
        import jax.scipy.special as jsp

        fn, body, nums = self.case.f, self.case.body or self.case.f, self.nums

        def f(*xs):
            return fn(jnp, jsp, *xs)

        def everything(xs, ts):
            return (
                f(*xs),
                jax.grad(f, nums)(*xs),
                jax.hessian(f, nums)(*xs),
                jax.jvp(lambda *a: body(jnp, jsp, *a), tuple(xs), tuple(ts)),
            )

        try:
            compiled = jax.jit(everything).lower(self.points[0], self.ts).compile()
            results = [
                jax.tree_util.tree_map(np.asarray, compiled(p, self.ts)) for p in self.points
            ]
        except Exception as e:
            raise OracleError(f"JAX raised {type(e).__name__}: {e}") from e
        for r in results:
            for leaf in _leaves(r):
                if not np.all(np.isfinite(leaf)):
                    raise InvalidProgram("JAX's derivatives are not finite")
        return results

    def _get(self, k: int, i: int) -> Any:
        if self._results is None:
            self._results = self._compute()
        return self._results[k][i]

    def value(self, k: int = 0) -> np.ndarray:
        return self._get(k, 0)

    def grad(self, k: int = 0) -> tuple:
        return self._get(k, 1)

    def hessian(self, k: int = 0) -> tuple:
        return self._get(k, 2)

    def jvp_body(self) -> tuple:
        return self._get(0, 3)

    def directional(self, k: int = 0) -> np.ndarray:
        return sum(np.vdot(g, t) for g, t in zip(self.grad(k), self.ts))

    def hvp(self, k: int = 0) -> list[np.ndarray]:
        return _hvp_from(self.hessian(k), self.ts)

    def grad_grad(self, k: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
        g, H = self.grad(k), self.hessian(k)
        value = sum(np.sum(np.asarray(x) ** 2) for x in g)
        gg = [
            sum(2 * np.tensordot(g[i], np.asarray(H[i][j]), axes=g[i].ndim) for i in range(self.n))
            for j in range(self.n)
        ]
        return value, gg


MODES = [
    "value_and_grad",
    "grad",
    "jvp",
    "hessian",
    "hvp",
    "grad_grad",
    "line",
    "jacfwd_grad",
    "grad_jvp",
    "jvp_grad",
    "compile",
    "compile_hvp",
    "compile_grad_grad",
    "compile_grad_jvp",
]
FIRST_ORDER = ["value_and_grad", "grad", "jvp", "compile"]
SECOND_ORDER = [m for m in MODES if m not in FIRST_ORDER]
COMPILED_SECOND_ORDER = ["compile_hvp", "compile_grad_grad", "compile_grad_jvp"]


def _sum_sq(tnp: Any, gs: Sequence[Any]) -> Any:
    total = None
    for g in gs:
        term = tnp.sum(g**2)
        total = term if total is None else total + term
    return total


def run_mode(mode: str, case: Case, ref: Reference) -> list[Failure]:
    """Compare one mode of tapegrad with JAX; a failure per disagreeing result."""
    import tapegrad as tg
    import tapegrad.numpy as tnp
    import tapegrad.special as tsp

    fn = case.f
    body = case.body or case.f
    xs, _xs2 = ref.points
    ts = ref.ts
    n, nums = ref.n, ref.nums

    def F(*a):
        return fn(tnp, tsp, *a)

    def B(*a):
        return body(tnp, tsp, *a)

    def GG(*a):
        return _sum_sq(tnp, tg.grad(F, nums)(*a))

    def D(*a):
        return tg.jvp(F, a, ts)[1]

    out: list[Failure | None] = []
    if mode == "value_and_grad":
        v, g = tg.value_and_grad(F, nums)(*xs)
        out += [close("value", v, ref.value()), close("value_and_grad", g, ref.grad())]
    elif mode == "grad":
        out.append(close(mode, tg.grad(F, nums)(*xs), ref.grad()))
    elif mode == "jvp":
        o, t = tg.jvp(B, tuple(xs), tuple(ts))
        want_o, want_t = ref.jvp_body()
        out += [close("jvp_primal", o, want_o), close("jvp", t, want_t)]
        out.append(close("jvp_loss", tg.jvp(F, tuple(xs), tuple(ts))[1], ref.directional()))
    elif mode == "hessian":
        out.append(close(mode, tg.hessian(F, nums)(*xs), ref.hessian()))
    elif mode == "hvp":
        out.append(close(mode, tg.hvp(F, tuple(xs), tuple(ts)), ref.hvp()))
    elif mode == "grad_grad":
        value, want = ref.grad_grad()
        v, g = tg.value_and_grad(GG, nums)(*xs)
        out += [close("grad_grad_value", v, value), close(mode, g, want)]
    elif mode == "line":

        def phi(s):
            return F(*[x + s * t for x, t in zip(xs, ts)])

        want = sum(np.vdot(h, t) for h, t in zip(ref.hvp(), ts))
        out.append(close(mode, tg.grad(tg.grad(phi))(0.0), want))
    elif mode == "jacfwd_grad":
        got = tuple(tg.jacfwd(tg.grad(F, i), nums)(*xs) for i in range(n))
        out.append(close(mode, got, ref.hessian()))
    elif mode == "grad_jvp":
        out.append(close(mode, tg.grad(D, nums)(*xs), ref.hvp()))
    elif mode == "jvp_grad":
        got = tg.jvp(tg.grad(F, nums), tuple(xs), tuple(ts))[1]
        out.append(close(mode, got, ref.hvp()))
    elif mode == "compile":
        step = tg.compile(F, nums)
        for k, p in enumerate(ref.points):  # capture, then replay at the second point
            v, g = step.value_and_grad(*p)
            out += [close(f"compile_value@{k}", v, ref.value(k))]
            out += [close(f"compile_grad@{k}", g, ref.grad(k))]
            out += [close(f"compile_call@{k}", step(*p), ref.value(k))]
    elif mode == "compile_hvp":
        step = tg.compile(F, nums)
        for k, p in enumerate(ref.points):
            got = step.hvp(*p, tuple(ts))
            out.append(close(f"compile_hvp@{k}", got, ref.hvp(k)))
    elif mode == "compile_grad_grad":
        step = tg.compile(GG, nums)
        for k, p in enumerate(ref.points):
            value, want = ref.grad_grad(k)
            v, g = step.value_and_grad(*p)
            out += [close(f"compile_grad_grad_value@{k}", v, value)]
            out += [close(f"compile_grad_grad@{k}", g, want)]
    elif mode == "compile_grad_jvp":
        step = tg.compile(D, nums)
        for k, p in enumerate(ref.points):
            v, g = step.value_and_grad(*p)
            out += [close(f"compile_jvp_value@{k}", v, ref.directional(k))]
            out += [close(f"compile_grad_jvp@{k}", g, ref.hvp(k))]
    else:
        raise ValueError(mode)
    return [dataclasses.replace(f, mode=mode) for f in out if f is not None]


def check(case: Case, modes: Sequence[str] = MODES, ref: Reference | None = None) -> list[Failure]:
    """Every mode's failures (a mode whose tapegrad call raises fails with the error)."""
    ref = ref or Reference(case)
    failures = []
    for mode in modes:
        try:
            failures += run_mode(mode, case, ref)
        except (InvalidProgram, OracleError):
            raise
        except NotImplementedError as e:
            # documented (docs/guide/refusals.md): a compiled step does not
            # capture a recorded derivative that picks elements by value (max, min...)
            if not (case.kinks and mode in COMPILED_SECOND_ORDER):
                failures.append(Failure(mode, mode, f"raised NotImplementedError: {e}"))
        except Exception as e:
            failures.append(Failure(mode, mode, f"raised {type(e).__name__}: {e}"))
    return failures


# --- shrinking ---------------------------------------------------------------------------------


def _remap(p: Program, k: int, into: int) -> Program | None:
    """``p`` without value ``k`` (a step), its uses reading value ``into`` instead."""
    if k < p.n:
        return None
    s = k - p.n

    def m(j: int) -> int:
        j = into if j == k else j
        return j - 1 if j > k else j

    steps = [st.replace_args(tuple(m(j) for j in st.args)) for st in p.steps]
    del steps[s]
    losses = []
    for v, loss in p.losses:
        mv = m(v)
        if all(mv != w for w, _ in losses):
            losses.append((mv, loss))
    return dataclasses.replace(p, steps=tuple(steps), losses=tuple(losses))


def _drop_input(p: Program, k: int) -> Program | None:
    uses = any(k in st.args for st in p.steps) or any(v == k for v, _ in p.losses)
    if uses or p.n == 1:
        return None

    def m(j: int) -> int:
        return j - 1 if j > k else j

    steps = tuple(st.replace_args(tuple(m(j) for j in st.args)) for st in p.steps)
    losses = tuple((m(v), loss) for v, loss in p.losses)
    inputs = p.inputs[:k] + p.inputs[k + 1 :]
    return dataclasses.replace(p, inputs=inputs, steps=steps, losses=losses)


def _dead(p: Program) -> Program:
    """Without the steps no loss term reads."""
    while True:
        live = {v for v, _ in p.losses}
        for k in range(len(p.steps) - 1, -1, -1):
            if p.n + k in live:
                live |= set(p.steps[k].args)
        dead = [k for k in range(len(p.steps)) if p.n + k not in live]
        if not dead:
            return p
        q = _remap(p, p.n + dead[-1], 0)
        assert q is not None
        p = q


def _candidates(p: Program) -> list[Program]:
    out: list[Program] = []
    # fewer loss terms, then simpler losses
    if len(p.losses) > 1:
        for i in range(len(p.losses)):
            out.append(
                dataclasses.replace(p, losses=tuple(x for j, x in enumerate(p.losses) if j != i))
            )
    # a step replaced by one of its operands or an input
    for k in range(p.n + len(p.steps) - 1, p.n - 1, -1):
        st = p.steps[k - p.n]
        for into in [*st.args, *range(p.n)]:
            if into != k:
                q = _remap(p, k, into)
                if q is not None:
                    out.append(q)
    # an operand replaced by an input
    for s, st in enumerate(p.steps):
        for i, j in enumerate(st.args):
            for k in range(p.n):
                if k != j:
                    args = (*st.args[:i], k, *st.args[i + 1 :])
                    steps = (*p.steps[:s], st.replace_args(args), *p.steps[s + 1 :])
                    out.append(dataclasses.replace(p, steps=steps))
    for k in range(p.n):
        q = _drop_input(p, k)
        if q is not None:
            out.append(q)
    # simpler parameters: axis None, no keepdims
    for s, st in enumerate(p.steps):
        for key, simple in [("keepdims", False), ("axis", None), ("ddof", 0)]:
            if st.params.get(key, simple) != simple:
                params = {**st.params, key: simple}
                steps = (*p.steps[:s], Step(st.op, st.args, params), *p.steps[s + 1 :])
                out.append(dataclasses.replace(p, steps=steps))
    # smaller inputs (their elements from each offset: the one that fails may be any)
    for k, x in enumerate(p.inputs):
        for shape in [(), (1,), (2,), (3,), (1, 1), (1, 2), (2, 1), (1, 3), (2, 2), (2, 3)]:
            if math.prod(shape) < x.size or (math.prod(shape) == x.size and len(shape) < x.ndim):
                flat = x.reshape(-1)
                for start in range(x.size if math.prod(shape) < x.size else 1):
                    y = np.resize(np.roll(flat, -start), shape)
                    out.append(
                        dataclasses.replace(p, inputs=(*p.inputs[:k], y, *p.inputs[k + 1 :]))
                    )
    # simpler losses, then rounder inputs
    order = list(LOSSES)
    for i, (v, loss) in enumerate(p.losses):
        for simpler in order[: order.index(loss)]:
            losses = (*p.losses[:i], (v, simpler), *p.losses[i + 1 :])
            out.append(dataclasses.replace(p, losses=losses))
    for k, x in enumerate(p.inputs):
        for decimals in (0, 1):
            y = np.round(x, decimals)
            y = np.where(y == 0, 0.5, y) if decimals == 0 else y
            if not np.array_equal(y, x):
                out.append(dataclasses.replace(p, inputs=(*p.inputs[:k], y, *p.inputs[k + 1 :])))
    return out


def _size(p: Program) -> tuple:
    return (
        len(p.steps),
        len(p.losses),
        p.n,
        sum(x.size for x in p.inputs),
        sum(len(repr(st.params)) for st in p.steps),
        list(LOSSES).index(p.losses[0][1]),
        sum(len(lit(x)) for x in p.inputs),
    )


def _kind(f: Failure) -> str:
    """What went wrong, for the shrinker to keep: the exception raised, or a mismatch."""
    return f.message.split(":")[0] if f.message.startswith("raised") else "mismatch"


def shrink_by(p: Program, fails: Callable[[Program], bool], seconds: float = math.inf) -> Program:
    """The smallest program found from ``p`` for which ``fails`` holds (``p`` must
    satisfy it): greedy passes over smaller candidates (fewer steps, loss terms,
    inputs and elements, simpler parameters and losses, rounder inputs), each kept only
    if it is valid and still fails, until none is or ``seconds`` have passed."""
    deadline = time.perf_counter() + seconds
    p = _dead(p)
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for q in _candidates(p):
            q = _dead(q)
            if _size(q) >= _size(p) or not valid(q):
                continue
            if fails(q):
                p, improved = q, True
                break
            if time.perf_counter() > deadline:
                break
    return p


def shrink(p: Program, mode: str, seconds: float = math.inf) -> tuple[Program, Failure | None]:
    """A minimal program that still fails ``mode`` (an entry of ``MODES``) the same way
    (the same exception, or a mismatch), and its failure."""
    found = check(p.case(), [mode])
    if not found:
        return p, None
    kind = _kind(found[0])
    last: list[Failure] = found[:1]

    def fails(q: Program) -> bool:
        try:
            fs = check(q.case(), [mode])
        except (InvalidProgram, OracleError):
            return False
        fs = [f for f in fs if _kind(f) == kind]
        if fs:
            last[:] = fs[:1]
        return bool(fs)

    small = shrink_by(p, fails, seconds)
    return small, last[0]


def main(argv: Sequence[str]) -> None:
    """``python -m tests.jax_programs SEED [MAX_STEPS]``: check a generated program in
    every mode and print it, shrunk for its first failing mode."""
    import jax

    jax.config.update("jax_enable_x64", True)
    seed = int(argv[0])
    program = generate(seed, *(int(a) for a in argv[1:2]))
    print(program.source())
    failures = check(program.case())
    for f in failures:
        print(f)
    if failures:
        small, failure = shrink(program, failures[0].mode)
        print(f"\nshrunk ({failures[0].mode}):\n{small.source(failure)}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
