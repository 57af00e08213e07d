"""``solve_ivp``'s ``events=``: where the event functions cross zero, and the derivative
of each event time.

An event function ``g(t, y, *args)`` returns a number; an event is a zero of
``G(t) = g(t, y(t))`` along the solution, found as SciPy finds it: a sign change of
``G`` between the ends of a step (in the event's ``direction``: rising, falling or
either), then Brent's method on ``G`` inside the step, with the state there from the
solver's own step cut short (tapegrad's methods) or SciPy's interpolant (SciPy's).
An event whose ``terminal`` attribute is true (or a count of occurrences) ends the
integration there.

The event time ``t_e`` depends on everything the solution depends on: ``g(t_e,
y(t_e; p), p) = 0`` gives, by the implicit function theorem,

    dt_e/dp = -(g_p + g_y dy/dp) / D,    D = g_t + g_y . f(t_e, y(t_e)),

``D`` being the rate at which ``G`` crosses zero. tapegrad records ``G = g(t_e,
y(t_e), p)`` with ``t_e`` held fixed (its parameter derivatives include ``dy/dp`` at
``t_e``, through the solve) and one node (:class:`_EventTime`) whose backward divides by
``-D``. The state at the event, ``y(t_e)``, moves with it: ``y_e = y(t_e) + f(t_e,
y_e) (t_e - value)``, whose derivative adds ``f dt_e/dp``. A zero with ``D = 0`` (the
solution touches zero, or crosses it flat) has no derivative and raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.optimize import OptimizeResult, brentq

from . import numpy as tnp
from .function import Function
from .grad_mode import no_grad
from .ode_arguments import recorded, refusal_message, unrecorded_values
from .tensors import Tensor
from .transforms import grad

_EPS = np.finfo(float).eps


class Event:
    """One event function with SciPy's attributes read off it: ``terminal`` (a bool, or
    the number of occurrences that end the integration; 0 never does) and ``direction``
    (its sign: only rising zeros, only falling ones, or both for 0)."""

    def __init__(self, name: str, fn: Any, index: int) -> None:
        if not callable(fn):
            raise TypeError(f"{name}: events[{index}] must be callable, got {type(fn).__name__}")
        terminal = getattr(fn, "terminal", None)
        try:  # SciPy's rule: None, False or 0 never ends it; True or a count does
            count = 0 if terminal is None or terminal == 0 else int(terminal)
            valid = (count == terminal and count > 0) or count == 0
        except (TypeError, ValueError):
            valid = False
        if not valid:
            raise ValueError(
                f"{name}: events[{index}].terminal must be a bool or a non-negative "
                f"integer, got {terminal!r}"
            )
        direction = getattr(fn, "direction", 0.0)
        try:
            direction = float(direction)
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}: events[{index}].direction must be a number, got {direction!r}"
            ) from None
        self.fn, self.index, self.terminal = fn, index, count
        self.direction = float(np.sign(direction))
        self.name = name

    def value(self, t: float, y: np.ndarray, params: tuple) -> float:
        """``g(t, y)`` as a float (nothing recorded)."""
        with no_grad():
            out = self.fn(t, y.copy(), *params)
        v = unrecorded_values(recorded(out))
        if v.size != 1 or v.dtype.kind not in "fiub":
            raise ValueError(
                f"{self.name}: events[{self.index}] must return one real number, got "
                f"shape {v.shape} ({v.dtype})"
            )
        v = float(v.reshape(()))
        if not math.isfinite(v):
            raise ValueError(f"{self.name}: events[{self.index}] returned {v} at t = {t:.6g}")
        return v

    def active(self, g_old: float, g_new: float) -> bool:
        """SciPy's test for a zero between two values (in this event's direction)."""
        up = g_old <= 0 <= g_new
        down = g_old >= 0 >= g_new
        if self.direction > 0:
            return up
        if self.direction < 0:
            return down
        return up or down


def event_list(name: str, events: Any) -> list[Event]:
    """``events`` (one callable or a sequence of them) as :class:`Event` s."""
    if events is None:
        return []
    fns = [events] if callable(events) else list(events)
    return [Event(name, fn, i) for i, fn in enumerate(fns)]


class Locator:
    """Finds the events step by step, in the order of time (``found``: ``(event index,
    time)`` pairs), and where a terminal one ends the integration (``stop``)."""

    def __init__(self, events: Sequence[Event], params: tuple, t0: float, y0: np.ndarray):
        self.events, self.params = events, params
        self.g = [e.value(t0, np.asarray(y0, np.float64), params) for e in events]
        self.counts = [0] * len(events)
        self.found: list[tuple[int, float]] = []
        self.stop: float | None = None

    def __call__(self, t_old: float, t_new: float, y_new: np.ndarray, at: Callable) -> bool:
        """One step, from ``t_old`` to ``t_new`` (``at(t)``: the state inside it): True
        when a terminal event ends the integration in it."""
        g_new = [e.value(t_new, y_new, self.params) for e in self.events]
        roots = []
        for i, e in enumerate(self.events):
            if not e.active(self.g[i], g_new[i]):
                continue
            if self.g[i] == 0.0 and (i, t_old) in self.found[-len(self.events) :]:
                continue  # a zero at the step's start, found as the last step's end
            roots.append((self._root(e, t_old, t_new, at, self.g[i], g_new[i]), i))
        self.g = g_new
        roots.sort(key=lambda r: (t_new - t_old) * r[0])
        for when, i in roots:
            self.found.append((i, when))
            self.counts[i] += 1
            terminal = self.events[i].terminal
            if terminal and self.counts[i] >= terminal:
                self.stop = when
                return True
        return False

    def _root(self, e: Event, a: float, b: float, at: Callable, g0: float, g1: float) -> float:
        """The zero of ``g(t, y(t))`` between ``a`` and ``b`` (SciPy's tolerances on
        Brent's method)."""
        if g0 == 0.0:
            return a
        if g1 == 0.0:
            return b

        def g(when: float) -> float:
            return e.value(when, at(when), self.params)

        # (more iterations than SciPy's 100: a zero where g is flat, (t - c)**3, needs
        # ~150)
        lo, hi = min(a, b), max(a, b)
        return float(brentq(g, lo, hi, xtol=4 * _EPS, rtol=4 * _EPS, maxiter=1000))


class _EventTime(Function):
    """An event time from the recorded ``G = g(t_e, y(t_e), p)`` (``t_e`` held fixed):
    its value is ``t_e``, its derivative ``-dG / D``. Like the solve it comes from, it
    is not differentiated again, nor in forward mode."""

    replays = False  # part of a solve

    @staticmethod
    def refusal(ctx: Any, mode: str) -> str:
        return refusal_message("solve_ivp", mode)

    @staticmethod
    def forward(ctx: Any, G: np.ndarray, rate: float, when: np.ndarray) -> np.ndarray:
        ctx.rate = rate
        return when

    @staticmethod
    def backward(ctx: Any, g: np.ndarray) -> tuple:
        return -np.asarray(g) / ctx.rate, None, None


def differentiable(
    e: Event,
    when: float,
    y_row: Any,
    f_at: Callable[[float, np.ndarray], np.ndarray],
    params: tuple,
    dtype: np.dtype,
) -> tuple[Any, Any]:
    """The event time and the state there, ``(t_e, y_e)``, as tensors with their
    derivatives when anything they depend on requires grad (else arrays). ``y_row``:
    the solution at ``when`` as the solve returned it, with ``when`` held fixed."""
    yv = np.asarray(unrecorded_values(y_row), np.float64)
    with no_grad():
        fv = np.asarray(f_at(when, yv.astype(dtype)), np.float64)
    G = e.fn(when, y_row, *params)
    t_value = np.asarray(when, dtype)
    recorded_g = isinstance(G, Tensor) and G.requires_grad
    if not recorded_g and not (isinstance(y_row, Tensor) and y_row.requires_grad):
        return t_value, y_row
    with no_grad():  # (a transform under no_grad takes outside tensors as constants)
        gt, gy = grad(lambda t, y: e.fn(t, y, *params), argnums=(0, 1))(when, yv)
    if not recorded_g:
        if np.any(np.asarray(gy) != 0):  # (g read y's values as numbers: float(y[0]))
            raise TypeError(
                f"{e.name}: events[{e.index}] depends on the state but returned a value "
                "that does not record it (float(), .item() or NumPy on a tensor): the "
                "event time's derivative would be lost. Write it with tapegrad.numpy ops"
            )
        return t_value, y_row
    G = G.reshape(()) if G.size == 1 else G
    rate = float(np.asarray(gt, np.float64) + np.dot(np.asarray(gy, np.float64), fv))
    scale = abs(float(np.asarray(gt))) + float(np.dot(np.abs(gy), np.abs(fv)))
    if not math.isfinite(rate) or abs(rate) <= 64 * _EPS * scale:
        raise ValueError(
            f"{e.name}: events[{e.index}] has slope d/dt g(t, y(t)) = {rate:.3g} at its "
            f"zero t = {when:.6g} (it touches zero, or crosses it flat as a cube does), so "
            "the event time has no derivative there; an event function with a nonzero "
            "slope at its zeros (y[0] - c rather than (y[0] - c)**3) has one"
        )
    t_e = _EventTime.apply(G, rate, t_value)
    y_e = y_row + fv.astype(dtype) * (t_e - t_value)
    return t_e, y_e


def ivp_result(
    t: np.ndarray, y: Any, nfev: int, found: Any = None, evs: Sequence = (), n: int = 0
) -> OptimizeResult:
    """SciPy's result of a successful ``solve_ivp``; with events (``evs``), ``found``
    their times and states (lists per event) become ``t_events`` and ``y_events``."""
    t_events = y_events = None
    if evs:
        t_events, y_events = [], []
        for e in range(len(evs)):
            ts_e, ys_e = found[e] if found else ([], [])
            t_events.append(_stack(ts_e, (0,)))
            y_events.append(_stack(ys_e, (0, n)))
    return OptimizeResult(
        t=t,
        y=y,
        sol=None,
        t_events=t_events,
        y_events=y_events,
        nfev=nfev,
        njev=0,
        nlu=0,
        status=0,
        message="The solver successfully reached the end of the integration interval.",
        success=True,
    )


def _stack(parts: list, empty: tuple) -> Any:
    """Events' times or states as one array (a tensor when any is one)."""
    if not parts:
        return np.empty(empty)
    if any(isinstance(p, Tensor) for p in parts):
        return tnp.stack([tnp.asarray(p) for p in parts])
    return np.array(parts)
