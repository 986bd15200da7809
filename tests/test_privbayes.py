"""PrivBayes's selector: the score's sensitivity by brute force, exact spend, the network's shape,
structure recovery, reproducibility, precomputed marginals and the command line."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import PGM, Dataset, Domain, PrecomputedSource, registry
from privmarg.cli import app
from privmarg.data import MemorySource
from privmarg.presets import PrivBayes
from privmarg.privacy import recompute_rho
from privmarg.select.privbayes import PrivBayesSelector, dependence_score, dependence_sensitivity
from test_mechanisms import correlated_table

FAST = PGM(iters=60)


def _tables(shape, n):
    """Every count table of ``shape`` holding ``n`` records."""
    k = int(np.prod(shape))
    for combo in itertools.combinations_with_replacement(range(k), n):
        yield np.bincount(np.asarray(combo, dtype=int), minlength=k).astype(float)


@pytest.mark.parametrize("shape, n_max", [((2, 2), 7), ((3, 2), 5), ((2, 3), 5), ((3, 3), 4)])
def test_score_sensitivity_brute_force(shape, n_max):
    """Every neighbouring pair of small tables (one record added, or one moved) changes the score by
    at most the stated sensitivity; under add/remove the bound 4N/(N+1) is reached."""
    worst = {"add_remove": 0.0, "replace_one": 0.0}
    tight = 0.0
    for n in range(n_max + 1):
        for flat in _tables(shape, n):
            s = dependence_score(flat.reshape(shape))
            for i in range(flat.size):
                up = flat.copy()
                up[i] += 1
                change = abs(dependence_score(up.reshape(shape)) - s)
                worst["add_remove"] = max(worst["add_remove"], change)
                if n:
                    tight = max(tight, change / (4 * n / (n + 1)))
                if flat[i] == 0:
                    continue
                for j in range(flat.size):
                    if j != i:
                        moved = flat.copy()
                        moved[i] -= 1
                        moved[j] += 1
                        worst["replace_one"] = max(worst["replace_one"],
                                                   abs(dependence_score(moved.reshape(shape)) - s))
    for nb, w in worst.items():
        assert w <= dependence_sensitivity(nb) + 1e-9, (nb, w)
    assert tight == pytest.approx(1.0)  # the add/remove analysis is exact at its worst case


def test_score_is_zero_under_independence_and_large_under_dependence():
    assert dependence_score(np.outer([1, 3], [2, 2, 4])) == pytest.approx(0.0, abs=1e-12)
    assert dependence_score(np.zeros((2, 3))) == 0.0
    assert dependence_score(np.diag([5.0, 5.0])) == pytest.approx(10.0)  # 2N·R with R = ½


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
@pytest.mark.parametrize("degree", [1, 2, 3])
def test_exact_spend_and_recomputable_ledger(neighbour, degree):
    data = correlated_table(n=1500)
    mech = PrivBayes(1.0, 1e-6, seed=1, neighbour=neighbour, degree=degree, generator=FAST).fit(data)
    rep = mech.privacy_report()
    assert sum(c["rho"] for c in rep["ledger"]) == pytest.approx(mech.rho_total, rel=1e-9)
    assert mech.accountant_.rho_spent <= mech.rho_total * (1 + 1e-9)
    for c in rep["ledger"]:
        assert recompute_rho(c) == pytest.approx(c["rho"], rel=1e-12)
    kinds = [c["mechanism"] for c in rep["ledger"]]
    d = len(data.domain)
    assert kinds.count("exponential") == d - 1
    assert kinds.count("gaussian") == len(mech.measurements_)
    sens = {c["sensitivity"] for c in rep["ledger"] if c["mechanism"] == "exponential"}
    assert sens == {dependence_sensitivity(neighbour)}
    rho_sel = sum(c["rho"] for c in rep["ledger"] if c["mechanism"] == "exponential")
    assert rho_sel == pytest.approx(mech.selector.select_share * mech.rho_total, rel=1e-9)


def test_network_is_a_dag_of_bounded_degree_and_measures_its_maximal_cliques():
    data = correlated_table(n=1500)
    for degree in (1, 2, 3):
        mech = PrivBayes(5.0, 1e-6, seed=2, degree=degree, theta=0.0, generator=FAST).fit(data)
        net = mech.selection_.extra["network"]
        assert sorted(x for x, _ in net) == sorted(data.domain.attrs)  # every attribute once
        assert net[0][1] == []
        for i, (x, parents) in enumerate(net):
            earlier = {y for y, _ in net[:i]}
            assert set(parents) <= earlier and len(parents) <= degree  # parents come first: a DAG
        nodes = [set(p) | {x} for x, p in net]
        measured = [set(m.attrs) for m in mech.measurements_]
        assert all(any(n <= m for m in measured) for n in nodes)  # every conditional is covered
        assert all(m in nodes and not any(m < n for n in nodes) for m in measured)  # maximal ones only


def chain(n=4000, seed=0):
    """a → b → c strongly dependent (95% copies), z independent of them."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.95, a, rng.integers(0, 4, n))
    c = np.where(rng.random(n) < 0.95, b, rng.integers(0, 4, n))
    z = rng.integers(0, 4, n)
    return Dataset(np.column_stack([a, b, c, z]), Domain(["a", "b", "c", "z"], [4, 4, 4, 4]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_a_dependency_chain_at_high_epsilon(seed):
    data = chain(seed=seed)
    mech = PrivBayes(50.0, 1e-6, seed=seed, degree=1, generator=FAST).fit(data)
    net = dict((x, set(p)) for x, p in mech.selection_.extra["network"])
    linked = lambda u, v: u in net[v] or v in net[u]  # noqa: E731
    assert linked("a", "b") and linked("b", "c")
    # and the model carries the dependence: b equals c in most synthetic records
    syn = mech.sample_codes(4000)
    assert np.mean(syn[:, 1] == syn[:, 2]) > 0.85


def test_seeded_runs_are_identical():
    data = correlated_table(n=1500)
    runs = [PrivBayes(1.0, 1e-6, seed=7, generator=FAST).fit(data) for _ in range(2)]
    assert runs[0].selection_.extra["network"] == runs[1].selection_.extra["network"]
    assert np.array_equal(runs[0].sample_codes(300), runs[1].sample_codes(300))


def test_supporting_cliques_suffice_and_skip_what_can_never_fit():
    data = correlated_table(n=1500)
    make = lambda: PrivBayes(2.0, 1e-6, seed=4, degree=2, generator=FAST)  # noqa: E731
    ref = make().fit(data)
    sel = ref.selector
    cliques = sel.supporting_cliques(data.domain)
    assert len(cliques) == 5 + 10 + 10  # all 1-, 2- and 3-subsets of five attributes
    pre = make().fit(PrecomputedSource.from_source(MemorySource(data), cliques))
    assert np.array_equal(pre.sample_codes(300), ref.sample_codes(300))
    tiny = PrivBayesSelector(degree=2, max_model_size=8 * 30 / 2**20)  # at most 30 cells
    assert all(data.domain.size(c) <= 30 for c in tiny.supporting_cliques(data.domain))


def test_one_attribute_and_bad_parameters():
    one = Dataset(np.arange(50).reshape(-1, 1) % 3, Domain(["a"], [3]))
    mech = PrivBayes(1.0, 1e-6, seed=0, generator=FAST).fit(one)
    rep = mech.privacy_report()
    assert [c["mechanism"] for c in rep["ledger"]] == ["gaussian"]
    assert rep["ledger"][0]["rho"] == pytest.approx(mech.rho_total, rel=1e-12)
    for bad in (dict(degree=0), dict(degree=1.5), dict(theta=-1), dict(select_share=1.0), dict(max_model_size=0)):
        with pytest.raises(ValueError):
            PrivBayesSelector(**bad)


def test_registry_and_cli(tmp_path):
    assert registry.preset_class("privbayes") is PrivBayes
    assert registry.make_selector("privbayes").name == "privbayes"
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 400), "b": rng.integers(0, 4, 400), "c": rng.integers(0, 2, 400)})
    df["b"] = np.where(rng.random(400) < 0.8, df["a"], df["b"])
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 4, "c": 2}))
    df.to_csv(tmp_path / "data.csv", index=False)
    out, rep = tmp_path / "syn.csv", tmp_path / "report.json"
    r = CliRunner().invoke(app, [str(a) for a in (
        "synth", tmp_path / "data.csv", "--domain", tmp_path / "domain.json", "--method", "privbayes",
        "--epsilon", 1, "--delta", 1e-6, "--seed", 1, "--output", out, "--report", rep)])
    assert r.exit_code == 0, r.output
    syn = pd.read_csv(out)
    assert list(syn.columns) == ["a", "b", "c"] and syn["b"].between(0, 3).all()
    priv = json.loads(rep.read_text())["privacy"]
    assert sum(recompute_rho(c) for c in priv["ledger"]) == pytest.approx(priv["rho_total"], rel=1e-9)
