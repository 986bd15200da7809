"""The provable risk panel (privmarg.privacy.risk) against closed forms and dp-accounting."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from privmarg.privacy import Accountant
from privmarg.privacy.risk import (FPRS, attribute_success, max_advantage, membership_tpr, risk_panel,
                                   zcdp_profile)


def _gaussian_exact(mu: float, fpr: float) -> float:
    """The exact trade-off of one Gaussian mechanism (μ-GDP, μ = Δ/σ = √(2ρ)): the most powerful
    test's true-positive rate at ``fpr``."""
    return float(1.0 - norm.cdf(norm.ppf(1.0 - fpr) - mu))


@pytest.mark.parametrize("rho", [1e-4, 0.015, 0.2, 1.1, 5.0])
def test_bounds_hold_for_the_gaussian_mechanism_and_are_not_loose(rho):
    """A single Gaussian mechanism with ρ = μ²/2 is ρ-zCDP and exactly μ-GDP: the panel's bounds
    must sit at or above its exact trade-off curve and advantage 2Φ(μ/2) − 1, and not far above."""
    mu = np.sqrt(2 * rho)
    prof = zcdp_profile(rho)
    for fpr in FPRS:
        exact = _gaussian_exact(mu, fpr)
        bound = membership_tpr(prof, fpr)
        assert exact <= bound + 1e-12
        # not far above: the CKS conversion costs most at large ρ (zCDP admits worse mechanisms
        # than the Gaussian), 0.33 at ρ = 5 and FPR 0.1%
        assert bound - exact <= (0.35 if rho > 1.0 else 0.12)
    exact_adv = 2 * norm.cdf(mu / 2) - 1
    assert exact_adv <= max_advantage(prof) <= exact_adv + 0.25


