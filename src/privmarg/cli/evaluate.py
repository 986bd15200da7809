"""``privmarg evaluate REAL SYNTH (--domain D | --schema S) [--test T --target COL] --output report.html|report.json``"""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path
from typing import Any, Optional

import typer

from ..core import strict_json
from .common import UsageProblem, check_outputs, err, fail, one_line

ML_DEFAULT = "gbdt,rf,mlp,xgboost,catboost"
TASKS = ("auto", "classification", "regression")


def _csv(s: Optional[str]) -> list[str] | None:
    if s is None:
        return None
    return [x.strip() for x in s.split(",") if x.strip()]


def _load_run_report(path: Path | None) -> dict | None:
    """The synth report at ``path`` (None without one), checked to be one."""
    if path is None:
        return None
    with open(path) as fh:
        try:
            rep = strict_json.load(fh)
        except ValueError as e:
            raise ValueError(f"--run-report {path}: not a JSON report ({one_line(e)})") from None
    if not isinstance(rep, dict) or "method" not in rep or not isinstance(rep.get("privacy"), dict):
        raise ValueError(f"--run-report {path}: not a report of privmarg synth (a JSON object with its method "
                         "and privacy)")
    return rep


def _read_run_report(rep: dict, path: Path, dp_grid: bool) -> dict:
    """From a synth report: ``run`` facts, its released error ``bounds`` (or None) with a ``note`` why
    they are not checked, the ``measured`` cliques and the ``budget`` by phase."""
    from ..evaluation.report import budget_by_phase

    try:
        return _run_facts(rep, dp_grid, budget_by_phase)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"--run-report {path}: malformed ({one_line(e)})") from None


def _run_facts(rep: dict, dp_grid: bool, budget_by_phase) -> dict:
    run = {k: rep[k] for k in ("method", "seconds", "fit_seconds", "peak_memory_mb", "rows") if k in rep}
    for k in ("epsilon", "delta", "neighbour", "rho_spent"):
        if k in (rep.get("privacy") or {}):
            run[k] = rep["privacy"][k]
    bounds, note = rep.get("error_bounds"), None
    for b in bounds or []:
        if not (isinstance(b["attrs"], list) and all(isinstance(a, str) for a in b["attrs"])
                and isinstance(b["supported"], bool) and math.isfinite(float(b["l1_bound"]))):
            raise ValueError(f"error bound {b!r} is not {{attrs: [names], l1_bound: number, supported: bool}}")
    if bounds and dp_grid:
        # the bounds are on the run's own (DP-fitted) bins and merged categories, not on the
        # public grid the tables are compared on here: checking them would mislead
        note = ("error bounds of the run not checked: its schema fits bins or merges "
                "categories under DP, and they were released on that grid, not the public one")
        bounds = None
    measured = [tuple(m["attrs"]) for m in rep.get("measurements") or [] if m.get("attrs")]
    privacy = rep.get("privacy") or {}
    return {"run": run, "bounds": bounds, "note": note, "measured": measured or None,
            "budget": budget_by_phase(privacy) if privacy.get("ledger") else None,
            "risk": _risk(privacy.get("risk"))}


def _risk(risk) -> dict | None:
    """The run's risk panel when well formed (older reports have none)."""
    if not isinstance(risk, dict):
        return None
    try:
        for key in ("membership_tpr_at_fpr", "attribute_success_from_baseline"):
            if not all(0.0 <= float(v) <= 1.0 for v in risk[key].values()):
                raise ValueError(key)
        if not 0.0 <= float(risk["max_membership_advantage"]) <= 1.0:
            raise ValueError("max_membership_advantage")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"its privacy risk panel is malformed ({one_line(e)})") from None
    return risk


def _attack(real, synth, test, seed: int, risk: dict | None) -> dict:
    """The density-ratio membership attack: members drawn from REAL, non-members and the
    reference from the two halves of TEST (seeded); with the run's provable AUC bound if known."""
    import numpy as np

    from ..data import Dataset
    from ..evaluation.attack import membership_attack

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(test))
    half = len(order) // 2  # at least 10 (checked with the inputs)
    held = np.asarray(test.codes)
    members = np.asarray(real.codes)[rng.choice(len(real), size=min(half, len(real)), replace=False)]
    res = membership_attack(Dataset(members, real.domain), Dataset(held[order[:half]], real.domain), synth,
                            Dataset(held[order[half:]], real.domain)).to_dict()
    if risk and risk.get("max_membership_auc") is not None:
        res["provable_max_auc"] = float(risk["max_membership_auc"])
    return res


