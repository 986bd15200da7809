"""JAM's release step: the model blended with the public records, the share chosen privately."""

import math

import numpy as np
import pytest

from privmarg import JAM, Dataset, Domain, load
from privmarg.core import all_kway
from privmarg.data import MemorySource
from privmarg.generate.blend import BlendedModel
from privmarg.generate.records import RecordsModel
from privmarg.measure import MeasurementSession
from privmarg.privacy import Accountant
from privmarg.generate.records import public_records
from privmarg.select.jam_blend import SHARES, blend_scores, choose_blend

from test_jam import chain_table, far_table


class TableModel:
    """A full joint table as a model (exact marginals, i.i.d. records)."""

    def __init__(self, domain, p, total):
        self.domain, self.p, self.total = domain, p / p.sum(), float(total)

    def project(self, attrs):
        axes = tuple(i for i, a in enumerate(self.domain.attrs) if a not in attrs)
        m = self.p.sum(axis=axes)
        kept = [a for a in self.domain.attrs if a in attrs]
        return np.transpose(m, [kept.index(a) for a in attrs]).ravel() * self.total

    def sample(self, rows, rng):
        idx = rng.choice(self.p.size, rows, p=self.p.ravel())
        return np.stack(np.unravel_index(idx, self.domain.shape), axis=1)

    def sample_conditional(self, rows, rng, evidence):
        p = self.p.copy()
        for a, v in evidence.items():
            i = self.domain.attrs.index(a)
            mask = np.zeros(self.domain[a], bool)
            mask[v] = True
            shape = [1] * len(self.domain)
            shape[i] = -1
            p = p * mask.reshape(shape)
        return TableModel(self.domain, p, rows).sample(rows, rng)


def tiny():
    dom = Domain(["a", "b", "c"], [2, 3, 2])
    rng = np.random.default_rng(0)
    p = rng.random(dom.shape)
    codes = np.array([[0, 0, 0], [0, 1, 1], [1, 2, 0], [1, 2, 0], [1, 0, 1]])
    pub = RecordsModel(dom, 100.0, codes)
    return dom, TableModel(dom, p, 100.0), pub


def test_blend_marginals_samples_and_conditionals_are_the_mixture():
    dom, model, pub = tiny()
    blend = BlendedModel(model, pub, 0.25)
    for r in [("a",), ("b", "a"), ("a", "b", "c")]:
        np.testing.assert_allclose(blend.project(r), 0.25 * model.project(r) + 0.75 * pub.project(r))
    rng = np.random.default_rng(1)
    rows = blend.sample(40000, rng)
    freq = np.bincount(np.ravel_multi_index(rows.T, dom.shape), minlength=12) / 40000
    exact = blend.project(("a", "b", "c")) / 100.0
    assert np.abs(freq - exact).max() < 0.01
    # the conditional given b = 2: the public part carries b = 2 on 2 of its 5 records
    cond = blend.sample_conditional(40000, rng, {"b": 2})
    assert (cond[:, 1] == 2).all()
    joint = blend.project(("a", "b", "c")).reshape(dom.shape)[:, 2, :]
    want = (joint / joint.sum()).ravel()
    got = np.bincount(np.ravel_multi_index((cond[:, 0], cond[:, 2]), (2, 2)), minlength=4) / 40000
    assert np.abs(got - want).max() < 0.01
    with pytest.raises(ValueError, match="share"):
        BlendedModel(model, pub, 1.5)


def test_blend_scores_against_brute_force():
    rng = np.random.default_rng(2)
    answers = [rng.integers(0, 50, 6).astype(float) for _ in range(3)]
    models = [rng.random(6) * 40 for _ in range(3)]
    pubs = [rng.random(6) * 40 for _ in range(3)]
    w = np.array([1.0, 0.5, 2.0])
    got = blend_scores(answers, models, pubs, w)
    for j, lam in enumerate(SHARES):
        want = -sum(c * np.abs(a - (lam * m + (1 - lam) * p)).sum() for a, m, p, c in zip(answers, models, pubs, w))
        assert got[j] == pytest.approx(want)


def _session(data, rho, neighbour="replace_one"):
    acc = Accountant(rho, neighbour)
    return MeasurementSession(MemorySource(data), acc, np.random.default_rng(0)), acc


