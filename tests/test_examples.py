"""Smoke tests of the example scripts at reduced size (no window opens: Agg backend)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    if str(EXAMPLES) not in sys.path:  # the examples import their helper module `common`
        sys.path.insert(0, str(EXAMPLES))
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


def _plot_ok(path):
    assert path.exists() and path.stat().st_size > 10_000


def test_lennard_jones_forces_and_relaxation(tmp_path):
    lj = _load("lennard_jones")
    out = tmp_path / "lj.png"
    r = lj.main(["--atoms", "13", "--no-progress", "--out", str(out)])
    assert r["force_error"] < 1e-10  # autodiff forces equal the analytic ones
    assert r["energy"] < r["start"] - 10 and r["residual_force"] < 1e-4
    assert r["energy"] < -40  # LJ13's minimum is -44.33
    _plot_ok(out)


def test_gaussian_process_recovers_noise(tmp_path):
    gp = _load("gaussian_process")
    out = tmp_path / "gp.png"
    r = gp.main(["--points", "40", "--no-progress", "--out", str(out)])
    assert r["success"] and 0.05 < r["noise"] < 0.2 and r["rmse"] < 0.15
    _plot_ok(out)


def test_spirals_mlp_trains_with_replay(tmp_path):
    mlp = _load("spirals_mlp")
    out = tmp_path / "mlp.png"
    r = mlp.main(
        [
            "--points",
            "60",
            "--hidden",
            "16",
            "--iterations",
            "300",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    assert r["losses"][-1] < r["losses"][0] / 5
    assert r["accuracy"] > 0.85
    assert r["stats"]["captures"] == 1 and r["stats"]["replays"] == 300
    _plot_ok(out)


def test_logistic_regression_matches_newton(tmp_path):
    lr = _load("logistic_regression")
    out = tmp_path / "lr.png"
    r = lr.main(["--samples", "200", "--no-progress", "--out", str(out)])
    assert r["difference"] < 1e-6
    _plot_ok(out)


def test_lotka_volterra_uncertainty_from_the_hessian(tmp_path):
    ex = _load("lotka_volterra_uncertainty")
    out = tmp_path / "lvu.png"
    r = ex.main(["--n-obs", "21", "--bootstrap", "12", "--no-progress", "--out", str(out)])
    newton, lbfgs = r["results"]["Newton-CG"], r["results"]["L-BFGS-B"]
    assert np.max(np.abs(newton.jac)) < 1e-4 and newton.nit < lbfgs.nit  # exact HVPs
    np.testing.assert_allclose(newton.fun, lbfgs.fun, rtol=1e-6)
    # the Laplace standard errors agree with the spread of the bootstrap refits, and the
    # truth lies within a few of them
    ratio = r["errors"] / r["spread"]
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio
    assert np.all(np.abs(r["estimates"] - ex.TRUE) < 4 * r["errors"])
    _plot_ok(out)


def test_pharmacokinetics_robust_likelihood_beats_normal(tmp_path):
    pk = _load("pharmacokinetics")
    out = tmp_path / "pk.png"
    r = pk.main(["--no-progress", "--out", str(out)])
    normal, robust = r["normal"], r["robust"]
    assert normal["result"].success and robust["result"].success
    # the t likelihood shrugs off the gross errors: every parameter group is closer
    assert np.all(robust["error"].mean(axis=0) < normal["error"].mean(axis=0))
    assert robust["error"].mean() < 0.1
    _plot_ok(out)


def test_spring_network_recovers_stiffnesses_through_its_equilibrium(tmp_path):
    sn = _load("spring_network")
    out = tmp_path / "sn.png"
    k_fit, _, rel = sn.main(["--rows", "4", "--cols", "4", "--no-progress", "--out", str(out)])
    assert rel < 1e-4  # the implicit gradient against central differences
    np.testing.assert_allclose(k_fit, np.exp(sn.TRUE_LOG_K), rtol=0.1)
    assert out.exists() and out.stat().st_size > 10_000


def test_conductivity_field_fitted_through_sparse_solves(tmp_path):
    cond = _load("conductivity")
    out = tmp_path / "cond.png"
    res, error, rel = cond.main(["--m", "16", "--iters", "80", "--no-progress", "--out", str(out)])
    assert res.success
    assert rel < 1e-6  # the gradient against central differences, along a random direction
    assert error < 0.3  # the field, relative to its spread
    assert out.exists() and out.stat().st_size > 10_000


def test_private_classifier_learns_with_clipped_per_example_gradients(tmp_path):
    pc = _load("private_classifier")
    out = tmp_path / "pc.png"
    acc = pc.main(["--epochs", "15", "--no-progress", "--out", str(out)])
    assert acc["plain"] > 0.85 and acc["clipped and noised"] > 0.8
    _plot_ok(out)
