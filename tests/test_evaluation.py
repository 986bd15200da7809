"""Metrics on hand-computed examples, zero error on identical tables, the report and `privmarg evaluate`."""

import json
import math
import re
import time

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg.cli import app
from privmarg.data import Dataset
from privmarg.core import Domain
from privmarg.evaluation import (
    CountingQueries,
    ThresholdQueries,
    conditional_query_error,
    counting_query_error,
    covariance_error,
    embed,
    evaluate,
    ml_efficacy,
    range_query_error,
    sw1_2way,
    thresholding_query_error,
    tv_kway,
    tv_per_marginal,
    workload_error,
)
from privmarg.core import all_kway

runner = CliRunner()


def ds(rows, sizes):
    dom = Domain(list(sizes), list(sizes.values()))
    return Dataset(np.asarray(rows, dtype=np.int64).reshape(-1, len(sizes)), dom)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    sizes = {"a": 4, "b": 3, "c": 5, "d": 2, "e": 7}
    n = 3000
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = rng.integers(0, 5, n)
    d = (c > 2).astype(int)
    e = rng.integers(0, 7, n)
    return Dataset(np.column_stack([a, b, c, d, e]), Domain(list(sizes), list(sizes.values())))


# -------------------------------------------------------------------------------------------
# identical tables: every error is zero
# -------------------------------------------------------------------------------------------
def test_identical_tables_have_zero_error(table):
    twin = Dataset(table.codes[::-1].copy(), table.domain)  # same rows, other order
    assert tv_kway(table, twin, 1) == 0
    assert tv_kway(table, twin, 2) == 0
    assert tv_kway(table, twin, 3) == 0
    assert workload_error(table, twin, all_kway(table.domain, 3)) == 0
    assert sw1_2way(table, twin) == pytest.approx(0, abs=1e-12)
    assert covariance_error(table, twin) == pytest.approx(0, abs=1e-12)
    assert counting_query_error(table, twin) == 0
    assert thresholding_query_error(table, twin) == 0
    assert range_query_error(table, twin, numeric=["c", "e"]) == 0
    assert conditional_query_error(table, twin) == pytest.approx(0, abs=1e-12)
    # a table and a copy with every row doubled are the same distribution
    double = Dataset(np.vstack([table.codes, table.codes]), table.domain)
    assert tv_kway(table, double, 2) == pytest.approx(0, abs=1e-12)
    assert covariance_error(table, double) == pytest.approx(0, abs=1e-12)


# -------------------------------------------------------------------------------------------
# total variation and workload error
# -------------------------------------------------------------------------------------------
def test_known_shift_gives_expected_tv():
    # a uniform on {0,1,2,3}; the synthetic copy shifts it by one (uniform on {1,2,3,4}): TV = 1/4
    a = np.repeat(np.arange(4), 24)
    b = np.tile(np.arange(2), 48)  # b uniform within every value of a
    real = ds(np.column_stack([a, b]), {"a": 5, "b": 2})
    synth = ds(np.column_stack([a + 1, b]), {"a": 5, "b": 2})
    per = tv_per_marginal(real, synth, 1)
    assert per[("a",)] == pytest.approx(0.25) and per[("b",)] == 0
    assert tv_kway(real, synth, 1) == pytest.approx(0.125)
    assert tv_kway(real, synth, 2) == pytest.approx(0.25)  # b is untouched, so the joint moves by 1/4 too
    # AIM workload error = mean L1 = 2 TV, weights multiply
    assert workload_error(real, synth, [(("a",), 1.0)]) == pytest.approx(0.5)
    assert workload_error(real, synth, [(("a",), 2.0), (("b",), 1.0)]) == pytest.approx((2 * 0.5 + 0) / 2)


def test_tv_hand_example_and_different_sizes():
    # real: a = 0,0,1,1 ; synthetic: a = 0,1,1,1,1,1 (6 rows): p = (.5,.5), q = (1/6, 5/6): TV = 1/3
    real = ds([[0], [0], [1], [1]], {"a": 2})
    synth = ds([[0], [1], [1], [1], [1], [1]], {"a": 2})
    assert tv_kway(real, synth, 1) == pytest.approx(1 / 3)