def test_choice_is_charged_exactly_and_picks_the_better_release():
    data = chain_table(5000, seed=0)
    dom = data.domain
    wl = [(r, 1.0) for r, _ in all_kway(dom, 2)]
    # public = the private table itself; the model: uniform (far off)
    pub = public_records(MemorySource(data), dom, 5000.0)
    flat = TableModel(dom, np.ones(dom.shape), 5000.0)
    session, acc = _session(data, 1.0)
    out = choose_blend(session, flat, pub, wl, 0.5)
    assert isinstance(out, BlendedModel) and out.share == 0.0
    ledger = acc.to_dict()["ledger"]
    assert len(ledger) == 1 and ledger[0]["mechanism"] == "exponential"
    assert ledger[0]["rho"] == pytest.approx(0.5, rel=1e-12)
    assert ledger[0]["epsilon"] == pytest.approx(math.sqrt(8 * 0.5))
    assert ledger[0]["sensitivity"] == pytest.approx(2.0 * len(wl))  # replace-one: 2 per marginal
    # no budget: the model as it is, nothing charged
    session, acc = _session(data, 1.0)
    assert choose_blend(session, flat, pub, wl, 0.0) is flat
    assert acc.to_dict()["ledger"] == []


def test_public_records_drop_structural_zeros_and_need_records():
    from privmarg import StructuralZero

    data = chain_table(500, seed=0)
    dom = data.domain
    zero = StructuralZero.from_cells(dom, ("e",), [(5,)])
    pub = public_records(MemorySource(data), dom, 500.0, [zero])
    assert (pub.codes_[:, dom.attrs.index("e")] != 5).all()
    assert public_records(object(), dom, 500.0) is None


def test_jam_spends_its_leftover_on_the_blend_and_saves_it(tmp_path):
    data = chain_table(4000, seed=1)
    public = Dataset(data.codes[::-1], data.domain)  # the same records: public answers win every round
    jam = JAM(0.3, 1e-9, workload="all-2way", rounds=6, seed=0, iters=60, final_iters=150).fit(data, public=public)
    ledger = jam.privacy_report()["ledger"]
    blend = [c for c in ledger if c["what"].startswith("JAM blend")]
    assert jam.log_[-1]["source"] == "public"  # budget left at the end
    assert len(blend) == 1 and blend[0]["mechanism"] == "exponential"
    assert sum(c["rho"] for c in ledger) == pytest.approx(jam.rho_total, rel=1e-6)  # all of it spent
    assert jam.public_share_ >= 0.5  # the public table is the private one: the choice leans on it
    assert jam.public_share_ == (1.0 - jam.model_.share if isinstance(jam.model_, BlendedModel) else 0.0)
    rows = jam.sample_codes()
    assert rows.shape == (4000, 5)
    # off: the model alone, the leftover unspent
    off = JAM(0.3, 1e-9, workload="all-2way", rounds=6, seed=0, iters=60, final_iters=150,
              blend=False).fit(data, public=public)
    assert not isinstance(off.model_, BlendedModel) and off.public_share_ == 0.0
    assert not any(c["what"].startswith("JAM blend") for c in off.privacy_report()["ledger"])
    # a saved blend reads back the same
    path = jam.save(tmp_path / "m")
    back = load(path)
    for r in [("a",), ("b", "c")]:
        np.testing.assert_allclose(back.model_.project(r), jam.model_.project(r))


def test_saved_blend_is_checked():
    dom, model, pub = tiny()
    with pytest.raises(ValueError, match="domain"):
        BlendedModel(RecordsModel(Domain(["x"], [2]), 10.0, np.array([[0]])), pub, 0.5)
    with pytest.raises(ValueError, match="records"):
        BlendedModel(model, model, 0.5)


def test_far_public_data_is_not_blended_in():
    """A public table far from the private one: the choice keeps (almost all of) the model."""
    data = chain_table(6000, seed=2)
    public = far_table(3000, data.domain)
    shares = []
    for seed in range(3):
        jam = JAM(1.0, 1e-9, workload="all-2way", rounds=6, seed=seed, iters=60, final_iters=150).fit(data, public=public)
        shares.append(jam.public_share_)
    assert max(shares) <= 0.25


