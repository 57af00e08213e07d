"""The kernel cache: its directory keyed on the sources, the first-use notice, tidying
old versions, a warm process compiling nothing, import loading no CUDA, two processes
saving one function's signatures, and compile_all in tapegrad.warmup."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import tapegrad as tg
from tapegrad import _jit

from .helpers import ROOT, run_python


def test_cache_directory_is_keyed_on_the_sources(tmp_path):
    root = _jit.cache_root()
    assert root.name.endswith(_jit.source_hash())
    code = "import tapegrad._jit as j; print(j.source_hash())"
    assert run_python(code).strip() == _jit.source_hash()
    # an edited copy of the package gets another hash
    import shutil

    copy = tmp_path / "tapegrad"
    shutil.copytree(ROOT / "tapegrad", copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "kernels" / "loops.py").write_text(
        (copy / "kernels" / "loops.py").read_text() + "\n# edited\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() != _jit.source_hash()


def test_first_use_notice_is_one_line_for_tapegrad_compiles_only():
    """A second of tapegrad's own compiling prints one line to stderr, once; a user's
    numba function compiling says nothing."""
    code = """
        import sys, numba
        from tapegrad import _jit
        _jit.FIRST_USE_NOTICE.after = 0.05

        def user(x):
            return x + 1
        numba.njit(user)(1.0)
        print("after user", _jit.FIRST_USE_NOTICE.said, flush=True)
        for k in range(3):
            def probe(x, k=k):
                return x * 2.0 + k
            probe.__module__ = "tapegrad.probe"
            _jit.jit(probe, cache=False)(1.0)
        print("after tapegrad", _jit.FIRST_USE_NOTICE.said)
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["after user False", "after tapegrad True"]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("tapegrad:")]
    assert len(lines) == 1 and "compiling kernels for first use" in lines[0]


