"""Raw tables in, raw tables out (issue #6): encoding, decoding, DP preprocessing, bad input, end to end."""

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import AIM, MST, Independent, datasets
from privmarg.cli import app
from privmarg.data import ColumnCounts, DataError, read_table
from privmarg.measure import MeasurementSession
from privmarg.preprocess import TableEncoder, privtree_edges, privtree_parameters, rare_categories
from privmarg.privacy import Accountant, BudgetExceededError
from privmarg.schema import Schema, load_schema

runner = CliRunner()

SCHEMA = {"columns": {
    "age": {"type": "integer", "min": 0, "max": 100, "bins": 101},
    "income": {"type": "float", "min": 0, "max": 500000, "bins": 16},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "job": {"type": "categorical", "values": ["clerk", "nurse", "pilot"], "other": True, "missing": True},
    "opened": {"type": "datetime", "min": "2000-01-01", "max": "2024-12-31", "bins": 32},
    "owner": {"type": "boolean", "missing": True},
    "kids": {"type": "integer", "min": 0, "max": 10, "missing": True},
    "score": {"type": "float", "min": 0, "max": 1, "missing": True, "bins": 32},
}}  # bins given: uniform, a public encoding (the defaults would ask for PrivTree)


def raw_frame(n=400, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    miss = lambda p: rng.random(n) < p  # noqa: E731
    df = pd.DataFrame({
        "age": rng.integers(0, 101, n),
        "income": rng.gamma(2.0, 30000.0, n),
        "sex": rng.choice(["F", "M"], n),
        "job": rng.choice(["clerk", "nurse", "pilot"], n).astype(object),
        "opened": pd.Timestamp("2000-01-01") + pd.to_timedelta(rng.integers(0, 9000, n), unit="D"),
        "owner": rng.random(n) < 0.4,
        "kids": rng.integers(0, 11, n).astype(float),
        "score": rng.random(n),
    })
    df.loc[miss(0.1), "job"] = None
    df["owner"] = df["owner"].astype(object)
    df.loc[miss(0.2), "owner"] = None
    df.loc[miss(0.15), "kids"] = np.nan
    df.loc[miss(0.3), "score"] = np.nan
    return df


# ----------------------------------------------------------------------------- encode / decode
def test_round_trip_keeps_dtypes_ranges_and_missing():
    df = raw_frame()
    enc = TableEncoder(SCHEMA).fit()
    ds = enc.encode(df)
    assert ds.domain == enc.domain == Schema.from_dict(SCHEMA).max_domain()
    out = enc.decode(ds.codes, np.random.default_rng(1))
    schema = Schema.from_dict(SCHEMA)
    assert list(out.columns) == list(schema.names)
    assert {c: str(t) for c, t in out.dtypes.items()} == {c: str(pd.Series([], dtype=t).dtype)
                                                         for c, t in schema.dtypes().items()}
    for c in df.columns:  # missing values survive, exactly where they were
        np.testing.assert_array_equal(out[c].isna().to_numpy(), df[c].isna().to_numpy(), err_msg=c)
    # exact where the encoding is exact: integers with a bin per value, categories, booleans
    assert (out["age"] == df["age"]).all()
    ok = df["kids"].notna()
    assert (out["kids"][ok].astype(int) == df["kids"][ok].astype(int)).all()
    for c in ("sex", "job", "owner"):
        assert out[c].dropna().tolist() == df[c].dropna().tolist(), c
    # binned values stay in their bin, within the bounds
    edges = enc.codecs_["income"].edges
    j = np.searchsorted(edges, df["income"].clip(0, 500000), side="right") - 1
    assert ((out["income"] >= edges[np.minimum(j, 15)]) & (out["income"] <= edges[np.minimum(j, 15) + 1])).all()
    assert out["score"].dropna().between(0, 1).all()
    # datetimes: same day-bin, whole days, within the bounds
    assert (out["opened"] == out["opened"].dt.normalize()).all()
    assert out["opened"].between(pd.Timestamp("2000-01-01"), pd.Timestamp("2024-12-31")).all()
    # a second round trip is stable in dtypes and codes
    np.testing.assert_array_equal(enc.encode(out).codes, ds.codes)


def test_midpoint_decoding_and_integer_rounding():
    spec = {"columns": {"x": {"type": "float", "min": 0, "max": 10, "bins": 5},
                        "n": {"type": "integer", "min": 0, "max": 99, "bins": 10}}}
    enc = TableEncoder(spec).fit()
    codes = np.array([[0, 0], [4, 9], [2, 5]])
    out = enc.decode(codes, midpoint=True)
    assert out["x"].tolist() == [1.0, 9.0, 5.0]
    assert out["n"].tolist() == [5, 95, 55]  # bins of 10 integers, midpoints rounded
    assert str(out["n"].dtype) == "int64"
    drawn = enc.decode(np.tile(codes, (200, 1)), np.random.default_rng(0))
    assert drawn["n"].between(0, 99).all() and (drawn["n"] % 1 == 0).all()
    assert set(drawn["n"][0::3]) <= set(range(0, 10))


def test_out_of_bounds_values_are_clipped_and_unknown_categories_use_other():
    df = raw_frame(50)
    df.loc[0, "age"], df.loc[1, "income"], df.loc[2, "score"] = 150, -5.0, 7.0
    df.loc[3, "opened"] = pd.Timestamp("1990-06-01")
    df.loc[4, "job"] = "astronaut"
    enc = TableEncoder(SCHEMA).fit()
    out = enc.decode(enc.encode(df).codes, np.random.default_rng(0))
    assert out.loc[0, "age"] == 100 and 0 <= out.loc[1, "income"] < 500000 / 16
    assert out.loc[2, "score"] >= 0.96875 and out.loc[3, "opened"] >= pd.Timestamp("2000-01-01")
    assert out.loc[4, "job"] == "__other__"


def test_categories_match_across_csv_types(tmp_path):
    spec = {"columns": {"code": {"type": "categorical", "values": ["1", "2", "10"]},
                        "num": {"type": "categorical", "values": [1, 2]},
                        "flag": {"type": "boolean"}}}
    df = pd.DataFrame({"code": [1, 2, 10], "num": [1.0, 2.0, 1.0], "flag": ["yes", "No", "TRUE"]})
    enc = TableEncoder(spec).fit()
    out = enc.decode(enc.encode(df).codes)
    assert out["code"].tolist() == ["1", "2", "10"] and out["num"].tolist() == [1, 2, 1]
    assert out["flag"].tolist() == [True, False, True] and str(out["flag"].dtype) == "bool"


def test_public_encoding_depends_on_the_schema_alone():
    a, b = raw_frame(300, seed=1), raw_frame(700, seed=2)
    b["income"] *= 3
    acc = Accountant(1.0)
    e0 = TableEncoder(SCHEMA).fit()  # no data at all
    e1 = TableEncoder(SCHEMA).fit(a, acc, 0.5, np.random.default_rng(0))
    e2 = TableEncoder(SCHEMA).fit(b)
    assert acc.rho_spent == 0 and not acc.ledger  # nothing asked for DP: nothing charged
    assert e0.domain == e1.domain == e2.domain
    for c in ("age", "income", "opened", "kids", "score"):
        np.testing.assert_array_equal(e0.codecs_[c].edges, e1.codecs_[c].edges)
        np.testing.assert_array_equal(e1.codecs_[c].edges, e2.codecs_[c].edges)
    np.testing.assert_array_equal(e1.codecs_["income"].edges, np.linspace(0, 500000, 17))


# ----------------------------------------------------------------------------- DP steps
DP_SCHEMA = {"columns": {
    "x": {"type": "float", "min": 0, "max": 1000, "bins": 64, "binning": "privtree"},
    "n": {"type": "integer", "min": 0, "max": 1000, "bins": 256, "binning": "privtree", "missing": True},
    "c": {"type": "categorical", "values": [f"v{i}" for i in range(200)], "merge_rare": True},
    "s": {"type": "categorical", "values": ["a", "b"]},
}}


def dp_frame(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    p = np.r_[np.full(5, 0.19), np.full(195, 0.05 / 195)]
    n_col = rng.integers(0, 20, n).astype(float)
    n_col[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame({"x": rng.exponential(5.0, n), "n": n_col,
                         "c": [f"v{i}" for i in rng.choice(200, n, p=p)], "s": rng.choice(["a", "b"], n)})


def _recompute(c: dict) -> float:
    if c["mechanism"] == "privtree":
        eps = c["group"] * (2 * c["fanout"] - 1) / ((c["fanout"] - 1) * c["scale"])
        assert math.isclose(eps, c["epsilon"], rel_tol=1e-12)
        assert math.isclose(c["bias"], c["scale"] * math.log(c["fanout"]), rel_tol=1e-12)
        return c["epsilon"] ** 2 / 2
    if c["mechanism"] == "gaussian":
        return c["l2_sensitivity"] ** 2 / (2 * c["sigma"] ** 2)
    assert c["mechanism"] == "exponential"
    return c["epsilon"] ** 2 / 8


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_dp_steps_charge_exactly_their_budget(neighbour):
    acc = Accountant(10.0, neighbour=neighbour)
    enc = TableEncoder(DP_SCHEMA)
    enc.fit(dp_frame(2000), acc, 0.3, np.random.default_rng(0))
    entries = [c.to_dict() for c in acc.ledger]
    assert [c["mechanism"] for c in entries] == ["privtree", "privtree", "gaussian"]
    for c in entries:  # split equally over the three DP columns, each recomputable from its parameters
        assert math.isclose(_recompute(c), c["rho"], rel_tol=1e-12)
        assert math.isclose(c["rho"], 0.1, rel_tol=1e-12)
    assert math.isclose(acc.rho_spent, 0.3, rel_tol=1e-12) and math.isclose(enc.rho_spent_, 0.3, rel_tol=1e-12)
    gauss = entries[2]
    assert gauss["l2_sensitivity"] == (1.0 if neighbour == "add_remove" else math.sqrt(2))
    assert entries[0]["group"] == (1 if neighbour == "add_remove" else 2)


def test_dp_steps_never_see_budget_they_were_not_given():
    df = dp_frame(500)
    acc = Accountant(1.0)
    acc.charge(0.95, "earlier work", "test")
    with pytest.raises(BudgetExceededError):  # 0.1 asked, 0.05 left: refused before any charge
        TableEncoder(DP_SCHEMA).fit(df, acc, 0.1, np.random.default_rng(0))
    assert len(acc.ledger) == 1
    with pytest.raises(ValueError, match="budget"):
        TableEncoder(DP_SCHEMA).fit(df, Accountant(1.0), 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="needs the data"):
        TableEncoder(DP_SCHEMA).fit(None, Accountant(1.0), 0.1, np.random.default_rng(0))
    # bad data is refused before the first charge
    bad = df.copy()
    bad.loc[3, "s"] = "zzz"
    acc2 = Accountant(1.0)
    with pytest.raises(DataError, match="column 's'.*'zzz'"):
        TableEncoder(DP_SCHEMA).fit_encode(bad, acc2, 0.1, np.random.default_rng(0))
    assert acc2.rho_spent == 0


def _session(rho_total: float, seed: int = 0, **columns) -> MeasurementSession:
    """A preprocessing session over raw columns (what TableEncoder builds)."""
    rows = len(next(iter(columns.values())))
    return MeasurementSession(ColumnCounts(columns, rows), Accountant(rho_total), np.random.default_rng(seed))


def test_privtree_adapts_to_the_data_and_respects_the_cap():
    df = dp_frame()
    col = Schema.from_dict(DP_SCHEMA)["x"]
    x = df["x"].to_numpy()
    edges = privtree_edges(_session(100.0, x=x), "x", col, 50.0)
    assert edges[0] == 0 and edges[-1] == 1000 and np.all(np.diff(edges) > 0)
    assert len(edges) - 1 <= col.bins
    widths = np.diff(edges)
    assert widths[0] == 1000 / 64  # dense region split to the finest allowed width
    assert widths.max() >= 250  # the empty tail stays coarse
    # lattice columns: integer edges, at least one value per bin, never finer than one value
    ncol = Schema.from_dict(DP_SCHEMA)["n"]
    nx = df["n"].dropna().to_numpy()
    e = privtree_edges(_session(100.0, n=nx), "n", ncol, 50.0)
    assert np.all(e == np.round(e)) and e[-1] == 1001 and np.all(np.diff(e) >= 1)
    # tiny budget and few records: the depth bias dominates the counts, so few bins
    sizes = [len(privtree_edges(_session(1.0, s, x=x[:50]), "x", col, 1e-6)) - 1 for s in range(20)]
    assert np.mean(sizes) < 6


def test_privtree_parameters_follow_spec():
    p = privtree_parameters(0.02, "add_remove")
    assert math.isclose(p["scale"], 3 * math.sqrt(1 / (2 * 0.02)))  # λ = 3·√(K/(2ρ_num)) with K = 1
    assert math.isclose(p["bias"], p["scale"] * math.log(2))
    q = privtree_parameters(0.02, "replace_one")
    assert math.isclose(q["scale"], 2 * p["scale"]) and q["epsilon"] == p["epsilon"]


def test_rare_merging_dual_threshold_and_decoding():
    df = dp_frame()
    codes = df["c"].str[1:].astype(int).to_numpy()
    rare = rare_categories(_session(100.0, c=codes), "c", 200, 50.0)
    # large budget: the 0.2% threshold decides: v5..v199 (each ~0.026%) are rare, v0..v4 (19%) are not
    assert set(rare.tolist()) == set(range(5, 200))
    # tiny budget: 3σ dominates and even the common values look rare
    rare_small = rare_categories(_session(1.0, c=codes), "c", 200, 1e-7)
    assert len(rare_small) > 195
    enc = TableEncoder(DP_SCHEMA)
    ds = enc.fit_encode(df, Accountant(100.0), 60.0, np.random.default_rng(0))
    assert enc.domain["c"] == 6  # five kept values + the merged group
    out = enc.decode(ds.codes, np.random.default_rng(1))
    merged = ~out["c"].isin([f"v{i}" for i in range(5)])
    assert merged.mean() == pytest.approx(0.05, abs=0.01)
    assert len(set(out["c"][merged])) > 50  # drawn uniformly from the group
    assert enc.report()["columns"]["c"]["merged"][:2] == ["v5", "v6"]


def test_mechanism_budget_split_with_and_without_dp_preprocessing():
    df = dp_frame(3000)
    m = Independent(rho=0.5, seed=0, iters=50).fit(df, DP_SCHEMA)
    led = m.privacy_report()["ledger"]
    pre = [c for c in led if c["what"].startswith(("PrivTree", "rare-category"))]
    assert len(pre) == 3 and math.isclose(sum(c["rho"] for c in pre), 0.05, rel_tol=1e-9)
    assert math.isclose(m.rho_preprocess_, 0.05, rel_tol=1e-9) and math.isclose(m.rho_available_, 0.45, rel_tol=1e-9)
    assert math.isclose(sum(c["rho"] for c in led), 0.5, rel_tol=1e-9)
    assert m.accountant_.rho_spent <= 0.5 * (1 + 1e-9)
    # share is configurable; public-only schemas reserve nothing
    m2 = Independent(rho=0.5, seed=0, iters=50, preprocess_share=0.2).fit(df, DP_SCHEMA)
    assert math.isclose(m2.rho_preprocess_, 0.1, rel_tol=1e-9)
    public = {"columns": {k: v for k, v in DP_SCHEMA["columns"].items() if k == "s"}}
    m3 = Independent(rho=0.5, seed=0, iters=50).fit(df, public, drop_unknown=True)
    assert m3.rho_preprocess_ == 0 and m3.rho_available_ == 0.5
    assert all(c["mechanism"] == "gaussian" for c in m3.privacy_report()["ledger"])
    with pytest.raises(ValueError, match="preprocess_share"):
        Independent(rho=0.5, preprocess_share=1.0)


def test_fit_dataframe_and_schema_samples_schema_types():
    df = raw_frame(500)
    m = Independent(epsilon=2.0, delta=1e-6, seed=3, iters=100).fit(df, SCHEMA)
    syn = m.sample(300)
    assert list(syn.columns) == list(Schema.from_dict(SCHEMA).names) and len(syn) == 300
    want = {c: str(pd.Series([], dtype=t).dtype) for c, t in Schema.from_dict(SCHEMA).dtypes().items()}
    # a datetime column keeps the input's unit (the schema's dtype says ns)
    want.update({c: str(df[c].dtype) for c in want if pd.api.types.is_datetime64_dtype(df[c].dtype)})
    assert {c: str(t) for c, t in syn.dtypes.items()} == want
    assert syn["age"].between(0, 100).all() and set(syn["sex"]) <= {"F", "M"}
    assert set(syn["job"].dropna()) <= {"clerk", "nurse", "pilot", "__other__"}
    mid = m.sample(50, midpoint=True)
    assert set(mid["income"]) <= set((np.linspace(0, 500000, 17)[:-1] + 500000 / 32).tolist())
    # integer-coded data with a domain still works (and a domain file path too)
    codes = pd.DataFrame({"a": [0, 1, 2, 1], "b": [1, 0, 1, 1]})
    assert list(Independent(seed=0).fit(codes, {"a": 3, "b": 2}).sample(5).columns) == ["a", "b"]


# ----------------------------------------------------------------------------- bad input
def _python_bad_cases():
    base = raw_frame(30)
    wrong = base.copy()
    wrong["age"] = wrong["age"].astype(object)
    wrong.loc[5, "age"] = "forty"
    frac = base.copy()
    frac["age"] = frac["age"].astype(float)
    frac.loc[2, "age"] = 40.5
    nulls = base.copy()
    nulls.loc[7, "sex"] = None
    unknown = base.copy()
    unknown.loc[1, "sex"] = "X"
    baddate = base.copy()
    baddate["opened"] = baddate["opened"].astype(str)
    baddate.loc[0, "opened"] = "not a date"
    badbool = base.copy()
    badbool.loc[0, "owner"] = "maybe"
    extra = base.assign(ssn=1)
    return [
        (wrong, r"column 'age': value 'forty' is not a number"),
        (frac, r"column 'age': value 40.5 is not a whole number"),
        (nulls, r"column 'sex': 1 missing value\(s\), but the schema does not allow them"),
        (unknown, r"column 'sex': value 'X' is not one of the schema's categories"),
        (baddate, r"column 'opened': value 'not a date' is not a date"),
        (badbool, r"column 'owner': value 'maybe' is not a boolean"),
        (base.iloc[:0], r"the table is empty"),
        (base.drop(columns=["score"]), r"\['score'\] of the schema are missing from the data"),
        (extra, r"\['ssn'\] of the data are not in the schema.*--drop-unknown"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_python_bad_input_messages(case):
    df, pattern = _python_bad_cases()[case]
    with pytest.raises(DataError, match=pattern):
        TableEncoder(SCHEMA).fit().encode(df)


@pytest.mark.parametrize("column,marker", [("age", "N"), ("opened", "NA"), ("sex", "NULL")])
def test_a_missing_value_marker_the_schema_does_not_name_gets_a_hint(column, marker):
    """A number, date or category column holding a text that usually means missing (nulls written
    N, NA, NULL): the error names the schema's "null" key with that text; a real value does not."""
    df = raw_frame(30)
    df[column] = df[column].astype(object)
    df.loc[[3, 4], column] = marker
    with pytest.raises(DataError, match=rf"column '{column}': value '{marker}' .*; if '{marker}' means a "
                                        rf"missing value, add \"null\": \"{marker}\" to the schema"):
        TableEncoder(SCHEMA).fit().encode(df)
    df.loc[[3, 4], column] = "forty"
    with pytest.raises(DataError) as err:
        TableEncoder(SCHEMA).fit().encode(df)
    assert "null" not in str(err.value)


def _cli_cases(d: Path):
    base = raw_frame(60)
    sch = d / "schema.json"
    sch.write_text(json.dumps(SCHEMA))
    cases = {}
    wrong = base.copy()
    wrong["income"] = wrong["income"].round(2).astype(str)
    wrong.loc[3, "income"] = "lots"
    cases["wrong_type"] = (wrong, sch, ["column 'income'", "'lots' is not a number"])
    nulls = base.copy()
    nulls.loc[4, "age"] = np.nan
    cases["nulls"] = (nulls, sch, ["column 'age'", "missing value", "does not allow"])
    unknown = base.copy()
    unknown.loc[2, "sex"] = "U"
    cases["unknown_category"] = (unknown, sch, ["column 'sex'", "'U' is not one of the schema's categories"])
    cases["empty"] = (base.iloc[:0], sch, ["the table is empty"])
    huge = d / "huge.json"
    huge.write_text(json.dumps({"columns": {
        "age": {"type": "integer", "min": 0, "max": 10**8, "bins": 10**6},
        "income": {"type": "float", "min": 0, "max": 1, "bins": 10**6}}}))
    cases["domain_too_large"] = (base[["age", "income"]], huge, ["column '", "domain too large", "GiB"])
    cases["unknown_column"] = (base.assign(ssn=7), sch, ["['ssn']", "not in the schema", "--drop-unknown"])
    return cases


@pytest.mark.parametrize("name", ["wrong_type", "nulls", "unknown_category", "empty", "domain_too_large",
                                  "unknown_column", "zero_byte_file"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_cli_bad_input_one_line_exit_2_no_file(tmp_path, name, fmt):
    if name == "zero_byte_file":  # not even a header
        (tmp_path / f"in.{fmt}").write_text("")
        sch, words = tmp_path / "schema.json", ["in.", "empty" if fmt == "csv" else "Parquet"]
        sch.write_text(json.dumps(SCHEMA))
    else:
        df, sch, words = _cli_cases(tmp_path)[name]
        if fmt == "csv":
            df.to_csv(tmp_path / "in.csv", index=False)
        else:
            df.to_parquet(tmp_path / "in.parquet", index=False)
    before = set(tmp_path.iterdir())
    out = tmp_path / "out" / f"syn.{fmt}"
    r = runner.invoke(app, ["synth", str(tmp_path / f"in.{fmt}"), "--schema", str(sch), "--method", "mst",
                            "--output", str(out), "--report", str(tmp_path / "rep.json")])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    for w in words:
        assert w in lines[0], lines[0]
    assert not out.exists() and not (tmp_path / "rep.json").exists()
    assert set(tmp_path.iterdir()) == before  # nothing partial, no temporary files


def test_cli_schema_needs_exactly_one_of_schema_or_domain(tmp_path):
    raw_frame(20).to_csv(tmp_path / "in.csv", index=False)
    r = runner.invoke(app, ["synth", str(tmp_path / "in.csv"), "--output", str(tmp_path / "o.csv")])
    assert r.exit_code == 2 and "--schema" in r.output and not (tmp_path / "o.csv").exists()


def test_cli_synth_with_schema_parquet_in_csv_out(tmp_path):
    df = raw_frame(300)
    df.to_parquet(tmp_path / "in.parquet", index=False)
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    for out in (tmp_path / "syn.csv", tmp_path / "syn.parquet"):
        r = runner.invoke(app, ["synth", str(tmp_path / "in.parquet"), "--schema", str(tmp_path / "s.json"),
                                "--method", "independent", "--seed", "0", "--rows", "120", "--output", str(out),
                                "--report", str(tmp_path / "rep.json")])
        assert r.exit_code == 0, r.output
        syn = read_table(out)
        assert list(syn.columns) == list(df.columns) and len(syn) == 120
        assert syn["age"].between(0, 100).all() and set(syn["sex"]) <= {"F", "M"}
    syn = pd.read_parquet(tmp_path / "syn.parquet")
    assert str(syn["opened"].dtype).startswith("datetime64") and str(syn["kids"].dtype) == "Int64"
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["preprocessing"]["columns"]["income"]["edges"][-1] == 500000


# ----------------------------------------------------------------------------- end to end on raw data
HMEQ, PUMS = datasets.path("hmeq"), datasets.path("pums")
E2E = [(HMEQ / "hmeq.csv.gz", HMEQ / "schema.json", False), (PUMS / "pums.csv.gz", PUMS / "schema.json", True)]


def _fast(cls, schema: Schema) -> dict:
    if cls is AIM:
        return {"workload": "all-2way", "rounds": 2 * len(schema), "iters": 50, "final_iters": 150,
                "max_model_size": 2.0}
    if cls is MST:
        return {"iters": 100, "final_iters": 200}
    return {}


def _check_synthetic(raw: pd.DataFrame, syn: pd.DataFrame, schema: Schema) -> None:
    assert list(syn.columns) == list(schema.names)
    expected = {c: str(pd.Series([], dtype=t).dtype) for c, t in schema.dtypes().items()}
    assert {c: str(t) for c, t in syn.dtypes.items()} == expected
    for col in schema:
        s = syn[col.name].dropna()
        if col.type in ("integer", "float"):
            assert s.between(col.lo, col.hi).all(), col.name
        elif col.type == "categorical":
            assert set(s.tolist()) <= set(col.values), col.name
        rate_raw, rate_syn = raw[col.name].isna().mean(), syn[col.name].isna().mean()
        assert abs(rate_raw - rate_syn) < 0.05, (col.name, rate_raw, rate_syn)
        if not col.missing:
            assert rate_syn == 0


@pytest.mark.parametrize("cls", [AIM, MST], ids=["aim", "mst"])
@pytest.mark.parametrize("data, schema_path, drop", E2E, ids=["hmeq", "pums"])
def test_end_to_end_raw_tables(cls, data, schema_path, drop):
    raw = read_table(data)
    schema = load_schema(schema_path)
    if drop:  # the identifier column is not in the schema: an error unless dropped explicitly
        with pytest.raises(DataError, match="'pid'.*not in the schema"):
            cls(seed=0, **_fast(cls, schema)).fit(raw, schema)
    m = cls(epsilon=1.0, delta=1e-6, seed=0, **_fast(cls, schema)).fit(raw, schema_path, drop_unknown=drop)
    assert m.accountant_.rho_spent <= m.rho_total * (1 + 1e-9)
    assert (m.rho_preprocess_ > 0) == schema.needs_dp
    _check_synthetic(raw, m.sample(), schema)


@pytest.mark.parametrize("data, schema_path, drop", E2E, ids=["hmeq", "pums"])
def test_end_to_end_privpgd(data, schema_path, drop):
    pytest.importorskip("torch")
    from privmarg import PrivPGD
    raw = read_table(data)
    schema = load_schema(schema_path)
    params = inspect.signature(PrivPGD).parameters
    # kept small for the test suite's time budget: 1-way marginals (every column's distribution,
    # missing values included), few particles and epochs; the plumbing is the same for degree 2
    small = {k: v for k, v in {"degree": 1, "n_particles": 2000, "epochs": 60, "proj_iters": 50,
                               "proj_num_projections": 20}.items() if k in params}
    m = PrivPGD(epsilon=1.0, delta=1e-6, seed=0, **small).fit(raw, schema_path, drop_unknown=drop)
    assert m.accountant_.rho_spent <= m.rho_total * (1 + 1e-9)
    _check_synthetic(raw, m.sample(len(raw)), schema)