def test_bounds_hold_against_dp_accountings_exact_privacy_profile():
    """dp-accounting's privacy loss distribution of a Gaussian gives its exact (ε, δ) pairs: the
    bounds they imply lie between the exact curve and the panel's (which uses the CKS conversion)."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma = 4.0
    rho = 1 / (2 * sigma**2)
    p = pld.from_gaussian_mechanism(standard_deviation=sigma, sensitivity=1.0)
    eps = np.geomspace(1e-3, 10, 200)
    exact_profile = np.column_stack([eps, [p.get_delta_for_epsilon(float(e)) for e in eps]])
    ours = zcdp_profile(rho)
    for fpr in FPRS:
        assert _gaussian_exact(1 / sigma, fpr) <= membership_tpr(exact_profile, fpr) + 1e-9
        assert membership_tpr(exact_profile, fpr) <= membership_tpr(ours, fpr) + 1e-9
    assert max_advantage(exact_profile) <= max_advantage(ours) + 1e-9


def test_no_budget_no_risk_and_more_budget_more_risk():
    acc = Accountant(1.0)
    panel = risk_panel(acc)
    assert panel.membership_tpr == {f: pytest.approx(f) for f in FPRS} and panel.max_advantage == 0
    assert panel.attribute_success == {b: pytest.approx(b) for b in panel.attribute_success}
    tprs = [membership_tpr(zcdp_profile(r), 0.01) for r in (0.001, 0.01, 0.1, 1.0)]
    assert all(a < b for a, b in zip(tprs, tprs[1:]))


def test_attribute_inference_pays_for_a_changed_record_under_add_remove():
    """A changed record is one step under replace-one, two under add/remove (group privacy)."""
    prof = zcdp_profile(0.05)
    one, two = attribute_success(prof, 0.1, "replace_one"), attribute_success(prof, 0.1, "add_remove")
    assert 0.1 < one < two <= 1.0
    eps, delta = prof[:, 0], prof[:, 1]
    assert one == pytest.approx(min(1.0, float(np.min(np.exp(eps) * 0.1 + delta))))


def test_approximate_steps_use_the_accountants_own_conversion():
    """A ledger with δ spent on value discovery is not plain zCDP: the panel reads the accountant's
    (ε, δ) pairs, every one above the δ already spent, and bounds at least as loose as without it."""
    plain = Accountant.from_epsilon_delta(1.0, 1e-6)
    plain.charge(plain.rho_total, "all", "gaussian", sigma=1.0, l2_sensitivity=1.0)
    approx = Accountant.from_epsilon_delta(1.0, 1e-6, delta_budget=5e-7)
    approx.charge(approx.rho_total, "all", "gaussian", sigma=1.0, l2_sensitivity=1.0, approx_delta=4e-7)
    b = risk_panel(approx)
    assert all(np.isfinite(list(b.membership_tpr.values())))
    same_rho = zcdp_profile(approx.rho_spent)  # the δ spent can only loosen the bounds
    assert b.max_advantage >= max_advantage(same_rho) - 1e-9
    assert all(b.membership_tpr[f] >= membership_tpr(same_rho, f) - 1e-9 for f in FPRS)
    assert risk_panel(plain).max_advantage < 1


def test_the_panel_reaches_reports_the_cli_and_the_html(tmp_path):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from privmarg.cli import app

    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.integers(0, 3, 300), "b": rng.integers(0, 4, 300)}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "dom.json").write_text('{"a": 3, "b": 4}')
    runner = CliRunner()
    r = runner.invoke(app, ["synth", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "dom.json"), "--method",
                            "mst", "-o", str(tmp_path / "s.csv"), "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0 and "membership test that wrongly accuses 1%" in " ".join(r.stderr.split())
    risk = json.loads((tmp_path / "r.json").read_text())["privacy"]["risk"]
    assert set(risk["membership_tpr_at_fpr"]) == {"0.001", "0.01", "0.1"}
    assert 0.01 < risk["membership_tpr_at_fpr"]["0.01"] < 1
    r = runner.invoke(app, ["evaluate", str(tmp_path / "d.csv"), str(tmp_path / "s.csv"), "--domain",
                            str(tmp_path / "dom.json"), "--run-report", str(tmp_path / "r.json"), "--metrics",
                            "tv_1way", "--no-baseline", "-o", str(tmp_path / "e.html")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "e.html").read_text()
    assert "What the privacy guarantee means for one person" in page and "finds at most" in page
    assert json.loads((tmp_path / "e.json").read_text())["privacy_risk"] == risk


def test_the_choosing_page_quotes_the_panel():
    """docs/choosing.md's table of what ε means is the panel's own numbers at δ = 1e-9."""
    import re
    from pathlib import Path

    from privmarg.privacy import cdp_rho

    text = (Path(__file__).resolve().parents[1] / "docs" / "choosing.md").read_text()
    rows = re.findall(r"^\| ([\d.]+) \| ([\d.]+)%[^|]*\| ([\d.]+)% \|$", text, re.M)
    assert len(rows) == 4
    for eps, tpr, adv in rows:
        prof = zcdp_profile(cdp_rho(float(eps), 1e-9))
        assert membership_tpr(prof, 0.01) * 100 == pytest.approx(float(tpr), abs=0.05 * float(tpr) + 0.01)
        assert max_advantage(prof) * 100 == pytest.approx(float(adv), abs=0.6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MST", "PrivBayes", "MWEM"])
def test_measured_marginal_bounds_cover_the_truth(name):
    """Every release made of Gaussian measurements states a 95% bound on each measured marginal's
    error (issue #45): over 12 seeds on adult, at least 95% of them hold; an unmeasured marginal has
    no bound (None), never a made-up number."""
    import privmarg
    from privmarg import Dataset, datasets

    df, dom = datasets.load("adult")
    data = Dataset(df[list(dom.attrs)].to_numpy()[:8000], dom)
    held, total = 0, 0
    for seed in range(12):
        m = getattr(privmarg, name)(1.0, 1e-9, seed=seed).fit(data, dom)
        syn = Dataset(np.asarray(m.sample_codes()), dom)
        for b in m.error_bounds(0.95):
            assert b.supported and 0 < b.l1_bound <= 2
            true = np.abs(data.project(b.attrs) / len(data) - syn.project(b.attrs) / len(syn)).sum()
            held += true <= b.l1_bound
            total += 1
        unmeasured = next(c for c in [("age", "sex", "race"), ("workclass", "fnlwgt", "hours-per-week")]
                          if not any(set(c) <= set(x.attrs) for x in m.measurements_))
        assert m.error_bound(unmeasured).l1_bound is None
    assert total >= 12 * 5 and held / total >= 0.95, (held, total)


def test_max_auc_closed_forms():
    """The AUC bound is the area under the (ε, δ) trade-off curve: e^ε/(1+e^ε) for pure ε, 0.5
    for ε = 0; for ρ-zCDP at least the Gaussian mechanism's Φ(√ρ) (which attains its ρ) and above
    the coin toss, growing with ρ."""
    from scipy.stats import norm

    from privmarg.privacy.risk import max_auc, zcdp_profile

    for eps in (0.0, 0.5, 1.0, 3.0):
        exact = np.exp(eps) / (1 + np.exp(eps))
        assert exact <= max_auc(np.array([[eps, 0.0]])) <= exact + 1e-3
    last = 0.5
    for rho in (0.001, 0.015, 0.125, 0.9, 3.0):
        got = max_auc(zcdp_profile(rho))
        assert norm.cdf(np.sqrt(rho)) <= got <= 1.0 and got > last
        last = got


def test_roc_auc_matches_brute_force_with_ties():
    from privmarg.evaluation.attack import roc_auc

    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 40).astype(float), rng.integers(0, 5, 30).astype(float)
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert roc_auc(pos, neg) == pytest.approx(brute, abs=1e-12)


def test_membership_attack_sees_a_copy_and_not_an_independent_sample():
    """A 'synthetic' table that copies the members is caught (AUC far above 0.5); one drawn
    afresh from the population is not (AUC near 0.5)."""
    from privmarg import Dataset, Domain
    from privmarg.evaluation.attack import membership_attack

    rng = np.random.default_rng(1)
    dom = Domain([f"c{i}" for i in range(6)], [8] * 6)

    def draw(n):
        return Dataset(rng.integers(0, 8, size=(n, 6)), dom)

    members, non_members, reference = draw(400), draw(400), draw(4000)
    copy = membership_attack(members, non_members, members, reference)
    fresh = membership_attack(members, non_members, draw(400), reference)
    assert copy.auc > 0.75 and copy.tpr_at_fpr[0.1] > 0.3
    assert abs(fresh.auc - 0.5) < 0.06
    assert set(copy.to_dict()) >= {"auc", "tpr_at_fpr", "members", "non_members", "note"}
