"""The CUDA tests run on a real GPU when there is one, else in numba's simulator.

The simulator has to be chosen before ``numba.cuda`` is first imported; nothing else
in the test suite imports it (``import tapegrad`` does not), so doing it when this file
is collected is early enough. ``tests/gpu/run.sh`` (the GPU runner) sets
``NUMBA_ENABLE_CUDASIM=0`` and realistic sizes.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

import pytest


def _driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


HAVE_NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None
if "NUMBA_ENABLE_CUDASIM" not in os.environ and not _driver():
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import numba.core.config

    numba.core.config.reload_config()
SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
# elements of the "large" tests: the simulator runs ~6,000 threads a second
SIZE = int(os.environ.get("TAPEGRAD_CUDA_SIZE", "300" if SIMULATED else "2000000"))


def pytest_collection_modifyitems(config, items):
    if HAVE_NUMBA_CUDA:
        return
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason="needs numba-cuda (pip install 'tapegrad[cuda]')")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(skip)
