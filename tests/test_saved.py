"""Saved models and conditional sampling (issue #17): round trips in a fresh process, release
safety of the files and of pickles, one-line errors, and exact conditionals (brute force on a tiny
domain, the junction tree's conditional on adult, PrivPGD's particle fallback)."""

from __future__ import annotations

import io
import itertools
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import privmarg
from privmarg import MST, Dataset, Domain, Independent, Schema, StructuralZero, datasets, load, registry
from privmarg.cli import app
from privmarg.data import MemorySource
from privmarg.measure import MeasurementSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_contract import FAST_PRESET, table, zeros  # noqa: E402

SRC = Path(privmarg.__file__).resolve().parents[1]


def _fit(name, seed=0):
    m = registry.make_preset(name, 1.0, 1e-6, seed=seed, **FAST_PRESET[name])
    if "public" in registry.entry("preset", name).flags:
        return m.fit(table(), public=table(200, seed=5))
    return m.fit(table())


@pytest.fixture(scope="module")
def fitted():
    return {name: _fit(name) for name in registry.names("preset")}


# ------------------------------------------------------------------------------ round trips
def test_round_trip_in_a_fresh_process_gives_the_same_rows(fitted, tmp_path):
    expect = {}
    for name, m in fitted.items():
        m.save(tmp_path / name)
        expect[name] = (m.sample(60, seed=7), m.sample(30, seed=8, conditions={"b": 1, "d": 0}),
                        m.privacy_report())
    script = (
        "import sys, json, privmarg\n"
        "for name in sys.argv[2:]:\n"
        "    s = privmarg.load(f'{sys.argv[1]}/{name}')\n"
        "    s.sample(60, seed=7).to_csv(f'{sys.argv[1]}/{name}-plain.csv', index=False)\n"
        "    s.sample(30, seed=8, conditions={'b': 1, 'd': 0}).to_csv(f'{sys.argv[1]}/{name}-cond.csv', index=False)\n"
        "    json.dump(s.privacy_report(), open(f'{sys.argv[1]}/{name}-privacy.json', 'w'))\n")
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path), *fitted], capture_output=True, text=True,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    for name, (plain, cond, privacy) in expect.items():
        assert pd.read_csv(tmp_path / f"{name}-plain.csv").equals(plain), name
        got = pd.read_csv(tmp_path / f"{name}-cond.csv")
        assert got.equals(cond), name
        assert (got["b"] == 1).all() and (got["d"] == 0).all()
        assert json.loads((tmp_path / f"{name}-privacy.json").read_text()) == json.loads(json.dumps(privacy))


def test_loaded_model_samples_like_the_fitted_one_and_refuses_a_fit(fitted, tmp_path):
    m = fitted["aim"]
    path = m.save(tmp_path / "aim")
    s = load(path)
    assert isinstance(s, privmarg.SavedSynthesizer) and s.method == "aim"
    assert np.array_equal(s.sample_codes(100, seed=3), m.sample_codes(100, seed=3))
    assert s.default_rows() == m.default_rows()
    assert s.measurements_report() == m.measurements_report()
    with pytest.raises(RuntimeError, match="new release"):
        s.fit(table())
    # a loaded model saves again, to the same thing
    s.save(tmp_path / "again")
    assert np.array_equal(load(tmp_path / "again").sample_codes(50, seed=1), m.sample_codes(50, seed=1))


class _Watch(pickle.Pickler):
    """A pickler that records every private object it is asked to write."""

    def __init__(self, buf):
        super().__init__(buf)
        self.private = []

    def persistent_id(self, obj):
        if isinstance(obj, (MemorySource, Dataset, MeasurementSession, np.random.Generator, np.random.SeedSequence)):
            self.private.append(type(obj).__name__)
        return None


