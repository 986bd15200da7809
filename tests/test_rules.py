"""Rules in the schema (issue #41): the language, what is refused before any budget is spent, the
compilation to structural zeros (each cell decided, checked by decoding its records), and releases
that never break a rule."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from privmarg.preprocess import TableEncoder
from privmarg.schema import Schema, SchemaError
from privmarg.schema.rules import And, Compare, CompareColumns, IsNull, Member, Not, Or, parse_rule

COLUMNS = {
    "age": {"type": "integer", "min": 0, "max": 99},
    "kids": {"type": "integer", "min": 0, "max": 10, "binning": "exact"},
    "fam": {"type": "integer", "min": 1, "max": 20, "binning": "exact"},
    "dead": {"type": "boolean"},
    "cause": {"type": "categorical", "values": ["heart", "cancer", "other"], "missing": True},
    "edu": {"type": "categorical", "values": ["none", "primary", "secondary", "degree"]},
    "income": {"type": "float", "min": 0, "max": 500000},
    "since": {"type": "datetime", "min": "2000-01-01", "max": "2000-12-31"},
}
RULES = ["if age < 15 then edu in ['none', 'primary']", "dead == true iff cause is not null", "fam > kids",
         "if age < 15 then income <= 0", "not (age < 15 and kids > 0)", "if since < '2000-07-01' then age >= 18"]


def people(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A table that obeys RULES (the release must too)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 90, n)
    child = age < 15
    kids = np.where(child, 0, rng.integers(0, 5, n))
    dead = rng.random(n) < 0.1
    since = pd.Timestamp("2000-01-01") + pd.to_timedelta(rng.integers(0, 366, n), unit="D")
    since = since.where(~((age < 18) & (since < pd.Timestamp("2000-07-01"))), pd.Timestamp("2000-08-01"))
    return pd.DataFrame({
        "age": age, "kids": kids, "fam": kids + rng.integers(1, 4, n), "dead": dead,
        "cause": np.where(dead, rng.choice(["heart", "cancer", "other"], n), None),
        "edu": np.where(child, rng.choice(["none", "primary"], n), rng.choice(["none", "primary", "secondary", "degree"], n)),
        "income": np.where(child, 0.0, np.round(rng.gamma(2.0, 20000.0, n), 2)),
        "since": since.strftime("%Y-%m-%d")})


def test_the_language():
    r = parse_rule("if age < 15 then edu in ['none', 'primary']")
    assert r.expr == Or((Not(Compare("age", "<", 15)), Member("edu", ("none", "primary"))))
    assert parse_rule("a == 1 iff b is not null").expr == Or((And((Compare("a", "==", 1), IsNull("b", True))),
                                                              And((Not(Compare("a", "==", 1)), Not(IsNull("b", True))))))
    assert parse_rule("`income>50K` == true and not (x not in [1, 2.5] or y >= z)").expr == And((
        Compare("income>50K", "==", True), Not(Or((Member("x", (1, 2.5), True), CompareColumns("y", ">=", "z"))))))
    assert parse_rule("a < b or c == 'x y'").columns == ("a", "b", "c")
    for bad in ["", "if a < 1", "a <", "a == 1 )", "(a == 1", "a in 1", "a ~ 1", "a == 1 then b == 2"]:
        with pytest.raises(ValueError):
            parse_rule(bad)


@pytest.mark.parametrize("rule,msg", [
    ("ghost > 1", "no column 'ghost'"),
    ("income == 5", "float column"),
    ("edu == 'phd'", "not one of column 'edu'"),
    ("edu < 'x'", "compare it with =="),
    ("age > kids", "binning"),
    ("dead == 'maybe'", "not true/false"),
    ("since < 5", "date in quotes"),
    ("age < 'x'", "not a number"),
    ("a == 1 and", "expected 'name'"),
])
def test_schema_refuses_what_cannot_be_decided(rule, msg):
    with pytest.raises(SchemaError, match=msg):
        Schema.from_dict({"columns": {**COLUMNS, "a": {"type": "integer", "min": 0, "max": 3}}, "rules": [rule]})


def test_rules_on_dp_discovered_values_are_refused():
    cols = {**COLUMNS, "edu": {"type": "categorical", "values": "dp"}}
    with pytest.raises(SchemaError, match="DP discovery"):
        Schema.from_dict({"columns": cols, "rules": ["edu == 'none'"]})


def test_rules_round_trip_through_to_dict_and_public_encoding():
    s = Schema.from_dict({"columns": COLUMNS, "rules": RULES})
    assert [r.text for r in Schema.from_dict(s.to_dict()).rules] == RULES
    assert len(s.public_encoding().rules) == len(RULES)


@pytest.mark.parametrize("binning", ["uniform", "privtree"])
def test_every_cell_is_decided_and_zeros_match_decoded_records(binning):
    """The rules' constants become edges, so on every cell a rule is true for every value the cell
    can decode to, or false for every one: decoding many records of each cell shows it (the zeros
    hold no valid record, the other cells no invalid one)."""
    cols = {k: dict(v) for k, v in COLUMNS.items()}
    cols["age"].update(bins=7, binning=binning)
    cols["income"].update(bins=5, binning=binning)
    schema = Schema.from_dict({"columns": cols, "rules": RULES})
    from privmarg.privacy import Accountant

    enc = TableEncoder(schema)
    enc.fit(people(), Accountant(1.0, "add_remove", 2.0, 1e-6), 0.5, np.random.default_rng(0))
    zeros = {z.attrs: z.mask for z in enc.rule_zeros()}
    assert enc.rule_notes_ == []
    rng = np.random.default_rng(1)
    dom = enc.domain
    for rule in schema.rules:
        attrs = tuple(a for a in dom.attrs if a in rule.columns)
        mask = zeros.get(attrs, np.zeros(dom.sizes(attrs), dtype=bool))
        cells = list(itertools.product(*[range(dom[a]) for a in attrs]))
        codes = np.zeros((len(cells) * 20, len(dom)), dtype=np.int64)
        for j, a in enumerate(attrs):
            codes[:, dom.attrs.index(a)] = np.repeat([c[j] for c in cells], 20)
        frame = enc.decode(codes, rng)
        from privmarg.preprocess.rules import broken

        got = broken(rule, enc._prepare(frame), {c.name: c for c in enc.schema})
        want = np.repeat(mask.ravel(), 20)  # every record of a zero cell breaks the rule, no other does
        assert np.array_equal(got, want), (rule.text, int(got.sum()), int(want.sum()))
        assert want.any() and not want.all(), rule.text  # both kinds of cell exist


def test_cuts_keep_adaptive_bins_consistent():
    """A cut splits a bin (and a PrivTree leaf) without moving any value outside its new bin."""
    from privmarg.privacy import Accountant

    cols = {"income": {"type": "float", "min": 0, "max": 500000}, "age": {"type": "integer", "min": 0, "max": 99}}
    schema = Schema.from_dict({"columns": cols, "rules": ["if age < 15 then income < 12345.5"]})
    enc = TableEncoder(schema)
    enc.fit(people()[["income", "age"]], Accountant(1.0, "add_remove", 2.0, 1e-6), 0.5, np.random.default_rng(0))
    c = enc.codecs_["income"]
    assert 12345.5 in c.edges and 12345.5 in c.leaf_edges and 15 in enc.codecs_["age"].edges
    assert np.all(np.diff(c.leaf_cum) >= 0) and c.leaf_cum[-1] == len(c.edges) - 1
    nb = len(c.edges) - 1
    for j in range(nb):
        codes = np.zeros((400, 2), dtype=np.int64)
        codes[:, 0] = j
        v = enc.decode(codes, np.random.default_rng(j))["income"].to_numpy()
        assert (v >= c.edges[j]).all() and (v <= c.edges[j + 1]).all(), j


@pytest.mark.slow
@pytest.mark.parametrize("method", ["AIM", "MST", "PrivBayes"])
def test_releases_never_break_a_rule(method, tmp_path):
    import privmarg

    schema = {"columns": COLUMNS, "rules": RULES}
    mech = getattr(privmarg, method)(1.0, 1e-9, seed=0).fit(people(), schema)
    out = mech.sample(4000)
    assert sum(mech.encoder_.rule_violations(out).values()) == 0
    mech.save(tmp_path / "m")
    again = privmarg.load(tmp_path / "m")
    assert sum(again.encoder_.rule_violations(again.sample(2000)).values()) == 0
    # without the rules the same fit breaks them: the zeros do the work
    free = getattr(privmarg, method)(1.0, 1e-9, seed=0).fit(people(), {"columns": COLUMNS})
    assert sum(mech.encoder_.rule_violations(free.sample(4000)).values()) > 0


def test_cli_release_and_evaluate_report_the_rules(tmp_path):
    import json

    from typer.testing import CliRunner

    from privmarg.cli import app

    people(1500).to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps({"columns": COLUMNS, "rules": RULES}))
    run = CliRunner().invoke
    r = run(app, ["synth", str(tmp_path / "people.csv"), "--schema", str(tmp_path / "schema.json"), "--method", "mst",
                  "--epsilon", "1", "-o", str(tmp_path / "syn.csv")])
    assert r.exit_code == 0, r.output
    r = run(app, ["evaluate", str(tmp_path / "people.csv"), str(tmp_path / "syn.csv"), "--schema",
                  str(tmp_path / "schema.json"), "--metrics", "tv_2way", "--no-sdmetrics", "-o", str(tmp_path / "e.html")])
    assert r.exit_code == 0, r.output
    rv = json.loads((tmp_path / "e.json").read_text())["rule_violations"]
    assert rv["rules"] == RULES and set(rv["synthetic"].values()) == {0} and set(rv["real"].values()) == {0}
    assert "The schema&#x27;s rules" in (tmp_path / "e.html").read_text() or "The schema's rules" in (tmp_path / "e.html").read_text()


def _decided(cols: dict, rules: list[str], rows: int = 800):
    """Fit the encoder on a table drawn from the schema, then check every cell of every rule by
    decoding 20 records: zero cells hold only records that break the rule, the others none."""
    from privmarg.preprocess.rules import broken
    from privmarg.privacy import Accountant

    schema = Schema.from_dict({"columns": cols, "rules": rules})
    rng = np.random.default_rng(0)
    df = pd.DataFrame({n: (rng.integers(c["min"], c["max"] + 1, rows) if c["type"] == "integer" else
                          np.round(rng.uniform(c["min"], c["max"], rows), 1) if c["type"] == "float" else
                          rng.random(rows) < 0.5 if c["type"] == "boolean" else
                          (pd.Timestamp(c["min"]) + pd.to_timedelta(rng.integers(0, 300, rows), unit="D")).strftime("%Y-%m-%d"))
                       for n, c in cols.items()})
    enc = TableEncoder(schema)
    enc.fit(df, Accountant(1.0, "add_remove", 2.0, 1e-6), 0.5, np.random.default_rng(1))
    from privmarg.preprocess.rules import rule_zeros

    enc.rule_zeros()
    assert enc.rule_notes_ == [], enc.rule_notes_
    dom = enc.domain
    for rule in schema.rules:  # one rule at a time: two rules may read the same columns
        attrs = tuple(a for a in dom.attrs if a in rule.columns)
        found, _ = rule_zeros([rule], enc.codecs_, dom)
        mask = found[0].mask if found else np.zeros(dom.sizes(attrs), dtype=bool)
        cells = list(itertools.product(*[range(dom[a]) for a in attrs]))
        codes = np.zeros((len(cells) * 20, len(dom)), dtype=np.int64)
        for j, a in enumerate(attrs):
            codes[:, dom.attrs.index(a)] = np.repeat([c[j] for c in cells], 20)
        frame = enc.decode(codes, np.random.default_rng(2))
        got = broken(rule, enc._prepare(frame), {c.name: c for c in enc.schema})
        assert np.array_equal(got, np.repeat(mask.ravel(), 20)), rule.text


def test_review_cases_are_decided():
    """Cases a review found: a one-integer bin that is an atom (it decodes to the atom), rounding to
    ``decimals`` that must not land on an atom at a bin's edge, a date finer than the column's unit,
    a non-whole constant against an integer column."""
    _decided({"x": {"type": "integer", "min": 0, "max": 99, "bins": 10, "atoms": [0, 50]}, "b": {"type": "boolean"}},
             ["if b == true then x != 50", "if b == false then x != 0", "if b == true then x == 5.5",
              "x not in [3.5, 7]"])
    _decided({"f": {"type": "float", "min": 0, "max": 10, "bins": 7, "decimals": 1}, "b": {"type": "boolean"}},
             ["if b == false then f > 3.1", "if b == true then f <= 6.2"])
    _decided({"t": {"type": "datetime", "min": "2000-01-01", "max": "2000-12-31"}, "b": {"type": "boolean"}},
             ["if b == true then t < '2000-07-01 12:00'", "if b == false then t >= '2000-03-01 06:00'"])


def test_refusals_found_by_review():
    cols = {"a": {"type": "datetime", "min": "2000-01-01", "max": "2000-01-31", "binning": "exact"},
            "b": {"type": "datetime", "min": "2000-01-01", "max": "2000-01-31", "unit": "h", "binning": "exact"},
            "i": {"type": "integer", "min": 0, "max": 9}}
    with pytest.raises(SchemaError, match="kinds or units"):
        Schema.from_dict({"columns": cols, "rules": ["a <= b"]})
    with pytest.raises(SchemaError, match="kinds or units"):
        Schema.from_dict({"columns": {**cols, "j": {"type": "integer", "min": 0, "max": 40000, "binning": "exact"}},
                          "rules": ["a <= j"]})
    for bad in ["i < 1" + "0" * 400, "a < 'now'", "a < '1000-01-01'"]:
        with pytest.raises(SchemaError):
            Schema.from_dict({"columns": cols, "rules": [bad]})
