"""solve_ivp's events: where they are (against SciPy), the derivatives of the event
times and states (against closed forms and central differences, through every input:
y0, args, the time spans, t_eval and closures), and the ways a wrong number could slip
out (events on output times or at t0, float32, second order, bad event functions)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import IntegrationError, solve_ivp

from .helpers import central

TIGHT = dict(rtol=1e-10, atol=1e-12)
G = 9.81


def ball(t, y, g):
    """A ball in flight: height and velocity."""
    return tnp.stack([y[1], -g + 0.0 * y[0]])


def ground(t, y, g):
    return y[0]


ground.terminal = True
ground.direction = -1


def apex(t, y, g):
    return y[1]


def landing_time(h, v, g):
    return (v + np.sqrt(v * v + 2 * g * h)) / g


def vdp(t, y, mu):
    return tnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def vdp_numpy(t, y, mu):
    return np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def crossing(t, y, mu):
    return y[0] - 0.5


def rising(t, y, mu):
    return y[1]


rising.direction = 1


def second_dip(t, y, mu):
    return y[0] + 1.5


second_dip.terminal = 2


# --- where the events are ------------------------------------------------------------
@pytest.mark.parametrize("method", ["RK45", "DOP853", "Radau"])
@pytest.mark.parametrize("with_t_eval", [False, True])
def test_events_match_scipy(method, with_t_eval):
    """Times, states, the terminal count and the stop, as SciPy finds them."""
    events = [crossing, rising, second_dip]
    kw = dict(method=method, events=events, args=(1.3,), rtol=1e-9, atol=1e-11)
    if with_t_eval:
        kw["t_eval"] = np.linspace(0.0, 20.0, 41)
    ours = solve_ivp(vdp, (0.0, 20.0), np.array([2.0, 0.0]), **kw)
    ref = scipy.integrate.solve_ivp(vdp_numpy, (0.0, 20.0), [2.0, 0.0], **kw)
    assert ours.status == ref.status == 1
    assert ours.message == ref.message
    assert [len(t) for t in ours.t_events] == [len(t) for t in ref.t_events] == [1, 1, 2]
    for a, b in zip(ours.t_events, ref.t_events):
        np.testing.assert_allclose(a, b, rtol=1e-7)
    for a, b in zip(ours.y_events, ref.y_events):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-7)
    np.testing.assert_allclose(ours.t[-1], ref.t[-1], rtol=1e-7)
    np.testing.assert_allclose(ours.y[:, -1], ref.y[:, -1], atol=1e-7)
    if with_t_eval:
        np.testing.assert_array_equal(ours.t, ref.t)
        np.testing.assert_allclose(ours.y, ref.y, atol=1e-7)


def test_event_attributes_and_empty_events():
    """Non-terminal events keep the whole solution; an event that never fires gives an
    empty array of SciPy's shapes."""
    never = lambda t, y, g: y[0] + 100.0  # noqa: E731
    sol = solve_ivp(ball, (0.0, 0.5), np.array([2.0, 3.0]), events=[apex, never], args=(G,))
    assert sol.status == 0 and sol.t[-1] == 0.5
    np.testing.assert_allclose(sol.t_events[0], [3.0 / G], rtol=1e-9)
    assert sol.t_events[1].shape == (0,) and sol.y_events[1].shape == (0, 2)
    plain = solve_ivp(ball, (0.0, 0.5), np.array([2.0, 3.0]), args=(G,))
    assert plain.t_events is None and plain.y_events is None


def test_backward_in_time():
    """Integrating toward earlier times finds the same events."""
    sol = solve_ivp(ball, (1.0, -2.0), np.array([2.0, 3.0]), events=apex, args=(G,), **TIGHT)
    ref = scipy.integrate.solve_ivp(
        lambda t, y: [y[1], -G], (1.0, -2.0), [2.0, 3.0], events=lambda t, y: y[1], **TIGHT
    )
    np.testing.assert_allclose(sol.t_events[0], ref.t_events[0], rtol=1e-9)


# --- derivatives ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "method, extra",
    [
        ("RK45", {}),
        ("RK45", {"adjoint": True}),
        ("RK4", {"step": 0.01}),
        ("Radau", {}),
        ("DOP853", {}),
    ],
)
def test_event_time_and_state_gradients(method, extra):
    """d(landing time)/d(h, v, g) in closed form, and the states at both events and the
    final state (the terminal event's) against central differences."""
    h, v, g = 2.0, 3.0, G

    def t_land(p):
        sol = solve_ivp(
            ball, (0.0, 10.0), p[:2], method=method, events=ground, args=(p[2],), **TIGHT,
            **extra,
        )  # fmt: skip
        return sol.t_events[0][0]

    p0 = np.array([h, v, g])
    s = np.sqrt(v * v + 2 * g * h)
    exact = [1.0 / s, (1.0 + v / s) / g, -landing_time(h, v, g) / g + h / (g * s)]
    np.testing.assert_allclose(tg.grad(t_land)(p0), exact, rtol=1e-7)

    def mix(p):
        sol = solve_ivp(
            ball, (0.0, 10.0), p[:2], method=method, events=[ground, apex], args=(p[2],),
            **TIGHT, **extra,
        )  # fmt: skip
        return (
            sol.t_events[1][0] + 2.0 * sol.y_events[0][0, 1] + sol.y_events[1][0, 0]
            + tnp.sum(sol.y[:, -1] * np.array([0.5, -0.25]))
        )  # fmt: skip

    np.testing.assert_allclose(
        tg.grad(mix)(p0), central(lambda p: float(mix(p)), p0), rtol=1e-6, atol=1e-8
    )


