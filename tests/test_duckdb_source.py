"""The DuckDB backend: the same counts, errors and synthetic data as the in-memory path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privmarg
from privmarg import AIM, MST, Dataset
from privmarg.core import Domain, downward_closure, parse_workload
from privmarg.data import DataError, MarginalSource, MemorySource

duckdb = pytest.importorskip("duckdb")
from privmarg.data.duckdb_source import DuckDBSource  # noqa: E402


@pytest.fixture(scope="module")
def adult(tmp_path_factory):
    df, dom = privmarg.datasets.load("adult")
    path = tmp_path_factory.mktemp("ddb") / "adult.parquet"
    df[list(dom.attrs)].to_parquet(path, index=False)
    return path, Dataset(df[list(dom.attrs)].to_numpy(), dom)


def test_marginals_equal_memory_source_on_adult(adult):
    path, data = adult
    src = DuckDBSource(path, data.domain, threads=1)
    assert isinstance(src, MarginalSource)
    mem = MemorySource(data)
    cliques = list(downward_closure(parse_workload("all-2way", data.domain), data.domain))
    cliques += [("sex", "age", "race"), ("race", "sex"), ()]  # non-canonical orders and the total
    got, want = src.marginals(cliques), mem.marginals(cliques)
    assert src.count() == mem.count() == len(data)
    for c, g, w in zip(cliques, got, want):
        assert g.dtype == np.float64 and g.shape == w.shape, c
        assert np.array_equal(g, w), c


def test_grouping_sets_batch_equals_single_queries(adult):
    path, data = adult
    cliques = [("age", "sex"), ("race",), ("workclass", "education-num", "income>50K"), ("sex", "age"),
               ("native-country",)]
    batched = DuckDBSource(path, data.domain, batch=64, threads=1)
    single = DuckDBSource(path, data.domain, batch=1, threads=1)
    queries = []
    batched._query = _spy(batched._query, queries)  # count the counting queries
    b = batched.marginals(cliques)
    s = single.marginals(cliques)
    assert sum("GROUPING SETS" in q for q in queries) == 1 and len(queries) == 1
    for x, y in zip(b, s):
        assert np.array_equal(x, y)
    assert np.array_equal(b[0].reshape(85, 2).T.ravel(), b[3])  # (sex, age) is (age, sex) transposed


def _spy(fn, log):
    def run(sql, *a, **kw):
        log.append(sql)
        return fn(sql, *a, **kw)
    return run


def test_csv_and_domain_file(tmp_path):
    df = pd.DataFrame({"a": [0, 1, 2, 1, 0], "b": [1, 1, 0, 0, 1]})
    df.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "domain.json").write_text('{"a": 3, "b": 2}')
    src = DuckDBSource(tmp_path / "t.csv", tmp_path / "domain.json")
    mem = MemorySource(Dataset(df.to_numpy(), Domain.from_dict({"a": 3, "b": 2})))
    for x, y in zip(src.marginals([("b", "a"), ("a",)]), mem.marginals([("b", "a"), ("a",)])):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("column,values", [("a", [0, 3, 1]), ("a", [0, -1, 1]), ("b", [0, 1, 2.5]),
                                           ("b", [0, None, 1])])
def test_bad_codes_give_the_in_memory_error(tmp_path, column, values):
    dom = Domain.from_dict({"a": 3, "b": 2})
    df = pd.DataFrame({"a": [0, 1, 2], "b": [0, 1, 1]})
    df[column] = values
    path = tmp_path / "t.parquet"
    df.to_parquet(path, index=False)
    with pytest.raises(DataError) as mem:
        Dataset.from_frame(df, dom)
    with pytest.raises(DataError) as ddb:
        DuckDBSource(path, dom)
    if column == "a":  # out of range: the very same message
        assert str(ddb.value) == str(mem.value)
    else:
        assert str(ddb.value).split(":")[0] == str(mem.value).split(":")[0] == "column 'b'"


def test_columns_checked(tmp_path):
    pd.DataFrame({"a": [0, 1], "c": [1, 1]}).to_parquet(tmp_path / "t.parquet", index=False)
    with pytest.raises(DataError, match="missing"):
        DuckDBSource(tmp_path / "t.parquet", {"a": 2, "b": 2})
    with pytest.raises(DataError, match="not in the domain"):
        DuckDBSource(tmp_path / "t.parquet", {"a": 2})
    assert DuckDBSource(tmp_path / "t.parquet", {"a": 2}, drop_unknown=True).marginals([("a",)])[0].tolist() == [1, 1]
    with pytest.raises(DataError, match="no such file"):
        DuckDBSource(tmp_path / "nope.parquet", {"a": 2})


def test_missing_duckdb_is_one_clear_line(hide_module):
    hide_module("duckdb")
    with pytest.raises(ImportError, match=r"pip install 'privmarg\[duckdb\]'") as e:
        DuckDBSource("x.parquet", {"a": 2})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("make", [
    lambda s: AIM(1.0, 1e-9, workload=[("age", "sex"), ("race", "income>50K"), ("sex", "race")], seed=s,
                  iters=50, final_iters=100),
    lambda s: MST(1.0, 1e-9, seed=s, iters=50, final_iters=100),
])
def test_same_synthetic_data_through_both_sources(adult, make):
    path, data = adult
    a = make(3).fit(data)
    b = make(3).fit(DuckDBSource(path, data.domain, threads=1))
    assert [m.attrs for m in a.measurements_] == [m.attrs for m in b.measurements_]
    assert all(np.array_equal(x.y, y.y) for x, y in zip(a.measurements_, b.measurements_))
    assert np.array_equal(a.sample_codes(), b.sample_codes())


def test_cli_backend_duckdb_same_output(tmp_path):
    import json

    from typer.testing import CliRunner

    from privmarg.cli import app

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 500), "b": rng.integers(0, 4, 500), "c": rng.integers(0, 2, 500)})
    df.to_parquet(tmp_path / "data.parquet", index=False)
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 4, "c": 2}))
    outs = {}
    for backend in ("memory", "duckdb"):
        out = tmp_path / f"{backend}.csv"
        r = CliRunner().invoke(app, [str(x) for x in (
            "synth", tmp_path / "data.parquet", "--domain", tmp_path / "domain.json", "--method", "mst",
            "--seed", 2, "--backend", backend, "--output", out)])
        assert r.exit_code == 0, r.output
        outs[backend] = pd.read_csv(out)
    assert outs["memory"].equals(outs["duckdb"])
    df.loc[3, "b"] = 7
    df.to_parquet(tmp_path / "bad.parquet", index=False)
    r = CliRunner().invoke(app, [str(x) for x in (
        "synth", tmp_path / "bad.parquet", "--domain", tmp_path / "domain.json", "--backend", "duckdb",
        "--output", tmp_path / "x.csv")])
    assert r.exit_code == 2 and "outside the domain 0..3" in r.output and "7" not in r.output.split("error:")[1]
    assert not (tmp_path / "x.csv").exists()


def test_float_nan_is_a_missing_value(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # a NaN kept as NaN (not NULL): DuckDB's Parquet statistics exclude it, yet it must be refused
    pq.write_table(pa.table({"a": pa.array([0.0, np.nan, 1.0], from_pandas=False), "b": [0, 1, 1]}),
                   tmp_path / "nan.parquet")
    with pytest.raises(DataError, match=r"column 'a': missing value"):
        DuckDBSource(tmp_path / "nan.parquet", {"a": 2, "b": 2})
