"""Where an eager scalar op's time goes (ns per op, medians of interleaved rounds).

    python asv_bench/eager_costs.py [--rounds 31]

Times ``Tensor * Tensor`` on one-element float64 tensors as a whole, and each part of
what it runs alone: the compiled recorder's entry point (``record_tensors``: checks,
tables, the forward kernel through the dispatch table), the result's handle
(``tensors.result_handle``: a ``Tensor`` object, its fields, the tape's list of
handles) and the Python checks of ``recording.elementwise`` (operand types, tape and epoch).
What is left of the whole is the operator's dispatch to ``binary`` and the call frames.
docs/performance.md ("Eager code as users write it") gives the numbers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tapegrad as tg
from tapegrad import recording, tensors
from tapegrad.ops import BY_NAME
from tapegrad.tape import current_tape

N = 2000  # ops a round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    a = tg.tensor(np.array([0.999]), requires_grad=True)

    def whole() -> None:
        s = a
        for _ in range(N):
            s = s * a

    def recorder() -> None:
        tape = current_tape()
        h, rec = tape.header, recording._record_tensors
        opc = 2 * BY_NAME["multiply"].code
        s, x = (a * a)._slot, (a * 1.0)._slot
        for _ in range(N):
            s = rec(h, opc, s, x)

    def handle() -> None:
        tape = current_tape()
        ep, s, make = tape.epoch, (a * a)._slot, tensors.result_handle
        for _ in range(N):
            make(tape, s, ep)

    def checks() -> None:
        x = a * 1.0
        y = x * 1.0
        tensor = tg.Tensor
        for _ in range(N):
            if type(x) is tensor and type(y) is tensor:
                t = current_tape()
                e = t.epoch
                if x._tape is t and x._epoch == e and y._tape is t and y._epoch == e:
                    pass

    parts = {
        "whole op (Tensor * Tensor)": whole,
        "compiled recorder (entry point)": recorder,
        "result handle": handle,
        "Python checks": checks,
    }
    for f in parts.values():  # compile, bind the entry point
        f()
    times: dict[str, list[float]] = {k: [] for k in parts}
    for _ in range(args.rounds):
        for name, f in parts.items():
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    for name, ts in times.items():
        print(f"{name:34s} {np.median(ts) / N * 1e9:6.0f} ns")


if __name__ == "__main__":
    main()
