"""``privmarg synth``: fit a method on a table and write a synthetic copy."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Optional

import typer

from .. import registry
from ..core import Domain, load_zeros, parse_workload, strict_json
from ..data import DataError, Dataset, read_table
from ..io import json_writer, publish, table_writer
from ..privacy import NEIGHBOURS, BudgetExceededError
from ..schema import MAX_MARGINAL_CELLS, Schema
from .common import (UsageProblem, budget_progress, budget_warnings, check_budget, check_marginal_sizes,
                     check_model_folder, check_outputs, check_rows_memory, err, fail, neighbour_words, one_line,
                     peak_memory_mb, risk_sentence)

_METHODS = ", ".join(registry.names("preset"))
_GENERATORS = ", ".join(registry.names("generator"))


def synth(
    input: str = typer.Argument(..., help="CSV or Parquet table: integer codes (--domain) or raw values (--schema); with --backend spark also a URL Spark reads (hdfs://, s3a://)"),
    domain: Optional[Path] = typer.Option(None, "--domain", help='JSON {"column": size, ...} for integer-coded input'),
    schema: Optional[Path] = typer.Option(None, "--schema", help="public schema (JSON or YAML) for a raw table"),
    drop_unknown: bool = typer.Option(False, "--drop-unknown", help="drop input columns the schema/domain does not name"),
    method: str = typer.Option("aim", "--method", help=f"the method: {_METHODS}"),
    generator: Optional[str] = typer.Option(None, "--generator", help=f"generate the records with another generator than the method's: {_GENERATORS}"),
    epsilon: float = typer.Option(1.0, "--epsilon", help="privacy epsilon (> 0); the final line states what was spent"),
    delta: float = typer.Option(1e-9, "--delta", help="privacy delta, in (0, 1); 1e-9 unless given"),
    rows: Optional[int] = typer.Option(None, "--rows", help="synthetic rows (default: N under replace-one, a noisy N otherwise)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="makes the whole run reproducible (tests and benchmarks only: the noise can be replayed)"),
    workload: str = typer.Option("all-3way", "--workload", help="all-2way, all-3way, all-3way:target=COL, all-3way:involving=A,B (cliques with any of them), all-3way:within='A,B,C;D,E' (cliques inside a group), or a JSON file"),
    max_model_size: float = typer.Option(80.0, "--max-model-size", help="model capacity in MB (AIM, MWEM)"),
    neighbour: Optional[str] = typer.Option(None, "--neighbour", help="add_remove or replace_one (default: the method's own: replace_one for JAM, PrivPGD and RAP, add_remove otherwise)"),
    output: Path = typer.Option(..., "--output", "-o", help="synthetic table (.csv or .parquet)"),
    report: Optional[Path] = typer.Option(None, "--report", help="JSON report: privacy ledger, measurements, rows (no timing)"),
    zeros: Optional[Path] = typer.Option(None, "--zeros", help='structural zeros JSON [{"attrs": [..], "cells": [[..], ..]}, ..]: integer codes with --domain, raw values with --schema'),
    allow_draft_schema: bool = typer.Option(False, "--allow-draft-schema", help='accept a schema marked "draft": true (bounds read off the private data: not DP)'),
    public: Optional[Path] = typer.Option(None, "--public", help="public table over the same domain/schema (needed by --method jam; --method aim starts from it at small budgets)"),
    save_model: Optional[Path] = typer.Option(None, "--save-model", help="also save the fitted model to this directory (sample more rows later with `privmarg sample`, no budget)"),
    force: bool = typer.Option(False, "--force", help="replace an existing --save-model directory"),
    noise: str = typer.Option("continuous", "--noise", help="continuous (the papers' float Gaussian) or discrete (exact discrete Gaussian/Laplace on integer counts, same privacy cost; recommended for releases)"),
    backend: str = typer.Option("memory", "--backend", help="memory, duckdb or spark: count an integer-coded INPUT by SQL without loading it whole (with --domain; needs the duckdb or pyspark package)"),
    spark_master: Optional[str] = typer.Option(None, "--spark-master", envvar="PRIVMARG_SPARK_MASTER", help="with --backend spark: the master URL (local[4], spark://HOST:7077, yarn); default: spark-submit's, else local[*]"),
) -> None:
    """Fit a method on INPUT and write a synthetic table (written atomically, all or nothing)."""
    t0 = time.perf_counter()
    location, input = input, Path(input)  # a Path would fold a URL's "//"
    try:
        method_l = method.lower()
        if method_l not in registry.names("preset"):
            raise UsageProblem(f"unknown method {method!r}: choose one of {_METHODS}")
        if generator is not None and generator.lower() not in registry.names("generator"):
            raise UsageProblem(f"unknown generator {generator!r}: choose one of {_GENERATORS}")
        check_budget(epsilon, delta)
        if neighbour is not None and neighbour not in NEIGHBOURS:
            raise UsageProblem(f"--neighbour must be one of {', '.join(NEIGHBOURS)}")
        if rows is not None and rows < 0:
            raise UsageProblem("--rows must be >= 0")
        if not str(output).lower().endswith((".csv", ".csv.gz", ".parquet", ".pq")):
            raise UsageProblem(f"{output}: output must end in .csv, .csv.gz or .parquet")
        if (domain is None) == (schema is None):
            raise UsageProblem("give either --schema SCHEMA.json (raw table) or --domain DOMAIN.json (integer codes)")
        workload_file = None if re.fullmatch(r"all-\d+way(:\w+=.*)?", workload) else Path(workload)
        # outputs first: a bad output must fail before the private data is read or budget spent
        check_outputs({"--output": output, "--report": report},
                      {"INPUT": input, "--domain": domain, "--schema": schema, "--zeros": zeros,
                       "--public": public, "--workload": workload_file})
        if backend not in ("memory", "duckdb", "spark"):
            raise UsageProblem(f"--backend must be memory, duckdb or spark, got {backend!r}")
        if backend != "memory" and domain is None:
            raise UsageProblem(f"--backend {backend} reads integer codes: use it with --domain")
        if spark_master is not None and backend != "spark":
            raise UsageProblem("--spark-master is for --backend spark")
        sch, dom, data, zero_list, public_data = _read_inputs(input, location, schema, domain, zeros, public,
                                                              backend, drop_unknown, spark_master, allow_draft_schema)
        if sch is not None:
            _rehearse_output(sch, data, output, drop_unknown)
        _check_public(method_l, public)
        mech = _make_method(method_l, epsilon, delta, dom, backend=backend, seed=seed, neighbour=neighbour,
                            noise=noise, generator=generator, workload=workload, max_model_size=max_model_size)
        if rows is not None:
            check_rows_memory(rows, len(dom), "--rows")
        if save_model is not None:
            from ..persist import check_target

            check_target(save_model, force)  # fail before any budget is spent
            check_model_folder(save_model, {"--output": output, "--report": report})
    except (UsageProblem, DataError, ValueError, KeyError, FileNotFoundError, OSError) as e:
        fail(one_line(e))

    _warn_before_spending(epsilon, delta, seed)
    try:
        with budget_progress(method_l) as progress:
            extra = {} if public_data is None else {"public": public_data}
            if schema is not None:
                mech.fit(data, sch, progress=progress, drop_unknown=drop_unknown, zeros=zero_list,
                         allow_draft_schema=allow_draft_schema, **extra)
            else:
                mech.fit(data, progress=progress, zeros=zero_list, **extra)
            progress(1.0, 1.0, "sampling")
            synthetic = _sample(mech, rows)
        files = [(output, table_writer(synthetic, output, mech.parquet_nulls()))]
        _print_encoder_notes(getattr(mech, "encoder_", None), getattr(mech, "public_schema_notes_", []))
        if report is not None:
            files.append((report, json_writer(build_report(mech, method_l, len(synthetic)))))
        if save_model is not None:
            from ..persist import model_writer

            files.append((save_model, model_writer(mech)))
        publish(files)  # the table, its report and the model together, or none of them
    except KeyboardInterrupt:
        err.print("interrupted: nothing written")
        raise typer.Exit(130)
    except (UsageProblem, BudgetExceededError, DataError, ValueError, KeyError, OSError) as e:
        fail(one_line(e))
    _print_summary(mech, len(synthetic), output, report, save_model, t0)

def _print_encoder_notes(enc, public_notes=()) -> None:
    """What the public table settled in the schema, the encoder's warnings and its notes on
    structural zeros and rules."""
    notes = list(public_notes) + [n for key in ("warnings_", "zero_notes_", "rule_notes_") for n in getattr(enc, key, [])]
    for note in notes:
        err.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)


def _warn_before_spending(epsilon, delta, seed) -> None:
    for line in budget_warnings(epsilon, delta):
        err.print(line, highlight=False, soft_wrap=True)
    if seed is not None:
        err.print("warning: --seed makes the noise reproducible: whoever knows the seed can recompute "
                  "and remove it. Use it for tests and benchmarks, not for a release.", highlight=False, soft_wrap=True)


def _make_method(method_l: str, epsilon, delta, dom, *, backend: str, seed, neighbour, noise: str, generator,
                 workload: str, max_model_size: float):
    """The preset the options ask for, with its workload parsed and every marginal it may count or
    model checked against memory (before any budget is spent)."""
    if noise not in ("continuous", "discrete"):
        raise UsageProblem(f"--noise must be continuous or discrete, got {noise!r}")
    kw: dict = {"seed": seed, "neighbour": neighbour, "noise": noise}
    if generator is not None:
        kw["generator"] = generator.lower()
    if "workload" in registry.entry("preset", method_l).flags:
        parse_workload(workload, dom)  # fail before any budget is spent
        kw["workload"] = workload
    if registry.accepts(method_l, "max_model_size"):
        kw["max_model_size"] = max_model_size
    mech = registry.make_preset(method_l, epsilon, delta, **kw)
    # size guards, as a schema's: every marginal the method may count or model must fit
    if getattr(mech.selector, "reads_records", False):  # DP-MERF, DP-TabDDPM: sums over records
        if backend == "duckdb":
            raise UsageProblem(f"--method {method_l} reads whole records: use --backend memory")
    else:
        check_marginal_sizes(dom, mech.selector.supporting_cliques(dom), MAX_MARGINAL_CELLS)
    return mech


def _sample(mech, rows: int | None):
    """``rows`` records, or the model's noisy row count (guarded before allocating)."""
    if rows is None:  # a noisy N under add/remove
        try:
            n = mech.default_rows()
        except (OverflowError, ValueError):
            raise UsageProblem("the model's noisy row count is not a usable number: "
                               "give --rows (or a larger --epsilon)") from None
        check_rows_memory(n, len(mech.domain_), "the model's noisy row count")
    return mech.sample(rows)


