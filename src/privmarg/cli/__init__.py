"""The ``privmarg`` command line: one module per command, registered on one typer app."""

from __future__ import annotations

import sys

import typer

from . import bench, datasets, evaluate, sample, schema, synth
from .common import err  # noqa: F401  (re-exported for tests that silence it)

# plain click help: typer 0.29's rich panels print flags as "--flag <bool>", as if they took a value;
# an unexpected error's traceback must never print local variables: they may hold private values
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  pretty_exceptions_show_locals=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Differentially private synthetic tables from noisy marginals.")


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"privmarg {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """privmarg: select, measure, generate."""


for _command in (synth, sample, schema, evaluate, bench, datasets):
    _command.register(app)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