def test_cli_says_how_much_of_the_release_is_public(tmp_path):
    import json

    from typer.testing import CliRunner

    from privmarg.cli import app

    rng = np.random.default_rng(0)
    cols = [rng.integers(0, 3, 4000)]
    for _ in range(7):  # 8 columns: more workload marginals than JAM's 30 rounds, all answered publicly
        cols.append((cols[-1] + rng.integers(0, 2, 4000)) % 3)
    data = Dataset(np.column_stack(cols), Domain([f"x{i}" for i in range(8)], [3] * 8))
    data.to_frame().to_csv(tmp_path / "p.csv", index=False)
    data.to_frame().iloc[::-1].to_csv(tmp_path / "q.csv", index=False)  # the same records: public wins
    (tmp_path / "d.json").write_text(json.dumps(dict(zip(data.domain.attrs, map(int, data.domain.shape)))))
    shares = []
    for seed in range(4):  # the last round is public on some seeds (a tiny budget's choices are noisy)
        out = tmp_path / f"m{seed}"
        res = CliRunner().invoke(app, ["synth", str(tmp_path / "p.csv"), "--domain", str(tmp_path / "d.json"),
                                       "--method", "jam", "--public", str(tmp_path / "q.csv"), "--epsilon", "0.1",
                                       "--delta", "1e-9", "-o", str(tmp_path / f"out{seed}.csv"), "--seed", str(seed),
                                       "--save-model", str(out), "--report", str(tmp_path / f"r{seed}.json")])
        assert res.exit_code == 0, res.output
        assert "replace-one neighbours" in res.output  # as the docs write it, not "replace/one"
        back = load(out)
        share = 1.0 - back.model_.share if isinstance(back.model_, BlendedModel) else 0.0
        assert ("of it is records of the public table" in res.output) == (share > 0)
        assert ("the rest drawn from JAM's model" in res.output) == (0 < share < 1)  # no "rest" of 100%
        assert json.loads((tmp_path / f"r{seed}.json").read_text())["public_share"] == pytest.approx(share)
        shares.append(share)
    assert max(shares) > 0  # the public table is the private one: the blend leans on it


def test_a_blurred_choice_is_not_made():
    """With ε·N so small that the five releases cannot be told apart, the model is released alone
    and nothing is charged (a near-uniform pick could release a far public table)."""
    from privmarg.select.jam_blend import MAX_CHOICE_BLUR

    data = chain_table(1000, seed=0)
    dom = data.domain
    wl = [(r, 1.0) for r, _ in all_kway(dom, 2)]
    pub = public_records(MemorySource(data), dom, 1000.0)
    flat = TableModel(dom, np.ones(dom.shape), 1000.0)
    rho = (4 * math.log(len(SHARES)) / (MAX_CHOICE_BLUR * 1000.0)) ** 2 / 8  # blur exactly at the limit
    session, acc = _session(data, 1.0)
    assert choose_blend(session, flat, pub, wl, rho * 0.9) is flat and acc.to_dict()["ledger"] == []
    session, acc = _session(data, 1.0)
    choose_blend(session, flat, pub, wl, rho * 1.1)
    assert len(acc.to_dict()["ledger"]) == 1


def test_blend_refuses_what_a_saved_file_could_smuggle_in():
    dom, model, pub = tiny()
    with pytest.raises(ValueError, match="number"):
        BlendedModel(model, pub, "0.5")
    with pytest.raises(ValueError, match="cannot itself be a blend"):
        BlendedModel(BlendedModel(model, pub, 0.5), pub, 0.5)
    blend = BlendedModel(model, pub, 0.5)
    with pytest.raises(ValueError, match="outside"):
        blend.sample_conditional(5, np.random.default_rng(0), {"b": 7})
    assert not hasattr(blend, "cliques") and not hasattr(blend, "p")  # only the fit record is forwarded


def test_jam_can_release_the_public_records_reweighted():
    """``generator=PublicReweighting()``: JAM's measurements fitted by reweighting the public records
    (PMW^Pub's generator over JAM's selection, started from the selection's public records)."""
    from privmarg.generate.pmw_pub import PublicReweighting

    data = chain_table(3000, seed=1)
    public = chain_table(1500, seed=5, flip=0.3)
    jam = JAM(1.0, 1e-9, workload="all-2way", rounds=6, seed=0, generator=PublicReweighting(iters=30)).fit(
        data, public=public)
    inner = jam.model_.model if isinstance(jam.model_, BlendedModel) else jam.model_
    assert isinstance(inner, RecordsModel) and inner.weights is not None
    rows = jam.sample_codes()
    public_rows = {tuple(r) for r in public.codes}
    assert all(tuple(r) in public_rows for r in rows)  # only public records are released
    with pytest.raises(ValueError, match="public records"):
        PublicReweighting().generate(jam.measurements_, data.domain, total=3000.0)
