"""The bundled example tables (issue #21): loading, writing, the ``privmarg datasets`` command."""

import gzip
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

import privmarg
from privmarg import Dataset, Domain, Schema, datasets
from privmarg.cli import app
from privmarg.data import read_table

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("name", datasets.names())
def test_every_table_loads_as_documented(name):
    meta = datasets.info(name)
    assert len(meta.tables) == len(meta.rows) and meta.source and meta.licence
    for table, rows in zip(meta.tables, meta.rows):
        df, spec = datasets.load(name, table=table)
        assert df.shape == (rows, meta.columns), table
        if meta.kind == "integer-coded":
            assert isinstance(spec, Domain) and set(spec.attrs) == set(df.columns)
            Dataset.from_frame(df, spec)  # every code inside the domain
        else:
            assert isinstance(spec, Schema) and set(spec.names) <= set(df.columns)
            assert df.isna().any().any()  # raw tables keep their missing values
    # the default table is the first (private) one, and the result unpacks and names its parts
    ex = datasets.load(name)
    df, spec = ex
    assert ex.data is df and ex.domain is spec and len(df) == meta.rows[0]
    # the files on disk are what load() reads
    folder = datasets.path(name)
    assert read_table(folder / f"{meta.tables[0]}.csv.gz").equals(df)
    assert (folder / meta.spec_file).exists()


def test_package_exposes_datasets_after_plain_import():
    assert privmarg.datasets.load is datasets.load
    assert datasets.names() == ["adult", "adult-public-split", "titanic", "hmeq", "pums"]


def test_public_splits_shift_as_documented():
    shares = {t: (datasets.load("adult-public-split", table=t).data["sex"] == 0).mean()
              for t in datasets.info("adult-public-split").tables}
    assert shares == pytest.approx({"private": 0.25, "public-025": 0.25, "public-050": 0.5,
                                    "public-075": 0.75, "public-100": 1.0}, abs=0.005)


def test_unknown_names_are_clear_errors():
    with pytest.raises(ValueError, match="unknown dataset 'nope': choose one of adult, "):
        datasets.load("nope")
    with pytest.raises(ValueError, match="has no table 'public': choose one of adult$"):
        datasets.load("adult", table="public")


def test_write_gives_the_bundled_bytes_and_refuses_to_overwrite(tmp_path):
    paths = datasets.write("titanic", tmp_path / "t")
    assert [p.name for p in paths] == ["private.csv", "public.csv", "domain.json"]
    folder = datasets.path("titanic")
    assert (tmp_path / "t" / "public.csv").read_bytes() == gzip.decompress((folder / "public.csv.gz").read_bytes())
    assert Domain.from_json(tmp_path / "t" / "domain.json").to_dict() == datasets.load("titanic").domain.to_dict()
    assert pd.read_csv(tmp_path / "t" / "private.csv").equals(datasets.load("titanic").data)

    (tmp_path / "t" / "public.csv").write_text("mine")
    (tmp_path / "t" / "private.csv").unlink()
    with pytest.raises(FileExistsError, match="public.csv exists"):
        datasets.write("titanic", tmp_path / "t")
    assert (tmp_path / "t" / "public.csv").read_text() == "mine"
    assert not (tmp_path / "t" / "private.csv").exists()  # nothing written when refusing
    datasets.write("titanic", tmp_path / "t", force=True)
    assert (tmp_path / "t" / "public.csv").read_text() != "mine"
    raw = datasets.write("hmeq", tmp_path / "h")
    assert [p.name for p in raw] == ["hmeq.csv", "schema.json"]
    assert Schema.load(tmp_path / "h" / "schema.json") == datasets.load("hmeq").domain


def test_failed_write_leaves_no_new_file(tmp_path, monkeypatch):
    calls = []

    def flaky(data, path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        path.write_bytes(data)

    monkeypatch.setattr(datasets, "write_bytes", flaky)
    with pytest.raises(OSError, match="disk full"):
        datasets.write("titanic", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_lists_the_datasets():
    r = run("datasets")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    for name in datasets.names():
        line = next(x for x in lines if x.startswith(name + " "))
        meta = datasets.info(name)
        assert meta.kind in line and f"{meta.rows[0]:,}" in line and str(meta.columns) in line


def test_cli_write_then_synth_on_it(tmp_path):
    r = run("datasets", "write", "titanic", "--output", tmp_path / "data")
    assert r.exit_code == 0, r.output
    out = tmp_path / "syn.csv"
    r = run("synth", tmp_path / "data" / "private.csv", "--domain", tmp_path / "data" / "domain.json",
            "--method", "mst", "--seed", 0, "--output", out)
    assert r.exit_code == 0, r.output
    assert list(pd.read_csv(out).columns) == list(datasets.load("titanic").data.columns)


def test_cli_write_refuses_overwrite_and_unknown_names_in_one_line(tmp_path):
    assert run("datasets", "write", "adult", "-o", tmp_path).exit_code == 0
    before = (tmp_path / "domain.json").read_bytes()
    (tmp_path / "domain.json").write_text("{}")
    for args, needle in [(("adult", "-o", tmp_path), "exists"),
                         (("nope", "-o", tmp_path / "x"), "unknown dataset 'nope'")]:
        r = run("datasets", "write", *args)
        assert r.exit_code == 2, r.output
        text = r.output.strip()
        assert len(text.splitlines()) == 1 and needle in text, text
    assert (tmp_path / "domain.json").read_text() == "{}" and not (tmp_path / "x").exists()
    r = run("datasets", "write", "adult", "-o", tmp_path, "--force")
    assert r.exit_code == 0 and (tmp_path / "domain.json").read_bytes() == before
    assert json.loads(before) == datasets.load("adult").domain.to_dict()
    assert not list(tmp_path.glob(".*.tmp"))
