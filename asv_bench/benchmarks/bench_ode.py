"""The Lotka-Volterra fit's loss and gradient through ``tapegrad.integrate.odeint``
(1000 RK4 steps; adaptive RK45 at rtol 1e-6, 58 steps, and at rtol 1e-13, about 1000),
against its forward solve alone and hand-written NumPy RK4 with a hand-written discrete
adjoint (``ode_workloads``)."""

from __future__ import annotations

from .ode_workloads import (
    START,
    numpy_fit,
    numpy_loss,
    observed,
    tapegrad_fit,
    tapegrad_forward,
)


class LotkaVolterraODE:
    params = (["RK4", "RK45", "RK45-long"],)
    param_names = ["method"]

    def setup(self, method):
        self.obs = observed()
        self.direct = tapegrad_fit(self.obs, method)
        self.adjoint = tapegrad_fit(self.obs, method, adjoint=True)
        self.forward = tapegrad_forward(self.obs, method)
        for f in (self.direct, self.adjoint, self.forward):
            f(START)  # compile and capture outside the timing

    def time_direct(self, method):
        self.direct(START)

    def time_adjoint(self, method):
        self.adjoint(START)

    def time_forward_alone(self, method):
        self.forward(START)


class LotkaVolterraNumPy:
    """The hand-written baseline (RK4 only)."""

    def setup(self):
        self.obs = observed()

    def time_rk4_and_adjoint(self):
        numpy_fit(START, self.obs)

    def time_rk4_forward(self):
        numpy_loss(START, self.obs)
