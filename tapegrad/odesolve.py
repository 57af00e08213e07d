"""Explicit Runge-Kutta solvers and their two gradients, as compiled loops.

``tapegrad.integrate`` is the front end; this module is the numerical core. Every
function here is plain Python that numba also compiles (``jitable``), so one piece of
code serves both ways a right-hand side can be evaluated:

* **compiled** -- the right-hand side was captured by ``tg.compile`` into a program; the
  context ``ctx`` is a tuple of that program's arrays (tape header, forward and backward
  plans, guards, the input arrays its slots point at, the output and gradient
  addresses). :func:`feval` and :func:`vjp` write the inputs and run the plans
  (``tapegrad.replay.run_plan``) with no Python anywhere in the solve;
* **driven** -- a program with guards (Python branched on a value while it was captured)
  may need another branch mid-solve, which only Python can capture. The same functions
  then run as Python with a context object whose ``feval``/``vjp`` call the compiled step.

The solvers:

* :func:`forward` integrates ``dy/dt = f(t, y)`` through the output times ``ts``, landing
  a step on each (no interpolation), with a fixed number of steps per interval (RK4) or
  SciPy's RK45 step control (Dormand-Prince 5(4), FSAL, same ``rtol``/``atol``, safety
  factors and first-step heuristic). With ``record`` it keeps every step's state and
  stages, for
* :func:`reverse`, the discrete reverse pass ("direct differentiation through the
  steps"): the exact gradient of the computed solution with the step sizes held fixed as
  fractions of their output interval; and
* :func:`adjoint`, the continuous adjoint method: the augmented system
  ``[y, a, g_p]' = [f, -a f_y, -a f_p]`` integrated backward from the last output time
  with the same method and tolerances, restarting ``y`` from the stored outputs at each
  output time. Memory is constant in the number of steps.

Time gradients use ``dL/dt_i = <gy_i, f(t_i, y_i)>`` (``i > 0``) and
``dL/dt_0 = -<a(t_0), f(t_0, y_0)>`` in the adjoint (gradients of the exact solution),
and the chain through each step's start and size in the discrete reverse.
"""

from __future__ import annotations

import math

import numpy as np
from numba import carray

from ._jit import as_pointer, jit, jitable, overload
from .layout import H_ARENA, H_ARENA_TOP
from .replay import run_plan

# statuses of the solvers (0 is success); ``info`` holds the time and step size
ODE_OK = 0
ODE_REPLAY = 1  # the program's replay failed (a guard, a kernel error): rerun driven
ODE_NONFINITE = 2  # f returned NaN or inf at an accepted state
ODE_UNDERFLOW = 3  # the step size fell below the spacing of floats near t
ODE_MAXSTEPS = 4  # more than max_steps steps

SAFETY = 0.9  # SciPy's RK45 step-control constants
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0


def _tableau(
    a: list[list[float]], b: list[float], c: list[float], e: list[float]
) -> tuple[np.ndarray, ...]:
    s = len(b)
    A = np.zeros((s, s))
    for i, row in enumerate(a):
        A[i, : len(row)] = row
    B, C, E = np.array(b, float), np.array(c, float), np.array(e, float)
    # the stages the solution depends on (b_i != 0 or a later stage uses k_i): the
    # reverse pass skips the others (Dormand-Prince's seventh, FSAL stage)
    used = np.array([B[i] != 0.0 or np.any(A[i + 1 :, i] != 0.0) for i in range(s)], dtype=np.bool_)
    return A, B, C, E, used


# classic fourth-order Runge-Kutta: no error estimate (E = 0), fixed steps
RK4 = _tableau(
    [[], [0.5], [0.0, 0.5], [0.0, 0.0, 1.0]],
    [1 / 6, 1 / 3, 1 / 3, 1 / 6],
    [0.0, 0.5, 0.5, 1.0],
    [0.0, 0.0, 0.0, 0.0],
)