def _check_options(domain, schema, task, target, test, attack, output) -> tuple[str, Path]:
    """The option combinations refused before anything is read; (output suffix, JSON path)."""
    if (domain is None) == (schema is None):
        raise ValueError("give either --domain DOMAIN.json (integer-coded tables) or --schema SCHEMA.json "
                         "(raw tables)")
    if task not in TASKS:
        raise ValueError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    if target is not None and test is None:
        raise ValueError("--target needs --test (ML efficacy trains on SYNTH and tests on --test)")
    if test is not None and target is None and not attack:
        raise ValueError("--test needs --target (ML efficacy) or --attack (a membership attack)")
    suffix = output.name.lower()
    if not suffix.endswith((".html", ".htm", ".json")):
        raise ValueError(f"{output}: --output must end in .html or .json")
    if not suffix.endswith(".json") and importlib.util.find_spec("matplotlib") is None:
        err.print("note: matplotlib is not installed, so the HTML report has tables and verdicts but no plots "
                  "(pip install 'privmarg[plots]')", highlight=False)
    return suffix, output if suffix.endswith(".json") else output.with_suffix(".json")


def _load_table(path: Path, what: str, encoder, dom, drop_unknown: bool, frames: dict | None,
                clipped: dict[str, dict[str, int]]):
    """One table as codes: through the schema's public encoding (values outside the bounds clipped,
    and said so) or over the domain; the raw frame kept in ``frames`` when given."""
    from ..data import DataError, Dataset, read_table

    try:
        frame = read_table(path)
        if frames is not None:
            frames[what] = frame
        if encoder is None:
            return Dataset.from_frame(frame, dom, drop_unknown=drop_unknown)
        n_out: dict[str, int] = {}
        coded = encoder.encode(frame, clipped=n_out)
        if n_out:  # encoding clips them to the bounds: say so, a broken table should show
            clipped[what] = n_out
            err.print(f"warning: {what} table: values outside the schema's bounds, clipped: "
                      + ", ".join(f"{c} {n}" for c, n in n_out.items()), highlight=False)
        return coded
    except DataError as e:
        msg = str(e)
        raise DataError(msg if str(path) in msg else f"{what} table {path}: {msg}") from None


def _add_extras(result: dict, real_d, synth_d, test_d, seed: int, info: dict, *, attack: bool, encoder, frames,
                rules, use_sdmetrics: bool, schema, clipped) -> None:
    """What goes into the report beside the metrics: the attack, the schema's rules, sdmetrics, the
    run's facts and bounds, clipped values."""
    run, run_bounds, bounds_note = info.get("run"), info.get("bounds"), info.get("note")
    if attack:
        result["membership_attack"] = _attack(real_d, synth_d, test_d, seed, info.get("risk"))
    if rules:  # records breaking the schema's rules, in each table
        result["rule_violations"] = {"rules": [r.text for r in rules],
                                     **{k: encoder.rule_violations(frames[k]) for k in ("real", "synthetic")}}
    if use_sdmetrics:
        from ..evaluation.quality import sdmetrics_quality

        try:
            with err.status("sdmetrics QualityReport..."):
                result["sdmetrics"] = sdmetrics_quality(frames["real"], frames["synthetic"], schema, encoder)
        except Exception as e:  # a third-party report must not lose ours
            err.print(f"warning: sdmetrics QualityReport failed, left out: {one_line(e)}", highlight=False)
    if run:
        result["run"] = run
    if info.get("risk"):
        result["privacy_risk"] = info["risk"]
    if run_bounds:  # the run released bounds on its own error: show them against the truth
        from ..evaluation.report import check_error_bounds

        result["error_bounds"] = check_error_bounds(real_d, synth_d, run_bounds)
    if clipped:
        result["clipped_values"] = clipped
    if bounds_note:
        result["error_bounds_note"] = bounds_note
        err.print(bounds_note, highlight=False)


def _grid(schema: Path | None, domain: Path | None, drop_unknown: bool, rep: dict | None, rep_path: Path | None):
    """(raw schema or None, encoder or None, domain) of the evaluation: the schema's public encoding
    (evaluation reads the real table directly, being for the curator, not for release, so the grid
    must not depend on it), or the domain file. A schema whose bounds or values come from DP steps
    fixes no encoding by itself: the run report's resolved schema (those steps' released results)
    stands in for it."""
    from ..core import Domain
    from ..preprocess import TableEncoder
    from ..schema import Schema

    if schema is None:
        return None, None, Domain.from_json(domain)
    sch_raw = Schema.load(schema)
    if any(c.dp_discovery for c in sch_raw.columns):
        sch_raw = _resolved_schema(sch_raw, schema, rep, rep_path)
    encoder = TableEncoder(sch_raw.public_encoding(), drop_unknown=drop_unknown).fit()
    return sch_raw, encoder, encoder.domain


