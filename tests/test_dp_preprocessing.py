"""DP bounds and DP value discovery in the schema pipeline (issue #15): closed-form charges under both
neighbour relations, the approximate-zCDP δ on the ledger and in the run's (ε, δ), refusals before any
data is read, reproducible encodings, and an end-to-end CLI run."""

import json
import re
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from typer.testing import CliRunner

from privmarg import load, registry
from privmarg.cli import app
from privmarg.data import ColumnCounts, DataError
from privmarg.measure import MeasurementSession
from privmarg.preprocess import TableEncoder
from privmarg.preprocess.bounds import bounds_grid, dp_bounds
from privmarg.preprocess.discovery import discover_values
from privmarg.privacy import (NEIGHBOURS, Accountant, BudgetExceededError, cdp_eps, cdp_rho, recompute_delta,
                              recompute_rho)
from privmarg.privacy.discovery import threshold_delta, threshold_for
from privmarg.privacy.discrete import discrete_gaussian, discrete_gaussian_pmf
from privmarg.schema import Schema, SchemaError, draft_schema

DP_SCHEMA = {"columns": {
    "age": {"type": "integer", "bounds": "dp"},
    "kids": {"type": "integer", "bounds": "dp"},
    "income": {"type": "float", "bounds": "dp"},
    "city": {"type": "categorical", "values": "dp", "max_values": 10},
}}
FREQUENT = ["north", "south", "east", "west"]


def _frame(n=2000, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    city = rng.choice(FREQUENT, n).astype(object)
    city[:3] = ["only-once", "twice", "twice"]  # rare values: never released at this δ
    return pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "kids": rng.integers(0, 5, n),
        "income": np.where(rng.random(n) < 0.3, 0.0, rng.lognormal(10.0, 0.5, n)),
        "city": city,
    })


def _session(df, schema, accountant, seed=0, noise="continuous"):
    enc = TableEncoder(schema)
    cols = enc._prepare(df)
    return MeasurementSession(ColumnCounts(cols, len(df)), accountant, np.random.default_rng(seed), cache=False,
                              noise=noise)


class _Unreadable:
    """A table that fails the test when anything reads it."""

    def __getattr__(self, name):
        raise AssertionError(f"the data was read ({name}) before the refusal")

    def __len__(self):
        raise AssertionError("the data was read (len) before the refusal")


# ------------------------------------------------------------------------------------ schema
@pytest.mark.parametrize("col,msg", [
    ({"type": "integer", "bounds": "dp", "min": 0}, "replaces min and max"),
    ({"type": "float", "bounds": "public"}, "must be \"dp\""),
    ({"type": "integer", "bounds": "dp", "binning": "exact"}, "exact needs public bounds"),
    ({"type": "datetime", "bounds": "dp"}, "unknown key"),
    ({"type": "categorical", "values": "dp", "other": False}, "other"),
    ({"type": "categorical", "values": "dp", "merge_rare": True}, "merge_rare"),
    ({"type": "categorical", "values": ["a"], "max_values": 3}, "max_values"),
    ({"type": "categorical", "values": "dp", "max_values": 0}, "positive integer"),
])
def test_schema_refuses_conflicting_dp_keys(col, msg):
    with pytest.raises(SchemaError, match=msg):
        Schema.from_dict({"columns": {"x": col}})


def test_dp_schema_round_trips_and_bounds_its_domain():
    s = Schema.from_dict(DP_SCHEMA)
    assert Schema.from_dict(s.to_dict()) == s
    assert s.needs_dp and s.needs_delta
    assert s.max_domain()["city"] == 11  # max_values + other
    with pytest.raises(SchemaError, match="DP step"):
        s.public_encoding()
    # a resolved column is the column written with those bounds (defaults apply: exact narrow ranges)
    assert s["kids"].with_bounds(0, 7) == Schema.from_dict(
        {"columns": {"kids": {"type": "integer", "min": 0, "max": 7}}})["kids"]


