#!/usr/bin/env bash
# What a GPU CI runner calls: the CUDA tests on the real GPU with realistic sizes, then
# the CPU-vs-GPU speed table. Needs an NVIDIA GPU and driver, and the cuda extra:
#     pip install -e ".[test,cuda]" && bash tests/gpu/run.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

export NUMBA_ENABLE_CUDASIM=0          # the real GPU, never the simulator
export TAPEGRAD_CUDA_SIZE="${TAPEGRAD_CUDA_SIZE:-2000000}"
# the versions first: a GPU image's own NumPy/numba/numba-cuda are what usually breaks
# (numba-cuda 0.30.4 needs NumPy < 2.5: docs/design/cuda.md)
python -c "import sys, numpy, numba, numba_cuda
print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'numba',
      numba.__version__, 'numba-cuda', numba_cuda.__version__)"
python -c "from numba import cuda; assert cuda.is_available(), 'no CUDA GPU found'; cuda.detect()"
python -m pytest -m cuda tests/gpu -q -p no:cacheprovider
python tests/gpu/speed.py "$@"