def _resolved_schema(given, schema: Path, rep: dict | None, rep_path: Path | None):
    """The run's resolved schema (its DP steps' released bounds and values) for ``given``, a schema
    with DP steps: the same columns, of the same types, or an error naming the report."""
    from ..schema import Schema

    if rep is None:
        raise ValueError(f"{schema}: some columns take their bounds or values from DP steps, so the schema alone "
                         "fixes no encoding: give the run's report (privmarg synth --report) as --run-report, "
                         "whose resolved schema then stands in for it")
    resolved = (rep.get("preprocessing") or {}).get("schema") if isinstance(rep.get("preprocessing"), dict) else None
    if not isinstance(resolved, dict):
        raise ValueError(f"--run-report {rep_path}: holds no resolved schema (a run through a schema writes one "
                         "under preprocessing)")
    out = Schema.from_dict(resolved, source=f"--run-report {rep_path}: preprocessing schema")  # errors say so
    want = [(c.name, c.type) for c in given.columns]
    got = [(c.name, c.type) for c in out.columns]
    if want != got:
        raise ValueError(f"--run-report {rep_path} was made with another schema than {schema} (columns and types "
                         f"{got} against {want})")
    return out


def _run_info(rep: dict | None, run_report: Path | None, sch_raw, dom) -> dict:
    """The run report's facts, its error bounds checked against the columns."""
    if rep is None:
        return {}
    info = _read_run_report(rep, run_report, dp_grid=sch_raw is not None and sch_raw.needs_dp)
    for b in info.get("bounds") or []:
        if not set(b["attrs"]) <= set(dom.attrs):
            raise ValueError(f"--run-report: error bound on {b['attrs']} names columns the "
                             + ("schema" if sch_raw is not None else "domain") + " does not have")
    return info


def _numeric_values(encoder, frames: dict | None) -> dict | None:
    """Raw (real, synthetic) values of the schema's integer and float columns, for the 1-way plots."""
    if encoder is None or not frames:
        return None
    import pandas as pd

    return {c.name: tuple(pd.to_numeric(frames[k][c.name], errors="coerce").to_numpy(dtype=float)
                          for k in ("real", "synthetic"))
            for c in encoder.schema if c.type in ("integer", "float") and c.name in frames["real"]
            and c.name in frames["synthetic"]}