# ------------------------------------------------------------------------------- DP bounds
@pytest.mark.parametrize("neighbour", NEIGHBOURS)
def test_dp_bounds_charge_the_gaussian_closed_form(neighbour):
    df = _frame(300)
    acc = Accountant(1.0, neighbour)
    session = _session(df, DP_SCHEMA, acc)
    dp_bounds(session, Schema.from_dict(DP_SCHEMA)["age"], 0.125)
    (e,) = acc.to_dict()["ledger"]
    l2 = 1.0 if neighbour == "add_remove" else math.sqrt(2.0)
    assert e["mechanism"] == "gaussian" and e["l2_sensitivity"] == pytest.approx(l2)
    assert e["rho"] == pytest.approx(l2**2 / (2 * e["sigma"] ** 2), rel=1e-12) == pytest.approx(0.125)
    assert recompute_rho(e) == pytest.approx(e["rho"], rel=1e-12) and recompute_delta(e) == 0.0
    assert "approx_delta" not in e


def test_dp_bounds_cover_the_bulk_at_large_epsilon():
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"age": rng.integers(18, 90, 5000), "kids": rng.integers(0, 5, 5000),
                       "income": -rng.lognormal(6.0, 0.5, 5000), "city": ["a"] * 5000})
    s = Schema.from_dict(DP_SCHEMA)
    for name in ("age", "kids", "income"):
        session = _session(df, DP_SCHEMA, Accountant(100.0, "add_remove"), seed=2)
        lo, hi, facts = dp_bounds(session, s[name], 10.0)
        x = df[name].to_numpy()
        assert facts["ok"]
        assert lo <= np.quantile(x, 0.002) and hi >= np.quantile(x, 0.998), (name, lo, hi)
        # at most a factor of two looser than the data (grid buckets are powers of two)
        assert abs(lo) <= 2 * max(abs(x.min()), 1) and abs(hi) <= 2 * max(abs(x.max()), 1) + 1, (name, lo, hi)


def test_the_bounds_grid_is_public():
    a = Schema.from_dict({"columns": {"x": {"type": "float", "bounds": "dp"}}})["x"]
    b = Schema.from_dict({"columns": {"y": {"type": "float", "bounds": "dp", "bins": 7}}})["y"]
    assert np.array_equal(bounds_grid(a), bounds_grid(b))  # fixed by the type alone
    g = bounds_grid(Schema.from_dict(DP_SCHEMA)["age"])
    assert np.all(np.diff(g) > 0) and 0.0 in g and np.all(g == np.round(g))


# ------------------------------------------------------------------------------- discovery
def test_threshold_delta_is_the_gaussian_tail():
    sigma, tau = 3.0, 10.0
    assert threshold_delta(sigma, tau, 1) == pytest.approx(norm.sf((tau - 1) / sigma), rel=1e-12)
    assert threshold_delta(sigma, tau, 2) == pytest.approx(2 * norm.sf(3.0), rel=1e-12)
    rng = np.random.default_rng(0)  # a key with count 1 passes tau at exactly that rate
    rate = np.mean(1.0 + rng.normal(0, sigma, 400_000) > tau)
    assert rate == pytest.approx(norm.sf(3.0), rel=0.05)
    draws = discrete_gaussian(sigma, 400_000, rng)  # the discrete tail likewise
    t = threshold_for(sigma, 1e-3, 1, discrete=True)
    assert np.mean(1 + draws > t) == pytest.approx(threshold_delta(sigma, t, 1, discrete=True), rel=0.1)
    for keys in (1, 2):
        t = threshold_for(sigma, 1e-9, keys)
        assert threshold_delta(sigma, t, keys) <= 1e-9
        assert threshold_delta(sigma, t, keys) == pytest.approx(1e-9, rel=1e-6)