def test_tv_sparse_path_matches_dense():
    # a 3-way marginal with 2e6 cells goes through the support-only path; compare with pandas
    rng = np.random.default_rng(1)
    sizes = {"x": 200, "y": 100, "z": 100}
    real = ds(rng.integers(0, 100, (500, 3)), sizes)
    synth = ds(rng.integers(0, 100, (400, 3)), sizes)
    p = pd.Series(map(tuple, real.codes)).value_counts(normalize=True)
    q = pd.Series(map(tuple, synth.codes)).value_counts(normalize=True)
    expect = 0.5 * p.sub(q, fill_value=0).abs().sum()
    assert tv_kway(real, synth, 3) == pytest.approx(expect)


def test_workload_error_3way_is_twice_mean_3way_tv(table):
    rng = np.random.default_rng(3)
    other = Dataset(rng.permutation(table.codes, axis=0)[:2000] % np.array(table.domain.shape), table.domain)
    other = Dataset(np.column_stack([rng.permutation(col) for col in other.codes.T]), table.domain)
    assert workload_error(table, other, all_kway(table.domain, 3)) == pytest.approx(2 * tv_kway(table, other, 3))


def test_all_2way_tv_is_vectorised():
    rng = np.random.default_rng(0)
    d, n = 20, 200_000
    sizes = {f"c{i}": int(k) for i, k in enumerate(rng.integers(2, 60, d))}
    k = np.array(list(sizes.values()))
    real = ds(rng.integers(0, 10**6, (n, d)) % k, sizes)
    synth = ds(rng.integers(0, 10**6, (n, d)) % k, sizes)
    t0 = time.perf_counter()
    tv = tv_kway(real, synth, 2)
    assert time.perf_counter() - t0 < 10.0  # ~1 s on one core; minutes if done naively
    assert 0 < tv < 0.1


# -------------------------------------------------------------------------------------------
# sliced Wasserstein, covariance
# -------------------------------------------------------------------------------------------
def test_sw1_hand_example():
    # real all at cell (0,0), synthetic all at (1,0) of a 2x2 grid: embedded points (.25,.25), (.75,.25).
    # Along a unit direction θ, W1 = 0.5·|θ_x|; averaged over uniform directions E|θ_x| = 2/π, so SW1 = 1/π.
    real = ds([[0, 0]] * 10, {"a": 2, "b": 2})
    synth = ds([[1, 0]] * 7, {"a": 2, "b": 2})
    assert sw1_2way(real, synth, directions=40000, seed=1) == pytest.approx(1 / math.pi, rel=0.01)
    # half the mass moved: half the distance
    half = ds([[0, 0]] * 5 + [[1, 0]] * 5, {"a": 2, "b": 2})
    assert sw1_2way(real, half, directions=40000, seed=1) == pytest.approx(0.5 / math.pi, rel=0.01)
    mean, per = sw1_2way(real, synth, directions=10, per_marginal=True)
    assert list(per) == [("a", "b")] and per[("a", "b")] == mean


def test_embedding_is_bin_centres():
    d = ds([[0, 0], [1, 2]], {"a": 2, "b": 3})
    assert np.allclose(embed(d), [[0.25, 1 / 6], [0.75, 5 / 6]])


def test_covariance_error_hand_example():
    # real (0,0),(1,1): Emb .25/.75, Cov = .0625·[[1,1],[1,1]]; synthetic (0,1),(1,0): Cov = .0625·[[1,-1],[-1,1]]
    # ‖diff‖_F = .125·√2, ‖Cov_syn‖_F = .125  ->  √2
    real = ds([[0, 0], [1, 1]], {"a": 2, "b": 2})
    synth = ds([[0, 1], [1, 0]], {"a": 2, "b": 2})
    assert covariance_error(real, synth) == pytest.approx(math.sqrt(2))
    assert covariance_error(real, synth, denominator="real") == pytest.approx(math.sqrt(2))
    const = ds([[0, 0], [0, 0]], {"a": 2, "b": 2})
    assert covariance_error(real, const) == math.inf