@pytest.mark.parametrize("name", registry.names("preset"))
def test_pickle_keeps_the_model_and_drops_seed_and_private_state(fitted, name):
    m = fitted[name]
    w = _Watch(io.BytesIO())
    w.dump(m)
    assert w.private == [], w.private  # no source, session, seed or generator state
    blob = pickle.dumps(m)
    assert b"SeedSequence" not in blob
    back = pickle.loads(blob)
    assert back.seed is None
    assert back.sample(40, seed=2).equals(m.sample(40, seed=2))
    assert back.privacy_report() == m.privacy_report()
    back.sample(5)  # its own generator: fresh entropy


# --------------------------------------------------------------------------- release safety
def test_saved_files_hold_no_rows_seed_or_exact_counts(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    raw = pd.DataFrame({
        "job": rng.choice(["a", "b", "c"], n).astype(object),
        "amount": rng.integers(0, 1000, n),
        "score": rng.random(n) * 10,
    })
    raw.loc[17, "job"] = "ZQXMARKER-row-17"  # outside the public list: becomes "other"
    raw.loc[18, "amount"] = 987  # a value to look for
    raw.loc[19, "score"] = 3.14159265358979
    schema = Schema.from_dict({"columns": {
        "job": {"type": "categorical", "values": ["a", "b", "c"], "other": True},
        "amount": {"type": "integer", "min": 0, "max": 999, "bins": 10},
        "score": {"type": "float", "min": 0, "max": 10, "bins": 8}}})
    m = MST(1.0, 1e-6, seed=12345, iters=50, final_iters=50, compress=False).fit(raw, schema)
    path = m.save(tmp_path / "m")
    text = (path / "model.json").read_text()
    blob = (path / "arrays.npz").read_bytes()
    for needle in ("ZQXMARKER", "3.14159265358979", "12345"):
        assert needle not in text and needle.encode() not in blob
    assert np.float64(3.14159265358979).tobytes() not in blob
    info = json.loads(text)
    assert info["public_rows"] is None  # add/remove: N is private
    assert "seed" not in json.dumps(info["params"]) and "seed" not in json.dumps(info["generator"])
    # no saved array is an exact marginal of the encoded table
    codes = m.encoder_.encode(raw)
    with np.load(path / "arrays.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    for meas in info["measurements"]:
        y = arrays[meas["y"]]
        exact = codes.project(tuple(meas["attrs"]))
        assert y.shape == exact.shape and not np.allclose(y, exact, atol=0.5)
        assert not np.array_equal(np.round(y), y)  # noisy reals, not counts
    assert m.sample(20, seed=1)["job"].isin(["a", "b", "c", "__other__"]).all()


# ------------------------------------------------------------------------------- bad files
def _one_line_error(path, match):
    with pytest.raises(ValueError, match=match) as e:
        load(path)
    assert "\n" not in str(e.value)
    r = CliRunner().invoke(app, ["sample", str(path), "--rows", "5", "--output", str(path.parent / "x.csv")])
    assert r.exit_code == 2
    assert not (path.parent / "x.csv").exists()
    return str(e.value)


def test_another_version_or_a_damaged_file_gives_one_clear_line(fitted, tmp_path):
    path = fitted["mst"].save(tmp_path / "m")
    info = json.loads((path / "model.json").read_text())
    info["format_version"] = 99
    (path / "model.json").write_text(json.dumps(info))
    msg = _one_line_error(path, "format version 99")
    assert "reads version 1" in msg
    path = fitted["mst"].save(tmp_path / "m2")
    data = bytearray((path / "arrays.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "arrays.npz").write_bytes(bytes(data))
    _one_line_error(path, "corrupted")
    (path / "model.json").write_text("{not json")
    _one_line_error(path, "corrupted")
    _one_line_error(tmp_path / "missing", "not a saved privmarg model")


def test_save_is_atomic_and_replaces_only_with_force(fitted, tmp_path):
    m = fitted["independent"]
    path = m.save(tmp_path / "m")
    with pytest.raises(FileExistsError, match="force"):
        m.save(path)
    fitted["mst"].save(path, force=True)
    assert load(path).method == "mst"
    other = tmp_path / "notmine"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not a saved model"):
        m.save(other, force=True)
    assert (other / "keep.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "notmine"]  # no temporary left behind


# ------------------------------------------------------------------------ exact conditionals
def _joint(model, dom):
    return model.project(dom.attrs).reshape(dom.shape)


def test_conditional_matches_brute_force_on_a_tiny_domain():
    data = table(600)
    dom = data.domain
    m = registry.make_preset("aim", 1.0, 1e-6, seed=0, **FAST_PRESET["aim"]).fit(data, zeros=zeros(dom))
    joint = _joint(m.model_, dom)
    for evidence in ({"b": 1}, {"b": 1, "d": 0}, {"a": 2, "c": 4}):
        idx = tuple(evidence.get(a, slice(None)) for a in dom.attrs)
        mask = np.zeros(dom.shape, dtype=bool)
        mask[idx] = True
        want = np.where(mask, joint, 0.0)
        want /= want.sum()
        cond = m.model_.condition(evidence)
        got = _joint(cond, dom) / cond.total
        np.testing.assert_allclose(got, want, atol=1e-10)
        rows = m.sample_codes(200_000, seed=1, conditions=evidence)
        for a, v in evidence.items():
            assert (rows[:, dom.attrs.index(a)] == v).all()
        freq = np.bincount(np.ravel_multi_index(rows.T, dom.shape), minlength=joint.size) / len(rows)
        assert np.abs(freq - want.ravel()).sum() < 0.02
    with pytest.raises(ValueError, match="probability zero"):
        m.sample(10, conditions={"a": 3, "b": 2})  # the structural zero


def test_conditional_on_a_merged_value_of_a_compressed_model():
    rng = np.random.default_rng(1)
    n = 3000
    a = rng.integers(0, 3, n)
    c = np.where(rng.random(n) < 0.97, rng.integers(0, 3, n), rng.integers(3, 8, n))  # 3..7 rare: merged
    b = (a + (c > 2)) % 3
    dom = Domain(["a", "b", "c"], [3, 3, 8])
    m = MST(2.0, 1e-6, seed=0, iters=200, final_iters=200).fit(Dataset(np.column_stack([a, b, c]), dom))
    merged = np.setdiff1d(np.arange(8), m.supports_["c"])
    assert len(merged) >= 2
    v = int(merged[0])
    joint = _joint(m.model_, dom)
    want = np.zeros_like(joint)
    want[:, :, v] = joint[:, :, v]
    want /= want.sum()
    cond = m.model_.condition({"c": v})
    np.testing.assert_allclose(_joint(cond, dom) / cond.total, want, atol=1e-10)
    rows = m.sample_codes(50_000, seed=2, conditions={"c": v})
    assert (rows[:, 2] == v).all()
    freq = np.bincount(np.ravel_multi_index(rows.T, dom.shape), minlength=joint.size) / len(rows)
    assert np.abs(freq - want.ravel()).sum() < 0.02


def test_a_partial_table_keeps_each_rows_given_values():
    m = _fit("mst")
    rng = np.random.default_rng(3)
    given = pd.DataFrame({"c": rng.integers(0, 5, 500), "a": rng.integers(0, 3, 500)})
    out = m.sample(conditions=given, seed=4)
    assert len(out) == 500
    assert (out["c"].to_numpy() == given["c"].to_numpy()).all() and (out["a"].to_numpy() == given["a"].to_numpy()).all()
    assert out.equals(m.sample(conditions=given, seed=4))
    with pytest.raises(ValueError, match="rows=3"):
        m.sample(3, conditions=given)
    with pytest.raises(ValueError, match="not a column"):
        m.sample(3, conditions={"zz": 1})
    with pytest.raises(ValueError, match="outside"):
        m.sample(3, conditions={"a": 9})


@pytest.mark.slow
def test_conditional_two_way_marginals_on_adult_match_the_models_conditional():
    df, dom = datasets.load("adult")
    m = MST(1.0, 1e-9, seed=0, iters=300, final_iters=500).fit(df, dom)
    female = 0  # datasets README: sex = 0 is female
    n = 100_000
    rows = m.sample_codes(n, seed=1, conditions={"sex": female})
    assert (rows[:, dom.attrs.index("sex")] == female).all()
    cond = m.model_.condition({"sex": female})  # the junction tree's exact conditional
    p_female = m.model_.project(["sex"])[female] / m.model_.total
    assert abs(cond.total * p_female - m.model_.project(["sex"])[female]) < 1e-6 * m.model_.total
    others = [a for a in dom.attrs if a != "sex"]
    small = []
    for x, y in itertools.combinations(others, 2):
        p = cond.project([x, y])
        p = p / p.sum()
        q = np.bincount(rows[:, dom.attrs.index(x)] * dom[y] + rows[:, dom.attrs.index(y)],
                        minlength=p.size) / n
        l1 = np.abs(p - q).sum()
        noise = np.sqrt(2 * p * (1 - p) / (np.pi * n)).sum()  # expected L1 of n i.i.d. draws
        if noise < 0.01:
            small.append(l1)
            assert l1 < 0.02, (x, y, l1)
        assert l1 < max(0.02, 1.25 * noise), (x, y, l1, noise)  # nothing beyond sampling noise
    assert len(small) >= 10


# ---------------------------------------------------------------------------- other models
def test_privpgd_conditions_by_drawing_among_matching_particles():
    pytest.importorskip("torch")
    m = _fit("privpgd")
    parts = m.model_.codes_
    match = parts[(parts[:, 1] == 1)]
    rows = m.sample_codes(len(match), seed=0, conditions={"b": 1})
    assert (rows[:, 1] == 1).all()
    key = lambda r: sorted(map(tuple, r))  # noqa: E731
    assert key(rows) == key(match)  # exactly the matching particles: the model's own conditional
    more = m.sample_codes(3 * len(match), seed=0, conditions={"b": 1})
    assert (more[:, 1] == 1).all() and set(map(tuple, more)) == set(map(tuple, match))
    empty = [(a, b) for a in range(4) for b in range(3) if not ((parts[:, 0] == a) & (parts[:, 1] == b)).any()]
    if empty:
        with pytest.raises(ValueError, match="probability zero"):
            m.sample_codes(5, conditions={"a": empty[0][0], "b": empty[0][1]})


def test_raw_schema_conditions_map_values_to_bins_and_come_back_as_given():
    raw, schema = datasets.load("hmeq")
    m = Independent(1.0, 1e-9, seed=0, iters=50).fit(raw, schema)
    out = m.sample(300, seed=1, conditions={"BAD": 1, "JOB": "Office", "LOAN": 5000, "YOJ": 2.5})
    assert (out["BAD"] == 1).all() and (out["JOB"] == "Office").all()
    assert (out["LOAN"] == 5000).all() and np.allclose(out["YOJ"], 2.5)
    assert out.dtypes.equals(m.sample(5).dtypes)
    given = pd.DataFrame({"REASON": ["HomeImp", None, "DebtCon"], "CLNO": [3, 10, 40]})
    out = m.sample(conditions=given, seed=2)
    assert out["REASON"].isna().tolist() == [False, True, False] and out["CLNO"].tolist() == [3, 10, 40]
    with pytest.raises(ValueError, match="outside the schema's bounds"):
        m.sample(3, conditions={"LOAN": -5})


def test_hmeq_adaptive_encoder_round_trips_through_save_and_load(tmp_path):
    """The raw-table defaults (issue #15: exact integers, adaptive PrivTree bins with noisy leaf
    weights and decay, atoms, per-column rho) are saved and restored: the loaded model decodes and
    conditions exactly like the fitted one."""
    raw, schema = datasets.load("hmeq")
    m = MST(1.0, 1e-9, seed=0).fit(raw, schema)
    enc = m.encoder_
    kinds = {n: c for n, c in enc.codecs_.items() if c.edges is not None}
    assert any(c.leaf_edges is not None for c in kinds.values())  # adaptive bins
    assert any(c.leaf_edges is None and np.all(np.diff(c.edges) == 1) for c in kinds.values())  # exact ints
    s = load(m.save(tmp_path / "hmeq"))
    for n, c in enc.codecs_.items():
        d = s.encoder_.codecs_[n]
        assert d.spec == c.spec and d.rho == c.rho, n
        for f in ("edges", "atoms", "leaf_edges", "leaf_cum", "leaf_scale", "kept", "group"):
            a, b = getattr(c, f), getattr(d, f)
            assert (a is None) == (b is None) and (a is None or np.array_equal(a, b)), (n, f)
    assert s.encoder_.report() == enc.report()
    assert s.sample(1000, seed=1).equals(m.sample(1000, seed=1))
    cond = {"MORTDUE": 61234.5, "DEROG": 2, "JOB": "Office"}
    got, want = s.sample(200, seed=3, conditions=cond), m.sample(200, seed=3, conditions=cond)
    assert got.equals(want)
    assert np.allclose(got["MORTDUE"], 61234.5) and (got["DEROG"] == 2).all() and (got["JOB"] == "Office").all()


def test_encoder_state_keeps_atoms_and_decodes_the_same():
    from privmarg.preprocess import TableEncoder
    from privmarg.privacy import Accountant

    rng = np.random.default_rng(0)
    x = np.where(rng.random(4000) < 0.5, 0.0, rng.gamma(2.0, 50.0, 4000))  # a point mass at 0
    df = pd.DataFrame({"x": np.clip(x, 0, 1000), "k": rng.integers(0, 5, 4000)})
    schema = {"columns": {"x": {"type": "float", "min": 0, "max": 1000}, "k": {"type": "integer", "min": 0, "max": 4}}}
    enc = TableEncoder(schema)
    codes = enc.fit_encode(df, Accountant(1.0, "add_remove"), 0.1, np.random.default_rng(1)).codes
    assert len(enc.codecs_["x"].atoms) and enc.codecs_["x"].leaf_edges is not None
    back = TableEncoder.from_state(json.loads(json.dumps(enc.state())))
    assert back.domain == enc.domain and back.report() == enc.report()
    a = enc.decode(codes, np.random.default_rng(2))
    assert a.equals(back.decode(codes, np.random.default_rng(2)))
    assert (a["x"] == 0).mean() > 0.4  # the point mass is decoded as a point mass


def test_cli_save_model_then_sample_with_conditions(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.integers(0, 3, 400), "b": rng.integers(0, 4, 400), "c": rng.integers(0, 2, 400)})
    df.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 4, "c": 2}))
    runner = CliRunner()
    args = ["synth", str(tmp_path / "data.csv"), "--domain", str(tmp_path / "domain.json"), "--method", "mst",
            "--epsilon", "1", "--delta", "1e-6", "--seed", "0", "--output", str(tmp_path / "syn.csv"),
            "--save-model", str(tmp_path / "model")]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "model" / "model.json").exists()
    (tmp_path / "syn.csv").unlink()
    r = runner.invoke(app, args)  # exists: refused before any budget is spent, nothing written
    assert r.exit_code == 2 and "already exists" in r.output and not (tmp_path / "syn.csv").exists()
    assert runner.invoke(app, args + ["--force"]).exit_code == 0
    out = tmp_path / "more.csv"
    r = runner.invoke(app, ["sample", str(tmp_path / "model"), "--rows", "250", "--output", str(out),
                            "--seed", "3", "--condition", "b=2", "--condition", "c=1"])
    assert r.exit_code == 0, r.output
    assert "no privacy budget spent" in " ".join(r.output.split())
    got = pd.read_csv(out)
    assert len(got) == 250 and (got["b"] == 2).all() and (got["c"] == 1).all()
    assert got.equals(load(tmp_path / "model").sample(250, seed=3, conditions={"b": 2, "c": 1}))
    for bad in (["--condition", "b"], ["--condition", "b=x"], ["--condition", "b=9"], ["--rows", "-1"]):
        r = runner.invoke(app, ["sample", str(tmp_path / "model"), "--output", str(tmp_path / "bad.csv"), *bad])
        assert r.exit_code == 2, (bad, r.output)
        assert not (tmp_path / "bad.csv").exists()