@pytest.mark.parametrize("noise", ["continuous", "discrete"])
@pytest.mark.parametrize("neighbour", NEIGHBOURS)
def test_discovery_charges_rho_and_delta_in_closed_form(neighbour, noise):
    df = _frame(5000)
    acc = Accountant(10.0, neighbour, epsilon=10.0, delta=1e-6, delta_budget=1e-7)
    session = _session(df, DP_SCHEMA, acc, noise=noise)
    values, facts = discover_values(session, Schema.from_dict(DP_SCHEMA)["city"], 0.5, 1e-7)
    (e,) = acc.to_dict()["ledger"]
    l2, keys = (1.0, 1) if neighbour == "add_remove" else (math.sqrt(2.0), 2)
    assert e["keys_at_risk"] == keys
    assert e["rho"] == pytest.approx(l2**2 / (2 * e["sigma"] ** 2), rel=1e-12) == pytest.approx(0.5)
    if noise == "continuous":
        assert e["mechanism"] == "gaussian_threshold"
        assert e["approx_delta"] == pytest.approx(keys * norm.sf((e["threshold"] - 1) / e["sigma"]), rel=1e-9)
    else:  # half-integer threshold, the discrete Gaussian's tail: P(Z >= m), m = threshold - 1/2
        assert e["mechanism"] == "discrete_gaussian_threshold" and e["threshold"] % 1 == 0.5
        m = int(e["threshold"] - 0.5)
        z = np.arange(m, m + 200)
        assert e["approx_delta"] == pytest.approx(keys * discrete_gaussian_pmf(e["sigma"], z).sum(), rel=1e-9)
        assert keys * discrete_gaussian_pmf(e["sigma"], z - 1).sum() > 1e-7  # the least such threshold
    assert e["approx_delta"] <= 1e-7 and acc.delta_spent == e["approx_delta"]
    assert recompute_rho(e) == pytest.approx(e["rho"], rel=1e-12)
    assert recompute_delta(e) == pytest.approx(e["approx_delta"], rel=1e-12)
    # moderate budget: every frequent value (about 1250 rows each) found, no rare one
    assert values == sorted(FREQUENT) and facts["threshold"] > 3


def test_accountant_keeps_the_delta_budget():
    acc = Accountant.from_epsilon_delta(1.0, 1e-6, delta_budget=1e-7)
    assert acc.rho_total == pytest.approx(cdp_rho(1.0, 9e-7))
    acc.charge(0.01, "a", "gaussian_threshold", approx_delta=6e-8, sigma=1.0, l2_sensitivity=1.0)
    with pytest.raises(BudgetExceededError, match="delta"):
        acc.charge(0.01, "b", "gaussian_threshold", approx_delta=6e-8, sigma=1.0, l2_sensitivity=1.0)
    assert len(acc.ledger) == 1 and acc.delta_spent == 6e-8 and not acc.can_afford(0.0, 6e-8)
    assert acc.epsilon_spent(1e-6) == pytest.approx(cdp_eps(0.01, 1e-6 - 6e-8))
    with pytest.raises(ValueError, match="delta"):
        Accountant(1.0, epsilon=1.0, delta=1e-7, delta_budget=1e-7)
    with pytest.raises(BudgetExceededError):  # no δ reserved: an approximate step is refused
        Accountant(1.0).charge(0.1, "c", "gaussian_threshold", approx_delta=1e-12, sigma=1.0, l2_sensitivity=1.0)


# ------------------------------------------------------------------------------- refusals
def test_unaffordable_budgets_are_refused_before_the_data_is_read():
    acc = Accountant(0.01, "add_remove", epsilon=1.0, delta=1e-6, delta_budget=1e-7)
    with pytest.raises(BudgetExceededError, match="exceeds"):
        TableEncoder(DP_SCHEMA).fit(_Unreadable(), acc, 0.02, np.random.default_rng(0))
    no_delta = Accountant(1.0, "add_remove")  # value discovery needs a δ reserved
    with pytest.raises(BudgetExceededError, match="delta"):
        TableEncoder(DP_SCHEMA).fit(_Unreadable(), no_delta, 0.1, np.random.default_rng(0))
    assert acc.rho_spent == 0 and no_delta.rho_spent == 0
    synth = registry.make_preset("mst", None, None, rho=1.0)
    with pytest.raises(ValueError, match="give epsilon and delta"):
        synth.fit(_Unreadable(), DP_SCHEMA)
    enc = TableEncoder(DP_SCHEMA)
    with pytest.raises(DataError, match="DP step"):
        enc.check_zeros([{"attrs": ["city"], "cells": [["north"]]}])


