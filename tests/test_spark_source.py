"""The Spark backend in local mode: the same counts, errors, measurements, ledger and synthetic data
as the in-memory path. One local[1] session for the module (its start is most of the time)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest

from privmarg import AIM, MST, Dataset
from privmarg.core import Domain, downward_closure, parse_workload
from privmarg.data import DataError, MarginalSource, MemorySource, SparkSource

# pyspark 4.3 warns that it does not yet fully support pandas 3 (the tests use no pandas-on-Spark)
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

DOM = Domain.from_dict({"a": 3, "b": 4, "c": 2, "d": 5, "e": 3})


def _table(rows: int = 1500, seed: int = 0) -> pd.DataFrame:
    """Correlated small codes, so that the methods pick real structure."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, rows)
    b = (a + rng.integers(0, 2, rows)) % 4
    c = (b > 1).astype(int) ^ (rng.random(rows) < 0.1)
    d = rng.integers(0, 5, rows)
    e = (d + a) % 3
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "e": e})


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark", reason="the Spark backend needs pyspark (pip install 'privmarg[spark]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on the PATH or JAVA_HOME): none here")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("privmarg-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1").config("spark.default.parallelism", "1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    df = _table()
    path = tmp_path_factory.mktemp("spark") / "t.parquet"
    df.to_parquet(path, index=False)
    return path, df, Dataset(df.to_numpy(), DOM)


def test_marginals_equal_memory_source(spark, table):
    path, df, data = table
    cliques = list(downward_closure(parse_workload("all-3way", DOM), DOM))
    cliques += [("e", "a", "c"), ("b", "a"), ()]  # non-canonical orders and the total
    mem = MemorySource(data)
    want = mem.marginals(cliques)
    for src in (SparkSource(path, DOM, spark=spark), SparkSource(spark.createDataFrame(df), DOM)):
        assert isinstance(src, MarginalSource)
        assert src.count() == mem.count() == len(df)
        for c, g, w in zip(cliques, src.marginals(cliques), want):
            assert g.dtype == np.float64 and g.shape == w.shape, c
            assert np.array_equal(g, w), c


def test_one_grouping_sets_job_per_batch(spark, table):
    path, _, data = table
    cliques = [("a", "b"), ("c",), ("b", "d", "e"), ("b", "a"), ("e",)]
    batched = SparkSource(path, DOM, spark=spark, batch=64)
    single = SparkSource(path, DOM, spark=spark, batch=2)
    queries = []
    fetch = batched._fetch_columns
    batched._fetch_columns = lambda sql: queries.append(sql) or fetch(sql)
    b, s = batched.marginals(cliques), single.marginals(cliques)
    assert len(queries) == 1 and "GROUPING SETS" in queries[0]  # 4 distinct cliques, one job
    for x, y, w in zip(b, s, MemorySource(data).marginals(cliques)):
        assert np.array_equal(x, y) and np.array_equal(x, w)
    assert np.array_equal(b[0].reshape(3, 4).T.ravel(), b[3])  # (b, a) is (a, b) transposed


def test_csv_and_domain_file(spark, tmp_path):
    df = pd.DataFrame({"a": [0, 1, 2, 1, 0], "b": [1, 1, 0, 0, 1]})
    df.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "domain.json").write_text('{"a": 3, "b": 2}')
    src = SparkSource(tmp_path / "t.csv", tmp_path / "domain.json", spark=spark)
    mem = MemorySource(Dataset(df.to_numpy(), Domain.from_dict({"a": 3, "b": 2})))
    for x, y in zip(src.marginals([("b", "a"), ("a",)]), mem.marginals([("b", "a"), ("a",)])):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("column,values", [("a", [0, 3, 1]), ("a", [0, -1, 1]), ("b", [0, 1, 2.5]),
                                           ("b", [0, None, 1]), ("b", [0, np.nan, 1.0])])