def test_the_readme_example_runs(tmp_path, monkeypatch):
    import re

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    m = re.search(r"<!-- example: save-load-condition[^>]*-->\n```python\n(.*?)```\n<!-- /example -->", text, re.S)
    assert m, "README lost its save/load example"
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(m.group(1), "README.md", "exec"), scope)
    assert scope["rows"].equals(scope["mst"].sample(10_000, seed=1))
    assert (scope["bad_office"]["BAD"] == 1).all() and (scope["bad_office"]["JOB"] == "Office").all()
    assert scope["three"]["LOAN"].tolist() == [5_000, 20_000, 80_000]
    assert (tmp_path / "out" / "hmeq-mst" / "model.json").exists()


def test_huge_samples_are_refused_before_drawing_and_the_cli_streams(tmp_path, monkeypatch):
    """sample(10**12) is a clear ValueError, not a MemoryError half-way; the CLI refuses a table
    its disk cannot hold (exit 2, one error line, nothing written) and writes unconditioned rows
    in chunks: the same rows as the API's sample for the same seed."""
    import privmarg.memory

    rng = np.random.default_rng(0)
    dom = Domain(("a", "b"), (3, 4))
    m = Independent(1.0, 1e-6, seed=0).fit(Dataset(rng.integers(0, 3, size=(300, 2)), dom), dom)
    with pytest.raises(ValueError, match="sample_to"):
        m.sample(10**12)
    monkeypatch.setattr(privmarg.memory, "available_memory", lambda: 10_000)
    with pytest.raises(ValueError, match="GiB"):
        m.sample_codes(1000)  # 1000 × 2 cells × 24 bytes > 10 kB
    monkeypatch.undo()
    m.save(tmp_path / "model")
    runner = CliRunner()
    out = tmp_path / "big.csv"
    r = runner.invoke(app, ["sample", str(tmp_path / "model"), "--rows", str(10**15), "--output", str(out)])
    assert r.exit_code == 2 and r.output.count("error:") == 1 and "Traceback" not in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    r = runner.invoke(app, ["sample", str(tmp_path / "model"), "--rows", "700", "--output", str(out), "--seed", "5"])
    assert r.exit_code == 0, r.output
    assert pd.read_csv(out).equals(load(tmp_path / "model").sample(700, seed=5))


