import os

# Fresh gradient buffers are filled with NaN: a backward kernel that reads one before
# storing into it fails every gradient test it runs in (tapegrad/scheduler.py _prepare).
os.environ.setdefault("TAPEGRAD_POISON_GRADIENTS", "1")
# Every leaf's gradient is computed in an array of its own (tapegrad/tape.py
# use_own_grads), not only large ones: the copy out of the arena is the old path.
os.environ.setdefault("TAPEGRAD_OWN_GRAD_MIN", "1")
# Small graphs too make gradient buffers ready node by node (not one memset up front).
os.environ.setdefault("TAPEGRAD_LAZY_BYTES", "0")
# Large NumPy forwards are split across threads from 2^18 elements (2^20 by default),
# so that tests/test_large.py reaches that path with arrays of 600,000.
os.environ.setdefault("TAPEGRAD_THREAD_MIN", str(1 << 18))

from hypothesis import settings

# Compilation on first use can take seconds: no per-example deadline.
settings.register_profile("tapegrad", deadline=None, max_examples=40, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tapegrad"))


import pytest  # noqa: E402  (after the environment above: tapegrad reads it on import)

from tapegrad import recording  # noqa: E402


@pytest.fixture(autouse=True)
def _no_device_type_outside_gpu_tests(request, monkeypatch):
    """Run each test outside tests/gpu as most users run: with no device tensor type.
    tests/gpu is collected first and imports tapegrad.cuda, which registers one
    (``recording.DEVICE_TYPES``, kept by tapegrad.devices) for the rest of the process;
    the CPU-only shortcuts that look at it were then never tested (a view wrapper they
    skipped went unseen)."""
    if request.node.path.parent.name != "gpu":
        monkeypatch.setattr(recording, "DEVICE_TYPES", ())


@pytest.fixture(autouse=True)
def _numpy_print_options_do_not_leak():
    """A test (or an example run in this process) that sets NumPy's print options
    globally must not change what later tests print: the doc-page tests compare printed
    output with what the pages show."""
    import numpy as np

    saved = np.get_printoptions()
    yield
    np.set_printoptions(**saved)