def _read_inputs(input, location: str, schema, domain, zeros, public, backend: str, drop_unknown: bool,
                 spark_master, allow_draft_schema: bool):
    """(schema or None, domain, data, zeros, public data): everything read and checked before any
    budget is spent (a raw table against its schema, codes against the domain, zeros and the public
    table against either)."""
    sch = None
    if schema is not None:
        from ..preprocess import TableEncoder

        sch = Schema.load(schema)
        if not allow_draft_schema:
            sch.check_not_draft()
        dom = sch.max_domain()  # column names for checking the workload; sizes are fixed by fit
        data = read_table(input)
        TableEncoder(sch, drop_unknown=drop_unknown).validate(data)  # bad input: fail before any budget
    elif backend != "memory":
        dom = Domain.from_json(domain)
        data = _sql_source(backend, location, dom, drop_unknown, spark_master)  # a URL stays a string
    else:
        dom = Domain.from_json(domain)
        data = Dataset.from_frame(read_table(input), dom, drop_unknown=drop_unknown)
    if zeros is not None and sch is not None:  # raw values: checked against the schema now
        zero_list = strict_json.loads(Path(zeros).read_text())
        TableEncoder(sch, drop_unknown=drop_unknown).check_zeros(zero_list)
    else:
        zero_list = load_zeros(zeros, dom) if zeros is not None else None
    public_data = None
    if public is not None:
        if sch is not None:
            public_data = read_table(public)
            TableEncoder(sch, drop_unknown=True).validate(public_data)
        else:
            public_data = Dataset.from_frame(read_table(public), dom, drop_unknown=drop_unknown)
    return sch, dom, data, zero_list, public_data