def evaluate_cmd(
    real: Path = typer.Argument(..., help="the real (training) table: CSV or Parquet, integer codes (--domain) "
                                          "or raw values (--schema)"),
    synth: Path = typer.Argument(..., help="the synthetic table, same columns"),
    domain: Optional[Path] = typer.Option(None, "--domain", help='JSON {"column": size, ...}'),
    schema: Optional[Path] = typer.Option(None, "--schema",
                                          help="public schema for raw tables (JSON/YAML): tables are encoded on "
                                               "its grid, PrivTree bins replaced by uniform ones, no rare merging"),
    test: Optional[Path] = typer.Option(None, "--test", help="held-out real test table (ML efficacy)"),
    target: Optional[str] = typer.Option(None, "--target", help="column to predict (with --test)"),
    output: Path = typer.Option(..., "--output", "-o",
                                help="report.html (also writes report.json beside it) or report.json"),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="comma-separated subset (default: all)"),
    numeric: Optional[str] = typer.Option(None, "--numeric", help="columns that get range queries (comma-separated)"),
    ml_models: str = typer.Option(ML_DEFAULT, "--ml-models", help="comma-separated; missing packages are skipped"),
    task: str = typer.Option("auto", "--task", help="auto, classification or regression"),
    run_report: Optional[Path] = typer.Option(None, "--run-report",
                                              help="JSON report of the run that made SYNTH (privmarg synth --report): "
                                                   "its method, rows and privacy go into the report and "
                                                   "its released error bounds are checked"),
    seed: int = typer.Option(0, "--seed", help="seed of the random queries and models"),
    title: Optional[str] = typer.Option(None, "--title", help="page title"),
    drop_unknown: bool = typer.Option(False, "--drop-unknown",
                                      help="ignore table columns the domain/schema does not name"),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline",
                                  help="also score the real table with its columns shuffled independently "
                                       "(every dependence broken), beside each metric"),
    attack: bool = typer.Option(False, "--attack",
                                help="also run a membership-inference attack (a density-ratio attack, a "
                                     "diagnostic) on SYNTH: REAL's records against those of --test, which "
                                     "must be held out of the run"),
    sdmetrics: bool = typer.Option(True, "--sdmetrics/--no-sdmetrics",
                                   help="also sdmetrics' QualityReport, when sdmetrics is installed "
                                        "(pip install 'privmarg[sdv]')"),
) -> None:
    """Compare SYNTH with REAL: every metric, JSON and a self-contained HTML report with plots."""
    from ..data import DataError
    from ..evaluation.report import ALL_METRICS, evaluate, render_html

    t0 = time.perf_counter()
    try:
        suffix, json_path = _check_options(domain, schema, task, target, test, attack, output)
        check_outputs({"--output": output, "--output's JSON": None if json_path == output else json_path},
                      {"REAL": real, "SYNTH": synth, "--domain": domain, "--schema": schema, "--test": test,
                       "--run-report": run_report})
        wanted = _csv(metrics)
        if wanted is not None and set(wanted) - set(ALL_METRICS):
            raise ValueError(f"unknown metric(s) {sorted(set(wanted) - set(ALL_METRICS))}: choose from "
                             f"{', '.join(ALL_METRICS)}")
        rep = _load_run_report(run_report)
        sch_raw, encoder, dom = _grid(schema, domain, drop_unknown, rep, run_report)
        if attack and test is None:
            raise UsageProblem("--attack needs --test: records held out of the run (the attack's non-members)")
        if target is not None and target not in dom:
            raise ValueError(f"--target {target!r} is not a column of the " + ("schema" if schema else "domain"))
        num = _csv(numeric)
        if num is None:  # with a schema, range queries go to its numeric columns by default
            # (not columns with a missing code: it sits after the top bin, not on the number line)
            num = [c.name for c in encoder.schema if c.numeric and not c.missing] if encoder is not None else []
        dom.canonical(num)
        models = _csv(ml_models) or []
        from ..evaluation.ml import available_models

        available_models(models)  # unknown names fail here, before any work
        info = _run_info(rep, run_report, sch_raw, dom)
        from ..evaluation.quality import sdmetrics_available

        use_sdmetrics = sdmetrics and sdmetrics_available()
        rules = encoder is not None and bool(sch_raw.rules)
        clipped: dict[str, dict[str, int]] = {}
        html_numeric = not suffix.endswith(".json") and encoder is not None  # 1-way plots on raw quantiles
        frames: dict[str, Any] | None = {} if use_sdmetrics or rules or html_numeric else None
        real_d, synth_d, test_d = (None if p is None else _load_table(p, w, encoder, dom, drop_unknown, frames, clipped)
                                   for p, w in ((real, "real"), (synth, "synthetic"), (test, "test")))
        if attack and len(test_d) < 20:
            raise UsageProblem(f"--attack needs at least 20 held-out records in --test, got {len(test_d)}")
    except (UsageProblem, ValueError, KeyError, DataError, OSError) as e:
        fail(one_line(e))

    with err.status("computing metrics..."):
        result = evaluate(real_d, synth_d, test=test_d, target=target, metrics=wanted, seed=seed, numeric=num,
                          ml_models=models, ml_task=task, baseline=baseline)
    _add_extras(result, real_d, synth_d, test_d, seed, info, attack=attack, encoder=encoder, frames=frames,
                rules=sch_raw.rules if rules else (), use_sdmetrics=use_sdmetrics,
                schema=sch_raw if schema is not None else None, clipped=clipped)
    result["sources"] = {"real": str(real), "synthetic": str(synth),
                         **({"schema": str(schema)} if schema is not None else {"domain": str(domain)}),
                         **({"test": str(test), "target": target} if test is not None else {})}
    result["evaluation_seconds"] = time.perf_counter() - t0
    page = None
    if not suffix.endswith(".json"):
        with err.status("drawing plots..."):
            from ..evaluation.labels import code_labels

            page = render_html(result, real_d, synth_d, title=title or f"{synth.name} vs {real.name}",
                               sources=result["sources"], labels=code_labels(encoder) if encoder else None,
                               measured=info.get("measured"), budget=info.get("budget"), risk=info.get("risk"),
                               values=_numeric_values(encoder, frames))
    _publish_report(result, page, output, json_path)


def _publish_report(result: dict, page: str | None, output: Path, json_path: Path) -> None:
    """The page and its JSON together, or neither; then the headline metrics and verdicts."""
    from ..io import json_writer, publish, text_writer

    files = ([(output, text_writer(page))] if page is not None else []) + [(json_path, json_writer(result))]
    try:
        publish(files)
    except OSError as e:
        fail(one_line(e))
    shown = {k: result[k] for k in ("tv_2way", "sw1_2way", "workload_error_3way", "covariance_error") if k in result}
    err.print(", ".join(f"{k} {v:.4g}" for k, v in shown.items()))
    for line in result.get("verdicts") or []:
        err.print(f"note: {line}", highlight=False, soft_wrap=True)
    err.print(f"wrote {output}" + ("" if json_path == output else f" and {json_path}"))

def register(app) -> None:
    app.command("evaluate")(evaluate_cmd)
