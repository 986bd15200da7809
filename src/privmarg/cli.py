"""The ``privmarg`` command line."""

from __future__ import annotations

import math
import resource
import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .dataset import DataError, Dataset, read_table
from .domain import Domain
from .io import write_json, write_table, write_text
from .privacy import NEIGHBOURS, BudgetExceededError
from .schema import DRAFT_WARNING, Schema, draft_schema
from .estimation import load_zeros
from .workload import parse_workload

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Differentially private synthetic tables from noisy marginals.")
err = Console(stderr=True)


class UsageProblem(Exception):
    """Bad input: reported as one line, exit code 2."""


def _fail(msg: str) -> None:
    err.print(f"[bold red]error:[/] {msg}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


@app.callback()
def main() -> None:
    """privmarg: select, measure, generate."""


@app.command()
def synth(
    input: Path = typer.Argument(..., help="CSV or Parquet table: integer codes (--domain) or raw values (--schema)"),
    domain: Optional[Path] = typer.Option(None, "--domain", help='JSON {"column": size, ...} for integer-coded input'),
    schema: Optional[Path] = typer.Option(None, "--schema", help="public schema (JSON or YAML) for a raw table"),
    drop_unknown: bool = typer.Option(False, "--drop-unknown", help="drop input columns the schema/domain does not name"),
    method: str = typer.Option("aim", "--method", help="aim, mst, mwem, independent, privpgd or jam"),
    generator: Optional[str] = typer.Option(None, "--generator", help="pgm (default) or privpgd: generate records from the selected measurements with PrivPGD"),
    epsilon: float = typer.Option(1.0, "--epsilon", help="privacy epsilon (> 0)"),
    delta: float = typer.Option(1e-9, "--delta", help="privacy delta, in (0, 1)"),
    rows: Optional[int] = typer.Option(None, "--rows", help="synthetic rows (default: N under replace-one, a noisy N otherwise)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="makes the whole run reproducible"),
    workload: str = typer.Option("all-3way", "--workload", help="all-2way, all-3way, all-3way:target=COL or a JSON file"),
    max_model_size: float = typer.Option(80.0, "--max-model-size", help="model capacity in MB (AIM, MWEM)"),
    neighbour: Optional[str] = typer.Option(None, "--neighbour", help="add_remove or replace_one (default: the method's; add_remove except PrivPGD)"),
    output: Path = typer.Option(..., "--output", "-o", help="synthetic table (.csv or .parquet)"),
    report: Optional[Path] = typer.Option(None, "--report", help="JSON report: privacy ledger, measurements, timing"),
    zeros: Optional[Path] = typer.Option(None, "--zeros", help='structural zeros JSON [{"attrs": [..], "cells": [[..], ..]}, ..] (with --domain)'),
    public: Optional[Path] = typer.Option(None, "--public", help="public table over the same domain/schema (needed by --method jam)"),
) -> None:
    """Fit a mechanism on INPUT and write a synthetic table (written atomically, all or nothing)."""
    from .mechanisms import MECHANISMS

    t0 = time.perf_counter()
    try:
        method_l = method.lower()
        if method_l not in MECHANISMS:
            raise UsageProblem(f"unknown method {method!r}: choose one of {', '.join(MECHANISMS)}")
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise UsageProblem(f"--epsilon must be > 0, got {epsilon}")
        if not 0 < delta < 1:
            raise UsageProblem(f"--delta must be in (0, 1), got {delta}")
        if neighbour is not None and neighbour not in NEIGHBOURS:
            raise UsageProblem(f"--neighbour must be one of {', '.join(NEIGHBOURS)}")
        if rows is not None and rows < 0:
            raise UsageProblem("--rows must be >= 0")
        if not str(output).lower().endswith((".csv", ".csv.gz", ".parquet", ".pq")):
            raise UsageProblem(f"{output}: output must end in .csv, .csv.gz or .parquet")
        if (domain is None) == (schema is None):
            raise UsageProblem("give either --schema SCHEMA.json (raw table) or --domain DOMAIN.json (integer codes)")
        if schema is not None:
            from .preprocess import TableEncoder

            sch = Schema.load(schema)
            dom = sch.max_domain()  # column names for checking the workload; sizes are fixed by fit
            data = read_table(input)
            TableEncoder(sch, drop_unknown=drop_unknown).validate(data)  # bad input: fail before any budget
        else:
            dom = Domain.from_json(domain)
            data = Dataset.from_frame(read_table(input), dom, drop_unknown=drop_unknown)
        if zeros is not None and schema is not None:
            raise UsageProblem("--zeros takes integer codes: use it with --domain")
        zero_list = load_zeros(zeros, dom) if zeros is not None else None
        if (method_l == "jam") != (public is not None):
            raise UsageProblem("--method jam needs --public PUBLIC.csv" if public is None
                               else "--public is only used by --method jam")
        public_data = None
        if public is not None:
            if generator == "privpgd":
                raise UsageProblem("--generator privpgd is not supported with --method jam")
            if schema is not None:
                public_data = read_table(public)
                TableEncoder(sch, drop_unknown=True).validate(public_data)
            else:
                public_data = Dataset.from_frame(read_table(public), dom, drop_unknown=drop_unknown)
        kw: dict = {"seed": seed, "neighbour": neighbour}
        if method_l in ("aim", "mwem", "jam"):
            parse_workload(workload, dom)  # fail before any budget is spent
            kw.update(workload=workload, max_model_size=max_model_size)
        if generator not in (None, "pgm", "privpgd"):
            raise UsageProblem(f"unknown generator {generator!r}: choose pgm or privpgd")
        mech = MECHANISMS[method_l](epsilon, delta, **kw)
        if generator == "privpgd" and method_l != "privpgd":
            from .generators.privpgd import PrivPGDGenerator
            from .mechanisms.privpgd import WithGenerator

            mech = WithGenerator(mech, PrivPGDGenerator(seed=seed))
    except (UsageProblem, DataError, ValueError, KeyError, FileNotFoundError, OSError) as e:
        _fail(_one_line(e))

    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[msg]}"),
                      TimeElapsedColumn(), console=err, transient=False) as bar:
            task = bar.add_task(f"{method_l} budget", total=1.0, msg="")

            def progress(spent: float, total: float, msg: str) -> None:
                bar.update(task, completed=spent / total, msg=msg[:60])

            extra = {} if public_data is None else {"public": public_data}
            if schema is not None:
                mech.fit(data, sch, progress=progress, drop_unknown=drop_unknown, **extra)
            else:
                mech.fit(data, progress=progress, zeros=zero_list, **extra)
            bar.update(task, completed=1.0, msg="sampling")
            synthetic = mech.sample(rows)
        write_table(synthetic, output)
        if report is not None:
            write_json(build_report(mech, method_l, len(synthetic), time.perf_counter() - t0), report)
    except KeyboardInterrupt:
        err.print("interrupted: nothing written")
        raise typer.Exit(130)
    except (BudgetExceededError, DataError, ValueError, KeyError) as e:
        _fail(_one_line(e))
    err.print(f"wrote {len(synthetic)} rows to {output}" + (f", report to {report}" if report else ""))


