"""The SDV bridge against SDV 2.x itself (``make test-sdv``; skipped where SDV is not installed):
SDV's detected Metadata in, SDV's own validation and sdmetrics' QualityReport on what comes out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

sdv = pytest.importorskip("sdv", minversion="2.0")
pytest.importorskip("sdmetrics")

from sdv.metadata import Metadata  # noqa: E402

from privmarg.sdv_bridge import PrivmargSynthesizer  # noqa: E402


def table(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, n)
    return pd.DataFrame({"pid": np.arange(n), "age": age, "sex": rng.choice(["F", "M"], n),
                         "senior": age > 60, "income": np.round(rng.gamma(2.0, 300.0, n) + 20 * age, 2),
                         "visit": (pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D"))
                         .strftime("%Y-%m-%d")})


def test_sdv_metadata_in_sdv_valid_table_out_and_quality(tmp_path):
    from sdmetrics.reports import QualityReport

    df = table()
    md = Metadata.detect_from_dataframes({"people": df})
    assert md.tables["people"].columns["visit"]["sdtype"] == "datetime"
    # SDV checks a table against the ranges its detection read off the data: a curator who states
    # them as public (here: the detected ones, taken as documented) gets tables that pass
    synth = PrivmargSynthesizer(md, epsilon=3.0, method="aim", public_ranges=True, seed=0, rounds=30)
    synth.fit({"people": df})
    out = synth.sample(len(df))
    md.validate_data(out)  # SDV's own check of a table against its metadata
    syn = out["people"]
    assert list(syn.columns) == list(df.columns) and syn["pid"].is_unique
    full = md.to_dict()
    report = QualityReport()
    report.generate({"people": df}, out, full, verbose=False)
    rng = np.random.default_rng(1)
    indep = pd.DataFrame({c: df[c].to_numpy()[rng.permutation(len(df))] for c in df})  # every dependence broken
    base = QualityReport()
    base.generate({"people": df}, {"people": indep}, full, verbose=False)

    def pair_trends(rep):
        p = rep.get_properties()
        return float(p.loc[p["Property"] == "Column Pair Trends", "Score"].iloc[0])

    pair, pair_base = pair_trends(report), pair_trends(base)
    assert report.get_score() > 0.8 and pair > pair_base, (report.get_properties(), base.get_properties())
    synth.save(tmp_path / "model")
    again = PrivmargSynthesizer.load(tmp_path / "model")
    md.validate_data(again.sample(100))


def test_evaluate_cli_adds_the_quality_report(tmp_path):
    import json

    from typer.testing import CliRunner

    from privmarg.cli import app

    df = table(800).drop(columns="pid")
    real, synth = tmp_path / "real.csv", tmp_path / "synth.csv"
    df.to_csv(real, index=False)
    df.sample(frac=1.0, random_state=0).to_csv(synth, index=False)
    schema = {"columns": {"age": {"type": "integer", "min": 18, "max": 89}, "sex": {"type": "categorical", "values": ["F", "M"]},
                          "senior": {"type": "boolean"}, "income": {"type": "float", "min": 0, "max": 10000},
                          "visit": {"type": "datetime", "min": "2021-01-01", "max": "2021-12-31"}}}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    res = CliRunner().invoke(app, ["evaluate", str(real), str(synth), "--schema", str(tmp_path / "schema.json"),
                                   "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["sdmetrics"]["score"] > 0.95  # the same rows, shuffled: a perfect copy by every property
    assert rep["sdmetrics"]["properties"]["Column Pair Trends"] > 0.95  # age and senior: a strong pair
    assert "sdmetrics QualityReport" in (tmp_path / "r.html").read_text()


def test_the_sdv_page_runs_as_written(tmp_path, monkeypatch):
    from pathlib import Path

    from test_docs import _fenced

    text = (Path(__file__).resolve().parents[1] / "docs" / "sdv.md").read_text()
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__docs__"}
    blocks = [b for lang, b in _fenced(text) if lang == "python"]
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"sdv.md python block {i + 1}", "exec"), ns)
    assert len(ns["synthetic"]) == 2000 and list(ns["synthetic"].columns) == list(ns["people"].columns)


def test_sdmetrics_compares_both_tables_as_the_schema_reads_them(tmp_path):
    """A table that writes booleans yes/no, synthesized (privmarg writes True/False): sdmetrics sees
    both in one form, so a faithful release scores high (it scored 0.33 comparing raw texts)."""
    import json

    from typer.testing import CliRunner

    from privmarg.cli import app

    rng = np.random.default_rng(0)
    a = rng.choice(["x", "y"], 2000)
    df = pd.DataFrame({"a": a, "smoker": np.where((a == "x") ^ (rng.random(2000) < 0.1), "yes", "no"),
                       "age": rng.integers(18, 90, 2000)})
    df.to_csv(tmp_path / "real.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps({"columns": {
        "a": {"type": "categorical", "values": ["x", "y"]}, "smoker": {"type": "boolean"},
        "age": {"type": "integer", "min": 18, "max": 89}}}))
    run = CliRunner().invoke
    r = run(app, ["synth", str(tmp_path / "real.csv"), "--schema", str(tmp_path / "s.json"), "--method", "mst",
                  "--epsilon", "2", "-o", str(tmp_path / "syn.csv")])
    assert r.exit_code == 0, r.output
    r = run(app, ["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "--schema", str(tmp_path / "s.json"),
                  "-o", str(tmp_path / "e.json")])
    assert r.exit_code == 0, r.output
    sdm = json.loads((tmp_path / "e.json").read_text())["sdmetrics"]
    assert sdm["score"] > 0.9 and sdm["properties"]["Column Pair Trends"] > 0.8, sdm
