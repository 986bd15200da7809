"""``privmarg datasets``: list the bundled example tables; ``privmarg datasets write NAME -o DIR``
writes one to disk (registered on the main app)."""

from __future__ import annotations

from pathlib import Path

import typer

from .. import datasets
from .common import err, fail

datasets_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_show_locals=False,
                           help="Example tables bundled with privmarg.")


def _fail(msg: str) -> None:
    fail(" ".join(str(msg).split()))


@datasets_app.callback(invoke_without_command=True)
def list_cmd(ctx: typer.Context) -> None:
    """List the bundled example tables: name, kind, columns, and each table with its rows."""
    if ctx.invoked_subcommand is not None:
        return
    infos = [datasets.info(n) for n in datasets.names()]
    width = max(len(m.name) for m in infos)
    typer.echo(f"{'name':<{width}}  {'kind':<13}  columns  tables (rows)")
    for m in infos:
        tables = ", ".join(f"{t} ({r:,})" for t, r in zip(m.tables, m.rows))
        typer.echo(f"{m.name:<{width}}  {m.kind:<13}  {m.columns:>7}  {tables}")
    typer.echo("\nwrite one with `privmarg datasets write NAME --output DIR`; sources, licences and columns: "
               f"{Path(datasets.__file__).with_name('README.md')}")


@datasets_app.command("write")
def write_cmd(
    name: str = typer.Argument(..., help="dataset name (see `privmarg datasets`)"),
    output: Path = typer.Option(..., "--output", "-o", help="folder to write into (created if needed)"),
    force: bool = typer.Option(False, "--force", help="overwrite files that exist"),
) -> None:
    """Write NAME's tables as CSV and its domain.json or schema.json into the folder OUTPUT."""
    try:
        paths = datasets.write(name, output, force=force)
    except (ValueError, OSError) as e:  # unknown name, existing file (FileExistsError), disk
        _fail(str(e))
    err.print(f"wrote {', '.join(str(p) for p in paths)}", highlight=False, soft_wrap=True)


def register(app) -> None:
    """Add ``privmarg datasets`` to the ``privmarg`` typer app."""
    app.add_typer(datasets_app, name="datasets")