def test_time_span_gradients():
    """An autonomous system: the event moves with t0 one for one; t1 is never reached
    when a terminal event stops first, so it gets no gradient."""

    def f(span):
        sol = solve_ivp(ball, (span[0], span[1]), np.array([2.0, 3.0]), events=ground,
                        args=(G,), **TIGHT)  # fmt: skip
        return sol.t_events[0][0] + sol.y_events[0][0, 1] + tnp.sum(sol.y[:, -1])

    np.testing.assert_allclose(tg.grad(f)(np.array([0.5, 10.0])), [1.0, 0.0], atol=1e-9)


def test_event_on_a_t_eval_point():
    """An event exactly at an output time: the output moves with t_eval, the event
    does not (the row's own time derivative is held out of the event)."""

    def at_one(t, y, g):
        return t - 1.0

    def f(te):
        sol = solve_ivp(ball, (0.0, 3.0), np.array([2.0, 3.0]), t_eval=te, events=at_one,
                        args=(G,), **TIGHT)  # fmt: skip
        return tnp.sum(sol.y[0]) + 10.0 * sol.y_events[0][0, 0] + 100.0 * sol.t_events[0][0]

    te = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(tg.grad(f)(te), 3.0 - G * te, rtol=1e-8)


def test_closure_and_argument_tensors_in_the_event():
    """The event function reads a tensor from its closure and one from args."""
    level = tg.tensor(0.5, requires_grad=True)
    g = tg.tensor(G, requires_grad=True)

    def at_level(t, y, g):
        return y[0] - level

    at_level.terminal, at_level.direction = True, -1
    sol = solve_ivp(ball, (0.0, 10.0), np.array([2.0, 3.0]), events=at_level, args=(g,), **TIGHT)
    sol.t_events[0][0].backward()
    t = landing_time(2.0 - 0.5, 3.0, G)
    np.testing.assert_allclose(level.grad, 1.0 / (3.0 - G * t), rtol=1e-8)  # dt/dlevel
    # y(t) = level: dt/dg = (t^2 / 2) / (v - g t)
    np.testing.assert_allclose(g.grad, 0.5 * t * t / (3.0 - G * t), rtol=1e-8)


def test_event_at_the_start():
    """A zero at t0 is an event, as in SciPy; its derivatives follow the root."""

    def at_start(t, y, g):
        return y[0] - 2.0

    ref = scipy.integrate.solve_ivp(
        lambda t, y: [y[1], -G], (0.0, 1.0), [2.0, 3.0], events=lambda t, y: y[0] - 2.0,
        **TIGHT,
    )  # fmt: skip
    sol = solve_ivp(ball, (0.0, 1.0), np.array([2.0, 3.0]), events=at_start, args=(G,), **TIGHT)
    np.testing.assert_allclose(sol.t_events[0], ref.t_events[0], atol=1e-9)

    def f(t0):
        sol = solve_ivp(ball, (t0, 1.0 + t0), np.array([2.0, 3.0]), events=at_start,
                        args=(G,), **TIGHT)  # fmt: skip
        return sol.t_events[0][0] + sol.y_events[0][0, 1]

    np.testing.assert_allclose(tg.grad(f)(0.0), 1.0, rtol=1e-9)


def test_float32_stays_float32():
    y0 = tg.tensor(np.array([2.0, 3.0], np.float32), requires_grad=True)
    sol = solve_ivp(ball, (0.0, 10.0), y0, events=ground, args=(np.float32(G),))
    assert sol.t_events[0].dtype == sol.y_events[0].dtype == sol.y.dtype == np.float32
    sol.t_events[0][0].backward()
    assert y0.grad.dtype == np.float32
    s = np.sqrt(9.0 + 4.0 * G)
    np.testing.assert_allclose(y0.grad, [1.0 / s, (1.0 + 3.0 / s) / G], rtol=1e-3)


def test_without_gradients_the_results_are_arrays():
    sol = solve_ivp(ball, (0.0, 10.0), np.array([2.0, 3.0]), events=[ground, apex], args=(G,))
    assert all(type(t) is np.ndarray for t in sol.t_events)
    assert type(sol.y) is np.ndarray


# --- refusals ------------------------------------------------------------------------
def test_second_order_and_forward_mode_raise():
    def t_land(p):
        sol = solve_ivp(ball, (0.0, 10.0), p[:2], events=ground, args=(p[2],))
        return sol.t_events[0][0]

    p0 = np.array([2.0, 3.0, G])
    with pytest.raises(NotImplementedError, match=r"second derivatives.*solve_ivp"):
        tg.hessian(t_land)(p0)
    with pytest.raises(NotImplementedError, match=r"forward mode.*solve_ivp"):
        tg.jvp(t_land, (p0,), (np.ones(3),))


