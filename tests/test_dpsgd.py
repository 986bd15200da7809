"""DP-SGD on the zCDP ledger (issue 20): the RDP accounting against Opacus's own accountant and
dp-accounting's PLD, the calibration that never exceeds (ε, δ), the ledger rules, the session's
clipping, and a DP-TabDDPM / DP-MERF run whose report is recomputed independently."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
dp_accounting = pytest.importorskip("dp_accounting")
opacus = pytest.importorskip("opacus")
from opacus.accountants import RDPAccountant  # noqa: E402
from opacus.accountants.analysis import rdp as opacus_rdp  # noqa: E402

from privmarg.privacy import Accountant, cdp_eps, cdp_rho, recompute_rho  # noqa: E402
from privmarg.privacy.dpsgd import clip_rows, clipped_sum, dp_sgd_phase  # noqa: E402
from privmarg.privacy.rdp import ORDERS, ORDERS_WOR, calibrate_noise_multiplier, composed_epsilon  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_contract import FAST_PRESET, table  # noqa: E402

GRID = [(z, q, T) for z in (0.8, 1.1, 2.0, 5.0) for q in (0.001, 0.01, 0.1) for T in (10, 1000, 10000)]


def opacus_epsilon(rho_before, z, q, T, delta, orders=ORDERS):
    """Opacus's own RDP analysis (an implementation independent of dp-accounting's) on the same
    orders, plus the zCDP charges as α·ρ, converted by Opacus."""
    curve = opacus_rdp.compute_rdp(q=q, noise_multiplier=z, steps=T, orders=list(orders))
    curve = np.asarray(curve) + rho_before * np.asarray(orders)
    eps, _ = opacus_rdp.get_privacy_spent(orders=list(orders), rdp=curve, delta=delta)
    return float(eps)


INTEGER_ORDERS = list(range(2, 65)) + [80, 96, 128, 256]


@pytest.mark.parametrize("z, q, T", GRID)
def test_subsampled_gaussian_matches_opacus(z, q, T):
    delta = 1e-6
    phase = [dict(noise_multiplier=z, steps=T, sample_rate=q)]
    # integer orders: both libraries evaluate the same closed form
    assert composed_epsilon(0.0, delta, "add_remove", phase, INTEGER_ORDERS) == pytest.approx(
        opacus_epsilon(0.0, z, q, T, delta, INTEGER_ORDERS), rel=1e-9)
    ours = composed_epsilon(0.0, delta, "add_remove", phase)
    if ours > 30:
        return  # a useless regime, where the two series for fractional orders part (dp-accounting's
        # drops an order whose series does not converge: looser, still valid)
    assert ours == pytest.approx(opacus_epsilon(0.0, z, q, T, delta), rel=1e-2)
    # Opacus's accountant as users run it: its orders stop at 63 where ours go on to 512, so ours is
    # as tight (the same where the best order is below 63) or tighter (small ε: high orders)
    acc = RDPAccountant()
    acc.history = [(z, q, T)]
    assert ours <= acc.get_epsilon(delta) * (1 + 1e-2)


@pytest.mark.parametrize("rho_before", [1e-4, 0.01, 0.1])
@pytest.mark.parametrize("z, q, T", [(1.1, 0.01, 1000), (3.0, 0.05, 200)])
def test_composition_with_zcdp_matches_opacus_and_bounds_pld(rho_before, z, q, T):
    delta = 1e-7
    ours = composed_epsilon(rho_before, delta, "add_remove", [dict(noise_multiplier=z, steps=T, sample_rate=q)])
    assert ours == pytest.approx(opacus_epsilon(rho_before, z, q, T, delta), rel=1e-4)
    # RDP is an upper bound: the (tighter) PLD accountant must not find more. A ρ-zCDP part is a
    # Gaussian of noise multiplier 1/√(2ρ), which the PLD accountant composes exactly.
    from dp_accounting import dp_event as E
    from dp_accounting.pld import PLDAccountant

    pld = PLDAccountant(value_discretization_interval=1e-3)
    pld.compose(E.GaussianDpEvent(1 / math.sqrt(2 * rho_before)))
    pld.compose(E.SelfComposedDpEvent(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(z)), T))
    assert pld.get_epsilon(delta) <= ours * (1 + 1e-9)
    # and composition costs something on both sides
    assert ours > cdp_eps(rho_before, delta) * (1 - 1e-12)
    assert ours > composed_epsilon(0.0, delta, "add_remove", [dict(noise_multiplier=z, steps=T, sample_rate=q)])


def test_replace_one_uses_sampling_without_replacement():
    from dp_accounting import dp_event as E
    from dp_accounting import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(list(ORDERS_WOR), NeighboringRelation.REPLACE_ONE)
    acc.compose(E.ZCDpEvent(0.01))
    acc.compose(E.SelfComposedDpEvent(E.SampledWithoutReplacementDpEvent(1000, 50, E.GaussianDpEvent(2.0)), 100))
    ours = composed_epsilon(0.01, 1e-6, "replace_one", [dict(noise_multiplier=2.0, steps=100, batch_size=50,
                                                              population=1000)])
    assert ours == pytest.approx(acc.get_epsilon(1e-6), rel=1e-12)
    with pytest.raises(ValueError, match="batch_size"):
        composed_epsilon(0.0, 1e-6, "replace_one", [dict(noise_multiplier=2.0, steps=10, sample_rate=0.05)])


@pytest.mark.parametrize("eps, delta, share, q, T", [(0.2, 1e-5, 0.1, 0.01, 500), (1.0, 1e-9, 0.05, 0.05, 300),
                                                     (2.5, 1e-5, 0.0, 0.2, 50), (4.0, 1e-6, 0.3, 0.02, 2000)])
def test_calibration_meets_the_target_and_never_exceeds_it(eps, delta, share, q, T):
    rho_total = cdp_rho(eps, delta)
    before = share * rho_total
    z = calibrate_noise_multiplier(rho_total - before, before, delta, "add_remove", T, sample_rate=q)
    got = composed_epsilon(before, delta, "add_remove", [dict(noise_multiplier=z, steps=T, sample_rate=q)])
    assert got <= eps and got == pytest.approx(eps, rel=1e-9)
    # the smallest such z: a little less noise would exceed the target
    less = composed_epsilon(before, delta, "add_remove", [dict(noise_multiplier=z * (1 - 1e-6), steps=T,
                                                               sample_rate=q)])
    assert less > eps
    # an independent check of the final number (Opacus's analysis)
    assert opacus_epsilon(before, z, q, T, delta) <= eps * (1 + 1e-4)


def test_more_budget_than_the_least_noise_needs_is_left_unspent():
    rho = cdp_rho(8.0, 1e-6)
    z = calibrate_noise_multiplier(rho, 0.0, 1e-6, "add_remove", 100, sample_rate=0.001)
    assert z == 0.5  # the floor: it spends less than it may, never more
    assert composed_epsilon(0.0, 1e-6, "add_remove", [dict(noise_multiplier=z, steps=100, sample_rate=0.001)]) < 8.0


def test_ledger_entry_recomputes_and_ends_the_run():
    acc = Accountant.from_epsilon_delta(1.0, 1e-6, "add_remove")
    acc.charge(0.002, "count", "gaussian", sigma=math.sqrt(1 / 0.004), l2_sensitivity=1.0)
    phase = dp_sgd_phase(acc, np.zeros((500, 2), dtype=np.int64), np.random.default_rng(0), rho=acc.rho_remaining,
                         steps=40, clip=1.0, size=3, what="sgd", sample_rate=0.1, denominator=50.0)
    rep = acc.to_dict()
    json.dumps(rep)  # the ledger stays JSON
    e = rep["ledger"][-1]
    assert e["mechanism"] == "subsampled_gaussian" and e["rho_before"] == pytest.approx(0.002)
    assert recompute_rho(e) == e["rho"]
    assert acc.rho_spent == pytest.approx(acc.rho_total, rel=1e-9)
    assert acc.epsilon_spent(1e-6) == pytest.approx(1.0, rel=1e-9)
    # at another delta the RDP composition is redone (not the zCDP equivalent, valid at 1e-6 only)
    other = composed_epsilon(0.002, 1e-3, "add_remove", [e])
    assert acc.epsilon_spent(1e-3) == pytest.approx(other, rel=1e-12)
    with pytest.raises(ValueError, match="last charge"):
        acc.charge(0.0, "more", "gaussian", sigma=1.0, l2_sensitivity=0.0)
    # a tampered parameter no longer recomputes to the recorded rho
    assert recompute_rho({**e, "noise_multiplier": e["noise_multiplier"] * 0.9}) > e["rho"]
    for _ in range(40):
        phase.step(lambda b: np.ones((len(b), 3)))
    with pytest.raises(RuntimeError, match="every step"):
        phase.step(lambda b: np.ones((len(b), 3)))


def test_dp_sgd_needs_delta_and_denominator():
    acc = Accountant(0.1, "add_remove")  # rho given: no delta to convert at
    with pytest.raises(ValueError, match="delta"):
        dp_sgd_phase(acc, np.zeros((10, 1), dtype=np.int64), np.random.default_rng(0), rho=0.1, steps=5, clip=1.0,
                     size=1, what="x", sample_rate=0.5, denominator=5.0)
    acc = Accountant.from_epsilon_delta(1.0, 1e-6)
    with pytest.raises(ValueError, match="denominator"):
        dp_sgd_phase(acc, np.zeros((10, 1), dtype=np.int64), np.random.default_rng(0), rho=0.01, steps=5, clip=1.0,
                     size=1, what="x", sample_rate=0.5)


def test_clipping_bounds_every_row_and_the_noise_has_the_charged_scale():
    import torch

    x = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    c = clip_rows(x, 1.0)
    assert np.allclose(np.linalg.norm(c, axis=1), [1.0, 0.5, 0.0])
    assert torch.allclose(clip_rows(torch.as_tensor(x), 1.0), torch.as_tensor(c))
    for nb, l2 in (("add_remove", 2.0), ("replace_one", 4.0)):
        acc = Accountant(100.0, nb)
        rng = np.random.default_rng(1)
        big = lambda r: np.full((len(r), 1000), 10.0)  # noqa: E731 - norm 316 per row, clipped to 2
        out = clipped_sum(acc, np.zeros((30, 1), dtype=np.int64), big, 2.0, 0.5, rng, "sum")
        e = acc.to_dict()["ledger"][0]
        assert e["l2_sensitivity"] == l2 and recompute_rho(e) == pytest.approx(l2**2 / (2 * 0.25))
        expect = 30 * 2.0 / math.sqrt(1000)  # each row clipped to norm 2, spread evenly
        assert np.mean(out) == pytest.approx(expect, abs=0.1) and np.std(out) == pytest.approx(0.5, rel=0.1)


def test_ghost_clipping_equals_the_materialised_per_record_gradients(one_torch_thread):
    """Opacus's ghost clipping as TabDDPM uses it (norms from the hooks, then one weighted backward
    pass) gives the per-record gradient norms of a small MLP (checked one record at a time with
    autograd), and its clipped sum is the materialised matrix's clip_rows(...).sum(0)."""
    import warnings

    import torch
    from opacus.grad_sample import GradSampleModuleFastGradientClipping

    from privmarg.generate.neural import mlp
    from privmarg.privacy.dpsgd import clipped_row_sum
    from privmarg.select.tabddpm import _GhostRows

    torch.manual_seed(0)
    net = mlp(6, [5, 4], 3, "SiLU")
    x, y = torch.randn(7, 6), torch.randn(7, 3)
    params = list(net.parameters())
    dense = []
    for i in range(7):
        gi = torch.autograd.grad(((net(x[i:i + 1]) - y[i:i + 1]) ** 2).sum() * (i + 1), params)
        dense.append(torch.cat([g.reshape(-1) for g in gi]))
    dense = torch.stack(dense)
    gsm = GradSampleModuleFastGradientClipping(net, loss_reduction="sum", max_grad_norm=1.0, use_ghost_clipping=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        losses = ((gsm(x) - y) ** 2).sum(1) * torch.arange(1.0, 8.0)  # per-record losses of different size
        losses.sum().backward(retain_graph=True)
    norms = gsm.get_norm_sample().detach()
    gsm.disable_hooks()
    rows = _GhostRows(losses, params, norms)
    assert torch.allclose(rows.norms(), dense.norm(dim=1), rtol=1e-5)
    for clip in (1e-3, float(dense.norm(dim=1).median()), 1e6):  # all, some, none of the rows clipped
        assert torch.allclose(clipped_row_sum(rows, clip), clip_rows(dense, clip).sum(0), rtol=1e-4, atol=1e-7)
    gsm.cleanup()


def test_poisson_batches_have_the_charged_rate():
    acc = Accountant.from_epsilon_delta(5.0, 1e-6)
    recs = np.arange(2000)[:, None]
    phase = dp_sgd_phase(acc, recs, np.random.default_rng(0), rho=acc.rho_total, steps=50, clip=1.0, size=1,
                         what="x", sample_rate=0.05, denominator=100.0)
    sizes = []
    for _ in range(50):
        phase.step(lambda b: (sizes.append(len(b)), np.zeros((len(b), 1)))[1])
    assert np.mean(sizes) == pytest.approx(100, rel=0.1)


@pytest.mark.parametrize("name", ["tabddpm", "dpmerf"])
def test_a_run_reports_one_epsilon_that_an_independent_accountant_confirms(name):
    from privmarg import registry

    eps, delta = 1.0, 1e-6
    m = registry.make_preset(name, eps, delta, seed=0, **FAST_PRESET[name]).fit(table())
    rep = m.privacy_report()
    assert rep["epsilon_spent"] <= eps * (1 + 1e-9) and rep["epsilon_spent"] == pytest.approx(eps, rel=1e-6)
    ledger = rep["ledger"]
    if name == "tabddpm":
        e = ledger[-1]
        zcdp = sum(c["rho"] for c in ledger[:-1])
        assert e["mechanism"] == "subsampled_gaussian" and e["rho_before"] == pytest.approx(zcdp, rel=1e-12)
        # Opacus's analysis, on its own, of what the ledger says happened
        theirs = opacus_epsilon(zcdp, e["noise_multiplier"], e["sample_rate"], e["steps"], delta)
        assert theirs == pytest.approx(eps, rel=1e-4)
        assert e["sigma"] == pytest.approx(e["noise_multiplier"] * e["clip"])
    else:
        assert all(c["mechanism"] in ("gaussian", "discrete_gaussian") for c in ledger)
        assert cdp_eps(sum(c["rho"] for c in ledger), delta) <= eps * (1 + 1e-9)


def test_tabddpm_refuses_rho_alone():
    from privmarg import TabDDPM

    with pytest.raises(ValueError, match="delta"):
        TabDDPM(None, None, rho=0.1)


def test_cli_runs_the_deep_methods_and_refuses_duckdb(tmp_path):
    import pandas as pd
    from typer.testing import CliRunner

    from privmarg.cli import app

    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.integers(0, 3, 300), "b": rng.integers(0, 4, 300)}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "dom.json").write_text(json.dumps({"a": 3, "b": 4}))
    runner = CliRunner()
    for method in ("tabddpm",):  # dpmerf: the same plumbing, 2000 default training steps (slow here)
        out, rep = tmp_path / f"{method}.csv", tmp_path / f"{method}.json"
        r = runner.invoke(app, ["synth", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "dom.json"), "--method",
                                method, "--epsilon", "2", "--delta", "1e-6", "--seed", "0", "-o", str(out),
                                "--report", str(rep)])
        assert r.exit_code == 0, r.output
        report = json.loads(rep.read_text())["privacy"]
        assert report["epsilon_spent"] == pytest.approx(2.0, rel=1e-6)
        assert pd.read_csv(out).shape[1] == 2
    pytest.importorskip("duckdb")
    r = runner.invoke(app, ["synth", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "dom.json"), "--method",
                            "tabddpm", "--backend", "duckdb", "-o", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "whole records" in r.output


def test_a_dpsgd_ledger_entry_says_its_rho_is_an_equivalent_only():
    """Its rho reproduces the run's ε at its δ only (the phase is accounted in Rényi DP): the
    ledger says so instead of presenting it as a zCDP charge like the others."""
    from privmarg.privacy import Accountant

    acc = Accountant(1.0)
    acc.charge(0.1, "a marginal", "gaussian", sigma=3.0)
    acc.charge(0.2, "DP-SGD", "subsampled_gaussian")
    first, last = acc.to_dict()["ledger"]
    assert "rho_is" not in first
    assert "delta only" in last["rho_is"] and "Renyi" in last["rho_is"]
