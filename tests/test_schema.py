"""Public schemas: parsing, validation errors, the memory guard, drafting (issue #6)."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import datasets
from privmarg.cli import app
from privmarg.data import DataError, read_table
from privmarg.schema import (
    DRAFT_WARNING, HEAVY_MAX_ATOMS, MAX_MARGINAL_CELLS, Schema, SchemaError, as_schema, draft_schema, load_schema, value_key,
)


ISSUE_SCHEMA = {"columns": {
    "age": {"type": "integer", "min": 0, "max": 100},
    "income": {"type": "float", "min": 0, "max": 500000, "bins": 32, "binning": "privtree"},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "job": {"type": "categorical", "values": ["a", "b", "c"], "merge_rare": True, "other": True},
    "opened": {"type": "datetime", "min": "2000-01-01", "max": "2024-12-31"},
    "owner": {"type": "boolean"},
    "score": {"type": "float", "min": 0, "max": 1, "missing": True},
}}


def test_issue_example_parses_with_sizes_and_dtypes():
    s = Schema.from_dict(ISSUE_SCHEMA)
    assert s.names == ("age", "income", "sex", "job", "opened", "owner", "score")
    assert s.needs_dp
    dom = s.max_domain()
    # defaults: a 101-value integer (over 64 values) and the datetime and the float get adaptive
    # PrivTree bins (at most 64); the integer and the float also atoms at their bounds and up to
    # HEAVY_MAX_ATOMS heavy values (32 of them in place of bins, 224 more codes), then missing
    extra = HEAVY_MAX_ATOMS - 64 // 2
    assert dom.to_dict() == {"age": 66 + extra, "income": 32, "sex": 2, "job": 4, "opened": 64, "owner": 2,
                             "score": 67 + extra}
    assert s["age"].binning == "privtree" and s["age"].adaptive and s["age"].atoms == (0.0, 100.0)
    assert s["opened"].binning == "privtree" and s["score"].atoms == (0.0, 1.0) and not s["income"].adaptive
    small = Schema.from_dict({"columns": {"n": {"type": "integer", "min": 0, "max": 63}}})
    assert small["n"].binning == "exact" and small.max_domain()["n"] == 64
    dt = s.dtypes()
    assert dt["age"] == "int64" and dt["income"] == "float64" and dt["opened"] == "datetime64[ns]"
    assert dt["owner"] == "bool" and dt["score"] == "float64"
    assert s["job"].dp_step == "merge" and s["income"].dp_step == "privtree" and s["age"].dp_step == "privtree"
    # round trip through to_dict
    assert Schema.from_dict(s.to_dict()) == s


def test_public_only_schema_needs_no_dp_and_small_integer_ranges_are_exact():
    s = Schema.from_dict({"columns": {"n": {"type": "integer", "min": 0, "max": 9, "missing": True},
                                      "c": {"type": "categorical", "values": [1, 2, 3]}}})
    assert not s.needs_dp
    assert s.max_domain().to_dict() == {"n": 11, "c": 3}
    assert s.dtypes() == {"n": "Int64", "c": "int64"}


def test_load_json_and_yaml_and_as_schema(tmp_path):
    pytest.importorskip("yaml")
    import yaml

    (tmp_path / "s.json").write_text(json.dumps(ISSUE_SCHEMA))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(ISSUE_SCHEMA, sort_keys=False))
    a, b = load_schema(tmp_path / "s.json"), load_schema(tmp_path / "s.yaml")
    assert a == b == Schema.from_dict(ISSUE_SCHEMA)
    assert as_schema(ISSUE_SCHEMA) == a and as_schema(str(tmp_path / "s.json")) == a and as_schema(a) is a
    # a domain dict / domain file is not a schema
    assert as_schema({"a": 3, "b": 2}) is None
    (tmp_path / "d.json").write_text(json.dumps({"a": 3}))
    assert as_schema(tmp_path / "d.json") is None


def test_bundled_schemas_load():
    for name in ("hmeq", "pums"):
        s = load_schema(datasets.path(name) / "schema.json")
        assert len(s) >= 6 and s == datasets.load(name).domain
    assert "pid" not in load_schema(datasets.path("pums") / "schema.json")


@pytest.mark.parametrize("spec, words", [
    ({"x": {"type": "text"}}, ["'x'", "type must be one of"]),
    ({"x": {"type": "integer", "min": 0}}, ["'x'", "min", "max"]),
    ({"x": {"type": "float", "min": 5, "max": 1}}, ["'x'", "min must be below max"]),
    ({"x": {"type": "integer", "min": 0.5, "max": 3}}, ["'x'", "whole numbers"]),
    ({"x": {"type": "categorical"}}, ["'x'", "values"]),
    ({"x": {"type": "categorical", "values": ["a", "a"]}}, ["'x'", "listed twice"]),
    ({"x": {"type": "categorical", "values": [1, 1.0]}}, ["'x'", "listed twice"]),
    ({"x": {"type": "categorical", "values": ["a"], "bins": 3}}, ["'x'", "unknown key", "bins"]),
    ({"x": {"type": "integer", "min": 0, "max": 9, "bin": 3}}, ["'x'", "unknown key", "bin"]),
    ({"x": {"type": "float", "min": 0, "max": 1, "binning": "quantile"}}, ["'x'", "binning"]),
    ({"x": {"type": "float", "min": 0, "max": 1, "bins": 0}}, ["'x'", "bins"]),
    ({"x": {"type": "float", "min": 0, "max": 1, "bins": 1, "binning": "privtree"}}, ["'x'", "bins >= 2"]),
    ({"x": {"type": "datetime", "min": "yesterday", "max": "2020-01-01"}}, ["'x'", "dates"]),
    ({"x": {"type": "datetime", "min": "2000-01-01", "max": "2020-01-01", "unit": "week"}}, ["'x'", "unit"]),
    ({"x": {"type": "boolean", "missing": "yes"}}, ["'x'", "missing", "true or false"]),
    ({"x": {"type": "categorical", "values": ["a", "b"], "other": True, "other_label": "a"}}, ["'x'", "other_label"]),
    ({"x": {"type": "categorical", "values": ["a", None]}}, ["'x'", "missing"]),
])
def test_bad_schemas_name_the_column(spec, words):
    with pytest.raises(SchemaError) as e:
        Schema.from_dict({"columns": spec})
    msg = str(e.value)
    for w in words:
        assert w in msg, msg
    assert isinstance(e.value, DataError)


def test_bad_top_level():
    with pytest.raises(SchemaError, match="columns"):
        Schema.from_dict({"cols": {}})
    with pytest.raises(SchemaError, match="no columns"):
        Schema.from_dict({"columns": {}})
    with pytest.raises(SchemaError, match="top-level"):
        Schema.from_dict({"columns": {"x": {"type": "boolean"}}, "colums": 1})
    # comments are allowed
    Schema.from_dict({"_comment": "hi", "description": "d", "columns": {"x": {"type": "boolean", "_why": "ok"}}})


def test_domain_too_large_for_memory_is_refused_up_front():
    big = int(np.sqrt(MAX_MARGINAL_CELLS)) * 2
    spec = {"columns": {"a": {"type": "float", "min": 0, "max": 1, "bins": big},
                        "b": {"type": "integer", "min": 0, "max": 10**9, "bins": big},
                        "c": {"type": "boolean"}}}
    with pytest.raises(SchemaError, match=r"column '[ab]'.*domain too large.*GiB"):
        Schema.from_dict(spec)
    with pytest.raises(SchemaError, match=r"column 'x'.*exceed memory"):
        Schema.from_dict({"columns": {"x": {"type": "float", "min": 0, "max": 1, "bins": 10**9}}})


def test_value_keys_match_across_numeric_types():
    assert value_key(1) == value_key(1.0) == value_key(np.int64(1))
    assert value_key("1") != value_key(1)
    assert value_key(True) != value_key(1)


def test_draft_schema_reads_types_and_warns():
    df = pd.DataFrame({
        "id": np.arange(50),
        "age": np.r_[np.arange(20, 69), np.nan],
        "w": np.linspace(0, 1, 50),
        "cat": ["x", "y"] * 25,
        "flag": [True, False] * 25,
        "when": pd.date_range("2020-01-01", periods=50).astype(str),
    })
    spec, notes = draft_schema(df)
    cols = spec["columns"]
    assert spec["_warning"] == DRAFT_WARNING
    assert cols["age"]["type"] == "integer" and cols["age"]["missing"] is True
    assert cols["w"]["type"] == "float" and cols["cat"]["values"] == ["x", "y"]
    assert cols["flag"]["type"] == "boolean" and cols["when"]["type"] == "datetime"
    assert any("'id'" in n and "identifier" in n for n in notes)
    Schema.from_dict(spec)  # a draft is a valid schema


def test_cli_schema_draft_warns(tmp_path):
    df = pd.DataFrame({"a": [1, 2, 3, 2], "b": ["u", "v", None, "u"]})
    df.to_csv(tmp_path / "in.csv", index=False)
    r = CliRunner().invoke(app, ["schema", "draft", str(tmp_path / "in.csv"), "-o", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    assert "WARNING" in r.output and "PRIVATE" in r.output and "public knowledge" in r.output
    s = load_schema(tmp_path / "s.json")
    assert s["b"].missing and list(s["b"].values) == ["u", "v"]
    r = CliRunner().invoke(app, ["schema", "draft", str(tmp_path / "in.csv"), "-o", str(tmp_path / "s.txt")])
    assert r.exit_code == 2 and not (tmp_path / "s.txt").exists()


def test_draft_leaves_infinite_values_out_of_the_bounds():
    """An all-inf column raised OverflowError (a traceback); a partly-inf one had inf bounds."""
    df = pd.DataFrame({"x": [np.inf] * 30, "y": [1.5, np.inf, -np.inf] * 10, "z": [1, 2, 3] * 10})
    spec, notes = draft_schema(df)
    cols = spec["columns"]
    assert cols["x"]["values"] == ["?"] and any("'x' holds no finite number" in n for n in notes)
    assert (cols["y"]["type"], cols["y"]["min"], cols["y"]["max"]) == ("float", 1.5, 1.5)
    assert all(math.isfinite(float(v)) for c in cols.values() for k, v in c.items() if k in ("min", "max"))
    assert sum("infinite values" in n for n in notes) == 2


def test_a_declared_null_marker_reads_and_writes_missing_values(tmp_path):
    """Nulls written "N" (a census excerpt's convention) are missing values when the schema says
    so (per column, or for the table), and the synthetic table writes its missing values the same
    way; without the marker the same file is refused with one clear error."""
    from privmarg import MST, Schema

    rng = np.random.default_rng(0)
    n = 600
    inc = rng.integers(0, 1000, n).astype(object)
    inc[rng.random(n) < 0.2] = "N"
    job = rng.choice(["a", "b"], n).astype(object)
    job[rng.random(n) < 0.1] = "N"
    df = pd.DataFrame({"inc": inc, "job": job, "age": rng.integers(0, 90, n)})
    spec = {"null": "N", "columns": {"inc": {"type": "integer", "min": 0, "max": 999, "missing": True},
                                     "job": {"type": "categorical", "values": ["a", "b"], "null": ["N", "n/a"]},
                                     "age": {"type": "integer", "min": 0, "max": 99}}}
    sch = Schema.from_dict(spec)
    assert sch["inc"].null == ("N",) and sch["job"].null == ("N", "n/a") and sch["job"].missing
    assert sch["age"].null == ("N",) and not sch["age"].missing  # the table's marker allows nothing by itself
    assert Schema.from_dict(sch.to_dict()).to_dict() == sch.to_dict()  # round trip
    m = MST(5.0, 1e-9, seed=0).fit(df, sch)
    out = m.sample(2000, seed=1)
    assert (out["inc"] == "N").mean() == pytest.approx(0.2, abs=0.06)
    assert set(out["job"].unique()) <= {"a", "b", "N"} and (out["job"] == "N").any()
    assert not (out["age"].astype(str) == "N").any()
    nums = pd.to_numeric(out["inc"][out["inc"] != "N"])
    assert nums.between(0, 999).all()
    with pytest.raises(DataError, match="not a number|missing"):
        MST(1.0, 1e-9, seed=0).fit(df, Schema.from_dict({"columns": {**spec["columns"], "inc": {
            "type": "integer", "min": 0, "max": 999}, "job": {"type": "categorical", "values": ["a", "b", "N"]}}}))
    for bad in ({"null": ""}, {"null": 5}, {"null": "N", "missing": False}):
        with pytest.raises(SchemaError, match="null"):
            Schema.from_dict({"columns": {"x": {"type": "boolean", **bad}}})


def test_draft_reads_a_missing_value_text_and_0_1_flags(tmp_path):
    """A table exported with nulls written "N" and flags written 0/1: the draft types its number,
    date and 0/1 columns as such with "N" as their null marker (they were all drafted categorical),
    keeps N as a Y/N column's false and as a text column's value (noted), and the table goes through
    a fit and comes back written as it was read: N for missing, 0/1, dates without a time, the input's
    decimals."""
    from privmarg import MST, Schema

    rng = np.random.default_rng(3)
    n = 400

    def with_n(values, share=0.1):
        v = np.asarray(values).astype(object)
        v[rng.random(n) < share] = "N"
        return v
    pd.DataFrame({
        "age": with_n(rng.integers(18, 90, n)),
        "bmi": with_n(np.round(rng.normal(27, 4, n), 1)),
        "smoker": with_n(rng.integers(0, 2, n)),
        "seen": with_n(pd.date_range("2020-01-01", periods=n).strftime("%Y-%m-%d")),
        "yn": rng.choice(["Y", "N"], n),
        "ward": with_n(rng.choice(["a", "b", "c"], n)),
        "odd": with_n(rng.choice(["1", "2", "-"], n)),  # two texts that could mean missing: no marker
        "score": np.where(rng.random(n) < 0.1, "?", rng.integers(0, 500, n).astype(str)),
    }).to_csv(tmp_path / "in.csv", index=False)
    df = read_table(tmp_path / "in.csv")  # as a user's file is read
    spec, notes = draft_schema(df)
    cols = spec["columns"]
    assert (cols["age"]["type"], cols["age"]["null"], cols["age"]["missing"]) == ("integer", "N", True)
    assert (cols["bmi"]["type"], cols["bmi"]["decimals"], cols["bmi"]["null"]) == ("float", 1, "N")
    assert cols["smoker"] == {"type": "boolean", "labels": [0, 1], "missing": True, "null": "N"}
    assert (cols["seen"]["type"], cols["seen"]["min"], cols["seen"]["null"]) == ("datetime", "2020-01-01", "N")
    assert cols["yn"]["type"] == "boolean" and "null" not in cols["yn"]  # N is its false
    assert cols["ward"]["type"] == "categorical" and "N" in cols["ward"]["values"] and "null" not in cols["ward"]
    assert cols["odd"]["type"] == "categorical" and "null" not in cols["odd"]
    assert (cols["score"]["type"], cols["score"]["null"]) == ("integer", "?")
    assert any('"N" was read as a missing value' in x and "'age'" in x and "'ward'" in x for x in notes)
    dp = draft_schema(df, dp=True)[0]["columns"]
    assert dp["bmi"] == {"type": "float", "bounds": "dp", "decimals": 1, "missing": True, "null": "N"}
    assert dp["smoker"] == cols["smoker"] and dp["seen"] == cols["seen"]

    sch = Schema.from_dict(spec)
    out = MST(5.0, 1e-9, seed=0).fit(df, sch, allow_draft_schema=True).sample(n, seed=1)
    out.to_csv(tmp_path / "out.csv", index=False)
    back = pd.read_csv(tmp_path / "out.csv", dtype=str, keep_default_na=False)
    assert back["seen"].str.fullmatch(r"\d{4}-\d{2}-\d{2}|N").all() and (back["seen"] == "N").any()
    assert set(back["smoker"]) <= {"0", "1", "N"} and set(back["yn"]) <= {"Y", "N"}
    assert back["bmi"].str.fullmatch(r"-?\d+(\.\d)?|N").all() and (back["bmi"] == "N").any()
    assert back["age"].str.fullmatch(r"\d+|N").all() and back["score"].str.fullmatch(r"\d+|\?").all()


def test_draft_of_a_pandas_export_with_nulls_written_n_reads_its_own_table(tmp_path):
    """pandas writes a whole-number column holding NaN as 3.0 (and N with na_rep): such texts match
    no category or boolean label, so the draft bounds those columns and reads them as numbers (it
    drafted categories that then refused "3.0"); month codes 01..12 stay texts; padded numbers are
    numbers; a Y/N flag whose missing text is "-" is a boolean with that marker. The draft then
    encodes its own table."""
    from privmarg import MST, Schema

    rng = np.random.default_rng(0)
    n = 300
    kids = rng.integers(0, 5, n).astype(float)
    kids[rng.random(n) < 0.1] = np.nan
    flag = rng.integers(0, 2, n).astype(float)
    flag[rng.random(n) < 0.1] = np.nan
    month = np.array([f"{m:02d}" for m in rng.integers(1, 13, n)], dtype=object)
    month[rng.random(n) < 0.1] = "N"
    pad = np.array([f" {m}" for m in rng.integers(10, 20, n)], dtype=object)
    pad[rng.random(n) < 0.1] = " N "
    pd.DataFrame({"kids": kids, "flag": flag, "month": month, "pad": pad, "yn": rng.choice(["Y", "N", "-"], n)}
                 ).to_csv(tmp_path / "t.csv", index=False, na_rep="N")
    df = read_table(tmp_path / "t.csv")
    cols = draft_schema(df)[0]["columns"]
    assert cols["kids"] == {"type": "integer", "min": 0, "max": 4, "missing": True, "null": "N"}
    assert cols["flag"] == {"type": "integer", "min": 0, "max": 1, "missing": True, "null": "N"}
    assert cols["month"]["type"] == "categorical" and cols["month"]["values"][:2] == ["01", "02"]
    assert (cols["pad"]["type"], cols["pad"]["null"]) == ("integer", "N")
    assert cols["yn"] == {"type": "boolean", "labels": ["N", "Y"], "missing": True, "null": "-"}
    sch = Schema.from_dict(draft_schema(df)[0])
    out = MST(5.0, 1e-9, seed=0).fit(df, sch, allow_draft_schema=True).sample(200, seed=0)
    assert set(out["yn"]) <= {"Y", "N", "-"} and set(out["month"]) <= set(cols["month"]["values"])


def test_a_parquet_table_with_a_table_wide_null_text_goes_through_the_command(tmp_path):
    """Parquet input (typed: datetimes, floats with NaN) and a schema whose top-level "null" names
    the text a CSV export would use: the run wrote that text into the typed columns and failed after
    spending the budget (a date could not be parsed from "N"; Parquet could not store "N" among
    floats). Now the release is written, its columns typed, missing values missing."""
    rng = np.random.default_rng(1)
    n = 600
    df = pd.DataFrame({"when": pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, n), unit="D"),
                       "amt": np.round(rng.gamma(2, 40, n), 2), "cnt": rng.integers(0, 50, n).astype(float),
                       "grp": rng.choice(["a", "b", "N"], n)})
    for c in ("when", "amt", "cnt"):
        df.loc[rng.random(n) < 0.1, c] = pd.NaT if c == "when" else np.nan
    df.to_parquet(tmp_path / "in.parquet")
    (tmp_path / "s.json").write_text(json.dumps({"null": "N", "columns": {
        "when": {"type": "datetime", "min": "2020-01-01", "max": "2022-12-31", "missing": True},
        "amt": {"type": "float", "min": 0, "max": 1000, "missing": True},
        "cnt": {"type": "integer", "min": 0, "max": 49, "missing": True},
        "grp": {"type": "categorical", "values": ["a", "b"], "missing": True}}}))
    r = CliRunner().invoke(app, ["synth", str(tmp_path / "in.parquet"), "--schema", str(tmp_path / "s.json"),
                                 "--method", "mst", "--epsilon", "4", "--delta", "1e-9", "-o",
                                 str(tmp_path / "out.parquet")])
    assert r.exit_code == 0, r.output
    out = pd.read_parquet(tmp_path / "out.parquet")
    assert pd.api.types.is_datetime64_any_dtype(out["when"]) and out["when"].isna().any()
    assert out["amt"].dtype == np.float64 and out["amt"].isna().any() and out["amt"].dropna().between(0, 1000).all()
    assert str(out["cnt"].dtype) == "Int64" and out["cnt"].isna().any()
    assert set(out["grp"]) <= {"a", "b", "N"} and (out["grp"] == "N").any()  # a text column keeps the text


def test_parquet_output_types_only_the_schemas_null_texts(tmp_path):
    """Only a column's own null text becomes a missing value for Parquet (every column's single text
    did: an "__other__" among numbers, a one-value flag), and a column mixing texts with numbers (an
    integer other label beside values found as texts) is written as texts, not refused after the fit."""
    from privmarg.io import parquet_ready

    df = pd.DataFrame({"a": pd.Series([1, "N", 3], dtype=object), "f": pd.Series([1, "__other__", 2], dtype=object),
                       "y": pd.Series(["Y", np.nan, "Y"], dtype=object)})
    out = parquet_ready(df, {"a": ("N", "Int64"), "y": ("N", "string")})
    assert str(out["a"].dtype) == "Int64" and out["a"].isna().tolist() == [False, True, False]
    assert out["f"].tolist() == ["1", "__other__", "2"]  # texts, not a missing "__other__"
    assert out["y"].tolist()[0] == "Y" and out["y"].dtype == object
    rng = np.random.default_rng(2)
    code = rng.choice([1, 2, 3, 4], 800).astype(object)
    code[rng.random(800) < 0.1] = "N"
    pd.DataFrame({"code": code, "v": rng.random(800)}).to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps({"columns": {
        "code": {"type": "categorical", "values": "dp", "other_label": -1, "null": "N"},
        "v": {"type": "float", "min": 0, "max": 1}}}))
    r = CliRunner().invoke(app, ["synth", str(tmp_path / "in.csv"), "--schema", str(tmp_path / "s.json"),
                                 "--method", "mst", "--epsilon", "8", "--delta", "1e-6", "-o",
                                 str(tmp_path / "out.parquet")])
    assert r.exit_code == 0, r.output
    got = pd.read_parquet(tmp_path / "out.parquet")["code"]  # read from a CSV with N: found as texts
    assert set(got) <= {"1", "2", "3", "4", "-1", "N"} and (got == "N").any()
    mixed = parquet_ready(pd.DataFrame({"m": pd.Series(["a", -1, None], dtype=object)}), None)
    assert mixed["m"].tolist()[:2] == ["a", "-1"] and mixed["m"].isna().tolist()[2]


def test_a_release_that_cannot_be_written_fails_before_any_budget_is_spent(tmp_path, monkeypatch):
    """The command decodes and writes a rehearsal table on the schema's public encoding (DP columns
    with placeholders) before fitting: a decoding or writing failure is one error line, exit 2,
    nothing written and no fit run (it came after the whole budget was spent)."""
    from privmarg.preprocess import TableEncoder
    from privmarg.synth import Synthesizer

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.integers(0, 9, 200), "g": rng.choice(["a", "b"], 200), "y": rng.random(200)})
    df.to_csv(tmp_path / "in.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps({"columns": {"x": {"type": "integer", "min": 0, "max": 8},
                                                             "g": {"type": "categorical", "values": "dp"},
                                                             "y": {"type": "float", "bounds": "dp"}}}))
    fits = []
    monkeypatch.setattr(Synthesizer, "fit", lambda self, *a, **k: fits.append(1))
    real_decode = TableEncoder.decode

    def decode(self, codes, *a, **k):  # a release that cannot be decoded
        raise ValueError("a value this release cannot hold")
    monkeypatch.setattr(TableEncoder, "decode", decode)
    r = CliRunner().invoke(app, ["synth", str(tmp_path / "in.csv"), "--schema", str(tmp_path / "s.json"),
                                 "--method", "mst", "--epsilon", "1", "--delta", "1e-9", "-o",
                                 str(tmp_path / "out.parquet")])
    assert r.exit_code == 2 and "could not be written" in r.output and "nothing was spent" in r.output
    assert r.output.count("error:") == 1 and not fits and not (tmp_path / "out.parquet").exists()
    monkeypatch.setattr(TableEncoder, "decode", real_decode)  # the same run otherwise reaches the fit
    r = CliRunner().invoke(app, ["synth", str(tmp_path / "in.csv"), "--schema", str(tmp_path / "s.json"),
                                 "--method", "mst", "--epsilon", "1", "--delta", "1e-9", "-o",
                                 str(tmp_path / "out.parquet")])
    assert fits == [1]


def test_csv_files_written_with_semicolons_or_tabs_are_read(tmp_path):
    """A spreadsheet in many locales writes a CSV with semicolons (and decimal commas stay quoted
    text): the header decides the separator, so the columns are found (the whole line was one column,
    and the error said every column of the schema was missing); a comma header is read as before,
    commas inside quoted semicolon fields included."""
    rows = [["a", "b c", "d"], ["1", "x", "2.5"], ["2", "y,z", "3.5"]]
    for sep, name in ((";", "semi.csv"), ("\t", "tab.csv"), (",", "comma.csv"), ("|", "pipe.csv")):
        text = "\n".join(sep.join(f'"{v}"' if "," in v and sep == "," else v for v in r) for r in rows) + "\n"
        (tmp_path / name).write_text(text)
        df = read_table(tmp_path / name)
        assert df.columns.tolist() == ["a", "b c", "d"] and df["b c"].tolist() == ["x", "y,z"], name
        assert df["a"].tolist() == [1, 2] and df["d"].tolist() == [2.5, 3.5]
    (tmp_path / "one.csv").write_text("a\n1\n2\n")
    assert read_table(tmp_path / "one.csv").columns.tolist() == ["a"]
    quoted = {'"a","b"\n1,2\n': ["a", "b"], 'a,b\n"x,y",2\n': ["a", "b"], 'a;b\n"1,5";2\n': ["a", "b"],
              '"a,b";c\n1;2\n': ["a,b", "c"]}  # quotes, as R, pandas and spreadsheets write them
    for i, (text, cols) in enumerate(quoted.items()):
        (tmp_path / f"q{i}.csv").write_text(text)
        assert read_table(tmp_path / f"q{i}.csv").columns.tolist() == cols, text
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf")
    with pytest.raises(DataError, match="empty"):
        read_table(tmp_path / "bom.csv")


def test_boolean_labels_read_and_write_the_tables_own_form():
    """A boolean written 0/1 or no/yes comes back 0/1 or no/yes (it came back True/False), and the
    draft records the form of a yes/no column."""
    from privmarg import MST, Schema

    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame({"dead": rng.integers(0, 2, n), "smoker": rng.choice(["no", "yes"], n),
                       "x": rng.integers(0, 3, n)})
    sch = Schema.from_dict({"columns": {"dead": {"type": "boolean", "labels": [0, 1]},
                                        "smoker": {"type": "boolean", "labels": ["no", "yes"], "missing": True},
                                        "x": {"type": "categorical", "values": [0, 1, 2]}}})
    assert Schema.from_dict(sch.to_dict()) == sch
    out = MST(2.0, 1e-9, seed=0).fit(df, sch).sample(200, seed=1)
    assert out["dead"].dtype == np.int64 and set(out["dead"]) <= {0, 1}
    assert set(out["smoker"].dropna()) <= {"no", "yes"}
    df2 = df.assign(dead=np.where(df["dead"] == 1, "true", "false"))  # the usual forms still read
    MST(2.0, 1e-9, seed=0).fit(df2, sch)
    for bad in ([0], [1, 1], [True, False], "01"):
        with pytest.raises(SchemaError, match="labels"):
            Schema.from_dict({"columns": {"b": {"type": "boolean", "labels": bad}}})
    spec, _ = draft_schema(pd.DataFrame({"s": ["Yes", "No", "No"] * 10}))
    assert spec["columns"]["s"] == {"type": "boolean", "labels": ["No", "Yes"]}


def test_float_decimals_round_inside_the_bins_and_the_draft_finds_them():
    from privmarg import MST, Schema

    rng = np.random.default_rng(0)
    n = 800
    df = pd.DataFrame({"w": np.round(rng.normal(70, 12, n).clip(30, 150), 1), "r": np.round(rng.random(n), 2)})
    spec, _ = draft_schema(df)
    assert spec["columns"]["w"]["decimals"] == 1 and spec["columns"]["r"]["decimals"] == 2
    sch = Schema.from_dict({"columns": {"w": {"type": "float", "min": 30, "max": 150, "decimals": 1},
                                        "r": {"type": "float", "min": 0, "max": 1, "decimals": 2, "bins": 64}}})
    assert Schema.from_dict(sch.to_dict()) == sch
    m = MST(2.0, 1e-9, seed=0).fit(df, sch)
    codes = m.sample_codes(3000, seed=2)
    out = m.encoder_.decode(codes, np.random.default_rng(3))
    for col, places in (("w", 1), ("r", 2)):
        assert np.allclose(out[col], np.round(out[col], places), rtol=0, atol=1e-9)
    assert np.array_equal(np.asarray(m.encoder_.encode(out).codes), codes)  # every value stays in its bin
    for bad in (-1, 16, 1.5, True):
        with pytest.raises(SchemaError, match="decimals"):
            Schema.from_dict({"columns": {"f": {"type": "float", "min": 0, "max": 1, "decimals": bad}}})


def test_a_numeric_other_label_keeps_an_integer_coded_column_integer():
    """Industry codes with `other`: "__other__" made the synthetic column text; -1 keeps it int64."""
    from privmarg import MST, Schema

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"ind": rng.choice([101, 102, 103, 999, 555], 500), "x": rng.integers(0, 3, 500)})
    col = {"type": "categorical", "values": [101, 102, 103], "other": True}
    for label, dtype in ((None, object), (-1, np.int64)):
        spec = {"columns": {"ind": {**col, **({} if label is None else {"other_label": label})},
                            "x": {"type": "categorical", "values": [0, 1, 2]}}}
        sch = Schema.from_dict(spec)
        assert Schema.from_dict(sch.to_dict()) == sch
        out = MST(2.0, 1e-9, seed=0).fit(df, sch).sample(300, seed=1)
        assert out["ind"].dtype == dtype
        assert set(out["ind"]) <= {101, 102, 103, "__other__" if label is None else label}
    for bad in (1.5, True, [1]):
        with pytest.raises(SchemaError, match="other_label"):
            Schema.from_dict({"columns": {"c": {**col, "other_label": bad}}})
    with pytest.raises(SchemaError, match="also a listed category"):
        Schema.from_dict({"columns": {"c": {**col, "other_label": 101}}})


def test_the_too_many_codes_warning_says_what_to_change_for_each_kind_of_column():
    """It told every column to "drop bins", also categorical and exact columns, which have none."""
    from privmarg import MST, Schema

    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"cat": rng.integers(0, 200, n), "num": rng.integers(0, 1000, n), "u": rng.random(n),
                       "p": rng.random(n)})
    sch = Schema.from_dict({"columns": {"cat": {"type": "categorical", "values": list(range(200))},
                                        "num": {"type": "integer", "min": 0, "max": 999, "binning": "exact"},
                                        "u": {"type": "float", "min": 0, "max": 1, "bins": 200},
                                        "p": {"type": "float", "min": 0, "max": 1}}})
    warn = {w.split("'")[1]: w for w in MST(0.5, 1e-9, seed=0).fit(df, sch).encoder_.warnings_}
    assert "merge_rare" in warn["cat"] and "bins" not in warn["cat"]
    assert "privtree" in warn["num"] and "drop" not in warn["num"]
    assert "drop \"bins\"" in warn["u"]


def test_float_output_keeps_the_precision_the_schema_gives():
    """Without "decimals", a float column's synthetic values keep the places of its bounds as written,
    but at least 1/10,000 of the range; a declared "decimals" wins; values stay inside their bins."""
    import numpy as np
    import pandas as pd

    from privmarg import MST, Schema

    spec = {"columns": {"income": {"type": "float", "min": 0, "max": 500000},
                        "share": {"type": "float", "min": 0, "max": 1},
                        "score": {"type": "float", "min": 0.25, "max": 9.5, "decimals": 1}}}
    sch = Schema.from_dict(spec)
    assert [sch[c].output_decimals for c in ("income", "share", "score")] == [0, 4, 1]
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"income": rng.gamma(2, 20000, 2000).clip(0, 500000), "share": rng.random(2000),
                       "score": rng.uniform(0.25, 9.5, 2000)})
    out = MST(1.0, 1e-9, seed=0).fit(df, spec).sample(500)
    for col, places in (("income", 0), ("share", 4), ("score", 1)):
        v = out[col].to_numpy()
        assert np.allclose(v, np.round(v, places)), col
        assert v.min() >= spec["columns"][col]["min"] and v.max() <= spec["columns"][col]["max"]
    assert out["income"].nunique() > 50  # rounded, not collapsed
