"""The Lotka-Volterra fit's loss and gradient through an ODE solver, by every
implementation the comparison knows: tapegrad's solver (discrete reverse pass and
adjoint), hand-written NumPy RK4 with a hand-written discrete adjoint, PyTorch through
torchdiffeq (or a hand-written RK4 when torchdiffeq is missing) and HIPS autograd's
``odeint``. Loss: the squared log error of both populations at 21 observation times
over [0, 10], 1000 RK4 steps of 0.01 (or adaptive Dormand-Prince: 58 steps at rtol
1e-6, about 1000 at rtol 1e-13)."""

from __future__ import annotations

import numpy as np

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.integrate import odeint

THETA = np.array([1.0, 0.1, 1.5, 0.075])
START = np.array([0.9, 0.12, 1.3, 0.08])  # where the loss and gradient are evaluated
Z0 = np.array([10.0, 5.0])
T_OBS = np.linspace(0.0, 10.0, 21)
STEP = 0.01  # 1000 RK4 steps over [0, 10]
# the tolerances of each method: "RK45" takes 58 steps, "RK45-long" about 1000
TOLERANCES = {
    "RK4": dict(method="RK4", step=STEP),
    "RK45": dict(method="RK45", rtol=1e-6, atol=1e-8),
    "RK45-long": dict(method="RK45", rtol=1e-13, atol=1e-15),
}


def lv_rhs(z, t, theta):
    return tnp.stack(
        [theta[0] * z[0] - theta[1] * z[0] * z[1], theta[3] * z[0] * z[1] - theta[2] * z[1]]
    )


def observed() -> np.ndarray:
    """Noisy log populations ``(21, 2)`` from the true parameters (fixed seed)."""
    z = odeint(lv_rhs, Z0, T_OBS, THETA, method="RK4", step=STEP)
    return np.log(z) + 0.05 * np.random.default_rng(0).standard_normal(z.shape)


def tapegrad_fit(log_obs: np.ndarray, method: str = "RK4", adjoint: bool = False):
    """``theta -> (loss, gradient)`` through ``tapegrad.integrate.odeint``."""
    kw = TOLERANCES[method]

    def loss(theta):
        z = odeint(lv_rhs, Z0, T_OBS, theta, adjoint=adjoint, **kw)
        return tnp.sum((tnp.log(z) - log_obs) ** 2)

    return tg.value_and_grad(loss)


def tapegrad_forward(log_obs: np.ndarray, method: str = "RK4"):
    """The loss alone (no gradient): the forward solve the 2x target is measured against."""
    kw = TOLERANCES[method]

    def loss(theta):
        z = odeint(lv_rhs, Z0, T_OBS, theta, **kw)
        return float(np.sum((np.log(z) - log_obs) ** 2))

    return loss


# --- hand-written NumPy: RK4 and its discrete adjoint ---------------------------------
def _f(z, th):
    x, y = z
    return np.array([th[0] * x - th[1] * x * y, th[3] * x * y - th[2] * y])


def _jac(z, th):
    """(df/dz, df/dtheta) of the Lotka-Volterra right-hand side."""
    x, y = z
    fz = np.array([[th[0] - th[1] * y, -th[1] * x], [th[3] * y, th[3] * x - th[2]]])
    fp = np.array([[x, -x * y, 0.0, 0.0], [0.0, 0.0, -y, x * y]])
    return fz, fp


def numpy_forward(theta: np.ndarray, log_obs: np.ndarray, keep: bool = False):
    """RK4 through the observation times; with ``keep`` every stage's input too."""
    n_sub = round((T_OBS[1] - T_OBS[0]) / STEP)
    h = STEP
    z = Z0.copy()
    zs, stages = [z.copy()], []
    for _ in range(len(T_OBS) - 1):
        for _ in range(n_sub):
            k1 = _f(z, theta)
            z2 = z + 0.5 * h * k1
            k2 = _f(z2, theta)
            z3 = z + 0.5 * h * k2
            k3 = _f(z3, theta)
            z4 = z + h * k3
            k4 = _f(z4, theta)
            if keep:
                stages.append((z.copy(), z2, z3, z4))
            z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        zs.append(z.copy())
    zs = np.array(zs)
    loss = float(np.sum((np.log(zs) - log_obs) ** 2))
    return loss, zs, stages


