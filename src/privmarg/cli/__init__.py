"""The ``privmarg`` command line: one module per command, registered on one typer app."""

from __future__ import annotations

import sys

import typer

from . import bench, datasets, evaluate, sample, schema, synth
from .common import err  # noqa: F401  (re-exported for tests that silence it)

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Differentially private synthetic tables from noisy marginals.")


@app.callback()
def main() -> None:
    """privmarg: select, measure, generate."""


for _command in (synth, sample, schema, evaluate, bench, datasets):
    _command.register(app)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
