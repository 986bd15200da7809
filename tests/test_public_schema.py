"""A public table settles a schema's DP bounds and DP values for free (issue #42)."""

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import AIM, JAM, Schema
from privmarg.cli import app
from privmarg.preprocess.public_schema import refine_with_public

SPEC = {
    "columns": {
        "city": {"type": "categorical", "values": "dp", "max_values": 3},
        "age": {"type": "integer", "bounds": "dp"},
        "ok": {"type": "boolean"},
    },
    "rules": ["if age < 18 then ok == false"],
}


def tables(n=600, seed=0):
    rng = np.random.default_rng(seed)

    def frame(cities, p, lo, hi):
        age = rng.integers(lo, hi + 1, n)
        return pd.DataFrame({"city": rng.choice(cities, n, p=p), "age": age,
                             "ok": (age >= 18) & (rng.random(n) < 0.5)})

    private = frame(["Oslo", "Lima", "Pune", "Nuuk"], [0.4, 0.3, 0.2, 0.1], 5, 80)
    public = frame(["Oslo", "Lima", "Pune", "Kiev"], [0.5, 0.2, 0.2, 0.1], 10, 70)
    return private, public


def test_refine_takes_public_values_and_range():
    private, public = tables()
    public.loc[:40, "city"] = "Baku"  # most frequent four: Oslo, Baku, Lima/Pune ...; max_values = 3
    sch, notes = refine_with_public(Schema.from_dict(SPEC), public)
    counts = public["city"].value_counts()
    assert set(sch["city"].values) == set(counts.index[:3])
    assert not sch["city"].dp_values and sch["city"].other
    assert (sch["age"].lo, sch["age"].hi) == (public["age"].min(), public["age"].max())
    assert not sch["age"].dp_bounds
    assert len(notes) == 2 and all("public table" in n for n in notes)
    assert sch.rules == Schema.from_dict(SPEC).rules  # rules kept


def test_columns_the_public_table_lacks_keep_their_dp_step():
    _, public = tables()
    sch, notes = refine_with_public(Schema.from_dict(SPEC), public.drop(columns=["city", "age"]))
    assert sch["city"].dp_values and sch["age"].dp_bounds and notes == []
    spec = {"columns": {**SPEC["columns"], "age": {"type": "integer", "bounds": "dp", "missing": True}}}
    sch, notes = refine_with_public(Schema.from_dict(spec), public.assign(age=np.nan))
    assert sch["age"].dp_bounds and len(notes) == 1  # only missing ages: no range to take


def test_a_public_table_that_breaks_the_schema_is_refused():
    from privmarg.data import DataError

    _, public = tables()
    with pytest.raises(DataError, match="'age'.*missing"):
        refine_with_public(Schema.from_dict(SPEC), public.assign(age=np.nan))


def test_fit_with_public_spends_nothing_on_discovery():
    private, public = tables()
    mech = JAM(1.0, 1e-6, rounds=6, iters=20, final_iters=20, seed=0).fit(private, SPEC, public=public)
    ledger = mech.accountant_.to_dict()["ledger"]
    assert not any("DP values" in c["what"] or "bounds" in c["what"] for c in ledger)
    assert mech.accountant_.delta_spent == 0
    assert mech.rho_total == pytest.approx(mech.accountant_.rho_spent + 0.0, rel=0.2)
    out = mech.sample(500)
    assert set(out["city"].dropna()) <= {"Oslo", "Lima", "Pune", "__other__"}  # Nuuk is not public
    assert out["age"].between(10, 70).all()
    assert not ((out["age"] < 18) & (out["ok"] == True)).any()  # noqa: E712 - the rule still holds
    # without a public table the same schema's discovery is paid for
    alone = AIM(1.0, 1e-6, rounds=6, iters=20, final_iters=20, seed=0).fit(private, SPEC)
    assert any("DP values city" in c["what"] for c in alone.accountant_.to_dict()["ledger"])
    assert alone.accountant_.delta_spent > 0


def test_cli_prints_what_the_public_table_settled(tmp_path):
    import json

    private, public = tables()
    private.to_csv(tmp_path / "p.csv", index=False)
    public.to_csv(tmp_path / "q.csv", index=False)
    (tmp_path / "s.json").write_text(json.dumps(SPEC))
    res = CliRunner().invoke(app, ["synth", str(tmp_path / "p.csv"), "--schema", str(tmp_path / "s.json"),
                                   "--method", "jam", "--public", str(tmp_path / "q.csv"), "--epsilon", "1",
                                   "--delta", "1e-6", "-o", str(tmp_path / "out.csv"), "--seed", "0"])
    assert res.exit_code == 0, res.output
    assert "bounds [10, 70] from the public table" in res.output
    assert "3 value(s) from the public table" in res.output


def test_public_table_sets_the_decimals_of_float_columns():
    from privmarg.preprocess.public_schema import written_places

    assert written_places(np.array([0.23, 1.5, 2.01, np.nan])) == 2
    assert written_places(np.array([61.5, 0.1 + 0.2])) == 1  # float noise of parsing ignored
    assert written_places(np.array([326.0, 18823.0])) == 0
    assert written_places(np.array([np.nan])) is None
    spec = {"columns": {"carat": {"type": "float", "min": 0.2, "max": 5.01},
                        "depth": {"type": "float", "min": 43, "max": 79, "decimals": 3},
                        "n": {"type": "integer", "min": 0, "max": 9}}}
    rng = np.random.default_rng(0)
    public = pd.DataFrame({"carat": np.round(rng.uniform(0.2, 5, 300), 2), "depth": np.round(rng.uniform(43, 79, 300), 1),
                           "n": rng.integers(0, 10, 300)})
    sch, notes = refine_with_public(Schema.from_dict(spec), public)
    assert sch["carat"].decimals == 2 and sch["carat"].output_decimals == 2
    assert sch["depth"].decimals == 3  # declared: kept
    assert sch["n"].decimals is None
    assert any("'carat'" in n and "2 decimal" in n for n in notes)
    private = pd.DataFrame({"carat": rng.uniform(0.2, 5, 800), "depth": rng.uniform(43, 79, 800),
                            "n": rng.integers(0, 10, 800)})
    out = JAM(1.0, 1e-6, rounds=4, iters=20, final_iters=20, seed=0).fit(private, spec, public=public).sample(300)
    assert np.allclose(out["carat"], np.round(out["carat"], 2))  # reads like the input: two places