def _rehearse_output(sch: Schema, data, output: Path, drop_unknown: bool) -> None:
    """Decode records holding every code of the schema's public encoding (1,000 rows at most: a wider
    column gets its first 999 codes and its last) and write them in OUTPUT's format to a scratch file,
    before any budget is spent: a release that cannot be decoded or stored (a missing-value text among
    typed values, say) fails here, not after the fit. Columns whose bounds or values DP steps find
    stand in with public placeholders. Reads the input's storage formats only (its column types),
    never its values."""
    import tempfile

    import numpy as np
    import pandas as pd

    from ..preprocess import TableEncoder
    from ..preprocess.codec import input_formats
    from ..schema import SchemaError

    spec = sch.to_dict()
    spec.pop("draft", None)
    for name, col in spec["columns"].items():
        if col.get("bounds") == "dp":
            atoms = [a for a in col.get("atoms", ()) if isinstance(a, (int, float))]
            col.pop("bounds")
            col.update(min=min([0, *atoms]), max=max([1, *atoms]))
        if col.get("values") == "dp":
            col.pop("max_values", None)
            # a value of the kind discovery will find (numbers where the input stores numbers), not the label
            label = col.get("other_label", "__other__")
            numbers = name in data.columns and pd.api.types.is_numeric_dtype(data[name].dtype)
            col["values"] = [(1 if label == 0 else 0) if numbers else ("y" if label == "x" else "x")]
    try:
        stand_in = Schema.from_dict(spec).public_encoding()
    except SchemaError:  # no public stand-in for this schema: the release is not rehearsed
        return
    enc = TableEncoder(stand_in, drop_unknown=drop_unknown).fit()
    enc.formats_ = input_formats(stand_in, data)
    rows = int(min(max(enc.domain.shape), 1000))
    rng = np.random.default_rng(0)
    codes = np.stack([rng.permutation(np.resize(np.arange(k), rows)) for k in enc.domain.shape], axis=1)
    codes[-1] = np.asarray(enc.domain.shape) - 1  # the last codes (missing, other) of columns past the rows
    with tempfile.TemporaryDirectory() as tmp:
        try:
            scratch = Path(tmp) / Path(output).name
            table_writer(enc.decode(codes, rng), scratch, enc.parquet_nulls())(scratch)
        except (ValueError, TypeError, OverflowError, OSError, NotImplementedError) as e:  # pyarrow's too
            raise ValueError(f"{output}: the release could not be written ({one_line(e)}); nothing was spent") from None


