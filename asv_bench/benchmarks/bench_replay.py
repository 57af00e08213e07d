"""Capture and replay (tg.compile) against eager recording and hand-written NumPy."""

from __future__ import annotations

import time

import numpy as np

import tapegrad as tg

from .workloads import (
    chain_grad_tapegrad,
    chain_loss,
    chain_numpy,
    interleaved_medians,
    recurrence,
    recurrence_c,
    recurrence_nodes,
    recurrence_numpy,
)

STEPS = 1430  # about 10,000 nodes


class Recurrence:
    timeout = 600

    def setup(self):
        self.u = np.random.default_rng(0).standard_normal(STEPS)
        self.p = np.array([0.5, 0.3, 0.1])
        self.step = tg.compile(recurrence)
        self.step.value_and_grad(self.p, self.u)  # capture (and compile on first run)
        self.eager = tg.value_and_grad(recurrence)

    def time_replay(self):
        self.step.value_and_grad(self.p, self.u)

    def time_eager(self):
        self.eager(self.p, self.u)

    def time_hand_numpy(self):
        recurrence_numpy(self.p, self.u)

    def track_replay_ns_per_node(self):
        ts = []
        for _ in range(15):
            t = time.perf_counter()
            self.step.value_and_grad(self.p, self.u)
            ts.append(time.perf_counter() - t)
        return float(np.median(ts)) / recurrence_nodes(STEPS) * 1e9

    track_replay_ns_per_node.unit = "ns/node"

    def track_capture_over_eager(self):
        """Capture time of a new signature divided by one eager step (medians of five,
        interleaved)."""
        u = np.random.default_rng(1).standard_normal(STEPS + 1)
        times = interleaved_medians(
            {
                "capture": lambda: tg.compile(recurrence).value_and_grad(self.p, u),
                "eager": lambda: self.eager(self.p, u),
            },
            5,
        )
        return times["capture"] / times["eager"]

    track_capture_over_eager.unit = "ratio"

    def track_replay_over_c(self):
        """Replay (fused runs of scalar nodes, ``tapegrad.fused``) against the same
        forward and backward hand-written in C (``cc -O2``; medians of 41, interleaved,
        each timed call right after an untimed one of its own)."""
        c = recurrence_c()
        if c is None:
            raise NotImplementedError("no C compiler")
        times = interleaved_medians(
            {
                "replay": lambda: self.step.value_and_grad(self.p, self.u),
                "C": lambda: c(self.p, self.u),
            },
            41,
            steady=True,
        )
        return times["replay"] / times["C"]

    track_replay_over_c.unit = "ratio"

    def track_unfused_over_fused(self):
        """How many times faster fused replay is than the same plans unfused (one kernel
        call a node; medians of 21, interleaved)."""
        from unittest import mock

        from tapegrad import fused

        # without executors no plan is fused, and none is fused later (fuse_plans) while
        # the patch holds; self.step's plans were fused before it
        with mock.patch.object(fused, "executors", lambda: None):
            plain = tg.compile(recurrence)
            plain.value_and_grad(self.p, self.u)
            plain.value_and_grad(self.p, self.u)
            times = interleaved_medians(
                {
                    "fused": lambda: self.step.value_and_grad(self.p, self.u),
                    "unfused": lambda: plain.value_and_grad(self.p, self.u),
                },
                21,
            )
        return times["unfused"] / times["fused"]

    track_unfused_over_fused.unit = "ratio"


class Chain:
    timeout = 600

    def setup(self):
        self.x = np.random.default_rng(0).uniform(-1, 1, 16)
        self.step = tg.compile(chain_loss)
        self.step.value_and_grad(self.x, 1000)

    def time_replay(self):
        self.step.value_and_grad(self.x, 1000)

    def time_hand_numpy(self):
        chain_numpy(self.x, 1000)

    def time_eager(self):
        chain_grad_tapegrad(self.x, 1000)

    def track_eager_over_replay(self):
        """How many times faster replay is than the eager step (medians, interleaved)."""
        times = interleaved_medians(
            {
                "eager": lambda: chain_grad_tapegrad(self.x, 1000),
                "replay": lambda: self.step.value_and_grad(self.x, 1000),
            },
            21,
        )
        return times["eager"] / times["replay"]

    track_eager_over_replay.unit = "ratio"


# A chain of 1,000 ops on 16 elements whose constants are 434 floats in a list that also
# holds something else (None here; a tensor in a model's parameter list), so that each
# float is a guard of its own: replay checks them all before it runs.
GUARDED_CONSTANTS = [float(c) for c in np.random.default_rng(1).uniform(0.9, 1.1, 434)] + [None]


def guarded_chain(x):
    import tapegrad.numpy as tnp

    c = GUARDED_CONSTANTS
    y = x
    for i in range(250):
        y = tnp.tanh(tnp.sin(y) * c[i % 434]) + x * c[(i + 7) % 434]
    return y.sum()


class GuardedChain:
    timeout = 600

    def setup(self):
        self.x = np.random.default_rng(0).uniform(-1, 1, 16)
        self.step = tg.compile(guarded_chain)
        self.step.value_and_grad(self.x)
        self.eager = tg.value_and_grad(guarded_chain)

    def time_replay(self):
        self.step.value_and_grad(self.x)

    def time_guards(self):
        from tapegrad.plain_guards import plain_hold

        plain_hold(self.step.reach, next(iter(self.step.programs.values()))[0], (self.x,))

    def track_eager_over_replay(self):
        """How many times faster replay is than the eager step (medians, interleaved)."""
        times = interleaved_medians(
            {
                "eager": lambda: self.eager(self.x),
                "replay": lambda: self.step.value_and_grad(self.x),
            },
            21,
        )
        return times["eager"] / times["replay"]

    track_eager_over_replay.unit = "ratio"

    def track_guards_over_replay(self):
        """The guards' share of a replayed step (medians, interleaved)."""
        times = interleaved_medians({"guards": self.time_guards, "replay": self.time_replay}, 201)
        return times["guards"] / times["replay"]

    track_guards_over_replay.unit = "ratio"