def test_cache_tidy_removes_only_other_stale_versions(tmp_path):
    import time

    tag = _jit._PY_TAG
    root = tmp_path / f"{tag}-{'0' * 16}"
    names = [f"{tag}-{k:016x}" for k in range(1, 13)]
    for k, name in enumerate(names):  # one a day, the first the most recent
        (tmp_path / name).mkdir()
        marker = tmp_path / name / _jit.LAST_USED
        marker.touch()
        os.utime(marker, (time.time() - 86400 * k,) * 2)
    for name in ("py27-0123456789abcdef", f"{tag}-notahash", "results", "py399-0123456789abcdef"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("keep me")
    removed = _jit.tidy_cache(root, keep_days=10, keep_versions=5)
    assert sorted(p.name for p in removed) == sorted(names[5:])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([*names[:5], "py27-0123456789abcdef", f"{tag}-notahash",
                           "results", "py399-0123456789abcdef", "notes.txt"])  # fmt: skip
    removed = _jit.tidy_cache(root, keep_days=2.5, keep_versions=5)
    assert removed == [tmp_path / n for n in names[3:5]]
    # a process's first cache use marks its own version and tidies the rest
    old = tmp_path / f"{tag}-{'f' * 16}"
    old.mkdir()
    os.utime(old, (time.time() - 86400 * 60,) * 2)
    code = "import tapegrad; from tapegrad import _jit; print(_jit.cache_root())"
    mine = Path(run_python(code, TAPEGRAD_CACHE_DIR=str(tmp_path)).strip())
    assert (mine / _jit.LAST_USED).exists() and not old.exists()
    assert (tmp_path / names[0]).exists()
    old.mkdir()
    os.utime(old, (time.time() - 86400 * 60,) * 2)
    run_python(code, TAPEGRAD_CACHE_DIR=str(tmp_path), TAPEGRAD_CACHE_TIDY="0")
    assert old.exists()


def test_warm_process_compiles_nothing():
    code = """
        from numba.core import event
        rec = event.RecordingListener()
        event.register("numba:compile", rec)
        import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        from tapegrad import dispatch
        x = tg.tensor(np.ones(3), requires_grad=True)
        w = tg.tensor(np.ones((3, 2)), requires_grad=True)
        tnp.sum(tnp.tanh(x @ w) ** 2).backward()
        hits = [k.cache_hits for k in dispatch._keepalive]
        print(len(rec.buffer), min(hits), len(hits))
    """
    run_python(code)  # fills the cache if needed
    events, min_hits, n = map(int, run_python(code).split())
    assert events == 0 and min_hits == 1 and n >= 6


def test_import_does_not_load_cuda_or_compile():
    code = """
        from numba.core import event
        rec = event.RecordingListener()
        event.register("numba:compile", rec)
        import sys, tapegrad, tapegrad.numpy
        print(len(rec.buffer), any(m.startswith("numba.cuda") for m in sys.modules))
    """
    assert run_python(code).split() == ["0", "False"]


_SAVER = """
import sys, time
from numba.core import caching
from tapegrad import _jit
who, path, save = sys.argv[1], sys.argv[2], caching.IndexDataCacheFile.save
if sys.argv[3] == "numba":  # numba's own save, without tapegrad's lock
    save = save.__wrapped__
f = caching.IndexDataCacheFile(path, "shared_helper-1.py311", _jit.source_hash())
while time.time() < float(sys.argv[4]):  # both start together
    pass
for k in range(200):  # one signature after another, as two workers compiling one helper
    save(f, f"{who}{k}", f"{who}{k}")
"""


def saved_by_two_processes(path: Path, how: str) -> tuple[int, dict]:
    """Two processes each save 200 signatures of one function into the index at
    ``path``: how many entries the index holds, and those whose data is another's."""
    from numba.core import caching

    path.mkdir(parents=True)
    go = str(time.time() + 4.0)
    procs = [
        subprocess.Popen([sys.executable, "-c", _SAVER, who, str(path), how, go], cwd=ROOT)
        for who in ("a", "b")
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    f = caching.IndexDataCacheFile(str(path), "shared_helper-1.py311", _jit.source_hash())
    index = f._load_index()
    data = {k: f._load_data(name) for k, name in index.items()}
    return len(index), {k: v for k, v in data.items() if v != k}


def test_two_processes_saving_signatures_of_one_function_keep_index_and_data_together(
    tmp_path,
):
    """numba's cache chooses a data file by reading the index first; two processes
    saving at once (warm-up workers on one cold cache) chose one file for two
    signatures, and a third process loaded code compiled for other types. In
    tapegrad's cache an entry is saved under a lock on the directory (numba's own save
    lost 100-180 of the 400 entries here and mixed up ~20: ``saved_by_two_processes(p,
    "numba")``)."""
    path = _jit.cache_root() / "lock-test" / tmp_path.name
    try:
        assert saved_by_two_processes(path, "tapegrad") == (400, {})
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


def test_a_numba_function_from_exec_d_code_compiles_beside_tapegrad():
    """tapegrad listens to numba's compile events to say when it compiles its own
    functions; a user's function whose module is None (code exec'd without
    ``__name__``) must compile as it would without tapegrad."""
    import numba

    env = {"numba": numba}
    exec("@numba.njit\ndef f(x):\n    return x + 1\n", env)
    assert env["f"].py_func.__module__ is None
    assert env["f"](41) == 42


def test_compile_all_lives_in_warmup_and_the_old_name_warns(monkeypatch):
    """tg.compile_all warms the kernel cache, tg.compile captures a step: the first moved
    to tapegrad.warmup; the old name forwards its arguments, with a DeprecationWarning."""
    import tapegrad.warmup
    from tapegrad import dispatch
    from tapegrad.layout import FWD

    seen = []
    monkeypatch.setattr(dispatch, "compile_all", lambda *a, **k: seen.append((a, k)) or 7)
    assert tapegrad.warmup.compile_all((FWD,)) == 7
    with pytest.warns(DeprecationWarning, match=r"tapegrad\.warmup\.compile_all"):
        assert tg.compile_all(directions=(FWD,)) == 7
    assert seen == [(((FWD,),), {}), ((), {"directions": (FWD,)})]
