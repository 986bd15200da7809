"""AIM's predicted error before spending (issue #41): public inputs only, deterministic, monotone in
the budget and the table's size, close to what AIM then measures on a bundled table."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import privmarg
from privmarg import AIM, Dataset, Domain, Plan, Schema, plan_aim
from privmarg.cli import app
from privmarg.core import parse_workload
from privmarg.evaluation.metrics import workload_error
from privmarg.preprocess import TableEncoder
from privmarg.select.aim_plan import planned_domain, sampling_floor

runner = CliRunner()
DOM = Domain(["a", "b", "c", "d", "e", "f"], [2, 5, 8, 12, 3, 20])


def test_prediction_falls_as_epsilon_and_rows_grow():
    by_eps = [plan_aim(DOM, eps, 1e-9, rows=5000).mean_error for eps in (0.1, 1.0, 10.0)]
    assert by_eps[0] > by_eps[1] > by_eps[2] > 0
    by_rows = [plan_aim(DOM, 1.0, 1e-9, rows=n).mean_error for n in (1_000, 10_000, 100_000)]
    assert by_rows[0] > by_rows[1] > by_rows[2] > 0
    assert all(0 <= e <= 2 for e in by_eps + by_rows)


def test_deterministic_typed_and_public():
    a, b = plan_aim(DOM, 1.0, 1e-9, rows=4000), plan_aim(DOM, 1.0, 1e-9, rows=4000)
    assert isinstance(a, Plan) and a == b
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.mean_error = 0.0
    assert len(a.marginals) == a.evaluated == a.n_marginals == 20  # all-3way of 6 columns
    assert a.mean_error == pytest.approx(np.mean([m.error for m in a.marginals]))
    assert all(m.error >= max(m.floor, m.model) - 1e-12 for m in a.marginals)
    assert a.worst(1)[0].error >= a.best(1)[0].error
    json.dumps(a.to_dict())  # plain data
    assert privmarg.plan_aim is plan_aim and "Plan" in privmarg.__all__


def test_without_rows_only_the_noise():
    p = plan_aim(DOM, 1.0, 1e-9)
    assert p.mean_error is None and p.marginals == () and p.first_sigma > 0
    assert any("give --rows" in line for line in p.lines())


def test_the_synthesizer_plans_without_data(tmp_path):
    aim = AIM(1.0, 1e-9, workload="all-2way")
    p = aim.plan({"a": 3, "b": 4, "c": 5}, rows=2000)
    assert p.workload == "all-2way" and p.n_marginals == 3 and p.mean_error > 0
    assert not hasattr(aim, "accountant_")  # nothing spent, nothing fitted: it can still fit once
    with pytest.raises(ValueError):
        AIM(rho=0.1).plan(DOM, rows=100)


def test_simulation_on_the_public_surrogate():
    p = AIM(1.0, 1e-9).plan(Domain(["a", "b", "c", "d"], [3, 4, 2, 5]), rows=2000, simulate=True)
    assert 0 < p.simulated_error < 2 and any("surrogate" in line for line in p.lines())


def test_sampling_floor_matches_monte_carlo():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    rng = np.random.default_rng(0)
    mc = np.mean([np.abs(rng.multinomial(400, p) / 400 - p).sum() for _ in range(4000)])
    assert sampling_floor(p, 400) == pytest.approx(mc, rel=0.05)


def test_a_schema_is_planned_at_its_encoding_for_this_budget():
    _, schema = privmarg.datasets.load("hmeq")
    small, large = (planned_domain(schema, eps, 1e-9, 5960) for eps in (0.1, 10.0))
    assert small.size() < large.size()  # adaptive bins: fewer at a smaller budget (the encoder's rule)
    p = plan_aim(schema, 1.0, 1e-9, rows=5960)
    assert p.rho_selection == pytest.approx(0.9 * p.rho)  # the DP preprocessing's share


def test_a_schema_with_dp_steps_is_planned_at_their_largest_encoding(tmp_path):
    """DP bounds or values are found at fit time: the plan takes a DP-bounds column as an adaptive
    one (bins for the rows and budget, three atoms), a discovered column at its max_values and one for
    the rest, the other columns at their public encoding, and says so (it refused such a schema)."""
    spec = {"columns": {"age": {"type": "integer", "bounds": "dp"}, "pay": {"type": "float", "bounds": "dp",
                                                                           "missing": True},
                        "city": {"type": "categorical", "values": "dp", "max_values": 10},
                        "sex": {"type": "categorical", "values": ["F", "M"]}}}
    schema = Schema.from_dict(spec)
    sizes = dict(zip(schema.names, planned_domain(schema, 1.0, 1e-9, None).shape))
    assert sizes["city"] == 11 and sizes["sex"] == 2 and sizes["age"] == schema["age"].max_size
    at_rows = dict(zip(schema.names, planned_domain(schema, 1.0, 1e-9, 2000).shape))
    assert at_rows["pay"] == at_rows["age"] + 1 < sizes["pay"] and at_rows["city"] == 11
    p = plan_aim(schema, 1.0, 1e-9, rows=2000)
    assert 0 < p.mean_error < 2 and any("DP steps" in n and "age, pay, city" in n for n in p.notes)
    # a rule among the public columns cuts a bin (one code more), with or without DP columns beside
    ruled = {"columns": {"kid": {"type": "integer", "min": 0, "max": 99, "bins": 4},
                         "ok": {"type": "boolean"}}, "rules": ["if kid < 18 then ok == false"]}
    full = Schema.from_dict(ruled)
    want = TableEncoder(full.public_encoding()).fit().domain
    assert want["kid"] == 5 and planned_domain(full, 1.0, 1e-9, None) == want
    mixed = Schema.from_dict({**ruled, "columns": {**ruled["columns"], "city": spec["columns"]["city"]}})
    assert planned_domain(mixed, 1.0, 1e-9, None)["kid"] == 5
    (tmp_path / "s.json").write_text(json.dumps(spec))
    r = runner.invoke(app, ["plan", "--schema", str(tmp_path / "s.json"), "--epsilon", "1", "--delta", "1e-9",
                            "--rows", "2000"])
    assert r.exit_code == 0, r.output
    assert "predicted mean workload error" in r.stderr and "DP steps" in r.stderr


def test_warnings_fire():
    assert any("not below 1/N" in w for w in plan_aim(DOM, 1.0, 0.05, rows=50).warnings)
    assert any("very small" in w for w in plan_aim(DOM, 0.01, 1e-9, rows=5000).warnings)
    assert any("only weakly" in w for w in plan_aim(DOM, 20.0, 1e-9, rows=5000).warnings)
    assert plan_aim(DOM, 1.0, 1e-9, rows=5000).warnings == ()


def test_cli_prints_the_predicted_error_and_reads_only_the_domain(tmp_path):
    (tmp_path / "domain.json").write_text(json.dumps(dict(zip(DOM.attrs, DOM.shape))))
    base = ["plan", "--domain", str(tmp_path / "domain.json"), "--delta", "1e-9", "--rows", "5000"]
    r = runner.invoke(app, base + ["--epsilon", "1"])
    assert r.exit_code == 0, r.output
    assert "predicted mean workload error" in r.stderr and "least accurate" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["domain.json"]
    assert f"{plan_aim(DOM, 1.0, 1e-9, rows=5000).mean_error:.3f}" in r.stderr
    r = runner.invoke(app, base + ["--epsilon", "0.01"])
    assert r.exit_code == 0 and "is very small" in r.stderr
    r = runner.invoke(app, base + ["--epsilon", "20"])
    assert r.exit_code == 0 and "protects individuals only weakly" in r.stderr


def test_prediction_within_a_factor_of_two_on_pums():
    """The bundled pums table (1,948 rows, raw, through its schema) at ε = 1: the plan from the
    schema and N alone against AIM's measured mean 3-way error (benchmarks/plan_accuracy.py)."""
    raw, schema = privmarg.datasets.load("pums")
    raw = raw[list(schema.names)]
    predicted = AIM(1.0, 1e-9).plan(schema, rows=len(raw)).mean_error
    aim = AIM(1.0, 1e-9, seed=0).fit(raw, schema)
    truth = aim.encoder_.encode(raw)
    synthetic = Dataset(aim.sample_codes(len(raw)), aim.domain_)
    measured = workload_error(truth, synthetic, parse_workload("all-3way", aim.domain_))
    assert 0.5 < predicted / measured < 2.0, (predicted, measured)
