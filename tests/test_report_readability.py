"""The evaluation page speaks the data's language: code labels, the independence baseline, the
budget by phase, notes; and it renders in a real browser (Debian's chromium, when installed)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from privmarg import MST, datasets
from privmarg.data import Dataset
from privmarg.evaluation import budget_by_phase, code_labels, evaluate, independence_baseline, render_html
from privmarg.preprocess import TableEncoder


@pytest.fixture(scope="module")
def hmeq_run():
    raw, schema = datasets.load("hmeq")
    mst = MST(1.0, 1e-9, seed=0).fit(raw, schema)
    enc = mst.encoder_
    return mst, enc, enc.encode(raw), enc.encode(mst.sample())


def test_code_labels_name_every_code(hmeq_run):
    mst, enc, real, synth = hmeq_run  # HMEQ's defaults: exact small integers, adaptive bins + atoms
    labels = code_labels(enc)
    for a, size in zip(enc.domain.attrs, enc.domain.shape):
        assert len(labels[a]) == size, a
    assert labels["REASON"] == ["DebtCon", "HomeImp", "missing"]
    assert labels["BAD"] == ["0", "1"]
    # exact integer coding (0..15 on a public range): one code per value, labelled by the value
    assert labels["DEROG"] == [str(v) for v in range(16)] + ["missing"]
    # adaptive float bins: ranges, the first from the lower bound, the top one closed; then the atoms
    c = enc.codecs_["MORTDUE"]
    assert c.leaf_edges is not None
    n_bins = len(c.edges) - 1
    assert labels["MORTDUE"][-1] == "missing" and labels["MORTDUE"][0].startswith("[0, ")
    assert labels["MORTDUE"][n_bins - 1].endswith("]")  # the top bin is closed
    assert labels["MORTDUE"][n_bins:-1] == [f"{a:.6g}" for a in c.atoms]
    # an atom at an integer column's bound: its own code labelled by the value, left out of the bin
    schema = {"columns": {"n": {"type": "integer", "min": 0, "max": 1000, "bins": 4, "binning": "uniform",
                                "atoms": [0]}}}
    lab = code_labels(TableEncoder(schema).fit())["n"]
    assert lab[0] == "1–249" and lab[-1] == "0" and len(lab) == 5


def test_independence_baseline_keeps_columns_and_breaks_dependence():
    df, dom = datasets.load("adult")
    real = Dataset.from_frame(df, dom)
    base = independence_baseline(real, seed=1)
    for a in dom.attrs:
        assert np.array_equal(real.project([a]), base.project([a]))
    pair = ("relationship", "sex")
    p = real.project(pair).reshape(dom.sizes(pair)) / len(real)
    q = base.project(pair).reshape(dom.sizes(pair)) / len(real)
    indep = np.outer(p.sum(1), p.sum(0))
    assert np.abs(q - indep).sum() < 0.02 < np.abs(p - indep).sum()


def test_budget_by_phase_adds_up_to_the_spend():
    ledger = [{"what": "PrivTree bins LOAN", "mechanism": "privtree", "rho": 0.1},
              {"what": "rare-category counts JOB", "mechanism": "gaussian", "rho": 0.05},
              {"what": "MST tree edge", "mechanism": "exponential", "rho": 0.2},
              {"what": "MST 2-way a,b", "mechanism": "gaussian", "rho": 0.4}]
    b = budget_by_phase({"ledger": ledger, "preprocessing_charges": 2})
    assert b == pytest.approx({"preprocessing": 0.15, "selection": 0.2, "measurement": 0.4})


def test_the_report_splits_the_budget_where_preprocessing_ended(hmeq_run):
    """Phases come from the ledger's order, not from charge names: the adaptive bins' noisy counts
    (Gaussian) are preprocessing, and saved models keep the split."""
    mst = hmeq_run[0]
    rep = mst.privacy_report()
    assert rep["rho_by_phase"]["preprocessing"] == pytest.approx(mst.rho_preprocess_, rel=1e-12)
    assert rep["rho_by_phase"]["preprocessing"] > 0
    assert sum(rep["rho_by_phase"].values()) == pytest.approx(rep["rho_spent"], rel=1e-12)


def test_page_shows_baseline_budget_and_notes(hmeq_run):
    mst, enc, real, synth = hmeq_run
    result = evaluate(real, synth, baseline=True, metrics=["tv_1way", "tv_2way", "covariance_error"])
    assert set(result["baseline"]) >= {"tv_2way", "covariance_error"} and result["baseline"]["tv_1way"] == 0.0
    result["clipped_values"] = {"real": {"LOAN": 3}}
    budget = budget_by_phase(mst.privacy_report())
    assert sum(budget.values()) == pytest.approx(mst.privacy_report()["rho_spent"], rel=1e-12)
    page = render_html(result, real, synth, labels=code_labels(enc), budget=budget, notes=["a note"],
                       measured=[m["attrs"] for m in mst.measurements_report()])
    assert "independence baseline" in page and "Privacy budget by phase" in page
    assert "a note" in page and "LOAN (3 values)" in page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_page_renders_in_headless_chromium(hmeq_run, tmp_path):
    mst, enc, real, synth = hmeq_run
    result = evaluate(real, synth, baseline=True, metrics=["tv_1way", "tv_2way"])
    page = tmp_path / "report.html"
    page.write_text(render_html(result, real, synth, labels=code_labels(enc)), encoding="utf-8")
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(cmd + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "<table>" in dom and dom.count("<img") >= 3
    shot = tmp_path / "shot.png"
    subprocess.run(cmd + ["--window-size=1300,3000", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[0] == 3000 and img.std() > 0.05  # drawn, not a blank page


def test_cli_evaluate_puts_baseline_and_budget_on_the_page(tmp_path):
    import json

    from typer.testing import CliRunner

    from privmarg.cli import app

    datasets.write("titanic", tmp_path / "d")
    d = tmp_path / "d"
    run = CliRunner()
    r = run.invoke(app, ["synth", str(d / "private.csv"), "--domain", str(d / "domain.json"), "--method", "mst",
                         "--epsilon", "1", "--seed", "0", "-o", str(tmp_path / "s.csv"), "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    r = run.invoke(app, ["evaluate", str(d / "private.csv"), str(tmp_path / "s.csv"), "--domain", str(d / "domain.json"),
                         "--metrics", "tv_1way,tv_2way", "--run-report", str(tmp_path / "r.json"),
                         "-o", str(tmp_path / "e.html")])
    assert r.exit_code == 0, r.output
    result = json.loads((tmp_path / "e.json").read_text())
    assert set(result["baseline"]) == {"name", "tv_1way", "tv_2way"}
    page = (tmp_path / "e.html").read_text()
    assert "Privacy budget by phase" in page and "independence baseline" in page