def test_a_zero_without_slope_has_no_derivative():
    """Thrown with no speed, the ball only touches its start height: the event there has
    slope 0 and no derivative. A flat crossing, (t - c)**3, is still found."""

    def start_height(t, y, g):
        return y[0] - 2.0

    y0 = tg.tensor(np.array([2.0, 0.0]), requires_grad=True)
    with pytest.raises(ValueError, match=r"events\[0\] has slope .* = 0 at its zero t = 0 "):
        solve_ivp(ball, (0.0, 1.0), y0, events=start_height, args=(G,))
    sol = solve_ivp(ball, (0.0, 1.0), np.array([2.0, 0.0]), events=start_height, args=(G,))
    np.testing.assert_array_equal(sol.t_events[0], [0.0])  # no gradient wanted: reported

    def flat(t, y, g):
        return (t - 0.25) ** 3 + 0.0 * y[0]

    sol = solve_ivp(ball, (0.0, 1.0), np.array([2.0, 3.0]), events=flat, args=(G,))
    np.testing.assert_allclose(sol.t_events[0], [0.25], atol=1e-12)


def test_bad_event_functions():
    y0 = np.array([2.0, 3.0])
    with pytest.raises(TypeError, match=r"events\[1\] must be callable"):
        solve_ivp(ball, (0.0, 1.0), y0, events=[apex, 3.0], args=(G,))
    with pytest.raises(ValueError, match=r"events\[0\] must return one real number"):
        solve_ivp(ball, (0.0, 1.0), y0, events=lambda t, y, g: y, args=(G,))

    def odd(t, y, g):
        return y[0]

    odd.terminal = 1.5
    with pytest.raises(ValueError, match=r"terminal must be a bool or a non-negative integer"):
        solve_ivp(ball, (0.0, 1.0), y0, events=odd, args=(G,))
    with pytest.raises(ValueError, match=r"returned nan"):
        solve_ivp(ball, (0.0, 1.0), y0, events=lambda t, y, g: y[0] * np.nan, args=(G,))


@pytest.mark.parametrize("method", ["RK45", "Radau"])
def test_a_terminal_event_before_a_blow_up(method):
    """y' = y^2 blows up at t = 1/y0; the terminal event y = 10 comes first, at
    t = 1/y0 - 1/10, and the solve is not an error (as in SciPy). Without the event it
    is."""

    def reaches_ten(t, y):
        return y[0] - 10.0

    reaches_ten.terminal = True

    def t_ten(y0):
        sol = solve_ivp(lambda t, y: y**2, (0.0, 2.0), tnp.stack([y0]), method=method,
                        events=reaches_ten, **TIGHT)  # fmt: skip
        assert sol.status == 1
        return sol.t_events[0][0]

    np.testing.assert_allclose(float(t_ten(1.0)), 0.9, rtol=1e-9)
    np.testing.assert_allclose(tg.grad(t_ten)(1.0), -1.0, rtol=1e-7)
    with pytest.raises(IntegrationError):
        solve_ivp(lambda t, y: y**2, (0.0, 2.0), np.array([1.0]), method=method, **TIGHT)


def test_scipy_points_at_a_terminal_event():
    """SciPy's solution points: a t_eval time equal to the terminal event's is kept; an
    event at t0 gives [t0, t0]; ``terminal`` may be None, a float count or 0."""

    def at_one(t, y, g):
        return t - 1.0

    at_one.terminal = True
    sol = solve_ivp(ball, (0.0, 3.0), np.array([2.0, 3.0]), t_eval=[0.0, 0.5, 1.0, 2.0],
                    events=at_one, args=(G,))  # fmt: skip
    np.testing.assert_array_equal(sol.t, [0.0, 0.5, 1.0])

    def start(t, y, g):
        return y[0] - 2.0

    start.terminal = 1.0
    sol = solve_ivp(ball, (0.0, 3.0), np.array([2.0, 3.0]), events=start, args=(G,))
    np.testing.assert_array_equal(sol.t, [0.0, 0.0])
    assert sol.y.shape == (2, 2)
    start.terminal = None
    sol = solve_ivp(ball, (0.0, 0.5), np.array([2.0, 3.0]), events=start, args=(G,))
    assert sol.status == 0


def test_an_event_that_reads_the_state_as_a_number_raises():
    """float(y[0]) in an event function would drop the event time's dependence on the
    state: with a gradient wanted, it raises (under .backward() as under tg.grad)."""

    def as_number(t, y, g):
        return float(y[0]) - 1.0

    as_number.terminal = True
    y0 = tg.tensor(np.array([2.0, 3.0]), requires_grad=True)
    with pytest.raises(TypeError, match=r"float\(\)"):
        solve_ivp(ball, (0.0, 3.0), y0, events=as_number, args=(G,))
