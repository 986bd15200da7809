"""The SDV bridge without SDV: metadata dicts in SDV 2's form, privacy of detected ranges, keys,
formats, save/load, and the errors a user meets."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privmarg.sdv_bridge import BRIDGE_FILE, PrivmargSynthesizer, schema_from_sdv


def people(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, n)
    return pd.DataFrame({"id": np.arange(100, 100 + n), "age": age, "sex": rng.choice(["F", "M"], n),
                         "senior": age > 60, "income": np.round(rng.gamma(2.0, 300.0, n) + 20 * age, 2),
                         "day": pd.Timestamp("2021-01-01") + pd.to_timedelta(rng.integers(0, 365, n), unit="D")})


def detected(df: pd.DataFrame) -> dict:
    """What SDV 2's detection writes for ``people``: ranges read off the data."""
    return {"METADATA_SPEC_VERSION": "V2", "relationships": [], "tables": {"people": {
        "primary_key": "id", "columns": {
            "id": {"sdtype": "id"},
            "age": {"sdtype": "numerical", "range_min": int(df.age.min()), "range_max": int(df.age.max()),
                    "decimal_places": 0, "range_is_nullable": False},
            "sex": {"sdtype": "categorical", "range_values": sorted(df.sex.unique().tolist()), "range_is_nullable": False},
            "senior": {"sdtype": "boolean"},
            "income": {"sdtype": "numerical", "computer_representation": "Float", "range_min": float(df.income.min()),
                       "range_max": float(df.income.max()), "decimal_places": 2},
            "day": {"sdtype": "datetime", "datetime_format": "%Y-%m-%d", "range_min": "2021-01-01",
                    "range_max": "2021-12-31"}}}}}


def test_detected_ranges_are_not_used_unless_declared_public():
    df = people()
    md = detected(df)
    schema, name, keys = schema_from_sdv(md, df, bounds={"day": ("2021-01-01", "2021-12-31")})
    assert name == "people" and keys == ["id"] and "id" not in schema.names
    spec = schema.to_dict()["columns"]
    assert spec["age"]["type"] == "integer" and spec["age"].get("bounds") == "dp" and "min" not in spec["age"]
    assert spec["sex"]["values"] == "dp" and spec["income"]["bounds"] == "dp" and spec["income"]["type"] == "float"
    assert spec["senior"]["type"] == "boolean" and spec["day"]["min"] == "2021-01-01"
    pub, _, _ = schema_from_sdv(md, df, public_ranges=True)
    spec = pub.to_dict()["columns"]
    assert (spec["age"]["min"], spec["age"]["max"]) == (df.age.min(), df.age.max())
    assert spec["sex"]["values"] == ["F", "M"] and spec["income"]["decimals"] == 2
    assert not spec["age"].get("missing") and spec["sex"].get("missing") is not True  # range_is_nullable: public
    assert spec["income"]["missing"] is True  # nullable unless declared otherwise


def test_fit_sample_save_load_round_trip(tmp_path):
    df = people()
    md = detected(df)
    synth = PrivmargSynthesizer(md, epsilon=2.0, method="mst", public_ranges=True, seed=1)
    assert synth.get_metadata() is md and synth.get_parameters()["method"] == "mst"
    synth.fit({"people": df})
    out = synth.sample(800)
    assert list(out) == ["people"]
    t = out["people"]
    assert list(t.columns) == list(df.columns) and len(t) == 800
    assert t["id"].tolist() == list(range(800)) and pd.api.types.is_integer_dtype(t["id"].dtype)
    assert set(t["sex"]) <= {"F", "M"} and t["age"].between(18, 89).all()
    day = t["day"].dropna()  # nullable (the metadata does not say otherwise): a few noisy nulls
    assert len(day) > 0.95 * len(t) and day.str.fullmatch(r"2021-\d\d-\d\d").all()  # the metadata's format
    inc = t["income"].dropna()
    assert len(inc) > 0.95 * len(t) and (inc.round(2) == inc).all()  # decimal_places, declared public
    # the dependence age -> senior survives (independent columns would agree on about 52% of rows)
    assert (t["senior"] == (t["age"] > 60)).mean() > 0.8
    report = synth.privacy_report()
    assert report["rho_spent"] == pytest.approx(report["rho_total"])
    synth.save(tmp_path / "m")
    again = PrivmargSynthesizer.load(tmp_path / "m")
    t2 = again.sample(50)["people"]
    assert list(t2.columns) == list(df.columns) and again.table_name == "people"


def test_data_frame_input_dp_discovery_and_string_keys():
    df = people(1200).assign(id=lambda d: "P" + d["id"].astype(str))
    md = detected(df)
    synth = PrivmargSynthesizer(md, epsilon=1.0, method="aim", bounds={"day": ("2021-01-01", "2021-12-31")},
                                seed=2, rounds=20)
    synth.fit(df)  # a bare DataFrame works too
    t = synth.sample(10)["people"]
    assert t["id"].tolist() == [str(i) for i in range(10)]
    whats = {e["what"] for e in synth.privacy_report()["ledger"]}
    # the detected ranges were not used: bounds and categories were found (and paid for) privately
    assert {"DP bounds age", "DP bounds income", "DP values sex"} <= whats, sorted(whats)