def numpy_loss(theta: np.ndarray, log_obs: np.ndarray) -> float:
    return numpy_forward(theta, log_obs)[0]


def numpy_fit(theta: np.ndarray, log_obs: np.ndarray):
    """Loss and gradient: RK4 forward, then the discrete adjoint of RK4 by hand."""
    loss, zs, stages = numpy_forward(theta, log_obs, keep=True)
    gzs = 2 * (np.log(zs) - log_obs) / zs
    h = STEP
    n_sub = len(stages) // (len(T_OBS) - 1)
    lam = gzs[-1].copy()
    gp = np.zeros(4)
    for k in range(len(stages) - 1, -1, -1):
        z1, z2, z3, z4 = stages[k]
        # z' = z + h/6 (k1 + 2 k2 + 2 k3 + k4); reverse through the stages
        b4, b3, b2, b1 = h / 6 * lam, h / 3 * lam, h / 3 * lam, h / 6 * lam
        fz, fp = _jac(z4, theta)
        u4, gp = fz.T @ b4, gp + fp.T @ b4  # cotangent of z4 = z + h k3
        b3 = b3 + h * u4
        fz, fp = _jac(z3, theta)
        u3, gp = fz.T @ b3, gp + fp.T @ b3
        b2 = b2 + 0.5 * h * u3
        fz, fp = _jac(z2, theta)
        u2, gp = fz.T @ b2, gp + fp.T @ b2
        b1 = b1 + 0.5 * h * u2
        fz, fp = _jac(z1, theta)
        u1, gp = fz.T @ b1, gp + fp.T @ b1
        lam = lam + u1 + u2 + u3 + u4
        if k % n_sub == 0 and k:
            lam = lam + gzs[k // n_sub]
    return loss, gp


# --- peers ---------------------------------------------------------------------------
def torch_fit(log_obs: np.ndarray):
    """PyTorch through torchdiffeq's RK4 (discrete backprop), or None without torch;
    a hand-written RK4 when torchdiffeq is not installed. Returns (fn, label)."""
    try:
        import torch
    except ImportError:
        return None, None
    obs = torch.tensor(log_obs)
    t = torch.tensor(T_OBS)
    z0 = torch.tensor(Z0)

    def rhs(tt, z, th):
        return torch.stack([th[0] * z[0] - th[1] * z[0] * z[1], th[3] * z[0] * z[1] - th[2] * z[1]])

    try:
        import torchdiffeq
    except ImportError:
        torchdiffeq = None

    def fit(theta):
        th = torch.tensor(theta, requires_grad=True)
        if torchdiffeq is not None:
            z = torchdiffeq.odeint(lambda tt, z: rhs(tt, z, th), z0, t, method="rk4",
                                   options={"step_size": STEP})  # fmt: skip
        else:
            n_sub = round((T_OBS[1] - T_OBS[0]) / STEP)
            z, zs = z0, [z0]
            for _ in range(len(T_OBS) - 1):
                for _ in range(n_sub):
                    k1 = rhs(0, z, th)
                    k2 = rhs(0, z + 0.5 * STEP * k1, th)
                    k3 = rhs(0, z + 0.5 * STEP * k2, th)
                    k4 = rhs(0, z + STEP * k3, th)
                    z = z + STEP / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
                zs.append(z)
            z = torch.stack(zs)
        loss = ((torch.log(z) - obs) ** 2).sum()
        loss.backward()
        return loss.item(), th.grad.numpy()

    label = "PyTorch + torchdiffeq rk4" if torchdiffeq is not None else "PyTorch, hand RK4"
    return fit, label


def autograd_fit(log_obs: np.ndarray):
    """HIPS autograd through its own ``odeint`` (SciPy's LSODA, adjoint gradient), or
    None without autograd."""
    try:
        import autograd
        import autograd.numpy as anp
        from autograd.builtins import tuple as boxed_tuple
        from autograd.scipy.integrate import odeint as a_odeint
    except ImportError:
        return None

    def rhs(z, t, th):
        return anp.array([th[0] * z[0] - th[1] * z[0] * z[1], th[3] * z[0] * z[1] - th[2] * z[1]])

    def loss(theta):
        z = a_odeint(rhs, Z0, T_OBS, boxed_tuple((theta,)), rtol=1e-10, atol=1e-10)
        return anp.sum((anp.log(z) - log_obs) ** 2)

    return autograd.value_and_grad(loss)
