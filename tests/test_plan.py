"""privmarg plan: the budget's split and the noise of the first measurements, from public inputs only."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from privmarg import Domain
from privmarg.cli import app
from privmarg.cli.plan import plan_lines
from privmarg.privacy import cdp_rho, round_plan

runner = CliRunner()


def test_aim_plan_states_T_and_the_first_sigma():
    dom = Domain([f"x{i}" for i in range(20)], [2] * 20)  # all-3way: 1,350 candidates, T = 294
    lines = plan_lines(dom, "aim", 1.0, 1e-9, 1000, "all-3way")
    rho = cdp_rho(1.0, 1e-9)
    sigma = round_plan(rho, 0.9, 1.0, 294).sigma
    text = "\n".join(lines)
    assert "1,350 candidate marginals" in text and "T = 294" in text and f"sigma {sigma:.3g}" in text
    err = math.sqrt(2 / math.pi) * sigma * 2 / 1000
    assert f"{err:.3g} to {err:.3g}" in text
    assert "warning" not in text
    # AIM's budget rule, from the same public inputs: 3-way marginals of 8 cells, ratio ≤ 250, N read
    # as the selector reads it off its noisy 1-way marginals (add/remove): N less 3σ√cells
    ratio = math.sqrt(2 / math.pi) * sigma * 8 / (1000 - 3 * sigma * math.sqrt(2))
    assert f"L1 noise {ratio:.2g} times N, so the rounds after the 1-way marginals are planned for 80" in text
    small = "\n".join(plan_lines(dom, "aim", 1e-5, 1e-9, 1000, "all-3way"))
    assert "planned for 80" not in small


@pytest.mark.parametrize("epsilon,words", [
    (0.1, "runs 30 rounds with 20% of each for the choice and stops its final fit early"),
    (10.0, "hands the budget to AIM's selection (public answers rarely help at this precision) and fits "
           "its final model to convergence")])
def test_jam_plan_states_its_spending_regime(epsilon, words):
    """The same public rule the JAM selector applies (noise_ratio of the paper's round <= 1)."""
    from privmarg.select.jam import noise_ratio

    dom = Domain([f"x{i}" for i in range(8)], [6] * 8)  # all-3way: 56 marginals of 216 cells
    text = "\n".join(plan_lines(dom, "jam", epsilon, 1e-9, 20_000, "all-3way"))
    ratio = noise_ratio(cdp_rho(epsilon, 1e-9), 30, 0.2, math.sqrt(2), 20_000, 216)
    assert "56 all-3way marginals (mean 216 cells)" in text
    assert f"L1 noise {ratio:.2g} times N" in text
    assert words in text


def test_mst_plan_and_warnings():
    dom = Domain(["a", "b", "c"], [3, 4, 2])
    text = "\n".join(plan_lines(dom, "mst", 50.0, 0.01, 500, "all-3way"))
    assert "MST: a third of the budget" in text
    assert "not below 1/N" in text and "epsilon 50 protects individuals only weakly" in text


def test_the_cli_reads_no_data_and_refuses_bad_input(tmp_path):
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 4}))
    r = runner.invoke(app, ["plan", "--domain", str(tmp_path / "domain.json"), "--method", "aim", "--epsilon", "1",
                            "--delta", "1e-9", "--rows", "500"])
    assert r.exit_code == 0 and "risk, worst case" in r.stderr and "T = " in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["domain.json"]
    for bad in (["--method", "gan"], ["--epsilon", "0"], ["--rows", "0"]):
        args = ["plan", "--domain", str(tmp_path / "domain.json"), "--epsilon", "1", "--delta", "1e-9"]
        r = runner.invoke(app, args + bad)
        assert r.exit_code == 2 and r.stderr.count("error:") == 1, (bad, r.output)