def _rewrite(path, change_arrays=None, change_info=None, arrays_bytes=None):
    """Edit a saved model as an attacker would, keeping its checksum consistent."""
    import hashlib

    info = json.loads((path / "model.json").read_text())
    if arrays_bytes is None:
        with np.load(path / "arrays.npz") as npz:
            arrays = {k: npz[k] for k in npz.files}
        if change_arrays:
            change_arrays(info, arrays)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        arrays_bytes = buf.getvalue()
    (path / "arrays.npz").write_bytes(arrays_bytes)
    info["arrays_sha256"] = hashlib.sha256(arrays_bytes).hexdigest()
    if change_info:
        change_info(info)
    (path / "model.json").write_text(json.dumps(info))


def test_saved_models_are_untrusted_input(fitted, tmp_path, monkeypatch):
    """NaN/+inf potentials, a negative or infinite total, a file that is a link to a device, an
    oversized JSON and a zip bomb: each one clear line (API and CLI exit 2), nothing read unbounded."""
    import privmarg.persist as persist

    def fresh(name):
        return fitted["aim"].save(tmp_path / name)

    def nan_theta(info, arrays):
        arrays[info["model"]["theta"][0]].flat[0] = np.nan

    def inf_theta(info, arrays):
        arrays[info["model"]["theta"][-1]].flat[-1] = np.inf

    assert fitted["aim"].model_.__class__.__name__ == "GraphicalModel"
    _rewrite(path := fresh("nan"), nan_theta)
    _one_line_error(path, "NaN or \\+inf")
    _rewrite(path := fresh("inf"), inf_theta)
    _one_line_error(path, "NaN or \\+inf")
    for bad in (-5.0, "Infinity"):
        _rewrite(path := fresh(f"total{bad}"), change_info=lambda i, b=bad: i["model"].__setitem__("total", b))
        _one_line_error(path, "total must be a finite count")
    path = fresh("device")
    (path / "arrays.npz").unlink()
    (path / "arrays.npz").symlink_to("/dev/zero")
    _one_line_error(path, "not a regular file")
    path = fresh("bigjson")
    monkeypatch.setattr(persist, "MAX_MODEL_JSON_BYTES", 100)
    _one_line_error(path, "limit")
    monkeypatch.undo()
    bomb = io.BytesIO()
    np.savez_compressed(bomb, x=np.zeros(10**7))  # ~10 kB packed, 80 MB unpacked
    _rewrite(path := fresh("bomb"), arrays_bytes=bomb.getvalue())
    monkeypatch.setattr(persist, "_memory_cap", lambda: 2**20)
    _one_line_error(path, "unpacks to")