# ------------------------------------------------------------------------------- reproducible
def _fitted(seed, df=None):
    df = _frame(1500) if df is None else df
    acc = Accountant.from_epsilon_delta(8.0, 1e-6, delta_budget=1e-7)
    enc = TableEncoder(DP_SCHEMA)
    codes = enc.fit_encode(df, acc, 0.1 * acc.rho_total, np.random.default_rng(seed))
    return enc, codes, acc


def test_same_schema_and_seed_give_the_same_encoding():
    (a, ca, acc_a), (b, cb, _) = _fitted(5), _fitted(5)
    assert a.report() == b.report() and a.domain == b.domain
    assert np.array_equal(ca.to_frame().to_numpy(), cb.to_frame().to_numpy())
    # the encoding is the schema plus the released values: a saved state rebuilds it exactly
    c = TableEncoder.from_state(json.loads(json.dumps(a.state())))
    assert c.domain == a.domain and c.schema == a.schema
    df = _frame(1500)
    assert np.array_equal(c.encode(df).to_frame().to_numpy(), ca.to_frame().to_numpy())
    rep = a.report()
    assert Schema.from_dict(rep["schema"]) == a.schema  # the resolved schema, usable for evaluation
    cols = rep["columns"]
    assert cols["city"]["found"]["values"] == sorted(FREQUENT)
    assert cols["kids"]["found"]["bounds"][0] == 0 and cols["kids"]["binning"] == "exact"
    # every preprocessing share is in the ledger, recomputes, and adds up to what was charged
    ledger = acc_a.to_dict()["ledger"]
    assert sum(recompute_rho(e) for e in ledger) == pytest.approx(acc_a.rho_spent, rel=1e-12)
    assert acc_a.rho_spent == pytest.approx(0.1 * acc_a.rho_total, rel=1e-9)
    assert sum(recompute_delta(e) for e in ledger) == pytest.approx(acc_a.delta_spent, rel=1e-12)
    assert sum(c["rho"] for c in cols.values() if "rho" in c) == pytest.approx(acc_a.rho_spent, rel=1e-9)


def test_another_seed_may_move_the_bounds_but_not_the_grid():
    a, _, _ = _fitted(1)
    b, _, _ = _fitted(2)
    assert a.report()["columns"]["city"]["found"]["values"] == b.report()["columns"]["city"]["found"]["values"]
    assert a.given_schema == b.given_schema


# ------------------------------------------------------------------------------- runs
def test_a_run_reports_the_delta_it_spent(tmp_path):
    synth = registry.make_preset("mst", 4.0, 1e-6, seed=0)
    synth.fit(_frame(1500), DP_SCHEMA)
    pr = synth.privacy_report()
    assert synth.rho_total == pytest.approx(cdp_rho(4.0, 0.9e-6))
    assert pr["delta_budget"] == pytest.approx(1e-7) and 0 < pr["delta_spent"] <= 1e-7
    assert sum(recompute_delta(e) for e in pr["ledger"]) == pytest.approx(pr["delta_spent"], rel=1e-12)
    assert sum(recompute_rho(e) for e in pr["ledger"]) == pytest.approx(pr["rho_spent"], rel=1e-9)
    assert pr["epsilon_spent"] == pytest.approx(cdp_eps(pr["rho_spent"], 1e-6 - pr["delta_spent"]))
    assert pr["epsilon_spent"] <= 4.0 + 1e-9
    out = synth.sample(200)
    assert set(out["city"]) <= set(FREQUENT) | {"__other__"}
    saved = load(synth.save(tmp_path / "model"))  # the released bounds and values travel with the model
    assert saved.privacy_report() == pr and saved.encoder_.domain == synth.encoder_.domain
    assert saved.encoder_.report() == synth.encoder_.report()
    assert set(saved.sample(100, seed=1)["city"]) <= set(FREQUENT) | {"__other__"}