def _print_summary(mech, rows: int, output, report, save_model, t0: float) -> None:
    """What was written, the time and memory, what privacy was spent and what it means for a person."""
    err.print(f"wrote {rows} rows to {output}" + (f", report to {report}" if report else "")
              + (f", model to {save_model}" if save_model is not None else "")
              + f" ({time.perf_counter() - t0:.1f} s, fit {mech.fit_seconds_:.1f} s, "
                f"peak memory {_mb(peak_memory_mb())})", highlight=False, soft_wrap=True)
    pr = mech.privacy_report()
    disc = (f"delta {pr['delta_spent']:.3g} of it on DP value discovery (category values, heavy numeric "
            "values); " if pr.get("delta_spent") else "")
    err.print(f"privacy spent: epsilon {pr['epsilon_spent']:.4g} at delta {pr['delta']:g} "
              f"({disc}rho {pr['rho_spent']:.4g} zCDP, {neighbour_words(pr['neighbour'])} neighbours, "
              f"{len(pr['ledger'])} charges)", highlight=False, soft_wrap=True)
    err.print(risk_sentence(pr["risk"]), highlight=False, soft_wrap=True)
    share = _public_share(mech)
    if share:
        what = ("all of it is records of the public table" if share >= 1.0 else
                f"{share:.0%} of it is records of the public table, the rest drawn from JAM's model")
        err.print(f"release: {what} (the share chosen privately with the budget JAM's public choices left)",
                  highlight=False, soft_wrap=True)
    if getattr(mech, "public_start_", None) is not None:
        err.print("public data: AIM started from the public table's model (the budget is small)" if mech.public_start_
                  else "public data: not used (AIM starts from it only at small budgets, with a workload of "
                       "2-way or wider marginals)",
                  highlight=False, soft_wrap=True)


