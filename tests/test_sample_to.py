"""Streaming output: Synthesizer.sample_to writes chunks atomically, the same rows as repeated sample()."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privmarg import MST
from privmarg.data.writer import write_table_chunks
from test_mechanisms import correlated_table


@pytest.fixture(scope="module")
def data():
    return correlated_table(n=2000)


def fitted(data, seed=5):
    return MST(1.0, 1e-6, seed=seed, iters=50, final_iters=100).fit(data)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".csv.gz"])
def test_chunks_equal_repeated_samples(tmp_path, data, suffix):
    a, b = fitted(data), fitted(data)
    path = tmp_path / f"out{suffix}"
    assert a.sample_to(path, 2500, chunk_rows=1000) == 2500
    got = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
    want = pd.concat([b.sample(1000), b.sample(1000), b.sample(500)], ignore_index=True)
    assert list(got.columns) == list(want.columns)
    assert np.array_equal(got.to_numpy(), want.to_numpy())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_one_chunk_equals_one_shot_sample(tmp_path, data):
    a, b = fitted(data), fitted(data)
    a.sample_to(tmp_path / "o.parquet", 1500, chunk_rows=10_000)
    assert np.array_equal(pd.read_parquet(tmp_path / "o.parquet").to_numpy(), b.sample(1500).to_numpy())


def test_parquet_has_one_row_group_per_chunk(tmp_path, data):
    import pyarrow.parquet as pq

    fitted(data).sample_to(tmp_path / "o.parquet", 1001, chunk_rows=250)
    meta = pq.ParquetFile(tmp_path / "o.parquet").metadata
    assert meta.num_rows == 1001 and meta.num_row_groups == 5


def test_default_rows_zero_rows_and_bad_arguments(tmp_path, data):
    m = fitted(data)
    assert m.sample_to(tmp_path / "d.csv") == m.default_rows() == len(pd.read_csv(tmp_path / "d.csv"))
    assert m.sample_to(tmp_path / "z.parquet", 0) == 0
    z = pd.read_parquet(tmp_path / "z.parquet")
    assert len(z) == 0 and list(z.columns) == list(data.domain.attrs)
    with pytest.raises(ValueError):
        m.sample_to(tmp_path / "x.parquet", 10, chunk_rows=0)
    with pytest.raises(ValueError):
        m.sample_to(tmp_path / "x.json", 10)


def test_failed_write_leaves_nothing(tmp_path):
    def chunks():
        yield pd.DataFrame({"a": [1, 2]})
        raise RuntimeError("interrupted")

    (tmp_path / "keep.parquet").write_bytes(b"old")
    with pytest.raises(RuntimeError):
        write_table_chunks(chunks(), tmp_path / "keep.parquet")
    assert (tmp_path / "keep.parquet").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.parquet"]
    with pytest.raises(ValueError, match="differ"):
        write_table_chunks([pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [1]})], tmp_path / "c.csv")