schema_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Public schemas for raw tables.")
app.add_typer(schema_app, name="schema")


@schema_app.command("draft")
def schema_draft(
    input: Path = typer.Argument(..., help="CSV or Parquet table (raw values)"),
    output: Path = typer.Option(..., "--output", "-o", help="schema file to write (.json, .yaml or .yml)"),
) -> None:
    """Write a starting schema read off INPUT. Its bounds and categories come from the PRIVATE data:
    replace them with public knowledge before any release."""
    try:
        if not str(output).lower().endswith((".json", ".yaml", ".yml")):
            raise UsageProblem(f"{output}: the schema must end in .json, .yaml or .yml")
        spec, notes = draft_schema(read_table(input))
        if str(output).lower().endswith((".yaml", ".yml")):
            import yaml

            write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), output)
        else:
            write_json(spec, output)
    except (UsageProblem, DataError, ValueError, OSError, ImportError) as e:
        _fail(_one_line(e))
    err.print(f"wrote a draft schema for {len(spec['columns'])} column(s) to {output}", highlight=False)
    for note in notes:
        err.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    err.print(f"[bold yellow]WARNING:[/] {DRAFT_WARNING}", highlight=False, soft_wrap=True)


def build_report(mech, method: str, rows: int, seconds: float) -> dict:
    """The JSON report: privacy ledger (each rho recomputable), measurements, size, time, memory."""
    out = {
        "method": method,
        "privacy": mech.privacy_report(),
        "measurements": mech.measurements_report(),
        "rows": int(rows),
        "seconds": float(seconds),
        "fit_seconds": float(mech.fit_seconds_),
        "peak_memory_mb": _peak_memory_mb(),
    }
    if getattr(mech, "encoder_", None) is not None:
        out["preprocessing"] = mech.encoder_.report()
    if getattr(mech, "log_", None):
        out["rounds"] = [{k: v for k, v in r.items() if k not in ("candidates", "candidate_weights")}
                         for r in mech.log_]
    if hasattr(mech, "error_bounds"):
        # 95% bounds on each workload marginal's L1 error of the table just written (free)
        out["error_bounds"] = [b.to_dict() for b in mech.error_bounds(0.95)]
    return out


def _one_line(e: BaseException) -> str:
    msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    return " ".join(msg.split()) or type(e).__name__


def _register_extensions() -> None:
    from .cli_datasets import register as register_datasets
    from .evaluation.commands import register

    register(app)
    register_datasets(app)


_register_extensions()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
