"""Second order and forward mode: HVP against a gradient, JVP against a forward pass
(MLP, Lennard-Jones 512), the Hessian of a 100-parameter function, and a captured HVP."""

from __future__ import annotations

import tapegrad as tg

from .workloads import second_order_impls, smooth100, smooth100_data


class SecondOrder:
    params = ["MLP 256x64->256->10", "Lennard-Jones 512"]
    param_names = ["workload"]

    def setup(self, workload):
        self.impls = second_order_impls()[workload]
        for fn in self.impls.values():
            fn()

    def time_gradient(self, workload):
        self.impls["gradient"]()

    def time_hvp(self, workload):
        self.impls["HVP"]()

    def time_forward(self, workload):
        self.impls["forward (no grad)"]()

    def time_jvp(self, workload):
        self.impls["JVP"]()


class Hessian100:
    def setup(self):
        self.w, self.x = smooth100_data()
        self.hessian = tg.hessian(lambda x: smooth100(self.w, x))
        self.hessian(self.x)

    def time_hessian(self):
        self.hessian(self.x)
