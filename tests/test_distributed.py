"""tapegrad.distributed under mpiexec with 1, 2 and 4 ranks (oversubscribed on this
2-core machine: correctness, not speed). Skipped, with the reason, without mpi4py."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install -e '.[mpi]')")
# the mpich wheel installs mpiexec next to the interpreter (on PATH in most setups)
_BESIDE = Path(sys.executable).parent / "mpiexec"
MPIEXEC = str(_BESIDE) if _BESIDE.exists() else shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH (the mpich wheel)")

CASES = Path(__file__).resolve().parent / "mpi" / "cases.py"


def _run(n: int, case: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [MPIEXEC, "-n", str(n), sys.executable, str(CASES), case],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("case", ["agree", "minimize", "contract"])
def test_distributed_equals_single_process(n, case):
    r = _run(n, case)
    assert r.returncode == 0, r.stdout + r.stderr
    # (mpiexec merges the ranks' output without keeping lines whole)
    found = sorted(re.findall(r"OK (\w+) (\d+)", r.stdout))
    assert found == sorted((case, str(k)) for k in range(n))


def test_a_rank_that_raises_stops_them_all():
    start = time.perf_counter()
    r = _run(4, "fail", timeout=60)
    assert r.returncode != 0
    # anomaly mode finds the NaN in the backward, naming the op and the source line
    assert "tapegrad.distributed: rank 1 of 4 raised RuntimeError" in r.stderr
    assert "returned nan or inf values" in r.stderr
    assert "OK fail" not in r.stdout
    assert time.perf_counter() - start < 60


def test_import_tapegrad_does_not_need_mpi4py():
    code = "import sys, tapegrad; print('mpi4py' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_distributed_fit_example_agrees_with_one_process(tmp_path):
    example = Path(__file__).resolve().parent.parent / "examples" / "distributed_fit.py"
    r = subprocess.run(
        [
            MPIEXEC,
            "-n",
            "2",
            sys.executable,
            str(example),
            "--samples",
            "4000",
            "--out",
            str(tmp_path / "fit.png"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    difference = float(re.search(r"max \|difference\| (\S+)", r.stdout).group(1))
    assert difference < 1e-6
    assert (tmp_path / "fit.png").stat().st_size > 10_000
