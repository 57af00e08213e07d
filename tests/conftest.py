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