def test_dp_bounds_with_atoms_that_find_a_narrow_integer_range_are_coded_exactly():
    """An integer column with DP bounds and atoms whose bounds come out narrow is coded one code a
    value (the fit failed there, after the bounds' charge: atoms are for binned columns)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"k": rng.integers(0, 20, 500), "g": rng.choice(["a", "b"], 500)})
    schema = Schema.from_dict({"columns": {"k": {"type": "integer", "bounds": "dp", "atoms": [0]},
                                           "g": {"type": "categorical", "values": ["a", "b"]}}})
    m = registry.make_preset("mst", 4.0, 1e-9, seed=0).fit(df, schema)
    k = m.encoder_.schema["k"]
    assert k.binning == "exact" and k.hi - k.lo + 1 <= 64 and not k.atoms
    assert m.sample(300, seed=0)["k"].between(k.lo, k.hi).all()
    wide = Schema.from_dict({"columns": {"k": {"type": "integer", "bounds": "dp", "atoms": [0]}}})
    df_wide = pd.DataFrame({"k": rng.integers(0, 5000, 2000)})
    kw = registry.make_preset("mst", 4.0, 1e-9, seed=0).fit(df_wide, wide).encoder_.schema["k"]
    assert kw.binning == "privtree"  # a wide range keeps its bins (and the atoms inside its bounds)
    assert all(kw.lo <= a <= kw.hi for a in kw.atoms)


def test_a_discovery_that_finds_nothing_and_thin_bounds_are_told():
    """Too small a budget for the rows: discovery releases no value (every row written "__other__")
    and the DP bounds' notes give the noisy row count with its noise; a larger budget finds the
    values and says nothing of them."""
    df = _frame(300)
    small = registry.make_preset("mst", 0.05, 1e-9, seed=0).fit(df, DP_SCHEMA)
    warn = small.encoder_.warnings_
    assert any("'city': DP value discovery released no value" in w and "'__other__'" in w for w in warn)
    assert set(small.sample(100, seed=0)["city"]) == {"__other__"}
    thin = [w for w in registry.make_preset("mst", 0.5, 1e-9, seed=0).fit(_frame(2000), DP_SCHEMA).encoder_.warnings_
            if "noisy row count" in w]
    assert len(thin) == 3 and all(re.search(r"count: -?\d+ ± \d+\)", w) for w in thin)
    big = registry.make_preset("mst", 8.0, 1e-6, seed=0).fit(_frame(3000), DP_SCHEMA)
    assert not any("'city'" in w for w in big.encoder_.warnings_)
    assert set(big.sample(500, seed=0)["city"]) >= set(FREQUENT)


@pytest.mark.parametrize("method,noise", [("aim", "continuous"), ("mst", "discrete")])
def test_cli_fit_with_dp_columns_decodes_to_valid_values(tmp_path: Path, method, noise):
    df = _frame(1200, seed=3)
    data, schema = tmp_path / "t.csv", tmp_path / "s.json"
    df.to_csv(data, index=False)
    schema.write_text(json.dumps(DP_SCHEMA))
    out, report = tmp_path / "o.csv", tmp_path / "r.json"
    r = CliRunner().invoke(app, ["synth", str(data), "--schema", str(schema), "--method", method, "--epsilon", "4",
                                 "--delta", "1e-6", "--seed", "1", "--workload", "all-2way", "--noise", noise,
                                 "-o", str(out),
                                 "--report", str(report)])
    assert r.exit_code == 0, r.output
    assert "on DP value discovery" in r.output
    rep = json.loads(report.read_text())
    found = {n: c["found"] for n, c in rep["preprocessing"]["columns"].items()}
    syn = pd.read_csv(out)
    for name in ("age", "kids"):
        lo, hi = found[name]["bounds"]
        assert syn[name].between(lo, hi).all() and (syn[name] == syn[name].round()).all()
    lo, hi = found["income"]["bounds"]
    assert syn["income"].between(lo, hi).all()
    assert set(syn["city"]) <= set(found["city"]["values"]) | {"__other__"}
    assert "only-once" not in found["city"]["values"]
    led = rep["privacy"]["ledger"]
    assert all(recompute_rho(e) == pytest.approx(e["rho"], rel=1e-9) for e in led)
    # city's values, then income's heavy values (a float column with DP bounds)
    thr = ("discrete_" if noise == "discrete" else "") + "gaussian_threshold"
    assert [e["what"].split()[0] for e in led if e["mechanism"] == thr] == ["DP", "heavy"]
    assert rep["privacy"]["delta_spent"] == pytest.approx(sum(recompute_delta(e) for e in led), rel=1e-12)
    # evaluating against the same DP schema: the run report's resolved schema stands in for it
    ev = tmp_path / "e.json"
    r = CliRunner().invoke(app, ["evaluate", str(data), str(out), "--schema", str(schema), "-o", str(ev)])
    assert r.exit_code == 2 and "--run-report" in r.output and not ev.exists()
    r = CliRunner().invoke(app, ["evaluate", str(data), str(out), "--schema", str(schema), "--run-report",
                                 str(report), "-o", str(ev), "--metrics", "tv_1way,tv_2way", "--ml-models", ""])
    assert r.exit_code == 0, r.output
    assert 0 <= json.loads(ev.read_text())["tv_1way"] < 0.5
    other = json.loads(report.read_text())
    other["preprocessing"]["schema"]["columns"]["years"] = other["preprocessing"]["schema"]["columns"].pop("age")
    bad = {"no_schema": {k: v for k, v in rep.items() if k != "preprocessing"}, "other_schema": other}
    for name, content in bad.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
    (tmp_path / "not_json.json").write_text("{not json")
    for name, said in (("no_schema", "holds no resolved schema"), ("other_schema", "made with another schema"),
                       ("not_json", "not a JSON report")):
        r = CliRunner().invoke(app, ["evaluate", str(data), str(out), "--schema", str(schema), "--run-report",
                                     str(tmp_path / f"{name}.json"), "-o", str(tmp_path / f"{name}_e.json")])
        assert r.exit_code == 2 and said in r.output and f"{name}.json" in r.output, (name, r.output)
        assert not (tmp_path / f"{name}_e.json").exists()


def test_draft_with_dp_reads_no_bounds_or_values():
    df = _frame(400)
    spec, _ = draft_schema(df, dp=True)
    cols = spec["columns"]
    assert cols["age"] == {"type": "integer", "bounds": "dp"}
    assert cols["income"] == {"type": "float", "bounds": "dp"}
    assert cols["kids"] == {"type": "integer", "bounds": "dp"}  # few whole numbers: exact once bounded
    assert cols["city"] == {"type": "categorical", "values": "dp"}
    s = Schema.from_dict(spec)
    assert s.draft and s.needs_delta
    assert "types" in spec["_warning"] and "PRIVATE" in spec["_warning"]


def test_the_json_schema_accepts_dp_columns():
    jsonschema = pytest.importorskip("jsonschema")
    js = json.loads((Path(__file__).parent.parent / "docs" / "schemas" / "schema.schema.json").read_text())
    jsonschema.validate(DP_SCHEMA, js)
    for bad in ({"type": "float", "bounds": "dp", "min": 0}, {"type": "categorical", "values": "dp", "other": False},
                {"type": "float", "bounds": "yes"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"columns": {"x": bad}}, js)


# ------------------------------------------------------------------------------- DP quantiles
QUANT = {"columns": {"x": {"type": "float", "min": 0, "max": 500, "binning": "quantiles", "bins": 8},
                     "y": {"type": "integer", "min": 0, "max": 999, "binning": "quantiles"}}}


def _quantile_frame(n=5000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.lognormal(3.0, 1.0, n), "y": rng.integers(0, 1000, n)})


@pytest.mark.parametrize("neighbour", NEIGHBOURS)
def test_dp_quantiles_charge_the_gaussian_and_follow_the_data(neighbour):
    df = _quantile_frame()
    acc = Accountant(10.0, neighbour)
    enc = TableEncoder(QUANT)
    enc.fit(df, acc, 8.0, np.random.default_rng(0))
    ledger = acc.to_dict()["ledger"]
    l2 = 1.0 if neighbour == "add_remove" else math.sqrt(2.0)
    assert [e["mechanism"] for e in ledger] == ["gaussian", "gaussian"]  # the grid is public: no tree
    for e in ledger:
        assert e["l2_sensitivity"] == pytest.approx(l2) and e["rho"] == pytest.approx(4.0)
        assert recompute_rho(e) == pytest.approx(l2**2 / (2 * e["sigma"] ** 2), rel=1e-12)
    edges = np.asarray(enc.report()["columns"]["x"]["edges"])
    assert len(edges) == 9 and edges[0] == 0 and edges[-1] == 500
    # at a large budget the inner edges sit at the data's octiles, within two cells of the grid
    q = np.quantile(df["x"], np.arange(1, 8) / 8)
    assert np.all(np.abs(edges[1:-1] - q) <= 2 * 500 / 256), (edges, q)
    y_edges = np.asarray(enc.report()["columns"]["y"]["edges"])  # bins sized to rows and budget, capped
    assert 2 <= len(y_edges) - 1 <= 64
    again = TableEncoder(QUANT).fit(df, Accountant(10.0, neighbour), 8.0, np.random.default_rng(0))
    assert again.report() == enc.report()  # same schema, data and seed: same edges


def test_quantiles_schema_and_public_encoding():
    s = Schema.from_dict(QUANT)
    assert s["x"].dp_step == "quantiles" and not s["x"].adaptive and s["y"].adaptive and s.needs_dp
    assert s.public_encoding()["x"].binning == "uniform"
    dp = Schema.from_dict({"columns": {"z": {"type": "float", "bounds": "dp", "binning": "quantiles", "bins": 4}}})
    assert dp["z"].with_bounds(-4.0, 4.0).binning == "quantiles"
    jsonschema = pytest.importorskip("jsonschema")
    js = json.loads((Path(__file__).parent.parent / "docs" / "schemas" / "schema.schema.json").read_text())
    jsonschema.validate(QUANT, js)
    jsonschema.validate(dp.to_dict(), js)


def test_each_dp_step_refuses_an_unaffordable_charge_and_records_nothing():
    df = _frame(300)
    s = Schema.from_dict(DP_SCHEMA)
    acc = Accountant(0.1, "add_remove", epsilon=1.0, delta=1e-6, delta_budget=1e-9)
    session = _session(df, DP_SCHEMA, acc)
    with pytest.raises(BudgetExceededError):  # bounds: rho beyond the budget
        dp_bounds(session, s["age"], 0.2)
    with pytest.raises(BudgetExceededError):  # discovery: delta beyond the reserve
        discover_values(session, s["city"], 0.01, 2e-9)
    with pytest.raises(BudgetExceededError):  # discovery: rho beyond the budget
        discover_values(session, s["city"], 0.2, 1e-9)
    with pytest.raises(BudgetExceededError):  # quantile bins: the encoder's share beyond the budget
        TableEncoder(QUANT).fit(_Unreadable(), acc, 0.2, np.random.default_rng(0))
    assert acc.ledger == () and acc.rho_spent == 0 and acc.delta_spent == 0
