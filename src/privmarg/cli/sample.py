"""``privmarg sample``: more synthetic rows from a saved model (post-processing: no budget)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..data import DataError
from ..io import write_table
from .common import UsageProblem, err, fail, one_line


def parse_conditions(items: list[str]) -> dict[str, str]:
    """``["col=value", ...]`` → ``{"col": "value"}`` (values stay strings: the model maps them)."""
    out: dict[str, str] = {}
    for item in items:
        col, sep, value = item.partition("=")
        col = col.strip()
        if not sep or not col:
            raise UsageProblem(f"--condition {item!r}: expected COLUMN=VALUE")
        if col in out:
            raise UsageProblem(f"--condition: column {col!r} given twice")
        out[col] = value.strip()
    return out


def check_disk(output: Path, rows: int, columns: int) -> None:
    """Refuse a table that cannot fit on the output's disk (at least 2 bytes a cell: a digit and a
    separator) before sampling any of it."""
    import shutil

    folder = output.resolve().parent
    free = shutil.disk_usage(folder if folder.is_dir() else Path.cwd()).free
    need = 2 * rows * max(columns, 1)
    if need > free:
        raise UsageProblem(f"{rows:,} rows × {columns} columns take at least {need / 2**30:,.1f} GiB; "
                           f"{free / 2**30:,.1f} GiB is free at {folder}")


def sample(
    model: Path = typer.Argument(..., help="a directory written by `privmarg synth --save-model` or Synthesizer.save"),
    rows: Optional[int] = typer.Option(None, "--rows", help="synthetic rows (default: the model's own count)"),
    output: Path = typer.Option(..., "--output", "-o", help="synthetic table (.csv or .parquet)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="makes the rows reproducible"),
    condition: Optional[list[str]] = typer.Option(None, "--condition", help='COLUMN=VALUE: every row has this value (repeatable); raw values for a schema model, codes otherwise'),
    midpoint: bool = typer.Option(False, "--midpoint", help="numeric values at their bin's midpoint (schema models)"),
) -> None:
    """Sample rows from a saved model, optionally conditioned on column values (exact conditional,
    not rejection). Spends no privacy budget: the model was released by its fit."""
    try:
        if rows is not None and rows < 0:
            raise UsageProblem("--rows must be >= 0")
        if not str(output).lower().endswith((".csv", ".csv.gz", ".parquet", ".pq")):
            raise UsageProblem(f"{output}: output must end in .csv, .csv.gz or .parquet")
        conditions = parse_conditions(condition or [])
        from ..persist import load

        synth = load(model)
        if conditions:
            table = synth.sample(rows, seed=seed, conditions=conditions, midpoint=midpoint)
            write_table(table, output, synth.parquet_nulls())
            written = len(table)
        else:  # streamed in chunks: any number of rows the disk holds
            n = synth.default_rows() if rows is None else rows
            check_disk(output, n, len(synth.domain_))
            written = synth.sample_to(output, n, seed=seed, midpoint=midpoint)
    except KeyboardInterrupt:
        err.print("interrupted: nothing written")
        raise typer.Exit(130)
    except (UsageProblem, DataError, ValueError, KeyError, TypeError, OSError) as e:
        fail(one_line(e))
    given = f" with {', '.join(f'{k}={v}' for k, v in conditions.items())}" if conditions else ""
    err.print(f"wrote {written} rows{given} to {output} from {model} (no privacy budget spent: "
              "sampling a saved model is post-processing)")


def register(app) -> None:
    app.command("sample")(sample)
