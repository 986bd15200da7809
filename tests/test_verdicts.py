"""The evaluation says in words what it sees: no gain over independence, lost strong associations."""

from __future__ import annotations

import numpy as np
import pytest

from privmarg import Dataset, Domain
from privmarg.evaluation.report import evaluate, independence_baseline, render_html


def _table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.9, a, rng.integers(0, 4, n))  # r ≈ 0.9 with a
    c = rng.integers(0, 3, n)
    return Dataset(np.column_stack([a, b, c]), Domain(["a", "b", "c"], [4, 4, 3]))


METRICS = ["tv_1way", "tv_2way", "workload_error_3way"]


def test_an_independent_release_is_called_what_it_is():
    real = _table()
    res = evaluate(real, independence_baseline(real, seed=5), metrics=METRICS, baseline=True)
    text = "\n".join(res["verdicts"])
    assert "tv_2way" in text and "independence baseline" in text
    assert "strong association lost: a and b correlate +0.9" in text
    assert not [v for v in res["verdicts"] if "lost" in v and (" c " in v or v.endswith(" c"))]  # c is independent


def test_a_verdict_against_the_baseline_names_the_release_s_own_column_noise():
    """The independence baseline keeps the real columns exactly; a release with noisy columns is told
    that part of its gap is that noise, a release with exact columns is not."""
    real = _table()
    shuffled = independence_baseline(real, seed=5)
    exact = evaluate(real, shuffled, metrics=METRICS, baseline=True)
    assert not any("part of the gap" in v for v in exact["verdicts"])
    codes = shuffled.codes.copy()
    rng = np.random.default_rng(0)
    flip = rng.random(len(codes)) < 0.3
    codes[flip, 0] = 0  # column a's distribution pushed off (its own error, not a relation's)
    noisy = evaluate(real, Dataset(codes, real.domain), metrics=METRICS, baseline=True)
    lines = [v for v in noisy["verdicts"] if "independence baseline" in v]
    assert lines and all(f"off by tv_1way {noisy['tv_1way']:.2g}, part of the gap" in v for v in lines)


def test_a_faithful_table_gets_no_verdict_and_the_page_says_so():
    real = _table()
    res = evaluate(real, _table(seed=1), metrics=METRICS, baseline=True)
    assert res["verdicts"] == []
    page = render_html(res, real, _table(seed=1))
    assert "What this report sees" in page and "Nothing to flag" in page
    bad = evaluate(real, independence_baseline(real, seed=5), metrics=METRICS, baseline=True)
    assert "strong association lost" in render_html(bad, real, independence_baseline(real, seed=5))


def test_a_column_far_off_is_named():
    real = _table()
    codes = real.codes.copy()
    codes[:, 2] = 0  # column c collapsed to one value
    res = evaluate(real, Dataset(codes, real.domain), metrics=METRICS)
    assert any(v.startswith("column c: its distribution is off") for v in res["verdicts"])


@pytest.mark.slow
def test_the_report_flags_the_correlation_aim_loses_on_hmeq(tmp_path):
    """Issue #41's case: AIM at ε = 0.3 on the bundled HMEQ table keeps the 1-way marginals but not
    the strong DEROG–DELINQ–NINQ associations; the report says so in words."""
    import json

    from typer.testing import CliRunner

    import privmarg
    from privmarg.cli import app

    raw, schema = privmarg.datasets.load("hmeq")
    raw.to_csv(tmp_path / "hmeq.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_dict()))
    privmarg.AIM(0.3, 1e-9, seed=0).fit(raw, schema).sample().to_csv(tmp_path / "syn.csv", index=False)
    r = CliRunner().invoke(app, ["evaluate", str(tmp_path / "hmeq.csv"), str(tmp_path / "syn.csv"), "--schema",
                                 str(tmp_path / "schema.json"), "--no-sdmetrics", "-o", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    verdicts = json.loads((tmp_path / "r.json").read_text())["verdicts"]
    lost = [v for v in verdicts if v.startswith("strong association lost")]
    assert lost and any("DELINQ" in v for v in lost), verdicts
    assert "strong association lost" in r.output
