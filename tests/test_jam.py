"""JAM-PGM (SPEC §7): joint public/private selection, frugal budgeting, accounting, CLI."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import AIM, JAM, Dataset, Domain, StructuralZero
from privmarg.core import Measurement
from privmarg.cli import app
from privmarg.evaluation import workload_error
from privmarg import registry
from privmarg.privacy import cdp_rho
from privmarg.core import all_kway

FAST = dict(iters=60, final_iters=150)


def chain_table(n, seed=0, flip=0.1):
    """Five attributes with strong chain structure."""
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d", "e"], [4, 3, 5, 2, 6])
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = (c > 2).astype(int) ^ (rng.random(n) < flip)
    e = np.where(rng.random(n) < 0.9, a, 5)
    return Dataset(np.column_stack([a, b, c, d, e]), dom)


def far_table(n, dom, seed=1):
    """Public data from a very different distribution: independent and concentrated on few values."""
    rng = np.random.default_rng(seed)
    cols = [np.where(rng.random(n) < 0.8, k - 1, rng.integers(0, k, n)) for k in dom.shape]
    return Dataset(np.column_stack(cols), dom)


def rounds_by_source(mech):
    return [e["source"] for e in mech.log_]


def check_ledger(mech):
    """Selections are charged every round; Gaussians only in private rounds; total ≤ budget."""
    ledger = mech.privacy_report()["ledger"]
    blend = [c for c in ledger if c["what"].startswith("JAM blend")]
    assert len(blend) <= 1 and all(c["mechanism"] == "exponential" for c in blend)
    by_round = {}
    for c in ledger:
        if c in blend:
            continue
        t = int(c["what"].split()[2])
        by_round.setdefault(t, []).append(c)
    assert sorted(by_round) == [e["round"] for e in mech.log_]
    for e in mech.log_:
        charges = by_round[e["round"]]
        kinds = [c["mechanism"] for c in charges]
        if e["source"] == "public":
            assert kinds == ["exponential"]  # only the selection is paid for
        else:
            assert kinds == ["exponential", "gaussian"]
            g = charges[1]
            assert g["l2_sensitivity"] == pytest.approx(math.sqrt(2))
            assert g["rho"] == pytest.approx(1 / g["sigma"] ** 2, rel=1e-12)
            assert g["rho"] == pytest.approx(e["rho_measure"], rel=1e-12)
        sel = charges[0]
        assert sel["sensitivity"] == 4.0
        assert sel["rho"] == pytest.approx(sel["epsilon"] ** 2 / 8, rel=1e-12)
        assert sel["rho"] == pytest.approx(e["rho_select"], rel=1e-12)
    spent = sum(c["rho"] for c in ledger)
    assert spent <= mech.rho_total * (1 + 1e-9)
    assert spent == pytest.approx(mech.rho_used_, rel=1e-12)
    return spent


def test_identical_public_data_tiny_epsilon_beats_aim():
    data = chain_table(20000, seed=0)
    dom, wl = data.domain, all_kway(data.domain, 2)
    errs_jam, errs_aim, n_pub, n_all = [], [], 0, 0
    for seed in range(2):
        jam = JAM(0.05, 1e-6, workload="all-2way", rounds=10, seed=seed, **FAST).fit(data, public=data)
        errs_jam.append(workload_error(data, Dataset(jam.sample_codes(), dom), wl))
        n_pub += len(jam.public_marginals_)
        n_all += len(jam.log_)
        check_ledger(jam)
        aim = AIM(0.05, 1e-6, workload="all-2way", seed=seed, neighbour="replace_one", **FAST).fit(data)
        errs_aim.append(workload_error(data, Dataset(aim.sample_codes(), dom), wl))
    assert n_pub / n_all > 0.5
    assert np.mean(errs_jam) < 0.3 * np.mean(errs_aim)


def test_far_public_data_is_mostly_measured_privately():
    data = chain_table(3000, seed=0)
    public = far_table(2000, data.domain)
    n_priv = n_all = 0
    for seed in range(2):
        jam = JAM(1.0, 1e-6, workload="all-2way", rounds=10, seed=seed, **FAST).fit(data, public=public)
        n_priv += len(jam.private_marginals_)
        n_all += len(jam.log_)
        check_ledger(jam)
        # spends everything when it never chooses public (up to the rounds that did)
        if not jam.public_marginals_:
            assert jam.rho_used_ == pytest.approx(jam.rho_total, rel=1e-9)
    assert n_priv / n_all >= 0.8


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 5.0])
def test_ledger_and_frugal_budgeting(epsilon):
    data = chain_table(3000, seed=1)
    public = chain_table(500, seed=7, flip=0.3)  # similar but biased
    jam = JAM(epsilon, 1e-6, workload="all-2way", rounds=8, alpha=0.2, seed=3, **FAST).fit(data, public=public)
    spent = check_ledger(jam)
    rho = cdp_rho(epsilon, 1e-6)
    assert jam.rho_total == pytest.approx(rho, rel=1e-12)
    assert len(jam.log_) == 8
    # frugal budget: ρ_t = (ρ − ρ_used)/(T − t), recomputed from the ledger
    used = 0.0
    for t, e in enumerate(jam.log_):
        assert e["rho_round"] == pytest.approx((rho - used) / (8 - t), rel=1e-9)
        assert e["rho_select"] == pytest.approx(0.2 * e["rho_round"], rel=1e-9)
        used += e["rho_select"] + e["rho_measure"]
    blend = sum(c["rho"] for c in jam.privacy_report()["ledger"] if c["what"].startswith("JAM blend"))
    assert spent - blend == pytest.approx(used, rel=1e-9)
    # reporting: the two lists partition the measurements, in selection order
    assert len(jam.public_marginals_) + len(jam.private_marginals_) == 8
    assert [m["source"] for m in jam.measurements_report()] == rounds_by_source(jam)
    # unspent measurement budget rolls forward: the rounds use all of it unless the last one was
    # public; what they leave buys the blend with the public records
    last = jam.log_[-1]
    if last["source"] == "private":
        assert spent - blend == pytest.approx(rho, rel=1e-9) and blend == 0
    else:
        assert spent - blend == pytest.approx(rho - 0.8 * last["rho_round"], rel=1e-9)
        # the leftover buys the blend unless ε·N is too small for a choice (then it stays unspent)
        assert blend == 0 or blend == pytest.approx(0.8 * last["rho_round"], rel=1e-6)


def test_public_rows_rescaled_and_rows_public():
    data = chain_table(3000, seed=2)
    public = Dataset(data.codes[:1000], data.domain)  # a third of the rows: answers scaled by 3
    jam = JAM(0.2, 1e-6, workload="all-2way", rounds=6, seed=0, **FAST).fit(data, public=public)
    for m in jam.measurements_:
        if m.source == "public":
            assert m.y.sum() == pytest.approx(3000)
            assert np.allclose(m.y, 3 * public.project(m.attrs))
    assert jam.privacy_report()["neighbour"] == "replace_one"
    assert len(jam.sample_codes()) == 3000


def test_structural_zeros_weighting_and_reproducibility():
    data = chain_table(3000, seed=0)
    dom = data.domain
    zero = StructuralZero.from_cells(dom, ("e",), [(4,)])  # e = 4 never occurs
    public = far_table(1000, dom)
    outs = []
    for _ in range(2):
        jam = JAM(1.0, 1e-6, workload="all-2way", rounds=6, seed=11, weighting="mle", **FAST)
        jam.fit(data, public=public, zeros=[zero])
        codes = jam.sample_codes()
        assert zero.violations(codes, dom) == 0
        outs.append((codes, [e["selected"] for e in jam.log_]))
    assert np.array_equal(outs[0][0], outs[1][0]) and outs[0][1] == outs[1][1]


def test_bad_arguments():
    data = chain_table(500)
    with pytest.raises(ValueError, match="replace-one"):
        JAM(1.0, 1e-6, neighbour="add_remove")
    with pytest.raises(ValueError, match="weighting"):
        JAM(1.0, 1e-6, weighting="nope")
    with pytest.raises(ValueError, match="public"):
        JAM(1.0, 1e-6).fit(data)
    other = Dataset(np.zeros((10, 2), dtype=int), Domain(["a", "b"], [4, 3]))
    with pytest.raises(ValueError):
        JAM(1.0, 1e-6).fit(data, public=other)
    assert registry.preset_class("jam") is JAM


def test_cli_jam(tmp_path):
    data = chain_table(800, seed=0)
    dom = data.domain
    (tmp_path / "domain.json").write_text(json.dumps(dict(zip(dom.attrs, map(int, dom.shape)))))
    data.to_frame().to_csv(tmp_path / "priv.csv", index=False)
    data.to_frame().iloc[:300].to_csv(tmp_path / "pub.csv", index=False)
    runner = CliRunner()
    base = ["synth", str(tmp_path / "priv.csv"), "--domain", str(tmp_path / "domain.json"), "--method", "jam",
            "--epsilon", "0.5", "--delta", "1e-6", "--seed", "0", "--workload", "all-2way"]
    r = runner.invoke(app, base + ["--output", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "--public" in r.output
    assert not (tmp_path / "x.csv").exists()
    out, rep = tmp_path / "syn.csv", tmp_path / "rep.json"
    r = runner.invoke(app, base + ["--public", str(tmp_path / "pub.csv"), "--output", str(out), "--report", str(rep)])
    assert r.exit_code == 0, r.output
    assert len(pd.read_csv(out)) == 800
    report = json.loads(rep.read_text())
    assert report["privacy"]["neighbour"] == "replace_one"
    assert report["privacy"]["rho_spent"] <= report["privacy"]["rho_total"] * (1 + 1e-9)
    assert {m["source"] for m in report["measurements"]} <= {"public", "private"}
    assert [m["source"] for m in report["measurements"]] == [e["source"] for e in report["rounds"]]


def test_final_iters_zero_samples_the_last_rounds_model():
    """``final_iters=0``: as in the paper, the records come from the last round's estimate, with no
    further fitting; by default (5) the released model goes on from it (in the loop's float32, with
    float64 tables released). The loop model's tables are float64 too (recomputed after its float32
    fit: the bounds that spare scoring rest on them)."""
    data, public = chain_table(3000), chain_table(2000, seed=5, flip=0.3)
    default = JAM(1.0, 1e-9, rounds=6, seed=2, final_iters=5).fit(data, public=public)
    assert 0 < default.model_.info.iterations <= 5
    assert default.model_.marginals[0].dtype == np.float64
    assert default.model_.info.loss < default.selection_.model.info.loss
    mech = JAM(1.0, 1e-9, rounds=6, seed=2, final_iters=0).fit(data, public=public)
    # the same picks and answers: only the end differs
    assert [(m.attrs, m.source) for m in mech.measurements_] == [(m.attrs, m.source) for m in default.measurements_]
    for a, b in zip(mech.measurements_, default.measurements_):
        np.testing.assert_array_equal(a.y, b.y)
    assert mech.model_.info.iterations == 0
    loop = mech.selection_.model
    assert loop.potentials.keys() == mech.model_.potentials.keys()
    for r, phi in loop.potentials.items():  # the same potentials: nothing was fitted after the loop
        np.testing.assert_array_equal(mech.model_.potentials[r], phi)
    assert loop.marginals[0].dtype == np.float64 and mech.model_.marginals[0].dtype == np.float64
    for r in [("a",), ("b", "c"), ("c", "d", "e")]:
        np.testing.assert_allclose(mech.model_.project(r), loop.project(r), rtol=1e-12, atol=1e-9)


def test_selector_alone_refits_like_the_preset():
    """The jam selector composed by hand (registry, another generator) refits its loop model as the
    JAM preset does: same picks and answers on the same seed."""
    from privmarg import Synthesizer
    from privmarg.generate.pgm import PGM
    from privmarg.select import JAMSelector

    loop, preset_loop = JAMSelector().loop, JAM().selector.loop
    for attr in ("iters", "tol", "method", "dtype", "model_dtype"):
        assert getattr(loop, attr) == getattr(preset_loop, attr), attr
    data = chain_table(1500, seed=4)
    public = chain_table(800, seed=5, flip=0.2)
    kw = dict(epsilon=0.5, delta=1e-9, seed=3, neighbour="replace_one")
    by_hand = Synthesizer(JAMSelector("all-2way", rounds=6), PGM(iters=5, tol=1e-5, method="precond"), **kw)
    preset = JAM(workload="all-2way", rounds=6, **{k: v for k, v in kw.items() if k != "neighbour"})
    a, b = by_hand.fit(data, public=public), preset.fit(data, public=public)
    assert [(m.attrs, m.source) for m in a.measurements_] == [(m.attrs, m.source) for m in b.measurements_]
    for m, n in zip(a.measurements_, b.measurements_):
        np.testing.assert_array_equal(m.y, n.y)


def test_noise_ratio_closed_form():
    from privmarg.select.jam import noise_ratio, precise_measurements

    # σ = Δ₂ / √(2(1 − α)ρ/T); ratio = √(2/π)·σ·cells/N
    rho, T, alpha, l2, n, cells = 0.5, 30, 0.2, math.sqrt(2), 10_000, 400
    sigma = l2 / math.sqrt(2 * 0.8 * rho / T)
    assert noise_ratio(rho, T, alpha, l2, n, cells) == pytest.approx(math.sqrt(2 / math.pi) * sigma * cells / n)
    # the boundary: precise exactly when the paper's plan gives a ratio of at most 1
    edge = (math.sqrt(2 / math.pi) * cells / n) ** 2 * l2**2 * T / (2 * 0.8)  # ρ where the ratio is 1
    assert precise_measurements(edge * 1.01, l2, n, cells) and not precise_measurements(edge * 0.99, l2, n, cells)


@pytest.mark.parametrize("epsilon,precise", [(0.05, False), (20.0, True)])
def test_budget_decides_the_plan(epsilon, precise):
    """Noisy rounds: the paper's T = 30, α = 0.2 and 5 final iterations. Precise rounds: the JAM
    preset runs AIM's selection (AIM's 1-way start at its σ, its annealed rounds) and AIM's final fit
    (a hint of up to 1,000 momentum iterations, capped by model size as AIM's), so it releases what
    AIM releases; the JAM selector alone plans T = 4·d, α = 0.1. The user's own settings always give
    JAM's rounds."""
    from privmarg.privacy import round_plan
    from privmarg.select import JAMSelector
    from privmarg.select.aim import default_rounds
    from privmarg.generate import PGM
    from privmarg import Synthesizer

    data, public = chain_table(3000), chain_table(2000, seed=5, flip=0.3)
    jam = JAM(epsilon, 1e-9, seed=0).fit(data, public=public)
    x = jam.selection_.extra
    assert x["precise"] is precise
    if precise:
        assert x["delegated_to"] == "aim"
        hints = {k: v for k, v in jam.selection_.hints.items() if k != "start"}
        assert hints == {"iters": 1000, "method": "momentum", "dtype": "float64"}  # AIM's final fit
        assert jam.selection_.hints["start"].weights is not None  # the public records, for a reweighting generator
        assert 5 < jam.model_.info.iterations <= 1000
        aim = AIM(epsilon, 1e-9, seed=0, neighbour="replace_one").fit(data)
        assert np.array_equal(jam.sample_codes(500), aim.sample_codes(500))
        d, k = len(data.domain), len(jam.selector.precise_selector.supporting_cliques(data.domain))
        sigma = round_plan(jam.rho_total, 0.9, math.sqrt(2), default_rounds(d, k)).sigma
        ones = [m for m in jam.measurements_[:d]]
        assert all(len(m.attrs) == 1 and m.sigma == pytest.approx(sigma) for m in ones)
        assert not jam.public_marginals_
        # the selector on its own (no AIM to hand over to): T = 4·d, α = 0.1
        alone = Synthesizer(JAMSelector(loop=PGM(iters=5)), PGM(iters=5), epsilon=epsilon, delta=1e-9,
                            neighbour="replace_one", seed=0).fit(data, public=public)
        assert (alone.selection_.extra["rounds"], alone.selection_.extra["alpha"]) == (4 * 5, 0.1)
        assert {k: v for k, v in alone.selection_.hints.items() if k != "start"} == {"iters": 1000, "method": "momentum", "dtype": "float64"}
    else:
        assert (x["rounds"], x["alpha"]) == (30, 0.2)
        assert all(e["rho_select"] == pytest.approx(0.2 * e["rho_round"]) for e in jam.log_)
        assert set(jam.selection_.hints) == {"start"} and jam.model_.info.iterations <= 5
    # the user's own settings win
    mine = JAM(epsilon, 1e-9, seed=0, rounds=7, alpha=0.3, final_iters=3).fit(data, public=public)
    assert (mine.selection_.extra["rounds"], mine.selection_.extra["alpha"]) == (7, 0.3)
    assert set(mine.selection_.hints) == {"start"} and mine.model_.info.iterations <= 3


def test_a_private_measurement_supersedes_public_answers_inside_it():
    data, public = chain_table(3000), chain_table(2000, seed=5, flip=0.3)
    for supersede in (True, False):
        jam = JAM(1.0, 1e-9, seed=3, rounds=12, workload="all-2way", supersede=supersede).fit(data, public=public)
        private = [set(m.attrs) for m in jam.measurements_ if m.source == "private"]
        seen = 0
        for i, m in enumerate(jam.measurements_):
            if m.source != "public":
                continue
            later = [set(x.attrs) for x in jam.measurements_[i + 1:] if x.source == "private"]
            covered = any(set(m.attrs) <= p for p in later)
            seen += covered
            assert (m.weight == 0) == (supersede and covered)
            if m.weight == 0:
                assert set(m.meta["superseded_by"]) in private
        # every public answer stays on the record either way
        assert len(jam.public_marginals_) + len(jam.private_marginals_) == len(jam.log_)
        assert seen > 0  # the case arises in this run


def test_pgm_iters_hint_replaces_the_cap_for_one_fit():
    from privmarg.generate import PGM

    data = chain_table(2000)
    ms = [Measurement(c, np.ravel(data.project(c)), 1.0) for c in [("a", "b"), ("b", "c")]]
    gen = PGM(iters=3, tol=0)
    assert gen.generate(ms, data.domain).info.iterations == 3
    assert gen.generate(ms, data.domain, iters=40).info.iterations == 40
    assert gen.iters == 3  # the generator itself is unchanged


def test_each_private_marginal_is_counted_once_blend_included(monkeypatch):
    """The blend's scores read the workload's private answers that the rounds counted: kept for it,
    not counted again (and dropped after it)."""
    from collections import Counter
    from privmarg.data import source as source_module

    calls = Counter()
    counted = source_module.MemorySource.marginals

    def counting(self, cliques, *a, **k):
        calls.update((id(self), tuple(c)) for c in cliques)
        return counted(self, cliques, *a, **k)

    monkeypatch.setattr(source_module.MemorySource, "marginals", counting)
    data, public = chain_table(20000), chain_table(20000, seed=5)
    jam = JAM(0.1, 1e-9, seed=4).fit(data, public=public)
    assert any(c["what"].startswith("JAM blend") for c in jam.privacy_report()["ledger"])
    assert calls and max(calls.values()) == 1
