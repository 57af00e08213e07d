import os

from hypothesis import settings

# Compilation on first use can take seconds: no per-example deadline.
settings.register_profile("tapegrad", deadline=None, max_examples=40, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tapegrad"))