# Dormand-Prince 5(4) as SciPy's RK45 uses it: the last stage is f(t + h, y_new), the
# next step's first (FSAL); E is the difference of the embedded fourth-order weights
DOPRI5 = _tableau(
    [
        [],
        [1 / 5],
        [3 / 40, 9 / 40],
        [44 / 45, -56 / 15, 32 / 9],
        [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
        [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
        [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84],
    ],
    [35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0],
    [0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1, 1],
    [-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40],
)
ERROR_ORDER = 4  # of Dormand-Prince's embedded estimate: step factors use err**(-1/5)


# --- the right-hand side: f, and the vector-Jacobian product -----------------------
def feval(ctx, t, y, out):
    """``out[:] = f(t, y)``; returns a status (``ctx`` driven: a Python object)."""
    return ctx.feval(t, y, out)


def vjp(ctx, t, y, a, f, gy, gp):
    """At ``(t, y)`` with cotangent ``a``: ``f[:] = f(t, y)``, ``gy[:] = a f_y``,
    ``gp[:] = a f_p`` (every parameter, flattened); returns ``(status, a f_t)``."""
    return ctx.vjp(t, y, a, f, gy, gp)


@overload(feval)
def _feval_compiled(ctx, t, y, out):
    def impl(ctx, t, y, out):
        h, fwd, bwd, root, G, expect, tin, yin, _, fout = ctx[:10]
        tin[0] = t
        for i in range(y.size):
            yin[i] = y[i]
        st = run_plan(h, fwd, bwd, root, False, G, expect)
        if st != 0:
            return ODE_REPLAY
        for i in range(out.size):
            out[i] = fout[i]
        return ODE_OK

    return impl


@jitable
def _gather(gtab, gbuf, n, gy, gp):
    """The program's gradient buffers gathered into ``gbuf = [g_t, g_y, g_p]`` (``gtab``
    rows: address, offset in gbuf, count, 1 if float32 else 0); returns ``g_t``."""
    gbuf[:] = 0.0
    for r in range(gtab.shape[1]):
        addr, off, cnt = gtab[0, r], gtab[1, r], gtab[2, r]
        if gtab[3, r] == 1:
            src32 = carray(as_pointer(addr, np.float32), cnt)
            for i in range(cnt):
                gbuf[off + i] = src32[i]
        else:
            src64 = carray(as_pointer(addr, np.float64), cnt)
            for i in range(cnt):
                gbuf[off + i] = src64[i]
    for i in range(n):
        gy[i] = gbuf[1 + i]
    for i in range(gp.size):
        gp[i] = gbuf[1 + n + i]
    return gbuf[0]


@jitable
def _inputs(tin, yin, ain, t, y, a):
    """Write the program's inputs ``t``, ``y`` and the cotangent ``a``."""
    tin[0] = t
    for i in range(y.size):
        yin[i] = y[i]
        ain[i] = a[i]


@overload(vjp)
def _vjp_compiled(ctx, t, y, a, f, gy, gp):
    def impl(ctx, t, y, a, f, gy, gp):
        h, fwd, bwd, root, G, expect, tin, yin, ain, fout, gtab, gbuf = ctx[:12]
        _inputs(tin, yin, ain, t, y, a)
        st = run_plan(h, fwd, bwd, root, True, G, expect)
        if st != 0:
            return ODE_REPLAY, 0.0
        for i in range(f.size):
            f[i] = fout[i]
        return ODE_OK, _gather(gtab, gbuf, y.size, gy, gp)

    return impl


# --- saved forward values --------------------------------------------------------------
# The reverse pass needs a vector-Jacobian product at every stage of every step. Replaying
# the program's forward there again costs as much as the forward solve; instead the
# forward solve keeps each accepted stage's program values (the tape's value arena, a
# few hundred bytes for a small system) and the reverse pass puts them back and runs
# only the backward kernels. Systems whose arena is larger than SNAPSHOT_LIMIT bytes
# replay the forward instead (memory would grow by the arena per stage per step).
SNAPSHOT_LIMIT = 1 << 14


def snapshot_bytes(ctx):
    """Bytes of program values one stage keeps (0: no snapshots; the driven context)."""
    return 0


@overload(snapshot_bytes)
def _snapshot_bytes_compiled(ctx):
    def impl(ctx):
        top = ctx[0][H_ARENA_TOP]
        return top if top <= SNAPSHOT_LIMIT else 0

    return impl


def snapshot(ctx, buf):
    """Copy the program's values (its last evaluation) into ``buf``."""


@overload(snapshot)
def _snapshot_compiled(ctx, buf):
    def impl(ctx, buf):
        src = carray(as_pointer(ctx[0][H_ARENA], np.uint8), buf.size)
        for i in range(buf.size):
            buf[i] = src[i]

    return impl


def vjp_saved(ctx, saved, t, y, a, gy, gp):
    """:func:`vjp` at an evaluation whose values :func:`snapshot` kept in ``saved``:
    only the backward kernels run; returns ``(status, a f_t)``."""
    return ctx.vjp(t, y, a, np.empty_like(y), gy, gp)


@overload(vjp_saved)
def _vjp_saved_compiled(ctx, saved, t, y, a, gy, gp):
    def impl(ctx, saved, t, y, a, gy, gp):
        h, _, bwd, root, _, _, tin, yin, ain, _, gtab, gbuf, nofwd, noG, noexpect = ctx
        dst = carray(as_pointer(h[H_ARENA], np.uint8), saved.size)
        for i in range(saved.size):
            dst[i] = saved[i]
        _inputs(tin, yin, ain, t, y, a)
        st = run_plan(h, nofwd, bwd, root, True, noG, noexpect)
        if st != 0:
            return ODE_REPLAY, 0.0
        return ODE_OK, _gather(gtab, gbuf, y.size, gy, gp)

    return impl


# --- one step ----------------------------------------------------------------------
@jitable
def _rms(x):
    if x.size == 0:
        return 0.0
    return math.sqrt(np.sum(x * x) / x.size)


@jitable
def _combine(out, y, h, coef, K, upto):
    """``out = y + h sum_{j < upto} coef[j] K[j]`` (loops: no temporaries per stage)."""
    n = y.size
    for q in range(n):
        out[q] = y[q]
    for j in range(upto):
        w = h * coef[j]
        if w != 0.0:
            Kj = K[j]
            for q in range(n):
                out[q] += w * Kj[q]


@jitable
def _stages(ctx, mode, tab, t, h, y, K, Y, ynew, cur):
    """The stages ``K[1:]`` of one step from ``(t, y)`` with ``K[0] = f(t, y)`` given,
    and ``ynew = y + h sum b_i K_i``; returns a status. ``mode`` 0 integrates ``f``,
    1 the adjoint system (see :func:`rhs`)."""
    A, B, C = tab[0], tab[1], tab[2]
    s = B.size
    for i in range(1, s):
        _combine(Y, y, h, A[i], K, i)
        st = rhs(ctx, mode, t + C[i] * h, Y, K[i])
        if st != ODE_OK:
            return st
        if cur.shape[1]:
            snapshot(ctx, cur[i])
    _combine(ynew, y, h, B, K, s)
    return ODE_OK


@jitable
def rhs(ctx, mode, t, z, out):
    """The system being integrated: ``f`` (mode 0) or, mode 1, the adjoint system on
    ``z = [y, a, g_p]``: ``[f(t, y), -a f_y, -a f_p]`` (backward in time it accumulates
    ``a = dL/dy(t)`` and ``g_p = dL/dp`` over ``[t, t_end]``)."""
    if mode == 0:
        return feval(ctx, t, z, out)
    n = (z.size - ctx_nparams(ctx, z.size)) // 2
    st, _ = vjp(ctx, t, z[:n], z[n : 2 * n], out[:n], out[n : 2 * n], out[2 * n :])
    for i in range(n, z.size):
        out[i] = -out[i]
    return st


def ctx_nparams(ctx, size):
    """The number of parameters (the length of ``g_p``) of the context."""
    return ctx.nparams


@overload(ctx_nparams)
def _ctx_nparams_compiled(ctx, size):
    def impl(ctx, size):
        n = ctx[7].size  # yin
        return size - 2 * n

    return impl


@jitable
def _finite(x):
    for v in x.ravel():
        if not math.isfinite(v):
            return False
    return True


@jitable
def initial_step(ctx, mode, t0, y0, f0, direction, rtol, atol, max_step, span):
    """SciPy's ``select_initial_step`` (Hairer, Norsett & Wanner, II.4); returns
    ``(status, |h|)``."""
    if y0.size == 0:
        return ODE_OK, span
    scale = atol + np.abs(y0) * rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    if d0 < 1e-5 or d1 < 1e-5:
        h0 = 1e-6
    else:
        h0 = 0.01 * d0 / d1
    h0 = min(h0, span)
    y1 = y0 + h0 * direction * f0
    f1 = np.empty_like(f0)
    st = rhs(ctx, mode, t0 + h0 * direction, y1, f1)
    if st != ODE_OK:
        return st, 0.0
    d2 = _rms((f1 - f0) / scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (ERROR_ORDER + 1))
    return ODE_OK, min(100 * h0, h1, max_step, span)


@jitable
def _grow(meta, Ys, Ks, Ss, count):
    """Room for one more recorded step (doubling)."""
    if count < meta.shape[0]:
        return meta, Ys, Ks, Ss
    cap = 2 * meta.shape[0]
    m2 = np.empty((cap, meta.shape[1]))
    m2[:count] = meta[:count]
    y2 = np.empty((cap, Ys.shape[1]), Ys.dtype)
    y2[:count] = Ys[:count]
    k2 = np.empty((cap, Ks.shape[1], Ks.shape[2]), Ks.dtype)
    k2[:count] = Ks[:count]
    s2 = np.empty((cap, Ss.shape[1], Ss.shape[2]), np.uint8)
    s2[:count] = Ss[:count]
    return m2, y2, k2, s2


@jitable
def _error_norm(E, K, y, ynew, h, rtol, atol):
    """SciPy's: rms of ``h sum e_i k_i`` over ``atol + rtol max(|y|, |y_new|)``; inf for
    a trial step that overflowed (so that it shrinks)."""
    n = y.size
    total = 0.0
    for q in range(n):
        err = 0.0
        for i in range(E.size):
            if E[i] != 0.0:
                err += E[i] * K[i, q]
        scale = atol + max(abs(y[q]), abs(ynew[q])) * rtol
        r = h * err / scale
        total += r * r
    norm = math.sqrt(total / n) if n else 0.0
    return norm if math.isfinite(norm) else np.inf


@jitable
def advance(ctx, mode, tab, z, f0, t, t_end, h_abs, nfixed, rtol, atol, max_step, budget, rec):
    """Integrate ``z`` (in place) from ``t`` to ``t_end`` (either direction), ``f0 = f(t,
    z)`` given and updated. Fixed steps (``nfixed > 0`` equal steps) or adaptive from the
    proposed size ``h_abs``. ``rec = (interval, meta, Ys, Ks, Ss, cur, count)`` with
    ``interval >= 0`` records each step's start time, size and interval, state and stages
    and (when ``cur`` has room: :func:`snapshot_bytes`) each stage's program values,
    ``cur[0]`` those of ``f0``.

    Returns ``(status, steps taken, next proposed |h|, evaluations, rec, time reached)``."""
    A, B, C, E = tab[0], tab[1], tab[2], tab[3]
    s = B.size
    n = z.size
    interval, meta, Ys, Ks, Ss, cur, count = rec
    K = np.empty((s, n), z.dtype)
    Y = np.empty(n, z.dtype)
    ynew = np.empty(n, z.dtype)
    direction = 1.0 if t_end > t else -1.0
    steps = 0
    nfev = 0
    st = ODE_OK
    fsal = C[s - 1] == 1.0 and np.all(A[s - 1, : s - 1] == B[: s - 1]) and B[s - 1] == 0.0
    while st == ODE_OK and direction * (t_end - t) > 0:
        if steps >= budget:
            st = ODE_MAXSTEPS
            break
        K[0] = f0
        if nfixed > 0:
            # equal steps; the last lands exactly on t_end
            left = nfixed - steps
            h = (t_end - t) / left
            st = _stages(ctx, mode, tab, t, h, z, K, Y, ynew, cur)
            nfev += s - 1
            if st == ODE_OK and not (_finite(ynew) and _finite(K)):
                st = ODE_NONFINITE
            t_new = t_end if left == 1 else t + h
        else:
            rejected = False
            while True:
                min_step = 10.0 * abs(np.nextafter(t, direction * np.inf) - t)
                h_abs = min(h_abs, max_step)
                if h_abs < min_step:
                    st = ODE_UNDERFLOW
                    break
                t_new = t + h_abs * direction
                if direction * (t_new - t_end) >= 0:
                    t_new = t_end
                h = t_new - t
                st = _stages(ctx, mode, tab, t, h, z, K, Y, ynew, cur)
                nfev += s - 1
                if st != ODE_OK:
                    break
                norm = _error_norm(E, K, z, ynew, h, rtol, atol)
                if norm < 1.0:
                    if norm == 0.0:
                        factor = MAX_FACTOR
                    else:
                        factor = min(MAX_FACTOR, SAFETY * norm ** (-1.0 / (ERROR_ORDER + 1)))
                    if rejected:
                        factor = min(1.0, factor)
                    h_abs = abs(h) * factor
                    break
                h_abs = abs(h) * max(MIN_FACTOR, SAFETY * norm ** (-1.0 / (ERROR_ORDER + 1)))
                rejected = True
        if st != ODE_OK:
            break
        if interval >= 0:
            meta, Ys, Ks, Ss = _grow(meta, Ys, Ks, Ss, count)
            meta[count, 0] = t
            meta[count, 1] = h
            meta[count, 2] = interval
            Ys[count] = z
            Ks[count] = K
            if cur.shape[1]:
                Ss[count] = cur
            count += 1
        z[:] = ynew
        t = t_new
        steps += 1
        if fsal:
            f0[:] = K[s - 1]
            if cur.shape[1]:
                cur[0] = cur[s - 1]
        else:
            st = rhs(ctx, mode, t, z, f0)
            nfev += 1
            if cur.shape[1]:
                snapshot(ctx, cur[0])
        if st == ODE_OK and not _finite(f0):
            st = ODE_NONFINITE
    return st, steps, h_abs, nfev, (interval, meta, Ys, Ks, Ss, cur, count), t


# --- the three entry points ----------------------------------------------------------
def forward(ctx, tab, y0, ts, nsub, rtol, atol, first_step, max_step, max_steps, record):
    """Solve through the output times ``ts`` (strictly monotonic): ``(status, ys (len(ts),
    n), info [time, steps, evaluations], meta, Ys, Ks, Ss, count)``; the last five are
    the recorded steps (``record``) for :func:`reverse`. ``nsub[i]`` equal steps over
    interval ``i``, or 0 for adaptive steps."""
    n = y0.size
    s = tab[1].size
    ys = np.empty((ts.size, n), y0.dtype)
    info = np.zeros(3)
    z = y0.copy()
    ys[0] = z
    f0 = np.empty(n, y0.dtype)
    cap = 16 if record else 0
    meta = np.empty((cap, 3))
    Ys = np.empty((cap, n), y0.dtype)
    Ks = np.empty((cap, s, n), y0.dtype)
    nbytes = snapshot_bytes(ctx) if record else 0
    Ss = np.empty((cap, s, nbytes), np.uint8)
    cur = np.empty((s, nbytes), np.uint8)
    count = 0
    info[0] = ts[0]
    st = rhs(ctx, 0, ts[0], z, f0)
    if nbytes:
        snapshot(ctx, cur[0])
    info[2] = 1
    if st == ODE_OK and not (_finite(z) and _finite(f0)):
        st = ODE_NONFINITE
    if st != ODE_OK or ts.size == 1:
        return st, ys, info, meta, Ys, Ks, Ss, count
    direction = 1.0 if ts[-1] > ts[0] else -1.0
    h_abs = first_step
    if nsub[0] == 0 and h_abs <= 0.0:
        st, h_abs = initial_step(
            ctx, 0, ts[0], z, f0, direction, rtol, atol, max_step, abs(ts[-1] - ts[0])
        )
        info[2] += 1
        if st != ODE_OK:
            return st, ys, info, meta, Ys, Ks, Ss, count
    t = ts[0]
    total = 0
    for i in range(ts.size - 1):
        rec = (i if record else -1, meta, Ys, Ks, Ss, cur, count)
        st, steps, h_abs, nfev, rec, t_at = advance(
            ctx, 0, tab, z, f0, t, ts[i + 1], h_abs, nsub[i], rtol, atol, max_step,
            max_steps - total, rec,
        )  # fmt: skip
        _, meta, Ys, Ks, Ss, _, count = rec
        total += steps
        info[0] = t_at
        info[1] = total
        info[2] += nfev
        if st != ODE_OK:
            return st, ys, info, meta, Ys, Ks, Ss, count
        t = ts[i + 1]
        ys[i + 1] = z
    return ODE_OK, ys, info, meta, Ys, Ks, Ss, count


def reverse(ctx, tab, ts, gys, meta, Ys, Ks, Ss, count, nparams):
    """The discrete reverse pass over the recorded steps: ``(status, g_y0, g_ts, g_p)``
    for the output cotangents ``gys`` (``len(ts), n``)."""
    A, B, C, used = tab[0], tab[1], tab[2], tab[4]
    s = B.size
    n = gys.shape[1]
    dt = gys.dtype
    ybar = gys[ts.size - 1].copy()
    gts = np.zeros(ts.size)
    gp = np.zeros(nparams, dt)
    kbar = np.empty((s, n), dt)
    Y = np.empty(n, dt)
    fbuf = np.empty(n, dt)
    gY = np.empty(n, dt)
    gP = np.empty(nparams, dt)
    interval = ts.size - 2
    for k in range(count - 1, -1, -1):
        iv = int(meta[k, 2])
        while interval > iv:  # the steps of interval iv end at ts[iv + 1]
            ybar += gys[interval]
            interval -= 1
        t, h = meta[k, 0], meta[k, 1]
        y = Ys[k]
        K = Ks[k]
        hbar = 0.0
        tbar = 0.0
        for i in range(s):
            kbar[i] = (h * B[i]) * ybar
            if B[i] != 0.0:
                hbar += B[i] * np.sum(ybar * K[i])
        for i in range(s - 1, -1, -1):
            if not used[i]:
                continue
            _combine(Y, y, h, A[i], K, i)
            if Ss.shape[2]:  # the forward's values kept: the backward kernels alone
                st, gT = vjp_saved(ctx, Ss[k, i], t + C[i] * h, Y, kbar[i], gY, gP)
            else:
                st, gT = vjp(ctx, t + C[i] * h, Y, kbar[i], fbuf, gY, gP)
            if st != ODE_OK:
                return st, ybar, gts, gp
            gp += gP
            ybar += gY
            tbar += gT
            hbar += C[i] * gT
            for j in range(i):
                if A[i, j] != 0.0:
                    kbar[j] += (h * A[i, j]) * gY
                    hbar += A[i, j] * np.sum(gY * K[j])
        # t = ts[iv] + s_k D and h = theta_k D with D = ts[iv + 1] - ts[iv] and the
        # fractions s_k, theta_k held fixed: the chain to both ends of the interval
        D = ts[iv + 1] - ts[iv]
        frac_t = (t - ts[iv]) / D
        frac_h = h / D
        gts[iv] += tbar * (1.0 - frac_t) - hbar * frac_h
        gts[iv + 1] += tbar * frac_t + hbar * frac_h
    while interval >= 0:
        ybar += gys[interval]
        interval -= 1
    return ODE_OK, ybar, gts, gp


def adjoint(ctx, tab, ts, ys, gys, nsub, rtol, atol, max_step, max_steps, nparams):
    """The continuous adjoint: ``(status, g_y0, g_ts, g_p, info)``. ``ys`` are the
    forward solution's outputs; the state is ``[y, a, g_p]``, integrated backward over
    each output interval from ``ys[i + 1]``, so memory does not grow with the steps."""
    n = ys.shape[1]
    dt = ys.dtype
    m = 2 * n + nparams
    z = np.zeros(m, dt)
    f0 = np.empty(m, dt)
    fbuf = np.empty(n, dt)
    gts = np.zeros(ts.size)
    info = np.zeros(3)
    no_meta = np.empty((0, 3))
    no_y = np.empty((0, n), dt)
    no_k = np.empty((0, 1, n), dt)
    no_s = np.empty((0, 1, 0), np.uint8)
    no_cur = np.empty((tab[1].size, 0), np.uint8)
    h_abs = 0.0
    total = 0
    for i in range(ts.size - 1, 0, -1):
        # at t_i: y restarts from the forward solution, a takes the output's cotangent
        z[:n] = ys[i]
        for j in range(n):
            z[n + j] += gys[i, j]
        st = feval(ctx, ts[i], ys[i], fbuf)
        if st != ODE_OK:
            return st, z[n : 2 * n].copy(), gts, z[2 * n :].copy(), info
        gts[i] += np.sum(gys[i] * fbuf)
        st = rhs(ctx, 1, ts[i], z, f0)
        info[2] += 2
        if st != ODE_OK:
            return st, z[n : 2 * n].copy(), gts, z[2 * n :].copy(), info
        if nsub[i - 1] == 0 and h_abs <= 0.0:
            st, h_abs = initial_step(
                ctx, 1, ts[i], z, f0, -1.0 if ts[-1] > ts[0] else 1.0, rtol, atol, max_step,
                abs(ts[i] - ts[0]),
            )  # fmt: skip
            info[2] += 1
            if st != ODE_OK:
                return st, z[n : 2 * n].copy(), gts, z[2 * n :].copy(), info
        rec = (-1, no_meta, no_y, no_k, no_s, no_cur, 0)
        st, steps, h_abs, nfev, rec, t_at = advance(
            ctx, 1, tab, z, f0, ts[i], ts[i - 1], h_abs, nsub[i - 1], rtol, atol, max_step,
            max_steps - total, rec,
        )  # fmt: skip
        total += steps
        info[0] = t_at
        info[1] = total
        info[2] += nfev
        if st != ODE_OK:
            return st, z[n : 2 * n].copy(), gts, z[2 * n :].copy(), info
    st = feval(ctx, ts[0], ys[0], fbuf)
    # y(t_i) moves with t_0 by -Phi(t_i, t_0) f(t_0, y_0): the adjoint before g_y0
    gts[0] -= np.sum(z[n : 2 * n] * fbuf)
    a0 = z[n : 2 * n] + gys[0]
    return st, a0, gts, z[2 * n :].copy(), info


forward_compiled = jit(forward)
reverse_compiled = jit(reverse)
adjoint_compiled = jit(adjoint)
