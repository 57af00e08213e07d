"""The eager workloads as users write them (``eager_workloads``): two elementwise
chains on 2e6 elements and Lennard-Jones 512 in three spellings, tapegrad against the
hand-written NumPy baseline (``python asv_bench/compare.py --eager`` adds PyTorch)."""

from __future__ import annotations

from .eager_workloads import (
    ELEMENTWISE,
    LJ_SPELLINGS,
    chain,
    chain_data,
    chain_log,
    chain_log_numpy,
    chain_numpy,
    elementwise_data,
    elementwise_numpy,
    elementwise_tapegrad,
    lj_numpy,
    lj_tapegrad,
    positions,
    tapegrad_fn,
)

CHAINS = {"transcendental": (chain, chain_numpy), "log-sqrt-pow": (chain_log, chain_log_numpy)}


class EagerChain:
    params = (list(CHAINS),)
    param_names = ["chain"]
    timeout = 300

    def setup(self, name):
        self.x, self.w = chain_data()
        f, self.numpy = CHAINS[name]
        self.tapegrad = tapegrad_fn(f)
        self.tapegrad(self.x[:100], self.w[:100])  # compile / load kernels

    def time_tapegrad(self, name):
        self.tapegrad(self.x, self.w)

    def time_hand_numpy(self, name):
        self.numpy(self.x, self.w)


class EagerPairwise:
    params = (list(LJ_SPELLINGS),)
    param_names = ["spelling"]
    timeout = 300

    def setup(self, spelling):
        self.pos = positions()
        self.tapegrad = lj_tapegrad(LJ_SPELLINGS[spelling])
        self.tapegrad(self.pos[:8])

    def time_tapegrad(self, spelling):
        self.tapegrad(self.pos)

    def time_hand_numpy(self, spelling):
        lj_numpy(self.pos)


class EagerElementwise:
    """One elementwise function on 1e6 float64, forward and backward (the vector
    formulas against NumPy's ufuncs; ``compare.py --elementwise`` adds
    PyTorch and prints ns an element)."""

    params = (list(ELEMENTWISE),)
    param_names = ["function"]
    timeout = 120

    def setup(self, name):
        self.x = elementwise_data()
        self.tapegrad = elementwise_tapegrad(name)
        self.numpy = elementwise_numpy(name)
        self.tapegrad(self.x[:2000])

    def time_tapegrad(self, name):
        self.tapegrad(self.x)

    def time_numpy(self, name):
        self.numpy(self.x)
