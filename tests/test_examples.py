"""Smoke tests of the example scripts at reduced size (no window opens: Agg backend)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_lotka_volterra_recovers_true_parameters(tmp_path):
    lv = _load("lotka_volterra")
    out = tmp_path / "lv.png"
    est, res = lv.main(["--n-obs", "21", "--noise", "0.05", "--no-progress", "--out", str(out)])
    assert res.success
    np.testing.assert_allclose(est, lv.TRUE, rtol=0.1)
    assert out.exists() and out.stat().st_size > 10_000


def test_lotka_volterra_on_hudson_bay_data(tmp_path):
    lv = _load("lotka_volterra")
    out = tmp_path / "hb.png"
    est, res = lv.main(["--data", "hudson-bay", "--no-progress", "--out", str(out)])
    # the well-known fit of this data set: alpha ~ 0.55, beta ~ 0.028, gamma ~ 0.80,
    # delta ~ 0.024 (e.g. the Stan case study's posterior means)
    np.testing.assert_allclose(est[:4], [0.55, 0.028, 0.80, 0.024], rtol=0.15)
    assert res.fun < 0.06
    assert out.exists() and out.stat().st_size > 10_000
