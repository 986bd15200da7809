"""``privmarg plan``: what a release would spend, how noisy its measurements would be, how accurate
AIM's synthetic table is expected to be (:func:`~privmarg.select.aim_plan.plan_aim`) and what its
guarantee means, before any data is read (domain or schema only: no privacy cost)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import (UsageProblem, budget_warnings, check_budget, err, fail, neighbour_words, one_line,
                     risk_sentence)

def plan_lines(domain, method: str, epsilon: float, delta: float, rows: int | None, workload: str,
               schema=None) -> list[str]:
    """The plan in plain words. ``rows``: the curator's estimate of the table's size (only to put
    the noise in proportion and predict AIM's error; nothing is read). ``schema``: the raw table's
    public schema, when ``domain`` is its encoding (AIM plans with the encoding at this budget).
    Public inputs only."""
    from .. import registry
    from ..core import parse_workload
    from ..privacy import cdp_rho, gaussian_sigma, marginal_l2, round_plan
    from ..privacy.risk import panel, zcdp_profile
    from ..select.adaptive import expected_noise_share, mean_cells
    from ..select.aim_plan import plan_warnings

    rho = cdp_rho(epsilon, delta)
    mech = registry.make_preset(method, epsilon, delta, **({"workload": workload} if method == "aim" else {}))
    aim_plan = None
    if method == "aim":  # AIM's own plan: its noise and predicted error (planned encoding of a schema)
        aim_plan = mech.plan(schema if schema is not None else domain, rows)
        domain = aim_plan.domain
    neighbour = mech.neighbour
    l2 = marginal_l2(neighbour)
    d = len(domain)
    cells = [domain[a] for a in domain.attrs]
    lines = [f"budget: epsilon {epsilon:g} at delta {delta:g} = rho {rho:.4g} zCDP, {neighbour_words(neighbour)} "
             f"neighbours; {d} columns, {domain.size():.3g} cells in the full table"]
    if method == "aim":
        p = aim_plan
        first = p.first_sigma
        lines.append(f"AIM: {p.n_candidates:,} candidate marginals in the {workload} workload's closure; the budget is "
                     f"sized for T = {p.initial_rounds} rounds (fewer run: rounds get more budget when the model stops "
                     f"moving); each 1-way marginal is first measured with noise sigma {first:.3g} counts per cell")
        if p.rounds < p.initial_rounds:
            lines.append(f"with about {rows:,} rows a round would measure a mean-sized workload marginal with "
                         f"L1 noise {p.noise_ratio:.2g} times N, so the rounds after the 1-way marginals are planned "
                         f"for {p.rounds} (4 per column) instead")
        lines.append(f"each later round measures one marginal with noise sigma {p.round_sigma:.3g} counts per cell "
                     "(halved when a round barely moves the model)")
        lines += aim_plan.lines()[1:]
        if rows:
            lines.append(_public_start_line(domain, rho, l2, rows, workload))
    elif method == "jam":
        from ..select.jam import PAPER_PLAN, noise_ratio

        wl = parse_workload(workload, domain)
        cells_wl = mean_cells(domain, wl)
        first = round_plan(rho / PAPER_PLAN[0], 1 - PAPER_PLAN[1], l2).sigma
        line = (f"JAM: each round chooses a public answer (free) or a private measurement of one of "
                f"{len(wl):,} {workload} marginals (mean {cells_wl:,.0f} cells)")
        if rows:
            ratio = noise_ratio(rho, *PAPER_PLAN, l2, rows, cells_wl)
            T, a = PAPER_PLAN
            line += (f"; with {rows:,} rows a round's measurement of a mean-sized one has L1 noise {ratio:.2g} "
                     "times N, so JAM " + (
                         "hands the budget to AIM's selection (public answers rarely help at this precision) "
                         "and fits its final model to convergence" if ratio <= 1 else
                         f"runs {T} rounds with {a:.0%} of each for the choice and stops its final fit early "
                         "(the measurements are too noisy to fit closely); if the last round takes a public "
                         "answer, the budget left picks how much of the release is public records"))
        lines.append(line)
    elif method == "mst":
        first = gaussian_sigma(rho / 3 / d, l2)
        s2 = gaussian_sigma(rho / 3 / max(d - 1, 1), l2)
        lines.append(f"MST: a third of the budget each for the 1-way marginals (sigma {first:.3g} counts per "
                     f"cell), the choice of {d - 1} pairs, and their 2-way marginals (sigma {s2:.3g})")
    else:
        first = gaussian_sigma(rho / d, l2)
        lines.append(f"{method}: for reference, every 1-way marginal measured once with the whole budget would "
                     f"get sigma {first:.3g} counts per cell; this method spends part of it elsewhere")
    if rows:
        errs = [expected_noise_share(first, c, rows) for c in cells]
        worst = max(range(d), key=lambda i: errs[i])
        lines.append(f"with about {rows:,} rows: expected L1 error of a 1-way marginal (0-2) from that noise "
                     f"{min(errs):.3g} to {max(errs):.3g} (column {domain.attrs[worst]!r}, {cells[worst]} values)")
        if max(errs) > 0.5:
            lines.append("warning: the noise is comparable to the counts: a larger epsilon, fewer columns or "
                         "coarser bins would help")
    lines.append(risk_sentence(panel(zcdp_profile(rho), neighbour).to_dict()))
    return lines + plan_warnings(epsilon, delta, rows, weak=False) + budget_warnings(epsilon, delta)


def _public_start_line(domain, rho: float, l2: float, rows: int, workload: str) -> str:
    """Whether AIM given a public table (--public) would start from its model at this budget
    (:func:`~privmarg.select.public_start.starts_public`, with ``rows`` for N; under add/remove AIM
    decides with a low estimate of N, so near the line it may start where this says not)."""
    from ..core import parse_workload
    from ..select.adaptive import mean_cells
    from ..select.public_start import PUBLIC_START_NOISE_RATIO, start_noise_ratio, starts_public

    cells = mean_cells(domain, parse_workload(workload, domain))
    ratio = start_noise_ratio(rho, l2, rows, cells)
    if starts_public(rho, l2, rows, cells):
        return (f"with a public table (--public): AIM would start from the public table's model (the budget is "
                f"small: a JAM-paper round's noise is {ratio:.2g} times N, at least {PUBLIC_START_NOISE_RATIO:g})")
    return (f"with a public table (--public): AIM would not use it (a JAM-paper round's noise is {ratio:.2g} times "
            f"N, below {PUBLIC_START_NOISE_RATIO:g}: AIM's own measurements are precise enough)")


def plan(
    domain: Optional[Path] = typer.Option(None, "--domain", help='JSON {"column": size, ...}'),
    schema: Optional[Path] = typer.Option(None, "--schema", help="public schema of a raw table (JSON/YAML)"),
    method: str = typer.Option("aim", "--method", help="a preset (privmarg synth's --method)"),
    epsilon: float = typer.Option(..., "--epsilon"),
    delta: float = typer.Option(..., "--delta"),
    rows: Optional[int] = typer.Option(None, "--rows", help="about how many rows the table has (your estimate; "
                                                             "nothing is read)"),
    workload: str = typer.Option("all-3way", "--workload", help="AIM's workload"),
) -> None:
    """Before spending: the budget's split, the noise of the measurements, AIM's predicted error
    (with --rows) and what the guarantee means for one person. Reads the domain or schema only (no
    data, no privacy cost)."""
    from .. import registry
    from ..core import Domain
    from ..schema import Schema
    from ..select.aim_plan import public_sizes

    try:
        if (domain is None) == (schema is None):
            raise UsageProblem("give either --domain DOMAIN.json or --schema SCHEMA.json")
        if method.lower() not in registry.names("preset"):
            raise UsageProblem(f"unknown method {method!r}: choose from {', '.join(registry.names('preset'))}")
        check_budget(epsilon, delta)
        if rows is not None and rows < 1:
            raise UsageProblem("--rows must be >= 1")
        sch = Schema.load(schema) if schema is not None else None
        dom = Domain.from_json(domain) if domain is not None else public_sizes(sch)
        lines = plan_lines(dom, method.lower(), epsilon, delta, rows, workload, schema=sch)
    except (UsageProblem, ValueError, KeyError, OSError) as e:
        fail(one_line(e))
    for line in lines:
        err.print(line, highlight=False, soft_wrap=True)


def register(app) -> None:
    app.command("plan")(plan)