# -------------------------------------------------------------------------------------------
# query errors
# -------------------------------------------------------------------------------------------
def test_counting_queries_hand_example():
    sizes = {"a": 2, "b": 2, "c": 3}
    real = ds([[0, 0, 0], [0, 1, 1], [1, 0, 2], [1, 1, 2]], sizes)
    synth = ds([[0, 0, 0], [1, 1, 1], [1, 0, 2], [1, 1, 2]], sizes)
    # q1: a∈[0,0] (b, c unrestricted): real .5, synthetic .25;  q2: c∈[1,2]: real .75, synthetic .75
    qs = CountingQueries.from_queries(real, [(0, 1, 2), (0, 1, 2)],
                                      [((0, 0), (0, 1), (0, 2)), ((0, 1), (0, 1), (1, 2))])
    assert np.allclose(qs.real_answers, [0.5, 0.75])
    assert np.allclose(qs.answer(synth), [0.25, 0.75])
    # relative error (mean |diff|) / (mean real) = (0.25/2) / (1.25/2) = 0.2
    assert counting_query_error(real, synth, query_set=qs) == pytest.approx(0.2)


def test_counting_query_generator_respects_selectivity(table):
    qs = CountingQueries(table, queries=200, seed=5)
    assert len(qs.attrs) == 200 and all(len(a) == 3 and len(set(a)) == 3 for a in qs.attrs)
    assert np.all((qs.real_answers >= 0.05) & (qs.real_answers <= 0.95))
    # brute force on one query
    a, b = qs.attrs[0], qs.bounds[0]
    mask = np.ones(len(table), bool)
    for col, (lo, hi) in zip(a, b):
        mask &= (table.codes[:, col] >= lo) & (table.codes[:, col] <= hi)
    assert qs.real_answers[0] == pytest.approx(mask.mean())
    # same seed -> same queries
    assert CountingQueries(table, queries=200, seed=5).bounds == qs.bounds


def test_thresholding_queries_hand_example():
    sizes = {"a": 2, "b": 2}
    real = ds([[0, 0], [1, 0], [0, 1], [1, 1]], sizes)  # a = 1 in half the rows
    synth = ds([[1, 0], [1, 0], [0, 1], [1, 1]], sizes)  # ... in three quarters
    # θ = e_a, t = 0.5: Emb(a) = .25 / .75, so q = fraction with a = 1
    qs = ThresholdQueries.from_queries(real, [(0,)], [[1.0]], [0.5])
    assert qs.real_answers.tolist() == [0.5]
    assert thresholding_query_error(real, synth, query_set=qs) == pytest.approx(0.25 / 0.5)
    drawn = ThresholdQueries(real, queries=50, seed=0)
    assert all(np.isclose(np.linalg.norm(w), 1) for w in drawn.weights)


def test_range_point_query_hand_example():
    # b, c constant; a = 0 in half the real rows and three quarters of the synthetic ones. Every strict 3-way
    # point query conditions on a = 0 or a = 1 (and b = c = 0): each error is exactly 0.25.
    sizes = {"a": 2, "b": 1, "c": 1}
    real = ds([[0, 0, 0], [1, 0, 0]] * 2, sizes)
    synth = ds([[0, 0, 0]] * 3 + [[1, 0, 0]], sizes)
    assert range_query_error(real, synth, queries=50) == pytest.approx(0.25)
    # the reference quirk also averages the 1- and 2-condition prefixes, some of which skip a (error 0)
    quirk = range_query_error(real, synth, queries=300, mode="reference_quirk")
    assert 0.25 * 0.4 < quirk < 0.25


def test_conditional_query_hand_example():
    sizes = {"a": 2, "b": 2}
    real = ds([[0, 0], [0, 1], [1, 1], [1, 1]], sizes)
    synth = ds([[0, 0], [0, 0], [1, 1], [1, 1]], sizes)
    # key a: groups a=0 (w .5): b (.5,.5) vs (1,0) -> TV .5; a=1: equal -> .25
    # key b: b=0 (w .25): a (1,0) vs (1,0) -> 0; b=1 (w .75): a (1/3,2/3) vs (0,1) -> 1/3 -> .25
    mean, per = conditional_query_error(real, synth, per_pair=True)
    assert per[("a", "b")] == pytest.approx(0.25) and per[("b", "a")] == pytest.approx(0.25)
    assert mean == pytest.approx(0.25)
    # a key group missing from the synthetic table counts as TV 1
    only0 = ds([[0, 0]] * 3, sizes)
    _, per = conditional_query_error(real, only0, per_pair=True)
    assert per[("a", "b")] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)


# -------------------------------------------------------------------------------------------
# ML efficacy
# -------------------------------------------------------------------------------------------
def _ml_tables(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, (n, 2))
    y = (x[:, 0] + x[:, 1] >= 3).astype(int)
    sizes = {"x0": 4, "x1": 4, "y": 2}
    return ds(np.column_stack([x, y]), sizes)