def test_a_networks_structural_zeros_travel_in_its_own_saved_state(tmp_path):
    """DP-MERF samples around its zeros: its saved state holds them, and a file written before
    models kept their own zeros gets the release's."""
    pytest.importorskip("torch")
    data = table()
    fit = registry.make_preset("dpmerf", 1.0, 1e-6, seed=0, **FAST_PRESET.get("dpmerf", {})).fit(
        data, zeros=zeros(data.domain))
    path = fit.save(tmp_path / "m")
    info = json.loads((path / "model.json").read_text())
    assert info["model"]["zeros"] and len(info["model"]["zeros"]) == len(zeros(data.domain))

    def masks(model):
        return [(z.attrs, np.asarray(z.mask).tolist()) for z in model.zeros]

    back = load(path)
    assert masks(back.model_) == masks(fit.model_) != []
    codes = back.sample_codes(2000)
    for z in zeros(data.domain):
        assert z.violations(codes, data.domain) == 0

    _rewrite(path, change_info=lambda i: i["model"].pop("zeros"))  # as written before this change
    assert masks(load(path).model_) == masks(fit.model_)


def test_grouped_measurements_are_saved_sparse_and_checked_on_load(tmp_path):
    """PrivPGD's grouped marginals keep their grouping query (sparse) through a save; a damaged index
    array gives one clear line."""
    pytest.importorskip("torch")
    from privmarg import PrivPGD

    rng = np.random.default_rng(0)
    a = rng.integers(0, 40, 600)
    data = Dataset(np.column_stack([a, np.clip(a + rng.integers(-3, 4, 600), 0, 39), rng.integers(0, 2, 600)]),
                   Domain(["a", "b", "c"], [40, 40, 2]))
    m = PrivPGD(1.0, 1e-6, seed=0, n_particles=300, epochs=2, proj_iters=5, proj_num_projections=8).fit(data)
    grouped = [x for x in m.measurements_ if x.query is not None]
    assert grouped, "the test needs a grouped marginal"
    back = load(m.save(tmp_path / "m"))
    for x, y in zip(m.measurements_, back.measurements_):
        assert (x.query is None) == (y.query is None) and np.array_equal(x.y, y.y)
        if x.query is not None:
            assert abs(x.query - y.query).sum() == 0 and y.query.shape == x.query.shape

    def bad_index(info, arrays):
        key = next(q["sparse"] for q in (e["query"] for e in info["measurements"]) if isinstance(q, dict))
        arrays[f"{key}.indices"][0] = 10**6

    path = m.save(tmp_path / "bad")
    _rewrite(path, bad_index)
    _one_line_error(path, "corrupted")

    def huge_shape(info, arrays):  # a query claiming 2^40 cells: refused before anything is built
        entry = next(e["query"] for e in info["measurements"] if isinstance(e["query"], dict))
        entry["shape"][1] = 2**40

    path = m.save(tmp_path / "huge")
    _rewrite(path, huge_shape)
    assert "not [" in _one_line_error(path, "corrupted")