def test_errors_a_user_meets(tmp_path):
    df = people(100)
    md = detected(df)
    with pytest.raises(ValueError, match="datetime column 'day' needs public bounds"):
        PrivmargSynthesizer(md).fit(df)
    pii = json.loads(json.dumps(md))
    pii["tables"]["people"]["columns"]["mail"] = {"sdtype": "email"}
    with pytest.raises(ValueError, match=r"mail \(email\)"):
        schema_from_sdv(pii, public_ranges=True)
    with pytest.raises(ValueError, match="missing columns"):
        PrivmargSynthesizer(md, public_ranges=True).fit(df.drop(columns="sex"))
    with pytest.raises(ValueError, match="exactly the table 'people'"):
        PrivmargSynthesizer(md, public_ranges=True).fit({"other": df})
    two = {"tables": {"a": md["tables"]["people"], "b": md["tables"]["people"]}}
    with pytest.raises(ValueError, match="give table_name"):
        PrivmargSynthesizer(two)
    with pytest.raises(RuntimeError, match="fit the synthesizer"):
        PrivmargSynthesizer(md).sample(3)
    with pytest.raises(ValueError, match="bounds/values name columns"):
        schema_from_sdv(md, bounds={"nope": (0, 1)})


def test_load_refuses_a_damaged_bridge_file(tmp_path):
    df = people(600)
    synth = PrivmargSynthesizer(detected(df), epsilon=1.0, method="mst", public_ranges=True, seed=0).fit(df)
    synth.save(tmp_path / "m")
    f = tmp_path / "m" / BRIDGE_FILE
    info = json.loads(f.read_text())
    info["columns"] = info["columns"] + ["ghost"]
    f.write_text(json.dumps(info))
    with pytest.raises(ValueError, match="do not match the saved model"):
        PrivmargSynthesizer.load(tmp_path / "m")
    f.write_text('{"table_name": "a", "table_name": "b"}')
    with pytest.raises(ValueError, match="damaged"):
        PrivmargSynthesizer.load(tmp_path / "m")


def test_the_html_report_shows_sdmetrics_scores_and_what_has_none():
    """sdmetrics' QualityReport (when installed) goes into the report; a property sdmetrics has
    nothing to score (None) says so instead of a number."""
    pytest.importorskip("matplotlib")
    from privmarg import Dataset, Domain
    from privmarg.evaluation.report import evaluate, render_html

    dom = Domain(["a", "b"], [3, 2])
    rng = np.random.default_rng(0)
    real = Dataset(rng.integers(0, [3, 2], size=(200, 2)), dom)
    syn = Dataset(rng.integers(0, [3, 2], size=(200, 2)), dom)
    result = evaluate(real, syn, metrics=["tv_1way"])
    result["sdmetrics"] = {"score": 0.91, "properties": {"Column Shapes": 0.91, "Column Pair Trends": None},
                           "version": "0.32.0"}
    page = render_html(result, real, syn)
    assert "sdmetrics QualityReport (sdmetrics 0.32.0)" in page and "0.91" in page
    assert "n/a: nothing to score" in page


def test_a_saved_bridge_carries_no_detected_range(tmp_path):
    """SDV's detected ranges are read off the data: the saved settings drop them unless declared
    public (the saved model is a release)."""
    df = people(600)
    md = detected(df)
    PrivmargSynthesizer(md, epsilon=1.0, method="mst", bounds={"day": ("2021-01-01", "2021-12-31")},
                        seed=0).fit(df).save(tmp_path / "m")
    text = (tmp_path / "m" / BRIDGE_FILE).read_text()
    assert "range_min" not in text and "range_values" not in text and str(df.income.max()) not in text
    PrivmargSynthesizer(md, epsilon=1.0, method="mst", public_ranges=True, seed=0).fit(df).save(tmp_path / "p")
    assert "range_min" in (tmp_path / "p" / BRIDGE_FILE).read_text()


def test_dates_follow_the_metadata_format_and_bad_ones_are_refused():
    df = people(400)
    df["day"] = pd.to_datetime(df["day"]).dt.strftime("%d/%m/%Y")
    md = detected(df)
    md["tables"]["people"]["columns"]["day"] = {"sdtype": "datetime", "datetime_format": "%d/%m/%Y"}
    schema, _, _ = schema_from_sdv(md, df, public_ranges=False, bounds={"day": ("02/01/2021", "31/12/2021")})
    assert schema.to_dict()["columns"]["day"]["min"] == "2021-01-02"  # 2 January, not 1 February
    bad = df.copy()
    bad.loc[:9, "day"] = "2021/01/05"
    with pytest.raises(ValueError, match="10 value"):
        PrivmargSynthesizer(md, epsilon=1.0, method="mst", bounds={"day": ("01/01/2021", "31/12/2021")},
                            public_ranges=True).fit(bad)


@pytest.mark.parametrize("change", [
    {"parameters": []}, {"columns": "abd"}, {"formats": {"sex": "%Y"}}, {"keys": ["id", "age"]},
    {"columns": ["age", "age"]}, {"metadata": None}, {"key_dtypes": {"id": "float"}},
])
def test_load_refuses_every_malformed_bridge_file(change, tmp_path):
    df = people(500)
    PrivmargSynthesizer(detected(df), epsilon=1.0, method="mst", public_ranges=True, seed=0).fit(df).save(tmp_path / "m")
    f = tmp_path / "m" / BRIDGE_FILE
    f.write_text(json.dumps({**json.loads(f.read_text()), **change}))
    with pytest.raises(ValueError, match="damaged"):
        PrivmargSynthesizer.load(tmp_path / "m")


def test_load_refuses_a_deeply_nested_bridge_file(tmp_path):
    df = people(500)
    PrivmargSynthesizer(detected(df), epsilon=1.0, method="mst", public_ranges=True, seed=0).fit(df).save(tmp_path / "m")
    (tmp_path / "m" / BRIDGE_FILE).write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="damaged"):
        PrivmargSynthesizer.load(tmp_path / "m")