def test_ml_efficacy_learnable_target():
    train, test = _ml_tables(1500, 0), _ml_tables(500, 1)
    res = ml_efficacy(train, test, "y", models=("gbdt", "rf"), real_train=train)
    assert res["task"] == "classification"
    g = res["models"]["gbdt"]["synthetic"]
    assert g["error"] == pytest.approx(0.0) and g["accuracy"] == 1.0 and g["f1"] == 1.0 and g["auc"] == 1.0
    assert res["downstream"] == g["error"] and res["downstream_real"] == 0.0
    # labels destroyed: about chance
    rng = np.random.default_rng(2)
    noisy = Dataset(np.column_stack([train.codes[:, :2], rng.integers(0, 2, len(train))]), train.domain)
    assert ml_efficacy(noisy, test, "y", models=("gbdt",))["downstream"] > 0.2


def test_ml_efficacy_single_class_and_regression():
    train, test = _ml_tables(300, 0), _ml_tables(200, 1)
    one = Dataset(np.column_stack([train.codes[:, :2], np.zeros(len(train), int)]), train.domain)
    res = ml_efficacy(one, test, "y", models=("gbdt",))
    assert "note" in res["models"]["gbdt"]["synthetic"]
    assert res["downstream"] == pytest.approx((test.codes[:, 2] == 1).mean())
    reg = ml_efficacy(train, test, "x0", models=("gbdt",), task="regression")
    assert reg["task"] == "regression" and reg["downstream"] >= 0 and "r2" in reg["models"]["gbdt"]["synthetic"]
    with pytest.raises(ValueError):
        ml_efficacy(train, test, "y", models=("nope",))


# -------------------------------------------------------------------------------------------
# report and CLI
# -------------------------------------------------------------------------------------------
REQUIRED = ["tv_2way", "sw1_2way", "workload_error_3way", "covariance_error", "counting_query_error",
            "thresholding_query_error"]


def test_evaluate_report_keys(table):
    rng = np.random.default_rng(9)
    synth = Dataset(np.column_stack([rng.permutation(c) for c in table.codes.T]), table.domain)
    res = evaluate(table, synth, metrics=None)
    for k in REQUIRED + ["range_query_error", "conditional_query_error", "tv_1way", "l1_2way"]:
        assert isinstance(res[k], float) and res[k] >= 0
    assert res["l1_2way"] == pytest.approx(2 * res["tv_2way"])
    assert res["workload_error_3way"] == pytest.approx(2 * tv_kway(table, synth, 3))
    assert "ml_efficacy" not in res  # no test split
    assert len(res["worst_2way"]) == 6 and res["worst_2way"][0]["tv"] >= res["worst_2way"][-1]["tv"]


@pytest.fixture
def files(tmp_path, table):
    rng = np.random.default_rng(4)
    cols = list(table.domain.attrs)
    (tmp_path / "domain.json").write_text(json.dumps(table.domain.to_dict()))
    pd.DataFrame(table.codes[:2000], columns=cols).to_csv(tmp_path / "real.csv", index=False)
    pd.DataFrame(table.codes[2000:], columns=cols).to_csv(tmp_path / "test.csv", index=False)
    synth = np.column_stack([rng.permutation(c) for c in table.codes[:2000].T])
    pd.DataFrame(synth, columns=cols).to_csv(tmp_path / "syn.csv", index=False)
    (tmp_path / "run.json").write_text(json.dumps({"method": "mst", "seconds": 1.5, "peak_memory_mb": 99.0,
                                                   "privacy": {"epsilon": 1.0}}))
    return tmp_path


