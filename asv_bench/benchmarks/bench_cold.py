"""Cold start: whole processes on an empty kernel cache (what a fresh install, an upgrade
or a CI container sees), against the same processes on the warm cache.

Each sample is a new process with its own temporary ``TAPEGRAD_CACHE_DIR``; the
background compiler a cold process starts is stopped when it ends, so samples do not
feed each other. ``asv_bench/compare.py --cold`` prints the same side by side.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

README_SNIPPET = """
import numpy as np
import tapegrad as tg
import tapegrad.numpy as tnp

x = tg.tensor(np.ones(3), requires_grad=True)
w = tg.tensor(np.ones((3, 2)), requires_grad=True)
loss = tnp.sum(tnp.tanh(x @ w) ** 2)
loss.backward()
print(x.grad)
"""


def process_seconds(argv: list[str], cold: bool) -> float:
    """Wall seconds of one process, on an empty cache (``cold``) or the warm one."""
    env = dict(os.environ)
    cache = tempfile.mkdtemp(prefix="tapegrad-cold-") if cold else None
    if cache is not None:
        env["TAPEGRAD_CACHE_DIR"] = cache
    try:
        t = time.perf_counter()
        subprocess.run(argv, env=env, check=True, capture_output=True)
        return time.perf_counter() - t
    finally:
        if cache is not None:
            for lock in Path(cache).glob("*/compiler.lock"):
                pid = lock.read_text().strip()
                if pid.isdigit():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), 9)
            shutil.rmtree(cache, ignore_errors=True)


class ColdStart:
    params = [True, False]
    param_names = ["empty_cache"]
    timeout = 600
    number = 1
    repeat = 3

    def track_first_snippet_seconds(self, empty_cache):
        return process_seconds([sys.executable, "-c", README_SNIPPET], empty_cache)

    track_first_snippet_seconds.unit = "seconds"