def _check_public(method: str, public) -> None:
    """--public given where the method needs it, and only where the method uses it."""
    flags = registry.entry("preset", method).flags
    if "public" in flags and public is None:
        raise UsageProblem(f"--method {method} needs --public PUBLIC.csv")
    uses = {"public", "public_optional"}
    if public is not None and not flags & uses:
        users = ", ".join(n for n in registry.names("preset") if registry.entry("preset", n).flags & uses)
        raise UsageProblem(f"--public is not used by --method {method} ({users} use it)")


def _sql_source(backend: str, path: str, dom: Domain, drop_unknown: bool, spark_master: str | None):
    from ..data import DuckDBSource, SparkSource

    try:
        if backend == "spark":
            return SparkSource(path, dom, master=spark_master, drop_unknown=drop_unknown)
        return DuckDBSource(path, dom, drop_unknown=drop_unknown)
    except ImportError as e:
        raise UsageProblem(str(e)) from None


#: keys of a round's log entry that stay out of the report (bulky, or timing, which grows with N)
_ROUND_PRIVATE = ("estimation_seconds",)


def _mb(v: float | None) -> str:
    return "unknown" if v is None else f"{v:.0f} MB"


def build_report(mech, method: str, rows: int) -> dict:
    """The JSON report, fit for release with the table: privacy ledger (each rho recomputable),
    measurements, rows. No timing or memory: they grow with the private N (they go to stderr)."""
    out = {
        "method": method,
        "privacy": mech.privacy_report(),
        "measurements": mech.measurements_report(),
        "rows": int(rows),
    }
    if getattr(mech, "encoder_", None) is not None:
        out["preprocessing"] = mech.encoder_.report()
    if getattr(mech, "log_", None):
        out["rounds"] = [{k: v for k, v in r.items() if k not in _ROUND_PRIVATE and not k.endswith("seconds")}
                         for r in mech.log_]
    if hasattr(mech, "error_bounds"):
        # 95% bounds on each workload marginal's L1 error of the table just written (free)
        out["error_bounds"] = [b.to_dict() for b in mech.error_bounds(0.95)]
    share = _public_share(mech)
    if share is not None:  # how much of the release is public records (JAM's blend)
        out["public_share"] = share
    if getattr(mech, "public_start_", None) is not None:
        out["public_start"] = bool(mech.public_start_)
    return out


def _public_share(mech) -> float | None:
    """JAM's share of public records in its release; None for other methods."""
    from ..presets import JAM

    return mech.public_share_ if isinstance(mech, JAM) else None



def register(app) -> None:
    app.command("synth")(synth)