def test_cli_evaluate_html_and_json(files):
    d = files
    r = runner.invoke(app, ["evaluate", str(d / "real.csv"), str(d / "syn.csv"), "--domain", str(d / "domain.json"),
                            "--test", str(d / "test.csv"), "--target", "d", "--ml-models", "gbdt",
                            "--run-report", str(d / "run.json"), "--output", str(d / "report.html")])
    assert r.exit_code == 0, r.output
    page = (d / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 4
    assert not re.search(r"""(src|href)=['"](?!data:)""", page)  # self-contained
    rep = json.loads((d / "report.json").read_text())
    for k in REQUIRED:
        assert isinstance(rep[k], float)
    ml = rep["ml_efficacy"]
    assert ml["target"] == "d" and "gbdt" in ml["models"] and "real" in ml["models"]["gbdt"]
    assert rep["run"]["seconds"] == 1.5 and rep["run"]["peak_memory_mb"] == 99.0 and rep["run"]["epsilon"] == 1.0


def test_cli_evaluate_json_only_and_errors(files):
    d = files
    base = ["evaluate", str(d / "real.csv"), str(d / "syn.csv")]
    r = runner.invoke(app, base + ["--domain", str(d / "domain.json"), "--metrics", "tv_2way,covariance_error",
                                   "--output", str(d / "r.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((d / "r.json").read_text())
    assert "tv_2way" in rep and "covariance_error" in rep and "sw1_2way" not in rep
    assert not (d / "r.html").exists()
    r = runner.invoke(app, base + ["--schema", str(d / "domain.json"), "--output", str(d / "x.html")])
    assert r.exit_code == 2 and "schema" in r.output and not (d / "x.html").exists()
    r = runner.invoke(app, base + ["--output", str(d / "x.html")])
    assert r.exit_code == 2 and "--domain" in r.output
    r = runner.invoke(app, base + ["--domain", str(d / "domain.json"), "--test", str(d / "test.csv"),
                                   "--output", str(d / "x.html")])
    assert r.exit_code == 2 and "--target" in r.output
    r = runner.invoke(app, base + ["--domain", str(d / "domain.json"), "--metrics", "bogus", "--output",
                                   str(d / "x.json")])
    assert r.exit_code == 2 and "bogus" in r.output


# raw tables with a public schema ---------------------------------------------------------------
RAW_SCHEMA = {"columns": {
    "age": {"type": "integer", "min": 0, "max": 99, "bins": 10, "binning": "privtree"},
    "income": {"type": "float", "min": 0, "max": 1000, "bins": 4, "missing": True},
    "colour": {"type": "categorical", "values": ["red", "green", "blue"], "merge_rare": True},
    "flag": {"type": "boolean"},
}}


def test_public_encoding_drops_dp_steps():
    from privmarg.schema import Schema

    sch = Schema.from_dict(RAW_SCHEMA)
    assert sch.needs_dp
    pub = sch.public_encoding()
    assert not pub.needs_dp and pub.names == sch.names
    assert pub["age"].binning == "uniform" and pub["age"].bins == 10 and not pub["colour"].merge_rare
    assert pub.max_domain().to_dict() == {"age": 10, "income": 5, "colour": 3, "flag": 2}


def test_cli_evaluate_raw_tables_with_schema(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    real = pd.DataFrame({"age": rng.integers(0, 100, n), "income": rng.uniform(0, 1000, n).round(2),
                         "colour": rng.choice(["red", "green", "blue"], n, p=[0.25, 0.5, 0.25]),
                         "flag": rng.choice([True, False], n)})
    real.loc[rng.choice(n, 30, replace=False), "income"] = np.nan
    (tmp_path / "s.json").write_text(json.dumps(RAW_SCHEMA))
    real.to_csv(tmp_path / "real.csv", index=False)
    real.assign(colour=real["colour"].replace("red", "green")).to_csv(tmp_path / "syn.csv", index=False)
    real.to_csv(tmp_path / "same.csv", index=False)
    base = ["evaluate", str(tmp_path / "real.csv")]
    opts = ["--schema", str(tmp_path / "s.json"), "--metrics", "tv_1way,tv_2way,range_query_error"]
    r = runner.invoke(app, base + [str(tmp_path / "same.csv")] + opts + ["--output", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "a.json").read_text())
    assert rep["tv_1way"] == 0 and rep["tv_2way"] == 0 and rep["range_query_error"] == 0
    assert rep["sources"]["schema"].endswith("s.json")
    r = runner.invoke(app, base + [str(tmp_path / "syn.csv")] + opts + ["--output", str(tmp_path / "b.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "b.json").read_text())
    # only colour moved: TV(colour) = share of red; the 1-way average is over the 4 columns
    assert rep["tv_1way"] == pytest.approx((real["colour"] == "red").mean() / 4)
    # a value outside the schema names the table and the column; nothing written
    real.assign(colour="purple").to_csv(tmp_path / "bad.csv", index=False)
    r = runner.invoke(app, base + [str(tmp_path / "bad.csv")] + opts + ["--output", str(tmp_path / "c.json")])
    assert r.exit_code == 2 and "synthetic table" in r.output and "colour" in r.output
    assert not (tmp_path / "c.json").exists()
    r = runner.invoke(app, base + [str(tmp_path / "same.csv"), "--schema", str(tmp_path / "s.json"), "--domain",
                                   str(tmp_path / "s.json"), "--output", str(tmp_path / "d.json")])
    assert r.exit_code == 2 and "either" in r.output
    # numbers outside the bounds are clipped (as synth encodes them), with a warning and a count
    real.assign(age=real["age"].where(real.index >= 3, 500)).to_csv(tmp_path / "wide.csv", index=False)
    r = runner.invoke(app, base + [str(tmp_path / "wide.csv")] + opts + ["--output", str(tmp_path / "w.json")])
    assert r.exit_code == 0 and "clipped" in r.output
    assert json.loads((tmp_path / "w.json").read_text())["clipped_values"] == {"synthetic": {"age": 3}}
    # extra columns: refused unless asked to drop them
    real.assign(ssn=1).to_csv(tmp_path / "extra.csv", index=False)
    r = runner.invoke(app, base + [str(tmp_path / "extra.csv")] + opts + ["--output", str(tmp_path / "e.json")])
    assert r.exit_code == 2 and "ssn" in r.output and "--drop-unknown" in r.output
    r = runner.invoke(app, base + [str(tmp_path / "extra.csv")] + opts + ["--drop-unknown", "--output",
                                                                          str(tmp_path / "e.json")])
    assert r.exit_code == 0 and json.loads((tmp_path / "e.json").read_text())["tv_2way"] == 0
    # bounds released on a DP-fitted grid are not checked on the public one
    (tmp_path / "run.json").write_text(json.dumps({"method": "aim", "privacy": {"epsilon": 1.0},
                                                         "error_bounds": [{"attrs": ["age"], "l1_bound": 0.1,
                                                                           "supported": True}]}))
    r = runner.invoke(app, base + [str(tmp_path / "same.csv")] + opts + ["--run-report", str(tmp_path / "run.json"),
                                                                         "--output", str(tmp_path / "f.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "f.json").read_text())
    assert "error_bounds" not in rep and "not checked" in rep["error_bounds_note"]


def test_html_report_without_matplotlib_has_tables_and_says_how_to_get_plots(monkeypatch):
    """The core install has no matplotlib: the page keeps its tables and verdicts, without images."""
    import importlib.util

    from privmarg import Dataset, Domain
    from privmarg.evaluation.report import evaluate, render_html

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real_find(name, *a))
    rng = np.random.default_rng(0)
    dom = Domain(["a", "b"], [3, 2])
    real, syn = (Dataset(rng.integers(0, [3, 2], size=(100, 2)), dom) for _ in range(2))
    page = render_html(evaluate(real, syn, metrics=["tv_2way"]), real, syn)
    assert "<h2>Metrics</h2>" in page and "<img" not in page and "privmarg[plots]" in page


def test_quantile_shares_show_a_skewed_column_and_its_point_mass():
    """Numeric 1-way plots use the real values' quantiles: a log-normal column fills every bin about
    equally (on the public bounds' uniform grid it sits in one or two bars), a point mass at 0 is one
    bin, and a synthetic copy of the real values gets the same shares."""
    from privmarg.evaluation.report import quantile_shares

    rng = np.random.default_rng(0)
    real = np.r_[np.zeros(3000), rng.lognormal(8, 1.5, 7000), [np.nan] * 50]
    edges, p, q = quantile_shares(real, real.copy())
    assert np.allclose(p, q) and p.sum() == pytest.approx(1.0)
    assert edges[0] == 0 and (edges[1:] > 0).all()  # the zeros are one bin
    assert p[0] == pytest.approx(0.3, abs=0.01) and p[1:].max() < 0.07
    uniform = np.histogram(real[np.isfinite(real)], bins=20, range=(0, 500000))[0] / 10000
    assert uniform.max() > 0.9  # what the public grid would show
    _, _, q2 = quantile_shares(real, rng.lognormal(8, 1.5, 5000))
    assert q2[0] == 0 and q2[1:].sum() == pytest.approx(1.0)