def test_bad_codes_give_the_in_memory_error(spark, tmp_path, column, values):
    import pyarrow as pa
    import pyarrow.parquet as pq

    dom = Domain.from_dict({"a": 3, "b": 2})
    df = pd.DataFrame({"a": [0, 1, 2], "b": [0, 1, 1]})
    df[column] = values
    path = tmp_path / "t.parquet"
    # from_pandas=False keeps a NaN a NaN (not NULL), as other writers may
    pq.write_table(pa.table({k: pa.array(v.tolist(), from_pandas=False) for k, v in df.items()}), path)
    with pytest.raises(DataError) as mem:
        Dataset.from_frame(df, dom)
    with pytest.raises(DataError) as sp:
        SparkSource(path, dom, spark=spark)
    if column == "a":  # out of range: the very same message
        assert str(sp.value) == str(mem.value)
    else:
        assert str(sp.value).split(":")[0] == str(mem.value).split(":")[0] == "column 'b'"


def test_columns_checked(spark, tmp_path):
    pd.DataFrame({"a": [0, 1], "c": [1, 1]}).to_parquet(tmp_path / "t.parquet", index=False)
    with pytest.raises(DataError, match="missing"):
        SparkSource(tmp_path / "t.parquet", {"a": 2, "b": 2}, spark=spark)
    with pytest.raises(DataError, match="not in the domain"):
        SparkSource(tmp_path / "t.parquet", {"a": 2}, spark=spark)
    src = SparkSource(tmp_path / "t.parquet", {"a": 2}, spark=spark, drop_unknown=True)
    assert src.marginals([("a",)])[0].tolist() == [1, 1]
    with pytest.raises(DataError, match="no such file"):
        SparkSource(tmp_path / "nope.parquet", {"a": 2}, spark=spark)


def test_missing_pyspark_is_one_clear_line(hide_module):
    hide_module("pyspark")
    with pytest.raises(ImportError, match=r"pip install 'privmarg\[spark\]'") as e:
        SparkSource("x.parquet", {"a": 2})
    assert "\n" not in str(e.value)


def test_same_fit_through_both_sources(spark, table):
    """The same seed: the same selections, measurements, ledger and synthetic table."""
    path, _, data = table
    for make in (lambda: AIM(1.0, 1e-9, workload="all-2way", seed=3, iters=30, final_iters=60),
                 lambda: MST(1.0, 1e-9, seed=3, iters=30, final_iters=60)):
        a = make().fit(data)
        b = make().fit(SparkSource(path, DOM, spark=spark))
        assert [m.attrs for m in a.measurements_] == [m.attrs for m in b.measurements_]
        assert all(np.array_equal(x.y, y.y) for x, y in zip(a.measurements_, b.measurements_))
        assert a.privacy_report() == b.privacy_report()
        assert a.measurements_report() == b.measurements_report()
        assert np.array_equal(a.sample_codes(), b.sample_codes())


def test_cli_backend_spark_same_output(spark, table, tmp_path):
    from typer.testing import CliRunner

    from privmarg.cli import app

    path, _, _ = table
    (tmp_path / "domain.json").write_text(json.dumps(dict(zip(DOM.attrs, DOM.shape))))
    outs = {}
    for backend, extra in (("memory", []), ("spark", ["--spark-master", "local[1]"])):
        out = tmp_path / f"{backend}.csv"
        r = CliRunner().invoke(app, [str(x) for x in (
            "synth", path, "--domain", tmp_path / "domain.json", "--method", "mst", "--seed", 2,
            "--backend", backend, *extra, "--output", out, "--report", tmp_path / f"{backend}.json")])
        assert r.exit_code == 0, r.output
        outs[backend] = (pd.read_csv(out), json.loads((tmp_path / f"{backend}.json").read_text()))
    assert outs["memory"][0].equals(outs["spark"][0])
    assert outs["memory"][1] == outs["spark"][1]  # ledger, measurements, rows
    bad = _table(50)
    bad.loc[3, "b"] = 7
    bad.to_parquet(tmp_path / "bad.parquet", index=False)
    r = CliRunner().invoke(app, [str(x) for x in (
        "synth", tmp_path / "bad.parquet", "--domain", tmp_path / "domain.json", "--backend", "spark",
        "--output", tmp_path / "x.csv")])
    assert r.exit_code == 2 and "outside the domain 0..3" in r.output and "7" not in r.output.split("error:")[1]
    assert not (tmp_path / "x.csv").exists()
    r = CliRunner().invoke(app, [str(x) for x in (
        "synth", path, "--domain", tmp_path / "domain.json", "--spark-master", "local[1]",
        "--output", tmp_path / "x.csv")])
    assert r.exit_code == 2 and "--spark-master is for --backend spark" in r.output
